"""Figures of the token-generator grids (`nonlinearity` Fig. 4, 5, 9, 10, 11, Table 1): the plotted data are the
claims' readings, computed here independently from hand-built per-seed tables, and every figure renders (with a
caption) at the paper-scale config shapes."""

import itertools

import numpy as np
import pandas as pd
import pytest

import ssldyn.viz.common as viz
from ssldyn.contract import Result
from ssldyn.experiments.nonlinearity.fig4 import Fig4, Fig4Config
from ssldyn.experiments.nonlinearity.fig5 import Fig5, Fig5Config
from ssldyn.experiments.nonlinearity.fig10 import Fig10, Fig10Config
from ssldyn.experiments.nonlinearity.fig11 import Fig11, Fig11Config
from ssldyn.experiments.nonlinearity.table1 import COLUMNS, Table1, Table1Config, side_by_side
from ssldyn.experiments.nonlinearity.token_grid import CHI

N_SEEDS = 3


@pytest.fixture
def figures(monkeypatch):
    """The figures the plots save (still readable after ``save_figure`` closes them)."""
    saved, save = [], viz.save_figure

    def keep(fig, path, *a, **kw):
        saved.append(fig)
        return save(fig, path, *a, **kw)

    monkeypatch.setattr(viz, "save_figure", keep)
    return saved


def _seed_table(rng, settings: list[dict]) -> pd.DataFrame:
    """One seed's final (or init) table: random χ columns per setting, χ̄₋'s |cos| and signed scores distinct."""
    rows = []
    for s in settings:
        vals = {f"{c}_mean": float(rng.uniform(-0.5, 1.0)) for c in CHI}
        vals |= {f"{c}_{k}": v for c in CHI for k, v in (("std", 0.01), ("count", 1))}
        rows.append({"zeta": 1.0, "bn": "mean_only", **s, **vals})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=1).reset_index(drop=True)  # order must not matter


def _grid_results(cfg, seed: int = 0) -> list[Result]:
    """Per-seed results of the activation grid (``final`` and ``init``), as ``run_activation_grid`` returns."""
    rng = np.random.default_rng(seed)
    settings = [{"loss": loss, "activation": a, "beta": b, "P": P}
                for loss, a, b, P in itertools.product(cfg.losses, cfg.activations, cfg.betas, cfg.Ps)]  # fmt: skip
    return [Result(tables={"final": _seed_table(rng, settings), "init": _seed_table(rng, settings)}, seed=i)
            for i in range(N_SEEDS)]  # fmt: skip


def _first(rs: list[Result]) -> Result:
    rs[0].seed_results = rs
    return rs[0]


def _seed_mean(rs, table: str, col: str, **sel) -> np.ndarray:
    """Mean over the seeds of ``col`` along β (sorted), by plain look-ups (the reading the claims make per seed)."""
    betas = sorted(rs[0].tables[table]["beta"].unique())
    out = []
    for b in betas:
        vals = []
        for r in rs:
            t = r.tables[table]
            m = (t["beta"] == b).to_numpy().copy()
            for k, v in sel.items():
                m &= (t[k] == v).to_numpy()
            assert m.sum() == 1
            vals.append(float(t.loc[m, col].iloc[0]))
        out.append(np.mean(vals))
    return np.array(out)


def _panel(fig, title_start: str, P: int):
    (ax,) = [a for a in fig.axes if a.get_title().startswith(title_start) and a.get_title().endswith(f"P = {P}")]
    return ax


def _ydata(ax, gid: str) -> np.ndarray:
    (line,) = [ln for ln in ax.lines if ln.get_gid() == gid]
    return np.asarray(line.get_ydata(), dtype=float)


def test_fig4_chi_minus_row_plots_the_signed_score_the_claim_reads(tmp_path, figures):
    cfg = Fig4Config()  # the paper-scale grid: six activations, both losses, 4 β × 4 P
    rs = _grid_results(cfg)
    (path,) = Fig4().plots(cfg, _first(rs), tmp_path)
    assert path.exists() and Fig4.caption(path.name)
    (fig,) = figures
    for P, act in itertools.product(cfg.Ps, cfg.activations):
        sel = {"loss": "infonce", "activation": act, "P": P}
        ax = _panel(fig, "InfoNCE: Fig. 9 bottom", P)
        want = _seed_mean(rs, "final", "chi_minus_signed_mean", **sel)  # relu-lowest-chi-minus's column
        assert _ydata(ax, f"main:{act}") == pytest.approx(want, abs=1e-12)
        assert not np.allclose(want, _seed_mean(rs, "final", "chi_minus_mean", **sel))  # the |cos| score differs
        assert _ydata(ax, f"init:{act}") == pytest.approx(_seed_mean(rs, "init", "chi_minus_signed_mean", **sel))
        top = _panel(fig, "InfoNCE: Fig. 4 top", P)
        assert _ydata(top, f"main:{act}") == pytest.approx(_seed_mean(rs, "final", "chi_plus_mean", **sel))
        assert _ydata(top, f"init:{act}") == pytest.approx(_seed_mean(rs, "init", "chi_plus_mean", **sel))
        quad = _panel(fig, "quadratic loss: Fig. 4 bottom", P)
        want_q = _seed_mean(rs, "final", "chi_plus_mean", **{**sel, "loss": "quadratic"})
        assert _ydata(quad, f"main:{act}") == pytest.approx(want_q)


