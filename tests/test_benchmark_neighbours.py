"""tools/benchmark.py --neighbours: the busy processes it starts run during the timing and are always ended after it
(on return, on an error, with a training run's children); figures are reported, never asserted on."""
import os
from pathlib import Path

import pytest

from conftest import asset
from helpers import tool_parser
from yolo.benchmark.neighbours import load_text, neighbour_commands, neighbours


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def session_members(sid: int):
    """The processes of session ``sid`` (a neighbour's children stay in its session)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                members.append(int(entry))
    return members


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


def test_busy_neighbours_run_during_the_block_and_are_ended_after_it():
    with neighbours("2", settle_s=0.2) as pids:
        assert len(pids) == 2 and all(alive(p) for p in pids)
    assert not any(alive(p) for p in pids)


def test_neighbours_are_ended_when_the_block_raises():
    with pytest.raises(KeyboardInterrupt):
        with neighbours("1", settle_s=0.2) as pids:
            assert alive(pids[0])
            raise KeyboardInterrupt
    assert not alive(pids[0])


def test_no_neighbours_starts_nothing():
    for spec in (None, "0"):
        with neighbours(spec) as pids:
            assert pids == []


def test_the_training_neighbour_is_a_cpu_training_run_on_the_shapes_data(tmp_path):
    (command,) = neighbour_commands("train", tmp_path)
    assert command[1].endswith(os.path.join("tools", "train.py"))
    assert command[command.index("--device") + 1] == "cpu"
    assert command[command.index("--data") + 1].endswith("shapes.yaml")
    assert command[command.index("--project") + 1] == str(tmp_path)  # its run is written in a folder of ours


@pytest.mark.slow
def test_the_training_neighbour_and_its_children_are_ended(tmp_path, monkeypatch):
    monkeypatch.setenv("YOLO_DATASETS", str(tmp_path))  # the shapes data it generates goes there
    with neighbours("train", settle_s=4) as pids:
        assert alive(pids[0])
    assert session_members(pids[0]) == []


def test_the_flag_takes_a_count_or_train_and_refuses_anything_else(capsys):
    parser = tool_parser("benchmark")
    assert parser.parse_args(["--neighbours", "2"]).neighbours == "2"
    assert parser.parse_args(["--neighbours", "train"]).neighbours == "train"
    for bad in ("-1", "two", "1000"):
        with pytest.raises(SystemExit):
            parser.parse_args(["--neighbours", bad])
        assert "--neighbours" in capsys.readouterr().err


def test_load_text_names_the_load_average():
    assert load_text().startswith("load average ")


@pytest.mark.slow
def test_benchmark_runs_beside_neighbours_and_ends_them(capsys):
    from yolo.cli.benchmark import main, parse_args

    before = set(os.listdir("/proc"))
    main(parse_args(["--cfg", str(asset("cfg/yolov3-tiny.cfg")), "--img-size", "96", "--iters", "1", "--warmup", "0",
                     "--batch-size", "1", "--no-gpu", "--threads", "1", "--neighbours", "2"]))
    out = capsys.readouterr().out
    assert "beside 2 busy-loop process(es)" in out and "ratios ours/OpenCV" in out and "load average" in out
    pids = [int(p) for p in out.split("(pid ")[1].split(")")[0].split(", ")]
    assert len(pids) == 2 and not any(alive(p) for p in pids)
    assert not [p for p in set(os.listdir("/proc")) - before if p.isdigit() and alive(int(p))
                and "while True" in Path(f"/proc/{p}/cmdline").read_text(errors="replace")]
