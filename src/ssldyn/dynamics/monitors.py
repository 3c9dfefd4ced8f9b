"""The papers' monitors on a model being trained: probes bound to the model and a fixed probe set.

Each monitor is a probe of the dynamics contract — ``monitor(z) -> float`` (or ``(E,)`` for an
ensemble) — that ignores the observable it is given and measures the model itself, in eval
mode, on a fixed probe set ``x`` (views are drawn once, with ``seed``, so values at different
steps are comparable). A monitor measures several numbers from one computation;
``monitor.probes(prefix)`` gives one probe per number (they share the computation at a step),
ready for ``train_ssl(..., probes={**mon.probes("ntk"), ...})``; ``monitor.history`` keeps the
arrays (spectra, eigenvectors) of every call.

* :class:`NTKClassBlocks` — the class block structure of the model's empirical NTK (``variational``
  eq. 12, Thm. 4.5): the class contrast and permutation z-score of
  :func:`ssldyn.kernels.block_structure` (≈ 0 for labels unrelated to the kernel).
* :class:`ViewAlignment` — alignment and uniformity (Wang & Isola 2020) of two fixed views.
* :class:`ContrastSpectrum` — the contrast matrix ``C`` of ``grassmann`` eq. (7) of the model's
  features and, for a linear head on them, the q-ODE's prediction (Thm. 2–3, Conj. 2): the head's
  row space goes to the span of the eigenvectors of the most negative eigenvalues of ``C``.
* :class:`AlphaCLSpectrum` — the contrastive covariance ``C_α`` of ``nonlinearity`` eq. (3) of the
  model's features: its top eigenvalues, and how far a linear head has turned to its top
  eigenvectors (the fixed points of the linear α-CL dynamics, Sec. 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args

import numpy as np
import torch
from torch import Tensor, nn

from ssldyn.checks import choice, integer
from ssldyn.dynamics.common import eval_mode, module_device, module_dtype, to_module
from ssldyn.dynamics.q_ode import q_from_map, solve_reference
from ssldyn.dynamics.ssl import _features
from ssldyn.kernels import block_structure, empirical_ntk
from ssldyn.kernels.ntk import NTKImplementation
from ssldyn.objectives import contrast_matrix, contrastive_covariance
from ssldyn.probes.cluster import alignment, uniformity
from ssldyn.probes.subspace import projection_norms

__all__ = ["NTKClassBlocks", "ViewAlignment", "ContrastSpectrum", "AlphaCLSpectrum"]

Augment = Callable[[Tensor, torch.Generator], Tensor]


class _ModelMonitor:
    """A probe bound to a model: ``values()`` computes every number once per step (see :meth:`values`)."""

    keys: tuple[str, ...] = ()

    def __init__(self, model: nn.Module, head: nn.Module | None) -> None:
        if not isinstance(model, nn.Module):
            raise ValueError(f"{type(self).__name__}: model must be an nn.Module, got {type(model).__name__}")
        self.model, self.head = model, head
        self.history: list[dict[str, Any]] = []
        self._last_obs: Any = None
        self._last_versions: tuple[tuple[int, int], ...] = ()
        self._read: set[str] = set()  # the keys read from the cache since it was computed
        self._cache: dict[str, float | Tensor] | None = None

    def __call__(self, z: Any = None) -> float | Tensor:
        """The first of :attr:`keys` (``z``, the flow's observable, only identifies the step)."""
        return self._values(z, self.keys[:1])[self.keys[0]]

    def values(self, z: Any = None) -> dict[str, float | Tensor]:
        """Every number of the monitor: floats for a plain model, ``(E,)`` tensors for an ensemble.

        The probes of one step (:meth:`probes`, each key read once, with the same observable object ``z``)
        share one computation. It is recomputed for ``z=None``, another observable, a key read a second time
        (the next step's probes: flows such as ``train_gd`` or the ensemble trainers observe the same object at
        every step, and a fused optimizer step moves no version counter) or a changed model (the in-place
        version counter of a parameter or buffer of the model or head moved). A call of ``values`` reads every key.
        """
        return self._values(z, self.keys)

    def _values(self, z: Any, read: tuple[str, ...]) -> dict[str, float | Tensor]:
        versions = self._versions()
        if (
            z is None
            or z is not self._last_obs
            or self._cache is None
            or not self._read.isdisjoint(read)
            or versions != self._last_versions
        ):
            self._cache = self._compute()
            self._last_obs, self._last_versions, self._read = z, versions, set()
        self._read.update(read)
        return self._cache

    def _versions(self) -> tuple[tuple[int, int], ...]:
        """The identity and in-place version counter of every parameter and buffer of the model and head."""
        mods = [self.model] if self.head is None else [self.model, self.head]
        return tuple((id(t), t._version) for m in mods for t in (*m.parameters(), *m.buffers()))

    def probes(self, prefix: str | None = None) -> dict[str, Callable[[Any], float | Tensor]]:
        """``{f"{prefix}_{key}": probe}`` for every key (prefix default: the class name in lower case)."""
        pre = prefix if prefix is not None else type(self).__name__.lower()
        return {f"{pre}_{k}": (lambda z, k=k: self._values(z, (k,))[k]) for k in self.keys}

    def _compute(self) -> dict[str, float | Tensor]:  # pragma: no cover - overridden
        raise NotImplementedError

    def _net(self) -> nn.Module:
        return nn.Sequential(self.model, self.head) if self.head is not None else self.model


def _fixed_views(augment: Augment | None, x: Tensor, seed: int, k: int) -> list[Tensor]:
    g = torch.Generator().manual_seed(int(seed))
    if augment is None:
        return [x] * k
    return [augment(x, g) for _ in range(k)]


def _members(t: Tensor, per_sample_dims: int) -> Tensor:
    """Add a member axis to a plain model's output: ``(n, p)`` -> ``(1, n, p)``."""
    return t.unsqueeze(0) if t.dim() == per_sample_dims else t


def _out(values: list[float], ensemble: bool) -> float | Tensor:
    return torch.tensor(values, dtype=torch.float64) if ensemble else float(values[0])


def _per_member_map(A: Tensor, E: int) -> Tensor:
    """A linear head's map ``(z, p)`` (one for every member) or ``(E, z, p)`` as ``(E, z, p)``."""
    return A if A.dim() == 3 else A.unsqueeze(0).expand(E, -1, -1)


def _head_alignment(V: Tensor, A: Tensor) -> list[float]:
    """Per member, the mean over the first ``z`` columns ``v_k`` of ``V (E, p, p)`` of ``‖P_{row(A)} v_k‖``,
    the norm of their projection onto the row space of the head ``A (E, z, p)`` (1: the head spans them)."""
    z = A.shape[-2]
    return projection_norms(V[..., :z], A.mT).mean(-1).tolist()  # (E,): every member in one batched call


def _linear_map(head: nn.Module, p: int, like: Tensor, name: str) -> Callable[[], Tensor]:
    """The linear part ``A`` of a linear (affine) head, ``(z, p)`` or ``(E, z, p)``: ``A e_k = head(e_k) − head(0)``.

    Checked once to be linear (``head(a + b) − head(0) = [head(a) − head(0)] + [head(b) − head(0)]``).
    """

    def measure(inputs: Tensor) -> Tensor:
        with eval_mode(head), torch.no_grad():
            return head(inputs)

    a, b = torch.randn(2, 3, p, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a, b = a.to(like), b.to(like)
    zero = torch.zeros(1, p, dtype=like.dtype, device=like.device)
    f0 = measure(zero)
    lhs = measure(a + b) - f0
    rhs = (measure(a) - f0) + (measure(b) - f0)
    if not torch.allclose(lhs, rhs, rtol=1e-3, atol=1e-4 * float(rhs.abs().max().clamp_min(1e-12))):
        raise ValueError(
            f"{name}: head is not linear (head(a + b) != head(a) + head(b) − head(0)); the q-ODE / α-CL head "
            "predictions need a linear head such as nn.Linear; pass head=None to monitor the spectrum only"
        )

    def A() -> Tensor:
        eye = torch.eye(p, dtype=like.dtype, device=like.device)
        out = measure(eye) - measure(zero)  # (p, z) or (E, p, z)
        return out.mT.to(torch.float64)  # (z, p) or (E, z, p)

    return A


# --------------------------------------------------------------------------- NTK
class NTKClassBlocks(_ModelMonitor):
    """Class block structure of the model's empirical NTK on a labelled probe set.

    At each call: ``K = empirical_ntk(net, None, x, mode="trace")`` (``variational`` eq. 12, the
    trace over outputs, ``(n, n)``; the model in eval mode, ``net = head ∘ model`` when a head is
    given — the kernel of the function the loss sees) and
    :func:`ssldyn.kernels.block_structure` of it with ``labels``: ``contrast`` (within-class minus
    between-class cosine-normalised kernel, in standard deviations; ≈ 0 for labels unrelated to
    the kernel) and, with ``n_perm > 0``, its permutation z-score ``z``. Thm. 4.5 says the kernel
    of a network is block-diagonal by cluster on clustered data; on real data these numbers say
    how much the kernel that drives the function-space flow (Prop. 4.1) groups the classes.

    Args:
        model: the network (plain or ensemble).
        x: probe inputs ``(n, ...)`` (keep n small: the kernel costs n Jacobians).
        labels: ``(n,)`` classes.
        head: optional head applied after the model.
        n_perm: label shuffles of the z-score (0: contrast only).
        shuffled_control: also report the same statistics for one fixed random relabelling
            (keys ``contrast_shuffled``, ``z_shuffled``) from the same kernel — a negative control
            that should stay near 0.
        seed: seed of the shuffles (the same shuffles at every call).
        implementation, chunk_size: passed to :func:`ssldyn.kernels.empirical_ntk`.

    ``history`` holds ``{"contrast", "within", "between"}`` and every key (``"z"`` with ``n_perm > 0``, the
    ``*_shuffled`` keys with ``shuffled_control``) per call (member 0 … E−1 as lists).
    """

    def __init__(
        self,
        model: nn.Module,
        x: Tensor,
        labels: Any,
        *,
        head: nn.Module | None = None,
        n_perm: int = 200,
        shuffled_control: bool = False,
        seed: int = 0,
        implementation: NTKImplementation = "jacobian",
        chunk_size: int | None = 32,
    ) -> None:
        super().__init__(model, head)
        self.x = torch.as_tensor(x)
        self.labels = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels))
        if self.labels.shape != (self.x.shape[0],):
            raise ValueError(
                f"NTKClassBlocks: labels must have shape ({self.x.shape[0]},) like x, got {tuple(self.labels.shape)}"
            )
        self.n_perm, self.seed = integer(n_perm, "n_perm", where="NTKClassBlocks", minimum=0), int(seed)
        choice(implementation, "implementation", get_args(NTKImplementation), where="NTKClassBlocks")
        self.implementation: NTKImplementation = implementation
        self.chunk_size = chunk_size
        base = ("contrast", "z") if self.n_perm > 0 else ("contrast",)
        self.shuffled = None
        if shuffled_control:
            order = torch.randperm(len(self.labels), generator=torch.Generator().manual_seed(self.seed + 1))
            self.shuffled = self.labels[order]
        self.keys = base + tuple(f"{k}_shuffled" for k in base) if shuffled_control else base

    def kernel(self) -> Tensor:
        """The traced empirical NTK ``(n, n)`` (or ``(E, n, n)``) of the model now, in eval mode."""
        x = to_module(self.x, module_device(self.model), module_dtype(self.model))  # floating inputs: the model's dtype
        with eval_mode(self.model, self.head):
            return empirical_ntk(
                self._net(), None, x, mode="trace", implementation=self.implementation, chunk_size=self.chunk_size
            ).detach()

    def _compute(self) -> dict[str, float | Tensor]:
        K = self.kernel()
        ensemble = K.dim() == 3

        def stats(labels: Tensor, suffix: str) -> list[dict[str, float]]:
            gen = torch.Generator().manual_seed(self.seed)
            res = [block_structure(k, labels, n_perm=self.n_perm, generator=gen) for k in _members(K, 2)]
            return [{f"{key}{suffix}": v for key, v in r.items()} for r in res]

        per = stats(self.labels, "")
        if self.shuffled is not None:
            per = [{**a, **b} for a, b in zip(per, stats(self.shuffled, "_shuffled"))]
        kept = ("contrast", "within", "between", *self.keys)
        self.history.append({key: [s[key] for s in per] for key in dict.fromkeys(kept)})
        return {key: _out([s[key] for s in per], ensemble) for key in self.keys}


