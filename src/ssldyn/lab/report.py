"""Static, offline HTML report of every finished run under an output directory.

``build_report(out)`` writes ``out/report/index.html``, built on :func:`ssldyn.results.load`:

* the headline and each experiment's badge come from its paper-default (canonical) run, at
  paper scale when there is one, else quick — never from whichever run finished last;
* the page opens with the per-paper results table and a table of contents;
* per experiment: the canonical run (figures, claims with seeds and intervals, config), the
  paper-scale and quick canonical runs side by side when both exist, its sweeps and variant
  grids (linked study pages), and every other run folded under its label (``tau=1.0, seeds=0..1``);
* failed and damaged runs are listed at the end.

Each study gets a page (:mod:`ssldyn.lab.report_study`) with plots against the swept keys and
an offline stepper (a small inline script; the index page itself has no script). No external
resources; all text is HTML-escaped and all links are relative and URL-quoted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ssldyn._version import __version__
from ssldyn.contract.claims import Claim, verdict_of
from ssldyn.contract.experiment import PAPERS
from ssldyn.lab.registry import all_experiments
from ssldyn.lab.report_study import figure_caption, figure_html, relative_url, slug
from ssldyn.lab.robustness import claims_at
from ssldyn.lab.scores import Outcomes, PaperScore, canonical_runs, outcome_counts, paper_scores, run_scale
from ssldyn.lab.store import atomic_write_text
from ssldyn.lab.study import point_text, value_text

if TYPE_CHECKING:
    from ssldyn.lab.results import Results

__all__ = ["KIND_TITLES", "build_report"]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2a44;color:#fff;padding:18px 32px}header h1{margin:0;font-size:24px}
header p{margin:4px 0 0;color:#c8d2e6}main{padding:16px 32px;max-width:1200px}
section.paper{background:#fff;border-radius:8px;padding:12px 24px;margin:18px 0;box-shadow:0 1px 3px #0002}
article{border-top:1px solid #e3e6ea;padding:10px 0}h2{margin:8px 0}h3{margin:6px 0;font-size:18px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;width:100%}
td,th{border:1px solid #d8dce2;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eef1f5}
.pass{color:#17702c;font-weight:600}.fail{color:#b3261e;font-weight:600}.partly{color:#9a6700;font-weight:600}
.nr{color:#555;font-weight:600}.inc{color:#9a6700;font-weight:600}.vac{color:#8a1c7c;font-weight:600}h4{margin:8px 0 4px;font-size:15px}nav ul{margin:4px 0}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-size:13px;margin-right:6px}
.bp{background:#dcf2e0;color:#17702c}.bf{background:#fbe0de;color:#b3261e}.bn{background:#e9ecf1;color:#444}
figure{display:inline-block;margin:6px 12px 6px 0}figure img{max-width:560px;max-height:420px;border:1px solid #ddd;background:#fff}
figcaption{font-size:12px;color:#555;max-width:560px}pre{background:#f1f3f6;padding:8px;overflow:auto;font-size:12px;max-height:260px}
.meta{color:#555;font-size:13px}.note{background:#fff7e0;border-left:3px solid #e0a800;padding:4px 8px;font-size:13px;margin:4px 0}
"""


KIND_TITLES = {"paper": "paper", "consequence": "consequence", "sanity": "sanity", "erratum": "erratum",
               "unclassified": "unclassified"}  # fmt: skip


def _control_cell(c: Claim) -> str:
    state, outcome = c.control_state, escape(c.control_outcome())
    if state == "no control":
        return f"<span class='meta'>none: {outcome}</span>"
    if state:
        return f"{escape(c.control)}<div class='meta'>{f'<b>{outcome}</b>' if state == 'held' else outcome}</div>"
    return "<span class='meta'>none declared</span>" if c.kind in ("paper", "consequence") else ""


