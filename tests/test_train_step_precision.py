"""How the training step runs (yolo.engine.step_precision) and what the trainer records of it, on the CPU.

The CUDA side (fp16 autocast, channels_last, TF32, compile on a GPU) is in tests/test_cuda_training.py; here:
the settings' resolution, the ``--tf32``/``--compile``/``--cache-images`` flags and their record in ``opt.yaml``,
the compile fallback and the image cache (each run equals a plain run bit for bit), the logged running losses
against a plain-Python account of every mini-batch's loss, the AMP update's single-sync path against torch's
own ``GradScaler.step``, and channels_last forwards equal to NCHW ones for cfgs of every layer family.
"""
import logging
import math

import pytest
import torch
import torch.nn as nn
import yaml

from helpers import cpu_step_runner
from training_helpers import read_results, run, shapes_training, train_state
from yolo.cli.train import parse_args
from yolo.engine.step_precision import CompiledForward, StepPrecision, apply_tf32, step_precision
from yolo.models.cfg import parse_cfg
from yolo.models.model import Darknet

pytestmark = pytest.mark.usefixtures("private_cache", "keep_tf32")


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """A tiny generated shapes dataset (16 train, 4 val images) and the two-head test cfg."""
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=16, num_val=4, seed=5)


@pytest.fixture(scope="module")
def plain_run(shapes, tmp_path_factory):
    """One epoch (2 updates of 2 mini-batches) with the default settings."""
    return run(shapes, tmp_path_factory.mktemp("plain"), epochs=1).result.run_dir


# ------------------------------------------------------------------------------------------ settings
def test_cpu_steps_stay_float32_nchw_and_cuda_defaults_to_amp_channels_last():
    cpu = step_precision(torch.device("cpu"), {"amp": True})
    assert (cpu.amp, cpu.channels_last, cpu.tf32, cpu.compile) == (False, False, False, False)
    assert cpu.memory_format == torch.contiguous_format and cpu.describe() == "float32, NCHW"
    cuda = step_precision(torch.device("cuda"), {"amp": True})  # only the device's type is read
    assert (cuda.amp, cuda.channels_last, cuda.tf32) == (True, True, False)
    assert cuda.describe() == "fp16 autocast, channels_last, TF32 off"
    fp32 = step_precision(torch.device("cuda"), {"amp": False, "tf32": True})
    assert (fp32.amp, fp32.channels_last, fp32.tf32) == (False, False, True)
    nhwc = step_precision(torch.device("cuda"), {"amp": False, "channels_last": True})
    assert nhwc.channels_last and not nhwc.amp
    batch = torch.randint(0, 256, (2, 3, 8, 8), dtype=torch.uint8)  # as the training loader gives it
    for precision in (cpu, nhwc):
        images = precision.images_to(batch, torch.device("cpu"))
        assert images.dtype == torch.float32 and torch.equal(images, batch.double().div(255).float())
        assert images.is_contiguous(memory_format=precision.memory_format)


def test_tf32_and_compile_flags_parse():
    base = ["--cfg", "c.cfg", "--data", "d.yaml"]
    assert (parse_args(base).tf32, parse_args(base).compile) == (None, None)
    assert parse_args(base + ["--tf32"]).tf32 is True and parse_args(base + ["--no-tf32"]).tf32 is False
    assert parse_args(base + ["--compile"]).compile is True
    assert parse_args(base + ["--no-compile"]).compile is False
    assert parse_args(base).cache_images is None and parse_args(base + ["--cache-images"]).cache_images is True


def test_apply_tf32_sets_both_backends():
    apply_tf32(True)
    assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    apply_tf32(False)
    assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32


@pytest.mark.slow
def test_tf32_is_applied_at_start_and_recorded(shapes, tmp_path, plain_run):
    plain_opt = yaml.safe_load((plain_run / "opt.yaml").read_text())
    plain_hyp = yaml.safe_load((plain_run / "hyp.yaml").read_text())
    assert plain_opt["tf32"] is False and plain_hyp["tf32"] is False  # the default, written out
    assert plain_opt["compile"] is False and plain_hyp["channels_last"] is None

    seen = []
    hooks = {"before_train": lambda t: seen.append((torch.backends.cuda.matmul.allow_tf32,
                                                    torch.backends.cudnn.allow_tf32))}
    apply_tf32(False)
    trainer = run(shapes, tmp_path, name="tf32", epochs=1, tf32=True, hooks=hooks)
    assert seen == [(True, True)]
    assert yaml.safe_load((trainer.result.run_dir / "opt.yaml").read_text())["tf32"] is True
    assert yaml.safe_load((trainer.result.run_dir / "hyp.yaml").read_text())["tf32"] is True

    # the flag wins over the hyperparameter file
    seen.clear()
    apply_tf32(True)
    trainer = run(shapes, tmp_path, name="flag", epochs=1, tf32=False, hooks=hooks, hyp={"tf32": True})
    assert seen == [(False, False)]
    assert yaml.safe_load((trainer.result.run_dir / "opt.yaml").read_text())["tf32"] is False