# --------------------------------------------------------------------------- alignment / uniformity
class ViewAlignment(_ModelMonitor):
    """Alignment ``E‖u − u'‖²`` of two fixed views and uniformity ``log E e^{−2‖u_i − u_j‖²}`` of view 1.

    Wang & Isola (2020), on the L2-normalised outputs of ``head ∘ model`` (``model`` without a
    head) in eval mode; :func:`ssldyn.probes.alignment` and :func:`ssldyn.probes.uniformity`.
    The two views of ``x`` are drawn once with ``seed``.
    """

    keys = ("alignment", "uniformity")

    def __init__(
        self, model: nn.Module, x: Tensor, augment: Augment | None, *, head: nn.Module | None = None, seed: int = 0
    ) -> None:
        super().__init__(model, head)
        self.v1, self.v2 = _fixed_views(augment, torch.as_tensor(x), seed, 2)

    def _compute(self) -> dict[str, float | Tensor]:
        z1 = _features(self.model, self.v1, head=self.head)  # (n, d) or (E, n, d)
        z2 = _features(self.model, self.v2, head=self.head)
        ensemble = z1.dim() == 3
        a = [alignment(u, v) for u, v in zip(_members(z1, 2), _members(z2, 2))]
        u = [uniformity(m) for m in _members(z1, 2)]
        return {"alignment": _out(a, ensemble), "uniformity": _out(u, ensemble)}


