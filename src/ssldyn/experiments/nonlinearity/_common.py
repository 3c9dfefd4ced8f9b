"""What the `nonlinearity` experiments share: their base class, the bytes per element of the peak-memory estimates (issue 32,
item 11) and the conditional-independence model with two discriminative patterns (Thm. 5, App. D).

Every experiment estimates its peak memory from its config before computing (``peak_memory(cfg,
n_seeds) -> (bytes, key)``, :func:`ssldyn.lab.runner.estimate_memory`): :data:`ssldyn.memory.PROCESS_BASELINE`
(measured here, max RSS, 0.464–0.509 GB for the quick runs whose tensors are a few MB) plus the dominant
tensors the config asks for, each times the number of live copies measured (max RSS of
``ssldyn run EXP --quick --jobs 1 --workers 1`` with the driving key scaled up to ~1–2 GB).
"""

from __future__ import annotations

from pathlib import Path

import torch

from ssldyn.contract import Experiment
from ssldyn.data.latent import TwoRFModel

__all__ = ["ACT_LABELS", "F32", "F64", "NonlinearityExperiment", "discriminative_model"]

F32, F64 = 4, 8  # bytes per element
#: the activations' names in figures ("quadratic" is also a loss: the activation is x²)
ACT_LABELS = {
    "linear": "linear",
    "relu": "ReLU",
    "leaky_relu": "LeakyReLU",
    "quadratic": "x²",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
}


class NonlinearityExperiment(Experiment):
    """What the ``nonlinearity`` experiments declare alike: the paper, and one torch thread.

    The runs are made of many small tensor ops, which one torch thread runs fastest (``threads = 1``); the
    token-grid experiments (Fig. 4, 5, 10, 11, Table 1) derive from
    :class:`~ssldyn.experiments.nonlinearity.token_grid.TokenGridExperiment`, which keeps the process setting.
    """

    paper = "nonlinearity"
    captions_file = Path(__file__).with_name("captions.md")  # the figures' captions, one section each
    threads = 1


def discriminative_model(
    K: int, P: int, p_disc: float, p_other: float, scales: torch.Tensor | None = None
) -> TwoRFModel:
    """The conditional-independence model (Assumption 2, exact per-RF populations) of Thm. 5 and App. D.

    Each of the ``K`` RFs has ``P`` orthonormal patterns (the standard basis, times ``scales[k]`` when given,
    ``(K,)``); pattern 0 has probability ``p_disc`` given ``z = 1`` and ``p_other`` given ``z = 0``, pattern 1
    the reverse (the discriminative patterns), the other ``P − 2`` share the rest equally for both ``z``;
    ``z`` is uniform on {0, 1}.
    """
    rest = (1.0 - p_disc - p_other) / (P - 2)
    pz1 = torch.tensor([p_disc, p_other] + [rest] * (P - 2), dtype=torch.float64)  # (P,)
    pz0 = torch.tensor([p_other, p_disc] + [rest] * (P - 2), dtype=torch.float64)
    pats = torch.eye(P, dtype=torch.float64).expand(K, P, P).clone()  # (K, P, P)
    if scales is not None:
        pats = pats * scales[:, None, None]
    return TwoRFModel(pats, torch.stack([torch.stack([pz0, pz1])] * K), torch.tensor([0.5, 0.5], dtype=torch.float64))
