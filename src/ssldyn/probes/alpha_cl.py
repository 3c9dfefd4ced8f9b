"""Diagnostics of the one-layer α-CL landscape at a point ``w`` (``nonlinearity`` Sec. 3.2-3.3, App. B.3-B.4, G).

All functions take ``A_fn: w -> A(w)`` (``(E, d) -> (E, d, d)``, e.g.
:func:`ssldyn.dynamics.alpha_cl.make_A_fn`) and unit weights ``w (d,)`` or ``(E, d)``.

- eigen quantities: ``λ₁ ≥ λ₂``, ``λ_gap = λ₁ − λ₂``, ``φ₁`` (:func:`eigen_summary`);
- correlation ``c(w) = wᵀφ₁(w)`` (sign of ``φ₁`` chosen so that ``c ≥ 0``, as in the proof of Thm. 3);
- local roughness ``ρ(w)`` (Sec. 3.2): the smallest ``ρ`` with
  ``‖(A(v) − A(w))w‖ ≤ ρ‖v − w‖ + O(‖v − w‖²)``. Estimated by central finite differences:
  the tangent-space Jacobian ``J u = d/dε [A(w_ε) w]`` with ``w_ε = normalize(w + εu)`` for an
  orthonormal basis ``u`` of ``w⊥``, and ``ρ = ‖J‖₂`` (:func:`local_roughness`). For a finite
  batch with ReLU, ``A`` is piecewise constant and ``ρ`` is resolved at the scale ``eps``;
- Lipschitz constant ``L`` of ``A`` on a spherical cap, estimated from all pairs of sampled
  points (:func:`lipschitz_estimate`; a lower estimate of the true sup);
- ``μ(w) = (1 + c)/(2c²) (λ₂/λ₁)²`` (Lemma 7 / Def. 4), ``ν(w) = 2κL²(1 + μc) + 2Lλ_gap⁻¹√(μ(1 + μc))``
  (Lemma 10) and the irregularity ``ω = μ + ν`` (Def. 4, eq. 10);
- κ, "the high-order eigenvector bound" of Lemma 9 (``‖φ₁' − φ₁ − Δφ₁‖ ≤ κ‖δA‖²``): by default
  ``κ(w) = 5 / (2 λ_gap(w)²)``, the bound on the second-order term of Rayleigh–Schrödinger
  perturbation theory (``‖φ₁⁽²⁾‖ ≤ (1 + 1 + ½)‖δA‖²/λ_gap²``), valid while ``‖δA‖ ≪ λ_gap``.
  Pass ``kappa=`` to use another value;
- the LME test of Def. 3 (:func:`lme_test`), the stability test of Thm. 1 ``λ_gap > ρ``
  (:func:`stability_test`) and the sufficient condition of Thm. 3 (:func:`theorem3_condition`,
  sampled; :func:`theorem3_condition_discrete`, exact for a discrete population);
- linear stability of a fixed point of eq. 7 from the tangent-space Jacobian
  (:func:`linear_stability`), the independent check of Thm. 1's conclusion.

The landscape on the circle (App. E.1, B.5: ``w = (cos θ, sin θ)``) and angles between weights, which
take curves and unit vectors rather than ``A_fn``: the θ grid of a scan (:func:`theta_grid`), the
prominent local maxima of a periodic curve (:func:`prominent_maxima`), the separations between angles on
the circle (:func:`circ_sep_deg`) and the angle between unit vectors (:func:`angle_deg`).

Devices: computations run on the device of ``w`` (and of what ``A_fn`` returns); random points
(:func:`sample_cap`) are drawn with the given CPU generator and moved there; scalar results
(``float``) come back to the host.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ssldyn.checks import nonnegative, positive
from ssldyn.probes._common import ArrayLike

__all__ = [
    "eigen_summary",
    "correlation",
    "tangent_basis",
    "local_roughness",
    "sample_cap",
    "lipschitz_estimate",
    "default_kappa",
    "mu_value",
    "nu_value",
    "ball_min_cos",
    "Irregularity",
    "irregularity",
    "LMETest",
    "lme_test",
    "StabilityTest",
    "stability_test",
    "theorem3_condition",
    "theorem3_condition_discrete",
    "linear_stability",
    "theta_grid",
    "angle_deg",
    "circ_sep_deg",
    "prominent_maxima",
]

AFn = Callable[[Tensor], Tensor]


def _batch(w: Tensor) -> tuple[Tensor, bool]:
    single = w.dim() == 1
    w = w.reshape(-1, w.shape[-1])
    return w / w.norm(dim=-1, keepdim=True), single


def eigen_summary(A: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(λ₁, λ₂, λ_gap, φ₁)`` of symmetric ``A (..., d, d)`` (symmetrised first)."""
    lam, vec = torch.linalg.eigh(0.5 * (A + A.mT))  # ascending
    lam1, lam2 = lam[..., -1], lam[..., -2]
    return lam1, lam2, lam1 - lam2, vec[..., :, -1]