# --------------------------------------------------------------------------- grassmann: contrast matrix, q-ODE
class ContrastSpectrum(_ModelMonitor):
    r"""Spectrum of the contrast matrix of the model's features (``grassmann`` eq. 7) and the q-ODE's prediction.

    With the features ``h = model(x)``, ``h⁺ = model(T x)`` (a fixed augmented view) and
    ``h⁻_i = h⁺_{π(i)}`` (the view of another sample, a fixed derangement π),

    .. math:: C = \frac{1}{n}\,\mathrm{sym}\Big(\sum_i h_i (h^-_i - h^+_i)^\top\Big) = V \Lambda V^\top

    (eigenvalues ascending). A linear head ``u = A h`` on these features minimising the trace
    loss ``Tr(A C Aᵀ)`` (eq. 8) under orthogonality constraints follows the q-ODE (eq. 9,
    Thm. 2) in ``q = Vᵀ Aᵀ``; its fixed point (Thm. 3 for z = 1, Conj. 2) is the span of the
    eigenvectors of the ``z`` most negative eigenvalues — when ``C`` has ``z`` of them, else the
    embedding collapses (Thm. 3). Keys: ``lambda_min`` (λ₁), ``n_negative`` (number of λ < 0) and,
    with a linear ``head``, ``qode_alignment`` = mean over k ≤ z of ``‖P_{span(Aᵀ)} v_k‖`` (1: the
    head spans the predicted subspace). :meth:`predict` integrates eq. (9) from the head's current
    ``q``. ``history`` holds ``{"eigenvalues": (E, p), "q": (E, p, z) or None}`` per call.

    Args:
        model: the network (plain or ensemble); its outputs are the features ``h``.
        x: probe inputs ``(n, ...)``.
        augment: ``augment(x, generator) -> view`` for ``x⁺`` (None: ``x⁺ = x``).
        head: optional linear head ``(…, p) -> (…, z)`` (``nn.Linear``, an ensemble linear, or any
            affine module; checked to be linear).
        seed: seed of the view and of π.
    """

    def __init__(
        self, model: nn.Module, x: Tensor, augment: Augment | None, *, head: nn.Module | None = None, seed: int = 0
    ) -> None:
        super().__init__(model, None)
        x = torch.as_tensor(x)
        n = x.shape[0]
        if n < 2:
            raise ValueError(f"ContrastSpectrum: x needs at least 2 samples, got shape {tuple(x.shape)}")
        (self.x_pos,) = _fixed_views(augment, x, seed, 1)
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed) + 1))
        pi = torch.empty_like(perm)
        pi[perm] = perm.roll(-1)  # a derangement: π(i) ≠ i
        self.x, self.x_neg, self.pi = x, self.x_pos[pi], pi
        self._h: Tensor | None = None
        self._A = None
        if head is not None:
            h = _features(model, x[:1])
            self._A = _linear_map(head, h.shape[-1], h, "ContrastSpectrum")
        self.keys = ("lambda_min", "n_negative", "qode_alignment") if head is not None else ("lambda_min", "n_negative")
        self._state: tuple[Tensor, Tensor, Tensor | None, Tensor] | None = None

    def matrix(self) -> Tensor:
        """``C`` of eq. (7) averaged over the n anchors, float64 ``(p, p)`` or ``(E, p, p)``."""
        h, hp, hn = (_features(self.model, v).to(torch.float64) for v in (self.x, self.x_pos, self.x_neg))
        self._h = h
        return contrast_matrix(h, hp, hn) / h.shape[-2]

    def _compute(self) -> dict[str, float | Tensor]:
        C = self.matrix()
        ensemble = C.dim() == 3
        lam, V = torch.linalg.eigh(C)  # ascending: v₁ has the most negative eigenvalue
        lam_m, V_m = _members(lam, 1), _members(V, 2)  # (E, p), (E, p, p)
        out: dict[str, float | Tensor] = {
            "lambda_min": _out(lam_m[:, 0].tolist(), ensemble),
            "n_negative": _out((lam_m < 0).sum(-1).double().tolist(), ensemble),
        }
        q = None
        if self._A is not None:
            A_m = _per_member_map(self._A(), V_m.shape[0])  # (E, z, p)
            q = q_from_map(A_m, V_m)  # (E, p, z): q = Vᵀ Aᵀ, row i = u(v_i)
            out["qode_alignment"] = _out(_head_alignment(V_m, A_m), ensemble)
        assert self._h is not None  # set by matrix()
        self._state = (lam_m, V_m, q, self._h)
        self.history.append({"eigenvalues": lam_m.cpu().numpy(), "q": None if q is None else q.cpu().numpy()})
        return out

    def predict(self, t: float | list[float], member: int = 0) -> tuple[Tensor, Tensor]:
        """Integrate the q-ODE (eq. 9) from the head's ``q`` at the last call, with ``Λ`` of that call.

        Returns ``(q_t, u_t)``: ``q`` at the times ``t`` ``(T, p, z)`` (scipy DOP853, float64,
        :func:`ssldyn.dynamics.q_ode.solve_reference`) and the predicted head outputs on the probe
        features ``u_t(h) = q_tᵀ Vᵀ h`` ``(T, n, z)`` ("New Datapoint", Sec. 4.1). Exact for a head
        ``u = W2ᵀ W1 h`` with ``W1ᵀW1 = I``, ``W2ᵀW2 = I`` trained by gradient flow on the trace
        loss with the features frozen (Thm. 2); time ``t`` ↔ GD step ``t/η``.
        """
        if self._state is None or self._state[2] is None:
            raise ValueError("ContrastSpectrum.predict: needs a linear head and a call of the monitor first")
        lam, V, q, h = self._state
        assert q is not None
        times = [float(s) for s in np.atleast_1d(np.asarray(t, dtype=np.float64))]
        if min(times) < 0:
            raise ValueError(f"ContrastSpectrum.predict: times must be >= 0, got {times}")
        grid = np.unique(np.asarray([0.0, *times]))  # solve_reference integrates from grid[0] = 0
        sol = solve_reference(q[member], lam[member], t=grid)  # FlowResult: snapshots "q" at the grid times
        _, qs = sol.trajectory.stack("q", tensors=True)  # (len(grid), p, z) float64
        qt = qs[torch.as_tensor(np.searchsorted(grid, times))]  # (T, p, z)
        hm = _members(h, 2)[member].cpu()  # (n, p)
        return qt, hm @ V[member].cpu() @ qt  # (T, n, z): u = qᵀ Vᵀ h per row


