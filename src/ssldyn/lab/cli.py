"""The ``ssldyn`` command line (typer + rich).

Commands: ``list``, ``show EXP``, ``run EXP``, ``reproduce``, ``report [DIR]``.
User mistakes print one ``error:`` line and exit with code 2, without a traceback.

Start-up cost matters: ``ssldyn --help``, ``list`` and ``show`` import neither torch nor
pandas, matplotlib or the experiment modules (metadata come from :mod:`ssldyn.lab.manifest`);
``run``, ``reproduce`` and ``report`` import what they need inside the command.
Tables are laid out by :mod:`ssldyn.lab.textlayout` for the terminal width (``COLUMNS``):
words are never broken; long values wrap on spaces.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.text import Text

from ssldyn.errors import UserError
from ssldyn.lab import textlayout

__all__ = ["list_cmd", "show_cmd", "run_cmd", "reproduce_cmd", "report_cmd", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="ssldyn: learning dynamics of self-supervised learning — reproduce three theory papers, check their "
    "claims over seeds, sweep their settings.",
    epilog="Examples:\n\n\b\n"
    "  ssldyn list --wide                    # every experiment and what it shows\n"
    "  ssldyn show variational.fig5          # its claims and config\n"
    "  ssldyn run variational.fig5 --quick   # one experiment at quick scale\n"
    "  ssldyn reproduce --quick              # all; writes the HTML report\n"
    "\nHelp on a command: ssldyn COMMAND --help. Docs: the user guide of the docs site (mkdocs build).",
    context_settings={"max_content_width": 120},  # use a wide terminal; narrower ones wrap, nothing is cut
)


def _command(name: str, examples: list[str]):  # a decorator
    """``app.command`` with the docstring's first paragraph as the untruncated short help and an examples epilog.

    Click cuts a command's description to fit one line of the command list ("List the registered
    experiments with their estimated quick /..."); an explicit ``short_help`` is wrapped instead.
    The ``\\b`` line keeps click from re-flowing the examples.
    """

    def deco(func):
        summary = " ".join((func.__doc__ or "").strip().split("\n\n")[0].split())
        return app.command(name, short_help=summary, epilog="Examples:\n\n\b\n" + "\n".join(examples))(func)

    return deco


console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

# options several commands share (one definition: the same flag and help everywhere)
_OUT = typer.Option("ssldyn-runs", help="output directory (run store)")
_SEEDS = typer.Option(
    None, help="seeds per claim (default 3 with --quick; 5 at paper scale, or the paper's own count if it states one)"
)
_DEVICE = typer.Option("cpu", help="cpu or cuda")
_EXECUTOR = typer.Option("local", help="local (in-process) or ray")
_ADDRESS = typer.Option(
    None,
    "--ray-address",
    "--address",
    help="Ray cluster address: HOST:6379, or auto for $RAY_ADDRESS / the last `ray start` (default: start a local Ray)",
)
DEFAULT_MAX_RETRIES = 2  # = ssldyn.lab.executors.DEFAULT_MAX_RETRIES (not imported here: start-up time)
_MAX_RETRIES = typer.Option(DEFAULT_MAX_RETRIES, "--max-retries", help="Ray: retries of a failed task")
_WORKERS = typer.Option(None, "--workers", help="local: worker processes for a run's tasks (default: the CPU cores)")
_JOBS = typer.Option(None, "--jobs", help="local: runs computed at the same time (default: the CPU cores; 1 on a GPU)")
_TENSORBOARD = typer.Option(False, "--tensorboard", help="also write trajectories as TensorBoard scalars")
_DRY_RUN = typer.Option(False, "--dry-run", help="validate and list the planned runs; run nothing")


def _exception_class(name: str) -> type[BaseException]:
    """Typer's usage-error base class (``UsageError``, ``ClickException``), found through its public API.

    Typer ≥ 0.26 vendors click (``typer._click``); older releases use click itself. Both are
    reached from ``typer.BadParameter``'s class hierarchy, so click is never imported here.
    """
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == name)


_USAGE_ERROR = _exception_class("UsageError")
_CLICK_EXCEPTION = _exception_class("ClickException")


def _click_message(e: BaseException) -> str:
    """The message of a click exception (its ``format_message()``)."""
    fmt = getattr(e, "format_message", None)
    return str(fmt()) if callable(fmt) else str(e)


def _width() -> int:
    return max(40, console.width)


def _print_lines(lines: list[str], styles: dict[str, str] | None = None) -> None:
    """Print pre-laid-out lines verbatim (no markup), colouring the given words."""
    for line in lines:
        text = Text(line)
        for word, style in (styles or {}).items():
            text.highlight_words([word], style)
        console.print(text, no_wrap=True, crop=False, soft_wrap=True)


def _fmt_s(s: float) -> str:
    if s < 120:
        return f"~{s:.0f} s"
    if s < 2 * 3600:
        return f"~{s / 60:.0f} min"
    return f"~{s / 3600:.0f} h"


@_command(
    "list",
    [
        "  ssldyn list",
        "  ssldyn list --paper grassmann",
        "  ssldyn list --wide            # also what each experiment shows",
    ],
)
def list_cmd(
    paper: str | None = typer.Option(None, help="only this paper (variational, nonlinearity, grassmann)"),
    wide: bool = typer.Option(False, "--wide", help="also show what each experiment shows"),
) -> None:
    """List the registered experiments with their estimated quick / full time."""
    from ssldyn.lab import manifest

    exps = manifest.experiments(paper)
    width = _width()
    console.print(
        f"{len(exps)} experiments · estimated time on a 2-core CPU: --quick / paper scale",
        markup=False,
        width=width,
    )
    headers = ["experiment", "figure / section", "quick", "full"]
    rows = [[e["name"], e["figure"], _fmt_s(e["est_seconds"][0]), _fmt_s(e["est_seconds"][1])] for e in exps]
    if wide:
        headers.append("what it shows")
        for row, e in zip(rows, exps):
            row.append(e["description"])
        lines = textlayout.layout(headers, rows, width, wrap=(1, 4), right=(2, 3))
    else:
        lines = textlayout.layout(headers, rows, width, truncate=(1,), right=(2, 3))
    _print_lines(lines)
    console.print(
        "details: ssldyn show EXP" + ("" if wide else " · what each one shows: ssldyn list --wide"),
        markup=False,
        width=width,
    )


SHOW_PARTS = ("all", "claims", "config")


@_command(
    "show",
    [
        "  ssldyn show variational.fig5",
        "  ssldyn show grassmann.fig3 --part config",
        "  ssldyn show grassmann.fig3 | less",
    ],
)
def show_cmd(
    experiment: str,
    part: str = typer.Option("all", "--part", help="all, claims (the claims and robustness maps) or config"),
) -> None:
    """Show an experiment: what it checks (each claim with its rule and control), its config schema, the paper's
    defaults and the quick preset."""
    from ssldyn.lab import manifest

    if part not in SHOW_PARTS:  # not ssldyn.checks.choice: it imports torch, which show must not
        raise UserError(f"--part {part!r}: allowed values are {', '.join(SHOW_PARTS)}")
    e = manifest.find(experiment)
    width = _width()
    wrap = textlayout.wrap_words
    head = Text(f"{e['name']}", style="bold")
    head.append(f" · {e['paper']}, {e['figure']}")
    console.print(head, width=width)
    lines = wrap(e["description"], width)
    q, f = e["est_seconds"]
    lines += wrap(f"estimated time: {_fmt_s(q)} with --quick, {_fmt_s(f)} at paper scale (2-core CPU)", width)
    if e["doc"]:
        lines.append("")
        for para in e["doc"].splitlines():
            indent = len(para) - len(para.lstrip())
            body = wrap(para.strip(), max(20, width - indent)) if para.strip() else [""]
            lines += [" " * indent + line for line in body]
    _print_lines(lines)
    if part != "config":
        _show_claims(e, width)
    if part != "claims":
        _show_config(e, width)


def _show_claims(e: dict[str, Any], width: int) -> None:
    """The claims and robustness maps of ``ssldyn show``."""
    if e.get("claims"):
        console.print()
        console.print(
            "claims: what a run checks, over seeds (paper and consequence claims are scored, each against "
            "its negative control)",
            markup=False,
            width=width,
        )
        for c in e["claims"]:
            head = Text(c["id"], style="bold")
            head.append(f" · {c['kind']} · {c['location']}")
            console.print(head, width=width)
            _print_lines(_claim_lines(c, width))
    for rb in e.get("robustness", []):
        console.print()
        console.print(f"robustness map (ssldyn robustness {e['name']}):", markup=False, width=width)
        knobs = " × ".join(f"{k} = {', '.join(map(str, v))}" for k, v in rb["knobs"].items())
        _print_lines(_labelled([("claims", ", ".join(rb["claims"])), ("knobs", knobs), ("paper", rb["paper"])], width))


def _show_config(e: dict[str, Any], width: int) -> None:
    """The config schema of ``ssldyn show``: key, type, default, quick preset, description."""
    console.print()
    console.print(
        "config: key, type, the paper's default (and the --quick preset where it differs); "
        "change a key with --set key=value",
        markup=False,
        width=width,
    )
    key_w = min(max((len(r["key"]) for r in e["config"]), default=0), 24)
    for r in e["config"]:
        text = f"{r['type']} · default {r['default']}" + (f" · quick {r['quick']}" if r["quick"] else "")
        block = textlayout.hanging(r["key"], text, width, key_w)
        desc = textlayout.hanging("", r["description"], width, key_w) if r["description"] else []
        t = Text(block[0])
        t.stylize("bold", 0, len(r["key"]))
        console.print(t, no_wrap=True, crop=False, soft_wrap=True)
        _print_lines(block[1:])
        for line in desc:
            console.print(Text(line, style="dim"), no_wrap=True, crop=False, soft_wrap=True)


def _labelled(rows: list[tuple[str, str]], width: int, indent: int = 2) -> list[str]:
    """``label  text`` rows under a heading: labels in a column, texts wrapped beside them (empty texts left out)."""
    label_w = max(len(label) for label, _ in rows)
    return [" " * indent + line for label, text in rows if text
            for line in textlayout.hanging(label, text, width - indent, label_w)]  # fmt: skip


def _claim_lines(c: dict[str, Any], width: int) -> list[str]:
    """One claim of ``ssldyn show``: the paper's words, what is measured, when it passes and its control."""
    quick = f"; --quick: {c['expected_quick']}" if c["expected_quick"] else ""
    what = "the check holds" if c["expected"] == "holds" else f"value {c['expected']}"
    rows = [("claim", c["statement"]), ("measured", c["reading"]), ("passes", f"{what} ({c['rule']}{quick})"),
            ("basis", c["basis"]), ("effect", c["effect"]), ("control", c["control"]),
            ("no control", c["no_control"])]  # fmt: skip
    return _labelled(rows, width)


