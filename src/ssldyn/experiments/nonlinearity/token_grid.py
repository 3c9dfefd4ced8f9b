"""Shared computation of the token-generator experiments (`nonlinearity` Sec. 5, App. E.2).

Builds grids of :class:`~ssldyn.dynamics.ensemble_trainer.TokenRun`, trains them as batched
ensembles — one lab task per ensemble (``ctx.as_completed``: worker processes, Ray tasks or
in-process, as the lab decides) — caches every finished run through the run store
(``ctx.cache``, namespace ``token_runs``: keyed by the run's settings, steps, logging, device
and the code version), and turns the trajectories into long tables. Figures are drawn by the
experiments (:mod:`.token_plots`). Protocol choices (see README, "Token-generator experiments"):

- learning rate 0.02 (the reference implementation's documented command), not the 2e-3 of
  the paper's text: with 2e-3, χ̄₊ only moves from ≈ 0.36 to ≈ 0.5 in 5000 steps (README "Protocol choices");
- χ± as eq. 16 prints it (signed cosine) for ReLU and LeakyReLU; ``|cos|`` for the sign-symmetric
  activations (linear, tanh, x², and sigmoid under BN), whose filters' sign is not identifiable
  (:func:`~ssldyn.dynamics.ensemble_trainer.sign_symmetric`: the paper's Fig. 4/9 (a) shows the
  linear network at P = 1, β = 1 working well, which a single sign-arbitrary filter scored with the
  signed cosine could not). Every run also records ``chi_plus_signed`` and ``chi_minus_signed``, χ̄± with
  the signed cosine (eq. 16 / 181 as printed) whatever the activation, so χ̄₋ can be compared across
  activations on one metric (the same filters score the same at initialisation, and a sign-symmetric
  network's signed score is at most its ``|cos|`` score) and the P = 1 claims can be read under eq. 16 as
  printed too;
- BN default ``mean_only`` (the paper's Def. 5 and the documented command's
  ``backprop_var=false``) where the paper does not state the variant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import Field, PositiveFloat

from ssldyn.checks import choice
from ssldyn.contract import ExperimentConfig
from ssldyn.contract.context import Context
from ssldyn.data.tokens import TokenGenerator
from ssldyn.dynamics.ensemble_trainer import (
    TOKEN_MAX_ELEMS,
    TokenNegatives,
    TokenRun,
    group_token_runs,
    sign_symmetric,
    token_ensemble_cost,
    token_probes,
    train_token_ensemble,
)
from ssldyn.dynamics.trajectory import Trajectory
from ssldyn.experiments.nonlinearity._common import F32, NonlinearityExperiment
from ssldyn.memory import PROCESS_BASELINE
from ssldyn.probes.chi import best_match

CACHE_NAMESPACE = "token_runs"
CHI = ("chi_plus", "chi_minus", "chi_plus_signed", "chi_minus_signed")
# χ̄± over the tokens some generator draws at k (the reference's scoring) and, suffixed, over eq. 16's
# P candidates R_k^g: both logged, ``chi_tokens`` picks which one the tables call chi_plus / chi_minus
#: ``noise_match_max``: the largest best match over the RFs and their noise tokens a ∉ R_k^g (:func:`chi_probes`)
PROBES = (*CHI, *(f"{c}_candidates" for c in CHI), "noise_match_max", "loss")
CHI_TOKENS = ("generators", "candidates")


def make_runs(
    *,
    losses: Sequence[str] = ("infonce",),
    activations: Sequence[str] = ("relu",),
    betas: Sequence[int] = (1,),
    Ps: Sequence[int] = (5,),
    seeds: Sequence[int] = (0,),
    zetas: Sequence[float] = (1.0,),
    bns: Sequence[str] = ("mean_only",),
    base: TokenRun | None = None,
    **spec_kw: Any,
) -> list[TokenRun]:
    """The Cartesian grid loss × activation × β × P × ζ × BN × seed (other settings from ``base``)."""
    base = base or TokenRun()
    runs = []
    for loss in losses:
        for act in activations:
            for zeta in zetas:
                for bn in bns:
                    for beta in betas:
                        for P in Ps:
                            for seed in seeds:
                                spec = replace(base.spec, P=int(P), zeta=float(zeta), **spec_kw)
                                runs.append(
                                    replace(
                                        base,
                                        spec=spec,
                                        beta=int(beta),
                                        activation=act,
                                        loss=loss,
                                        bn=bn,
                                        seed=int(seed),
                                    )
                                )
    return runs


def run_key(run: TokenRun, steps: int, every: int, keep_filters: bool, compile: bool = False) -> dict[str, Any]:
    """What determines one run's cached record (the lab adds the device and the code version);
    a compiled step equals the eager one only to float round-off, so it is part of the key."""
    return {
        "run": run.describe(),
        "steps": steps,
        "every": every,
        "filters": keep_filters,
        "dtype": "float32",
        "compile": compile,
        "probes": list(PROBES),
    }


@dataclass(frozen=True)
class EnsembleTask:
    """One ensemble of the grid: what a worker needs to train it (picklable)."""

    runs: tuple[TokenRun, ...]
    steps: int
    every: int
    keep_filters: bool
    device: str = "cpu"
    compile: bool = False


def chi_probes(runs: Sequence[TokenRun], device: str = "cpu") -> dict:
    """χ̄₊, χ̄₋ in the activation's metric (:func:`~ssldyn.dynamics.ensemble_trainer.sign_symmetric`) and
    ``chi_plus_signed``, ``chi_minus_signed`` (χ̄± with the signed cosine, eq. 16 / 181, for every run) as probes
    ``net -> (E,)`` of an ensemble of ``runs``: over the tokens some generator draws at position k (``relevant``,
    the reference's scoring) and, as ``*_candidates``, over the P candidate tokens R_k^g of eq. 16 (``allowed``); and
    ``noise_match_max``, ``max_k max_{a ∉ R_k^g} max_m cos(w_km, u_a)`` in the activation's metric (signed; |cos|
    for the sign-symmetric ones): how well the best-matched noise token of any RF is matched (1: learned)."""
    import torch

    gens = [TokenGenerator(r.spec, r.seed) for r in runs]
    emb = torch.stack([g.embedding for g in gens]).to(device=device, dtype=torch.float32)  # (E, T, d)
    absolute = torch.tensor([sign_symmetric(r.activation, r.bn) for r in runs], device=device)  # (E,)
    relevant = torch.stack([g.relevant for g in gens]).to(device)  # (E, K, T)
    candidates = torch.stack(  # (E, K, T): a ∈ R_k^g (P differs between members)
        [torch.zeros_like(g.relevant).scatter_(1, g.allowed, True) for g in gens]
    ).to(device)
    probes = {}
    for suffix, tokens in (("", relevant), ("_candidates", candidates)):
        chi = token_probes(emb, tokens, absolute)
        probes[f"chi_plus{suffix}"], probes[f"chi_minus{suffix}"] = chi["chi_plus"], chi["chi_minus"]
        signed = token_probes(emb, tokens, False)
        probes[f"chi_plus_signed{suffix}"], probes[f"chi_minus_signed{suffix}"] = (
            signed["chi_plus"],
            signed["chi_minus"],
        )

    def noise_match_max(net) -> torch.Tensor:
        c = best_match(net.W, emb, absolute=absolute, filter_mask=net.filter_mask)  # (E, K, T): the best filter
        return c.masked_fill(candidates, float("-inf")).amax(dim=(-2, -1))  # (E,)

    probes["noise_match_max"] = noise_match_max
    return probes


def train_ensemble_task(task: EnsembleTask) -> list[dict[str, np.ndarray]]:
    """Train one ensemble (a lab task) -> one record per run: ``step``, the :data:`PROBES` (χ̄± both ways,
    ``loss``) at the logged steps, and ``filters`` ``(K, M, d)`` when kept."""
    res = train_token_ensemble(
        list(task.runs),
        steps=task.steps,
        every=task.every,
        device=task.device,
        compile=task.compile,
        probes=chi_probes(task.runs, task.device),
    )
    wide = res.trajectory.columns()  # one row per (step, member), one column per probe, sorted by step
    W = res.state.W.detach().cpu()  # (E, K, M_pad, d)
    out = []
    for e, r in enumerate(task.runs):
        mine = wide.loc[wide["member"] == e]
        rec = {"step": mine["step"].to_numpy(np.int64)} | {p: mine[p].to_numpy(np.float32) for p in PROBES}
        if task.keep_filters:
            rec["filters"] = W[e, :, : r.filters].numpy().copy()
        out.append(rec)
    return out


def run_grid(
    runs: Sequence[TokenRun],
    *,
    steps: int,
    every: int = 100,
    ctx: Context | None = None,
    keep_filters: bool = False,
    max_elems: int | None = None,
    compile: bool = False,
) -> Trajectory:
    """Train every run (cached ones are read back), batched by :func:`group_token_runs`.

    The ensembles are those of all ``runs``, cached or not; an ensemble with one run missing from the
    cache is trained whole (and its runs cached again), so deleting cache entries and recomputing
    gives bit-identical values. A run cached by another grid (another experiment's run list, hence
    possibly another ensemble) agrees with this grid's own value to float32 round-off of the
    batched arithmetic (measured 2.4e-7; the tested bound is 1e-5, tests/lab/test_reliability_cache.py).

    Ensembles are lab tasks (``ctx.as_completed``, largest first; each run is cached as soon as
    its ensemble finishes). Without a ``ctx`` (library use) the grid trains in this process and
    nothing is cached on disk. ``compile``: train through ``torch.compile`` (CUDA graphs on a GPU;
    see :func:`~ssldyn.dynamics.ensemble_trainer.train_ensemble`).

    Returns:
        a :class:`~ssldyn.dynamics.trajectory.Trajectory` with member m = ``runs[m]``: probes
        ``chi_plus``, ``chi_minus``, ``chi_minus_signed`` (and the same over eq. 16's candidates,
        ``*_candidates``; :func:`chi_probes`), ``loss`` at steps 0, every, …, steps; with ``keep_filters``
        the final filters ``(K, M, d)`` of run m as the snapshot ``filters/m`` at the last step.
        ``meta["runs"]`` describes the runs.
    """
    ctx = ctx if ctx is not None else Context()
    dev = str(ctx.device)
    keys = [run_key(r, steps, every, keep_filters, compile) for r in runs]
    records: list[dict[str, np.ndarray] | None] = [ctx.cache_lookup(k, namespace=CACHE_NAMESPACE) for k in keys]
    # the ensembles of ALL runs, whatever is cached (a run's float32 values depend on its ensemble's
    # padding and batch shapes); an ensemble with a missing run is trained whole, so a recomputed run
    # has exactly the value it had when it was cached
    groups = [g for g in group_token_runs(list(runs), max_elems, device=dev) if any(records[i] is None for i in g)]
    groups.sort(key=lambda g: -token_ensemble_cost([runs[i] for i in g]))  # largest first (load balance)
    tasks = [EnsembleTask(tuple(runs[i] for i in g), steps, every, keep_filters, dev, compile) for g in groups]
    for gi, recs in ctx.as_completed(train_ensemble_task, tasks, description="token ensembles"):
        for i, rec in zip(groups[gi], recs):
            records[i] = rec
            ctx.cache_store(keys[i], rec, namespace=CACHE_NAMESPACE)
    traj = Trajectory(meta={"runs": [r.describe() for r in runs]})
    done = [rec for rec in records if rec is not None]
    assert len(done) == len(runs) and all(np.array_equal(rec["step"], done[0]["step"]) for rec in done)
    cols = {p: np.stack([rec[p] for rec in done], 1) for p in PROBES} if done else {}  # probe -> (n_log, R)
    for j, t in enumerate(done[0]["step"] if done else ()):
        for p in PROBES:
            traj.log_members(int(t), p, cols[p][j])  # member m = runs[m]
    for m, rec in enumerate(done):
        if keep_filters:
            traj.snapshot(int(rec["step"][-1]), f"filters/{m}", rec["filters"])
    return traj


#: the cosine at which a filter has captured a token (within ≈ 26°; the documented run's χ̄₊ level is 0.95)
CAPTURE_COS = 0.9


def captured_fraction(filters: np.ndarray, run: TokenRun, level: float = CAPTURE_COS) -> float:
    """The fraction of the pairs (RF k, candidate a ∈ R_k^g) that some filter of RF k has captured:
    ``max_m cos(w_km, u_a) ≥ level`` in the activation's metric (signed; |cos| for the sign-symmetric activations).

    ``filters (K, M, d)`` of ``run`` (its data set gives the embedding u_a and the candidates R_k^g)."""
    import torch

    gen = TokenGenerator(run.spec, run.seed)
    W = torch.as_tensor(filters, dtype=torch.float64)  # (K, M, d)
    c = best_match(W, gen.embedding.to(torch.float64), absolute=sign_symmetric(run.activation, run.bn))  # (K, T)
    cand = c.gather(1, gen.allowed)  # (K, P)
    return float((cand >= level).to(torch.float64).mean())


def token_data(run: TokenRun) -> dict[str, np.ndarray]:
    """The data set of a run: ``relevant`` (K, n_tokens) and ``allowed`` (K, P) tokens (regenerated)."""
    gen = TokenGenerator(run.spec, run.seed)
    return {"relevant": gen.relevant.numpy(), "allowed": gen.allowed.numpy()}


def grid_frame(runs: Sequence[TokenRun], traj: Trajectory, chi_tokens: str = "generators") -> pd.DataFrame:
    """Long table: loss, activation, beta, P, zeta, bn, init, step, chi_plus, chi_minus, chi_plus_signed,
    chi_minus_signed,
    loss_value (one row per run and logged step, runs in order). ``chi_tokens``: the χ̄± columns are over
    the tokens some generator draws at k (``"generators"``, the reference's scoring) or over eq. 16's P
    candidates R_k^g (``"candidates"``)."""
    choice(chi_tokens, "chi_tokens", CHI_TOKENS, where="grid_frame")
    suffix = "" if chi_tokens == "generators" else "_candidates"
    wide = traj.columns().sort_values(["member", "step"], kind="stable")  # one row per (member, step)
    settings = pd.DataFrame(
        [
            {"loss": r.loss, "activation": r.activation, "beta": r.beta, "P": r.spec.P, "zeta": r.spec.zeta}
            | {"bn": r.bn, "init": r.seed}
            for r in runs
        ]
    )
    out = settings.iloc[wide["member"].to_numpy(dtype=np.int64)].reset_index(drop=True)
    out["step"] = wide["step"].to_numpy(dtype=np.int64)
    for probe, col in [*((c + suffix, c) for c in CHI), ("loss", "loss_value")]:
        out[col] = wide[probe].to_numpy(dtype=np.float64)
    return out


#: the columns of the grid's tables that name a setting (a cell of the grid, up to the seed)
SETTING_KEYS = ["loss", "activation", "zeta", "bn", "beta", "P"]


def final_table(df: pd.DataFrame, step: int | None = None) -> pd.DataFrame:
    """Mean and std over seeds of χ̄± per setting (:data:`SETTING_KEYS`: loss, activation, ζ, bn, β, P) at ``step``
    (default the last; ``0``: at initialisation)."""
    last = df[df["step"] == (df["step"].max() if step is None else step)]
    if last.empty:
        raise ValueError(f"final_table: no rows at step {step}")
    g = last.groupby(SETTING_KEYS)
    t = g[list(CHI)].agg(["mean", "std", "count"])
    t.columns = [f"{a}_{b}" for a, b in t.columns]
    return t.reset_index()


def select(t: pd.DataFrame, sel: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of ``t`` whose columns equal ``sel``'s values."""
    for k, v in sel.items():
        t = t.loc[t[k] == v]
    return t


def cell(t: pd.DataFrame, col: str = "chi_plus_mean", **sel: Any) -> float:
    """One value of :func:`final_table` selected by keys (exactly one row must match)."""
    rows = select(t, sel)
    if len(rows) != 1:
        raise KeyError(f"cell({sel}) matched {len(rows)} rows")
    return float(rows[col].iloc[0])


Act = Literal["linear", "relu", "leaky_relu", "quadratic", "sigmoid", "tanh"]
ACTIVATIONS4: list[Act] = ["linear", "relu", "leaky_relu", "quadratic"]
BN = Literal["off", "standard", "mean_only", "var_only", "none"]
#: the BN variants in words, for the run notes (what each backpropagates: Table 1's columns)
BN_WORDS: dict[str, str] = {
    "off": "off",
    "none": "μ and σ² not backpropagated",
    "var_only": "σ² backpropagated, μ not",
    "mean_only": "mean-only (Def. 5: μ backpropagated, σ² not)",
    "standard": "standard (μ and σ² backpropagated)",
}
#: the learning rates of the token runs: the reference implementation's documented command and the paper's text
DOCUMENTED_LR, PAPER_LR = 0.02, 2e-3


def lr_note(lr: float) -> str:
    """The learning rate as a run note states it, formatted from the config (against the documented command's
    0.02 and the paper's 2e-3)."""
    if lr == DOCUMENTED_LR:
        return f"lr = {lr:g} (the reference implementation's documented command) instead of the paper's 2e-3"
    if lr == PAPER_LR:
        return f"lr = {lr:g} (the paper's text; the documented command uses {DOCUMENTED_LR:g})"
    return f"lr = {lr:g} (the documented command uses {DOCUMENTED_LR:g}, the paper's text 2e-3)"


def protocol_note(cfg: TokenTrainConfig) -> str:
    """The learning rate (:func:`lr_note`) and an anchor's negatives as a run note states them, against the paper's
    text and Fig. 3's caption (README "Protocol choices")."""
    if cfg.negatives == "batch":
        neg = ("negatives: every other sample of the batch, as the reference implementation (Fig. 3's caption: "
               "other generators' inputs only, map `negatives`)")  # fmt: skip
    elif cfg.negatives == "other-generators":
        neg = (
            "negatives: other generators' inputs only (Fig. 3's caption; the reference implementation takes the batch)"
        )
    else:
        neg = ("negatives: other generators' inputs only, and the anchor's own generator's inputs are positives "
               "(one reading of Fig. 3's caption, a multi-positive loss of ours; the reference implementation takes the "
               "batch as negatives)")  # fmt: skip
    return f"{lr_note(cfg.lr)}; {neg}"


class TokenTrainConfig(ExperimentConfig):
    """Training and data settings shared by the token experiments (`nonlinearity` Sec. 5, App. E.2)."""

    steps: int = Field(5000, ge=1, description="SGD steps (minibatches), Sec. 5")
    log_every: int = Field(250, ge=1, description="record χ̄± every this many steps")
    lr: PositiveFloat = Field(
        0.02,
        description="learning rate: 0.02 as the reference's documented command "
        "(the paper's text says 2e-3, which barely learns in 5000 steps)",
    )
    momentum: float = Field(0.9, ge=0, lt=1, description="SGD momentum, Sec. 5")
    weight_decay: float = Field(5e-3, ge=0, description="SGD weight decay, Sec. 5")
    batch: int = Field(128, ge=2, description="batch size, Sec. 5")
    temperature: PositiveFloat = Field(0.1, description="InfoNCE temperature T")
    output_d: int = Field(50, ge=1, description="output dimension of the top layer")
    K: int = Field(10, ge=1, description="receptive fields / positions")
    n_tokens: int = Field(20, ge=2, description="number of tokens d")
    G: int = Field(40, ge=1, description="number of generators")
    L: int = Field(5, ge=1, description="fixed positions per generator")
    chi_tokens: Literal["generators", "candidates"] = Field(
        "generators",
        description="tokens χ̄₊ averages over at position k: those some generator draws there (the reference "
        "implementation's scoring) or the P candidates R_k^g (eq. 16's text); both are logged",
    )
    bn_stats: Literal["view", "joint"] = Field(
        "view",
        description="BN statistics over each view's N samples (the reference implementation's training loop "
        "normalises each view on its own) or over all 2N samples of the batch (App. D, eq. 164-165)",
    )
    negatives: TokenNegatives = Field(
        "batch",
        description="an anchor's negatives: every other sample of the batch (the reference implementation) or only "
        "the samples of other generators (Fig. 3's caption: 'inputs from the same generator are treated as positive "
        "pairs, otherwise negative pairs'; with G = 40 and batch 128 about 3 of 127 are the anchor's generator), "
        "the anchor's own generator's samples left out ('other-generators') or made positives too "
        "('generator-positives': a multi-positive reading of the caption, the supervised contrastive loss's 'out' form "
        "and the mean over the positives for the quadratic loss; ours, the paper's eq. 1 has one positive per anchor)",
    )

    def base_run(self) -> TokenRun:
        from ssldyn.data.tokens import TokenSpec

        spec = TokenSpec(K=self.K, n_tokens=self.n_tokens, G=self.G, L=min(self.L, self.K))
        return TokenRun(
            spec=spec,
            lr=self.lr,
            momentum=self.momentum,
            weight_decay=self.weight_decay,
            batch=self.batch,
            temperature=self.temperature,
            out_dim=self.output_d,
            bn_stats=self.bn_stats,
            negatives=self.negatives,
        )


class TokenGridExperiment(NonlinearityExperiment):
    """What the token-generator experiments (Fig. 4, 5, 10, 11, Table 1) declare alike: every seed trains the whole
    grid in the same ensembles (``batch_seeds``), and the run keeps the process's torch threads, since the grid's
    tasks set their own (one torch thread per task, :mod:`ssldyn.lab.tasks`)."""

    threads = None
    batch_seeds = True


def token_peak_memory(cfg: TokenTrainConfig, filters: int, runs: int) -> int:
    """Peak memory (bytes) of a token grid trained in this process: ``BASE + 20 · n_E·4 + 2 kB · runs·n_log``.

    On the CPU the runs train one ensemble at a time, each capped at ``TOKEN_MAX_ELEMS`` elements of its
    ``(n, rows, K, M)`` token tensors (:func:`~ssldyn.dynamics.ensemble_trainer.group_token_runs`), or one
    run alone when a single run exceeds the cap: ``n_E = max(TOKEN_MAX_ELEMS, rows·K·filters)`` with
    ``rows = max(2·n_tokens, output_d)`` and ``filters`` the largest M = β·P of the grid (float32: activations,
    gradients, momentum, the χ probes); the records of ``runs`` runs at ``n_log`` logged steps are small.
    Measured (max RSS, 3 seeds): 0.50–0.54 GB for the quick presets of fig4, fig5, fig10, fig11 and table1
    (estimates 0.73 GB); table1 with β = 2000, P = 10 (M = 20,000, n_E = 10⁷): 1.02 GB (estimate 1.35 GB;
    16.6 float32 copies of n_E above the quick run).
    """
    rows = max(2 * cfg.n_tokens, cfg.output_d)
    n_e = max(TOKEN_MAX_ELEMS, rows * cfg.K * filters)
    n_log = cfg.steps // min(cfg.log_every, cfg.steps) + 2
    return int(PROCESS_BASELINE + 20 * n_e * F32 + 2000 * runs * n_log)


def train_grid(cfg: TokenTrainConfig, ctx: Context, runs: list[TokenRun], keep_filters: bool = False) -> Trajectory:
    """Train ``runs`` with the config's steps and logging through the lab (tasks, cache, progress)."""
    return run_grid(runs, steps=cfg.steps, every=min(cfg.log_every, cfg.steps), ctx=ctx, keep_filters=keep_filters)
