"""Transfer learning: Darknet/.pt weights into cfgs with other class counts, partial files, freezing."""
import pytest
import torch

from yolo.models.cfg import parse_cfg
from yolo.models.checkpoint import model_checkpoint, save_checkpoint
from yolo.engine.optimizer import build_optimizer
from yolo.engine.transfer import freeze_layers, frozen_to_eval, load_pretrained, with_num_classes
from yolo.models.model import Darknet
from yolo.models.weights import layer_tensors
from yolo.errors import WeightsError

HEAD_CONVS = [15, 22]  # the convs before yolov3-tiny's two [yolo] layers


@pytest.fixture(scope="module")
def coco_tiny():
    """yolov3-tiny with the real COCO weights, loaded by the plain Darknet reader (the reference)."""
    from conftest import asset

    cfg, weights = asset("cfg/yolov3-tiny.cfg"), asset("weights/yolov3-tiny.weights")
    return cfg, weights, Darknet(cfg).load_darknet_weights(weights)


def test_with_num_classes_rewrites_heads(assets):
    sections = with_num_classes(parse_cfg(assets("cfg/yolov3-tiny.cfg")), 5)
    model = Darknet(sections)
    assert model.num_classes == 5 and [h.num_classes for h in model.yolo_layers] == [5, 5]
    assert [model.module_list[i].conv.out_channels for i in HEAD_CONVS] == [30, 30]
    assert Darknet(assets("cfg/yolov3-tiny.cfg")).module_list[15].conv.out_channels == 255  # the source untouched


def test_darknet_weights_into_another_class_count(coco_tiny, caplog):
    cfg, weights, reference = coco_tiny
    torch.manual_seed(0)
    model = Darknet(with_num_classes(parse_cfg(cfg), 5))
    init = {k: v.clone() for k, v in model.state_dict().items()}
    report = load_pretrained(model, weights)
    assert report.source_classes == 80
    assert report.reinitialized_layers() == HEAD_CONVS
    assert sorted(k for k, _, _ in report.reinitialized) == sorted(
        f"module_list.{i}.conv.{p}" for i in HEAD_CONVS for p in ("weight", "bias"))
    assert "re-initialized layer 15" in report.summary() and "re-initialized layer 22" in report.summary()
    ref = reference.state_dict()
    for key, value in model.state_dict().items():
        layer = int(key.split(".")[1])
        if layer in HEAD_CONVS:
            assert torch.equal(value, init[key]), key  # untouched
        else:
            assert torch.equal(value, ref[key]), key  # byte-exact from the file


def test_full_weights_and_explicit_cutoff(coco_tiny):
    cfg, weights, reference = coco_tiny
    model = Darknet(cfg)
    report = load_pretrained(model, weights)
    assert report.complete and report.source_classes == 80
    for key, value in model.state_dict().items():
        assert torch.equal(value, reference.state_dict()[key])

    torch.manual_seed(1)
    model = Darknet(cfg)
    init = {k: v.clone() for k, v in model.state_dict().items()}
    report = load_pretrained(model, weights, cutoff=13)
    assert report.cutoff == 13 and report.reinitialized_layers() == [13, 14, 15, 18, 21, 22]
    for key, value in model.state_dict().items():
        expected = reference.state_dict()[key] if int(key.split(".")[1]) < 13 else init[key]
        assert torch.equal(value, expected), key


def test_partial_file_is_recognized(coco_tiny, tmp_path):
    cfg, _, reference = coco_tiny
    partial = tmp_path / "yolov3-tiny.conv.11"
    reference.save_darknet_weights(partial, cutoff=11)
    torch.manual_seed(2)
    model = Darknet(with_num_classes(parse_cfg(cfg), 3))
    init = {k: v.clone() for k, v in model.state_dict().items()}
    report = load_pretrained(model, partial)
    assert report.cutoff == 11
    convs = [i for i, _ in layer_tensors(model)]
    assert report.reinitialized_layers() == [i for i in convs if i >= 11]
    for key, value in model.state_dict().items():
        expected = reference.state_dict()[key] if int(key.split(".")[1]) < 11 else init[key]
        assert torch.equal(value, expected), key


def test_pt_checkpoint_into_another_class_count(coco_tiny, tmp_path):
    cfg, _, reference = coco_tiny
    path = save_checkpoint(model_checkpoint(reference), tmp_path / "coco.pt")
    model = Darknet(with_num_classes(parse_cfg(cfg), 7))
    report = load_pretrained(model, path)
    assert report.kind == "checkpoint" and report.source_classes == 80
    assert report.reinitialized_layers() == HEAD_CONVS and not report.missing
    assert torch.equal(model.module_list[13].conv.weight, reference.module_list[13].conv.weight)


def test_weights_that_fit_nothing_are_refused(coco_tiny, tmp_path):
    cfg, weights, _ = coco_tiny
    broken = tmp_path / "broken.weights"
    data = weights.read_bytes()
    broken.write_bytes(data[: len(data) - 4 * 1001])  # not a layer boundary, not a class count
    with pytest.raises(WeightsError):
        load_pretrained(Darknet(cfg), broken)


def test_freeze_keeps_the_first_layers_fixed(assets):
    torch.manual_seed(0)
    model = Darknet(with_num_classes(parse_cfg(assets("cfg/yolov3-tiny.cfg")), 2))
    names = freeze_layers(model, 6)
    assert names and all(int(n.split(".")[1]) < 6 for n in names)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = build_optimizer(model, lr=0.1, momentum=0.9, decay=0.0005)
    assert all(p.requires_grad for g in opt.param_groups for p in g["params"])
    model.train()
    frozen_to_eval(model, 6)
    outputs = model(torch.rand(2, 3, 64, 64))
    sum(o.square().mean() for o in outputs).backward()
    opt.step()
    for key, value in model.state_dict().items():
        layer = int(key.split(".")[1])
        if layer < 6:
            assert torch.equal(value, before[key]), key  # weights and BatchNorm statistics
    changed = [k for k, v in model.state_dict().items() if int(k.split(".")[1]) >= 6 and not torch.equal(v, before[k])]
    assert any("conv.weight" in k for k in changed) and any("running_mean" in k for k in changed)
    with pytest.raises(ValueError):
        freeze_layers(model, 100)