def _points_text(points: list[str], n_grid: int) -> str:
    """``point tau=-1`` / ``points tau=-1; tau=-2`` / ``all 3 points``."""
    if len(points) == n_grid:
        return f"all {n_grid} points"
    return ("point " if len(points) == 1 else "points ") + "; ".join(points)


def _seeds_note(seeds: int | None, specs: list[Any]) -> None:
    """A note when ``--seeds N`` was given but some runs are deterministic (one evaluation, no seeds)."""
    if seeds is None or seeds <= 1:
        return
    fixed = sorted({s.experiment for s in specs if len(s.seeds) == 1})
    if not fixed:
        return
    what = fixed[0] if len(fixed) == 1 else f"{len(fixed)} experiments ({', '.join(fixed)})"
    verb = "is" if len(fixed) == 1 else "are"
    err_console.print(f"note: --seeds {seeds} does not apply: {what} {verb} deterministic (no randomness), "
                      "computed once", markup=False, soft_wrap=True)  # fmt: skip


def _plan(
    experiment: str,
    *,
    quick: bool,
    sets: list[str] | None,
    sweep: list[str] | None,
    config: Path | None,
    seed: int,
    seeds: int | None,
    device: str,
    yes: bool = False,
) -> tuple[list[Any], list[str]]:
    """Validate a ``run`` request: its run specs (one per grid point, each with all its seeds) and the
    invalid grid points (each with its error; a single-point request raises instead). Nothing is written."""
    from ssldyn.contract.config import deep_merge, parse_sets
    from ssldyn.lab.runner import plan_run
    from ssldyn.lab.sweep import MAX_GRID, expand_grid, nest

    base = parse_sets(sets)
    grid = expand_grid(sweep, limit=None if yes else MAX_GRID)
    _check_sweep_keys(list(grid[0]), sets, config)
    specs, invalid = [], []
    errors: dict[str, list[str]] = {}  # distinct error -> the grid points that have it
    for point in grid:
        try:
            specs.append(plan_run(experiment, quick=quick, config_file=config, sets=deep_merge(base, nest(point)),
                                  seed=seed, seeds=seeds, device=device))  # fmt: skip
        except UserError as e:
            if len(grid) == 1:
                raise
            label = ", ".join(f"{k}={v}" for k, v in point.items())
            invalid.append(f"{label}: {e}")
            msg = str(e)
            for k, v in point.items():  # the same mistake at several values is one error
                msg = msg.replace(f"'{k}': {v}: ", f"'{k}': ")
            errors.setdefault(msg, []).append(label)
    if len(grid) > 1:
        if not specs and len(errors) == 1:  # every point has the same mistake (an unknown key): say it once
            msg, points = next(iter(errors.items()))
            raise UserError(f"{msg} (at {'; '.join(points)})" if msg.startswith("invalid value") else msg)
        if not specs:
            for msg, points in errors.items():
                err_console.print(
                    f"error: {msg} (grid {_points_text(points, len(grid))})", markup=False, soft_wrap=True
                )
            raise UserError(f"--sweep: no valid grid point ({len(grid)} points, {len(errors)} distinct errors above)")
        err_console.print(f"grid: {len(grid)} points × {len(specs[0].seeds)} seeds"
                          + (f"; {len(invalid)} invalid, skipped:" if invalid else ""), markup=False,
                          soft_wrap=True)  # fmt: skip
        for msg, points in errors.items():
            err_console.print(f"  invalid {_points_text(points, len(grid))}: {msg}", markup=False, soft_wrap=True)
    return specs, invalid


