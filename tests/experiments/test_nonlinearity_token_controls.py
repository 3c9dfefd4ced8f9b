"""Token experiments (nonlinearity Sec. 5, App. E.2) under claims-v3: the χ± metric per activation, the
Table 1 agreement test, Fig. 11's error-bar reading and the controls measured in the same run."""

import itertools

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats

from ssldyn.contract.claims import declaration_problems
from ssldyn.contract.context import Context
from ssldyn.dynamics.ensemble_trainer import TokenRun, sign_symmetric
from ssldyn.experiments.nonlinearity.table1 import agreement_test, disagreements_allowed
from ssldyn.experiments.nonlinearity.token_grid import final_table, grid_frame, make_runs, run_grid
from ssldyn.lab import run_experiment
from ssldyn.lab.registry import get_experiment
from ssldyn.models.activations import ACTIVATIONS

MINE = [
    "nonlinearity.fig4",
    "nonlinearity.fig5",
    "nonlinearity.fig8",
    "nonlinearity.fig10",
    "nonlinearity.fig11",
    "nonlinearity.table1",
    "nonlinearity.batchnorm",
]


@pytest.fixture(autouse=True)
def _no_shared_cache(monkeypatch):
    monkeypatch.setenv("SSLDYN_CACHE_DIR", "off")


def _flip_residual(h, constant: bool) -> float:
    """Residual of the best fit h(−x) ≈ s·h(x) (+ c if ``constant``) over s ∈ {±1} (float64, x on a grid)."""
    x = torch.linspace(-4, 4, 801, dtype=torch.float64)
    a, b = h(-x), h(x)
    res = []
    for s in (1.0, -1.0):
        c = float((a - s * b).mean()) if constant else 0.0
        res.append(float((a - s * b - c).abs().max()))
    return min(res)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_sign_symmetric_is_the_flip_symmetry_of_the_activation(name):
    """|cos| exactly for the activations with h(−x) = ±h(x) + c: with BN (the mean removes c) any c, without
    BN only c = 0 (so sigmoid, σ(−x) = 1 − σ(x), counts only under BN)."""
    h = ACTIVATIONS[name].fn
    assert sign_symmetric(name, "mean_only") == (_flip_residual(h, constant=True) < 1e-12)
    assert sign_symmetric(name, "off") == (_flip_residual(h, constant=False) < 1e-12)


def test_signed_chi_is_recorded_and_equals_init_across_activations():
    """``chi_minus_signed`` (``chi_plus_signed``) is eq. 181 (eq. 16) with the signed cosine for every activation: at t = 0 the same filters
    (same seed) score the same for ReLU and linear, and linear's |cos| score is never below it."""
    runs = make_runs(activations=["relu", "linear"], betas=[2], Ps=[3], seeds=[0], base=TokenRun(batch=16))
    df = grid_frame(runs, run_grid(runs, steps=4, every=2, ctx=Context()))
    init = final_table(df, step=0).set_index("activation")
    assert init.loc["relu", "chi_minus_signed_mean"] == pytest.approx(init.loc["linear", "chi_minus_signed_mean"])
    assert init.loc["relu", "chi_minus_signed_mean"] == pytest.approx(init.loc["relu", "chi_minus_mean"])
    assert (df["chi_minus_signed"] <= df["chi_minus"] + 1e-6).all()
    assert (
        init.loc["linear", "chi_minus_mean"] > init.loc["linear", "chi_minus_signed_mean"]
    )  # |cos| ≥ cos, strict here
    # χ̄₊ the same way: ReLU's own metric is the signed one; linear's signed score is at most its |cos| score
    fin = final_table(df).set_index("activation")
    assert fin.loc["relu", "chi_plus_signed_mean"] == pytest.approx(fin.loc["relu", "chi_plus_mean"])
    assert init.loc["relu", "chi_plus_signed_mean"] == pytest.approx(init.loc["linear", "chi_plus_signed_mean"])
    assert (df["chi_plus_signed"] <= df["chi_plus"] + 1e-6).all()
    assert init.loc["linear", "chi_plus_mean"] > init.loc["linear", "chi_plus_signed_mean"]


