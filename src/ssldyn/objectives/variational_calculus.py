r"""First and second variation of the contrastive cost of ``variational`` Def. 2.1; stationarity on S^{d−1}.

**The cost of an invariant map** (eq. 4 with ``f ∘ T = f``): it depends on the data only through
the embedded measure ``ρ = f#μ`` (Prop. 2.1). For a discrete ``ρ = Σ_i w_i δ_{y_i}``

.. math::
    L(\rho) = \sum_i w_i\, \Psi(G_i), \qquad
    G_i = \sum_j w_j\, \eta(\|y_i - y_j\|^2/2) / \eta(0)

(:func:`measure_loss`; Def. 2.1 drops the indicator ``1_{x≠y}``, so ``j = i`` is included).
Defaults ``Ψ(t) = log(1 + t)``, ``η(t) = e^{−t/τ}`` (the NT-Xent relation below eq. 5; Prop. 2.1's
``log(1 + 2t)`` is ``psi=lambda t: torch.log1p(2 * t)``).

**First variation, Prop. 3.1 eq. (7).** For invariant f the gradient field is

.. math::
    \nabla L(f)(x) = \frac{1}{\eta(0)} \int \big(\Psi'(G(x)) + \Psi'(G(y))\big)\,
        \eta'(\|f(x) - f(y)\|^2/2)\,\big(f(x) - f(y)\big)\, d\mu(y),

and ``∂L/∂y_i = w_i ∇L(f)(y_i)`` (:func:`first_variation`; tested against autograd).

**Stationarity on the sphere, Thm. 3.2.** On ``C = {f: R^D → S^{d−1}}`` a map is stationary when
the gradient field is normal to the sphere at every atom: ``∇L(y_i) = λ_i y_i``. The paper's
proof (eq. 24–25, relaxed constraint ``∫‖f‖dμ = 1``) asks for one multiplier ``λ`` for all
atoms. :func:`sphere_stationarity` returns both residuals for any user measure. Thm. 3.2's
"symmetric" measures (eq. 8) — evenly spaced points, regular polytopes, a single point — are
stationary; as printed, eq. (8) asks ``∫h(x₁,y)dρ(y) = ∫h(x₂,y)dρ(y)`` for antisymmetric ``h``,
which evenly spaced points violate (the two integrals are ``c·x₁`` and ``c·x₂``;
:func:`symmetry_condition_gap`); what the proof uses is ``∫h(x,y)dρ(y) = λ x`` with one λ.

**Second variation, App. A.3 (proof of Lemma A.2).** For a direction ``h`` (one vector per atom)

.. math::
    \delta^2 L(h,h) = \sum_i w_i \Big[\Psi''(G_i)\,(G_i')^2 + \Psi'(G_i)\,G_i''\Big],\quad
    G_i' = \tfrac{1}{\eta(0)}\sum_j w_j \eta'_{ij} \langle \Delta y_{ij}, \Delta h_{ij}\rangle,\quad
    G_i'' = \tfrac{1}{\eta(0)}\sum_j w_j \big[\eta''_{ij}\langle \Delta y_{ij}, \Delta h_{ij}\rangle^2
            + \eta'_{ij}\|\Delta h_{ij}\|^2\big]

(:func:`second_variation`; the printed three-term formula, = ``d²/ds² L(y + s h)`` at 0).

**With augmentations, Prop. 3.1 eq. (6).** For a non-invariant f on a finite set — data
``x_1..x_n`` (weights 1/n) and transformations ``T_1..T_m`` (weights 1/m), ``F[a, i] = f(T_a x_i)``
— :func:`augmented_loss` is eq. (4) and :func:`augmented_first_variation` the integrand of
eq. (6), ``∂L/∂F[a, i] = V[a, i]/(n m)``. As printed, eq. (6) has ``Ψ'(G_{T,T'}(f, y))`` in its
first line where the derivative gives ``Ψ'(G_{T',T}(f, y))`` (the anchor ``y`` seen through
``T'``, its negatives through ``T``); ``printed=True`` evaluates the printed form (it disagrees
with autograd unless f is invariant).

Shapes: ``points`` ``(..., n, d)`` with optional leading ensemble axes for :func:`measure_loss`,
:func:`first_variation`, :func:`second_variation`; ``(n, d)`` for the stationarity helpers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ._common import check_callable, check_positive, check_tensor

__all__ = [
    "measure_loss",
    "first_variation",
    "second_variation",
    "Stationarity",
    "sphere_stationarity",
    "symmetry_condition_gap",
    "stationarity_probe",
    "augmented_loss",
    "augmented_first_variation",
]

Scalar = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class _Pair:
    """Ψ and η with their first two derivatives (elementwise)."""

    psi: Scalar
    dpsi: Scalar
    d2psi: Scalar
    eta: Scalar
    deta: Scalar
    d2eta: Scalar


def _derivative(fn: Scalar, order: int) -> Scalar:
    """Elementwise derivative of a user function by autograd."""

    def d(t: Tensor) -> Tensor:
        x = t.detach().requires_grad_(True)
        with torch.enable_grad():
            y = fn(x)
            (g,) = torch.autograd.grad(y.sum(), x, create_graph=order > 1)
            if order > 1:
                (g,) = torch.autograd.grad(g.sum(), x)
        return g.detach()

    return d


def _pair(fn: str, temperature: float, psi: Scalar | None, eta: Scalar | None) -> _Pair:
    tau = check_positive(fn, "temperature", temperature)
    check_callable(fn, "psi", psi)
    check_callable(fn, "eta", eta)
    if psi is None:
        p, dp, d2p = torch.log1p, lambda t: 1.0 / (1.0 + t), lambda t: -1.0 / (1.0 + t) ** 2
    else:
        p, dp, d2p = psi, _derivative(psi, 1), _derivative(psi, 2)
    if eta is None:
        e = lambda t: torch.exp(-t / tau)  # noqa: E731
        de, d2e = lambda t: -torch.exp(-t / tau) / tau, lambda t: torch.exp(-t / tau) / tau**2
    else:
        e, de, d2e = eta, _derivative(eta, 1), _derivative(eta, 2)
    return _Pair(p, dp, d2p, e, de, d2e)


def _weights(fn: str, weights: Tensor | None, points: Tensor) -> Tensor:
    n = points.shape[-2]
    if weights is None:
        return torch.full((n,), 1.0 / n, dtype=points.dtype, device=points.device)
    if not isinstance(weights, Tensor) or not weights.is_floating_point() or weights.shape[-1:] != (n,):
        raise ValueError(f"{fn}: weights must be a floating-point tensor of shape (n,) or (..., n) with n={n}")
    if bool((weights < 0).any()) or bool((weights.sum(-1) <= 0).any()) or not bool(torch.isfinite(weights).all()):
        raise ValueError(f"{fn}: weights must be finite, non-negative, with a positive sum")
    return weights / weights.sum(-1, keepdim=True)


def _check_points(fn: str, points: Tensor) -> Tensor:
    check_tensor(fn, "points", points)
    if not bool(torch.isfinite(points).all()):
        raise ValueError(f"{fn}: points contain NaN or inf")
    return points


def _pairwise(points: Tensor) -> tuple[Tensor, Tensor]:
    """``Δ_ij = y_i − y_j`` ``(..., n, n, d)`` and ``‖Δ_ij‖²/2`` ``(..., n, n)``."""
    delta = points[..., :, None, :] - points[..., None, :, :]  # (..., n, n, d)
    return delta, 0.5 * (delta**2).sum(-1)


def _terms(
    fn: str, points: Tensor, weights: Tensor | None, temperature: float, psi: Scalar | None, eta: Scalar | None
) -> tuple[_Pair, Tensor, Tensor, Tensor, Tensor, Tensor]:
    """The pieces of eq. (4) at the atoms ``points (..., n, d)``: ``(f, w, Δ, ‖Δ‖²/2, η(0), G)`` with
    ``f`` the pair Ψ, η (and derivatives), ``w (..., n)`` the normalised weights, ``Δ (..., n, n, d)``,
    ``‖Δ‖²/2 (..., n, n)`` and ``G_i = Σ_j w_j η(‖y_i − y_j‖²/2)/η(0)`` ``(..., n)``."""
    f = _pair(fn, temperature, psi, eta)
    w = _weights(fn, weights, points)  # (..., n)
    delta, half_sq = _pairwise(points)  # (..., n, n, d), (..., n, n)
    eta0 = f.eta(torch.zeros((), dtype=points.dtype, device=points.device))
    G = (f.eta(half_sq) * w[..., None, :]).sum(-1) / eta0  # (..., n)
    return f, w, delta, half_sq, eta0, G


def measure_loss(
    points: Tensor,
    weights: Tensor | None = None,
    *,
    temperature: float = 0.5,
    psi: Scalar | None = None,
    eta: Scalar | None = None,
) -> Tensor:
    """Eq. (4) of an invariant map: ``L(ρ) = Σ_i w_i Ψ(Σ_j w_j η(‖y_i − y_j‖²/2)/η(0))``.

    Args:
        points: atoms ``y_i`` ``(..., n, d)`` (not normalised: the sphere is the constraint set).
        weights: ``w`` ``(n,)`` or ``(..., n)``, non-negative (normalised); default ``1/n``.
        temperature: τ of the default ``η(t) = e^{−t/τ}``.
        psi, eta: Ψ (non-decreasing) and η (maximal at 0), elementwise; defaults ``log1p``, ``exp(−t/τ)``.
    Returns:
        ``(...)``: one value per ensemble member.
    """
    fn = "measure_loss"
    _check_points(fn, points)
    f, w, _, _, _, G = _terms(fn, points, weights, temperature, psi, eta)  # w, G (..., n)
    return (w * f.psi(G)).sum(-1)


def first_variation(
    points: Tensor,
    weights: Tensor | None = None,
    *,
    temperature: float = 0.5,
    psi: Scalar | None = None,
    eta: Scalar | None = None,
) -> Tensor:
    """Prop. 3.1 eq. (7): the gradient field ``∇L(f)(y_i)`` of an invariant map at every atom.

    ``∇L(f)(y_i) = (1/η(0)) Σ_j w_j (Ψ'(G_i) + Ψ'(G_j)) η'(‖y_i − y_j‖²/2) (y_i − y_j)``; equals
    ``(1/w_i) ∂L/∂y_i`` of :func:`measure_loss`. Arguments as :func:`measure_loss`.

    Returns:
        ``(..., n, d)``.
    """
    fn = "first_variation"
    _check_points(fn, points)
    f, w, delta, half_sq, eta0, G = _terms(fn, points, weights, temperature, psi, eta)
    dpsi = f.dpsi(G)  # (..., n)
    coef = (dpsi[..., :, None] + dpsi[..., None, :]) * f.deta(half_sq) * w[..., None, :] / eta0  # (..., n, n)
    return (coef[..., None] * delta).sum(-2)  # (..., n, d)


def second_variation(
    points: Tensor,
    h: Tensor,
    weights: Tensor | None = None,
    *,
    temperature: float = 0.5,
    psi: Scalar | None = None,
    eta: Scalar | None = None,
    return_scale: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """App. A.3: ``δ²L(f)(h, h) = d²/ds² L(y + s h)|_{s=0}`` by the printed three-term formula.

    Args:
        points: atoms ``(..., n, d)``; h: the direction, one vector per atom ``(..., n, d)``.
        weights, temperature, psi, eta: as :func:`measure_loss`.
        return_scale: also return the size of the terms,
            ``Σ_i w_i [|Ψ''_i| G_i'² + |Ψ'_i| Σ_j w_j (|η''_ij|⟨Δy,Δh⟩² + |η'_ij|‖Δh‖²)/|η(0)|]``, so that
            ``δ²L / scale`` says how far from round-off a sign is (the terms of eq. 4 can all be
            exponentially small, e.g. ``e^{−‖Δy‖²/(2τ)}`` at small τ).
    Returns:
        ``(...)``, or ``(δ²L, scale)``.
    """
    fn = "second_variation"
    _check_points(fn, points)
    check_tensor(fn, "h", h)
    if h.shape[-2:] != points.shape[-2:]:
        raise ValueError(
            f"{fn}: h must have the shape of points (n, d)={tuple(points.shape[-2:])}, got {tuple(h.shape)}"
        )
    f, w, delta, half_sq, eta0, G = _terms(fn, points, weights, temperature, psi, eta)
    dh = h[..., :, None, :] - h[..., None, :, :]  # (..., n, n, d)
    inner = (delta * dh).sum(-1)  # (..., n, n): ⟨Δy_ij, Δh_ij⟩
    G1 = (w[..., None, :] * f.deta(half_sq) * inner).sum(-1) / eta0  # (..., n)
    dh2 = (dh**2).sum(-1)  # (..., n, n)
    G2 = (w[..., None, :] * (f.d2eta(half_sq) * inner**2 + f.deta(half_sq) * dh2)).sum(-1) / eta0  # (..., n)
    value = (w * (f.d2psi(G) * G1**2 + f.dpsi(G) * G2)).sum(-1)
    if not return_scale:
        return value
    G2_abs = (w[..., None, :] * (f.d2eta(half_sq).abs() * inner**2 + f.deta(half_sq).abs() * dh2)).sum(-1)
    scale = (w * (f.d2psi(G).abs() * G1**2 + f.dpsi(G).abs() * G2_abs / eta0.abs())).sum(-1)
    return value, scale


@dataclass(frozen=True)
class Stationarity:
    """How far a discrete measure on S^{d−1} is from a stationary point of eq. (4) (Thm. 3.2).

    Attributes:
        gradient: ``(n, d)`` the field ``∇L(f)(y_i)`` of eq. (7).
        multipliers: ``(n,)`` its radial parts ``λ_i = ⟨∇L(y_i), ŷ_i⟩`` (eq. 25's multiplier per atom).
        tangential: ``(n,)`` ``‖(I − ŷ_i ŷ_iᵀ) ∇L(y_i)‖``.
        scale: the size of the terms of eq. (7), ``max_i Σ_j w_j |(Ψ'_i + Ψ'_j) η'_ij| ‖y_i − y_j‖ / η(0)``
            (the residuals below are relative to it; 0 for a single location).
        residual: ``max_i tangential_i / scale`` — 0 for a stationary point on the sphere
            (pointwise constraint: one multiplier per atom).
        multiplier_spread: ``max_i |λ_i − λ̄| / scale`` (λ̄ the w-weighted mean) — 0 when one
            multiplier serves every atom (the relaxed constraint of eq. 24).
    """

    gradient: Tensor
    multipliers: Tensor
    tangential: Tensor
    scale: float
    residual: float
    multiplier_spread: float

    @property
    def stationary_residual(self) -> float:
        """``max(residual, multiplier_spread)``: 0 for a stationary point in the sense of eq. (24)–(25)."""
        return max(self.residual, self.multiplier_spread)


def sphere_stationarity(
    points: Tensor,
    weights: Tensor | None = None,
    *,
    temperature: float = 0.5,
    psi: Scalar | None = None,
    eta: Scalar | None = None,
) -> Stationarity:
    """Stationarity of ``ρ = Σ w_i δ_{y_i}`` on S^{d−1} for eq. (4) (Thm. 3.2; usable on any measure).

    Args:
        points: ``(n, d)`` atoms; they are projected onto the sphere (the constraint set of Thm. 3.2).
        weights: ``(n,)`` (one measure: no leading axes here), non-negative, normalised; default ``1/n``.
        temperature, psi, eta: as :func:`measure_loss`.
    """
    fn = "sphere_stationarity"
    _check_points(fn, points)
    if points.dim() != 2:
        raise ValueError(f"{fn}: points must have shape (n, d), got {tuple(points.shape)}")
    _check_one_measure(fn, weights, points)
    y = points / points.norm(dim=-1, keepdim=True).clamp_min(torch.finfo(points.dtype).tiny)  # (n, d)
    f, w, delta, half_sq, eta0, G = _terms(fn, y, weights, temperature, psi, eta)  # w, G (n,)
    grad = first_variation(y, w, temperature=temperature, psi=psi, eta=eta)  # (n, d)
    lam = (grad * y).sum(-1)  # (n,)
    tang = (grad - lam[:, None] * y).norm(dim=-1)  # (n,)
    dpsi = f.dpsi(G)
    terms = ((dpsi[:, None] + dpsi[None, :]) * f.deta(half_sq)).abs() * w[None, :] * delta.norm(dim=-1) / eta0.abs()
    scale = float(terms.sum(-1).max())
    lam_bar = float((w * lam).sum())
    if scale == 0.0:  # a single location: ∇L = 0 exactly
        return Stationarity(grad, lam, tang, 0.0, float(tang.max()), float((lam - lam_bar).abs().max()))
    return Stationarity(grad, lam, tang, scale, float(tang.max()) / scale, float((lam - lam_bar).abs().max()) / scale)


def _check_one_measure(fn: str, weights: Tensor | None, points: Tensor) -> None:
    """``weights`` of one measure: ``(n,)`` for ``points (n, d)`` (these functions take no ensemble axes)."""
    if weights is not None and (not isinstance(weights, Tensor) or weights.shape != points.shape[:1]):
        got = tuple(weights.shape) if isinstance(weights, Tensor) else type(weights).__name__
        raise ValueError(f"{fn}: weights must have shape ({points.shape[0]},) for points {tuple(points.shape)}, "
                         f"got {got}")  # fmt: skip


def symmetry_condition_gap(
    points: Tensor,
    weights: Tensor | None = None,
    *,
    temperature: float = 0.5,
    eta: Scalar | None = None,
) -> float:
    """Eq. (8) as printed, for the antisymmetric ``h(x, y) = η'(‖x − y‖²/2)(x − y)`` of the proof (eq. 25).

    Returns ``max_{i,k} ‖∫h(y_i, y)dρ(y) − ∫h(y_k, y)dρ(y)‖ / max_i ‖∫h(y_i, y)dρ(y)‖`` — 0 when the
    printed condition holds for this h. Evenly spaced points give ``∫h(y_i,·) = c·y_i``, so the
    gap is ``max ‖y_i − y_k‖`` (e.g. 2 for 4 points, √3 for 3): the printed condition fails for the
    examples of Remark 3.1, although they are stationary (:func:`sphere_stationarity`). ``points (n, d)``,
    ``weights (n,)``.
    """
    fn = "symmetry_condition_gap"
    _check_points(fn, points)
    if points.dim() != 2:
        raise ValueError(f"{fn}: points must have shape (n, d), got {tuple(points.shape)}")
    _check_one_measure(fn, weights, points)
    f, w, delta, half_sq, _, _ = _terms(fn, points, weights, temperature, None, eta)
    integral = ((f.deta(half_sq) * w[None, :])[..., None] * delta).sum(1)  # (n, d)
    size = float(integral.norm(dim=-1).max())
    if size == 0.0:
        return 0.0
    return float((integral[:, None, :] - integral[None, :, :]).norm(dim=-1).max()) / size


def stationarity_probe(temperature: float = 0.5, **kw) -> Callable[[Tensor], float]:
    """A flow probe ``z -> Stationarity.residual`` (``(n, d)`` embeddings, uniform weights)."""
    return lambda z: sphere_stationarity(z.detach(), temperature=temperature, **kw).residual


# --------------------------------------------------------------------------------------
# with augmentations: eq. (4) and eq. (6) on a finite set of data and transformations
# --------------------------------------------------------------------------------------
def _augmented_parts(F: Tensor, f: _Pair):
    """``N[a,b,i] = mean_j η(‖F[a,i] − F[b,j]‖²/2)``, ``P[a,b,i] = η(‖F[a,i] − F[b,i]‖²/2)``, pair terms."""
    diff = F[:, None, :, None, :] - F[None, :, None, :, :]  # (m, m, n, n, d): F[a,i] − F[b,j]
    half_sq = 0.5 * (diff**2).sum(-1)  # (m, m, n, n)
    eta_all = f.eta(half_sq)  # (m, m, n, n)
    N = eta_all.mean(-1)  # (m, m, n)
    P = eta_all.diagonal(dim1=-2, dim2=-1)  # (m, m, n): j = i
    return diff, half_sq, eta_all, N, P


def _check_F(fn: str, F: Tensor) -> None:
    """``F (m, n, d)``: one map on the transformed points (no ensemble axis: a 4-D input would mix the member axis
    with the transformation axis and return one meaningless number)."""
    check_tensor(fn, "F", F, min_dim=3)
    if F.dim() != 3:
        raise ValueError(f"{fn}: F must have shape (m, n, d) (transformations, points, dimension; no ensemble axis), "
                         f"got {tuple(F.shape)}")  # fmt: skip


def augmented_loss(
    F: Tensor, *, temperature: float = 0.5, psi: Scalar | None = None, eta: Scalar | None = None
) -> Tensor:
    """Eq. (4) on ``n`` data points and ``m`` transformations (uniform weights): ``F[a, i] = f(T_a x_i)``.

    ``L = mean_{i,a,b} Ψ(mean_j η(‖F[a,i] − F[b,j]‖²/2) / η(‖F[a,i] − F[b,i]‖²/2))``.

    Args:
        F: ``(m, n, d)`` the map's values at the transformed points (f arbitrary on this finite set).
    """
    fn = "augmented_loss"
    _check_F(fn, F)
    f = _pair(fn, temperature, psi, eta)
    _, _, _, N, P = _augmented_parts(F, f)
    return f.psi(N / P).mean()


def augmented_first_variation(
    F: Tensor,
    *,
    temperature: float = 0.5,
    psi: Scalar | None = None,
    eta: Scalar | None = None,
    printed: bool = False,
) -> Tensor:
    """Prop. 3.1 eq. (6): the first variation of :func:`augmented_loss` at every ``(T_a, x_i)``.

    Returns ``V[a, i]`` with ``⟨δL, h⟩ = mean_{a,i} ⟨V[a, i], h(T_a x_i)⟩``, i.e. ``∂L/∂F[a, i] = V[a, i]/(m n)``:

    ``V[a,i] = mean_{b,j} [ (Ψ'(G_ab(i))/P_ab(i) + Ψ'(G_ba(j))/P_ba(j)) η'_{ai,bj} (F[a,i] − F[b,j])
               − (Ψ'(G_ab(i)) η_{ai,bj} + Ψ'(G_ba(i)) η_{bi,aj}) η'_{ai,bi}/P_ab(i)² (F[a,i] − F[b,i]) ]``

    with ``G_ab(i) = N_ab(i)/P_ab(i)``. ``printed=True`` uses eq. (6) as printed, ``Ψ'(G_ab(j))/P_ab(j)``
    in the first term (anchor j seen through T_a instead of T_b); it differs unless f is invariant.

    Args:
        F: ``(m, n, d)``.
    Returns:
        ``(m, n, d)``.
    """
    fn = "augmented_first_variation"
    _check_F(fn, F)
    f = _pair(fn, temperature, psi, eta)
    diff, half_sq, eta_all, N, P = _augmented_parts(F, f)  # diff (m, m, n, n, d); others (m, m, n[, n])
    dpsi = f.dpsi(N / P)  # (m, m, n): Ψ'(G_ab(i))
    deta = f.deta(half_sq)  # (m, m, n, n)
    anchor = (dpsi / P)[:, :, :, None]  # (m, m, n, 1): Ψ'(G_ab(i))/P_ab(i)
    partner = (dpsi / P).transpose(0, 1) if not printed else dpsi / P  # (m, m, n): Ψ'(G_ba(j))/P_ba(j) [printed: ab]
    first = ((anchor + partner[:, :, None, :]) * deta)[..., None] * diff  # (m, m, n, n, d)
    eta_ba = eta_all.transpose(0, 1)  # (m, m, n, n): η(‖F[b,i] − F[a,j]‖²/2)
    neg = dpsi[..., None] * eta_all + dpsi.transpose(0, 1)[..., None] * eta_ba  # (m, m, n, n)
    deta_pos = deta.diagonal(dim1=-2, dim2=-1)  # (m, m, n): η'_{ai,bi}
    pos_dir = diff.diagonal(dim1=2, dim2=3).movedim(-1, -2)  # (m, m, n, d): F[a,i] − F[b,i]
    second = (neg.mean(-1) * deta_pos / P**2)[..., None] * pos_dir  # (m, m, n, d), mean over j taken
    return first.mean(3).mean(1) - second.mean(1)  # (m, n, d)