def _check_sweep_keys(swept: list[str], sets: list[str] | None, config: Path | None) -> None:
    """A swept key may not be given with ``--set`` or in ``--config`` too (the grid's value would silently win):
    one :class:`UserError` naming the key and where else it is given."""
    if not swept:
        return
    from ssldyn.contract.config import keys_overlap, load_config_file, set_keys
    from ssldyn.lab.sweep import flatten

    given = [(k, "--set") for k in set_keys(sets)]
    if config is not None:
        given += [(k, f"--config {str(config)!r}") for k, _ in flatten(load_config_file(config), empty_leaf=True)]
    for key in swept:
        for other, where in given:
            if keys_overlap(key, other):
                also = "" if other == key else f" (as {other!r})"
                raise UserError(f"--sweep {key}: also given with {where}{also}; drop one")


@_command(
    "run",
    [
        "  ssldyn run variational.fig5 --quick",
        "  ssldyn run variational.fig5 --set tau=0.2 --set lr_network=0.5 --seeds 5",
        "  ssldyn run grassmann.fig3 --sweep lr=0.01,0.001 --sweep 'widths=[10],[100]'",
        "  ssldyn run variational.fig5 --quick --sweep tau=0.2,0.5 --dry-run",
        "  ssldyn run variational.fig5 --device cuda --tensorboard",
    ],
)
def run_cmd(
    experiment: str,
    quick: bool = typer.Option(False, "--quick", help="use the quick preset (seconds on a laptop)"),
    set_: list[str] | None = typer.Option(
        None, "--set", help="override: key=value (repeatable; dots for nested keys; lists as JSON)"
    ),
    sweep: list[str] | None = typer.Option(
        None, "--sweep", help="grid axis: key=v1,v2,... (repeatable; cartesian product)"
    ),
    config: Path | None = typer.Option(None, "--config", help="YAML file of overrides"),
    seed: int = typer.Option(0, help="first seed: the run uses seeds seed..seed+N-1"),
    seeds: int | None = _SEEDS,
    out: str = _OUT,
    device: str = _DEVICE,
    executor: str = _EXECUTOR,
    address: str | None = _ADDRESS,
    max_retries: int = _MAX_RETRIES,
    workers: int | None = _WORKERS,
    jobs: int | None = _JOBS,
    force: bool = typer.Option(False, "--force", help="recompute even if a finished run exists"),
    yes: bool = typer.Option(False, "--yes", help="run a grid larger than 200 points"),
    tensorboard: bool = _TENSORBOARD,
    dry_run: bool = _DRY_RUN,
) -> None:
    """Run one experiment, a sweep or several seeds (finished runs come from the store)."""
    _check_executor(executor, max_retries, address, workers, jobs)
    _check_out(out)
    _check_tensorboard(tensorboard)
    specs, invalid = _plan(experiment, quick=quick, sets=set_, sweep=sweep, config=config, seed=seed, seeds=seeds,
                           device=device, yes=yes)  # fmt: skip
    _seeds_note(seeds, specs)
    n_jobs = _check_run_options(out, workers, jobs, device, executor)  # as the run checks them, --dry-run too
    if dry_run:
        _print_plan(specs, Path(out))
        if invalid:  # as the run: exit 1 when grid points were skipped
            raise typer.Exit(1)
        return
    items = _execute(specs, out, executor, force, address, max_retries, title=experiment, workers=workers,
                     jobs=n_jobs)  # fmt: skip
    from ssldyn.lab.summary import after_runs, sweep_summary

    if sweep and specs:
        from ssldyn.lab.sweep import parse_sweep

        sweep_summary(console, out, specs, [parse_sweep(s)[0] for s in sweep], items)
    elif len(items) == 1 and items[0].run is not None:
        _print_run(items[0])
    else:
        _print_items(items, title=f"{experiment}: {len(items)} runs", out=Path(out))
    after_runs(console, out, items, tensorboard=tensorboard)
    if any(it.status == "failed" for it in items) or invalid:
        raise typer.Exit(1)


