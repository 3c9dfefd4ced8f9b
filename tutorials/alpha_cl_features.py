# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # α-CL on your own features
#
# `nonlinearity` (Tian) studies contrastive learning through the **contrastive covariance**
# (eq. 3)
#
# ``C_α[f] = (1/2N²) Σ_ij α_ij [(f_i − f_j)(f_i − f_j)ᵀ − (f_i − f_i')(f_i − f_i')ᵀ]``,
#
# the between-sample spread minus the spread between two views of one sample. A one-layer unit
# ``w`` on top of features ``f`` with activation ``h`` ascends the energy
# ``½ wᵀ C_α[f · h'(wᵀf)] w`` on the sphere; its fixed points solve ``A(w) w ∝ w`` with
# ``A(w) = C_α[f · h'(wᵀf)]`` (Lemma 3) and are found by power iteration (eq. PI). Linear ``h``
# has one answer, the top eigenvector of ``C_α[f]``; ReLU has many (Sec. 3.1). Here the features
# are those of a network of your own on digits, with two augmented views.

# %%
import matplotlib.pyplot as plt
import torch
from sklearn.datasets import load_digits
from torch import nn

from ssldyn.data.augment import SimCLRAugment
from ssldyn.dynamics import make_A_fn, power_iteration
from ssldyn.objectives import contrastive_covariance
from ssldyn.probes import lme_test

torch.manual_seed(0)

# %% [markdown]
# ## Your features on two views
#
# A small random-feature CNN (untrained, or bring your trained one) maps 8×8 digits to 24
# features. Two views from the SimCLR augmentation give the pairs ``(f_i, f_i')``.

# %%
digits = load_digits()
images = torch.tensor(digits.images[:600], dtype=torch.float32)[:, None] / 16.0  # (600, 1, 8, 8) in [0, 1]
net = nn.Sequential(nn.Conv2d(1, 12, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(48, 24))
net.eval()

augment = SimCLRAugment()
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    f1 = net(augment(images, g)).double()  # (600, 24) view 1
    f2 = net(augment(images, g)).double()  # (600, 24) view 2
f1, f2 = f1 - f1.mean(0), f2 - f1.mean(0)  # centre with view 1's mean (C_α only sees differences anyway)

# %% [markdown]
# ## The contrastive covariance and its spectrum
#
# With uniform α (the quadratic loss) ``C_α`` is the covariance of the features minus that of
# the view differences, so the augmentation can make it **indefinite**. Its top eigenvectors are
# the directions that vary across samples but not across views.

# %%
C = contrastive_covariance(f1, f2)  # (24, 24), α ≡ 1
eigenvalues, eigenvectors = torch.linalg.eigh(C)
print(f"eigenvalues of C_α[f]: {float(eigenvalues[0]):.2e} … {float(eigenvalues[-1]):.2e}")
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(range(24), eigenvalues.flip(0).numpy())
ax.set_title("spectrum of C_α[f] (descending)", fontsize=9)

# %% [markdown]
# ## Power iteration, linear unit
#
# ``A(w) = C_α[f]`` for every ``w``: eq. PI is the classical power iteration. It finds the
# eigenvalue of largest *magnitude*; if that one were negative (an indefinite ``A`` dominated by
# the view term), `power_iteration` would switch to the shifted operator ``A − (λ_min − ε)I`` (the
# shift of the proof of Thm. 3, same eigenvectors) and still return the top eigenvector —
# `trajectory.meta["shifted"]` says where it did. From 16 random starts:

# %%
A_linear = make_A_fn(f1, "linear", x_pos=f2)
w0 = torch.randn(16, 24, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
linear = power_iteration(w0, A_linear, steps=200)
top = eigenvectors[:, -1]
cos_linear = (linear.state @ top).abs()
print("converged:", bool(linear.trajectory.meta["converged"].all()), "| shifted:", linear.trajectory.meta["shifted"])
print(f"|cos(w, top eigenvector)| >= {float(cos_linear.min()):.6f} for all 16 starts")
print("an LME (Def. 3):", lme_test(A_linear, linear.state[0]).is_lme)
assert float(cos_linear.min()) > 0.999

# %% [markdown]
# ## Power iteration, ReLU unit
#
# With ReLU, ``A(w) = C_α[f · 1{wᵀf > 0}]`` depends on which samples the unit is active on, and
# Sec. 3.1 predicts several fixed points — locally maximal eigenvectors (LMEs) of their own
# ``A(w)`` — instead of the one top eigenvector. On a finite sample ``A(w)`` is piecewise
# constant in ``w`` (it changes whenever a sample crosses ``wᵀf = 0``), so the iteration may end in
# a small cycle between neighbouring gating patterns instead of converging exactly. We measure how
# close each end point is to being an eigenvector of its own ``A(w)`` (``lme_test``: the residual
# ``‖A w − (wᵀAw) w‖ / λ₁`` and ``c(w)``, the overlap with the top eigenvector of ``A(w)``).

# %%
A_relu = make_A_fn(f1, "relu", x_pos=f2)
relu = power_iteration(w0, A_relu, steps=200, warn_unconverged=False)  # non-convergence expected here: see above
ends = []  # distinct end directions (|cos| < 0.95 to each other)
for v in relu.state:
    if all(abs(float(v @ u)) < 0.95 for u in ends):
        ends.append(v)
for v in ends:
    t = lme_test(A_relu, v)
    print(f"residual {t.residual:.3f}, c(w) = {t.c:.4f}, |cos(w, linear answer)| = {abs(float(v @ top)):.3f}")
print(
    "converged:",
    int(relu.trajectory.meta["converged"].sum()),
    "of 16;",
    "last discrepancy of start 0:",
    f"{relu.trajectory.series('discrepancy')[1][-1]:.1e}",
)

fig, ax = plt.subplots(figsize=(5, 3))
ax.semilogy(*linear.trajectory.series("discrepancy"), label="linear, start 0")
ax.semilogy(*relu.trajectory.series("discrepancy"), label="ReLU, start 0")
ax.set_xlabel("iteration")
ax.set_ylabel("‖w(t+1) − w(t)‖")
ax.legend()

# %% [markdown]
# The linear unit always returns the same direction (up to sign), the top eigenvector. The ReLU
# unit ends near several *different* directions, none of them the linear answer, each within a few
# percent of being an eigenvector of the ``A(w)`` of its own active samples (``c(w)`` ≈ 1):
# approximate LMEs. That is the paper's point — the nonlinearity lets units of one layer learn
# distinct patterns where a linear layer learns only the top eigenvector — seen here with the
# caveat of a finite sample, where exact fixed points of the gated iteration need not exist.

# %%
tests = [lme_test(A_relu, v) for v in ends]
assert len(ends) >= 2
assert all(t.c > 0.99 and t.residual < 0.1 for t in tests)
assert min(abs(float(v @ top)) for v in ends) < 0.99
