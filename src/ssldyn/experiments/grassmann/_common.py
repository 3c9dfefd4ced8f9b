"""Shared pieces of the ``grassmann`` experiments: half-moons problems stacked over seeds, losses, fits.

Scaling convention used by every experiment except Fig. 2: losses (1)/(8) are *averaged* over the
n anchors (the paper writes sums); equivalently ``C = contrast_matrix(...)/n``. For the gradient
flow this only rescales time (the sum's flow is the mean's at n-fold speed); for explicit steps it
divides the step by n, so η here is η/n on the printed sum. The paper states no n: we read its
η = 0.01 (Sec. 3.2, 4.2) on the mean loss, where the eigenvalues of C are of order one and the
explicit steps are stable. Read on the printed sum at our n = 200 it would be η = 2 here, at which
Fig. 3's explicit steps of eq. (12) diverge (``NonFiniteLossError`` at step 7, quick scale).

Seeds as an ensemble axis (``batch_seeds``): the lab's seeds are stacked on a leading axis S
(one half-moons data set per seed, :func:`moons_batch`) and expanded to the members of an
ensemble with :func:`repeat_per_seed` (member order: seed-major, so members ``s·k … s·k + k − 1``
belong to seed ``s``). Member ``i`` of a batched run uses exactly the draws of a one-seed run
with the same seed (the ensemble contract, tested in ``tests/experiments/test_grassmann_*``).

Devices: data are drawn on the CPU (numpy / seeded CPU generators, the same draws on every
device) and moved to ``ctx.device``; results come back with ``.cpu()`` for tables and plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import torch
from pydantic import Field, PositiveFloat

from ssldyn.contract import Experiment, ExperimentConfig
from ssldyn.data.moons import half_moons
from ssldyn.dynamics.q_ode import eigh_ascending
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.objectives import contrast_matrix, simple_contrastive


class GrassmannExperiment(Experiment):
    """What every ``grassmann`` experiment declares alike: the paper, seeds as an ensemble axis, one thread.

    Each run computes all seeds of ``ctx.seeds`` at once (``batch_seeds``, see the module docstring) and
    is made of many small tensor ops, which one torch thread runs fastest (``threads = 1``).
    """

    paper = "grassmann"
    captions_file = Path(__file__).with_name("captions.md")  # the figures' captions, one section each
    batch_seeds = True
    threads = 1


def peak_of(terms: dict[str, float]) -> tuple[int, str]:
    """``(bytes, key)`` for ``peak_memory``: :data:`~ssldyn.memory.PROCESS_BASELINE` (measured here, max RSS of
    ``ssldyn run … --quick --jobs 1``: 0.36 GB (thm3) to 0.56 GB (fig2) where the tensors are a few MB) + the sum
    of ``terms`` (``config key -> bytes`` of the tensors that key sizes); ``key`` is the key of the largest term
    (named when a run is refused)."""
    key = max(terms, key=lambda k: terms[k])
    return int(PROCESS_BASELINE + sum(terms.values())), key


def moons_memory(n: int, n_seeds: int, d: int = 2, q: int = 1) -> float:
    """Peak bytes of :func:`moons_batch` beyond the views: matching the negatives to the anchors compares
    ``(S, n, q, n, d)`` coordinates (bool) and keeps an int8 copy of the ``(S, n, q, n)`` match, ``S·n²·q·(d + 2)``."""
    return float(n_seeds * n * n * q * (d + 2))


class MoonsConfig(ExperimentConfig):
    """The half-moons data of Example 1 (:func:`moons_batch`): ``n`` anchors, ``make_moons`` noise (neither is
    stated in the paper: our choices)."""

    n: Annotated[int, Field(ge=10)] = Field(200, description="half-moons anchors (not stated in the paper, our choice)")
    moons_noise: float = Field(0.05, ge=0, description="make_moons noise (not stated in the paper, our choice)")


class LiftedMoonsConfig(MoonsConfig):
    """The half-moons lifted to ``d = 2 + len(extra_stds)`` by independent centred Gaussian coordinates."""

    extra_stds: list[PositiveFloat] = Field(
        [0.3, 0.15], description="stds of the extra Gaussian coordinates of the lifted half-moons (d = 2 + len)"
    )


@dataclass(frozen=True)
class MoonsBatch:
    """Half-moons views of S seeds with their contrast matrices (eq. 7, mean over anchors).

    Attributes:
        x: anchors ``(S, n, d)``; x_pos: ``(S, n, p, d)``; x_neg: ``(S, n, q, d)``.
        labels: moon of each anchor ``(S, n)`` (CPU).
        C: ``contrast_matrix(x, x⁺, x⁻)/n`` ``(S, d, d)``; lam ``(S, d)`` ascending, V ``(S, d, d)``.
        neg_index: ``(S, n, q)``: the negatives are anchors, ``x_neg[s, i, k] = x[s, neg_index[s, i, k]]``
            (so a loss can reuse the anchors' embeddings instead of embedding the negatives again).
    """

    x: torch.Tensor
    x_pos: torch.Tensor
    x_neg: torch.Tensor
    labels: torch.Tensor
    C: torch.Tensor
    lam: torch.Tensor
    V: torch.Tensor
    neg_index: torch.Tensor

    @property
    def n(self) -> int:
        return self.x.shape[-2]

    @property
    def d(self) -> int:
        return self.x.shape[-1]

    def inputs(self) -> dict[str, torch.Tensor]:
        """The training data by name, for the NaN/inf check before training (``train_gd(inputs=...)``)."""
        return {"x": self.x, "x_pos": self.x_pos, "x_neg": self.x_neg, "C": self.C}


def moons_batch(
    n: int,
    noise: float,
    seeds: Sequence[int],
    extra_stds: Sequence[float] = (),
    noise_var: float = 0.1,
    device: torch.device | str | None = None,
) -> MoonsBatch:
    """One half-moons problem per seed, stacked: ``half_moons(n, noise, seed=s)`` for s in ``seeds``."""
    vs = [half_moons(n, noise=noise, seed=int(s), extra_stds=tuple(extra_stds), noise_var=noise_var, device=device)
          for s in seeds]  # fmt: skip
    x = torch.stack([v.x for v in vs])  # (S, n, d)
    x_pos = torch.stack([v.x_pos for v in vs])  # (S, n, p, d)
    x_neg = torch.stack([v.x_neg for v in vs])  # (S, n, q, d)
    C = contrast_matrix(x, x_pos, x_neg) / n  # (S, d, d)
    lam, V = eigh_ascending(C)  # (S, d), (S, d, d)
    same = (x_neg[:, :, :, None, :] == x[:, None, None, :, :]).all(-1)  # (S, n, q, n): x⁻ is a copy of an anchor
    if not bool(same.any(-1).all()):  # pragma: no cover - make_views draws negatives from the anchors
        raise RuntimeError("moons_batch: a negative is not one of the anchors")
    neg_index = same.to(torch.int8).argmax(-1)  # (S, n, q)
    return MoonsBatch(x, x_pos, x_neg, torch.stack([v.labels for v in vs]), C, lam, V, neg_index)


def repeat_per_seed(t: torch.Tensor, k: int) -> torch.Tensor:
    """Repeat each seed's slice ``k`` times along axis 0: ``(S, ...)`` -> ``(S·k, ...)`` (seed-major)."""
    return t.repeat_interleave(k, dim=0)


def mean_contrastive_loss(
    net, x: torch.Tensor, x_pos: torch.Tensor, x_neg: torch.Tensor, neg_index: torch.Tensor | None = None
) -> torch.Tensor:
    """Loss (1) averaged over anchors, one value per ensemble member ``(E,)``.

    ``x (E, n, d)`` (or ``(n, d)``, broadcast), ``x_pos (E, n, p, d)``, ``x_neg (E, n, q, d)``. With
    ``neg_index (E, n, q)`` (negatives that are anchors, :class:`MoonsBatch`) the negatives' embeddings
    are gathered from the anchors' instead of computed again (a third less work, the same loss).
    """
    n, npos = x.shape[-2], x_pos.shape[-3] * x_pos.shape[-2]
    if neg_index is None:
        views = (x, x_pos.flatten(-3, -2), x_neg.flatten(-3, -2))
    else:
        views = (x, x_pos.flatten(-3, -2))
    lead = torch.broadcast_shapes(*(t.shape[:-2] for t in views))
    out = net(torch.cat([t.expand(*lead, *t.shape[-2:]) for t in views], dim=-2))  # (E, n + n·p [+ n·q], z)
    u = out[..., :n, :]  # (E, n, z)
    up = out[..., n : n + npos, :].unflatten(-2, x_pos.shape[-3:-1])  # (E, n, p, z)
    if neg_index is None:
        un = out[..., n + npos :, :].unflatten(-2, x_neg.shape[-3:-1])  # (E, n, q, z)
    else:
        idx = neg_index.flatten(-2).expand(*u.shape[:-2], -1)  # (E, n·q)
        un = torch.gather(u, -2, idx[..., None].expand(*idx.shape, u.shape[-1])).unflatten(-2, neg_index.shape[-2:])
    return simple_contrastive(u, up, un) / n


def map_trace_loss(A: torch.Tensor, C: torch.Tensor) -> torch.Tensor:
    """Loss (8) of an end-to-end map: ``Tr(A C Aᵀ)`` for ``A (..., z, d)`` (``A = W2ᵀW1``, or any map
    ``u = Ax``) and ``C (..., d, d)`` -> ``(...)`` (``trace_loss(W1, W2, C)`` with ``A`` given)."""
    return ((A @ C) * A).sum((-2, -1))


def per_member_values(value: float | torch.Tensor, what: str) -> torch.Tensor:
    """A probe's value for batched input ``(...)`` (probes return a Python float only for one unbatched input)."""
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{what}: expected one value per member from batched input, got the float {value}")
    return value


def last_windows(values: np.ndarray, frac: float = 0.2) -> tuple[int, float, float]:
    """The last two windows of ``frac`` of a curve's finite values: ``(k, mean of the window before, mean of the
    last window)``, each window ``k = max(1, round(frac·n))`` values long; the means are NaN when the curve has
    fewer than ``2k`` finite values."""
    v = np.asarray(values, float)
    v = v[np.isfinite(v)]
    k = max(1, int(round(frac * len(v))))
    if len(v) < 2 * k:
        return k, float("nan"), float("nan")
    return k, float(v[-2 * k : -k].mean()), float(v[-k:].mean())


def window_drift(values: np.ndarray, frac: float = 0.2) -> float:
    """Relative change between the means of the last two windows of ``frac`` of a curve (:func:`last_windows`).

    ``|mean(last window) − mean(window before)| / |mean(last window)|``: a criterion of
    convergence that a bounded oscillation (e.g. GD chattering at a kink of the loss) does
    not trip, unlike the change between two single points.
    """
    _, before, last = last_windows(values, frac)
    if np.isnan(last):
        return float("nan")
    return float(abs(last - before) / max(abs(last), 1e-300))
