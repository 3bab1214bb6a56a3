"""The tools' flags: one name per idea across the tools (older names still work, hidden), help text for every
flag, examples in every --help, and --help answered without loading torch or OpenCV."""
import argparse
import os
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import console_scripts, detect_command, noisy_images, one_line_error, tool_parser

REPO = Path(__file__).resolve().parent.parent
TOOLS = ["anchors", "benchmark", "convert", "detect", "eval", "export", "gpu_report", "train", "tune"]
SPLIT_ALIASES = {"width": "img_size", "height": "img_size"}  # anchors: --width/--height, now --img-size H W


def visible_flags(p):
    return {s for a in p._actions if a.help != argparse.SUPPRESS for s in a.option_strings}


@pytest.mark.parametrize("tool", TOOLS)
def test_every_flag_has_help_and_the_help_has_examples(tool):
    p = tool_parser(tool)
    shown = [a for a in p._actions if a.help != argparse.SUPPRESS]
    assert [a.option_strings for a in shown if not (a.help or "").strip()] == []
    hidden = [a for a in p._actions if a.help == argparse.SUPPRESS]
    for alias in hidden:  # a hidden flag is only ever the older name of a shown one
        dest = SPLIT_ALIASES.get(alias.dest, alias.dest)
        assert any(a.dest == dest for a in shown), alias.option_strings
    examples = [line for line in (p.epilog or "").splitlines() if line.strip().startswith("python tools/")]
    assert any(f"python tools/{tool}.py" in line for line in examples)
    assert p.description and "examples:" in p.epilog


@pytest.mark.parametrize("tool", TOOLS)
def test_one_name_per_idea(tool):
    flags = visible_flags(tool_parser(tool))
    assert not flags & {"--batch", "--width", "--height", "--save-folder"}
    if tool in ("train", "detect", "eval", "export", "tune"):  # tools that make run folders
        assert {"--project", "--name"} <= flags
    if tool in ("train", "detect", "eval", "benchmark"):
        assert "--batch-size" in flags
    if tool != "convert":
        assert "--img-size" in flags


def test_older_flag_names_still_work():
    detect = importlib.import_module("yolo.cli.flags.detect")
    args = detect.parse_args(["--weights", "w.pt", "--source", "a.jpg", "--output", "elsewhere"])
    assert args.project == Path("elsewhere")
    assert detect.parse_args(["--weights", "w.pt", "--source", "a.jpg"]).project == Path("runs/detect")
    benchmark = importlib.import_module("yolo.cli.flags.benchmark")
    assert benchmark.parse_args(["--cfg", "c.cfg", "--batch", "4"]).batch_size == 4
    assert benchmark.parse_args(["--cfg", "c.cfg"]).batch_size == 8
    anchors = importlib.import_module("yolo.cli.flags.anchors")
    old = anchors.parse_args(["--data", "d.yaml", "--width", "320", "--height", "256"])
    new = anchors.parse_args(["--data", "d.yaml", "--img-size", "256", "320"])
    assert (old.width, old.height) == (new.width, new.height) == (320, 256)
    square = anchors.parse_args(["--data", "d.yaml", "--img-size", "416"])
    none = anchors.parse_args(["--data", "d.yaml"])
    assert (square.width, square.height, none.width, none.height) == (416, 416, None, None)


def test_anchors_refuses_two_sizes(capsys):
    anchors = importlib.import_module("yolo.cli.flags.anchors")
    with pytest.raises(SystemExit):
        anchors.parse_args(["--data", "d.yaml", "--img-size", "416", "--width", "320"])
    assert "give one of them" in capsys.readouterr().err


def test_export_formats_are_the_exporters():
    from yolo.settings.export import FORMATS
    from yolo.export.checked import SUFFIXES

    assert sorted(FORMATS) == sorted(SUFFIXES)


HELP_PROBE = """
import runpy, sys
sys.path.insert(0, {tools!r})
sys.argv = [{script!r}, "--help"]
try:
    runpy.run_path({script!r}, run_name="__main__")
except SystemExit as exc:
    print("exit", exc.code)
print("loaded", sorted(m for m in ("torch", "cv2", "numpy") if m in sys.modules))
"""


