"""Two gloo processes through torchrun train exactly like one process with the same global batch.

The cfg has no BatchNorm: each process would normalize with its own mini-batch statistics, and PyTorch's
SyncBatchNorm needs CUDA, so a BN-free cfg is what makes the two runs comparable on the CPU. Gradients are
then the same mean over the same 8 images, up to float summation order.
"""

import pytest
import torch

from helpers import torchrun_train
from training_helpers import FAST, read_results, run, shapes_training, train_state

pytestmark = pytest.mark.usefixtures("private_cache")


@pytest.mark.slow
def test_two_process_ddp_matches_one_process(tmp_path):
    shapes = shapes_training(tmp_path, num_train=24, num_val=4, seed=11, bn=0)
    hyp = {**FAST, "subdivisions": 1, "ema": False, "burn_in": 0, "learning_rate": 0.005}
    # The two processes read the train images from one decoded copy (the same items as from disk).
    done = torchrun_train(tmp_path, shapes["cfg"], shapes["data"], {**hyp, "cache_images": True}, "cpu", epochs=2)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "rank 1 of 2 (gloo)" in done.stderr or "rank 0 of 2 (gloo)" in done.stderr, done.stderr[-2000:]
    assert "one copy shared by this machine's processes" in done.stderr, done.stderr[-2000:]
    ddp = train_state(tmp_path / "ddp")
    assert ddp["train"]["global_step"] == 6  # 24 images / 8 per update x 2 epochs
    assert len(read_results(tmp_path / "ddp")) == 2

    single = run(shapes, tmp_path, name="single", epochs=2, batch_size=8, hyp=hyp)
    smaller = run(shapes, tmp_path, name="batch4", epochs=2, batch_size=4, hyp=hyp)  # what unsharded data gives
    one = train_state(single.result.run_dir)["train"]["model"]
    other = train_state(smaller.result.run_dir)["train"]["model"]
    two = ddp["train"]["model"]
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-4, atol=1e-6, msg=key)
    assert any(not torch.allclose(two[k], other[k], rtol=1e-3, atol=1e-5) for k in one)