def _claim_row(c: Claim) -> str:
    cls, word = verdict_of(c)
    note = f"<div class='meta'>{escape(c.note)}</div>" if c.note else ""
    how = []
    for label, text in (("reading", c.reading), ("derivation", c.derivation), ("threshold basis", c.basis),
                        ("minimum effect", c.effect), ("rule", c.rule), ("interval", c.interval_method)):  # fmt: skip
        if text:
            how.append(f"<b>{escape(label)}:</b> {escape(text)}")
    per_seed = ", ".join(  # a seed whose measurement could not be made (no value) is "not run", not a failure
        f"{s}: {'not run' if v is None else escape(str(v)) + ('' if ok else ' ✗')}"
        for s, v, ok in zip(c.seeds, c.values, c.seed_passed)
    )
    if per_seed:
        how.append(f"<b>per seed:</b> {per_seed}")
    if c.control_values:
        how.append(f"<b>control per seed:</b> {escape(', '.join(str(v) for v in c.control_values))}")
    details = f"<details><summary>how it is checked</summary>{'<br>'.join(how)}</details>" if how else ""
    return (f"<tr><td class='{cls}'>{word}</td><td>{escape(c.statement)}{note}{details}</td>"
            f"<td>{escape(KIND_TITLES.get(c.kind, c.kind))}</td><td>{escape(c.location)}</td>"
            f"<td>{escape(c.measured_text())}</td><td>{escape(c.expected)}</td><td>{_control_cell(c)}</td>"
            f"<td><code>{escape(c.id)}</code></td></tr>")  # fmt: skip


def _claims_table(run: Any) -> str:
    claims = run.claims
    if not claims:
        return "<p class='meta'>No claims for this run.</p>"
    head = ("<table><tr><th>result</th><th>claim</th><th>kind</th><th>paper</th><th>measured (95% interval)</th>"
            "<th>expected</th><th>negative control</th><th>id</th></tr>")  # fmt: skip
    order = {"paper": 0, "consequence": 1, "unclassified": 2, "erratum": 3, "sanity": 4}
    rows = "".join(_claim_row(c) for c in sorted(claims, key=lambda c: order.get(c.kind, 5)))
    return head + rows + "</table>"


def _badge(claims: list[Claim]) -> tuple[str, str]:
    o = outcome_counts(claims)
    if o.total == 0:
        return ("bn", "no paper claims")
    if o.ran == 0:
        return ("bn", f"{o.not_run} claims not run")
    return ("bp" if o.passed == o.total else "bf", o.text("claims"))


def _run_block(run: Any, report_dir: Path) -> str:
    meta, rec = run.meta, run.config_record
    notes = "".join(f"<div class='note'>{escape(str(n))}</div>" for n in run.notes)
    figs = "".join(
        figure_html(f, report_dir, figure_caption(run.experiment, meta, f.name), link=True) for f in run.figures
    )
    cfg = escape(json.dumps(rec.get("config", {}), indent=2, sort_keys=True))
    label = meta.get("label") or ""
    return (
        f"<p class='meta'>preset <b>{escape(str(meta.get('preset')))}</b>"
        f"{' · ' + escape(label) if label else ''} · seeds {escape(', '.join(map(str, run.seeds)))}"
        f" · device {escape(str(rec.get('device')))} · run time {float(meta.get('run_seconds', 0)):.1f} s"
        f" · started {escape(str(meta.get('started', '')))}"
        f" · <a href='{relative_url(run.path, report_dir)}/'>run directory {escape(run.path.name)}</a></p>"
        f"{notes}{_claims_table(run)}<div>{figs}</div>"
        f"<details><summary>config</summary><pre>{cfg}</pre></details>"
    )