@_command(
    "reproduce",
    [
        "  ssldyn reproduce --quick                    # minutes on a laptop CPU",
        "  ssldyn reproduce --paper grassmann --seeds 5",
        "  ssldyn reproduce --only variational.fig5 --only grassmann.fig3",
        "  ssldyn reproduce --executor ray --address auto --device cuda",
    ],
)
def reproduce_cmd(
    quick: bool = typer.Option(False, "--quick", help="quick presets: the whole set in minutes"),
    paper: str | None = typer.Option(None, help="only this paper (variational, nonlinearity, grassmann)"),
    out: str = _OUT,
    seed: int = typer.Option(0, help="first seed: each run uses seeds seed..seed+N-1"),
    seeds: int | None = _SEEDS,
    device: str = _DEVICE,
    executor: str = _EXECUTOR,
    address: str | None = _ADDRESS,
    max_retries: int = _MAX_RETRIES,
    workers: int | None = _WORKERS,
    jobs: int | None = _JOBS,
    force: bool = typer.Option(False, "--force", help="recompute even if a finished run exists"),
    only: list[str] | None = typer.Option(None, "--only", help="run only these experiments (repeatable)"),
    tensorboard: bool = _TENSORBOARD,
    dry_run: bool = _DRY_RUN,
    robustness: bool = typer.Option(
        False, "--robustness", help="also run the robustness maps of the headline claims (quick grids)"
    ),
) -> None:
    """Run every registered experiment (a sweep over experiments) and write the HTML report.

    A failed run (or robustness map point) is listed as failed and the command goes on: the report is
    written, then the command exits with code 1."""
    from ssldyn.lab.registry import all_experiments, get_experiment
    from ssldyn.lab.robustness import plan_maps
    from ssldyn.lab.runner import plan_run

    _check_executor(executor, max_retries, address, workers, jobs)
    _check_out(out)
    _check_tensorboard(tensorboard)
    exps = all_experiments(paper)  # an unknown --paper is refused, with --only too
    if only:
        chosen = [get_experiment(n) for n in only]
        outside = [e.name for e in chosen if paper is not None and e.paper != paper]
        if outside:
            raise UserError(f"--only {outside[0]} is not a {paper} experiment (--paper {paper}); "
                            f"see `ssldyn list --paper {paper}`")  # fmt: skip
        exps = chosen
    specs = [plan_run(e.name, quick=quick, seed=seed, seeds=seeds, device=device) for e in exps]
    _seeds_note(seeds, specs)
    maps = []  # --robustness: planned (validated) before anything runs, and listed by --dry-run
    if robustness:
        maps = [m for e in exps if e.robustness for m in plan_maps(e.name, quick=True, seed=seed, device=device)]
    n_jobs = _check_run_options(out, workers, jobs, device, executor)
    if dry_run:
        _print_plan(specs + [s for m in maps for s in m.specs], Path(out))
        return
    from ssldyn.lab.report import build_report

    t0 = time.perf_counter()
    items = _execute(specs, out, executor, force, address, max_retries, title="reproduce", workers=workers,
                     jobs=n_jobs)  # fmt: skip
    maps_failed = _run_maps(maps, out=out, jobs=n_jobs, force=force) if maps else False
    report = build_report(out)
    _print_items(
        items, title=f"ssldyn reproduce{' --quick' if quick else ''} ({time.perf_counter() - t0:.0f} s)", out=Path(out)
    )
    _print_scores(out)
    console.print(f"report: {report}", markup=False, soft_wrap=True)
    from ssldyn.lab.summary import after_runs

    after_runs(console, out, items, tensorboard=tensorboard)
    if any(it.status == "failed" for it in items) or maps_failed:
        raise typer.Exit(1)


