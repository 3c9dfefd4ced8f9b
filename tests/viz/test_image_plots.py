"""Filter grids and t-SNE maps of ssldyn.viz.images."""

import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
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
    path = save_figure(fig, tmp_path / "x.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 1000


def test_plot_tsne_draws_each_class_at_its_points_in_its_own_colour():
    rng = np.random.default_rng(1)
    y2 = rng.normal(size=(30, 2))
    labels = np.array([2, 0, 5] * 10)  # unsorted labels with a gap
    fig, ax = new_figure()
    plot_tsne(ax[0, 0], y2, labels, "map", class_names=["zero", "one", "two", "three", "four", "five"])
    cols = ax[0, 0].collections
    assert len(cols) == 3  # one scatter per class, in label order
    for col, c in zip(cols, (0, 2, 5)):
        np.testing.assert_array_equal(col.get_offsets(), y2[labels == c])
    colours = {mcolors.to_hex(col.get_facecolor()[0][:3]) for col in cols}
    assert len(colours) == 3
    assert [t.get_text() for t in ax[0, 0].get_legend().get_texts()] == ["zero", "two", "five"]
    assert ax[0, 0].get_title() == "map"
    plt.close(fig)


def test_plot_filter_grid_shows_each_filter_scaled_by_its_max_abs_value():
    rng = np.random.default_rng(2)
    f = rng.normal(size=(4, 5, 5))
    fig, ax = new_figure()
    plot_filter_grid(ax[0, 0], f, "filters")
    (im,) = ax[0, 0].images
    shown = np.ma.filled(np.ma.asarray(im.get_array(), dtype=float), np.nan)
    # 4 filters -> a 2×2 grid of 5×5 tiles with one blank (NaN) row / column of padding between them
    ref = np.full((11, 11), np.nan)
    for m in range(4):
        r, c = divmod(m, 2)
        ref[6 * r : 6 * r + 5, 6 * c : 6 * c + 5] = f[m] / np.abs(f[m]).max()
    np.testing.assert_allclose(shown, ref, rtol=1e-15, atol=0)
    assert im.get_clim() == (-1.0, 1.0)  # a diverging map centred at 0
    plt.close(fig)
