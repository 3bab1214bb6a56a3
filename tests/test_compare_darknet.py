"""tools/compare_darknet.py refuses bad inputs in one line before any run."""
from __future__ import annotations

from conftest import asset
from darknet_ref import side_by_side
from helpers import one_line_error


# ---------------------------------------------------------------------------------------- compare_darknet
def test_compare_darknet_refuses_bad_inputs_before_any_run(tmp_path, capsys):
    cfg, images = asset("cfg/yolov3-tiny.cfg"), asset("coco128/images/train2017")
    names = tmp_path / "coco.names"
    names.write_text("".join(f"class{i}\n" for i in range(80)))
    (tmp_path / "empty").mkdir()
    out = tmp_path / "out"
    cases = [
        (["--cfg", tmp_path / "nope.cfg"], f"{tmp_path / 'nope.cfg'}: cfg file not found"),
        (["--names", tmp_path / "nope.names"], f"{tmp_path / 'nope.names'}: names file not found"),
        (["--images", tmp_path / "empty"], f"--images {tmp_path / 'empty'}: no images in this folder (looked for "
                                           ".bmp, .jpeg, .jpg, .png, .tif, .tiff, .webp)"),
        (["--lr", "-1"], "argument --lr: -1 is out of range: the learning rate must be at least 0 (see "
                         "compare_darknet.py --help)"),
        (["--img-size", "33"], "--img-size: 33x33 must be a multiple of the network stride 32 (e.g. 32x32)"),
    ]
    for flags, expected in cases:
        argv = ["--cfg", cfg, "--images", images, "--names", names, "--out", out, *flags]
        err = one_line_error(capsys, lambda: side_by_side.main(list(map(str, argv))))
        assert err == f"error: {expected}"
    assert not out.exists()
