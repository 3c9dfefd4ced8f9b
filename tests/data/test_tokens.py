"""Token-generator protocol (`nonlinearity` Sec. 5, App. E.2) against loops written out here."""

import math

import numpy as np
import pytest
import torch

from ssldyn.data.tokens import TokenGenerator, TokenSpec, TokenStream, token_magnitudes


def test_generators_follow_the_protocol():
    spec = TokenSpec(K=10, n_tokens=20, P=3, G=40, L=5)
    gen = TokenGenerator(spec, seed=3)
    allowed = gen.allowed.numpy()
    assert allowed.shape == (10, 3)
    for k in range(10):  # P distinct tokens per position
        assert len(set(allowed[k])) == 3
    pats = gen.patterns.numpy()
    rel = np.zeros((10, 20), bool)
    for g in range(40):
        fixed = [k for k in range(10) if pats[g, k] >= 0]
        assert len(fixed) == 5  # L fixed positions
        for k in fixed:
            assert pats[g, k] in allowed[k]  # token from that position's allowed set
            rel[k, pats[g, k]] = True
    np.testing.assert_array_equal(gen.relevant.numpy(), rel)  # relevant = appears in some generator
    # allowed sets are drawn independently per position: not all identical
    assert len({tuple(sorted(a)) for a in allowed}) > 1


def test_samples_views_and_uniformity():
    spec = TokenSpec(K=10, n_tokens=20, P=5, G=8, L=5)
    gen = TokenGenerator(spec, seed=0)
    toks, gid = gen.sample(40, 128, return_generators=True)  # (40, 2, 128, 10)
    toks, gid = toks.numpy(), gid.numpy()
    pats = gen.patterns.numpy()[gid]  # (40, 128, 10)
    fixed = pats >= 0
    for v in range(2):  # both views carry the generator's tokens at the fixed positions
        np.testing.assert_array_equal(toks[:, v][fixed], pats[fixed])
    # generator chosen uniformly: counts within 5 sigma of n/G
    n = gid.size
    counts = np.bincount(gid.ravel(), minlength=8)
    assert np.all(np.abs(counts - n / 8) < 5 * math.sqrt(n / 8))
    # wildcards uniform over all tokens
    w = toks[:, 0][~fixed]
    freq = np.bincount(w, minlength=20) / w.size
    assert np.abs(freq - 1 / 20).max() < 5 * math.sqrt(1 / 20 / w.size)
    # default aug_degree: every wildcard re-drawn independently -> agreement rate 1/n_tokens
    agree = (toks[:, 0] == toks[:, 1])[~fixed].mean()
    assert abs(agree - 1 / 20) < 0.01


def test_partial_augmentation_redraws_exactly_aug_degree_positions():
    spec = TokenSpec(K=10, n_tokens=20, P=2, G=6, L=4, aug_degree=2)
    gen = TokenGenerator(spec, seed=1)
    toks = gen.sample(20, 64).numpy()
    diff = (toks[:, 0] != toks[:, 1]).sum(-1)  # (20, 64) positions that changed
    assert diff.max() <= 2
    # each of the 2 re-drawn positions changes with prob 1 - 1/20
    assert abs(diff.mean() - 2 * (1 - 1 / 20)) < 0.05


def test_magnitudes_and_embeddings():
    np.testing.assert_allclose(token_magnitudes(6, 5.0).numpy(), [0.2, 0.2, 0.2, 5, 5, 5])
    g = TokenGenerator(TokenSpec(n_tokens=20, zeta=10.0), seed=0)
    norms = g.embedding.norm(dim=1).numpy()
    np.testing.assert_allclose(norms[:10], 0.1, rtol=1e-6)
    np.testing.assert_allclose(norms[10:], 10.0, rtol=1e-6)
    np.testing.assert_allclose(g.embedding.numpy() / norms[:, None], np.eye(20), atol=1e-7)  # orthonormal dirs
    g2 = TokenGenerator(TokenSpec(n_tokens=20, embed_dim=8), seed=0)
    assert g2.embedding.shape == (20, 8) and g2.spec.dim == 8
    np.testing.assert_allclose(g2.embedding.norm(dim=1).numpy(), 1.0, rtol=1e-6)
    x = g2.embed(torch.tensor([[3, 5, 0, 0, 0, 0, 0, 0, 0, 1]]))
    np.testing.assert_allclose(x[0, 1].numpy(), g2.embedding[5].numpy())


def test_zeta_below_one_swaps_the_two_halves():
    """ζ > 0 is allowed (as documented): ζ < 1 gives the first half norm 1/ζ > 1 and the second ζ < 1."""
    g = TokenGenerator(TokenSpec(n_tokens=6, P=2, zeta=0.5), seed=0)
    np.testing.assert_allclose(g.embedding.norm(dim=1).numpy(), [2, 2, 2, 0.5, 0.5, 0.5], rtol=1e-6)


def test_stream_depends_only_on_seed():
    spec = TokenSpec(P=3)
    a, b = TokenStream(TokenGenerator(spec, 7), 16), TokenStream(TokenGenerator(spec, 7), 16)
    for _ in range(TokenStream.CHUNK + 3):
        assert torch.equal(a.next(), b.next())
    c = TokenStream(TokenGenerator(spec, 8), 16)
    assert not torch.equal(a.next(), c.next())


def test_bad_spec_is_rejected():
    with pytest.raises(ValueError, match="P"):
        TokenSpec(n_tokens=5, P=6)
    with pytest.raises(ValueError, match="aug_degree"):
        TokenSpec(K=10, L=5, aug_degree=6)
    # sizes of the stream and the magnitudes (batch = 0 drew empty batches, n_tokens = 0 an empty table)
    with pytest.raises(ValueError, match=r"^TokenStream: batch must be an integer >= 1, got 0$"):
        TokenStream(TokenGenerator(TokenSpec(), 0), 0)
    with pytest.raises(ValueError, match=r"^token_magnitudes: n_tokens must be an integer >= 1, got 2\.5$"):
        token_magnitudes(2.5, 1.0)  # pyright: ignore[reportArgumentType]
