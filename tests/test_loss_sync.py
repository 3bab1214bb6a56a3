"""The training loss never waits for the GPU: with the targets on the CPU, as the trainer passes them, a mini-batch's
loss and backward queue their work without a host sync (``.item()``, ``nonzero``, ``unique``, a blocking copy...),
for every head type, so that the update's fetch (yolo.engine.update_step) stays the step's only sync.

Two checks: on any machine, each head's loss runs with its maps on PyTorch's ``meta`` device, which has shapes but
no data, so that any step reading the maps' values back to the host fails there; on CUDA,
``torch.cuda.set_sync_debug_mode("error")`` turns every sync, blocking copies included, into an error (those
tests skip without a GPU). The cfgs use the options of the shipped cfgs (``truth_thresh=1``, ``bias_match=1``):
the options whose positives depend on the predictions (``truth_thresh < 1``, ``bias_match=0``, ``classfix``)
still sync (see the loss modules).
"""
import contextlib
from pathlib import Path

import pytest
import torch

from cfg_snippets import CONV8_MAXPOOL, SMALL_BACKBONE, net_section
from darknet_parity import crowded_truths
from yolo.engine.parts import RunPlan, TrainingParts
from yolo.engine.stop import StopRequest
from yolo.engine.train_state import TrainState
from yolo.engine.update_step import StepRunner
from yolo.losses.registry import HEAD_LOSSES, registered_type
from yolo.losses.targets import usable_targets
from yolo.losses.yolo_loss import YoloLoss
from yolo.models.model import Darknet

HW = (96, 96)
CLASSES = 3


def head_conv(filters: int) -> str:
    return f"[convolutional]\nfilters={filters}\nsize=1\nstride=1\npad=1\nactivation=linear\n"


CFGS = {
    "yolo": (Path(__file__).resolve().parents[1] / "configs" / "yolov3-tiny-shapes.cfg").read_text(),
    "Gaussian_yolo": net_section(*HW) + "\n" + SMALL_BACKBONE + "\n" + head_conv((CLASSES + 9) * 3) +
    f"\n[Gaussian_yolo]\nmask=0,1,2\nanchors=10,14, 23,27, 37,58\nclasses={CLASSES}\nnum=3\n",
    "region": net_section(*HW) + "\n" + SMALL_BACKBONE + "\n" + head_conv((CLASSES + 5) * 3) +
    f"\n[region]\nanchors=1.08,1.19, 3.42,4.41, 6.63,11.38\nbias_match=1\nclasses={CLASSES}\ncoords=4\nnum=3\n"
    "softmax=1\nrescore=1\n",
    "detection": net_section(*HW) + "\n" + CONV8_MAXPOOL + "\n" +
    f"[connected]\noutput={5 * 5 * (5 * 2 + CLASSES)}\nactivation=linear\n\n"
    f"[detection]\nclasses={CLASSES}\ncoords=4\nside=5\nnum=2\nrescore=1\n",
}


@contextlib.contextmanager
def syncs_raise():
    """Inside the block every CUDA host sync raises."""
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode("default")


def model_and_batch(tmp_path, name: str, device: torch.device):
    """The head type's small model on ``device`` in training mode, 4 images there and crowded CPU targets (many
    truths in one image, several in one cell, an image without truths, a box outside the input)."""
    cfg = tmp_path / f"{name}.cfg"
    cfg.write_text(CFGS[name])
    torch.manual_seed(0)
    model = Darknet(cfg).to(device).train()
    images = torch.rand(4, 3, *HW, device=device)
    _, targets = crowded_truths(0, 4, CLASSES, 20, HW)
    outside = torch.tensor([[3.0, 0.0, HW[1] + 5.0, 10.0, 8.0, 8.0]])
    return model, images, torch.cat((targets, outside))


@pytest.mark.parametrize("name", sorted(CFGS))
def test_each_head_loss_reads_nothing_back_from_the_maps_device(tmp_path, name):
    """Maps on ``meta`` (no data), targets on the CPU: every head's loss and its backward still run."""
    model, images, targets = model_and_batch(tmp_path, name, torch.device("cpu"))
    with torch.no_grad():
        shapes = [o.shape for o in model(images)]
    model.to("meta")
    keep = usable_targets(targets, images.shape[0], HW, CLASSES)
    for head, shape in zip(model.yolo_layers, shapes):
        out = torch.empty(shape, device="meta", requires_grad=True)
        box, obj, cls, count = HEAD_LOSSES[registered_type(head)](head, out, targets, keep, HW)
        (box + obj + cls).backward()
        assert out.grad.shape == shape and isinstance(count, int) and count > 0


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(CFGS))
def test_the_loss_and_its_backward_never_wait_for_the_gpu(tmp_path, cuda_device, name):
    model, images, targets = model_and_batch(tmp_path, name, cuda_device)
    criterion = YoloLoss(model)
    outputs = [o.detach().requires_grad_(True) for o in model(images)]
    criterion(outputs, targets, HW)[0].backward()  # first: the caches a mini-batch fills once
    with syncs_raise():
        loss, parts = criterion(outputs, targets, HW)
        loss.backward()
    assert torch.isfinite(loss) and parts["num_targets"] > 0


@pytest.mark.cuda
def test_a_minibatch_without_update_never_waits_for_the_gpu(tmp_path, cuda_device):
    """The step's whole mini-batch (forward, loss, backward, the losses kept on the device) when it does not end
    an update: the update's fetch is the only sync."""
    model, images, targets = model_and_batch(tmp_path, "yolo", cuda_device)
    parts = TrainingParts(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=1e-3),
                          schedule=lambda step: 1e-3, criterion=YoloLoss(model), batches=lambda epoch, first: iter(()),
                          plan=RunPlan(epochs=1, steps_per_epoch=1, accumulate=2), device=cuda_device)
    runner = StepRunner(parts, TrainState(), StopRequest())
    runner.start_epoch()
    assert not runner.run(images, targets, 0)  # first: the caches a mini-batch fills once
    with syncs_raise():
        assert not runner.run(images, targets, 0)
    assert bool(torch.isfinite(runner.update_losses[0]).all())
