"""The report's page of one study (a sweep): a table, plots against each swept key, and a stepper.

``<out>/report/studies/<experiment>/<id>.html`` shows

* the grid: one row per grid point with each claim's statistic, 95 % interval and verdict;
* per claim and per summary number, a plot of the value against each swept key: the
  statistic over seeds with its 95 % interval as error bars, every seed as a dot, the claim's
  threshold as a line, one line per value of the other keys;
* a stepper: a select per swept key choosing one grid point, whose figures (from the run
  store) and claims are shown. It is a small inline script over content already in the page;
  without JavaScript every grid point is shown one after the other (the static fallback). No
  external resource is loaded.

:func:`claim_points` and :func:`summary_points` return the numbers that are plotted.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pandas as pd

from ssldyn.contract.claims import t_interval, verdict_of, verdict_words
from ssldyn.lab.study import Study, point_text, value_key, value_text
from ssldyn.lab.summary import estimate_text

__all__ = [
    "slug", "relative_url", "claim_points", "summary_points", "plot_against_axes", "write_study_page", "study_page_path",
]  # fmt: skip

STEPPER_JS = """
(function () {
  var form = document.getElementById('stepper');
  if (!form) return;
  var selects = Array.prototype.slice.call(form.querySelectorAll('select'));
  var points = Array.prototype.slice.call(document.querySelectorAll('section.point'));
  var none = document.getElementById('no-point');
  function key() {
    return selects.map(function (s) { return s.name + '=' + s.value; }).join('&');
  }
  function show() {
    var k = key(), found = false;
    points.forEach(function (p) {
      var on = p.getAttribute('data-point') === k;
      p.hidden = !on;
      found = found || on;
    });
    none.hidden = found;
  }
  function choose(id) {
    var p = document.getElementById(id);
    if (!p || !p.getAttribute('data-point')) return;
    p.getAttribute('data-point').split('&').forEach(function (kv) {
      var parts = kv.split('=');
      var s = form.querySelector('select[name="' + parts[0] + '"]');
      if (s) s.value = parts[1];
    });
    show();
  }
  selects.forEach(function (s) { s.addEventListener('change', show); });
  window.addEventListener('hashchange', function () { choose(location.hash.slice(1)); });
  document.body.className += ' js';
  form.hidden = false;
  if (location.hash) choose(location.hash.slice(1)); else show();
})();
"""

STUDY_CSS = """
.points section.point{border-top:1px solid #e3e6ea;padding:8px 0}.stepper{background:#eef3fb;border:1px solid #c9d6ea;
border-radius:6px;padding:8px 12px;margin:8px 0;position:sticky;top:0;z-index:2}.stepper label{margin-right:18px;font-weight:600}
.stepper select{font-size:15px;margin-left:6px}.plots figure img{max-width:460px}.scroll{overflow-x:auto}
td.num{white-space:nowrap}
"""


def slug(text: str) -> str:
    """``text`` as an HTML anchor or a file name of the report: letters, digits and ``._-`` (each run of other
    characters becomes one ``_``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def relative_url(target: Path, start: Path) -> str:
    """The relative, URL-quoted link from the page folder ``start`` to ``target`` (the report has no absolute links)."""
    return quote(os.path.relpath(target, start).replace(os.sep, "/"))


def study_page_path(report_dir: Path, study: Study) -> Path:
    return report_dir / "studies" / slug(study.experiment) / f"{slug(study.id)}.html"


def claim_points(results: Any, study: Study, claim: str) -> pd.DataFrame:
    """One row per grid point with a finished run: the axis values, ``estimate``, ``lo``, ``hi``
    (the claim's statistic and 95 % interval over seeds), ``passed``, ``status``, ``expected`` and
    the per-seed ``values`` / ``seed_passed`` (lists)."""
    claims = results.select(hashes=study.hashes).claims
    rows = []
    for h in study.hashes:
        c = claims[(claims["hash"] == h) & (claims["claim"] == claim)]
        if c.empty:
            continue
        first = c.iloc[0]
        rows.append({**study.values_of(h), "hash": h, "estimate": first["estimate"], "lo": first["lo"],
                     "hi": first["hi"], "passed": bool(first["passed"]), "status": first["status"],
                     "expected": first["expected"], "values": c["value"].tolist(),
                     "seed_passed": c["seed_passed"].tolist()})  # fmt: skip
    return pd.DataFrame(rows, columns=[*study.keys, "hash", "estimate", "lo", "hi", "passed", "status", "expected",
                                       "values", "seed_passed"])  # fmt: skip


def summary_points(results: Any, study: Study, name: str) -> pd.DataFrame:
    """One row per grid point: the axis values, the mean of a summary number over seeds with its
    Student-t 95 % interval (``estimate``, ``lo``, ``hi``; no interval for one seed) and ``values``."""
    summ = results.select(hashes=study.hashes).summaries
    rows = []
    for h in study.hashes:
        v = summ[(summ["hash"] == h) & (summ["name"] == name)]["value"].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        if len(v) == 0:
            continue
        lo, hi = t_interval(v.tolist()) if len(v) > 1 else (math.nan, math.nan)
        rows.append({**study.values_of(h), "hash": h, "estimate": float(v.mean()), "lo": lo, "hi": hi,
                     "values": v.tolist()})  # fmt: skip
    return pd.DataFrame(rows, columns=[*study.keys, "hash", "estimate", "lo", "hi", "values"])


def numeric_summaries(results: Any, study: Study) -> list[str]:
    """Names of the summary numbers that are finite numbers in every run of the study (sorted)."""
    summ = results.select(hashes=study.hashes).summaries
    if summ.empty:
        return []
    ok = summ.assign(f=np.isfinite(summ["value"].astype(float))).groupby("name")["f"].all()
    return sorted(n for n, good in ok.items() if good)


_THRESHOLD = re.compile(r"(?:^|\s)(<=|>=|<|>|==)\s*([-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?)$")
_BETWEEN = re.compile(r"^in \[([-+0-9.eE]+), ([-+0-9.eE]+)\]$")


def _threshold(expected: pd.Series) -> tuple[str, float, float] | None:
    """``("line", y, y)`` or ``("band", lo, hi)`` when every point's relation has the same threshold."""
    texts = set(expected.dropna())
    if len(texts) != 1:
        return None
    text = texts.pop().strip()
    m = _THRESHOLD.search(text)
    if m:
        y = float(m.group(2))
        return ("line", y, y)
    m = _BETWEEN.match(text)
    if m:
        return ("band", float(m.group(1)), float(m.group(2)))
    return None


def plot_against_axes(points: pd.DataFrame, study: Study, title: str, path: Path, ylabel: str = "value") -> Path:
    """One panel per swept key: the statistic with its interval (error bars), each seed (dots), the threshold."""
    from ssldyn.viz.common import PALETTE, new_figure, save_figure

    fig, axes = new_figure(len(study.axes), 1, size=(4.4, 3.2))
    thr = _threshold(pd.Series(points["expected"])) if "expected" in points else None
    for ax, axis in zip(axes[0], study.axes):
        others = [k for k in study.keys if k != axis.key]
        pos = {value_key(v): i for i, v in enumerate(axis.values)}
        numeric = axis.numeric and len(axis.values) > 1
        groups = points.groupby([points[k].map(value_text) for k in others], sort=False) if others else [((), points)]
        for gi, (gkey, g) in enumerate(groups):
            g = g.assign(_order=[pos.get(value_key(v), 0) for v in g[axis.key]])
            g = g.sort_values("_order")
            x = g[axis.key].astype(float).to_numpy() if numeric else g["_order"].to_numpy(dtype=float)
            y = g["estimate"].to_numpy(dtype=float)
            lo, hi = g["lo"].to_numpy(dtype=float), g["hi"].to_numpy(dtype=float)
            err = np.vstack([np.where(np.isfinite(lo), y - lo, 0.0), np.where(np.isfinite(hi), hi - y, 0.0)])
            color = PALETTE[gi % len(PALETTE)]
            gk = gkey if isinstance(gkey, tuple) else (gkey,)
            label = ", ".join(f"{k}={v}" for k, v in zip(others, gk)) or None
            ax.errorbar(x, y, yerr=err, color=color, marker="o", capsize=4, lw=1.5, label=label, zorder=3)
            for xi, vals in zip(x, g["values"]):
                ax.scatter([xi] * len(vals), vals, s=12, color=color, alpha=0.45, zorder=2, lw=0)
            if "passed" in g:
                bad = ~g["passed"].to_numpy(dtype=bool)
                ax.scatter(x[bad], y[bad], s=80, facecolors="none", edgecolors="#b3261e", lw=1.5, zorder=4)
        if thr is not None:
            if thr[0] == "line":
                ax.axhline(thr[1], color="#555", ls="--", lw=1, label="threshold")
            else:
                ax.axhspan(thr[1], thr[2], color="#2ca02c", alpha=0.12, label="allowed")
        if numeric:
            vals = np.asarray(axis.values, dtype=float)
            if (vals > 0).all() and vals.max() / vals.min() >= 20:
                ax.set_xscale("log")
        else:
            ax.set_xticks(range(len(axis.values)), [value_text(v) for v in axis.values])
        ax.set_xlabel(axis.key)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        if others or thr is not None:
            ax.legend(fontsize=7)
    return save_figure(fig, path)


def write_study_page(results: Any, study: Study, report_dir: Path, css: str, failures: dict[str, str]) -> Path:
    """Write the study's page (and its plots) under ``report_dir/studies/`` and return its path."""
    path = study_page_path(report_dir, study)
    page_dir = path.parent
    plot_dir = page_dir / slug(study.id)
    plot_dir.mkdir(parents=True, exist_ok=True)
    sub = results.select(hashes=study.hashes)
    claims = sub.claims
    ids = list(dict.fromkeys(claims["claim"]))
    done = {r.hash: r for r in sub.records}
    # the grid table
    head = "".join(f"<th>{escape(k)}</th>" for k in study.keys)
    head += "<th>run</th>" + "".join(f"<th><code>{escape(c)}</code></th>" for c in ids)
    body = []
    for i, p in enumerate(study.points):
        h = p["hash"]
        cells = "".join(f"<td>{escape(value_text(p['values'][k]))}</td>" for k in study.keys)
        if h not in done:
            why = failures.get(h, "not finished")
            cells += f"<td><a href='#point-{i}'>{escape(h)}</a></td><td class='fail' colspan='{max(1, len(ids))}'>"
            cells += f"{escape(why)}</td>"
        else:
            cells += f"<td><a href='#point-{i}'>{escape(h)}</a></td>"
            for cid in ids:
                c = claims[(claims["hash"] == h) & (claims["claim"] == cid)]
                if c.empty:
                    cells += "<td></td>"
                    continue
                f = c.iloc[0]
                cls, word = verdict_words(str(f["status"]) or ("pass" if f["passed"] else "fail"))
                cells += (f"<td class='num'><span class='{cls}'>{word}</span> {escape(estimate_text(f['estimate'], f['lo'], f['hi']))}"
                          f" <span class='meta'>({int(c['seed_passed'].sum())}/{len(c)})</span></td>")  # fmt: skip
        body.append(f"<tr>{cells}</tr>")
    legend = "".join(
        f"<li><code>{escape(cid)}</code>: {escape(str(claims[claims['claim'] == cid].iloc[0]['statement']))} "
        f"<span class='meta'>(expected {escape(str(claims[claims['claim'] == cid].iloc[0]['expected']))})</span></li>"
        for cid in ids
    )
    table = (f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>"
             f"<p class='meta'>Cells: verdict, statistic over seeds with its 95% interval, (seeds where the relation "
             f"holds / seeds).</p><ul class='meta'>{legend}</ul>")  # fmt: skip
    # plots: per claim and per summary number
    figs = []
    for cid in ids:
        pts = claim_points(results, study, cid)
        if pts.empty or not np.isfinite(pts["estimate"].astype(float)).any():
            continue
        png = plot_against_axes(pts, study, cid, plot_dir / f"claim-{slug(cid)}.png", ylabel="measured")
        figs.append(f"<figure><img src='{relative_url(png, page_dir)}' alt='{escape(cid)}'><figcaption>claim "
                    f"<code>{escape(cid)}</code></figcaption></figure>")  # fmt: skip
    sfigs = []
    for name in numeric_summaries(results, study):
        pts = summary_points(results, study, name)
        png = plot_against_axes(pts, study, name, plot_dir / f"summary-{slug(name)}.png", ylabel=name)
        sfigs.append(f"<figure><img src='{relative_url(png, page_dir)}' alt='{escape(name)}' loading='lazy'><figcaption>"
                     f"{escape(name)}</figcaption></figure>")  # fmt: skip
    plots = f"<h3>Claims against the swept keys</h3><div class='plots'>{''.join(figs)}</div>" if figs else ""
    if sfigs:
        plots += (f"<details><summary>Summary numbers against the swept keys ({len(sfigs)})</summary>"
                  f"<div class='plots'>{''.join(sfigs)}</div></details>")  # fmt: skip
    # the stepper: one select per axis; every grid point's section (all shown without JavaScript)
    selects = "".join(
        f"<label>{escape(a.key)}<select name='a{j}'>"
        + "".join(f"<option value='{i}'>{escape(value_text(v))}</option>" for i, v in enumerate(a.values))
        + "</select></label>"
        for j, a in enumerate(study.axes)
    )
    stepper = (f"<form id='stepper' class='stepper' hidden>{selects}"
               "<span id='no-point' class='meta' hidden>no run at this grid point</span></form>")  # fmt: skip
    sections = []
    for i, p in enumerate(study.points):
        key = "&".join(f"a{j}={_index(a.values, p['values'][a.key])}" for j, a in enumerate(study.axes))
        title = " · ".join(f"{k} = {value_text(p['values'][k])}" for k in study.keys)
        rec = done.get(p["hash"])
        if rec is None:
            content = f"<p class='fail'>{escape(failures.get(p['hash'], 'not finished'))}</p>"
        else:
            content = _point_block(rec, page_dir)
        sections.append(f"<section class='point' id='point-{i}' data-point='{escape(key)}'><h3>{escape(title)}</h3>"
                        f"{content}</section>")  # fmt: skip
    seeds = ", ".join(map(str, study.seeds))
    base = point_text(dict(sorted(study.base.items()))) or "none"
    back = relative_url(report_dir / "index.html", page_dir)
    html = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{escape(study.experiment)}: {escape(study.title)}</title><style>{css}{STUDY_CSS}</style></head><body>"
        f"<header><h1>{escape(study.experiment)}: {escape(study.title)}</h1><p>{escape(study.source)} "
        f"<code>{escape(study.id)}</code> · preset {escape(study.preset or '?')} · seeds {escape(seeds)} · "
        f"fixed overrides: {escape(base)} · {len(study.points)} grid points</p></header><main>"
        f"<p><a href='{back}#{escape(slug(study.experiment))}'>← back to the report</a></p>"
        f"<section class='paper'><h2>Grid</h2>{table}{plots}</section>"
        f"<section class='paper' id='step'><h2>Step through the grid</h2><p class='meta'>Each grid point's figures and claims"
        f" from its run directory. Without JavaScript all grid points are listed below one after the other.</p>"
        f"{stepper}<div class='points'>{''.join(sections)}</div></section>"
        f"</main><script>{STEPPER_JS}</script></body></html>"
    )
    from ssldyn.lab.store import atomic_write_text

    atomic_write_text(path, html)
    return path