def _results_table(sc: PaperScore) -> str:
    if not sc.rows:
        return ""
    rows = []
    for r in sc.rows:
        why = "".join(
            f"<div class='meta'><code>{escape(e)}</code> {escape(c.id)} ({escape(c.status)}): measured "
            f"{escape(c.measured_text())}, "
            f"expected {escape(c.expected)}{' — ' + escape(c.note) if c.note else ''}</div>"
            for e, c in r.failing
        )
        cls = {"reproduced": "pass", "partly": "partly", "does not reproduce": "fail", "inconclusive": "inc",
               "vacuous": "vac", "incomplete": "inc"}.get(r.status, "nr")  # fmt: skip
        rows.append(f"<tr><td>{escape(r.result)}</td><td class='{cls}'>{escape(r.status)}</td>"
                    f"<td>{escape(r.outcomes.text())}</td><td>{escape(', '.join(r.experiments))}{why}</td></tr>")  # fmt: skip
    return ("<table><tr><th>paper result</th><th>status</th><th>claims</th><th>experiments / what does not pass</th>"
            "</tr>" + "".join(rows) + "</table>")  # fmt: skip


def _errata(sc: PaperScore) -> str:
    if not sc.errata:
        return ""
    rows = "".join(
        f"<tr><td>{escape(c.location)}</td><td>{escape(c.printed)}</td><td>{escape(c.used)}</td>"
        f"<td>{escape(c.statement)} — measured {escape(c.measured_text())} ({escape(c.expected)})"
        f"{'' if c.passed else ' <b>(demonstration failed)</b>'}</td><td><code>{escape(e)}</code></td></tr>"
        for e, c in sc.errata
    )
    return ("<h3>Errata</h3><table><tr><th>where</th><th>printed</th><th>we use</th><th>demonstration</th>"
            "<th>run</th></tr>" + rows + "</table>")  # fmt: skip


def _quick_vs_paper(paper_run: Any, quick_run: Any, report_dir: Path) -> str:
    """The paper-scale and quick canonical runs side by side: each claim's measurement at both scales."""
    quick = {c.id: c for c in quick_run.claims}
    ids = list(dict.fromkeys([c.id for c in paper_run.claims] + list(quick)))
    paper = {c.id: c for c in paper_run.claims}

    def cell(c: Claim | None) -> str:
        if c is None:
            return "<td class='meta'>—</td>"
        cls, word = verdict_of(c)
        return f"<td><span class='{cls}'>{word}</span> {escape(c.measured_text())}</td>"

    rows = "".join(
        f"<tr><td><code>{escape(i)}</code> {escape((paper.get(i) or quick[i]).statement)}</td>"
        f"{cell(paper.get(i))}{cell(quick.get(i))}</tr>"
        for i in ids
    )
    return (
        "<h4>Paper scale and quick, side by side</h4><table><tr><th>claim</th>"
        f"<th>paper scale (<a href='{relative_url(paper_run.path, report_dir)}/'>{escape(paper_run.path.name)}</a>, "
        f"seeds {escape(', '.join(map(str, paper_run.seeds)))})</th>"
        f"<th>quick (<a href='{relative_url(quick_run.path, report_dir)}/'>{escape(quick_run.path.name)}</a>, "
        f"seeds {escape(', '.join(map(str, quick_run.seeds)))})</th></tr>{rows}</table>"
        f"<details><summary>the quick-scale run</summary>{_run_block(quick_run, report_dir)}</details>"
    )


def _studies_block(studies: list[Any], res: Any, pages: dict[str, Path], report_dir: Path) -> str:
    """Links to the study pages of one experiment, each with its grid points' claim counts."""
    if not studies:
        return ""
    items = []
    for st in studies:
        done = {r.hash: r for r in res.records if r.hash in set(st.hashes)}
        pts = []
        for p in st.points:
            r = done.get(p["hash"])
            vals = point_text(p["values"])
            b = _badge(r.claims) if r is not None else ("bf", "not finished")
            pts.append(f"<span class='badge {b[0]}'>{escape(vals)}: {escape(b[1])}</span>")
        href = relative_url(pages[st.id], report_dir) if st.id in pages else "#"
        kind = st.source if st.source in ("sweep", "robustness") else "variants"
        items.append(f"<li><a href='{href}'>{escape(st.title)}</a> <span class='meta'>({kind}, preset "
                     f"{escape(st.preset)}, seeds {escape(', '.join(map(str, st.seeds)))})</span><div>{''.join(pts)}"
                     "</div></li>")  # fmt: skip
    return f"<h4>Sweeps and variants</h4><ul>{''.join(items)}</ul>"


