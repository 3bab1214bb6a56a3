"""The Darknet reference harness itself: it builds, and Darknet's inference equals ours layer by layer on the
real yolov3-tiny weights (the same comparison OpenCV already confirms end to end)."""
import shutil
import subprocess

import numpy as np
import pytest
import torch

from darknet_ref import object_cache, set_net_options
from yolo import load_model


def test_set_net_options_replaces_and_adds():
    text = "# c\n[net]\nbatch=64 # x\nwidth=416\n\n[convolutional]\nbatch=3\n"
    out = set_net_options(text, batch=2, height=96)
    lines = out.splitlines()
    assert lines[:4] == ["# c", "[net]", "batch=2", "height=96"]
    assert "width=416" in lines and "batch=3" in lines and "batch=64 # x" not in lines


def test_forward_matches_every_layer_of_yolov3_tiny(darknet, assets):
    cfg, weights = assets("cfg/yolov3-tiny.cfg"), assets("weights/yolov3-tiny.weights")
    x = np.random.RandomState(0).rand(2, 3, 160, 224).astype(np.float32)
    dump = darknet.forward(cfg, weights, x)
    model = load_model(cfg, weights).eval()
    with torch.no_grad():
        outputs, _ = model.layer_outputs(torch.from_numpy(x))
    assert len(dump.layers) == len(outputs) == 24
    for i, (meta, ours) in enumerate(zip(dump.layers, outputs)):
        if meta.type == "yolo":
            continue  # Darknet's [yolo] output is its activated input; the head decode is tested elsewhere
        ref = dump.out(i)
        assert ref.shape == tuple(ours.shape), (i, meta)
        err = np.abs(ref - ours.numpy()).max() / max(1e-6, np.abs(ref).max())
        assert err < 1e-4, f"layer {i} ({meta.type}): relative error {err:.2e}"


def test_learning_rate_burn_in(darknet, assets):
    rates = darknet.rates(assets("cfg/yolov3-tiny.cfg"), 4, burn_in=4, learning_rate=0.01, power=4,
                          policy="constant")
    np.testing.assert_allclose(rates, [0.01 * (k / 4) ** 4 for k in range(4)] + [0.01], rtol=1e-6)


@pytest.mark.slow
def test_train_gives_yolo_deltas(darknet, assets):
    cfg, weights = assets("cfg/yolov3-tiny.cfg"), assets("weights/yolov3-tiny.weights")
    x = np.random.RandomState(1).rand(2, 3, 128, 128).astype(np.float32)
    truths = [np.array([[0.5, 0.5, 0.2, 0.3, 1]]), np.zeros((0, 5))]
    dump = darknet.train(cfg, weights, x, truths)
    heads = [m for m in dump.layers if m.type == "yolo"]
    assert len(heads) == 2
    for head in heads:
        delta = dump.delta(head.index)
        assert delta.shape == (2, 255, head.out_h, head.out_w) and np.isfinite(delta).all()
        assert np.abs(delta).max() > 0 and head.cost > 0


def test_the_object_cache_reuses_an_object_only_for_the_same_preprocessed_source(tmp_path):
    """Darknet's builds compile through tests/darknet_ref/object_cache.py: a flag that leaves the preprocessed text
    as it was (-D of an unused macro, -I of another folder) reuses the object; one that changes it compiles again;
    each object equals the compiler's own."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found: the Darknet builds need it")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.c").write_text("#ifdef WIDE\nlong\n#else\nint\n#endif\nf(int x) { return x * 3; }\n")
    objects = tmp_path / "objects"
    objects.mkdir()

    def compile_cached(*flags):
        out = tmp_path / "a.o"
        out.unlink(missing_ok=True)
        status = object_cache.main(["object_cache.py", "gcc", str(objects), "-O2", *flags, "-c", "src/a.c",
                                    "-o", str(out)])
        assert status == 0
        direct = tmp_path / "direct.o"
        subprocess.run(["gcc", "-O2", *flags, "-c", "src/a.c", "-o", str(direct)], cwd=tmp_path, check=True)
        assert out.read_bytes() == direct.read_bytes()
        return sorted(p.name for p in objects.iterdir())

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)  # make compiles in the build folder with relative paths
        first = compile_cached()
        assert len(first) == 1
        assert compile_cached("-DOPENCV", "-Iinclude/") == first  # same preprocessed text: reused
        assert len(compile_cached("-DWIDE")) == 2  # the text differs: compiled and stored
        assert len(compile_cached("-O0")) == 3  # another code-generation flag: compiled and stored
