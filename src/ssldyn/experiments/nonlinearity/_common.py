"""What the `nonlinearity` experiments share: the peak-memory baseline of a run (issue 32, item 11).

Every experiment estimates its peak memory from its config before computing (``peak_memory(cfg,
n_seeds) -> (bytes, key)``, :func:`ssldyn.lab.runner.estimate_memory`): :data:`BASE_MEMORY` plus the
dominant tensors the config asks for, each times the number of live copies measured (max RSS of
``ssldyn run EXP --quick --jobs 1 --workers 1`` with the driving key scaled up to ~1–2 GB).
"""

from __future__ import annotations

__all__ = ["BASE_MEMORY", "F32", "F64"]

#: the process before its tensors: interpreter, torch, numpy/scipy/pandas, matplotlib, the lab and the
#: figures. Measured (max RSS) 0.464–0.509 GB for the quick runs whose tensors are a few MB.
BASE_MEMORY = 550_000_000
F32, F64 = 4, 8  # bytes per element