def test_agreement_test_is_welch_t():
    rng = np.random.default_rng(0)
    t = pd.DataFrame(
        {
            "ours": rng.uniform(0, 1, 20),
            "ours_std": rng.uniform(0.01, 0.1, 20),
            "paper_mean": rng.uniform(0, 1, 20),
            "paper_std": np.r_[0.0, rng.uniform(0.0, 0.1, 19)],
        }
    )
    got = agreement_test(t, n_ours=3)
    for r in got.itertuples():
        ref = stats.ttest_ind_from_stats(
            r.ours, r.ours_std, 3, r.paper_mean, max(r.paper_std, 0.005), 3, equal_var=False
        )
        assert r.t == pytest.approx(ref.statistic, rel=1e-10)
        assert r.p == pytest.approx(ref.pvalue, rel=1e-8)
        assert r.disagrees == (ref.pvalue < 0.05)
    # equal means never disagree; a difference of 10 standard errors always does
    same = agreement_test(t.assign(paper_mean=t["ours"]), n_ours=3)
    assert not same["disagrees"].any()
    far = agreement_test(t.assign(paper_mean=t["ours"] + 10 * got["se"]), n_ours=3)
    assert far["disagrees"].all()


def test_disagreements_allowed_is_the_binomial_quantile():
    assert disagreements_allowed(64) == 6
    rng = np.random.default_rng(1)
    counts = rng.binomial(64, 0.05, 200_000)
    assert np.mean(counts <= 6) >= 0.95 and np.mean(counts <= 5) < 0.95


@pytest.mark.parametrize("name", MINE)
def test_every_claim_has_a_control_and_an_effect(name):
    exp = get_experiment(name)
    problems = [p for s in exp.claims for p in declaration_problems(s, [exp.default_config(), exp.quick_config()])]
    assert not problems, problems


def test_fig11_small_zeta_reads_the_error_bars(tmp_path):
    """bn-small-zeta-no-gain = mean gain / mean std over seeds of the cells, recomputed from the stored tables."""
    sets = {"steps": 40, "log_every": 20, "zetas": [2.0, 10.0], "betas": [1, 2, 3], "Ps": [1, 2, 3]}
    out = run_experiment("nonlinearity.fig11", quick=True, seeds=3, sets=sets, out=tmp_path)
    f = pd.concat([out.run.result(s).tables["final"].assign(rep=s) for s in range(3)])
    small = f[f.zeta == 2.0]
    wide = small.pivot_table(index=["beta", "P", "rep"], columns="bn", values="chi_plus_mean")
    bar = small.groupby(["beta", "P", "bn"])["chi_plus_mean"].std().mean()
    expect = (wide["mean_only"] - wide["off"]).mean() / bar
    c = {x.id: x for x in out.claims}
    assert c["bn-small-zeta-no-gain"].value == pytest.approx(expect, rel=1e-4)
    assert c["bn-small-zeta-no-harm"].value == pytest.approx(expect, rel=1e-4)
    # the control: the same cells (all β, P) at the largest ζ
    large = f[f.zeta == 10.0]
    wl = large.pivot_table(index=["beta", "P", "rep"], columns="bn", values="chi_plus_mean")
    ctrl = (wl["mean_only"] - wl["off"]).mean() / large.groupby(["beta", "P", "bn"])["chi_plus_mean"].std().mean()
    assert c["bn-small-zeta-no-gain"].control_values[0] == pytest.approx(ctrl, rel=1e-4)
    # the other reading (only β > 1, P > 1), reported in the detail
    region = small[(small.beta > 1) & (small.P > 1)]
    wr = region.pivot_table(index=["beta", "P", "rep"], columns="bn", values="chi_plus_mean")
    r_region = (wr["mean_only"] - wr["off"]).mean() / region.groupby(["beta", "P", "bn"])["chi_plus_mean"].std().mean()
    assert any(f"ratio {r_region:+.2f}" in d for d in c["bn-small-zeta-no-gain"].details)
    # bn-gain-grows-with-zeta's control: the sign-flip null on the four cells β, P ∈ {2, 3}, whose only patterns are
    # the checkerboard (+ at (2, 2) and (3, 3), − at (2, 3) and (3, 2)) and its negative: +|checkerboard mean|, per seed
    sign = {(2, 2): 1.0, (2, 3): -1.0, (3, 2): -1.0, (3, 3): 1.0}
    for s in range(3):
        g = f[(f.rep == s) & (f.beta > 1) & (f.P > 1)].set_index(["zeta", "bn", "beta", "P"])["chi_plus_mean"]
        null = {
            z: np.mean([w * (g[z, "mean_only", b, P] - g[z, "off", b, P]) for (b, P), w in sign.items()])
            for z in (2.0, 10.0)
        }
        assert c["bn-gain-grows-with-zeta"].control_values[s] == pytest.approx(abs(null[10.0] - null[2.0]), abs=1e-6)
    assert len(set(c["bn-gain-grows-with-zeta"].control_values)) == 3  # measured on the trained values, not 0