# ------------------------------------------------------------------------------------------ compile
def test_compiled_forward_falls_back_with_one_warning(caplog):
    model = nn.Linear(3, 2)
    x = torch.rand(4, 3)

    def refuse(module):
        raise RuntimeError("no compiler here\nsecond line")

    with caplog.at_level(logging.WARNING, logger="yolo.engine.step_precision"):
        forward = CompiledForward(model, compile_fn=refuse)
    assert not forward.compiled and torch.equal(forward(x), model(x))
    assert [r.getMessage() for r in caplog.records] == [
        "torch.compile failed (RuntimeError: no compiler here): training without it"]

    calls = []

    def lazy_failure(module):
        def compiled(*args):
            calls.append(1)
            raise RuntimeError("inductor: C++ compile error")
        return compiled

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="yolo.engine.step_precision"):
        forward = CompiledForward(model, compile_fn=lazy_failure)
        assert forward.compiled
        assert torch.equal(forward(x), model(x)) and torch.equal(forward(x), model(x))
    assert calls == [1] and not forward.compiled and len(caplog.records) == 1

    working = CompiledForward(model, compile_fn=lambda m: (lambda *a: m(*a) * 2))
    assert torch.equal(working(x), model(x) * 2) and working.compiled


@pytest.mark.slow
def test_a_run_whose_compile_fails_trains_exactly_as_a_plain_run(shapes, tmp_path, plain_run, monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise RuntimeError("torch.compile is not available")

    monkeypatch.setattr(torch, "compile", refuse)
    with caplog.at_level(logging.WARNING, logger="yolo.engine.step_precision"):
        trainer = run(shapes, tmp_path, name="compiled", epochs=1, compile=True)
    assert sum("torch.compile failed" in r.getMessage() for r in caplog.records) == 1
    assert yaml.safe_load((trainer.result.run_dir / "opt.yaml").read_text())["compile"] is True
    a, b = train_state(trainer.result.run_dir), train_state(plain_run)
    assert a["train"]["global_step"] == b["train"]["global_step"] == 2
    for key, value in b["train"]["model"].items():
        assert torch.equal(a["train"]["model"][key], value), key
    assert read_results(trainer.result.run_dir)[0]["loss"] == read_results(plain_run)[0]["loss"]


@pytest.mark.slow
def test_cache_images_trains_exactly_as_reading_from_disk(shapes, tmp_path, plain_run):
    cached = []
    trainer = run(shapes, tmp_path, name="cached", epochs=1, cache_images=True,
                  hooks={"before_train": lambda t: cached.append(t.parts.train_set.images is not None)})
    assert cached == [True]
    assert yaml.safe_load((trainer.result.run_dir / "opt.yaml").read_text())["cache_images"] is True
    a, b = train_state(trainer.result.run_dir), train_state(plain_run)
    for key, value in b["train"]["model"].items():
        assert torch.equal(a["train"]["model"][key], value), key


# ------------------------------------------------------------------------------------------ bookkeeping
@pytest.mark.slow
def test_logged_running_losses_equal_a_plain_account_of_every_mini_batch(shapes, tmp_path):
    """step_log (after each update) and results.csv (after the epoch) against the mini-batch losses read one by one."""
    minibatches, logs = [], []

    def record_losses(trainer):
        criterion = trainer.parts.criterion

        def recorded(outputs, targets, size_hw, images_seen):
            loss, parts = criterion(outputs, targets, size_hw, images_seen=images_seen)
            minibatches.append((loss.item(), parts["box"].item(), parts["obj"].item(), parts["cls"].item()))
            return loss, parts

        trainer.parts.criterion = recorded

    trainer = run(shapes, tmp_path, epochs=1, hooks={"before_train": record_losses,
                                                      "after_step": lambda t: logs.append(t.state.step_log)})
    assert len(minibatches) == 4 and len(logs) == 2  # 2 updates of 2 mini-batches
    for update, log in enumerate(logs):
        seen = minibatches[:2 * update + 2]
        loss, box, obj, cls = seen[-1]
        assert (log.loss, log.box, log.obj, log.cls) == pytest.approx((loss, box, obj, cls), rel=1e-6)
        means = [math.fsum(m[i] for m in seen) / len(seen) for i in (1, 2, 3)]
        assert (log.mean_box, log.mean_obj, log.mean_cls) == pytest.approx(means, rel=1e-6)
    row = read_results(trainer.result.run_dir)[0]
    epoch = [math.fsum(m[i] for m in minibatches) / 4 for i in (1, 2, 3)]
    assert float(row["box_loss"]) == pytest.approx(epoch[0], rel=1e-4)
    assert float(row["obj_loss"]) == pytest.approx(epoch[1], rel=1e-4)
    assert float(row["cls_loss"]) == pytest.approx(epoch[2], rel=1e-4)


# ------------------------------------------------------------------------------------------ AMP update
def _amp_update(inf_grad, ours: bool):
    """One update of a small model through an enabled GradScaler: torch's ``scaler.step`` or the step runner's
    ``_fetch_update`` + ``_optimizer_step``. Returns the weights and the scaler's next scale."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    loss = model(torch.rand(5, 4)).square().sum()
    scaler.scale(loss).backward()
    if inf_grad:  # "inf" or "nan": a gradient that overflowed
        model[0].weight.grad[0, 0] = float(inf_grad)
    if not ours:
        scaler.step(optimizer)
        scaler.update()
    else:
        runner = cpu_step_runner(model, optimizer, lambda step: 0.1, scaler=scaler,
                                 precision=StepPrecision("cpu", amp=True, channels_last=False, tf32=False, compile=False))
        runner.update_losses[0] = torch.tensor([loss.item(), 1.0, 2.0, 3.0], dtype=torch.float64)
        runner.loss_sums = torch.tensor([1.0, 2.0, 3.0, 1.0], dtype=torch.float64)
        runner._fetch_update(0, (8, 8), 0)
        assert runner.grads_non_finite is bool(inf_grad)
        runner._optimizer_step()
        assert runner.state.global_step == 1 and runner.state.lr == 0.1
    return [p.detach().clone() for p in model.parameters()], scaler.get_scale()


@pytest.mark.parametrize("inf_grad", ["", "inf", "nan"])
def test_amp_update_with_one_sync_equals_grad_scaler_step(inf_grad):
    ref_weights, ref_scale = _amp_update(inf_grad, ours=False)
    weights, scale = _amp_update(inf_grad, ours=True)
    assert scale == ref_scale == (4.0 if inf_grad else 8.0)
    for a, b in zip(weights, ref_weights):
        assert torch.equal(a, b)


# ------------------------------------------------------------------------------------------ channels_last
@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov3-tiny.cfg", "yolov4-tiny.cfg", "yolov2-tiny.cfg", "yolov2.cfg"])
def test_channels_last_model_gives_the_nchw_outputs_and_gradients(assets, name):
    """The model's layers (route groups, reorg, maxpool's replicate edge, the heads' reshapes) on channels_last
    tensors: the same raw head maps and parameter gradients as NCHW. In float64, so that only a layout mistake,
    not float32 rounding amplified by train-mode BatchNorm, could exceed the tolerance (1e-10, relative norm)."""
    torch.manual_seed(0)
    nchw = Darknet(parse_cfg(assets(f"cfg/{name}"))).double().train()
    nhwc = Darknet(parse_cfg(assets(f"cfg/{name}"))).double().train()
    nhwc.load_state_dict(nchw.state_dict())
    nhwc.to(memory_format=torch.channels_last)
    assert nhwc.module_list[0].conv.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.rand(2, 3, 128, 128, dtype=torch.float64)
    out_a = nchw(x)
    out_b = nhwc(x.contiguous(memory_format=torch.channels_last))
    assert len(out_a) == len(out_b)
    for a, b in zip(out_a, out_b):
        assert a.shape == b.shape and ((a - b).norm() / a.norm()).item() < 1e-10
    sum(o.square().mean() for o in out_a).backward()
    sum(o.square().mean() for o in out_b).backward()
    for (key, pa), pb in zip(nchw.named_parameters(), nhwc.parameters()):
        assert ((pa.grad - pb.grad).norm() / pa.grad.norm()).item() < 1e-10, key
