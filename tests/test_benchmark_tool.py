"""The benchmark tool (tools/benchmark.py, yolo.cli.benchmark): each bad input is one line, and a head OpenCV DNN
lacks is timed with ours alone."""
from __future__ import annotations


from cfg_snippets import GAUSSIAN_CFG, RATE_CFG
from conftest import asset
from helpers import model_files, one_line_error
from yolo.cli import benchmark as benchmark_cli


def test_benchmark_times_ours_alone_where_opencv_lacks_the_head(tmp_path, capsys):
    cfg, weights = model_files(tmp_path, GAUSSIAN_CFG, "gauss")
    figures = benchmark_cli.main(benchmark_cli.parse_args(
        ["--cfg", str(cfg), "--weights", str(weights), "--img-size", "64", "--iters", "1", "--warmup", "0",
         "--no-gpu", "--threads", "1"]))
    assert "OpenCV DNN has no [Gaussian_yolo] layer: timing ours only" in capsys.readouterr().out
    assert "ours_latency_ms" in figures and not any(key.startswith("opencv") for key in figures)


# ---------------------------------------------------------------------------------------------- benchmark
def bad_filters_cfg(tmp_path):
    """yolov3-tiny.cfg with its first head conv's ``filters=abc`` (line 127)."""
    path = tmp_path / "bad.cfg"
    lines = asset("cfg/yolov3-tiny.cfg").read_text().splitlines()
    assert lines[126] == "filters=255"
    lines[126] = "filters=abc"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_benchmark_names_each_bad_input_in_one_line(tmp_path, capsys):
    cfg, classifier = asset("cfg/yolov3-tiny.cfg"), tmp_path / "no_head.cfg"
    classifier.write_text(RATE_CFG)  # one convolution, no detection head (as a classifier cfg)
    cases = [
        (["--cfg", cfg, "--image", tmp_path / "nope.jpg"],
         f"{tmp_path / 'nope.jpg'}: cannot read file (No such file or directory)"),
        (["--cfg", cfg, "--image", cfg], f"{cfg}: not a readable image (corrupt or unsupported format)"),
        (["--cfg", cfg, "--weights", cfg],
         f"{cfg}: not a Darknet weights file (header version 1952804443.539167325.1953719636 is implausible)"),
        (["--cfg", bad_filters_cfg(tmp_path)],
         f"{tmp_path / 'bad.cfg'}:127: [convolutional] (layer 15): option 'filters=abc' is not an integer"),
        (["--cfg", classifier], f"{classifier}: not a detector on 3-channel images (channels=3, heads=0)"),
    ]
    for flags, expected in cases:
        argv = [*map(str, flags), "--img-size", "64", "--iters", "1", "--warmup", "0", "--no-opencv", "--no-gpu",
                "--threads", "1"]
        err = one_line_error(capsys, lambda: benchmark_cli.main(benchmark_cli.parse_args(argv)))
        assert err == f"error: {expected}"
