"""The [cost] layer's training loss against Darknet itself: ``-d(loss)/d(x)`` of :func:`yolo.cost_loss.cost_loss`
(summed over the batch, ``x`` the layer's input) must equal what Darknet's backward passes to the layer before,
``scale * l.delta``, within 1e-5 of its largest value, for each cost type."""
import numpy as np
import pytest
import torch

from cfg_snippets import net_section
from yolo.losses.cost_loss import SECRET_NUM, cost_loss
from yolo.models.model import Darknet

TOLERANCE = 1e-5  # relative to the largest |delta|
OUTPUTS = 12


def cost_cfg(kind: str, scale: float) -> str:
    """An 8x8 input, a 1x1 conv (Darknet's parser divides by its count of convolutions), a linear [connected]
    (its delta after backward is the one it received) and a [cost]."""
    return (net_section(8, 8) + "\n"
            "[convolutional]\nfilters=3\nsize=1\nactivation=linear\n\n"
            f"[connected]\noutput={OUTPUTS}\nactivation=linear\n\n"
            f"[cost]\ntype={kind}\nscale={scale}\nratio=0.5\n")


@pytest.mark.parametrize("kind, scale", [("sse", 1.0), ("sse", 0.3), ("masked", 2.0), ("smooth", 1.0),
                                         ("smooth", 0.5)])
def test_cost_delta_equals_darknet(darknet, tmp_path, kind, scale):
    cfg = tmp_path / "cost.cfg"
    cfg.write_text(cost_cfg(kind, scale))
    model = Darknet(cfg)
    g = torch.Generator().manual_seed(len(kind) + int(10 * scale))
    with torch.no_grad():
        model.module_list[1].linear.weight.copy_(torch.randn(OUTPUTS, 192, generator=g) * 0.1)
    weights = tmp_path / "cost.weights"
    model.save_darknet_weights(weights)
    batch = 3
    x = torch.rand(batch, 3, 8, 8, generator=g).numpy()
    truth = (torch.randn(batch, OUTPUTS, generator=g) * 2).numpy()  # |truth - x| beyond 1 too: smooth's two parts
    if kind == "masked":
        truth[:, ::3] = SECRET_NUM
    dump = darknet.train(cfg, weights, x, [t for t in truth])
    head_input = torch.from_numpy(dump.out(1).reshape(batch, -1).copy()).requires_grad_()
    cost_loss(model.module_list[2], head_input, torch.from_numpy(truth)).backward()
    ours = -head_input.grad.numpy()
    ref = dump.delta(1).reshape(batch, -1)
    np.testing.assert_allclose(scale * dump.delta(2).reshape(batch, -1), ref, rtol=1e-6, atol=1e-7)
    scale_ref = np.abs(ref).max()
    err = np.abs(ours - ref).max() / scale_ref
    print(f"[cost] type={kind} scale={scale}: largest deviation from Darknet's delta {err:.2e} of {scale_ref:.3g}")
    assert err < TOLERANCE
    if kind == "masked":
        assert (ours[:, ::3] == 0).all() and (ref[:, ::3] == 0).all()
    if kind == "smooth":
        diff = truth - dump.out(1).reshape(batch, -1)
        assert (np.abs(diff) < 1).any() and (np.abs(diff) > 1).any()


def test_truth_of_another_shape_is_refused(tmp_path):
    cfg = tmp_path / "cost.cfg"
    cfg.write_text(cost_cfg("sse", 1.0))
    model = Darknet(cfg)
    with pytest.raises(ValueError, match=r"cost.cfg:\d+: \[cost\] truth shape \(2, 5\) differs"):
        cost_loss(model.module_list[2], torch.zeros(2, OUTPUTS), torch.zeros(2, 5))
