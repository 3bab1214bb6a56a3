"""The time of each part of an epoch: the wait for data, the step, the rest; in the epoch's line and results.csv.

The splits are checked with a made-up clock (each reading one second later than the one before), so they are
exact counts of the clock's readings, never measured durations.
"""
import csv
import logging
import types

import pytest
import torch

from helpers import ticking_clock
from training_helpers import FAST, read_results, run, shapes_training
from yolo.engine import RunPlan, TrainOptions, Trainer, TrainState, run_plan
from yolo.engine.config import Hyperparameters
from yolo.engine.distributed import DistInfo
from yolo.engine.epoch_times import EpochTimes, EpochTimeSplit, data_wait_warning
from yolo.engine.hooks.writers import RESULTS_COLUMNS, ResultsCSVWriter

pytestmark = pytest.mark.usefixtures("private_cache")


def test_the_split_follows_the_marks():
    # start at 0; two mini-batches: data at 1 and 3 (waits 1, 1), steps done at 2 and 4 (1, 1); finish at 5
    times = EpochTimes(torch.device("cpu"), clock=ticking_clock())
    times.data_ready()
    times.step_done()
    times.data_ready()
    times.step_done()
    split = times.finish()
    assert split == EpochTimeSplit(total=5.0, data=2.0, step=2.0, other=1.0)


def test_time_between_a_step_and_the_next_batch_is_data_and_between_marks_other():
    readings = iter([0.0, 4.0, 5.0, 9.0])  # start, data ready after 4 s, step done after 1 s, finish 4 s later
    times = EpochTimes(torch.device("cpu"), clock=lambda: next(readings))
    times.data_ready()
    times.step_done()
    assert times.finish() == EpochTimeSplit(total=9.0, data=4.0, step=1.0, other=4.0)


def test_the_warning_names_what_helps_only_past_a_quarter():
    assert data_wait_warning(EpochTimeSplit(total=8.0, data=2.0, step=5.0, other=1.0), 3, False) == ""
    line = data_wait_warning(EpochTimeSplit(total=8.0, data=2.5, step=5.0, other=0.5), 3, False)
    assert "2.5 s of the epoch's 8.0 s" in line and "--workers (now 3)" in line and "--cache-images" in line
    assert "--cache-images" not in data_wait_warning(EpochTimeSplit(8.0, 6.0, 1.0, 1.0), 3, True)


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return shapes_training(tmp_path_factory.mktemp("shapes"), num_train=8, num_val=2, seed=5)


@pytest.mark.slow
def test_a_run_writes_the_times_and_workers_and_warns_once(shapes, tmp_path, caplog, monkeypatch):
    """A real run on the CPU: every epoch's row carries its split (with a ticking clock: exact counts) and the
    workers; the data wait (half of each epoch) is warned of once, not every epoch."""
    made = EpochTimes.__init__

    def with_ticking_clock(self, device, clock=None):
        made(self, device, clock=ticking_clock())
    monkeypatch.setattr(EpochTimes, "__init__", with_ticking_clock)
    caplog.set_level(logging.INFO, logger="yolo")
    trainer = run(shapes, tmp_path, epochs=2, img_size=64, hyp={"batch": 4, "subdivisions": 2})
    rows = read_results(trainer.result.run_dir)
    assert list(rows[0].keys()) == list(RESULTS_COLUMNS)
    # 8 images, mini-batches of 2: 4 per epoch. Readings: start, then data and step for each (8), finish: 9 s.
    for row in rows:
        assert (float(row["time_data_s"]), float(row["time_step_s"]), float(row["time_other_s"])) == (4, 4, 1)
        assert row["workers"] == "0"
    epoch_lines = [r.getMessage() for r in caplog.records if "loader workers)" in r.getMessage()]
    assert len(epoch_lines) == 2 and "data wait 4.0 s, step 4.0 s, other 1.0 s; 0 loader workers" in epoch_lines[0]
    warnings = [r.getMessage() for r in caplog.records if "for data" in r.getMessage()]
    assert len(warnings) == 1 and "--workers (now 0)" in warnings[0], warnings


