import math

import torch

from ssldyn.experiments.variational._flows_common import gif_steps, probe_steps, random_embedding
from ssldyn.lab import run_experiment


def test_helpers():
    z = random_embedding(50, 3, 0.3, torch.Generator().manual_seed(0))
    assert torch.allclose(z.norm(dim=1), torch.ones(50, dtype=torch.float64))
    assert gif_steps(200, 5) == [0, 50, 100, 150, 200]
    ps = probe_steps(1000)
    assert ps[:31] == list(range(31)) and ps[-1] == 1000 and len(ps) < 140


def test_quick_run_claims(tmp_path):
    out = run_experiment("variational.fig5", quick=True, seeds=1, out=tmp_path)
    claims = {c.id: c for c in out.claims}
    assert len(claims) == 8 and all(c.passed for c in claims.values()), claims
    figs = out.run.path / "figures"
    assert (figs / "fig5.png").exists() and (figs / "fig5.gif").exists()
    import imageio.v2 as imageio

    assert len(imageio.mimread(figs / "fig5.gif")) <= 40
    # the silhouette stored in the metrics table agrees with scikit-learn on the final snapshot
    from sklearn.metrics import silhouette_score

    arrays = out.run.result().arrays
    z_end = arrays["metrics/network/z@200"]
    s = silhouette_score(z_end, arrays["labels"], metric="cosine")
    assert math.isclose(
        s, claims["network-keeps-clusters"].measured + out.run.summary["vanilla_silhouette_end"], abs_tol=1e-4
    )
