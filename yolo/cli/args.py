"""What every tool's argument parsing shares: one-line errors, checked numeric flags, logging setup."""
from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import Callable, NoReturn, Optional, TypeVar

from yolo.cli.resource_errors import exit_on_closed_pipe, is_out_of_memory, out_of_memory_message
from yolo.errors import MAX_MESSAGE, ConfigError, shown
from yolo.files.write_errors import as_output_error
from yolo.output_pipe import PipeSafeHandler
# The checked numbers every tool's flags use (declared with the settings, which take them too).
from yolo.settings.values import fraction, image_side, non_negative_int, number, positive_int

T = TypeVar("T")
EXIT_INTERRUPTED = 130


def signal_exit_status(name: Optional[str]) -> Optional[int]:
    """128 + the number of the signal ``name`` (``"SIGTERM"``: 143), as a shell reports a process killed by it;
    None for anything that is not a signal's name (no stop, a stop asked from code)."""
    number = getattr(signal.Signals, name, None) if name and name.startswith("SIG") else None
    return 128 + int(number) if number is not None else None


class VisibleFormatter(logging.Formatter):
    """Log lines with control characters escaped (a path or a label line cannot drive the terminal); line
    breaks and tabs kept."""

    def format(self, record: logging.LogRecord) -> str:
        return shown(super().format(record), 10 * MAX_MESSAGE, keep="\n\t")


def setup_logging(verbose: bool = False, level: int = logging.INFO) -> None:
    """Plain ``logging`` to stderr: ``level`` (INFO) by default, DEBUG with ``verbose``; messages escaped."""
    handler = PipeSafeHandler(sys.stderr)  # a closed stderr (``2>&1 | head``): the rest is discarded
    handler.setFormatter(VisibleFormatter("%(message)s"))
    logging.basicConfig(level=logging.DEBUG if verbose else level, handlers=[handler])


def one_line(message: str) -> str:
    """``message``'s lines joined into one (a :class:`yolo.errors.DataError` lists its problems a line each):
    ``; `` between lines, a space after a line that ends in ``:`` (a heading such as ``problems:``)."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    for line in lines[1:]:
        text += (" " if text.endswith(":") else "; ") + line
    return text


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error to stderr and exit with a non-zero status."""
    # one line, whatever the message echoes: its line breaks joined, not shown as "\n" escapes
    print(f"error: {shown(one_line(message), MAX_MESSAGE)}", file=sys.stderr)
    raise SystemExit(code)


def run_tool(main: Callable[[argparse.Namespace], T], args: argparse.Namespace, reduce: str = "") -> T:
    """``main(args)`` with what any tool can meet as one line instead of a traceback: a write that failed (a
    full disk, a read-only folder), a bad setting or memory that ran out (exit status 2; ``reduce`` names the
    flags that lower the memory the tool needs), and Ctrl-C (exit status 130). A closed output pipe (``| head``)
    ends it quietly with status 141, as SIGPIPE ends a Unix tool."""
    try:
        return main(args)
    except BrokenPipeError:
        exit_on_closed_pipe()
    except (MemoryError, RuntimeError) as exc:
        if not is_out_of_memory(exc):
            raise
        fail(out_of_memory_message(exc, reduce))
    except OSError as exc:
        error = as_output_error(exc)
        if error is not None:
            fail(str(error))
        if exc.filename and exc.strerror:  # a file that cannot be opened (no permission, ...)
            fail(f"{exc.filename}: {exc.strerror}")
        raise
    except ConfigError as exc:  # a bad setting found late (a --name that is a path): one line by design
        fail(str(exc))
    except KeyboardInterrupt:
        print("interrupted (Ctrl-C): stopped", file=sys.stderr)
        raise SystemExit(EXIT_INTERRUPTED) from None


class DefaultsHelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each flag's default, except where its help already says it or there is none; the
    description and the examples (the epilog) keep their lines."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default is None or action.default is argparse.SUPPRESS:
            return text
        if action.nargs == 0 and action.const is False:  # a --no-X switch: its default is "not given", as --X's
            return f"{text} (default: False)"
        return super()._get_help_string(action)


class ToolParser(argparse.ArgumentParser):
    """``argparse`` whose errors are our one line (``error: argument --x: ...``), not usage plus error."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {Path(self.prog).name} --help)")


__all__ = ["DefaultsHelpFormatter", "ToolParser", "fail", "fraction", "image_side", "non_negative_int", "number",
           "positive_int", "run_tool", "setup_logging"]
