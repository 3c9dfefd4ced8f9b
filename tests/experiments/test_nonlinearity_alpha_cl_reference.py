"""Independent-reference checks beside tests/experiments/test_nonlinearity_alpha_cl.py (test audit, 2026-12-06).

``fig1.lemma_trace`` was checked only through the quick run's "every slack ≤ 1e-12" and "the controls' slacks
> 1e-4": a bound made looser by any factor (2μ in Lemma 7, 4 in place of 2 in Lemma 8, 2ν in Lemma 10) keeps
every slack negative and survives. Here every returned slack is compared with App. G's formulas (eq. 182,
Lemma 8, eq. 192-193 with κ = 5/(2λ_gap²)) evaluated along a power iteration written out in numpy."""

import math

import numpy as np
import torch

from ssldyn.experiments.nonlinearity.fig1 import lemma_trace

D = torch.float64
S = np.array([[3.0, 0.4, 0.1], [0.4, 2.0, 0.3], [0.1, 0.3, 1.0]])


def _A_np(w):
    return S + 0.5 * np.diag(w**2) + 0.3 * np.outer(w, w)  # PD, depends on w: L ≠ 0


def _A_fn(W):  # (R, d) -> (R, d, d)
    Sw = torch.tensor(S, dtype=D)
    return Sw + 0.5 * torch.diag_embed(W**2) + 0.3 * W[:, :, None] * W[:, None, :]


def _reference(w0, steps):
    out = {k: [] for k in ("l7", "l8", "l10", "l7c", "l8c", "l10c", "c", "cos0")}
    w = w0 / np.linalg.norm(w0)
    A = _A_np(w)
    lam, phi = np.linalg.eigh(A)
    p1 = phi[:, -1] * np.sign(phi[:, -1] @ w)
    out["c"].append(p1 @ w)
    out["cos0"].append(w @ w0 / np.linalg.norm(w0))
    for _ in range(steps):
        c = p1 @ w
        l1, l2, ld = lam[-1], lam[-2], lam[0]
        wn = A @ w / np.linalg.norm(A @ w)  # power iteration
        d = p1 @ wn
        dw = np.linalg.norm(wn - w)
        An = _A_np(wn)
        lamn, phin = np.linalg.eigh(An)
        p1n = phin[:, -1] * np.sign(phin[:, -1] @ p1)
        cn = p1n @ wn
        L = np.linalg.norm(An - A, 2) / dw  # secant constant of the step (eq. 200)
        gap = l1 - l2
        kappa = 5 / (2 * gap**2)
        for tag, lo in (("", l2), ("c", ld)):
            mu = (1 + c) / (2 * c**2) * (lo / l1) ** 2  # eq. 182
            nu = 2 * kappa * L**2 * (1 + mu * c) + 2 * L / gap * math.sqrt(mu * (1 + mu * c))  # eq. 193
            out["l7" + tag].append((1 - d) - mu * (1 - c))  # Lemma 7
            out["l8" + tag].append(dw - math.sqrt(2 * (1 + mu * c) * (1 - c)))  # Lemma 8
            out["l10" + tag].append(abs(d - cn) - (nu if tag == "" else 0.0) * (1 - c))  # Lemma 10 (control: ν = 0)
        w, A, lam, p1 = wn, An, lamn, p1n
        out["c"].append(cn)
        out["cos0"].append(w @ w0 / np.linalg.norm(w0))
    return {k: np.array(v) for k, v in out.items()}


def test_lemma_trace_slacks_are_app_g_formulas_written_out():
    w0 = np.array([[0.2, 1.0, 0.3], [1.0, -0.4, 0.5], [0.1, 0.2, 1.0]])
    steps = 5  # 1 − c stays far above the 1e-12 cut-off over these steps
    got = lemma_trace(_A_fn, torch.tensor(w0, dtype=D), steps)
    for r in range(3):
        ref = _reference(w0[r], steps)
        assert (1 - ref["c"][:-1]).min() > 1e-8  # every step is live
        for k, v in ref.items():
            np.testing.assert_allclose(got[k][:, r].numpy(), v, rtol=1e-9, atol=1e-12, err_msg=f"{k}, start {r}")
        # the lemmas hold along this run (slack ≤ 0), and A really moves: ν > 0 at every step (L > 0)
        assert ref["l7"].max() <= 1e-12 and ref["l8"].max() <= 1e-12 and ref["l10"].max() <= 1e-12
        assert (ref["l10c"] - ref["l10"]).min() > 0
