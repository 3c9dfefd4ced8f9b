from ssldyn.lab import run_experiment


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.invariance", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 6 and all(c.passed for c in claims.values()), claims
    assert claims["vanilla-stays-invariant"].measured <= 1e-12
    assert claims["network-loses-invariance"].measured > 1e-3
    assert (out.run.path / "figures" / "invariance.png").exists()
