"""The mAP of a model on a dataset split, computed as ``tools/eval.py`` computes it (its defaults: COCO metrics
with pycocotools, evaluation's thresholds, the model's recorded input size and resize): what ``--int8`` reports
for the float32 and the INT8 file."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Union

from yolo.data import build_dataset, create_dataloader, load_data_config
from yolo.evaluation import Evaluator, evaluate_model
from yolo.models.preprocessing import default_resize, model_input_size


def dataset_map(model, data: Union[str, Path], split: str = "val", batch_size: int = 8) -> Dict[str, float]:
    """``{"mAP50", "mAP50_95"}`` of ``model`` (a Darknet model or an :class:`yolo.backends.ExportedModel`) on
    ``split`` of the dataset ``data`` (a YAML or obj.data), on the CPU."""
    config = load_data_config(data, training=split == "train")
    dataset = build_dataset(config, split, img_size=model_input_size(model, None, "img_size"), augment=False)
    dataset.resize = default_resize(model)
    path = config.split(split)
    evaluator = Evaluator(config.names, dataset.ground_truth(), category_ids=getattr(dataset, "category_ids", None),
                          annotation_file=path if path.suffix.lower() == ".json" else None)
    loader = create_dataloader(dataset, batch_size=batch_size, shuffle=False, num_workers=0)
    metrics = evaluate_model(model, loader, evaluator, device="cpu", progress=False, desc=f"mAP {Path(data).name}")
    return {"mAP50": float(metrics["mAP50"]), "mAP50_95": float(metrics["mAP50_95"])}