def test_fig4_fig10_controls(tmp_path):
    """The claims that the untrained filters can pass take the same reading at t = 0 as their control (χ̄₊ is a
    max over M = β·P filters, so it rises with β before training; linear's |cos| starts above ReLU's signed score);
    comparisons of variants that share the seed's filters (activations on signed χ̄₋, the two losses), 0 at t = 0 by
    construction, take the sign-flip null of the trained values instead."""
    sets = {"steps": 4, "log_every": 2, "betas": [1, 3], "Ps": [1, 2]}
    f4 = run_experiment("nonlinearity.fig4", quick=True, seeds=2, sets=sets, out=tmp_path)
    f10 = run_experiment("nonlinearity.fig10", quick=True, seeds=2, sets=sets, out=tmp_path)
    c4, c10 = ({x.id: x for x in out.claims} for out in (f4, f10))
    for s in range(2):
        t0 = f4.run.result(s).tables["init"]
        t0 = t0[t0["loss"] == "infonce"].set_index(["activation", "beta", "P"])["chi_plus_mean"]
        gain = {P: t0["relu", 3, P] - t0["relu", 1, P] for P in (1, 2)}
        assert c4["relu-rises-with-beta"].control_values[s] == pytest.approx(gain[2], abs=1e-6)
        assert c10["relu-rises-with-beta-quadratic"].control_values[s] == pytest.approx(gain[2], abs=1e-6)
        assert c4["relu-p1-needs-beta"].control_values[s] == pytest.approx(gain[1], abs=1e-6)
        lin_minus_relu = np.mean([t0["linear", b, 1] - t0["relu", b, 1] for b in (1, 3)])
        assert c4["p1-linear-beats-relu"].control_values[s] == pytest.approx(lin_minus_relu, abs=1e-6)
        # the sign-flip null, written out: on the cells (β, P) ∈ {1, 3} × {1, 2} the patterns are the checkerboard
        # and its negative; the control is the quartile on the claim's side: −|checkerboard mean| (both claims: lt)
        sign = {(1, 1): 1.0, (1, 2): -1.0, (3, 1): -1.0, (3, 2): 1.0}
        t = f10.run.result(s).tables["final"].set_index(["loss", "activation", "beta", "P"])
        acts = sorted(set(t.index.get_level_values("activation")))
        flip = {a: np.mean([w * (t.loc[("quadratic", a, *k), "chi_plus_mean"] - t.loc[("infonce", a, *k), "chi_plus_mean"])
                            for k, w in sign.items()]) for a in acts}  # fmt: skip
        want = -abs(np.mean(list(flip.values())))
        assert c10["quadratic-below-infonce"].control_values[s] == pytest.approx(want, abs=1e-6)
        t4 = f4.run.result(s).tables["final"]
        cm = t4[t4["loss"] == "infonce"].set_index(["activation", "beta", "P"])["chi_minus_signed_mean"]
        # ReLU − the lowest other = max over the others: per pattern the max over them, so ±: max(x_a), max(−x_a)
        x = [np.mean([w * (cm[("relu", *k)] - cm[(a, *k)]) for k, w in sign.items()]) for a in acts if a != "relu"]
        assert c4["relu-lowest-chi-minus"].control_values[s] == pytest.approx(min(max(x), max(-v for v in x)), abs=1e-6)
    for c in (c4["relu-rises-with-beta"], c4["relu-p1-needs-beta"], c4["p1-linear-beats-relu"]):
        if c.control_held:  # the untrained filters pass the reading: never reported as a pass
            assert c.status != "pass", c.id


def test_balanced_signs_enumerates_every_balanced_vector_and_samples_beyond_the_cap(monkeypatch):
    """Every ±1 vector with as many + as − (odd n: one 0, each position in turn), each once, checked against a
    brute-force filter of all 3^n vectors; above the cap a fixed sample of balanced vectors, the same every call."""
    from ssldyn.experiments.nonlinearity import _token_seeds
    from ssldyn.experiments.nonlinearity._token_seeds import balanced_signs

    for n in (2, 3, 4, 5, 6, 7):
        got = {tuple(r) for r in balanced_signs(n).tolist()}
        want = {
            p
            for p in itertools.product((1.0, -1.0, 0.0), repeat=n)
            if sum(p) == 0 and p.count(0.0) == n % 2  # balanced, with one 0 exactly when n is odd
        }
        assert got == want and len(balanced_signs(n)) == len(want)
    monkeypatch.setattr(_token_seeds, "MAX_PATTERNS", 50)
    a, b = balanced_signs(10), balanced_signs(10)  # C(10, 5) = 252 > 50: sampled
    assert a.shape == (50, 10) and (a.sum(1) == 0).all() and (a == b).all()


