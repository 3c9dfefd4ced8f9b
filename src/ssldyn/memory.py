"""Memory of the machine, for refusing work that cannot fit before any of it is done.

At the package root (like :mod:`ssldyn.errors`) so that every layer can use it: the data loaders
check a file's declared size, the kernels the size of a kernel, the lab an experiment's
estimated peak (:meth:`ssldyn.lab.Experiment.peak_memory`).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["PROCESS_BASELINE", "available_memory", "total_memory", "fmt_bytes", "peak_rss", "reset_peak_rss"]

#: bytes resident in a process computing a run before its own tensors: the interpreter, torch, numpy /
#: scipy / pandas / scikit-learn, matplotlib, the lab and the figures. Measured (peak resident size of
#: a quick run whose tensors are a few MB, in a fresh interpreter): 0.43–0.52 GB, once 0.62 GB for the
#: same run under a loaded test session (allocator arenas); the experiments' estimates
#: (``Experiment.peak_memory``) start from this value and add what their config sizes. (The estimates
#: quoted beside the measurements in the experiments' docstrings were computed with the earlier per-paper
#: baselines of 0.5–0.6 GB: today's are 0.15–0.25 GB higher; the measured values stand.)
PROCESS_BASELINE = 750_000_000


def _meminfo(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_limit() -> int | None:
    """The memory limit of this process's cgroup (v2 ``memory.max`` or v1 ``limit_in_bytes``), if any."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:
            return int(raw)
    return None


def available_memory(device: torch.device | str | None = None) -> int:
    """Bytes free for new tensors on ``device``: ``MemAvailable`` of the host for the CPU (capped by
    the cgroup limit), the free memory of the GPU for CUDA (``torch.cuda.mem_get_info``)."""
    return _device_memory(device, cuda_index=0, meminfo="MemAvailable", pages="SC_AVPHYS_PAGES")


def total_memory(device: torch.device | str | None = None) -> int:
    """Bytes of memory of ``device``: the host's RAM (capped by the cgroup limit) or the GPU's."""
    return _device_memory(device, cuda_index=1, meminfo="MemTotal", pages="SC_PHYS_PAGES")


def _device_memory(device: torch.device | str | None, *, cuda_index: int, meminfo: str, pages: str) -> int:
    """One of ``torch.cuda.mem_get_info``'s (free, total) on a GPU; on the host the ``/proc/meminfo``
    entry (else ``sysconf`` pages), capped by the cgroup limit; 2⁶² (no limit) where nothing says."""
    dev = torch.device(device if device is not None else "cpu")
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[cuda_index])
    host = _meminfo(meminfo)
    if host is None:
        try:
            host = int(os.sysconf(pages) * os.sysconf("SC_PAGE_SIZE"))
        except (ValueError, OSError, AttributeError):
            return 2**62  # unknown: no limit
    limit = _cgroup_limit()
    return min(host, limit) if limit is not None else host


def fmt_bytes(b: float) -> str:
    """Bytes in a readable unit, with the exact count: ``"4.77 GiB (5120000000 bytes)"``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= size:
            return f"{b / size:.3g} {unit} ({int(b)} bytes)"
    return f"{int(b)} bytes"


def peak_rss() -> int | None:
    """Bytes: the peak resident set size of this process (``VmHWM`` of ``/proc/self/status``, else
    ``getrusage``'s ``ru_maxrss``); None where neither is available. Since :func:`reset_peak_rss`,
    where that worked."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        import sys

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(rss if sys.platform == "darwin" else rss * 1024)  # bytes on macOS, KiB on Linux
    except (ImportError, OSError, ValueError):
        return None


def reset_peak_rss() -> bool:
    """Start :func:`peak_rss` afresh from the current resident size (Linux: ``5`` written to
    ``/proc/self/clear_refs``); False where the kernel does not allow it (the peak is then the
    process's since it started)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