def correlation(A_fn: AFn, w: Tensor) -> Tensor:
    """``c(w) = |wᵀφ₁(w)|`` (Sec. 3.3), ``(d,) -> ()`` or ``(E, d) -> (E,)``."""
    wb, single = _batch(w)
    phi = eigen_summary(A_fn(wb))[3]
    c = (wb * phi).sum(-1).abs()
    return c[0] if single else c


def tangent_basis(w: Tensor) -> Tensor:
    """``(d-1, d)`` orthonormal basis of ``w⊥`` for a unit ``w (d,)``."""
    d = w.shape[-1]
    eye = torch.eye(d, dtype=w.dtype, device=w.device)
    proj = eye - torch.outer(w, w)
    q, r = torch.linalg.qr(proj)
    keep = torch.diagonal(r).abs().argsort(descending=True)[: d - 1]
    return q[:, keep].T.contiguous()


def _tangent_stencil(w: Tensor, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """The points of a central difference on the sphere at a unit ``w (d,)``: the basis ``u_j`` of ``w⊥``
    (:func:`tangent_basis`, ``(d-1, d)``) and ``v±_j = normalize(w ± ε u_j)`` (``(d-1, d)`` each)."""
    basis = tangent_basis(w)  # (d-1, d)
    vp = w + eps * basis
    vm = w - eps * basis
    vp = vp / vp.norm(dim=-1, keepdim=True)
    vm = vm / vm.norm(dim=-1, keepdim=True)
    return basis, vp, vm


def local_roughness(A_fn: AFn, w: Tensor, eps: float = 1e-4) -> Tensor:
    """``ρ(w)`` by central finite differences on the tangent space (see module docstring).

    ``w (d,) -> ()``, ``(E, d) -> (E,)``. Cost: ``2(d−1)`` evaluations of ``A`` per point.
    """
    eps = positive(eps, "eps", where="local_roughness")
    wb, single = _batch(w)
    out = []
    for wi in wb:
        basis, vp, vm = _tangent_stencil(wi, eps)  # (d-1, d) each
        A = A_fn(torch.cat([vp, vm]))  # (2(d-1), d, d)
        k = basis.shape[0]
        cols = ((A[:k] - A[k:]) @ wi) / (vp - vm).norm(dim=-1, keepdim=True)  # (d-1, d): directional derivatives
        out.append(torch.linalg.matrix_norm(cols.T, ord=2))
    rho = torch.stack(out)
    return rho[0] if single else rho


def sample_cap(w0: Tensor, min_cos: float, n: int, *, generator: torch.Generator | None = None) -> Tensor:
    """``n`` unit vectors ``w`` with ``wᵀw0 ≥ min_cos`` (angle uniform in ``[0, arccos min_cos]``,
    direction uniform in ``w0⊥``); the first row is ``w0`` itself. Returns ``(n, d)``."""
    w0 = w0 / w0.norm()
    th_max = math.acos(max(-1.0, min(1.0, min_cos)))
    # drawn on the CPU (CPU generator: the same points on every device), then moved to w0's device
    g = torch.randn(n, w0.shape[0], generator=generator, dtype=w0.dtype).to(w0.device)
    u = g - (g @ w0)[:, None] * w0
    u = u / u.norm(dim=-1, keepdim=True)
    th = th_max * torch.rand(n, 1, generator=generator, dtype=w0.dtype).to(w0.device)
    th[0] = 0.0
    return torch.cos(th) * w0 + torch.sin(th) * u


def lipschitz_estimate(A_fn: AFn, points: Tensor, *, chunk: int = 256) -> float:
    """``max_{i≠j} ‖A(w_i) − A(w_j)‖₂ / ‖w_i − w_j‖₂`` over the given unit points ``(n, d)``."""
    As = torch.cat([A_fn(points[i : i + chunk]) for i in range(0, points.shape[0], chunk)])  # (n, d, d)
    n = points.shape[0]
    iu = torch.triu_indices(n, n, offset=1, device=points.device)
    best = 0.0
    for s in range(0, iu.shape[1], 4096):
        i, j = iu[0, s : s + 4096], iu[1, s : s + 4096]
        dist = (points[i] - points[j]).norm(dim=-1)
        ok = dist > 1e-12
        num = torch.linalg.matrix_norm(As[i] - As[j], ord=2)
        if ok.any():
            best = max(best, float((num[ok] / dist[ok]).max()))
    return best


def default_kappa(gap: Tensor) -> Tensor:
    """``κ = 5 / (2 λ_gap²)`` (second-order eigenvector perturbation bound; see module docstring)."""
    return 2.5 / gap.clamp_min(1e-300) ** 2


def mu_value(c: Tensor, lam1: Tensor, lam2: Tensor) -> Tensor:
    """``μ = (1 + c) / (2c²) · (λ₂/λ₁)²`` (Lemma 7, eq. 182; = Def. 4's ``[1 − λ_gap/λ₁]²`` form).

    Elementwise on tensors of one shape (``()`` or ``(E,)``); ``c = 0`` gives ``inf``.
    """
    return (1 + c) / (2 * c**2) * (lam2 / lam1) ** 2


def nu_value(c: Tensor, mu: Tensor, gap: Tensor, L: float | Tensor, kappa: float | Tensor | None = None) -> Tensor:
    """``ν = 2κL²(1 + μc) + 2Lλ_gap⁻¹√(μ(1 + μc))`` (Lemma 10, eq. 193; the ν of Def. 4's ``ω = μ + ν``).

    ``c``, ``mu`` (:func:`mu_value`), ``gap`` = ``λ_gap``: tensors of one shape (``()`` or ``(E,)``); ``L`` the
    Lipschitz constant of ``A`` (a float, or one per point); ``kappa`` the eigenvector bound of Lemma 9
    (default :func:`default_kappa` of ``gap``).
    """
    kap = default_kappa(gap) if kappa is None else kappa
    return 2 * kap * L**2 * (1 + mu * c) + 2 * L / gap.clamp_min(1e-300) * torch.sqrt(mu * (1 + mu * c))


def ball_min_cos(c0: float, gamma: float) -> float:
    """The bound of Thm. 3's cap ``B_γ = {w : wᵀw(0) ≥ (c₀ − c_γ)/(1 − c_γ)}`` with ``c_γ = 2√γ/(1 + γ)``.

    ``c0 = c(w(0))`` (Sec. 3.3) and ``0 < γ < 1``; returns ``(c₀ − c_γ)/(1 − c_γ)`` (≤ 0: the cap is at least a
    hemisphere).
    """
    cg = 2 * math.sqrt(gamma) / (1 + gamma)
    return (c0 - cg) / (1 - cg)


@dataclass
class Irregularity:
    """Quantities of Def. 4 at the given points (tensors of shape ``()`` or ``(E,)``)."""

    c: Tensor
    lam1: Tensor
    lam2: Tensor
    gap: Tensor
    mu: Tensor
    nu: Tensor
    omega: Tensor
    kappa: Tensor
    L: float


def irregularity(A_fn: AFn, w: Tensor, L: float, *, kappa: float | None = None, shift: bool = False) -> Irregularity:
    """``μ(w)``, ``ν(w)`` and ``ω(w) = μ + ν`` of Def. 4 / eq. 10 with Lipschitz constant ``L``.

    ``shift=True`` uses the PD matrix ``Â = A − λ_min I`` (+1e-12) of the proof of Thm. 3 for
    the eigenvalues (same eigenvectors, so ``c`` and ``λ_gap`` are unchanged).
    """
    L = nonnegative(L, "L (the Lipschitz constant)", where="irregularity")
    if kappa is not None:
        kappa = nonnegative(kappa, "kappa", where="irregularity")
    wb, single = _batch(w)
    A = A_fn(wb)  # (E, d, d)
    lam = torch.linalg.eigvalsh(0.5 * (A + A.mT))
    lam1, lam2, gap, phi = eigen_summary(A)
    if shift:
        lmin = lam[..., 0] - 1e-12
        lam1, lam2 = lam1 - lmin, lam2 - lmin
    c = (wb * phi).sum(-1).abs()
    mu = mu_value(c, lam1, lam2)
    kap = default_kappa(gap) if kappa is None else torch.full_like(gap, float(kappa))
    nu = nu_value(c, mu, gap, L, kap)
    omega = mu + nu
    vals = [c, lam1, lam2, gap, mu, nu, omega, kap]
    if single:
        vals = [v[0] for v in vals]
    return Irregularity(*vals, L=float(L))


@dataclass
class LMETest:
    """Def. 3 at ``w``: ``A(w)w = λ₁w`` with a distinct top eigenvalue ``λ₁``."""

    is_lme: bool
    residual: float  # ‖A w − (wᵀAw) w‖ / |λ₁|
    c: float
    lam1: float
    gap: float


def lme_test(A_fn: AFn, w: Tensor, *, tol: float = 1e-6, gap_tol: float = 1e-9) -> LMETest:
    """Is the unit ``w (d,)`` a locally maximal eigenvector of ``A(w)`` (Def. 3)?

    Checks ``‖A w − (wᵀAw)w‖ ≤ tol·|λ₁|``, ``c(w) ≥ 1 − tol`` (``w`` is the *top* eigenvector)
    and ``λ_gap > gap_tol·|λ₁|`` (the top eigenvalue is distinct).
    """
    tol, gap_tol = nonnegative(tol, "tol", where="lme_test"), nonnegative(gap_tol, "gap_tol", where="lme_test")
    w = w / w.norm()
    A = A_fn(w[None])[0]
    lam1, _, gap, phi = eigen_summary(A)
    aw = A @ w
    res = float((aw - (w @ aw) * w).norm() / lam1.abs().clamp_min(1e-300))
    c = float((w @ phi).abs())
    ok = res <= tol and c >= 1 - tol and float(gap) > gap_tol * abs(float(lam1))
    return LMETest(bool(ok), res, c, float(lam1), float(gap))


@dataclass
class StabilityTest:
    """Thm. 1's sufficient condition at an LME: ``λ_gap(w*) > ρ(w*)``."""

    stable: bool
    is_lme: bool
    gap: float
    rho: float


def stability_test(A_fn: AFn, w: Tensor, *, eps: float = 1e-4, tol: float = 1e-6) -> StabilityTest:
    """Thm. 1: ``w*`` is stable if it is an LME and ``λ_gap(w*) > ρ(w*)`` (``ρ`` by :func:`local_roughness`)."""
    positive(eps, "eps", where="stability_test")
    lme = lme_test(A_fn, w, tol=nonnegative(tol, "tol", where="stability_test"))
    rho = float(local_roughness(A_fn, w / w.norm(), eps=eps))
    return StabilityTest(bool(lme.is_lme and lme.gap > rho), lme.is_lme, lme.gap, rho)


def theorem3_condition(
    A_fn: AFn,
    w0: Tensor,
    *,
    gammas: Sequence[float] = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9),
    n_samples: int = 64,
    kappa: float | None = None,
    shift: bool = False,
    generator: torch.Generator | None = None,
) -> dict:
    """Check Thm. 3's condition ``sup_{w ∈ B_γ} ω(w) ≤ γ`` for a grid of ``γ < 1``.

    ``B_γ = {w : wᵀw(0) ≥ (c₀ − c_γ)/(1 − c_γ)}``, ``c_γ = 2√γ/(1 + γ)``. The sup is taken over
    ``n_samples`` points of the cap (:func:`sample_cap`, including ``w(0)``), with ``L``
    estimated on the same points (:func:`lipschitz_estimate`).

    Returns ``{"c0", "per_gamma": [{"gamma", "min_cos", "L", "sup_omega", "holds"}], "holds", "gamma"}``
    where ``holds`` says whether some ``γ`` satisfies the condition (the smallest such ``γ``).
    """
    w0 = w0 / w0.norm()
    c0 = float(correlation(A_fn, w0))
    rows = []
    for gam in gammas:
        min_cos = ball_min_cos(c0, gam)
        pts = sample_cap(w0, min_cos, n_samples, generator=generator)
        L = lipschitz_estimate(A_fn, pts)
        irr = irregularity(A_fn, pts, L, kappa=kappa, shift=shift)
        sup = float(irr.omega.max())
        rows.append(
            {
                "gamma": gam,
                "min_cos": min_cos,
                "L": L,
                "sup_omega": sup,
                "holds": bool(math.isfinite(sup) and sup <= gam),
            }
        )
    ok = [r["gamma"] for r in rows if r["holds"]]
    return {"c0": c0, "per_gamma": rows, "holds": bool(ok), "gamma": min(ok) if ok else None}


