import numpy as np
import pytest
from sklearn.datasets import make_moons

from ssldyn.data.moons import half_moons, make_views
from ssldyn.objectives import contrast_matrix


def test_half_moons_anchors_are_sklearn_moons():
    v = half_moons(50, noise=0.05, seed=3)
    x, y = make_moons(n_samples=50, noise=0.05, random_state=3)
    np.testing.assert_allclose(v.x.numpy(), x)
    np.testing.assert_array_equal(v.labels.numpy(), y)


def test_half_moons_dimension_counts_the_extra_coordinates():
    """d = 2 + len(extra_stds), as the docstring's Returns says: the moons, then the extra coordinates."""
    v = half_moons(10, p=2, q=3, extra_stds=(0.5,), seed=1)
    assert v.x.shape == (10, 3) and v.x_pos.shape == (10, 2, 3) and v.x_neg.shape == (10, 3, 3)
    np.testing.assert_allclose(v.x[:, :2].numpy(), make_moons(n_samples=10, noise=0.05, random_state=1)[0])


def test_positive_noise_has_covariance_0p1_monte_carlo():
    v = half_moons(4000, p=3, q=2, seed=0)
    eps = (v.x_pos - v.x[:, None, :]).reshape(-1, 2).numpy()  # 12000 draws
    cov = np.cov(eps.T)
    # std. error of a variance estimate: var*sqrt(2/N) ~ 0.1*0.013
    np.testing.assert_allclose(cov, 0.1 * np.eye(2), atol=6 * 0.1 * np.sqrt(2 / eps.shape[0]))
    assert abs(eps.mean()) < 0.02


def test_negatives_are_other_points_of_the_dataset():
    x = np.arange(20, dtype=float).reshape(10, 2)
    v = make_views(x, p=1, q=5, seed=1)
    assert v.x_neg.shape == (10, 5, 2)
    rows = {tuple(r) for r in x}
    for i in range(10):
        for j in range(5):
            r = tuple(v.x_neg[i, j].numpy())
            assert r in rows and r != tuple(x[i])


def test_contrast_matrix_expectation_is_minus_second_moment_plus_mean_outer():
    # E[C̃]/n = μ μᵀ-ish - E[x xᵀ]: with negatives from the other points,
    # E[x_i x_j⁻ᵀ] = x_i (n x̄ - x_i)ᵀ/(n-1); positives add zero-mean noise.
    v = half_moons(300, p=200, q=200, seed=2, noise_var=0.1)
    x = v.x.numpy()
    n = x.shape[0]
    C = contrast_matrix(v.x, v.x_pos, v.x_neg, reduce_pairs="mean").numpy() / n
    neg_mean = (n * x.mean(0)[None, :] - x) / (n - 1)
    ref = (x.T @ neg_mean - x.T @ x) / n
    ref = 0.5 * (ref + ref.T)
    np.testing.assert_allclose(C, ref, atol=0.03)


@pytest.mark.parametrize("kw", [dict(p=0), dict(q=-1), dict(noise_var=-1.0)])
def test_bad_arguments_raise(kw):
    with pytest.raises(ValueError):
        make_views(np.zeros((5, 2)), **kw)
