"""The run's hooks (yolo.engine.run_folder): a report hook that fails is one warning and the run goes on."""

import pytest

from training_helpers import HYP as ONE_HEAD_HYP, made_up_evaluation


@pytest.mark.slow
def test_a_failing_report_hook_logs_one_warning_and_the_run_goes_on(train_setup, monkeypatch, caplog):
    import yolo.engine.hooks.writers as writers
    from yolo.engine import TrainOptions, Trainer
    from yolo.models.checkpoint import load_checkpoint_file

    def broken(*args, **kwargs):
        raise OverflowError("Python int too large to convert to C int")

    monkeypatch.setattr(writers, "sample_predictions", broken)
    monkeypatch.setattr("yolo.engine.hooks.evaluation.evaluate_training", made_up_evaluation)
    options = TrainOptions(cfg=str(train_setup / "tiny.cfg"), data=str(train_setup / "data.yaml"),
                           hyp={**ONE_HEAD_HYP, "tensorboard": True, "tb_images": 2}, epochs=3, device="cpu",
                           project=str(train_setup / "runs"), name="run", progress=False, workers=0)
    with caplog.at_level("DEBUG"):
        result = Trainer.from_options(options).fit()
    assert result.status == "finished" and result.epochs_done == 3
    assert load_checkpoint_file(result.last)["train"]["epoch"] == 3
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "TensorBoard writer failed" in r.message]
    assert len(warnings) == 1 and "OverflowError" in warnings[0].message and "goes on" in warnings[0].message
