"""variational probe figures: claim marks at the same flow time are one line with one legend entry (referee fig2,
item 4.1: at quick scale Fig. 6's t = table_time and vanilla's horizon coincide, and one line hid the other)."""

import matplotlib.pyplot as plt
import numpy as np

from ssldyn.experiments.variational import _flows_common as fc


def test_marks_at_the_same_time_share_one_line_and_one_legend_entry(monkeypatch, tmp_path):
    figs = []
    monkeypatch.setattr(fc, "save_figure", lambda fig, path: figs.append(fig) or path)
    t = np.array([0.0, 1.0, 10.0, 100.0])
    v = np.array([[1.0], [0.8], [0.5], [0.4]])
    p = fc.Probes(t, v, v, v)
    marks = [fc.Mark(10.0, "t = 10 (flow)", 0), fc.Mark(100.0, "it 100 (large step)", 1, "--"),
             fc.Mark(1000 * 0.01, "vanilla it 1000", 2)]  # fmt: skip
    groups = fc.mark_groups(marks)
    assert [[m.label for m in g] for g in groups] == [["t = 10 (flow)", "vanilla it 1000"], ["it 100 (large step)"]]
    fc.probe_figure([("σ = 1", p)], 0.0, tmp_path / "p.png", marks=marks)
    (fig,) = figs
    texts = [tx.get_text() for ax in fig.axes for lg in [ax.get_legend()] if lg for tx in lg.get_texts()]
    assert "t = 10 (flow) = vanilla it 1000" in texts
    assert "t = 10 (flow)" not in texts and "vanilla it 1000" not in texts
    assert texts.count("it 100 (large step)") == 1
    at10 = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) and np.allclose(ln.get_xdata(), 10.0)]
    assert len(at10) == 2  # the two colours alternate along the one line
    assert {ln.get_color() for ln in at10} == {fc.PALETTE[0], fc.PALETTE[2]}
    plt.close(fig)
