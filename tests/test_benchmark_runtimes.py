"""tools/benchmark.py --runtimes: one model in PyTorch, onnxruntime, OpenVINO float32 and INT8, timed in one process,
each row with its largest output difference to PyTorch (and with --data its mAP50); an exported file is timed alone.
Figures are not asserted (tests never assert on time); the differences are."""
import math

import pytest

from helpers import in_fresh_process, run_export_cli
from training_helpers import write_one_head_model, write_one_head_training
from yolo.cli import benchmark as benchmark_cli

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytestmark = pytest.mark.usefixtures("private_cache")

QUICK = ["--img-size", "64", "--iters", "2", "--warmup", "0", "--batch-size", "2", "--threads", "1"]


def bench(argv):
    return benchmark_cli.main(benchmark_cli.parse_args([str(a) for a in argv]))


BENCH_IN_CHILD = """
import dataclasses, json, sys
from yolo.cli import benchmark
rows = benchmark.main(benchmark.parse_args(sys.argv[1:]))
print(json.dumps([dataclasses.asdict(row) for row in rows]))
"""


@pytest.mark.slow
def test_every_installed_runtime_gets_a_row_with_its_difference_to_pytorch(tmp_path):
    cfg, pt, _ = write_one_head_model(tmp_path)
    # in its own process: NNCF's INT8 run must not share the test process (tests/helpers.py in_fresh_process)
    rows, printed = in_fresh_process(BENCH_IN_CHILD, "--weights", pt, "--runtimes", "--calib-images", "2", *QUICK)
    names = [r["name"] for r in rows]
    assert names[:2] == ["pytorch", "onnxruntime"]
    try:
        import nncf  # noqa: F401
        import openvino  # noqa: F401
        assert names[2:] == ["openvino", "openvino-int8"]
    except ImportError:
        assert names[2:] == []
    for row in rows:
        assert row["latency_ms"] > 0 and row["throughput"] > 0 and row["map50"] is None
        assert row["max_difference"] < (1e-4 if row["name"] != "openvino-int8" else 1.0)
        assert math.isfinite(row["max_difference"])
    assert "vs torch" in printed and "max diff" in printed and "load average" in printed


@pytest.mark.slow
def test_with_data_each_row_has_its_map_and_an_export_is_timed_alone(tmp_path, capsys):
    folder = write_one_head_training(tmp_path)
    _, pt, _ = write_one_head_model(tmp_path)
    rows = bench(["--weights", pt, "--runtimes", "pytorch", "onnxruntime", "--data", folder / "data.yaml", *QUICK])
    assert [r.name for r in rows] == ["pytorch", "onnxruntime"]
    assert all(0.0 <= r.map50 <= 1.0 for r in rows)
    assert rows[0].map50 == pytest.approx(rows[1].map50, abs=0.002)
    onnx_file = tmp_path / "tiny.onnx"
    run_export_cli(["--weights", pt, "--format", "onnx", "--img-size", 64, "--output", onnx_file, "--no-verify"])
    alone = bench(["--weights", onnx_file, "--runtimes", *QUICK])
    assert [(r.name, r.max_difference) for r in alone] == [("onnxruntime", None)]
