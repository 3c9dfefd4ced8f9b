"""Filter grids and t-SNE maps of ssldyn.viz.images."""

import numpy as np

from ssldyn.probes.downstream import knn_accuracy
from ssldyn.viz.common import new_figure, save_figure
from ssldyn.viz.images import plot_filter_grid, plot_tsne, tile_filters, tsne_embedding


def test_tile_filters_layout_and_scaling():
    f = np.arange(5 * 2 * 3, dtype=float).reshape(5, 2, 3) - 7.0
    img = tile_filters(f, ncols=3, pad=1)
    assert img.shape == (2 * 3 - 1, 3 * 4 - 1)
    # filter 4 sits in row 1, column 1, divided by its own max |value|
    np.testing.assert_allclose(img[3:5, 4:7], f[4] / np.abs(f[4]).max())
    assert np.isnan(img[2]).all() and np.isnan(img[3:5, 8:11]).all()  # padding row, empty 6th slot
    assert np.nanmax(np.abs(img)) == 1.0


def test_tsne_keeps_separated_clusters(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 40)
    x = rng.normal(size=(120, 20)) + 12 * np.eye(20)[y]
    y2 = tsne_embedding(x, seed=0, perplexity=15, max_iter=500)
    assert y2.shape == (120, 2)
    assert knn_accuracy(y2[::2], y[::2], y2[1::2], y[1::2], k=3, metric="euclidean") == 1.0
    fig, ax = new_figure(2, 1)
    plot_tsne(ax[0, 0], y2, y, "t-SNE")
    plot_filter_grid(ax[0, 1], rng.normal(size=(4, 5, 5)), "filters")
    assert save_figure(fig, tmp_path / "x.png").stat().st_size > 1000
