import math

import torch

from ssldyn.experiments.variational.ill_posed import augment, invariant_map
from ssldyn.lab import run_experiment


def test_invariant_map_is_invariant_to_augmentations():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, dtype=torch.float64, generator=g)
    torch.testing.assert_close(invariant_map(augment(x, 0.7, g)), invariant_map(x))
    ang = torch.atan2(x[:, 1], x[:, 0])
    torch.testing.assert_close(invariant_map(x), torch.stack([ang.cos(), ang.sin()], 1))


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.ill-posed", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 5 and all(c.passed for c in claims.values()), claims
    # the controls: a non-invariant map sees μ₁ ≠ μ₂; 64 clusters (beyond Fig. 3's threshold) are as good as uniform
    assert min(claims[f"same-pushforward-{k}"].control_value for k in ("ntxent", "vicreg", "byol")) > 1e-3
    assert abs(claims["uniform-beats-clusters-s1"].control_value) < 1e-6
    assert claims["uniform-beats-clusters-s2"].kind == "consequence"
    assert math.isfinite(claims["uniform-beats-clusters-s1"].measured)
    assert max(claims[f"same-pushforward-{k}"].measured for k in ("ntxent", "vicreg", "byol")) <= 1e-12