def figure_caption(experiment: str, meta: Mapping[str, Any], name: str) -> str | None:
    """The caption of figure file ``name`` of a stored run: the one stored with the run (``meta["captions"]``),
    else the experiment's declared one (a run stored before captions were kept), else None."""
    stored = meta.get("captions")
    if isinstance(stored, Mapping) and isinstance(stored.get(name), str):
        return stored[name]
    from ssldyn.errors import UserError
    from ssldyn.lab.registry import get_experiment

    try:
        cls = get_experiment(experiment)
    except UserError:  # an experiment no longer registered (a plugin not loaded): no caption
        return None
    return cls.caption(name)


def figure_html(f: Path, page_dir: Path, caption: str | None, *, link: bool = False) -> str:
    """One ``<figure>``: the image (a link to it with ``link``) over its file name and caption."""
    url = relative_url(f, page_dir)
    img = f"<img src='{url}' alt='{escape(caption or f.name)}' loading='lazy'>"
    text = f"<code>{escape(f.name)}</code>" + (f" — {escape(caption)}" if caption else "")
    body = f"<a href='{url}'>{img}</a>" if link else img
    return f"<figure>{body}<figcaption>{text}</figcaption></figure>"


def _index(values: tuple[Any, ...], v: Any) -> int:
    """The position of ``v`` among an axis's ``values`` (matched by :func:`~ssldyn.lab.study.value_key`; -1: absent)."""
    key = value_key(v)
    return next((i for i, w in enumerate(values) if value_key(w) == key), -1)


def _point_block(rec: Any, page_dir: Path) -> str:
    rows = []
    for c in rec.claims:
        cls, word = verdict_of(c)
        rows.append(f"<tr><td class='{cls}'>{word}</td><td><code>{escape(c.id)}</code></td><td>{escape(c.statement)}"
                    f"</td><td class='num'>{escape(c.measured_text())}</td><td>{escape(c.expected)}</td></tr>")  # fmt: skip
    claims = ("<table><tr><th></th><th>claim</th><th>statement</th><th>measured (95% interval)</th><th>expected</th>"
              f"</tr>{''.join(rows)}</table>") if rows else "<p class='meta'>No claims.</p>"  # fmt: skip
    figs = "".join(figure_html(f, page_dir, figure_caption(rec.experiment, rec.meta, f.name)) for f in rec.figures)
    return (f"<p class='meta'>{escape(rec.label)} · <a href='{relative_url(rec.path, page_dir)}/'>run directory "
            f"{escape(rec.path.name)}</a></p>{claims}<div>{figs}</div>")  # fmt: skip
