"""Darknet's weight update as a torch optimizer (``update_network_gpu`` / ``update_convolutional_layer_gpu``).

Where Darknet's CPU and CUDA updates differ, this follows CUDA, what Darknet users train with:

* SGD with momentum; ``decay`` on conv/connected weights only (biases and BatchNorm scales/shifts get none);
* ``adam=1``: Darknet's Adam (the CPU build ignores ``adam`` and runs SGD);
* the ``learning_rate`` key of a [convolutional], [connected], [batchnorm] or [shortcut] layer scales its rate
  (Darknet's [local] and recurrent layers ignore it);
* weighted [shortcut] weights get no decay and their summed update is kept within [-1, 1] (CUDA's
  ``update_shortcut_layer_gpu``; the CPU decays them and does not clamp);
* a layer's ``dont_update=N`` holds it until update ``N + 1`` and ``burnin_update=K`` until update
  ``K * burn_in``; meanwhile its gradient keeps adding up, as Darknet's ``weight_updates`` do when not applied;
* a conv's ``clip=C`` keeps its weights in ``[-C, C]`` after each of its updates.

``grad_centr`` and ``train_only_bn``, which change the update in ways not reproduced here, are refused with the
cfg's file and line when training starts, and so is ``adam=1`` for a cfg with trained layers other than
[convolutional] (Darknet's CUDA Adam is in the conv update only; its other layers keep SGD).

The gradients the optimizer sees are the mean over the ``batch`` images of an update (per-image loss, mini-batch
losses divided by ``subdivisions``): ``-weight_updates / batch`` in Darknet's terms.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

import torch
import torch.nn as nn


# Section types whose update uses the layer's learning_rate key on CUDA, and those with Darknet's Adam.
SCALED_TYPES = ("convolutional", "conv", "connected", "batchnorm", "shortcut")
CONV_TYPES = ("convolutional", "conv")


@dataclass(frozen=True)
class LayerRule:
    """How Darknet updates one layer's parameters: rate scale, first update number, weight clip (0: none)."""

    lr_scale: float = 1.0
    first_update: int = 1
    clip: float = 0.0
    clamp_update: bool = False  # weighted [shortcut]: no decay, summed update within [-1, 1]


def layer_rules(model: nn.Module, burn_in: int = 0, adam: bool = False) -> Dict[int, LayerRule]:
    """``id(parameter) -> LayerRule`` from each layer's cfg section (a :class:`yolo.models.model.Darknet`; any other
    module gets the default rule). Raises the section's one-line CfgError for update options not reproduced."""
    rules: Dict[int, LayerRule] = {}
    sections = getattr(model, "sections", None)
    layers = getattr(model, "module_list", None)
    if sections is None or layers is None:
        return rules
    for module, section in zip(layers, sections[1:]):
        for key in ("train_only_bn", "grad_centr"):
            if section.has(key) and section.get_int(key, 0):
                raise section.error(f"option '{key}={section.options[key]}' changes Darknet's update and is not "
                                    "supported for training", key)
        dont_update = section.get_int("dont_update", 0)
        burnin_update = section.get_int("burnin_update", 0)
        first = max(1, dont_update + 1, burnin_update * burn_in)
        if adam and first > 1:  # Darknet's Adam counts t from the run's start, torch's from the first step
            key = "dont_update" if section.has("dont_update") else "burnin_update"
            raise section.error(f"option '{key}' with adam=1 is not supported", key)
        trained = [p for p in module.parameters() if p.requires_grad]
        if adam and trained and section.type not in CONV_TYPES:
            raise section.error(f"adam=1: Darknet's CUDA Adam updates [convolutional] layers only ([{section.type}] "
                                "keeps SGD there); training this cfg with adam is not supported")
        scale = section.get_float("learning_rate", 1.0) if section.type in SCALED_TYPES else 1.0
        clip = section.get_float("clip", 0.0)
        conv = getattr(module, "conv", None)
        for p in module.parameters():
            clipped = bool(clip) and isinstance(conv, nn.Conv2d) and p is conv.weight  # Darknet clips conv weights
            rules[id(p)] = LayerRule(scale, first, clip if clipped else 0.0, section.type == "shortcut")
    return rules


