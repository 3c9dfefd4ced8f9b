"""Independent-reference checks beside tests/experiments/test_variational_ill_posed.py (test audit, 2026-12-06).

The quick-run test reads only the claims: the invariant map's μ₁/μ₂ differences are 0 by construction (a sanity
check) and the controls only need to be > 1e-3, so a BYOL without its predictor, μ₂ without its "other radii", or
μ₂'s rows not aligned with μ₁'s angles (the version-4 fix) all pass. Here: ``peer_losses`` against the three losses
written out, and the run's ``losses`` table against the documented draws (order of the docstring/comments of
``IllPosed.run``: noise, perm, r, μ₂'s content, q, w from stream 0; the shared augmentation draws from stream 1)
with the losses written out in numpy."""

import math

import numpy as np
import pytest
import torch
from tests.experiments.test_variational_ill_posed import _eq1_written_out
from tests.objectives.test_peer_losses import ref_vicreg

from ssldyn.contract.config import build_config
from ssldyn.experiments.variational.ill_posed import IllPosed, peer_losses
from ssldyn.lab import Context

DT = torch.float64


def _byol_written_out(p, z):
    """mean_j ‖p_j/‖p_j‖ − z_j/‖z_j‖‖² (one direction, as BYOL's regression loss)."""
    return float(np.mean([np.sum((p[j] / np.linalg.norm(p[j]) - z[j] / np.linalg.norm(z[j])) ** 2)
                          for j in range(len(p))]))  # fmt: skip


def _ref_losses(z1, z2, q, tau):
    z1, z2 = np.asarray(z1), np.asarray(z2)
    return {"NT-Xent": _eq1_written_out(z1, z2, tau, mean=False), "VICReg": ref_vicreg(z1, z2)[1],
            "BYOL": _byol_written_out(z1 @ np.asarray(q).T, z2)}  # fmt: skip


def test_peer_losses_are_the_three_losses_written_out():
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(9, 2, generator=g, dtype=DT), torch.randn(9, 2, generator=g, dtype=DT)
    q = torch.eye(2, dtype=DT) + 0.3 * torch.randn(2, 2, generator=g, dtype=DT)
    got = peer_losses(z1, z2, q, 0.5)
    ref = _ref_losses(z1.numpy(), z2.numpy(), q.numpy(), 0.5)
    assert set(got) == set(ref)
    for k in ref:
        assert got[k] == pytest.approx(ref[k], rel=1e-12), k
    # the predictor matters: without it BYOL is another number
    assert abs(_byol_written_out(z1.numpy(), z2.numpy()) - ref["BYOL"]) > 1e-2


def test_mu2_has_mu1s_angles_row_by_row_other_radii_and_other_content():
    """μ₁: K clusters on the unit circle of the first plane (angle 2πk/K + angular_noise·ε, sample i in cluster
    i mod K); μ₂: the same angles (row j of the aligned μ₂ has θ_j), radii r ~ U(0.5, 3), N(0, other_std²) in
    coordinates 3..D. Both go through the same augmentation draws (stream 1); the losses of both maps on both
    distributions are recomputed from these draws with the losses written out."""
    n, K = 48, 4
    cfg = build_config(IllPosed.Config, {"n": n, "clusters": K})
    ctx = Context(seed=0, seeds=(0,))
    res = IllPosed().run(cfg, ctx)
    g = ctx.generator()
    noise = torch.randn(n, generator=g, dtype=DT)
    perm = torch.randperm(n, generator=g)
    r = 0.5 + 2.5 * torch.rand(n, generator=g, dtype=DT)
    x2 = cfg.other_std * torch.randn(n, cfg.D, generator=g, dtype=DT)
    q = torch.eye(2, dtype=DT) + 0.3 * torch.randn(2, 2, generator=g, dtype=DT)
    w = torch.randn(2, cfg.D, generator=g, dtype=DT)
    theta = 2 * math.pi * (np.arange(n) % K) / K + cfg.angular_noise * noise.numpy()  # (n,)
    x1 = np.zeros((n, cfg.D))
    x1[:, 0], x1[:, 1] = np.cos(theta), np.sin(theta)
    x2 = x2.numpy()
    inv = np.argsort(perm.numpy())
    x2[:, 0], x2[:, 1] = r.numpy() * np.cos(theta[perm.numpy()]), r.numpy() * np.sin(theta[perm.numpy()])
    x2a = x2[inv]  # row j: angle θ_j
    unit = x2a[:, :2] / np.linalg.norm(x2a[:, :2], axis=1, keepdims=True)
    np.testing.assert_allclose(unit, x1[:, :2], atol=1e-12)
    # the stored arrays: μ₂'s radii are spread over (0.5, 3) (not the unit circle of μ₁)
    rad2 = np.linalg.norm(res.arrays["x2"], axis=1)
    assert rad2.min() >= 0.5 and rad2.max() <= 3.0 and abs(rad2.mean() - 1.75) < 5 * 2.5 / math.sqrt(12 * n)
    np.testing.assert_allclose(np.linalg.norm(res.arrays["x1"], axis=1), 1.0, rtol=1e-12)

    def views(x):  # T(x) twice from the shared stream 1: s ~ U(0.5, 2) on the plane, N(0, aug_noise²) elsewhere
        gv = ctx.generator(1)
        out = []
        for _ in range(2):
            s = (0.5 + 1.5 * torch.rand(n, 1, generator=gv, dtype=DT)).numpy()
            eps = torch.randn(n, cfg.D - 2, generator=gv, dtype=DT).numpy()
            t = x.copy()
            t[:, :2] *= s
            t[:, 2:] += cfg.aug_noise * eps
            out.append(t)
        return out

    maps = {"invariant": lambda v: v[:, :2] / np.linalg.norm(v[:, :2], axis=1, keepdims=True),
            "control": lambda v: (v @ w.numpy().T) / np.linalg.norm(v @ w.numpy().T, axis=1, keepdims=True)}  # fmt: skip
    t = res.tables["losses"].set_index(["map", "distribution", "loss"])["value"]
    for dist, x in (("mu1", x1), ("mu2", x2a)):
        t1, t2 = views(x)
        for name, f in maps.items():
            for loss, v in _ref_losses(f(t1), f(t2), q.numpy(), cfg.tau).items():
                assert t.loc[(name, dist, loss)] == pytest.approx(v, rel=1e-10), (name, dist, loss)
