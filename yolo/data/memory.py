"""How much memory this machine can still give, container limits included.

``MemAvailable`` of ``/proc/meminfo`` is what the kernel can hand out without swapping. In a container the cgroup
limit is often lower: cgroup v2 ``memory.max - memory.current``, cgroup v1 ``memory.limit_in_bytes -
memory.usage_in_bytes``, in the process's own cgroup and every parent up to the root (a parent's limit binds too).
The page cache of files read (``inactive_file`` in ``memory.stat``) counts in the usage but the kernel drops it
before it kills anyone, so it is added back, as ``docker stats`` and the kubelet do. A process limit on its address
space (``ulimit -v``, ``RLIMIT_AS``) binds as well: the limit less the address space in use (``VmSize`` of
``/proc/self/status``). The least of all these is the figure; every file is optional (a bare machine has no cgroup
limit, another system no ``/proc``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

try:
    import resource
except ImportError:  # pragma: no cover - not on Windows
    resource = None

# cgroup v1 writes "no limit" as a page-rounded 2**63 - 1; anything this large is no limit.
NO_LIMIT = 1 << 60


@dataclass(frozen=True)
class Available:
    """``bytes`` of memory available, and ``where`` that figure comes from (for messages)."""

    bytes: int
    where: str


def _read_int(path: Path) -> Optional[int]:
    """The integer in a one-value file (``max`` and missing or unreadable files: None)."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _stat_value(path: Path, key: str) -> int:
    """``key``'s value in a ``memory.stat`` file (0 when absent)."""
    try:
        for line in path.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == key and value.strip().isdigit():
                return int(value)
    except (OSError, UnicodeDecodeError):
        pass
    return 0


def meminfo_available(meminfo: Path = Path("/proc/meminfo")) -> Optional[int]:
    """``MemAvailable`` in bytes (None where the file or the line is missing)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                parts = line.split()
                return int(parts[1]) * (1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1)
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        pass
    return None


def _own_cgroups(proc_cgroup: Path) -> Dict[str, str]:
    """``{"v2": path}`` and/or ``{"v1": path}`` from ``/proc/self/cgroup`` (``0::/a/b``, ``4:memory:/a/b``)."""
    found: Dict[str, str] = {}
    try:
        lines = proc_cgroup.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            found["v2"] = path
        elif "memory" in controllers.split(","):
            found["v1"] = path
    return found


def _folders_up(root: Path, own: str) -> List[Path]:
    """The process's cgroup folder under ``root`` and each parent up to ``root``. Inside a container the path in
    ``/proc/self/cgroup`` may be the host's, absent from the container's view: then ``root`` alone."""
    parts = [p for p in own.split("/") if p]
    folders = [root.joinpath(*parts[:n]) for n in range(len(parts), 0, -1)]
    return [f for f in folders if f.is_dir()] + [root]


def cgroup_available(cgroup_root: Path = Path("/sys/fs/cgroup"),
                     proc_cgroup: Path = Path("/proc/self/cgroup")) -> Optional[Available]:
    """The least headroom (limit - usage + reclaimable page cache) of the memory limits on this process's cgroups,
    v2 and v1; None when no limit is set."""
    own = _own_cgroups(proc_cgroup)
    best: Optional[Available] = None
    layouts = []
    if "v2" in own or (cgroup_root / "memory.max").exists():
        layouts.append((cgroup_root, own.get("v2", "/"), "memory.max", "memory.current", "inactive_file"))
    if "v1" in own or (cgroup_root / "memory").is_dir():
        layouts.append((cgroup_root / "memory", own.get("v1", "/"), "memory.limit_in_bytes",
                        "memory.usage_in_bytes", "total_inactive_file"))
    for root, path, limit_file, usage_file, cache_key in layouts:
        if not root.is_dir():
            continue
        for folder in _folders_up(root, path):
            limit, usage = _read_int(folder / limit_file), _read_int(folder / usage_file)
            if limit is None or usage is None or limit >= NO_LIMIT:
                continue
            room = max(0, limit - usage + _stat_value(folder / "memory.stat", cache_key))
            room = min(room, limit)
            if best is None or room < best.bytes:
                best = Available(room, f"the memory limit of cgroup {folder} ({limit_file})")
    return best


def address_space_available(limit: Optional[int] = None,
                            status: Path = Path("/proc/self/status")) -> Optional[Available]:
    """What the process's address-space limit (``ulimit -v``: ``limit`` bytes, by default the soft
    ``RLIMIT_AS``) leaves: the limit less ``VmSize`` (the address space in use); None without a limit, or
    where the size in use cannot be read."""
    if limit is None:
        if resource is None:
            return None
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit < 0 or limit >= NO_LIMIT:  # RLIM_INFINITY is -1
        return None
    used = None
    try:
        for line in status.read_text().splitlines():
            if line.startswith("VmSize:"):
                parts = line.split()
                used = int(parts[1]) * (1024 if len(parts) > 2 and parts[2].lower() == "kb" else 1)
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        return None
    if used is None:
        return None
    return Available(max(0, limit - used), f"the address-space limit of this process (ulimit -v {limit // 1024})")


def available_memory(meminfo: Path = Path("/proc/meminfo"), cgroup_root: Path = Path("/sys/fs/cgroup"),
                     proc_cgroup: Path = Path("/proc/self/cgroup"),
                     status: Path = Path("/proc/self/status")) -> Optional[Available]:
    """The memory this process can still take: the least of ``MemAvailable``, the cgroup headroom and what the
    address-space limit leaves (None when none can be read, as on a system without ``/proc``)."""
    figures = []
    space = address_space_available(status=status)
    if space is not None:
        figures.append(space)
    machine = meminfo_available(meminfo)
    if machine is not None:
        figures.append(Available(machine, "MemAvailable in /proc/meminfo"))
    limit = cgroup_available(cgroup_root, proc_cgroup)
    if limit is not None:
        figures.append(limit)
    return min(figures, key=lambda a: a.bytes) if figures else None


__all__ = ["Available", "address_space_available", "available_memory", "cgroup_available", "meminfo_available"]