@_command(
    "robustness",
    [
        "  ssldyn robustness variational.fig5   # then `ssldyn report` shows the map",
        "  ssldyn robustness grassmann.fig3 --dry-run",
    ],
)
def robustness_cmd(
    experiment: str,
    paper_scale: bool = typer.Option(False, "--paper-scale", help="run the grid at paper scale (default: quick)"),
    seed: int = typer.Option(0, help="first seed: each grid point uses seeds seed..seed+N-1"),
    seeds: int | None = typer.Option(
        None, help="seeds per grid point (default 3 quick; 5 at paper scale, or the paper's own count if it states one)"
    ),
    out: str = _OUT,
    device: str = _DEVICE,
    jobs: int | None = typer.Option(None, "--jobs", help="runs computed at the same time (default: the CPU cores)"),
    force: bool = typer.Option(False, "--force", help="recompute even if a finished run exists"),
    dry_run: bool = _DRY_RUN,
) -> None:
    """Robustness maps of an experiment's headline claims: the knobs the paper leaves open, as a study."""
    from ssldyn.lab.robustness import plan_maps

    _check_out(out)
    planned = plan_maps(experiment, quick=not paper_scale, seed=seed, seeds=seeds, device=device)
    n_jobs = _check_run_options(out, None, jobs, device)
    if dry_run:
        _print_plan([s for m in planned for s in m.specs], Path(out))
        return
    failed = _run_maps(planned, out=out, jobs=n_jobs, force=force)
    from ssldyn.lab.summary import report_command

    console.print(f"`{report_command(out)}` rebuilds the report, which shows the map beside each claim", markup=False,
                  width=_width())  # fmt: skip
    if failed:
        raise typer.Exit(1)


def _run_maps(planned: list[Any], *, out: str, jobs: int, force: bool) -> bool:
    """Run, store as studies and print the planned robustness maps (:func:`~ssldyn.lab.robustness.plan_maps`);
    ``True`` when a grid point failed (the caller decides the exit code: ``reproduce`` writes its report first)."""
    from ssldyn.lab.robustness import holds_text, map_rows
    from ssldyn.lab.study import record_study

    specs = [s for m in planned for s in m.specs]
    items = _execute(specs, out, "local", force, None, DEFAULT_MAX_RETRIES, title="robustness", jobs=jobs,
                     notes=False)  # fmt: skip
    from ssldyn.lab.results import load

    res = load(out, sorted({m.experiment for m in planned}))
    failed = {it.spec.digest: it.error for it in items if it.status == "failed"}
    _print_failures(items, err_console)
    for m in planned:
        record_study(out, m.specs, list(m.robustness.knobs), source="robustness")
        rows = map_rows(m, res, failed)
        console.print(f"{m.experiment} robustness map: {' × '.join(m.robustness.knobs)} ({len(rows)} points)",
                      markup=False, style="bold", width=_width())  # fmt: skip
        console.print(f"paper: {m.robustness.paper}", markup=False, width=_width())
        heads = [*m.robustness.knobs, *m.robustness.claims]
        table = [[str(r["point"][k]) for k in m.robustness.knobs]
                 + [f"{r['claims'][c]['status'].upper()} {r['claims'][c]['text']}" for c in m.robustness.claims]
                 for r in rows]  # fmt: skip
        _print_lines(textlayout.layout(heads, table, _width(), wrap=tuple(range(len(heads))), name_first=True),
                     {"PASS": "green", "FAIL": "red", "FAILED": "red", "VACUOUS": "red", "INCONCLUSIVE": "yellow"})  # fmt: skip
        for c in m.robustness.claims:
            console.print(f"  {c}: {holds_text(rows, c)}", markup=False, width=_width())
    return any(it.status == "failed" for it in items)


