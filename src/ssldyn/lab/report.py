"""Static, offline HTML report of every finished run under an output directory.

``build_report(out)`` writes ``out/report/index.html``: per paper and experiment the
figures, the claims table (pass/fail, measured, expected, where in the paper), the config,
the run time and a link to the run directory. No JavaScript, no external resources; all
text is HTML-escaped and all links are relative and URL-quoted.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from urllib.parse import quote

from ssldyn import __version__
from ssldyn.lab.claims import Claim
from ssldyn.lab.registry import PAPERS, all_experiments
from ssldyn.lab.scores import SCORED_KINDS, PaperScore, canonical_runs, paper_scores
from ssldyn.lab.store import RunStore, StoredRun, atomic_write_text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2a44;color:#fff;padding:18px 32px}header h1{margin:0;font-size:24px}
header p{margin:4px 0 0;color:#c8d2e6}main{padding:16px 32px;max-width:1200px}
section.paper{background:#fff;border-radius:8px;padding:12px 24px;margin:18px 0;box-shadow:0 1px 3px #0002}
article{border-top:1px solid #e3e6ea;padding:10px 0}h2{margin:8px 0}h3{margin:6px 0;font-size:18px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;width:100%}
td,th{border:1px solid #d8dce2;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eef1f5}
.pass{color:#17702c;font-weight:600}.fail{color:#b3261e;font-weight:600}.partly{color:#9a6700;font-weight:600}
.nr{color:#555;font-weight:600}h4{margin:8px 0 4px;font-size:15px}nav ul{margin:4px 0}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-size:13px;margin-right:6px}
.bp{background:#dcf2e0;color:#17702c}.bf{background:#fbe0de;color:#b3261e}.bn{background:#e9ecf1;color:#444}
figure{display:inline-block;margin:6px 12px 6px 0}figure img{max-width:560px;max-height:420px;border:1px solid #ddd;background:#fff}
figcaption{font-size:12px;color:#555}pre{background:#f1f3f6;padding:8px;overflow:auto;font-size:12px;max-height:260px}
.meta{color:#555;font-size:13px}.note{background:#fff7e0;border-left:3px solid #e0a800;padding:4px 8px;font-size:13px;margin:4px 0}
"""


def _rel(target: Path, start: Path) -> str:
    import os

    return quote(os.path.relpath(target, start).replace(os.sep, "/"))


KIND_TITLES = {"paper": "paper", "consequence": "consequence", "sanity": "sanity", "erratum": "erratum",
               "unclassified": "unclassified"}  # fmt: skip


def _claim_row(c: Claim) -> str:
    cls, word = {"pass": ("pass", "PASS"), "not-run": ("nr", "NOT RUN")}.get(c.status, ("fail", "FAIL"))
    if not c.status:
        cls, word = ("pass", "PASS") if c.passed else ("fail", "FAIL")
    note = f"<div class='meta'>{escape(c.note)}</div>" if c.note else ""
    how = []
    for label, text in (("reading", c.reading), ("derivation", c.derivation), ("threshold basis", c.basis),
                        ("rule", c.rule), ("interval", c.interval_method)):  # fmt: skip
        if text:
            how.append(f"<b>{escape(label)}:</b> {escape(text)}")
    per_seed = ", ".join(
        f"{s}: {escape(str(v))}{'' if ok else ' ✗'}" for s, v, ok in zip(c.seeds, c.values, c.seed_passed)
    )
    if per_seed:
        how.append(f"<b>per seed:</b> {per_seed}")
    details = f"<details><summary>how it is checked</summary>{'<br>'.join(how)}</details>" if how else ""
    return (f"<tr><td class='{cls}'>{word}</td><td>{escape(c.statement)}{note}{details}</td>"
            f"<td>{escape(KIND_TITLES.get(c.kind, c.kind))}</td><td>{escape(c.location)}</td>"
            f"<td>{escape(c.measured_text())}</td><td>{escape(c.expected)}</td>"
            f"<td><code>{escape(c.id)}</code></td></tr>")  # fmt: skip


