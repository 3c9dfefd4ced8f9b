"""variational.imbalance: the fixed capture criterion detects sizes that are never captured (Remark 4.4)."""

from ssldyn.lab import run_experiment


def _run(tmp_path, level):
    out = run_experiment("variational.imbalance", quick=True, seeds=1, out=tmp_path, sets={"capture_level": level})
    return out, out.run.result()


def test_capture_criterion_detects_never_captured(tmp_path):
    out, res = _run(tmp_path / "high", 0.99)  # a level no position-averaged silhouette reaches
    t = res.tables["per_size"]
    assert (t["silhouette_max"] < 0.99).all()
    assert (t["t_capture"] > 5.0).all() and res.summary["never_captured"] == 4  # after the end of the t = 5 run
    claim = {c.id: c for c in out.claims}["small-clusters-later"]
    assert claim.measured == 0.0 and "never" in claim.details[0]  # all tied: no order, not a spurious one
    out, res = _run(tmp_path / "low", 0.01)
    t = res.tables["per_size"]
    assert res.summary["never_captured"] == 0 and (t["t_capture"] <= 5.0).all()
    # the capture time is the first record at or above the level, read off the stored curves
    c = res.tables["curves"]
    for size, tc in zip(t["size"], t["t_capture"]):
        cur = c.loc[c["size"] == size].sort_values("time")
        assert tc == cur.loc[cur["silhouette"] >= 0.01, "time"].iloc[0]