@_command("report", ["  ssldyn report", "  ssldyn report my-runs      # writes my-runs/report/index.html"])
def report_cmd(directory: Path = typer.Argument(Path("ssldyn-runs"), help="the run store directory")) -> None:
    """Build DIR/report/index.html from the finished runs in DIR."""
    if not directory.is_dir():
        raise UserError(f"report directory {str(directory)!r} does not exist")
    from ssldyn.lab.store import check_not_inside_store, looks_like_store

    check_not_inside_store(directory, "report directory")  # a report inside a run directory damages the run
    if not looks_like_store(directory):
        raise UserError(f"report directory {str(directory)!r} is not a run store (no experiment runs, no .locks); "
                        "give the --out directory of your runs (default: ssldyn-runs)")  # fmt: skip
    from ssldyn.lab.report import build_report
    from ssldyn.lab.results import load

    res = load(directory)  # once: the report is built from the same runs
    if not res.records:  # a new or wrong folder: the report would list nothing
        err_console.print(f"warning: no finished runs in {str(directory)!r}: the report lists no experiment "
                          "(run `ssldyn reproduce --quick`, or give the --out folder of your runs)", markup=False,
                          soft_wrap=True)  # fmt: skip
    console.print(f"report: {build_report(directory, res)}", markup=False, soft_wrap=True)


def _print_scores(out: str | Path) -> None:
    """One table per paper: its results × status, from the paper-default runs in ``out``."""
    from ssldyn.contract.experiment import PAPERS
    from ssldyn.lab.registry import all_experiments
    from ssldyn.lab.scores import canonical_runs, paper_scores
    from ssldyn.lab.store import RunStore

    canon = canonical_runs(RunStore(out).finished())
    scores = paper_scores([e for e in all_experiments() if e.name in canon], canon)
    for paper in PAPERS:
        sc = scores.get(paper)
        if sc is None:
            continue
        console.print(f"{paper} ({sc.scale_text()}): paper and consequence claims {sc.outcomes.text()} · sanity "
                      f"checks {sc.sanity_text()}", markup=False, style="bold", width=_width())  # fmt: skip
        rows = [[r.result, r.status, r.outcomes.text()] for r in sc.rows]
        lines = textlayout.layout(["result", "status", "claims"], rows, _width(), wrap=(0, 2))
        _print_lines(lines, {"reproduced": "green", "partly": "yellow", "reproduce": "red"})
        if sc.scale_text() != "paper scale":
            console.print("  quick scale: a claim that fails or is inconclusive here may need paper scale "
                          "(`ssldyn reproduce` without --quick)", markup=False, width=_width())  # fmt: skip


def _check_out(out: str) -> None:
    from ssldyn.lab.store import check_out_given

    check_out_given(out)


def _check_executor(
    executor: str, max_retries: int, address: str | None = None, workers: int | None = None, jobs: int | None = None
) -> None:
    from ssldyn.lab.executors import check_executor

    check_executor(executor, max_retries, address, workers=workers, jobs=jobs)


def _check_tensorboard(tensorboard: bool) -> None:
    """``--tensorboard`` needs TensorBoard installed: checked before anything runs (``--dry-run`` too)."""
    if tensorboard:
        from ssldyn.lab.tensorboard import check_tensorboard

        check_tensorboard()


def _check_run_options(out: str, workers: int | None, jobs: int | None, device: str, executor: str = "local") -> int:
    """Check ``--out`` (a writable directory, or creatable as one), ``--workers`` and ``--jobs`` as a run does,
    so that ``--dry-run`` rejects what the run would; return the number of runs computed at the same time
    (1 under Ray: Ray schedules the runs)."""
    from ssldyn.lab.store import check_out_dir
    from ssldyn.lab.tasks import check_workers

    check_out_dir(out)
    check_workers(workers)
    return 1 if executor == "ray" else _jobs(jobs, device)


def _jobs(jobs: int | None, device: str) -> int:
    """``--jobs``: None -> the CPU cores on a CPU, 1 on a GPU (one device); otherwise an integer >= 1."""
    from ssldyn.lab.tasks import check_count, default_workers

    if jobs is None:
        return 1 if device.startswith("cuda") else default_workers()
    return check_count("--jobs", jobs)


