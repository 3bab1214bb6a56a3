"""What --resume checks before it spends an epoch: the run folder's results.csv can be read, the last.pt is the run's
own (the model its cfg.cfg records), and no --project it would ignore was given. Each refusal is one line and
changes nothing in the folder."""
import pytest
import torch

from helpers import one_line_error
from training_helpers import write_one_head_training
from yolo.cli import train as train_cli
from yolo.engine import TrainOptions, Trainer
from yolo.errors import ConfigError
from yolo.models.checkpoint import load_checkpoint_file


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished one-epoch run of the one-head model (its folder)."""
    folder = write_one_head_training(tmp_path_factory.mktemp("resume"))
    options = TrainOptions(cfg=str(folder / "tiny.cfg"), data=str(folder / "data.yaml"), hyp=str(folder / "hyp.yaml"),
                           epochs=1, device="cpu", project=str(folder / "runs"), name="run", progress=False)
    Trainer.from_options(options).fit()
    return folder / "runs" / "run"


def _resume(last, epochs=2):
    return Trainer.from_options(TrainOptions(resume=str(last), epochs=epochs, progress=False))


def test_a_results_csv_that_is_not_utf8_is_refused_before_training(run_dir, tmp_path):
    # before: UnicodeDecodeError after epoch 2 had trained; last.pt stayed at epoch 1, and every resume repeated it
    results = run_dir / "results.csv"
    original = results.read_bytes()
    results.write_bytes(original + b"2,\xff\xfe not text\n")
    damaged = results.read_bytes()
    try:
        trainer = _resume(run_dir / "last.pt")
        with pytest.raises(ConfigError, match="results.csv: not UTF-8 text at byte .*move it aside"):
            trainer.fit()
        assert results.read_bytes() == damaged  # the user's file as it was
        assert load_checkpoint_file(run_dir / "last.pt")["train"]["epoch"] == 1
    finally:
        results.write_bytes(original)


def test_another_runs_last_pt_is_refused(run_dir):
    # before: it trained the other model while opt.yaml and cfg.cfg named this one, and results.csv mixed the two
    last = run_dir / "last.pt"
    original = last.read_bytes()
    ckpt = load_checkpoint_file(last)
    ckpt["cfg"] = ckpt["cfg"].replace("filters=8", "filters=16", 1)
    torch.save(ckpt, last)
    try:
        with pytest.raises(ConfigError, match=r"not this run's checkpoint: it holds another model than the run's "
                                              r".*cfg\.cfg"):
            _resume(last)
    finally:
        last.write_bytes(original)


def test_resume_with_a_project_it_would_ignore_is_one_line(run_dir, tmp_path, capsys):
    err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
        ["--resume", str(run_dir / "last.pt"), "--project", str(tmp_path / "elsewhere")])))
    assert "a resumed run continues in its own folder" in err
    assert not (tmp_path / "elsewhere").exists()


def test_an_image_deleted_while_training_is_one_short_line_with_the_resume_command(tmp_path, capsys, monkeypatch):
    # before: 2,242+ characters of the loader worker's flattened traceback, cut before the file name, no resume hint
    folder = write_one_head_training(tmp_path)
    images = sorted((folder / "data" / "images" / "train").glob("*.jpg"))
    real = Trainer.from_options

    def with_a_deletion(options):
        trainer = real(options)
        trainer.add_callback("after_epoch", lambda t: [p.unlink() for p in images if p.exists()])
        return trainer

    monkeypatch.setattr(train_cli.Trainer, "from_options", with_a_deletion)
    err = one_line_error(capsys, lambda: train_cli.main(train_cli.parse_args(
        ["--cfg", str(folder / "tiny.cfg"), "--data", str(folder / "data.yaml"), "--hyp", str(folder / "hyp.yaml"),
         "--epochs", "2", "--workers", "1", "--device", "cpu", "--project", str(tmp_path / "runs"), "--name", "run",
         "--no-progress"])))
    last = tmp_path / "runs" / "run" / "last.pt"
    assert len(err) < 400, err
    assert "Traceback" not in err and "DataLoader worker" not in err
    assert any(str(p) in err for p in images), err
    assert err.endswith(f"continue with: yolo-train --resume {last}") or err.endswith(f"--resume {last}"), err