def _claims_table(run: StoredRun) -> str:
    claims = run.claims
    if not claims:
        return "<p class='meta'>No claims for this run.</p>"
    head = ("<table><tr><th>result</th><th>claim</th><th>kind</th><th>paper</th><th>measured (95% interval)</th>"
            "<th>expected</th><th>id</th></tr>")  # fmt: skip
    order = {"paper": 0, "consequence": 1, "unclassified": 2, "erratum": 3, "sanity": 4}
    rows = "".join(_claim_row(c) for c in sorted(claims, key=lambda c: order.get(c.kind, 5)))
    return head + rows + "</table>"


def _badge(claims: list[Claim]) -> tuple[str, str]:
    scored = [c for c in claims if c.kind in SCORED_KINDS and c.status != "not-run"]
    if not scored:
        return ("bn", "no paper claims")
    n_pass = sum(c.passed for c in scored)
    return ("bp" if n_pass == len(scored) else "bf", f"{n_pass}/{len(scored)} claims pass")


def _run_block(run: StoredRun, report_dir: Path) -> str:
    meta, rec = run.meta, run.config_record
    notes = "".join(f"<div class='note'>{escape(str(n))}</div>" for n in run.notes)
    figs = "".join(
        f"<figure><a href='{_rel(f, report_dir)}'><img src='{_rel(f, report_dir)}' alt='{escape(f.name)}'></a>"
        f"<figcaption>{escape(f.name)}</figcaption></figure>"
        for f in run.figures
    )
    cfg = escape(json.dumps(rec.get("config", {}), indent=2, sort_keys=True))
    seeds = rec.get("seeds", [rec.get("seed")])
    label = meta.get("label") or ""
    return (
        f"<p class='meta'>preset <b>{escape(str(meta.get('preset')))}</b>"
        f"{' · ' + escape(label) if label else ''} · seeds {escape(', '.join(map(str, seeds)))}"
        f" · device {escape(str(rec.get('device')))} · run time {float(meta.get('run_seconds', 0)):.1f} s"
        f" · finished {escape(str(meta.get('started', '')))}"
        f" · <a href='{_rel(run.path, report_dir)}/'>run directory {escape(run.path.name)}</a></p>"
        f"{notes}{_claims_table(run)}<div>{figs}</div>"
        f"<details><summary>config</summary><pre>{cfg}</pre></details>"
    )


