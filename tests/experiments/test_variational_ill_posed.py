import math

import numpy as np
import pytest
import torch
from tests.objectives.test_peer_losses import ref_vicreg

from ssldyn.experiments.variational.ill_posed import (
    augment,
    byol_pushforward,
    eq1_batch_loss,
    invariant_map,
    vicreg_pushforward,
)
from ssldyn.lab import run_experiment
from ssldyn.objectives import byol_loss, info_nce, latent_measure_nt_xent, vicreg_loss


def test_invariant_map_is_invariant_to_augmentations():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, dtype=torch.float64, generator=g)
    xa = augment(x, 0.7, g)
    assert not torch.allclose(xa, x)  # the augmentation moves every input (the invariance is not vacuous)
    torch.testing.assert_close(invariant_map(xa), invariant_map(x), rtol=1e-12, atol=1e-12)
    # f(x) = (x₁, x₂)/‖(x₁, x₂)‖, written out in numpy
    xn = x.numpy()
    ref = xn[:, :2] / np.sqrt((xn[:, :2] ** 2).sum(1, keepdims=True))
    np.testing.assert_allclose(invariant_map(x).numpy(), ref, rtol=1e-13, atol=1e-15)


def test_augment_scales_the_plane_and_adds_noise_to_the_rest():
    """T(x): (x₁, x₂) scaled by one s ~ U(0.5, 2) per sample, N(0, noise²) added to x₃..x_D (Monte Carlo moments)."""
    n, D, noise = 20000, 5, 0.7
    g = torch.Generator().manual_seed(1)
    x = 1.0 + torch.rand(n, D, generator=g, dtype=torch.float64)  # first two coordinates away from 0
    xa = augment(x, noise, g).numpy()
    xn = x.numpy()
    s1, s2 = xa[:, 0] / xn[:, 0], xa[:, 1] / xn[:, 1]
    np.testing.assert_allclose(s1, s2, rtol=1e-13)  # one factor for both coordinates
    assert s1.min() >= 0.5 and s1.max() <= 2.0
    se = 1.5 / math.sqrt(12 * n)  # U(0.5, 2): mean 1.25, std 1.5/√12
    assert abs(s1.mean() - 1.25) < 5 * se and abs(s1.std() - 1.5 / math.sqrt(12)) < 0.01
    eps = (xa[:, 2:] - xn[:, 2:]) / noise  # (n, D − 2) should be i.i.d. N(0, 1)
    assert abs(eps.mean()) < 5 / math.sqrt(eps.size) and abs(eps.std() - 1) < 0.01
    assert abs(np.corrcoef(eps[:, 0], s1)[0, 1]) < 0.05 and abs(np.corrcoef(eps[:, 0], eps[:, 1])[0, 1]) < 0.05


def _eq1_written_out(z1: np.ndarray, z2: np.ndarray, tau: float, mean: bool) -> float:
    """Eq. (1) on a batch, loop by loop: anchor k of the 2n views, positive k', negatives the other 2n − 2 views
    (h ∈ {T, T'}), ``log(1 + c Σ_{l≠k,k'} e^{s_kl/τ} / e^{s_kk'/τ})`` with c = 1/n (E_y) or 1 (sums), averaged."""
    z = np.concatenate([z1, z2]) / np.linalg.norm(np.concatenate([z1, z2]), axis=1, keepdims=True)
    n2 = len(z)
    n = n2 // 2
    total = 0.0
    for k in range(n2):
        kp = (k + n) % n2
        neg = sum(math.exp(z[k] @ z[m] / tau) for m in range(n2) if m not in (k, kp))
        total += math.log(1 + (1 / n if mean else 1.0) * neg / math.exp(z[k] @ z[kp] / tau))
    return total / n2


def _reformulation_written_out(y: np.ndarray, tau: float, mean: bool, positive_term: bool) -> float:
    """Prop. 2.1's cost of the empirical measure (1/n) Σ_j δ_{y_j}, loop by loop:
    ``(1/n) Σ_i log(1 + 2 c Σ_{j≠i} e^{(sim_ij − [1])/τ})``, c = 1/n (E_y) or 1 (sums), [1] with the positive term."""
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    n = len(y)
    c, shift = (1 / n if mean else 1.0), (1.0 if positive_term else 0.0)
    return (
        sum(
            math.log(1 + 2 * c * sum(math.exp((y[i] @ y[j] - shift) / tau) for j in range(n) if j != i))
            for i in range(n)
        )
        / n
    )


