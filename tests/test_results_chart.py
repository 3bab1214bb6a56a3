"""results.png: the training chart beside results.csv, one panel per column against the epoch.

The pixel checks read the written PNG with OpenCV: the drawn line's pixels must follow a known series, so a
chart that drew the wrong column, the wrong order or nothing fails.
"""
import csv
import logging
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from helpers import FakeClock
from training_helpers import FAST, write_cfg, write_data
from yolo.data import ensure_shapes_dataset
from yolo.engine import TrainOptions, Trainer
from yolo.engine.hooks import writers
from yolo.engine.hooks.writers import RESULTS_COLUMNS, ResultsChartWriter, write_results_chart

LINE_BGR = (180, 119, 31)  # the chart's line colour, #1f77b4, as OpenCV reads it


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def line_heights(png):
    """For each pixel column holding the line colour, the mean row of those pixels (image rows grow downwards)."""
    image = cv2.imread(str(png))
    on_line = (np.abs(image.astype(int) - LINE_BGR).sum(-1) <= 30)
    columns = np.flatnonzero(on_line.any(0))
    return columns, np.array([np.flatnonzero(on_line[:, c]).mean() for c in columns]), image.shape


@pytest.mark.parametrize("series,rising", [([0.1 * e + 0.02 * e * e for e in range(1, 13)], True),
                                           ([5.0 / e for e in range(1, 13)], False)])
def test_the_drawn_line_follows_the_series(tmp_path, series, rising):
    rows = [[e, "" if e in (3, 7) else f"{v:.6g}", 1.0] for e, v in zip(range(1, 13), series)]  # blanks skipped
    png = write_results_chart(write_csv(tmp_path / "results.csv", ["epoch", "mAP50", "time_s"], rows),
                              tmp_path / "results.png")
    columns, heights, shape = line_heights(png)
    assert shape[:2] == (260, 300)  # one panel (time_s is not charted): 3 x 2.6 inches at 100 dpi
    assert columns.size > 100  # a line across the panel, not a few stray pixels
    steps = np.diff(heights)
    # up the image (smaller rows) as the values rise; a pixel or so of antialiasing at the markers is allowed
    assert (steps <= 1.5).all() if rising else (steps >= -1.5).all()
    span = heights[0] - heights[-1]
    assert span > 100 if rising else span < -100  # the series spans the panel's height, the right way up


@pytest.mark.slow
def test_a_panel_per_column_of_results_csv(tmp_path):
    rows = [[e] + [f"{0.1 * e:.3f}"] * (len(RESULTS_COLUMNS) - 1) for e in (1, 2)]
    png = write_results_chart(write_csv(tmp_path / "results.csv", RESULTS_COLUMNS, rows), tmp_path / "results.png")
    charted = len(RESULTS_COLUMNS) - 6  # not epoch, the four times, workers: 9 panels, 5 a row
    assert cv2.imread(str(png)).shape == (2 * 260, 5 * 300, 3) and charted == 9


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chart")
    root = ensure_shapes_dataset(folder / "data", num_train=8, num_val=4, seed=3, size_range=(64, 96), max_shapes=2)
    return {"cfg": write_cfg(folder), "data": write_data(folder, root)}


def train(tiny, project, epochs=2):
    options = TrainOptions(cfg=str(tiny["cfg"]), data=str(tiny["data"]), device="cpu", project=str(project),
                           name="exp", progress=False, img_size=64, epochs=epochs,
                           hyp={**FAST, "plots": True, "eval_interval": 1, "batch": 4, "subdivisions": 1})
    return Trainer.from_options(options).fit()


@pytest.mark.slow
def test_training_draws_results_png_beside_results_csv(tiny, tmp_path):
    run_dir = train(tiny, tmp_path).run_dir
    image = cv2.imread(str(run_dir / "results.png"))
    assert (run_dir / "results.csv").is_file() and image.shape == (2 * 260, 5 * 300, 3)
    assert (np.abs(image.astype(int) - LINE_BGR).sum(-1) <= 30).sum() > 50  # the curves are drawn


@pytest.mark.slow
def test_a_chart_that_fails_never_stops_the_run(tiny, tmp_path, monkeypatch, caplog):
    def broken(csv_path, png_path):
        raise RuntimeError("no fonts here")

    monkeypatch.setattr(writers, "write_results_chart", broken)
    with caplog.at_level(logging.WARNING):
        result = train(tiny, tmp_path)
    assert (result.run_dir / "last.pt").is_file() and not (result.run_dir / "results.png").exists()
    warnings = [r.getMessage() for r in caplog.records if "results chart" in r.getMessage()]
    assert len(warnings) == 1 and "no fonts here" in warnings[0] and "goes on" in warnings[0]


def chart_drawings(monkeypatch, epoch_seconds, epochs, stop_after=None):
    """The epochs after which a ResultsChartWriter (30 s apart) draws, for epochs of ``epoch_seconds`` each on a
    test clock; with ``stop_after`` the run stops after that epoch ("stop" marks a drawing at the stop)."""
    drawn = []
    monkeypatch.setattr(writers, "write_results_chart", lambda csv_path, png_path: drawn.append(state.epoch))
    clock = FakeClock()
    state = SimpleNamespace(epoch=0)
    trainer = SimpleNamespace(state=state, parts=SimpleNamespace(plan=SimpleNamespace(epochs=epochs)))
    chart = ResultsChartWriter("results.csv", "results.png", interval_s=30.0, clock=clock)
    chart.before_train(trainer)
    for epoch in range(1, (epochs if stop_after is None else stop_after) + 1):
        clock.spend_s(epoch_seconds)
        state.epoch = epoch
        chart.after_epoch(trainer)
    if stop_after is not None:
        state.epoch = "stop"
        chart.after_interrupt(trainer)
    return drawn


def test_the_chart_is_redrawn_every_30_s_and_after_the_last_epoch(monkeypatch):
    assert chart_drawings(monkeypatch, epoch_seconds=2, epochs=5) == [5]  # small epochs: once, at the end
    assert chart_drawings(monkeypatch, epoch_seconds=12, epochs=6) == [3, 6]
    assert chart_drawings(monkeypatch, epoch_seconds=40, epochs=3) == [1, 2, 3]  # long epochs: after each


def test_a_stopped_run_draws_the_rows_not_drawn_yet(monkeypatch):
    assert chart_drawings(monkeypatch, epoch_seconds=2, epochs=5, stop_after=2) == ["stop"]
    assert chart_drawings(monkeypatch, epoch_seconds=40, epochs=5, stop_after=2) == [1, 2]  # all drawn already
    assert chart_drawings(monkeypatch, epoch_seconds=40, epochs=5, stop_after=0) == []  # no epoch, no chart
