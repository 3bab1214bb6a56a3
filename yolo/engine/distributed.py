"""Multi-process training through ``torchrun``: process group, sampler, small collectives.

``torchrun --nproc_per_node N tools/train.py ...`` sets ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE``; the
trainer then joins a process group (NCCL on CUDA, gloo on the CPU), shards every epoch with
:class:`DistributedEpochSampler` and averages gradients with ``DistributedDataParallel``. Rank 0 alone
logs, evaluates and writes checkpoints. Without those variables everything here is a no-op.
"""
from __future__ import annotations

import datetime
import logging
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler, Sampler

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DistInfo:
    """Where this process stands: ``rank`` of ``world_size`` processes, ``local_rank`` on its machine."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def dist_info_from_env() -> DistInfo:
    """The layout ``torchrun`` announces through ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` (single process if unset)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", str(rank)))
    if world < 1 or not 0 <= rank < world:
        raise RuntimeError(f"bad distributed environment: RANK={rank} WORLD_SIZE={world}")
    return DistInfo(rank, local, world)


def local_world_size(info: DistInfo) -> int:
    """The training processes on this machine: ``torchrun``'s ``LOCAL_WORLD_SIZE``; without it, all of them."""
    try:
        local = int(os.environ.get("LOCAL_WORLD_SIZE", info.world_size))
    except ValueError:
        local = info.world_size
    return max(1, min(local, info.world_size))


def init_distributed(device: torch.device, timeout_minutes: float = 30.0) -> DistInfo:
    """Join the process group when launched by ``torchrun`` (NCCL for CUDA devices, gloo otherwise)."""
    info = dist_info_from_env()
    if not info.enabled or (dist.is_available() and dist.is_initialized()):
        return info
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this PyTorch build")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=timeout_minutes))
    logger.info("process group: rank %d of %d (%s)", info.rank, info.world_size, backend)
    return info


def cleanup_distributed() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def any_true(flag: bool, device: torch.device) -> bool:
    """True on every process when ``flag`` is True on at least one (a no-op without a process group)."""
    if not is_distributed():
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


# What a collective raises when a peer process is gone: gloo's "Connection reset by peer" / "Connection closed by
# peer", NCCL's errors, a store that no longer answers.
_PEER_LOST = re.compile(r"connection (reset|closed|refused)|broken pipe|nccl|gloo|socket timeout|timed out", re.I)


def lost_peer(exc: BaseException) -> bool:
    """Whether ``exc``, raised in a distributed run, says that another process of it is gone (``kill -9``, the
    OOM killer, a lost node) rather than that this process failed."""
    distributed_error = getattr(dist, "DistError", None)
    if distributed_error is not None and isinstance(exc, distributed_error):
        return True
    return isinstance(exc, RuntimeError) and bool(_PEER_LOST.search(str(exc)))


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """``obj`` from process ``src`` on every process."""
    if not is_distributed():
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=src)
    return box[0]


def gather_objects(obj: Any) -> List[Any]:
    """``obj`` of every process, in rank order (``[obj]`` without a process group)."""
    if not is_distributed():
        return [obj]
    out: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def epoch_permutation(num_items: int, seed: int, epoch: int) -> List[int]:
    """The shuffle of one epoch, the same one :class:`yolo.data.loader.EpochShuffleSampler` draws."""
    generator = torch.Generator()
    generator.manual_seed(int(seed) * 1_000_003 + int(epoch))
    return torch.randperm(num_items, generator=generator).tolist()


class DistributedEpochSampler(DistributedSampler):
    """``DistributedSampler`` over the single-process shuffle.

    Every process draws the permutation a single process would (:func:`epoch_permutation`), pads it to a
    multiple of the world size and takes every ``world_size``-th index from its rank. So the ``k``-th
    global batch (``world_size`` per-process batches of ``b``) holds exactly the images of the ``k``-th
    batch of ``world_size * b`` in a single-process run with the same seed.
    """

    def __init__(self, dataset, num_replicas: Optional[int] = None, rank: Optional[int] = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed,
                         drop_last=drop_last)

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        order = epoch_permutation(n, self.seed, self.epoch) if self.shuffle else list(range(n))
        if self.drop_last:
            order = order[: self.total_size]
        else:
            pad = self.total_size - len(order)
            order = order + (order * (pad // max(n, 1) + 1))[:pad]
        return iter(order[self.rank: self.total_size: self.num_replicas])


class SkipSampler(Sampler[int]):
    """The indices of ``sampler`` after the first ``skip`` (to resume in the middle of an epoch)."""

    def __init__(self, sampler: Sampler, skip: int):
        self.sampler, self.skip = sampler, int(skip)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        for i, index in enumerate(self.sampler):
            if i >= self.skip:
                yield index

    def __len__(self) -> int:
        return max(0, len(self.sampler) - self.skip)


__all__ = ["DistInfo", "DistributedEpochSampler", "SkipSampler", "any_true", "barrier", "broadcast_object",
           "cleanup_distributed", "dist_info_from_env", "epoch_permutation", "gather_objects", "init_distributed",
           "lost_peer",
           "is_distributed"]