@pytest.mark.slow
@pytest.mark.parametrize("tool", TOOLS)
def test_help_loads_neither_torch_nor_opencv(tool):
    script = str(REPO / "tools" / f"{tool}.py")
    out = subprocess.run([sys.executable, "-c", HELP_PROBE.format(tools=str(REPO / "tools"), script=script)],
                         capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(f"usage: {tool}.py") and "examples:" in out.stdout
    assert lines[-2:] == ["exit 0", "loaded []"]


ENTRY_PROBE = """
import importlib, sys
sys.argv = [{command!r}, "--help"]
module, function = {target!r}.split(":")
try:
    getattr(importlib.import_module(module), function)()
except SystemExit as exc:
    print("exit", exc.code)
print("torch loaded", "torch" in sys.modules)
"""
SCRIPTS = sorted(p.name for p in (REPO / "tools").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.slow
@pytest.mark.parametrize("entry", [f"tools/{name}" for name in SCRIPTS] + sorted(console_scripts()))
def test_every_entry_point_answers_help_without_loading_torch(entry):
    """Each tools/NAME.py and each installed yolo-NAME command (as its console script calls it) prints its help
    and exits 0 with torch never imported (torch takes seconds to load)."""
    if entry.startswith("tools/"):
        code = HELP_PROBE.format(tools=str(REPO / "tools"), script=str(REPO / entry))
        code += 'print("torch loaded", "torch" in sys.modules)\n'
    else:
        code = ENTRY_PROBE.format(command=entry, target=console_scripts()[entry])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: ") and "exit 0" in out.stdout.splitlines(), out.stdout[-500:]
    assert "torch loaded False" in out.stdout.splitlines(), out.stdout[-300:]


WAIT_PROBE = """
import os, sys
import yolo.cli
print(os.environ.get("OMP_WAIT_POLICY"), "torch" in sys.modules)
"""


@pytest.mark.slow
@pytest.mark.parametrize("given,expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_the_tools_set_a_passive_openmp_wait_policy_before_torch_loads(given, expected):
    """Every tool imports yolo.cli first (tools/_launch.py, the yolo-NAME entry points in yolo.cli.NAME): there
    the policy is set while torch is not loaded yet, unless the user chose one."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if given:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run([sys.executable, "-c", WAIT_PROBE], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**env, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [expected, "False"]


@pytest.mark.slow
def test_cpu_threads_follow_the_affinity_mask():
    from yolo.device import cpu_threads

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity API on this platform")
    probe = "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); " \
            "from yolo.device import cpu_threads; print(cpu_threads())"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "1", out.stderr
    assert cpu_threads() == len(os.sched_getaffinity(0))


# tools that run a model (--device), show progress bars (--no-progress); every tool logs (--verbose)
SHARED_FLAGS = {"--device": ("train", "detect", "eval", "tune"),
                "--no-progress": ("train", "detect", "eval", "demo", "tune"),
                "--verbose": ("anchors", "benchmark", "convert", "demo", "detect", "eval", "export", "gpu_report",
                              "train", "tune")}


@pytest.mark.parametrize("flag, tools", SHARED_FLAGS.items(), ids=list(SHARED_FLAGS))
def test_shared_flags_have_one_name_and_one_help_across_the_tools(flag, tools):
    from yolo.cli import demo
    from yolo.settings.common import ToolOptions
    from yolo.settings.declare import declared

    (declared_help,) = [f.help for _, f in declared(ToolOptions) if f.name == flag]
    for tool in tools:
        parser = demo.build_parser() if tool == "demo" else tool_parser(tool)
        helps = [a.help for a in parser._actions if flag in a.option_strings]
        assert helps == [declared_help], (tool, flag, helps)


def test_help_examples_and_readme_name_the_files_where_download_sh_puts_them():
    """``weights/download.sh`` writes Darknet's cfgs and weights into weights/: every example names them there."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line for tool in TOOLS if tool != "gpu_report" for line in (tool_parser(tool).epilog or "").splitlines()]
    lines += readme.splitlines()
    commands = [line for line in lines if "python tools/" in line]
    official = {f"{model}.{ext}" for model in ("yolov3-tiny", "yolov3", "yolov3-spp", "yolov4", "yolov4-tiny")
                for ext in ("cfg", "weights")}
    named = {path for line in commands for path in re.findall(r"--(?:cfg|weights) (\S+)", line)
             if path.rsplit("/", 1)[-1] in official}
    assert named and all(path.startswith("weights/") for path in named), sorted(named)


def settings_classes():
    """Every settings dataclass of yolo.settings (the declarations the tools' flags come from)."""
    import dataclasses
    import pkgutil

    import yolo.settings

    modules = [importlib.import_module(f"yolo.settings.{m.name}") for m in pkgutil.iter_modules(yolo.settings.__path__)]
    from yolo.settings.declare import Flag

    return {obj for module in modules for obj in vars(module).values() if dataclasses.is_dataclass(obj)
            and isinstance(obj, type) and obj.__module__ == module.__name__ and obj is not Flag}


@pytest.mark.parametrize("tool", TOOLS)
def test_every_shown_flag_is_a_declared_setting(tool):
    """Each flag --help shows is one field of a settings dataclass: its spellings, destination, default and help
    as declared (a hand-written add_argument in a tool would have none)."""
    from yolo.settings.declare import declared

    declarations = [pair for cls in settings_classes() for pair in declared(cls) if pair[1].name is not None]
    for action in tool_parser(tool)._actions:
        if action.help == argparse.SUPPRESS or not action.option_strings or action.dest == "help":
            continue
        matches = [flag for field, flag in declarations if field.name == action.dest and flag.help == action.help
                   and flag.option_strings == tuple(action.option_strings)[:len(flag.option_strings)]]
        assert matches, (tool, action.option_strings)


@pytest.mark.parametrize("tool", ["anchors", "benchmark", "export", "gpu_report"])
def test_img_size_is_height_width_once_parsed(tool, capsys):
    module = importlib.import_module(f"yolo.cli.flags.{tool}")
    required = {"anchors": ["--data", "d.yaml"], "benchmark": ["--cfg", "c.cfg"],
                "export": ["--weights", "w.pt", "--format", "onnx"], "gpu_report": []}[tool]
    assert module.parse_args([*required, "--img-size", "256", "320"]).img_size == (256, 320)
    assert module.parse_args([*required, "--img-size", "256"]).img_size == (256, 256)
    assert module.parse_args(required).img_size is None  # the tool's default rule
    with pytest.raises(SystemExit):
        module.parse_args([*required, "--img-size", "1", "2", "3"])
    err = capsys.readouterr().err.strip()
    assert err == "error: --img-size takes one value or two (height width), got 3", err


def test_the_gpu_report_runs_square_inputs(capsys):
    from gpu_lab import cli as gpu_report  # tools/gpu_lab (tests/conftest.py puts tools/ on sys.path)

    assert gpu_report.settings_from(gpu_report.parse_args(["--img-size", "320"])).img_size == 320
    assert gpu_report.settings_from(gpu_report.parse_args([])).img_size == 416
    with pytest.raises(SystemExit):
        gpu_report.settings_from(gpu_report.parse_args(["--img-size", "320", "416"]))
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --img-size: the report runs square inputs") and "\n" not in err, err


def test_train_and_eval_choose_their_loader_workers_by_one_rule(monkeypatch):
    """``--workers`` means the same in train and eval: one help, and without the flag the training loader's rule
    (the CPUs this process may use but one, at most a batch); a count above the CPUs is cut to them."""
    import yolo.cli.eval as eval_cli
    from yolo.data.loader import default_workers

    helps = {tool: [a.help for a in tool_parser(tool)._actions if "--workers" in a.option_strings]
             for tool in ("train", "eval")}
    assert helps["train"] == helps["eval"] and len(helps["eval"]) == 1, helps
    assert tool_parser("eval").parse_args(["--cfg", "c", "--weights", "w", "--data", "d"]).workers is None
    monkeypatch.setattr(eval_cli, "cpu_threads", lambda: 8)
    assert eval_cli.usable_workers(None, 16) == 7 == default_workers(16, cpus=8)
    assert eval_cli.usable_workers(None, 2) == 2  # never more than a batch
    assert eval_cli.usable_workers(12, 16) == 8
    assert eval_cli.usable_workers(0, 16) == 0


def test_demo_heldout_count_is_bounded(capsys):
    """``--heldout 100000`` would draw 1.3 GB of images to look at: refused while the flags are parsed."""
    from helpers import one_line_error
    from yolo.cli import demo

    err = one_line_error(capsys, lambda: demo.parse_args(["--heldout", "100000"]))
    assert "--heldout" in err and "at most" not in err and "between 1 and 1000" in err
    assert demo.parse_args(["--heldout", "1000"]).heldout == 1000


# ------------------------------------------------------------------------------- full disk
# ------------------------------------------------------------------------------- writes outside the folder
@pytest.mark.slow
@pytest.mark.parametrize("name", ["../../../elsewhere", "a/b", "..", ".", "", "run\x1b[2J"])
def test_a_run_name_that_is_a_path_is_refused_by_every_tool(capsys, tiny, train_setup, name):
    from yolo.cli import eval as eval_cli, train as train_cli

    cfg, pt, _ = tiny
    output = train_setup / "out" / "D"
    source = noisy_images(train_setup / "images", 1, side=64)
    runs = {
        "detect": lambda: detect_command(tiny, source, output, "--name", name)(),
        "eval": lambda: eval_cli.cli(["--weights", str(pt), "--data", str(train_setup / "data.yaml"), "--device",
                                      "cpu", "--project", str(output), "--name", name, "--workers", "0"]),
        "train": lambda: train_cli.cli(["--cfg", str(cfg), "--data", str(train_setup / "data.yaml"), "--hyp",
                                        str(train_setup / "hyp.yaml"), "--epochs", "1", "--device", "cpu",
                                        "--project", str(output), "--name", name, "--no-progress"]),
    }
    def written():  # what is on disk but the label caches the dataset scans keep
        return sorted(str(p) for p in train_setup.parent.rglob("*") if not p.name.endswith(".cache.json"))

    from yolo.cli import demo
    runs["demo"] = lambda: demo.cli(["--name", name, "--device", "cpu"])
    before = written()
    for tool, run in runs.items():
        err = one_line_error(capsys, run)
        assert "a run name must be one folder name" in err and "\x1b" not in err, (tool, err)
    assert written() == before


# ------------------------------------------------------------------------------------------ flags
@pytest.mark.parametrize("tool, argv, flag", [
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--conf-thres", "-1"], "--conf-thres"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--iou-thres", "1.5"], "--iou-thres"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--batch-size", "0"], "--batch-size"),
    ("detect", ["--weights", "w.pt", "--source", "x.jpg", "--img-size", "-416"], "--img-size"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--conf-thres", "nan"], "--conf-thres"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--max-det", "0"], "--max-det"),
    ("eval", ["--weights", "w.pt", "--data", "d.yaml", "--workers", "-2"], "--workers"),
    ("export", ["--weights", "w.pt", "--format", "onnx", "--conf-thres", "2"], "--conf-thres"),
    ("export", ["--weights", "w.pt", "--format", "onnx", "--opset", "9"], "--opset"),
    ("benchmark", ["--cfg", "c.cfg", "--iters", "0"], "--iters"),
    ("train", ["--cfg", "c.cfg", "--data", "d.yaml", "--epochs", "0"], "--epochs"),
    ("train", ["--cfg", "c.cfg", "--data", "d.yaml", "--batch-size", "x"], "--batch-size"),
    ("convert", ["--weights", "w.pt", "--output", "o.weights", "--cutoff", "-1"], "--cutoff"),
    ("demo", ["--epochs", "-5"], "--epochs"),
])
def test_out_of_range_flags_are_one_line_errors(capsys, tool, argv, flag):
    import importlib

    module = importlib.import_module(f"yolo.cli.{tool}")
    err = one_line_error(capsys, lambda: module.parse_args(argv))
    assert f"argument {flag}:" in err, err