def test_flip_patterns_cancel_shared_effects_and_additive_trends_and_no_cell_is_special():
    """The sign-flip patterns over a full β × P grid: every pattern sums to 0 along each β and each P, so a shared
    effect plus any additive trends in β and P reads exactly 0 under every one; the single checkerboard is among
    them; on an odd side every β (and P) sits out in some pattern and takes part in others, so the (β = 10, P = 10)
    corner of Fig. 11's 3 × 3 grid counts; an effect confined to one cell gives the same null whichever cell holds
    it (a single checkerboard gave +e/n or −e/n by the cell's parity); a grid with a missing cell, or a line of cells,
    admits none."""
    from ssldyn.experiments.nonlinearity._token_seeds import flip_patterns, sign_flip_null

    betas, Ps = [1, 2, 5, 10], [1, 3, 5, 10]
    cells = [(b, P) for b in betas for P in Ps]
    S = flip_patterns(cells)
    grid = S.reshape(len(S), 4, 4)  # (K, β, P): cells are listed β-major
    assert (grid.sum(1) == 0).all() and (grid.sum(2) == 0).all() and set(np.unique(S)) == {-1.0, 1.0}
    checker = np.array([1.0 if (i + j) % 2 == 0 else -1.0 for i in range(4) for j in range(4)])
    assert any((row == checker).all() for row in S)
    rng = np.random.default_rng(0)
    f, g = dict(zip(betas, rng.normal(size=4))), dict(zip(Ps, rng.normal(size=4)))
    shared = np.array([0.3 + f[b] + g[P] for b, P in cells])  # common effect + trend in β + trend in P
    assert np.abs(S @ shared).max() < 1e-12
    nulls = set()
    for i in range(16):
        e = np.zeros(16)
        e[i] = 0.4  # an effect in one cell only
        assert np.mean(e) == pytest.approx(0.025)
        nulls.add(round(sign_flip_null(e, cells, tail="upper"), 12))
    assert nulls == {0.025}  # whichever cell: the null reads the effect as the cells' noise
    odd = [(b, P) for b in (2, 5, 10) for P in (3, 5, 10)]
    S3 = flip_patterns(odd)
    corner = odd.index((10, 10))
    assert (S3[:, corner] != 0).mean() == pytest.approx(4 / 9) and (S3.reshape(-1, 3, 3).sum(1) == 0).all()
    trend = np.array([0.1 * np.log(b) for b, _ in odd])  # a trend in β alone cancels on the odd grid too
    assert np.abs(S3 @ trend).max() < 1e-12
    assert flip_patterns([(5, 3), (5, 5)]) is None and flip_patterns([(1, 1), (1, 3), (5, 1)]) is None
    assert sign_flip_null(np.array([0.3, 0.1]), [(5, 3), (5, 5)], tail="upper") is None


def test_sign_flip_null_is_the_quartile_on_the_claims_side_written_out():
    """``sign_flip_null``: the upper (lower) quartile of mean_c s_c d_c over the patterns, written out on a 2 × 3 grid
    (its 2 · 6 = 12 patterns: u ∈ ±(+, −) over β times v over P with one P sitting out), and ``(n, k)`` differences
    reduced per pattern (mean or max over k)."""
    from ssldyn.experiments.nonlinearity._token_seeds import sign_flip_null

    cells = [(b, P) for b in (1, 5) for P in (1, 3, 5)]
    d = np.array([0.31, 0.27, 0.35, 0.29, 0.2, 0.5])
    pats = []
    for u in ((1, -1), (-1, 1)):
        for v in itertools.product((1, -1, 0), repeat=3):
            if sum(v) == 0 and v.count(0) == 1:
                pats.append([u[i] * v[j] for i in range(2) for j in range(3)])
    assert len(pats) == 12
    vals = [np.mean(np.array(p) * d) for p in pats]
    assert sign_flip_null(d, cells, tail="upper") == pytest.approx(np.quantile(vals, 0.75), abs=1e-15)
    assert sign_flip_null(d, cells, tail="lower") == pytest.approx(np.quantile(vals, 0.25), abs=1e-15)
    assert sign_flip_null(d + 5.0, cells, tail="upper") == pytest.approx(sign_flip_null(d, cells, tail="upper"))
    D = np.stack([d, d[::-1] * 2], axis=1)  # (6, 2)
    per_k = np.array([[np.mean(np.array(p) * D[:, j]) for j in range(2)] for p in pats])  # (12, 2)
    assert sign_flip_null(D, cells, tail="lower", reduce=np.max) == pytest.approx(np.quantile(per_k.max(1), 0.25))
    assert sign_flip_null(D, cells, tail="upper") == pytest.approx(np.quantile(per_k.mean(1), 0.75))


