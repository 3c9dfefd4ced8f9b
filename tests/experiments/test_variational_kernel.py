import math

import pandas as pd

from ssldyn.lab import run_experiment


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.kernel", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 9 and all(c.passed for c in claims.values()), claims
    assert {c.kind for c in claims.values()} == {"paper", "consequence"}
    assert claims["prop43-closed-form"].measured <= 1e-8
    assert -0.65 <= claims["prop44-rate"].measured <= -0.35
    # the Remark 4.4 gain table: measured speeds/vanilla speeds agree with (n_q/n)‖ξ‖²β_q
    t = pd.read_parquet(out.run.path / "tables" / "imbalance.parquet")
    assert ((t["gain"] - t["predicted_gain"]).abs() / t["predicted_gain"]).max() < 0.05
    # the centers have norm 2, so the ‖ξ‖² factor is exercised: the prediction without it is off by 4×
    assert ((t["gain"] - t["predicted_gain"] / 4).abs() / t["gain"]).min() > 0.5
    assert (out.run.path / "figures" / "kernel.png").exists()
    assert math.isfinite(claims["thm45-flow"].measured)