def test_fig4_claim_reading_from_the_plotted_chi_minus(figures, tmp_path):
    """One seed: relu-lowest-chi-minus (ReLU's mean χ̄₋ over the cells minus the lowest other activation's) is read
    off the plotted χ̄₋ curves exactly."""
    cfg = Fig4Config()
    rs = _grid_results(cfg, seed=3)[:1]
    Fig4().plots(cfg, _first(rs), tmp_path)
    (fig,) = figures
    per_act = {a: np.mean([_ydata(_panel(fig, "InfoNCE: Fig. 9 bottom", P), f"main:{a}") for P in cfg.Ps])
               for a in cfg.activations}  # fmt: skip
    want = per_act["relu"] - min(v for a, v in per_act.items() if a != "relu")
    assert Fig4().measure(cfg, rs[0])["relu-lowest-chi-minus"].value == pytest.approx(want, abs=1e-12)


def test_fig10_rows_and_gap_are_the_claim_readings(tmp_path, figures):
    cfg = Fig10Config()
    rs = _grid_results(cfg, seed=1)
    (path,) = Fig10().plots(cfg, _first(rs), tmp_path)
    assert Fig10.caption(path.name)
    (fig,) = figures
    gaps = []
    for P, act in itertools.product(cfg.Ps, cfg.activations):
        q, n = {"loss": "quadratic", "activation": act, "P": P}, {"loss": "infonce", "activation": act, "P": P}
        top = _panel(fig, "quadratic loss: Fig. 10 top", P)
        assert _ydata(top, f"main:{act}") == pytest.approx(_seed_mean(rs, "final", "chi_plus_mean", **q))
        assert _ydata(top, f"ref:{act}") == pytest.approx(_seed_mean(rs, "final", "chi_plus_mean", **n))
        assert _ydata(top, f"init:{act}") == pytest.approx(_seed_mean(rs, "init", "chi_plus_mean", **q))
        bottom = _panel(fig, "quadratic loss: Fig. 10 bottom", P)
        assert _ydata(bottom, f"main:{act}") == pytest.approx(_seed_mean(rs, "final", "chi_minus_signed_mean", **q))
        gap = _ydata(_panel(fig, "gap: quadratic − InfoNCE", P), f"main:{act}")
        want = _seed_mean(rs, "final", "chi_plus_mean", **q) - _seed_mean(rs, "final", "chi_plus_mean", **n)
        assert gap == pytest.approx(want, abs=1e-12)
        gaps.append(gap)
    # quadratic-below-infonce: the mean over the cells per seed; over the seeds, the mean of the plotted gaps
    readings = [Fig10().measure(cfg, r)["quadratic-below-infonce"].value for r in rs]
    assert np.mean(readings) == pytest.approx(np.mean(gaps), abs=1e-12)
    assert f"{np.mean(gaps):+.3f}".replace("-", "−") in fig._suptitle.get_text()


def test_fig11_legend_in_words_and_curves(tmp_path, figures):
    cfg = Fig11Config()
    rng = np.random.default_rng(2)
    settings = [{"loss": "infonce", "activation": "relu", "zeta": z, "bn": bn, "beta": b, "P": P}
                for z, bn, b, P in itertools.product(cfg.zetas, ["mean_only", "off"], cfg.betas, cfg.Ps)]  # fmt: skip
    rs = [Result(tables={"final": _seed_table(rng, settings), "init": _seed_table(rng, settings)}) for _ in range(3)]
    (path,) = Fig11().plots(cfg, _first(rs), tmp_path)
    assert Fig11.caption(path.name)
    (fig,) = figures
    texts = [t.get_text() for t in fig.axes[len(cfg.Ps) - 1].get_legend().get_texts()]
    assert "no BN" in texts and "BN (mean-backprop, Def. 5)" in texts
    z, P = cfg.zetas[-1], cfg.Ps[-1]
    ax = _panel(fig, f"ζ = {z:g}", P)
    want = _seed_mean(rs, "final", "chi_plus_mean", zeta=z, bn="off", P=P)
    assert _ydata(ax, "main:off") == pytest.approx(want)
    assert fig._suptitle.get_text().startswith("Fig. 11: ReLU")


