"""One model, one preprocessing: a training checkpoint records how its inputs were made (resize, size, pipeline),
and the trainer's own validation, tools/eval.py and tools/detect.py all use that record unless told otherwise, so
the mAP training reports for best.pt is the mAP eval.py measures on it."""
import json
import logging
from pathlib import Path

import pytest

from training_helpers import FAST, shapes_training
from yolo.cli import detect as detect_cli
from yolo.cli import eval as eval_cli
from yolo.engine import TrainOptions, Trainer
from yolo.inference.detector import Detector
from yolo.models.checkpoint import load_checkpoint_file, save_checkpoint
from yolo.models.model import load_model
from yolo.models.preprocessing import training_preprocessing
from yolo.errors import WeightsError


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    # validation on the training images: the short run below then scores well above zero
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=24, num_val=8, seed=7, val="images/train",
                           data_name="overfit.yaml")


pytestmark = pytest.mark.usefixtures("private_cache")


def train(shapes, tmp_path, name, epochs, augment, **hyp):
    options = TrainOptions(cfg=str(shapes["cfg"]), data=str(shapes["data"]), device="cpu", project=str(tmp_path),
                           name=name, progress=False, img_size=64, epochs=epochs,
                           hyp={**FAST, "conf_thres": 0.001, "batch": 8, "subdivisions": 1, "learning_rate": 0.02,
                                "burn_in": 10, "steps": [0.8], "scales": [0.1], "bn_momentum": 0.1,
                                "augment": augment, **hyp})
    trainer = Trainer.from_options(options)
    trainer.result = trainer.fit()
    return trainer


def evaluate(weights, data, tmp_path, *extra):
    return eval_cli.main(eval_cli.parse_args(["--weights", str(weights), "--data", str(data), "--device", "cpu",
                                              "--workers", "0", "--no-plots", "--no-progress",
                                              "--project", str(tmp_path / "eval"), *extra]))


@pytest.mark.slow
def test_training_and_eval_agree_on_best_pt(shapes, tmp_path, capsys):
    """The affine pipeline letterboxes its crops; the cfg (no letter_box) would stretch. Trained at 64 on a cfg of
    96: eval.py without --resize/--img-size must measure best.pt exactly as the training did."""
    trainer = train(shapes, tmp_path, "affine", epochs=24, augment={"pipeline": "affine", "hue": 0.0},
                    eval_interval=8)
    assert trainer.parts.val_set.resize == "letterbox"
    best = load_checkpoint_file(trainer.result.best)
    assert best["preprocessing"] == {"resize": "letterbox", "resample": "darknet", "decode": "opencv",
                                     "img_size": [64, 64],
                                     "pipeline": "affine"}
    trained = best["metrics"]  # what the training measured on this very model
    assert trained["mAP50"] > 0.2, trained  # a model that finds shapes: the comparison below means something

    measured = evaluate(trainer.result.best, shapes["data"], tmp_path)
    assert measured["mAP50"] == pytest.approx(trained["mAP50"], abs=1e-4)
    assert measured["mAP50_95"] == pytest.approx(trained["mAP50_95"], abs=1e-4)
    # what eval.py measured before: the cfg's stretch at the cfg's size, on the same weights
    stretched = evaluate(trainer.result.best, shapes["data"], tmp_path, "--resize", "stretch", "--img-size", "96")
    assert abs(stretched["mAP50_95"] - trained["mAP50_95"]) > 1e-3

    # detect's defaults are the record too; flags still win
    detector = Detector(None, trainer.result.best, device="cpu")
    assert (detector.img_size, detector.resize, detector.resample) == ((64, 64), "letterbox", "darknet")
    assert detector.names == list(trainer.parts.data.names)  # a model trained here carries its names
    detector = Detector(None, trainer.result.best, device="cpu", img_size=96, resize="stretch")
    assert (detector.img_size, detector.resize) == ((96, 96), "stretch")

    # tools/detect.py: each image's line says the input it was resized to; the names are the checkpoint's
    image = sorted((shapes["root"] / "images" / "train").glob("*"))[0]
    capsys.readouterr()
    detect_cli.main(detect_cli.parse_args(["--weights", str(trainer.result.best), "--source", str(image),
                                           "--device", "cpu", "--conf-thres", "0.05", "--nosave"]))
    printed = capsys.readouterr()
    assert "-> 64x64 letterbox, " in printed.out and "class numbers" not in printed.err
    assert any(name in printed.out for name in trainer.parts.data.names)