def _robustness_block(exp: Any, studies: list[Any], res: Any, pages: dict[str, Path], report_dir: Path) -> str:
    """The experiment's robustness maps: per headline claim, its verdict at every grid point of the knobs."""
    if exp is None or not getattr(exp, "robustness", ()):
        return ""
    by_hash = {r.hash: r for r in res.records}
    blocks = []
    for rb in exp.robustness:
        keys = list(rb.knobs)
        st = next((s for s in studies if s.source == "robustness" and s.keys == keys), None)
        head = f"<h4>Robustness map: {escape(' × '.join(keys))}</h4><p class='meta'>paper: {escape(rb.paper)}</p>"
        if st is None:
            blocks.append(head + f"<p class='meta'>not run yet: <code>ssldyn robustness {escape(exp.name)}</code></p>")
            continue
        rows, summary = [], {c: [0, 0] for c in rb.claims}
        for pt in st.points:
            run = by_hash.get(pt["hash"])
            cells = []
            for cid, c in claims_at(run, rb.claims):
                if c is None:
                    cells.append("<td class='meta'>not run</td>")
                    continue
                summary[cid][1] += 1
                summary[cid][0] += c.status == "pass"
                cls, word = verdict_of(c)
                ctrl = f"<div class='meta'>control {escape(str(c.control_value))}</div>" if c.control_values else ""
                cells.append(f"<td><span class='{cls}'>{word}</span> {escape(c.measured_text())}{ctrl}</td>")
            vals = "".join(f"<td>{escape(value_text(pt['values'].get(k)))}</td>" for k in keys)
            rows.append(f"<tr>{vals}{''.join(cells)}</tr>")
        holds = " · ".join(f"<code>{escape(c)}</code> holds at {n}/{t} points" for c, (n, t) in summary.items())
        link = (
            f" · <a href='{relative_url(pages[st.id], report_dir)}'>plots against each knob</a>"
            if st.id in pages
            else ""
        )
        heads = "".join(f"<th>{escape(k)}</th>" for k in keys) + "".join(f"<th>{escape(c)}</th>" for c in rb.claims)
        blocks.append(head + f"<p class='meta'>{holds} (preset {escape(st.preset)}, seeds "
                      f"{escape(', '.join(map(str, st.seeds)))}){link}</p><table><tr>{heads}</tr>{''.join(rows)}</table>")  # fmt: skip
    return "".join(blocks)


def _canonical_by_preset(records: list[Any]) -> dict[tuple[str, str], Any]:
    """``{(experiment, "paper" | "quick"): run}`` — the newest canonical run of each experiment at each scale."""
    out: dict[tuple[str, str], Any] = {}
    for r in records:  # newest first
        if r.canonical:
            out.setdefault((r.experiment, run_scale(r.preset)), r)
    return out