def build_optimizer(model: nn.Module, lr: float, momentum: float, decay: float, adam: bool = False,
                    b1: float = 0.9, b2: float = 0.999, eps: float = 0.000001, batch: int = 1,
                    burn_in: int = 0) -> torch.optim.Optimizer:
    """Darknet's update of every layer as a torch optimizer.

    * SGD (``adam`` False): Darknet adds ``-decay * batch * w`` to the summed negative gradient of weights
      only, steps by ``rate / batch`` and keeps the sum times ``momentum``. Divided by ``batch`` that is
      torch's SGD exactly: ``v = momentum * v + grad + decay * w``, ``w -= rate * v``, with
      ``weight_decay = decay`` on conv/connected weights and none on biases and BatchNorm scales/shifts.
    * Adam (``adam`` True, Darknet's CUDA ``adam_update_gpu``): every parameter, biases and BatchNorm scales
      included, gets ``decay``; Darknet's moments are of the summed gradient, which scales them by ``batch``
      and so is torch's Adam with ``eps / batch``.

    Each group carries its :class:`LayerRule` fields (``lr_scale``, ``first_update``, ``clip``):
    :func:`yolo.engine.schedule.set_lr` gives it ``rate * lr_scale``; :func:`hold_gradients` and
    :func:`clip_weights` apply the other two around each step.
    """
    rules = layer_rules(model, burn_in, adam)
    groups: Dict[Tuple[bool, LayerRule], List[nn.Parameter]] = {}
    for module in model.modules():
        for name, p in module.named_parameters(recurse=False):
            if not p.requires_grad:
                continue
            rule = rules.get(id(p), LayerRule())
            # Darknet decays a layer's weights, never its biases or (BatchNorm) scales, nor shortcut weights on CUDA
            is_weight = name == "weight" and not isinstance(module, nn.modules.batchnorm._NormBase)
            key = (bool(adam) or (is_weight and not rule.clamp_update), rule)
            groups.setdefault(key, []).append(p)
    param_groups = []
    order = sorted(groups, key=lambda k: (not k[0], k[1].lr_scale, k[1].first_update, k[1].clip))
    for decayed, rule in order:
        name = ("decayed" if decayed else "not_decayed") + f"_x{rule.lr_scale:g}"
        param_groups.append({"params": groups[(decayed, rule)], "weight_decay": decay if decayed else 0.0,
                             "lr": lr * rule.lr_scale, "lr_scale": rule.lr_scale, "first_update": rule.first_update,
                             "clip": rule.clip, "update_clamp": 1.0 / max(int(batch), 1) if rule.clamp_update else 0.0,
                             "name": name})
    if adam:
        return torch.optim.Adam(param_groups, lr=lr, betas=(b1, b2), eps=eps / max(int(batch), 1))
    return DarknetSGD(param_groups, lr=lr, momentum=momentum, nesterov=False)


class DarknetSGD(torch.optim.SGD):
    """torch's SGD, except for groups with ``update_clamp`` (weighted [shortcut] weights), which follow
    ``update_shortcut_layer_gpu``: ``v = clamp(momentum * v + grad, -c, c)``, ``w -= rate * v`` with ``c = 1 / batch``
    (Darknet's summed update kept within [-1, 1]) and no decay."""

    @torch.no_grad()
    def step(self, closure=None):
        taken = []
        for group in self.param_groups:
            bound = group.get("update_clamp", 0.0)
            if not bound:
                continue
            for p in group["params"]:
                if p.grad is None:
                    continue
                buffer = self.state[p].get("momentum_buffer")
                v = p.grad.clone() if buffer is None else buffer.mul_(group["momentum"]).add_(p.grad)
                self.state[p]["momentum_buffer"] = v.clamp_(-bound, bound)
                p.add_(v, alpha=-group["lr"])
                taken.append((p, p.grad))
                p.grad = None  # so that torch's SGD below leaves it alone
        loss = super().step(closure)
        for p, grad in taken:
            p.grad = grad
        return loss


def optimizer_from_hyp(model: nn.Module, hyp: Mapping[str, Any]) -> torch.optim.Optimizer:
    """:func:`build_optimizer` with the resolved hyperparameters (:func:`yolo.engine.config.resolve_hyp`)."""
    return build_optimizer(model, hyp["learning_rate"], hyp["momentum"], hyp["decay"], adam=bool(hyp.get("adam", 0)),
                           b1=hyp.get("B1", 0.9), b2=hyp.get("B2", 0.999), eps=hyp.get("eps", 0.000001),
                           batch=hyp["batch"], burn_in=int(hyp.get("burn_in", 0)))


def holds_gradients(optimizer: torch.optim.Optimizer, update: int, held: Dict[torch.Tensor, torch.Tensor]) -> bool:
    """Whether step ``update`` needs :func:`hold_gradients` (a group not updated yet, or gradients held)."""
    return bool(held) or any(update < g.get("first_update", 1) for g in optimizer.param_groups)


def hold_gradients(optimizer: torch.optim.Optimizer, update: int, held: Dict[torch.Tensor, torch.Tensor]) -> None:
    """Before step ``update`` (1-based): move the gradients of groups whose ``first_update`` is later into
    ``held`` (the optimizer then skips them: no decay, no momentum), and add what was held to the gradients of
    groups updated now. Gradients must be unscaled (AMP)."""
    for group in optimizer.param_groups:
        waiting = update < group.get("first_update", 1)
        for p in group["params"]:
            if waiting and p.grad is not None:
                held[p] = held[p] + p.grad if p in held else p.grad.detach().clone()
                p.grad = None
            elif not waiting and p in held:
                saved = held.pop(p)
                p.grad = saved if p.grad is None else p.grad.add_(saved)


def clip_weights(optimizer: torch.optim.Optimizer, update: int) -> None:
    """After step ``update``: Darknet's ``clip`` (constrain_ongpu) on the groups that were updated."""
    with torch.no_grad():
        for group in optimizer.param_groups:
            if group.get("clip") and update >= group.get("first_update", 1):
                for p in group["params"]:
                    p.clamp_(-group["clip"], group["clip"])


__all__ = ["DarknetSGD", "LayerRule", "build_optimizer", "clip_weights", "hold_gradients", "holds_gradients",
           "layer_rules", "optimizer_from_hyp"]