@pytest.mark.slow
def test_darknet_pipeline_validates_as_the_cfg_says(shapes, tmp_path, caplog):
    """Darknet's pipeline stretches each crop to the input unless the cfg sets letter_box=1 (as Darknet's detector
    map then does): validation and the record follow."""
    with caplog.at_level(logging.WARNING, logger="yolo.engine.trainer"):
        trainer = train(shapes, tmp_path, "darknet", epochs=1, augment={})
    # burn_in 10 outlasts this run's 3 updates: said once, beside the warning for steps that never apply
    assert caplog.text.count("burn_in=10 updates is longer than this run's 3 updates") == 1
    assert (trainer.parts.val_set.resize, trainer.parts.val_set.resample) == ("stretch", "darknet")
    assert load_checkpoint_file(trainer.result.last)["preprocessing"] == {
        "resize": "stretch", "resample": "darknet", "decode": "opencv", "img_size": [64, 64], "pipeline": "darknet"}
    assert training_preprocessing({"pipeline": "darknet", "letter_box": 1.0}, (64, 96))["resize"] == "letterbox"
    assert training_preprocessing({"pipeline": "darknet_opencv", "letter_box": 0.0}, (64, 96)) == \
        {"resize": "stretch", "resample": "darknet", "decode": "opencv", "img_size": [64, 96],
         "pipeline": "darknet_opencv"}

    # a model without a record (a converted .pt, Darknet .weights) follows its cfg; a broken record is refused
    ckpt = load_checkpoint_file(trainer.result.last)
    plain = {k: v for k, v in ckpt.items() if k not in ("preprocessing", "train")}
    save_checkpoint(plain, tmp_path / "plain.pt")
    assert load_model(weights=tmp_path / "plain.pt").preprocessing is None
    detector = Detector(None, tmp_path / "plain.pt", device="cpu")
    assert (detector.img_size, detector.resize) == ((96, 96), "stretch")  # TWO_HEAD_CFG's [net] width/height
    assert detector.resample == "darknet"  # Darknet's own resize, as its detector test
    # a checkpoint written before the record named its resampler was validated with OpenCV's resize: it keeps it
    old = {k: v for k, v in ckpt["preprocessing"].items() if k != "resample"}
    save_checkpoint({**ckpt, "preprocessing": old}, tmp_path / "old.pt")
    assert Detector(None, tmp_path / "old.pt", device="cpu").resample == "opencv"
    assert Detector(None, tmp_path / "old.pt", device="cpu", resample="darknet").resample == "darknet"
    measured = evaluate(tmp_path / "old.pt", shapes["data"], tmp_path, "--conf-thres", "0.001")
    settings = json.loads((Path(measured["save_dir"]) / "metrics.json").read_text())["settings"]
    assert settings["resample"] == "opencv"
    save_checkpoint({**plain, "preprocessing": {"resize": "squash"}}, tmp_path / "broken.pt")
    with pytest.raises(WeightsError, match="broken.pt: malformed 'preprocessing'"):
        load_model(weights=tmp_path / "broken.pt")
    save_checkpoint({**plain, "preprocessing": {**old, "resample": "cubic"}}, tmp_path / "broken2.pt")
    with pytest.raises(WeightsError, match="broken2.pt: malformed 'preprocessing'"):
        load_model(weights=tmp_path / "broken2.pt")