def theorem3_condition_discrete(
    A_fn: AFn, atoms: Tensor, w0: Tensor, *, gammas: Sequence[float] = tuple(i / 20 for i in range(1, 20))
) -> dict:
    """Thm. 3's condition ``sup_{w ∈ B_γ} ω(w) ≤ γ`` evaluated exactly for a discrete population.

    For data on finitely many atoms ``x`` (rows of ``atoms (n, d)``), ``A(w)`` only changes when an
    atom crosses the plane ``wᵀx = 0``. The cap ``B_γ = {w : wᵀw(0) ≥ m_γ}`` meets that plane iff
    ``m_γ ≤ 0`` or ``|w(0)ᵀx|/‖x‖ < √(1 − m_γ²)``. If some atom's plane meets ``B_γ``, ``A`` jumps
    inside the cap: ``L = ∞`` and the condition fails. Otherwise ``A ≡ A(w(0))`` on the cap: ``L = 0``,
    ``ω = μ`` (for any κ), and ``sup ω = μ(c_min)`` with ``c_min = cos(ψ + arccos m_γ)`` the smallest
    ``|wᵀφ₁|`` over the cap (``ψ`` the angle between ``w(0)`` and ``±φ₁``; ``μ`` decreases in ``c``).

    Returns ``{"c0", "per_gamma": [{"gamma", "min_cos", "crossing", "sup_omega", "holds"}], "holds", "gamma"}``.
    """
    w0 = w0 / w0.norm()
    lam1, lam2, _, phi = eigen_summary(A_fn(w0[None])[0])
    c0 = float((w0 @ phi).abs())
    psi = math.acos(max(-1.0, min(1.0, c0)))
    xn = atoms / atoms.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    margin = float((xn @ w0).abs().min())  # sine of the smallest angle between w(0) and an atom's plane
    rows = []
    for gam in gammas:
        min_cos = ball_min_cos(c0, gam)
        crossing = min_cos <= 0 or margin < math.sqrt(max(0.0, 1 - min_cos**2))
        if crossing:
            sup = float("inf")
        else:
            c_min = math.cos(min(math.pi / 2, psi + math.acos(min(1.0, min_cos))))
            sup = float(mu_value(torch.tensor(c_min), lam1.cpu(), lam2.cpu())) if c_min > 0 else float("inf")
        rows.append({"gamma": gam, "min_cos": min_cos, "crossing": bool(crossing), "sup_omega": sup,
                     "holds": bool(sup <= gam)})  # fmt: skip
    ok = [r["gamma"] for r in rows if r["holds"]]
    return {"c0": c0, "per_gamma": rows, "holds": bool(ok), "gamma": min(ok) if ok else None}