def _results_table(sc: PaperScore) -> str:
    if not sc.rows:
        return ""
    rows = []
    for r in sc.rows:
        why = "".join(
            f"<div class='meta'><code>{escape(e)}</code> {escape(c.id)}: measured {escape(c.measured_text())}, "
            f"expected {escape(c.expected)}{' — ' + escape(c.note) if c.note else ''}</div>"
            for e, c in r.failing
        )
        cls = {"reproduced": "pass", "partly": "partly", "does not reproduce": "fail"}.get(r.status, "nr")
        rows.append(f"<tr><td>{escape(r.result)}</td><td class='{cls}'>{escape(r.status)}</td>"
                    f"<td>{r.passed}/{r.total}</td><td>{escape(', '.join(r.experiments))}{why}</td></tr>")  # fmt: skip
    return ("<table><tr><th>paper result</th><th>status</th><th>claims pass</th><th>experiments / what fails</th>"
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


def build_report(out: str | Path) -> Path:
    """Write ``<out>/report/index.html`` and return its path."""
    out = Path(out)
    report_dir = out / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    store = RunStore(out)
    runs = store.finished()
    by_exp: dict[str, list[StoredRun]] = defaultdict(list)
    for r in runs:
        try:
            by_exp[r.experiment].append(r)
        except (OSError, ValueError, KeyError):
            continue
    exps = all_experiments()
    known = {e.name: e for e in exps}
    canon = canonical_runs(runs)
    scores = paper_scores([e for e in exps if e.name in canon or e.name in by_exp], canon)
    total_pass = sum(s.passed for s in scores.values())
    total = sum(s.total for s in scores.values())
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
            others = "".join(
                f"<details><summary>{escape(str(r.meta.get('label') or r.path.name))} "
                f"({escape(str(r.meta.get('preset')))}) · {escape(_badge(r.claims)[1])}</summary>"
                f"{_run_block(r, report_dir)}</details>"
                for r in rs
                if r.path != head.path
            )
            desc = exp.description if exp else head.meta.get("description", "")
            fig = exp.figure if exp else head.meta.get("figure", "")
            anchor = quote(name)
            toc_items.append(f"<li><a href='#{anchor}'>{escape(name)}</a> <span class='badge {badge[0]}'>"
                             f"{escape(badge[1])}</span></li>")  # fmt: skip
            other_h = f"<h4>Other runs (variants, sweeps, other scales)</h4>{others}" if others else ""
            arts.append(
                f"<article id='{escape(anchor)}'><h3><span class='badge {badge[0]}'>{escape(badge[1])}</span>"
                f"{escape(name)} — {escape(fig)}</h3><p>{escape(desc)}</p>"
                f"{_run_block(head, report_dir)}{other_h}</article>"
            )
        title = PAPERS.get(paper, paper)
        score = (f"<p class='meta'>paper and consequence claims: <b>{sc.passed}/{sc.total}</b> pass · sanity checks "
                 f"{sc.sanity_passed}/{sc.sanity_total}</p>") if sc else ""  # fmt: skip
        results = f"<h3>Results</h3>{_results_table(sc)}{_errata(sc)}" if sc else ""
        toc.append(f"<li><a href='#paper-{escape(paper)}'>{escape(paper)}</a><ul>{''.join(toc_items)}</ul></li>")
        sections.append(
            f"<section class='paper' id='paper-{escape(paper)}'><h2>{escape(paper)}: {escape(title)}</h2>"
            f"{score}{results}<h3>Experiments</h3>{''.join(arts)}</section>"
        )
    failures = store.failures()
    if failures:
        rows = "".join(
            f"<tr><td>{escape(str(f.get('experiment')))}</td><td><code>{escape(str(f.get('hash')))}</code></td>"
            f"<td>{escape(str(f.get('error')))}</td></tr>"
            for f in failures
        )
        sections.append(
            "<section class='paper'><h2>Failed runs</h2><p class='meta'>These runs raised an error "
            "(after their retries); re-run the same command to retry them.</p><table><tr><th>experiment"
            f"</th><th>hash</th><th>error</th></tr>{rows}</table></section>"
        )
    damaged = store.damaged()
    if damaged:
        rows = "".join(f"<tr><td><code>{escape(str(d.relative_to(out)))}</code></td><td>{escape(why)}</td></tr>"
                       for d, why in damaged)  # fmt: skip
        sections.append(
            "<section class='paper'><h2>Damaged runs</h2><p class='meta'>These run directories do not match their "
            "checksums and are not shown above; <code>ssldyn run</code> / <code>ssldyn reproduce</code> move them "
            f"aside and recompute them.</p><table><tr><th>run directory</th><th>why</th></tr>{rows}</table></section>"
        )
    if not sections:
        sections.append(
            "<section class='paper'><p>No finished runs yet. Run <code>ssldyn reproduce --quick</code>.</p></section>"
        )
    nav = f"<nav class='paper'><h2>Contents</h2><ul>{''.join(toc)}</ul></nav>" if toc else ""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    per_paper = " · ".join(f"{escape(p)} {scores[p].passed}/{scores[p].total}" for p in PAPERS if p in scores)
    html = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ssldyn report</title>"
        f"<style>{CSS}</style></head><body><header><h1>ssldyn report</h1>"
        f"<p>{total_pass}/{total} paper claims pass (paper-default runs; sanity checks separate)"
        f"{' · ' + per_paper if per_paper else ''} · {len(by_exp)} experiments · "
        f"ssldyn {escape(__version__)} · built {escape(now)}</p></header><main>{nav}{''.join(sections)}</main>"
        "</body></html>"
    )
    path = report_dir / "index.html"
    atomic_write_text(path, html)
    return path
