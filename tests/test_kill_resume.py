"""A training process killed (SIGKILL) in the middle of saving its checkpoints loses nothing after --resume.

Each case runs ``tools/train.py`` for real on a tiny cfg and 8 tiny images (2 epochs of 2 updates) in a
subprocess that kills itself at one point of the final epoch's save: right before ``best.pt`` or
``last.pt`` is written, after its temporary file is written but before the rename, or right after it.
Evaluation is replaced by rising made-up metrics, so every epoch is a new best and the final epoch's
``best.pt`` is the one at stake. Resuming must finish the run with a ``best.pt`` that holds the best score
``last.pt`` records, and no temporary file left in the run folder.
"""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from training_helpers import made_up_evaluation, write_one_head_training
from yolo.models.checkpoint import load_checkpoint_file
from yolo.engine import TrainOptions, Trainer
from yolo.engine.hooks.evaluation import fitness

REPO = Path(__file__).resolve().parent.parent

# The killed process: tools/train.py with the made-up evaluation and a SIGKILL at one save point.
DRIVER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {repo!r})
sys.path.insert(0, {tests!r})
import yolo.engine.hooks.checkpointing as checkpointing_module
import yolo.engine.trainer as trainer_module
from training_helpers import made_up_evaluation

target, stage, occurrence = sys.argv[1], sys.argv[2], int(sys.argv[3])
count = 0
real_save, real_replace = checkpointing_module.save_checkpoint, os.replace

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def save(ckpt, path):
    global count
    hit = Path(path).name == target and (count := count + 1) == occurrence
    if hit and stage == "before":
        die()
    result = real_save(ckpt, path)
    if hit and stage == "after":
        die()
    return result

def replace(src, dst):  # the rename that ends an atomic save: its temp file is complete on disk
    if stage == "written" and Path(dst).name == target and count == occurrence:
        die()
    return real_replace(src, dst)

checkpointing_module.save_checkpoint = save
os.replace = replace
import yolo.engine.hooks.evaluation as evaluation_module
evaluation_module.evaluate_training = made_up_evaluation
sys.argv = ["train.py"] + sys.argv[4:]
from yolo.cli.train import main, parse_args
sys.exit(main(parse_args()))
"""


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return write_one_head_training(tmp_path_factory.mktemp("kill"))


@pytest.mark.parametrize("target", ["best.pt", "last.pt"])
@pytest.mark.parametrize("stage", ["before", "written", "after"])
def test_kill_during_final_save_then_resume_loses_nothing(setup, tmp_path, monkeypatch, target, stage):
    monkeypatch.setenv("YOLO_CACHE_DIR", str(tmp_path / "cache"))
    driver = DRIVER.format(repo=str(REPO), tests=str(REPO / "tests"))
    cmd = [sys.executable, "-c", driver, target, stage, "2",
           "--cfg", str(setup / "tiny.cfg"), "--data", str(setup / "data.yaml"), "--hyp", str(setup / "hyp.yaml"),
           "--epochs", "2", "--device", "cpu", "--project", str(tmp_path), "--name", "run", "--no-progress"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    run_dir = tmp_path / "run"
    if stage == "written":  # the kill left the unfinished temp file, as a real crash would
        assert list(run_dir.glob(f".{target}.*.tmp")), sorted(p.name for p in run_dir.iterdir())

    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    result = Trainer.from_options(TrainOptions(resume=str(run_dir), progress=False, workers=0)).fit()

    assert result.status == "finished" and result.epochs_done == 2
    assert not list(run_dir.glob(".*tmp")), sorted(p.name for p in run_dir.iterdir())
    last, best = load_checkpoint_file(run_dir / "last.pt"), load_checkpoint_file(run_dir / "best.pt")
    assert last["train"]["epoch"] == 2 and last["train"]["global_step"] == 4
    # The best epoch is the last one (rising metrics); best.pt must be that epoch, with the recorded score.
    expected = fitness(made_up_evaluation(None, 1, True))
    assert last["train"]["best_fitness"] == pytest.approx(expected)
    assert best["train"]["epoch"] == 2 and best["train"]["best_fitness"] == pytest.approx(expected)