# --------------------------------------------------------------------------- nonlinearity: α-CL covariance
class AlphaCLSpectrum(_ModelMonitor):
    r"""Top eigenpairs of the contrastive covariance of the model's features (``nonlinearity`` eq. 3).

    With two fixed views of the probe set, ``f = model(T x)``, ``f' = model(T' x)``,
    ``C_α[f] = (1/2N²) Σ_ij α_ij [(f_i − f_j)(f_i − f_j)ᵀ − (f_i − f_{i'})(f_i − f_{i'})ᵀ]``
    (:func:`ssldyn.objectives.contrastive_covariance`). A linear layer ``w`` on these features
    trained by α-CL ascends ``½ wᵀ C_α w`` on the sphere (Sec. 3, eq. 7 with a linear
    activation): its stable fixed points are the top eigenvectors of ``C_α``. Keys: ``lambda_1``,
    ``gap`` (λ₁ − λ₂) and, with a linear ``head`` ``(z, p)``, ``head_alignment`` = mean over the top
    ``z`` eigenvectors of their projection norm onto the head's row space. ``history`` holds
    ``{"eigenvalues": (E, p) descending, "top": (E, p, k) top-k eigenvectors}`` per call.

    Args:
        model: the network (plain or ensemble).
        x: probe inputs ``(n, ...)``.
        augment: ``augment(x, generator) -> view`` (None: identical views, plain covariance).
        head: optional linear head on the features.
        alpha: pairwise importance: None (α ≡ 1, the quadratic loss), an ``(n, n)`` tensor, or a
            callable ``alpha(f, f') -> (n, n)`` / ``(E, n, n)`` evaluated on the features (e.g.
            :func:`ssldyn.objectives.alpha_infonce` of normalised features).
        k: eigenvectors kept in ``history``.
        seed: seed of the views.
    """

    def __init__(
        self,
        model: nn.Module,
        x: Tensor,
        augment: Augment | None,
        *,
        head: nn.Module | None = None,
        alpha: Tensor | Callable[[Tensor, Tensor], Tensor] | None = None,
        k: int = 3,
        seed: int = 0,
    ) -> None:
        super().__init__(model, None)
        self.v1, self.v2 = _fixed_views(augment, torch.as_tensor(x), seed, 2)
        self.alpha, self.k = alpha, int(k)
        self._A = None
        if head is not None:
            h = _features(model, self.v1[:1])
            self._A = _linear_map(head, h.shape[-1], h, "AlphaCLSpectrum")
        self.keys = ("lambda_1", "gap", "head_alignment") if head is not None else ("lambda_1", "gap")

    def matrix(self) -> Tensor:
        """``C_α[f]`` of the features now, float64 ``(p, p)`` or ``(E, p, p)``."""
        f1 = _features(self.model, self.v1).to(torch.float64)
        f2 = _features(self.model, self.v2).to(torch.float64)
        alpha = self.alpha(f1, f2).to(torch.float64) if callable(self.alpha) else self.alpha
        return contrastive_covariance(f1, f2, alpha=alpha)

    def _compute(self) -> dict[str, float | Tensor]:
        C = self.matrix()
        ensemble = C.dim() == 3
        lam, V = torch.linalg.eigh(C)
        lam, V = _members(lam.flip(-1), 1), _members(V.flip(-1), 2)  # descending: (E, p), (E, p, p)
        out: dict[str, float | Tensor] = {
            "lambda_1": _out(lam[:, 0].tolist(), ensemble),
            "gap": _out((lam[:, 0] - lam[:, 1]).tolist() if lam.shape[1] > 1 else [0.0] * len(lam), ensemble),
        }
        if self._A is not None:
            A_m = _per_member_map(self._A(), V.shape[0])  # (E, z, p)
            out["head_alignment"] = _out(_head_alignment(V, A_m), ensemble)  # V: descending, top-z first
        self.history.append({"eigenvalues": lam.cpu().numpy(), "top": V[..., : self.k].cpu().numpy()})
        return out