def _execute(specs, out, executor, force, address, max_retries, title, workers=None, jobs=1, notes=True):
    """Set torch threads (``SSLDYN_THREADS`` or the core count), run specs with a progress bar and print
    each run's note (``notes``); on Ctrl-C say what finished and how to resume."""
    from ssldyn.contract.context import progress_display, set_threads
    from ssldyn.lab.executors import execute
    from ssldyn.lab.store import RunStore

    set_threads()
    try:
        with progress_display(console, indent="") as bar:
            items = execute(
                specs,
                out,
                executor=executor,
                force=force,
                address=address,
                max_retries=max_retries,
                progress=bar,
                title=title,
                workers=workers,
                jobs=jobs,
            )
    except KeyboardInterrupt:
        store = RunStore(out)
        done = [s.label for s in specs if store.get(s.experiment, s.digest) is not None]
        err_console.print(
            f"interrupted: {len(done)}/{len(specs)} runs are finished and kept in {out}; "
            "run the same command again to resume (finished runs are not recomputed)",
            markup=False,
            soft_wrap=True,
        )
        sys.exit(130)
    for it in items if notes else ():
        if it.note:
            err_console.print(f"note: {it.note}", markup=False, soft_wrap=True)
    return items


def _print_failures(items: list[Any], to: Any) -> None:
    """One red line per failed run: ``failed: <run> [<hash>]: <error>``."""
    for it in items:
        if it.status == "failed":
            to.print(Text(f"failed: {_run_label(it.spec)} [{it.spec.digest}]: {it.error}", style="red"))


def _run_label(spec: Any) -> str:
    """``experiment (overrides, seeds)``: what a run is, for people."""
    describe = getattr(spec, "describe", None)
    return f"{spec.experiment} ({describe()})" if callable(describe) else f"{spec.experiment} (seed {spec.seed})"


def _print_plan(specs: list[Any], out: Path) -> None:
    """``--dry-run``: the runs a command would execute (a run asked for twice is listed once: it is computed
    once), which are already in the store, and the time (each run at its preset's scale). A damaged run is listed
    as ``damaged: recompute``, not as in the store: the run sets it aside and computes it again."""
    from ssldyn.lab import manifest
    from ssldyn.lab.store import DONE, verify_run

    def seed_factor(s: Any) -> float:  # est_seconds covers the preset's default seeds: scale to the run's
        from ssldyn.lab.registry import get_experiment
        from ssldyn.lab.runner import default_seeds

        return len(s.seeds) / len(default_seeds(get_experiment(s.experiment), s.preset))

    unique: dict[tuple[str, str], Any] = {}
    for s in specs:
        unique.setdefault((s.experiment, s.digest), s)
    specs = list(unique.values())
    rows, todo_s, n_todo = [], 0.0, 0
    planned = {s.experiment for s in specs}
    extra_s, reused = 0.0, set()  # the reused experiments' time, when their cached results may be missing
    overridden = False  # a run to compute with overrides: the estimate is for the preset's sizes
    for s in specs:
        scale = 0 if s.preset == "quick" else 1  # the index into est_seconds = (quick, paper scale)
        run_dir = out / s.experiment / s.digest
        done = (run_dir / DONE).is_file()
        damage = verify_run(run_dir) if done else None
        finished = done and damage is None
        entry = manifest.find(s.experiment)
        est = entry["est_seconds"][scale] * seed_factor(s)
        if not finished:
            todo_s, n_todo = todo_s + est, n_todo + 1
            overridden = overridden or bool(s.overrides)
            # est_seconds assumes the reused experiment's cached results are in place (as in reproduce, which
            # runs it first); a run without it in the plan may have to compute them (other settings, new store)
            for r in set(entry.get("reuses", ())) - planned:
                extra_s, reused = extra_s + manifest.find(r)["est_seconds"][scale], reused | {r}
        mem = f"{s.est_memory / 2**30:.2g} GiB" if s.est_memory else "-"
        status = "in store" if finished else "to run" if damage is None else "damaged: recompute"
        rows.append([_run_label(s), s.digest, s.preset, mem, status])
    _print_lines(textlayout.layout(["run", "config hash", "preset", "est. peak memory", "status"], rows, _width(),
                                   wrap=(0, 2)))  # fmt: skip
    upper = (
        f", {_fmt_s(todo_s + extra_s)} if the cached results of {', '.join(sorted(reused))} are not in the store"
        if reused
        else ""
    )
    console.print(
        f"dry run: {len(specs)} runs, {n_todo} to run (estimated {_fmt_s(todo_s)} on a 2-core CPU"
        f"{' at the preset sizes' if overridden else ''}{upper}); "
        f"nothing was run or written (store: {out})",
        markup=False,
        width=_width(),
    )