def build_report(out: str | Path, res: Results | None = None) -> Path:
    """Write ``<out>/report/index.html`` (and a page per study) and return its path.

    Everything shown comes from :func:`ssldyn.results.load` (``res``: its result for ``out`` when the caller has
    loaded it already, so the runs are not listed and verified twice); ``<out>/<experiment>/runs.csv``
    indexes are refreshed on the way. A run that cannot be read is listed as damaged.
    """
    import shutil

    from ssldyn.lab.report_study import write_study_page
    from ssldyn.lab.results import load
    from ssldyn.lab.study import write_index

    out = Path(out)
    report_dir = out / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    res = load(out) if res is None else res
    try:
        write_index(out, res)
    except OSError:  # a read-only run store still gets its report
        pass
    by_exp: dict[str, list[Any]] = defaultdict(list)
    for r in res.records:
        by_exp[r.experiment].append(r)
    studies_by_exp: dict[str, list[Any]] = defaultdict(list)
    for st in res.studies:
        studies_by_exp[st.experiment].append(st)
    failures = {str(f.get("hash")): str(f.get("error")) for f in res.failure_list}
    shutil.rmtree(report_dir / "studies", ignore_errors=True)  # pages of studies that no longer exist go
    pages: dict[str, Path] = {}
    for st in res.studies:
        try:
            pages[st.id] = write_study_page(res, st, report_dir, CSS, failures)
        except Exception as e:  # one broken study never stops the report
            res.damaged_list.append((str(st.path or st.id), f"study page: {type(e).__name__}: {e}"))
    exps = all_experiments()
    known = {e.name: e for e in exps}
    canon = canonical_runs(res.records)
    scales = _canonical_by_preset(res.records)
    scores = paper_scores([e for e in exps if e.name in canon or e.name in by_exp], canon)
    overall = Outcomes()
    for sc_ in scores.values():
        for f in ("passed", "failed", "inconclusive", "vacuous", "not_run"):
            setattr(overall, f, getattr(overall, f) + getattr(sc_.outcomes, f))
    scale_words = sorted({v for sc_ in scores.values() for v in sc_.scales.values()})
    sections, toc = [], []
    papers = list(PAPERS) + sorted({n.split(".")[0] for n in by_exp} - set(PAPERS))
    for paper in papers:
        names = sorted(n for n in by_exp if n.split(".")[0] == paper)
        if not names:
            continue
        sc = scores.get(paper)
        arts, toc_items = [], []
        for name in names:
            rs = by_exp[name]
            exp = known.get(name)
            head = canon.get(name, rs[0])
            badge = _badge(head.claims) if name in canon else ("bn", "no paper-default run")
            side = ""
            if (name, "paper") in scales and (name, "quick") in scales:
                side = _quick_vs_paper(scales[(name, "paper")], scales[(name, "quick")], report_dir)
            shown = {head.path} | ({scales[(name, "quick")].path} if side else set())
            others = "".join(
                f"<details><summary>{escape(r.label)} ({escape(r.preset)}) · "
                f"{escape(_badge(r.claims)[1])}</summary>{_run_block(r, report_dir)}</details>"
                for r in rs
                if r.path not in shown
            )
            desc = exp.description if exp else head.meta.get("description", "")
            fig = exp.figure if exp else head.meta.get("figure", "")
            anchor = slug(name)
            study_toc = "".join(
                f"<li><a href='{relative_url(pages[st.id], report_dir)}'>{escape(st.title)}</a></li>"
                for st in studies_by_exp.get(name, [])
                if st.id in pages
            )
            toc_items.append(f"<li><a href='#{anchor}'>{escape(name)}</a> <span class='badge {badge[0]}'>"
                             f"{escape(badge[1])}</span>{f'<ul>{study_toc}</ul>' if study_toc else ''}</li>")  # fmt: skip
            other_h = f"<h4>Other runs (variants, sweep points, other scales)</h4>{others}" if others else ""
            index_link = out / name / "runs.csv"
            index_html = (f" · <a href='{relative_url(index_link, report_dir)}'>all runs (runs.csv)</a>"
                          if index_link.is_file() else "")  # fmt: skip
            if name in canon:
                which = (f"Headline and badge: the paper-default run at {'quick' if head.preset == 'quick' else 'paper'}"
                         f" scale ({escape(head.label)})")  # fmt: skip
            else:
                which = (f"No paper-default run yet (<code>ssldyn run {escape(name)}</code>); the newest run is shown: "
                         f"{escape(head.label)} ({escape(head.preset)})")  # fmt: skip
            arts.append(
                f"<article id='{anchor}'><h3><span class='badge {badge[0]}'>{escape(badge[1])}</span>"
                f"{escape(name)} — {escape(fig)}</h3><p>{escape(desc)}</p>"
                f"<p class='meta'>{which}{index_html}</p>"
                f"{_run_block(head, report_dir)}{side}"
                f"{_robustness_block(exp, studies_by_exp.get(name, []), res, pages, report_dir)}"
                f"{_studies_block(studies_by_exp.get(name, []), res, pages, report_dir)}{other_h}</article>"
            )
        title = PAPERS.get(paper, paper)
        score = (f"<p class='meta'>paper and consequence claims ({escape(sc.scale_text())}): "
                 f"<b>{escape(sc.outcomes.text())}</b> · sanity checks {escape(sc.sanity_text())}"
                 f"{_quick_note(sc)}</p>") if sc else ""  # fmt: skip
        results = (f"<p class='meta'><a href='#results-{escape(paper)}'>results table</a></p>{_errata(sc)}"
                   if sc else "")  # fmt: skip
        toc.append(f"<li><a href='#paper-{escape(paper)}'>{escape(paper)}</a><ul>{''.join(toc_items)}</ul></li>")
        sections.append(
            f"<section class='paper' id='paper-{escape(paper)}'><h2>{escape(paper)}: {escape(title)}</h2>"
            f"{score}{results}<h3>Experiments</h3>{''.join(arts)}</section>"
        )
    if res.failure_list:
        rows = "".join(
            f"<tr><td>{escape(str(f.get('experiment')))}</td><td><code>{escape(str(f.get('hash')))}</code></td>"
            f"<td>{escape(str(f.get('error')))}</td></tr>"
            for f in res.failure_list
        )
        sections.append(
            "<section class='paper'><h2>Failed runs</h2><p class='meta'>These runs raised an error "
            "(after their retries); re-run the same command to retry them.</p><table><tr><th>experiment"
            f"</th><th>hash</th><th>error</th></tr>{rows}</table></section>"
        )
    if res.damaged_list:
        rows = "".join(f"<tr><td><code>{escape(p)}</code></td><td>{escape(e)}</td></tr>" for p, e in res.damaged_list)
        sections.append(
            "<section class='paper' id='damaged'><h2>Damaged runs</h2><p class='meta'>These run directories do not "
            "match their checksums (or could not be read) and are left out of the report; <code>ssldyn run</code> / "
            "<code>ssldyn reproduce</code> move them aside and recompute them.</p>"
            f"<table><tr><th>path</th><th>error</th></tr>{rows}</table></section>"
        )
    if not sections:
        sections.append(
            "<section class='paper'><p>No finished runs yet. Run <code>ssldyn reproduce --quick</code>.</p></section>"
        )
    summary_tables = "".join(
        f"<h3 id='results-{escape(p)}'><a href='#paper-{escape(p)}'>{escape(p)}</a> "
        f"({escape(scores[p].scale_text())}): paper and consequence claims {escape(scores[p].outcomes.text())}</h3>"
        f"{_results_table(scores[p])}"
        for p in PAPERS
        if p in scores and scores[p].rows
    )
    overview = f"<section class='paper' id='results'><h2>Results per paper</h2>{summary_tables}</section>" if (
        summary_tables) else ""  # fmt: skip
    nav = f"<nav class='paper'><h2>Contents</h2><ul>{''.join(toc)}</ul></nav>" if toc else ""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    per_paper = " · ".join(f"{escape(p)} {scores[p].passed}/{scores[p].total}" for p in PAPERS if p in scores)
    scale_head = " and ".join(f"{w} scale" for w in scale_words) or "no runs"
    html = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ssldyn report</title>"
        f"<style>{CSS}</style></head><body><header><h1>ssldyn report</h1>"
        f"<p id='headline'>{escape(overall.text('paper and consequence claims'))} (paper-default configurations at "
        f"{escape(scale_head)}; only a pass whose control fails counts; sanity checks separate)"
        f"{' · ' + per_paper if per_paper else ''} · {len(by_exp)} experiments · "
        f"ssldyn {escape(__version__)} · built {escape(now)}</p></header><main>{overview}{nav}{''.join(sections)}"
        "</main></body></html>"
    )
    path = report_dir / "index.html"
    atomic_write_text(path, html)
    return path


def _quick_note(sc: PaperScore) -> str:
    if "quick" not in sc.scales.values():
        return ""
    return (
        " · <i>quick scale: a claim that fails or is inconclusive here may pass at paper scale (fewer seeds, "
        "shorter runs); the paper-scale run is the verdict</i>"
    )
