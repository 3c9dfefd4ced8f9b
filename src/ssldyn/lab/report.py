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
from ssldyn.lab.registry import PAPERS, all_experiments
from ssldyn.lab.store import RunStore, StoredRun, atomic_write_text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2430;background:#f6f7f9}
header{background:#1d2a44;color:#fff;padding:18px 32px}header h1{margin:0;font-size:24px}
header p{margin:4px 0 0;color:#c8d2e6}main{padding:16px 32px;max-width:1200px}
section.paper{background:#fff;border-radius:8px;padding:12px 24px;margin:18px 0;box-shadow:0 1px 3px #0002}
article{border-top:1px solid #e3e6ea;padding:10px 0}h2{margin:8px 0}h3{margin:6px 0;font-size:18px}
table{border-collapse:collapse;margin:8px 0;font-size:14px;width:100%}
td,th{border:1px solid #d8dce2;padding:4px 8px;text-align:left;vertical-align:top}th{background:#eef1f5}
.pass{color:#17702c;font-weight:600}.fail{color:#b3261e;font-weight:600}
.badge{display:inline-block;padding:2px 8px;border-radius:10px;font-size:13px;margin-right:6px}
.bp{background:#dcf2e0;color:#17702c}.bf{background:#fbe0de;color:#b3261e}.bn{background:#e9ecf1;color:#444}
figure{display:inline-block;margin:6px 12px 6px 0}figure img{max-width:560px;max-height:420px;border:1px solid #ddd;background:#fff}
figcaption{font-size:12px;color:#555}pre{background:#f1f3f6;padding:8px;overflow:auto;font-size:12px;max-height:260px}
.meta{color:#555;font-size:13px}.note{background:#fff7e0;border-left:3px solid #e0a800;padding:4px 8px;font-size:13px;margin:4px 0}
"""


def _rel(target: Path, start: Path) -> str:
    import os

    return quote(os.path.relpath(target, start).replace(os.sep, "/"))


def _claims_table(run: StoredRun) -> str:
    claims = run.claims
    if not claims:
        return "<p class='meta'>No claims for this run.</p>"
    rows = []
    for c in claims:
        cls, word = ("pass", "PASS") if c.passed else ("fail", "FAIL")
        note = f"<div class='meta'>{escape(c.note)}</div>" if c.note else ""
        rows.append(
            f"<tr><td class='{cls}'>{word}</td><td>{escape(c.statement)}{note}</td>"
            f"<td>{escape(c.location)}</td><td>{escape(str(c.measured))}</td>"
            f"<td>{escape(c.expected)}</td><td><code>{escape(c.id)}</code></td></tr>"
        )
    return (
        "<table><tr><th>result</th><th>claim</th><th>paper</th><th>measured</th><th>expected</th>"
        "<th>id</th></tr>" + "".join(rows) + "</table>"
    )


def _run_block(run: StoredRun, report_dir: Path) -> str:
    meta, rec = run.meta, run.config_record
    summ = run.summary
    notes = "".join(f"<div class='note'>{escape(str(n))}</div>" for n in summ.get("__notes__", []))
    figs = "".join(
        f"<figure><a href='{_rel(f, report_dir)}'><img src='{_rel(f, report_dir)}' alt='{escape(f.name)}'></a>"
        f"<figcaption>{escape(f.name)}</figcaption></figure>"
        for f in run.figures
    )
    cfg = escape(json.dumps(rec.get("config", {}), indent=2, sort_keys=True))
    n_pass = sum(c.passed for c in run.claims)
    n_all = len(run.claims)
    return (
        f"<p class='meta'>preset <b>{escape(str(meta.get('preset')))}</b> · seed {escape(str(rec.get('seed')))}"
        f" · device {escape(str(rec.get('device')))} · run time {float(meta.get('run_seconds', 0)):.1f} s"
        f" · finished {escape(str(meta.get('started', '')))} · claims {n_pass}/{n_all} passed"
        f" · <a href='{_rel(run.path, report_dir)}/'>run directory {escape(run.path.name)}</a></p>"
        f"{notes}{_claims_table(run)}<div>{figs}</div>"
        f"<details><summary>config</summary><pre>{cfg}</pre></details>"
    )


def build_report(out: str | Path) -> Path:
    """Write ``<out>/report/index.html`` and return its path."""
    out = Path(out)
    report_dir = out / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    runs = RunStore(out).finished()
    by_exp: dict[str, list[StoredRun]] = defaultdict(list)
    for r in runs:
        try:
            by_exp[r.experiment].append(r)
        except (OSError, ValueError, KeyError):
            continue
    known = {e.name: e for e in all_experiments()}
    total_pass = sum(sum(c.passed for c in rs[0].claims) for rs in by_exp.values())
    total = sum(len(rs[0].claims) for rs in by_exp.values())
    sections = []
    papers = list(PAPERS) + sorted({n.split(".")[0] for n in by_exp} - set(PAPERS))
    for paper in papers:
        names = sorted(n for n in by_exp if n.split(".")[0] == paper)
        if not names:
            continue
        arts = []
        for name in names:
            rs = by_exp[name]
            exp = known.get(name)
            latest = rs[0]
            meta = latest.meta
            n_pass, n_all = sum(c.passed for c in latest.claims), len(latest.claims)
            badge = (
                ("bn", "no claims")
                if n_all == 0
                else (("bp" if n_pass == n_all else "bf"), f"{n_pass}/{n_all} claims pass")
            )
            older = "".join(
                f"<details><summary>earlier run {escape(r.path.name)} ({escape(str(r.meta.get('preset')))})"
                f"</summary>{_run_block(r, report_dir)}</details>"
                for r in rs[1:]
            )
            desc = exp.description if exp else meta.get("description", "")
            fig = exp.figure if exp else meta.get("figure", "")
            arts.append(
                f"<article id='{escape(name)}'><h3><span class='badge {badge[0]}'>{escape(badge[1])}</span>"
                f"{escape(name)} — {escape(fig)}</h3><p>{escape(desc)}</p>"
                f"{_run_block(latest, report_dir)}{older}</article>"
            )
        title = PAPERS.get(paper, paper)
        sections.append(f"<section class='paper'><h2>{escape(paper)}: {escape(title)}</h2>{''.join(arts)}</section>")
    failures = RunStore(out).failures()
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
    if not sections:
        sections.append(
            "<section class='paper'><p>No finished runs yet. Run <code>ssldyn reproduce --quick</code>.</p></section>"
        )
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    html = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ssldyn report</title>"
        f"<style>{CSS}</style></head><body><header><h1>ssldyn report</h1>"
        f"<p>{total_pass}/{total} claims pass (latest run of each experiment) · {len(by_exp)} experiments · "
        f"ssldyn {escape(__version__)} · built {escape(now)}</p></header><main>{''.join(sections)}</main></body></html>"
    )
    path = report_dir / "index.html"
    atomic_write_text(path, html)
    return path
