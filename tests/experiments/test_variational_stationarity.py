import math

import torch
from pytest import approx as pytest_approx

from ssldyn.experiments.variational.stationarity import circle, polytopes, symmetric_measures
from ssldyn.lab import run_experiment


def test_symmetric_measures_are_on_the_sphere_and_balanced():
    for name, pts in symmetric_measures([1, 3, 4]).items():
        torch.testing.assert_close(pts.norm(dim=1), torch.ones(len(pts), dtype=torch.float64))
        if len(pts) > 1:  # regular configurations: centroid at 0
            assert float(pts.mean(0).norm()) < 1e-15, name
    p = polytopes()
    assert [len(v) for v in p.values()] == [4, 6, 8, 12]
    ico = p["icosahedron"]  # every vertex has 5 nearest neighbours at the same distance
    d = torch.cdist(ico, ico)
    nearest = d[0][d[0] > 1e-9].min()
    assert int((torch.isclose(d[0], nearest)).sum()) == 5
    assert float((circle(6)[1] - circle(6)[0]).norm()) == pytest_approx(2 * math.sin(math.pi / 6))


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.stationarity", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert all(c.passed for c in claims.values()), {k: (c.measured, c.expected) for k, c in claims.items()}
    assert {c.kind for c in claims.values()} == {"paper", "sanity", "erratum"}
    assert claims["thm32-stationary"].measured < 1e-12 < claims["thm32-control"].measured
    assert claims["eq6-printed"].measured > 1e-3 > claims["eq6-corrected"].measured
    lemma = out.run.result().tables["lemma_a2"]
    assert (lemma["admissible"] > 0).all() and (lemma["min_admissible"] > 0).all()
    assert (out.run.path / "figures" / "stationarity.png").is_file()
