"""Evaluation's detections are the Detector's: for the same input batch and the same settings, ``evaluate_model``
hands the Evaluator exactly the boxes, scores and labels that ``Detector.postprocess`` returns (real yolov3-tiny,
coco128 images through the evaluation's own data pipeline, letterboxed and stretched)."""
import pytest
import torch

from conftest import asset
from yolo.data import create_dataloader
from yolo.data.collate import images_to_float
from yolo.data.dataset import YoloDataset
from yolo.evaluation import Evaluator, evaluate_model
from yolo.inference.detector import Detector

SIZE = 416
BATCH = 4
COCO = dict(conf_thres=0.001, iou_thres=0.6, multi_label=True, max_det=300)  # evaluation's settings


class RecordingEvaluator(Evaluator):
    """An Evaluator that keeps every detection dict it is given."""

    def reset(self) -> None:
        super().reset()
        self.given = {}

    def process(self, image_ids, detections) -> None:
        super().process(image_ids, detections)
        self.given.update(zip(image_ids, detections))


@pytest.mark.slow
@pytest.mark.parametrize("resize", ["letterbox", "stretch"])
def test_evaluation_detections_equal_the_detectors(tmp_path, resize):
    names = [n.strip() for n in asset("cfg/coco.names").read_text().splitlines() if n.strip()]
    files = sorted(asset("coco128/images/train2017").glob("*.jpg"))[:BATCH]
    listing = tmp_path / "val.txt"
    listing.write_text("".join(f"{f}\n" for f in files))
    dataset = YoloDataset(listing, names, SIZE, augment=False, cache=False)
    dataset.resize = resize
    loader = create_dataloader(dataset, batch_size=BATCH, shuffle=False)
    # The plain eval model (no inference preparation), one forward pass for the batch: both sides then see the
    # same predictions, and only the post-processing is compared.
    detector = Detector(asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights"), device="cpu",
                        img_size=SIZE, fast=False, max_batch=BATCH, **COCO)

    evaluator = RecordingEvaluator(names, dataset.ground_truth())
    evaluate_model(detector.model, loader, evaluator, progress=False, **COCO)

    (images, _targets, infos), = list(loader)
    with torch.inference_mode():
        expected = detector.postprocess(detector.forward(images_to_float(images)),
                                        [info["letterbox"] for info in infos], [info["orig_shape"] for info in infos])
    assert [info["image_id"] for info in infos] == list(evaluator.given)
    found = 0
    for info, want in zip(infos, expected):
        got = evaluator.given[info["image_id"]]
        assert torch.equal(got["labels"], want["labels"]), info["path"]
        assert torch.equal(got["scores"], want["scores"]), info["path"]
        assert torch.equal(got["boxes"], want["boxes"]), info["path"]
        found += len(want["scores"])
    # Evaluation's settings are in force: many low-score boxes, some boxes under more than one class.
    assert found > 100 * BATCH
    assert any(len(torch.unique(d["boxes"], dim=0)) < len(d["boxes"]) for d in expected)
