"""Fine-tuning the real yolov3-tiny COCO weights on coco128 keeps its mAP@0.5 (within 3 points).

If loading, augmentation or the loss scale were wrong, a few updates at Darknet's own learning rate would
wreck a converged model. To stay short on a 2-core CPU the "epoch" is cut to 6 updates of 8 images (48 of
the 128 images) at 320x320, with multi-scale and the cfg's augmentation on, learning rate 0.001 from the
first update (no burn-in); and the mAPs are measured on the first 64 images. Both come from the same
evaluator (pycocotools, conf 0.001, NMS 0.6).
"""
from pathlib import Path

import pytest
from torch.utils.data import DataLoader

from yolo.data import build_dataset, collate_fn, load_data_config
from yolo.engine import TrainOptions, Trainer
from yolo.evaluation import Evaluator, evaluate_model
from yolo.models.model import load_model

REPO = Path(__file__).resolve().parent.parent
IMG = 320


pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.slow
def test_finetune_yolov3_tiny_on_coco128_keeps_map(assets, tmp_path):
    cfg, weights = assets("cfg/yolov3-tiny.cfg"), assets("weights/yolov3-tiny.weights")
    images = sorted(assets("coco128/images/train2017").glob("*.jpg"))
    (tmp_path / "val64.txt").write_text("\n".join(str(p) for p in images[:64]) + "\n")
    data_yaml = tmp_path / "coco128-val64.yaml"
    text = (REPO / "configs" / "coco128.yaml").read_text()
    data_yaml.write_text(text.replace("val: images/train2017", f"val: {tmp_path / 'val64.txt'}"))
    data = load_data_config(data_yaml)
    assert len(data.names) == 80 and data.val.name == "val64.txt"

    model = load_model(cfg, weights).eval()
    val = build_dataset(data, "val", img_size=IMG, augment=False)
    evaluator = Evaluator(data.names, val.ground_truth(), use_pycocotools=True)
    loader = DataLoader(val, batch_size=8, collate_fn=collate_fn)
    before = evaluate_model(model, loader, evaluator, conf_thres=0.001, iou_thres=0.6, progress=False)["mAP50"]
    assert before > 0.2  # the real weights, read correctly (about 0.25 at 320)

    options = TrainOptions(cfg=str(cfg), data=str(data_yaml), weights=str(weights), img_size=IMG, batch_size=8,
                           epochs=1, device="cpu", project=str(tmp_path), progress=False,
                           hyp={"workers": 0, "tensorboard": False, "plots": False, "ema": False, "burn_in": 0,
                                "learning_rate": 0.001, "max_steps_per_epoch": 6,
                                # our multi-scale, named: Darknet's rule for the cfg's random=1 would run the
                                # first 10 updates at its largest size (480 px here, 2.25x the pixels of 320)
                                "multi_scale": True})
    trainer = Trainer.from_options(options)
    result = trainer.fit()
    assert result.global_step == 6 and trainer.parts.batches.multi_scale is not None
    after = result.metrics["mAP50"]
    moved = max((a - b).abs().max().item() for a, b in zip(trainer.parts.model.state_dict().values(),
                                                            model.state_dict().values()))
    assert moved > 1e-4  # the weights did change
    print(f"coco128 mAP@0.5 before {before:.4f}, after {after:.4f}")
    assert abs(after - before) <= 0.03, (before, after)