def _table1_results(cfg, n: int) -> list[Result]:
    rng = np.random.default_rng(4)
    rs = []
    for _ in range(n):
        final = pd.DataFrame([{"beta": b, "P": P, "bn": m, "chi_plus_mean": float(rng.uniform(-0.05, 1.0))}
                              for b, P, (m, _) in itertools.product(cfg.betas, cfg.Ps, COLUMNS)])  # fmt: skip
        lr = final.loc[final.bn == "mean_only"].assign(chi_plus_mean=lambda d: d["chi_plus_mean"] - 0.2)
        rs.append(Result(tables={"side_by_side": side_by_side(final, lr)}))
    return rs


def test_table1_shades_the_cells_the_welch_test_rejects(tmp_path, figures):
    from scipy import stats

    cfg = Table1Config()  # paper scale: 4 × 4 cells and the lr 2e-3 column
    rs = _table1_results(cfg, 3)
    (path,) = Table1().plots(cfg, _first(rs), tmp_path)
    assert Table1.caption(path.name)
    (fig,) = figures
    tb = fig.axes[0].tables[0]
    stacked = pd.concat([r.tables["side_by_side"] for r in rs])
    for i, (b, P) in enumerate(itertools.product(cfg.betas, cfg.Ps), start=1):
        assert tb[(i, 0)].get_text().get_text() == str(b) and tb[(i, 1)].get_text().get_text() == str(P)
        for j, (mode, _) in enumerate(COLUMNS, start=2):
            c = stacked.loc[(stacked.beta == b) & (stacked.P == P) & (stacked.bn == mode)]
            p = stats.ttest_ind_from_stats(c["ours"].mean(), c["ours"].std(), 3, c["paper_mean"].iloc[0],
                                           max(c["paper_std"].iloc[0], 0.005), 3, equal_var=False).pvalue  # fmt: skip
            shaded = tb[(i, j)].get_facecolor()[:3] != (1.0, 1.0, 1.0)
            assert shaded == (p < 0.05), (b, P, mode)
            assert tb[(i, j)].get_text().get_text().startswith(f"{c['ours'].mean():.2f}")  # the sign is kept
    assert "ours only" in tb[(0, 6)].get_text().get_text()


def _fig5_results(cfg, n: int) -> list[Result]:
    rng = np.random.default_rng(5)
    rs = []
    for s in range(n):
        r = Result(seed=s)
        chi = []
        for P, act in itertools.product(cfg.panels_P, ("relu", "linear")):
            key = f"P{P}_{act}"
            r.arrays[f"filters/{key}"] = rng.normal(size=(cfg.K, cfg.beta * P, cfg.n_tokens)) * rng.uniform(0.1, 3)
            r.arrays[f"allowed/{key}"] = np.stack([rng.permutation(cfg.n_tokens)[:P] for _ in range(cfg.K)])
            r.summary[f"noise_match_max/{key}"], r.summary[f"noise_match_max_init/{key}"] = rng.uniform(0, 1, 2)
            for step in range(0, cfg.steps + 1, cfg.log_every):
                chi.append({"activation": act, "P": P, "step": step} | {c: rng.uniform() for c in CHI})
        r.tables["chi"] = pd.DataFrame(chi)
        rs.append(r)
    return rs


def test_fig5_cells_are_cosines_and_every_figure_has_a_caption(tmp_path, figures):
    cfg = Fig5Config()  # paper scale: panels P = 3 and 5
    rs = _fig5_results(cfg, 5)
    paths = Fig5().plots(cfg, _first(rs), tmp_path)
    assert sorted(p.name for p in paths) == ["chi_over_training.png", "fig5_P3.png", "fig5_P5.png"]
    assert all(Fig5.caption(p.name) for p in paths)
    fig = figures[0]  # fig5_P3.png: RF k's image is [ReLU | gap | linear], each filter over its L2 norm
    for k in (0, cfg.K - 1):
        img = np.ma.filled(fig.axes[k + k // 5].images[0].get_array(), np.nan)
        for act, cols in (("relu", slice(0, cfg.n_tokens)), ("linear", slice(cfg.n_tokens + 1, None))):
            w = rs[0].arrays[f"filters/P3_{act}"][k]
            assert img[:, cols] == pytest.approx(w / np.linalg.norm(w, axis=1, keepdims=True))
    assert "seed 0" in fig._suptitle.get_text() and "d = 20" in fig._suptitle.get_text()
    over = figures[-1]
    assert over._suptitle.get_text().startswith("Extra diagnostic (not a paper figure)")
    ax = over.axes[1]  # χ̄₋: the signed score for both activations, the mean over the seeds bold
    for P, act in itertools.product(cfg.panels_P, ("relu", "linear")):
        (line,) = [
            ln for ln in ax.lines if ln.get_label().startswith(f"{'ReLU' if act == 'relu' else 'linear'}, P = {P}")
        ]
        chis = [r.tables["chi"] for r in rs]
        want = pd.concat([t.loc[(t.activation == act) & (t.P == P)] for t in chis])
        want = want.groupby("step")
        assert line.get_ydata() == pytest.approx(want["chi_minus_signed"].mean().to_numpy())