def _print_items(items: list[Any], title: str, out: Path) -> None:
    """A table of sweep / reproduce outcomes; errors and run directories below it."""
    from ssldyn.lab.scores import outcome_counts

    console.print(title, markup=False, style="bold", width=_width())
    rows, tp, tn = [], 0, 0
    for it in items:
        o = outcome_counts(it.run.claims if it.run is not None else [], None)
        p, n = o.passed, o.total
        tp, tn = tp + p, tn + n
        t = "cached" if it.status == "cached" else f"{it.seconds:.1f} s"
        rows.append([_run_label(it.spec), it.status, t, f"{p}/{n}", it.spec.digest])
    lines = textlayout.layout(
        ["run", "status", "time", "claims", "run directory"], rows, _width(), wrap=(0,), right=(2,)
    )
    _print_lines(lines, {"failed": "red"})
    console.print(f"run directories: {out}/<experiment>/<run directory>/", markup=False, soft_wrap=True)
    _print_failures(items, console)
    n_failed = sum(it.status == "failed" for it in items)
    console.print(f"claims passed (every kind): {tp}/{tn} · runs failed: {n_failed}", markup=False)


def _print_run(o: Any) -> None:
    """The claims of one run: verdict, statement, where in the paper, measured and expected values."""
    run = o.run
    claims = run.claims
    cached = o.status == "cached"
    console.print(
        f"{run.experiment} — {'from store (cached)' if cached else f'{o.seconds:.1f} s'}",
        markup=False,
        style="bold",
        width=_width(),
    )
    rows = [
        [_verdict(c), c.statement, c.location, _measured_cell(c), c.expected]
        for c in claims
    ]  # fmt: skip
    lines = textlayout.layout(["", "claim", "paper", "measured", "expected"], rows, _width(), wrap=(1, 2, 3, 4))
    _print_lines(lines, {"PASS": "green", "FAIL": "red", "VACUOUS": "red", "INCONCLUSIVE": "yellow"})
    from ssldyn.lab.scores import SCORED_KINDS, outcome_counts

    o = outcome_counts(claims)  # paper and consequence claims, as the report's badge and headline count them
    extra = o.text().partition(" pass")[2]
    others = outcome_counts([c for c in claims if c.kind not in SCORED_KINDS], None)
    more = f" · sanity and errata {others.passed}/{others.total}" if others.total else ""
    scale = "quick" if str(getattr(run, "meta", {}).get("preset", "")) == "quick" else "paper"
    console.print(f"paper and consequence claims passed: {o.passed}/{o.total}{extra}{more} ({scale} scale)",
                  markup=False, soft_wrap=True)  # fmt: skip
    console.print(f"run directory: {run.path}", markup=False, soft_wrap=True)


def _verdict(c: Any) -> str:
    from ssldyn.contract.claims import verdict_of

    return verdict_of(c)[1]


def _measured_cell(c: Any) -> str:
    """The statistic with its interval, and the control's value where one was measured."""
    text = c.measured_text() if hasattr(c, "measured_text") else _fmt_measured(c.measured)
    if getattr(c, "control_values", ()):
        text += f"; control {_fmt_measured(c.control_value)}"
    return text


def _fmt_measured(value: Any) -> str:
    """Measured values with a readable number of digits (lists and floats)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt_measured(v) for v in value) + "]"
    return str(value)


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clean line and exit code 2 for user mistakes."""
    try:
        from ssldyn.contract.threads import threads_from_env

        threads_from_env()  # a bad SSLDYN_THREADS is one error line before any command runs
        rv = typer.main.get_command(app).main(args=argv, prog_name="ssldyn", standalone_mode=False)
    except UserError as e:
        err_console.print(f"error: {e}", markup=False, soft_wrap=True)
        sys.exit(2)
    except _USAGE_ERROR as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # plain `ssldyn`: the help, not an error
            console.print(_click_message(e), markup=False, soft_wrap=True)
            sys.exit(0)
        err_console.print(f"error: {_click_message(e)}", markup=False, soft_wrap=True)
        sys.exit(2)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("interrupted; finished runs are kept — run the same command again to resume")
        sys.exit(130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except _CLICK_EXCEPTION as e:  # e.g. a file option that cannot be opened
        err_console.print(f"error: {_click_message(e)}", markup=False, soft_wrap=True)
        sys.exit(int(getattr(e, "exit_code", 1)))
    except Exception as e:  # an internal failure: one line here, the traceback in a log file
        import errno

        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT):
            from ssldyn.lab.store import StoreWriteError  # a full disk or a read-only folder: say which

            err_console.print(f"error: {StoreWriteError(e.filename or '?', e)}", markup=False, soft_wrap=True)
            sys.exit(1)
        import tempfile
        import traceback

        from ssldyn.lab.runner import format_exception_line

        with tempfile.NamedTemporaryFile("w", prefix="ssldyn-crash-", suffix=".log", delete=False) as fh:
            traceback.print_exc(file=fh)
        err_console.print(
            f"error (internal): {format_exception_line(e)}; traceback in {fh.name}", markup=False, soft_wrap=True
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