def test_noise_match_max_is_the_best_matched_noise_token_written_out():
    """chi_probes' ``noise_match_max``: max over RFs k and tokens a ∉ R_k^g of max_m cos(w_km, u_a), signed for ReLU,
    |cos| for linear (Fig. 5's relu-ignores-noise and its linear control), against loops over k, a, m."""
    from types import SimpleNamespace

    from ssldyn.data.tokens import TokenGenerator
    from ssldyn.experiments.nonlinearity.token_grid import chi_probes

    runs = make_runs(activations=["relu", "linear"], betas=[2], Ps=[3], seeds=[0], base=TokenRun(batch=16))
    gens = [TokenGenerator(r.spec, r.seed) for r in runs]
    K, d = gens[0].allowed.shape[0], gens[0].embedding.shape[1]
    M = max(r.filters for r in runs)
    W = torch.randn(len(runs), K, M, d, generator=torch.Generator().manual_seed(3))  # (E, K, M, d)
    net = SimpleNamespace(W=W, filter_mask=torch.ones(len(runs), K, M))
    got = chi_probes(runs)["noise_match_max"](net)  # (E,)
    for e, (r, g) in enumerate(zip(runs, gens)):
        U, allowed = g.embedding.double().numpy(), g.allowed.numpy()
        best = -np.inf
        for k in range(K):
            for a in range(U.shape[0]):
                if a in allowed[k]:
                    continue
                for m in range(M):
                    w = W[e, k, m].double().numpy()
                    c = w @ U[a] / (np.linalg.norm(w) * np.linalg.norm(U[a]))
                    best = max(best, abs(c) if r.activation == "linear" else c)
        assert float(got[e]) == pytest.approx(best, abs=1e-5), r.activation


def _captured_by_loops(W, U, allowed, absolute: bool) -> float:
    """Fraction of (k, a ∈ allowed[k]) with max_m cos(W[k, m], U[a]) ≥ 0.9 (|cos| if ``absolute``), by loops."""
    hits = 0
    for k in range(allowed.shape[0]):
        for a in allowed[k]:
            cos = [w @ U[a] / (np.linalg.norm(w) * np.linalg.norm(U[a])) for w in W[k]]
            hits += (max(abs(c) for c in cos) if absolute else max(cos)) >= 0.9
    return hits / allowed.size


def test_captured_fraction_counts_the_candidates_some_filter_matches_at_cos_0_9():
    """Fig. 5's relu-captures-candidates / linear-cannot-capture: the fraction of (RF k, a ∈ R_k^g) with
    max_m cos(w_km, u_a) ≥ 0.9 (|cos| for linear). Filters set to the first candidate of each RF (ReLU: +u_a, linear:
    −u_a, whose |cos| is 1) capture exactly 1/P of the pairs on top of the random filters' captures, counted by loops."""
    from ssldyn.data.tokens import TokenGenerator
    from ssldyn.experiments.nonlinearity.token_grid import captured_fraction

    runs = make_runs(activations=["relu", "linear"], betas=[2], Ps=[3], seeds=[0], base=TokenRun(batch=16))
    for r in runs:
        g = TokenGenerator(r.spec, r.seed)
        U, allowed = g.embedding.double().numpy(), g.allowed.numpy()
        K, P, d = allowed.shape[0], allowed.shape[1], U.shape[1]
        W = np.random.default_rng(1).normal(size=(K, r.filters, d))
        sign = 1.0 if r.activation == "relu" else -1.0
        W[:, 0] = sign * U[allowed[:, 0]]  # RF k's first filter on its first candidate
        got = captured_fraction(W, r)
        assert got == pytest.approx(_captured_by_loops(W, U, allowed, r.activation == "linear")) and got >= 1 / P
        W[:, 0] = -sign * U[allowed[:, 0]]  # the opposite sign: |cos| still captures, the signed cosine does not
        assert captured_fraction(W, r) == pytest.approx(_captured_by_loops(W, U, allowed, r.activation == "linear"))
        assert (captured_fraction(W, r) >= 1 / P) == (r.activation == "linear")