def test_prop21_reformulation_holds_for_an_invariant_map_only():
    """Eq. (1) on a small batch (eq1_batch_loss: info_nce with eps = n, minus log n) equals the latent-measure cost
    of the empirical pushforward with the positive-pair term (latent_measure_nt_xent, positive_term=True) to 1e-10
    for the invariant map, against both written out; also with sums on both sides (info_nce as SimCLR sums it); the
    printed Prop. 2.1 (no positive term) and a non-invariant map do not satisfy it."""
    g = torch.Generator().manual_seed(3)
    n, D, tau = 12, 5, 0.5
    x = torch.randn(n, D, generator=g, dtype=torch.float64)
    t1, t2 = augment(x, 0.5, g), augment(x, 0.5, g)
    z1, z2, y = invariant_map(t1), invariant_map(t2), invariant_map(x)
    batch, reform = float(eq1_batch_loss(z1, z2, tau)), float(latent_measure_nt_xent(y, None, tau, positive_term=True))
    assert batch == pytest.approx(_eq1_written_out(z1.numpy(), z2.numpy(), tau, mean=True), rel=1e-12)
    assert reform == pytest.approx(_reformulation_written_out(y.numpy(), tau, mean=True, positive_term=True), rel=1e-12)
    assert abs(batch - reform) / reform <= 1e-10
    # sums on both sides (SimCLR's info_nce): the same identity, with Σ_{y≠x} in place of n E_y
    summed = _reformulation_written_out(y.numpy(), tau, mean=False, positive_term=True)
    assert float(info_nce(z1, z2, tau)) == pytest.approx(_eq1_written_out(z1.numpy(), z2.numpy(), tau, mean=False))
    assert abs(float(info_nce(z1, z2, tau)) - summed) / summed <= 1e-10
    # the printed Prop. 2.1 (no positive-pair term) is another number
    printed = float(latent_measure_nt_xent(y, None, tau))
    assert printed == pytest.approx(_reformulation_written_out(y.numpy(), tau, mean=True, positive_term=False))
    assert abs(batch - printed) / printed > 0.1
    # a map that is not invariant: its batch loss is not the cost of its pushforward g#μ_n
    w = torch.randn(2, D, generator=g, dtype=torch.float64)

    def gmap(v):
        return torch.nn.functional.normalize(v @ w.T, dim=1)

    b_g, r_g = (
        float(eq1_batch_loss(gmap(t1), gmap(t2), tau)),
        float(latent_measure_nt_xent(gmap(x), None, tau, positive_term=True)),
    )
    assert b_g == pytest.approx(_eq1_written_out(gmap(t1).numpy(), gmap(t2).numpy(), tau, mean=True), rel=1e-12)
    assert abs(b_g - r_g) / r_g > 1e-3


def test_appa1_reformulations_hold_for_an_invariant_map_only():
    """App. A.1: for an invariant map, VICReg on the views equals λ₂(v(y) + v(y)) + λ₃(c(y) + c(y)) of the
    pushforward sample (no invariance term) and BYOL equals E‖q̄(y) − ȳ‖², both written out in numpy; a
    non-invariant map satisfies neither."""
    g = torch.Generator().manual_seed(4)
    n, D = 40, 5
    x = torch.randn(n, D, generator=g, dtype=torch.float64)
    t1, t2 = augment(x, 0.5, g), augment(x, 0.5, g)
    q = torch.eye(2, dtype=torch.float64) + 0.3 * torch.randn(2, 2, generator=g, dtype=torch.float64)
    y = invariant_map(x).numpy()
    # the reformulated losses against numpy: VICReg with the invariance weight 0 on (y, y), BYOL loop by loop
    assert float(vicreg_pushforward(torch.from_numpy(y))) == pytest.approx(ref_vicreg(y, y, inv=0.0)[1])
    qy = y @ q.numpy().T
    byol_ref = np.mean([np.sum((qy[j] / np.linalg.norm(qy[j]) - y[j] / np.linalg.norm(y[j])) ** 2) for j in range(n)])
    assert float(byol_pushforward(torch.from_numpy(y), q)) == pytest.approx(byol_ref, rel=1e-12)
    # the batch losses (vicreg_loss against numpy too) equal them for the invariant map
    z1, z2 = invariant_map(t1), invariant_map(t2)
    vb = float(vicreg_loss(z1, z2))
    assert vb == pytest.approx(ref_vicreg(z1.numpy(), z2.numpy())[1], rel=1e-12)
    assert abs(vb - float(vicreg_pushforward(torch.from_numpy(y)))) <= 1e-10 * vb
    bb = float(byol_loss(z1 @ q.T, z2))
    assert abs(bb - byol_ref) <= 1e-10 * byol_ref
    # a map that is not invariant: the invariance term stays and g(Tx) ≠ g(x)
    w = torch.randn(2, D, generator=g, dtype=torch.float64)

    def gmap(v):
        return torch.nn.functional.normalize(v @ w.T, dim=1)

    vg, rg = float(vicreg_loss(gmap(t1), gmap(t2))), float(vicreg_pushforward(gmap(x)))
    assert abs(vg - rg) / rg > 1e-2
    bg, brg = float(byol_loss(gmap(t1) @ q.T, gmap(t2))), float(byol_pushforward(gmap(x), q))
    assert abs(bg - brg) / brg > 1e-2


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.ill-posed", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 7 and all(c.passed for c in claims.values()), claims
    # Prop. 2.1's change of variables on the batch: round-off for the invariant map, O(1) for the control
    reform = claims["prop21-reformulation"]
    assert reform.kind == "paper" and reform.value <= 1e-12 and reform.control_value > 0.01
    assert "as printed" in reform.details[0]
    appa1 = claims["appa1-reformulation"]  # App. A.1's VICReg and BYOL forms, the same way
    assert appa1.kind == "paper" and appa1.value <= 1e-12 and appa1.control_value > 0.01
    # the two-distribution comparisons hold by construction (identical embeddings row by row): sanity checks
    assert all(claims[f"same-pushforward-{k}"].kind == "sanity" for k in ("ntxent", "vicreg", "byol"))
    # the controls: a non-invariant map sees μ₁ ≠ μ₂; 64 clusters (beyond Fig. 3's threshold) are as good as uniform
    assert min(claims[f"same-pushforward-{k}"].control_value for k in ("ntxent", "vicreg", "byol")) > 1e-3
    assert abs(claims["uniform-beats-clusters-s1"].control_value) < 1e-6
    assert claims["uniform-beats-clusters-s2"].kind == "consequence"
    assert math.isfinite(claims["uniform-beats-clusters-s1"].measured)
    assert max(claims[f"same-pushforward-{k}"].measured for k in ("ntxent", "vicreg", "byol")) <= 1e-12