def test_a_results_csv_without_the_new_columns_is_continued(tmp_path):
    """Resuming a run whose results.csv was written before the time columns existed: its rows are kept, their
    new cells blank, and the new row has every column."""
    path = tmp_path / "results.csv"
    old_columns = ["epoch", "box_loss", "obj_loss", "cls_loss", "loss", "lr", "precision", "recall", "mAP50",
                   "mAP50_95", "time_s"]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(old_columns)
        writer.writerow([1, 0.5, 0.4, 0.3, 1.2, 0.001, "", "", "", "", 12.5])
        writer.writerow([2, 0.4, 0.3, 0.2, 0.9, 0.001, "", "", "", "", 11.0])  # the interrupted epoch: rewritten
    state = TrainState(epoch=2, epoch_losses={"box_loss": 0.4, "obj_loss": 0.3, "cls_loss": 0.2, "loss": 0.9},
                       lr=0.001, epoch_split=EpochTimeSplit(10.0, 1.0, 8.0, 1.0))
    trainer = types.SimpleNamespace(state=state, parts=types.SimpleNamespace(plan=RunPlan(epochs=2, steps_per_epoch=1,
                                                                                        workers=3)))
    ResultsCSVWriter(path).after_epoch(trainer)
    rows = read_results(tmp_path)
    assert [r["epoch"] for r in rows] == ["1", "2"] and list(rows[0].keys()) == list(RESULTS_COLUMNS)
    assert rows[0]["time_s"] == "12.5" and rows[0]["time_data_s"] == "" and rows[0]["workers"] == ""
    assert (rows[1]["time_data_s"], rows[1]["time_step_s"], rows[1]["time_other_s"], rows[1]["workers"]) == \
        ("1", "8", "1", "3")


@pytest.mark.cuda
def test_on_cuda_the_step_is_the_gpu_time_between_events(cuda_device):
    """On CUDA the step's seconds come from CUDA events around queued work; the parts still add up."""
    times = EpochTimes(cuda_device)
    a = torch.randn(2048, 2048, device=cuda_device)
    for _ in range(3):
        times.data_ready()
        for _ in range(10):
            a = (a @ a).tanh_()
        times.step_done()
    split = times.finish()
    assert split.step > 0 and split.data >= 0 and split.other >= 0
    assert split.data + split.step + split.other == pytest.approx(split.total)
    assert not times.events  # read and released


@pytest.mark.slow
def test_the_plan_takes_the_default_workers_per_process_and_names_them(monkeypatch, caplog):
    """Without --workers: the CPUs of the affinity mask but one, shared by torchrun's local processes, at most
    a mini-batch; the log names the number. With --workers: that number."""
    monkeypatch.setattr(run_plan, "cpu_threads", lambda: 16)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    caplog.set_level(logging.INFO, logger="yolo")
    hyp = Hyperparameters(batch=64, subdivisions=1, epochs=1)
    assert run_plan.plan_run(hyp, 1280, DistInfo(rank=0, local_rank=0, world_size=2)).workers == 7  # 15 // 2
    assert "7 loader worker process(es)" in caplog.text and "16 CPU(s)" in caplog.text
    hyp = Hyperparameters(batch=8, subdivisions=2, epochs=1)
    assert run_plan.plan_run(hyp, 1280, DistInfo()).workers == 4  # a mini-batch of 4 images
    hyp = Hyperparameters(batch=8, subdivisions=2, epochs=1, workers=11)
    assert run_plan.plan_run(hyp, 1280, DistInfo()).workers == 11


@pytest.mark.slow
@pytest.mark.cuda
def test_a_cuda_run_writes_the_split_of_each_epoch(cuda_device, shapes, tmp_path):
    """Through the trainer on CUDA (events for the step): every row's parts are numbers that add up to at most
    the epoch, and the step took time."""
    options = TrainOptions(cfg=str(shapes["cfg"]), data=str(shapes["data"]), hyp={**FAST, "batch": 4, "subdivisions": 2},
                           device=str(cuda_device), project=str(tmp_path), name="cuda", progress=False, epochs=2,
                           img_size=64)
    rows = read_results(Trainer.from_options(options).fit().run_dir)
    for row in rows:
        data, step, other = (float(row[k]) for k in ("time_data_s", "time_step_s", "time_other_s"))
        assert step > 0 and data >= 0 and other >= 0 and data + step + other <= float(row["time_s"]) + 1e-6
