"""One probe signature: tensors and numpy arrays alike in, Python floats out (one value per member for batches)."""

import numpy as np
import pytest
import torch

from ssldyn.dynamics import per_member
from ssldyn.probes import (
    alignment,
    angular_spread,
    effective_rank,
    knn_accuracy,
    label_silhouette,
    output_gap,
    principal_angles,
    silhouette_cosine,
    singular_value_ratio,
    uniformity,
)

D = torch.float64


def _emb(seed=0, n=30, d=4):
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=D)


SCALAR_PROBES = {
    "singular_value_ratio": lambda z: singular_value_ratio(z),
    "uniformity": lambda z: uniformity(z),
    "alignment": lambda z: alignment(z, z + 0.1),
    "silhouette_cosine": lambda z: silhouette_cosine(z, np.arange(len(z)) % 3),
    "angular_spread": lambda z: angular_spread(z, np.arange(len(z)) % 3),
    "label_silhouette": lambda z: label_silhouette(z, np.arange(len(z)) % 3, "euclidean"),
    "knn_accuracy": lambda z: knn_accuracy(z, np.arange(len(z)) % 3, z, np.arange(len(z)) % 3, k=3),
    "output_gap": lambda z: output_gap(z, 2 * z),
}


@pytest.mark.parametrize("name", list(SCALAR_PROBES))
def test_tensor_and_numpy_give_the_same_python_float(name):
    fn = SCALAR_PROBES[name]
    z = _emb()
    a, b = fn(z), fn(z.numpy())
    assert type(a) is float and type(b) is float  # effective_rank returned a 0-d tensor and rejected numpy
    assert a == pytest.approx(b, rel=1e-12)


def test_rank_probes_return_tensors_whatever_the_input_rank():
    """effective_rank and rankme: a float64 tensor of shape (...) for (..., n, d), numpy or torch in."""
    from ssldyn.probes import rankme

    z = _emb()
    for fn in (effective_rank, rankme):
        one, arr, ens = fn(z), fn(z.numpy()), fn(torch.stack([z, 2 * z]))
        assert isinstance(one, torch.Tensor) and one.shape == () and isinstance(arr, torch.Tensor)
        assert ens.shape == (2,) and float(ens[0]) == pytest.approx(float(one), rel=1e-12)
        assert float(arr) == pytest.approx(float(one), rel=1e-12)


def test_batched_embeddings_give_one_value_per_member():
    zs = torch.stack([_emb(s) for s in range(3)])  # (E, n, d)
    er = effective_rank(zs)
    assert isinstance(er, torch.Tensor) and er.shape == (3,)
    for e in range(3):
        assert float(er[e]) == pytest.approx(float(effective_rank(zs[e])), rel=1e-12)
        assert float(singular_value_ratio(zs)[e]) == pytest.approx(singular_value_ratio(zs[e]), rel=1e-12)
    u = per_member(uniformity)(zs)  # a one-member probe made into an ensemble one
    assert u.shape == (3,) and float(u[1]) == pytest.approx(uniformity(zs[1]), rel=1e-12)
    gap = output_gap(zs, 2 * zs)
    assert gap.shape == (3,) and float(gap[2]) == pytest.approx(float(zs[2].norm(dim=-1).mean()), rel=1e-12)


def test_subspace_probes_accept_numpy():
    A, B = np.random.default_rng(0).normal(size=(6, 2)), np.random.default_rng(1).normal(size=(6, 3))
    np.testing.assert_allclose(
        principal_angles(A, B).numpy(), principal_angles(torch.tensor(A), torch.tensor(B)).numpy()
    )