def linear_stability(A_fn: AFn, w: Tensor, *, eps: float = 1e-6) -> float:
    """Largest real part of the eigenvalues of the Jacobian of ``F(w) = P⊥_w A(w) w`` (eq. 7) on the
    tangent space at a fixed point ``w (d,)``; negative means linearly stable (an attractor).

    Central finite differences of ``F(normalize(w + εu))`` along an orthonormal basis ``u`` of ``w⊥``
    (``2(d − 1)`` evaluations of ``A``), projected back onto the tangent space.
    """
    eps = positive(eps, "eps", where="linear_stability")
    w = w / w.norm()
    basis, vp, vm = _tangent_stencil(w, eps)  # (d-1, d) each

    def F(v: Tensor) -> Tensor:
        av = (A_fn(v) @ v[..., None]).squeeze(-1)  # (n, d)
        return av - (av * v).sum(-1, keepdim=True) * v

    J = (F(vp) - F(vm)) / (2 * eps)  # (d-1, d): column j = dF/du_j
    Jt = basis @ J.T  # (d-1, d-1) in the tangent basis
    return float(torch.linalg.eigvals(Jt).real.max())


def theta_grid(n: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Tensor:
    """``n`` angles evenly spaced on ``[−π, π)`` (``linspace(−π, π, n + 1)`` without its end point), ``(n,)``:
    the grid on which a landscape ``E_α(θ)`` of ``w = (cos θ, sin θ)`` is scanned."""
    return torch.linspace(-math.pi, math.pi, n + 1, dtype=dtype, device=device)[:-1]


def _host(v):
    return v.detach().cpu().numpy() if isinstance(v, Tensor) else v


def angle_deg(a: Tensor, b: Tensor) -> Tensor:
    """Angle in degrees between unit vectors (rows), ``(…, d) × (…, d) -> (…)``: ``arccos(aᵀb)`` with the
    cosine clipped to ``[−1, 1]``; on the device of the inputs."""
    c = (a * b).sum(-1).clamp(-1.0, 1.0)
    return torch.rad2deg(torch.arccos(c))


def circ_sep_deg(thetas: ArrayLike) -> np.ndarray:
    """Angular separations (degrees) between consecutive sorted angles (radians) on the circle, the last one
    across the wrap-around: ``(n,) -> (n,)``, summing to 360 (empty for fewer than two angles)."""
    t = np.sort(np.mod(np.asarray(_host(thetas), dtype=np.float64), 2 * math.pi))
    if len(t) < 2:
        return np.zeros(0)
    d = np.diff(np.concatenate([t, t[:1] + 2 * math.pi]))
    return np.rad2deg(d)


def prominent_maxima(values: ArrayLike, rel_prominence: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """Local maxima of a periodic 1-D curve whose prominence is at least ``rel_prominence·(max − min)``.

    Returns ``(indices, relative prominences)``. The prominence of a peak is how far the curve
    must descend from it before rising to a higher value (:func:`scipy.signal.find_peaks`);
    periodicity is handled by searching the middle copy of three concatenated periods. A flat
    top counts once (its middle index); a curve with ``max − min == 0`` has no maximum. The
    floor removes maxima that are quadrature or round-off ripples (e.g. a bump of relative
    height 1e-6 on a curve computed with a coarse quadrature). ``values (n,)``: numpy, or a tensor
    on any device (copied to the CPU).
    """
    from scipy.signal import find_peaks

    rel_prominence = nonnegative(rel_prominence, "rel_prominence", where="prominent_maxima")
    v = np.asarray(_host(values), dtype=np.float64)
    n = len(v)
    span = float(v.max() - v.min())
    if span <= 0:
        return np.zeros(0, dtype=int), np.zeros(0)
    ext = np.concatenate([v, v, v])
    idx, props = find_peaks(ext, prominence=rel_prominence * span, plateau_size=1)
    keep = (idx >= n) & (idx < 2 * n)
    order = np.argsort(idx[keep] - n)
    return (idx[keep] - n)[order], (props["prominences"][keep] / span)[order]
