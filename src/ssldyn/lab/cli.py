"""The ``ssldyn`` command line (typer + rich).

Commands: ``list``, ``show EXP``, ``run EXP``, ``reproduce``, ``report [DIR]``.
User mistakes print one ``error:`` line and exit with code 2, without a traceback.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click
import typer
from rich.console import Console
from rich.table import Table

from ssldyn.lab.errors import UserError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="ssldyn: learning dynamics of self-supervised learning.",
)
console = Console()
err_console = Console(stderr=True)

EXECUTORS = ("local", "ray")


def _click_classes(name: str) -> tuple[type, ...]:
    """The click exception class ``name`` from click and from typer's vendored copy."""
    found = [getattr(click.exceptions, name)]
    for mod in ("typer._click.exceptions", "typer.exceptions"):  # newer typer vendors click
        try:
            cls = getattr(__import__(mod, fromlist=[name]), name)
        except (ImportError, AttributeError):
            continue
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


@app.command("list")
def list_cmd(paper: str | None = typer.Option(None, help="only this paper")) -> None:
    """List the registered experiments."""
    from ssldyn.lab.registry import all_experiments

    table = Table(title="ssldyn experiments")
    for col in ("experiment", "paper", "figure / section", "what it shows", "quick", "full"):
        table.add_column(col, overflow="fold", no_wrap=col == "experiment")
    for e in all_experiments(paper):
        q, f = e.est_seconds
        table.add_row(e.name, e.paper, e.figure, e.description, _fmt_s(q), _fmt_s(f))
    console.print(table)


@app.command("show")
def show_cmd(experiment: str) -> None:
    """Show an experiment's config schema, paper defaults and quick preset."""
    from ssldyn.lab.config import config_schema_rows
    from ssldyn.lab.registry import get_experiment

    e = get_experiment(experiment)
    console.print(f"[bold]{e.name}[/bold] — {e.figure}\n{e.description}\n")
    if e.__doc__:
        console.print(e.__doc__.strip() + "\n", markup=False, highlight=False)
    table = Table(title="config (defaults are the paper's settings)")
    for col in ("key", "type", "default", "quick", "description"):
        table.add_column(col, overflow="fold", no_wrap=col == "key")
    quick = e.quick_config().model_dump(mode="json")
    for key, tname, default, desc in config_schema_rows(e.Config):
        q = quick
        for part in key.split("."):
            q = q.get(part) if isinstance(q, dict) else None
        import json

        qs = json.dumps(q, default=str)
        table.add_row(key, tname, default, "" if qs == default else qs, desc)
    console.print(table)


@app.command("run")
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
    seeds: int | None = typer.Option(None, help="seeds per claim (default 3 with --quick, 5 at paper scale)"),
    out: str = typer.Option("ssldyn-runs", help="output directory (run store)"),
    device: str = typer.Option("cpu", help="cpu or cuda"),
    executor: str = typer.Option("local", help="local (in-process) or ray"),
    address: str | None = typer.Option(None, help="Ray cluster address (default: start a local Ray)"),
    max_retries: int = typer.Option(2, "--max-retries", help="Ray: retries of a failed task"),
    force: bool = typer.Option(False, "--force", help="recompute even if a finished run exists"),
    yes: bool = typer.Option(False, "--yes", help="run a grid larger than 200 points"),
    tensorboard: bool = typer.Option(False, "--tensorboard", help="also write trajectories as TensorBoard scalars"),
    workers: int | None = typer.Option(
        None, "--workers", help="worker processes for a run's tasks (default: the CPU cores)"
    ),
) -> None:
    """Run one experiment, a sweep or several seeds (finished runs come from the store)."""
    from ssldyn.lab.runner import plan_run
    from ssldyn.lab.sweep import expand_grid, nest

    _check_executor(executor)
    base = _parse_sets(set_)
    grid = expand_grid(sweep, limit=None if yes else 200)
    specs, invalid = [], []
    for point in grid:
        try:
            specs.append(plan_run(experiment, quick=quick, config_file=config, sets=_merge(base, nest(point)),
                                  seed=seed, seeds=seeds, device=device))  # fmt: skip
        except UserError as e:
            if len(grid) == 1:
                raise
            invalid.append(f"{', '.join(f'{k}={v}' for k, v in point.items())}: {e}")
    if len(grid) > 1:
        err_console.print(f"grid: {len(grid)} points × {len(specs[0].seeds) if specs else 0} seeds"
                          + (f"; {len(invalid)} invalid, skipped:" if invalid else ""),
                          markup=False, highlight=False, soft_wrap=True)  # fmt: skip
        for line in invalid:
            err_console.print(f"  invalid point {line}", markup=False, highlight=False, soft_wrap=True)
        if not specs:
            raise UserError(f"--sweep: no valid grid point ({len(invalid)} invalid)")
    items = _execute(specs, out, executor, force, address, max_retries, title=experiment, workers=workers)
    for it in items:
        if it.note:
            err_console.print(f"note: {it.note}", markup=False, highlight=False, soft_wrap=True)
    from ssldyn.lab.summary import after_runs, sweep_summary

    if sweep and specs:
        from ssldyn.lab.sweep import parse_sweep

        sweep_summary(console, out, specs, [parse_sweep(s)[0] for s in sweep], items)
    elif len(items) == 1 and items[0].run is not None:
        _print_run(items[0])
    else:
        _print_items(items, title=f"{experiment}: {len(items)} runs")
    after_runs(console, out, items, tensorboard=tensorboard)
    if any(it.status == "failed" for it in items) or invalid:
        raise typer.Exit(1)


@app.command("reproduce")
def reproduce_cmd(
    quick: bool = typer.Option(False, "--quick", help="quick presets: the whole set in minutes"),
    paper: str | None = typer.Option(None, help="only this paper (variational, nonlinearity, grassmann)"),
    out: str = typer.Option("ssldyn-runs", help="output directory (run store)"),
    seed: int = typer.Option(0, help="first seed: each run uses seeds seed..seed+N-1"),
    seeds: int | None = typer.Option(None, help="seeds per claim (default 3 with --quick, 5 at paper scale)"),
    device: str = typer.Option("cpu", help="cpu or cuda"),
    executor: str = typer.Option("local", help="local (in-process) or ray"),
    address: str | None = typer.Option(None, help="Ray cluster address (default: start a local Ray)"),
    max_retries: int = typer.Option(2, "--max-retries", help="Ray: retries of a failed task"),
    force: bool = typer.Option(False, "--force"),
    only: list[str] | None = typer.Option(None, "--only", help="run only these experiments (repeatable)"),
    tensorboard: bool = typer.Option(False, "--tensorboard", help="also write trajectories as TensorBoard scalars"),
    workers: int | None = typer.Option(
        None, "--workers", help="worker processes for a run's tasks (default: the CPU cores)"
    ),
) -> None:
    """Run every registered experiment (a sweep over experiments) and write the HTML report."""
    from ssldyn.lab.registry import all_experiments, get_experiment
    from ssldyn.lab.report import build_report
    from ssldyn.lab.runner import plan_run

    _check_executor(executor)
    exps = [get_experiment(n) for n in only] if only else all_experiments(paper)
    specs = [plan_run(e.name, quick=quick, seed=seed, seeds=seeds, device=device) for e in exps]
    t0 = time.perf_counter()
    items = _execute(specs, out, executor, force, address, max_retries, title="reproduce", workers=workers)
    report = build_report(out)
    _print_scores(out)
    _print_items(items, title=f"ssldyn reproduce{' --quick' if quick else ''} ({time.perf_counter() - t0:.0f} s)")
    console.print(f"report: {report}")
    from ssldyn.lab.summary import after_runs

    after_runs(console, out, items, tensorboard=tensorboard)
    if any(it.status == "failed" for it in items):
        raise typer.Exit(1)


def _parse_sets(pairs: list[str] | None) -> dict:
    from ssldyn.lab.config import parse_sets

    return parse_sets(pairs)


def _merge(a: dict, b: dict) -> dict:
    from ssldyn.lab.config import deep_merge

    return deep_merge(a, b)


def _execute(specs, out, executor, force, address, max_retries, title, workers=None):  # noqa: ANN001, ANN202
    """Run specs with a progress bar; on Ctrl-C say what finished and how to resume."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ssldyn.lab.executors import execute
    from ssldyn.lab.store import RunStore

    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            return execute(
                specs,
                out,
                executor=executor,
                force=force,
                address=address,
                max_retries=max_retries,
                progress=bar,
                title=title,
                workers=workers,
            )
    except KeyboardInterrupt:
        store = RunStore(out)
        done = [s.label for s in specs if store.get(s.experiment, s.digest) is not None]
        err_console.print(
            f"interrupted: {len(done)}/{len(specs)} runs are finished and kept in {out}; "
            "run the same command again to resume (finished runs are not recomputed)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(130)


def _print_items(items, title: str) -> None:  # noqa: ANN001
    table = Table(title=title)
    for col in ("run", "status", "time", "claims", "error / run directory"):
        table.add_column(col, overflow="fold", no_wrap=col == "run")
    tp = tn = 0
    for it in items:
        cl = it.run.claims if it.run is not None else []
        p, n = sum(c.passed for c in cl), len(cl)
        tp, tn = tp + p, tn + n
        style = "green" if it.status != "failed" and p == n else "red"
        t = "cached" if it.status == "cached" else f"{it.seconds:.1f} s"
        where = it.error if it.status == "failed" else str(it.run.path)
        table.add_row(
            it.spec.experiment + f" ({it.spec.describe()})",
            it.status,
            t,
            f"[{style}]{p}/{n}[/{style}]",
            where,
        )
    console.print(table)
    n_failed = sum(it.status == "failed" for it in items)
    console.print(f"claims passed: {tp}/{tn} · runs failed: {n_failed}")


@app.command("report")
def report_cmd(directory: Path = typer.Argument(Path("ssldyn-runs"), help="the run store directory")) -> None:
    """Build DIR/report/index.html from the finished runs in DIR."""
    from ssldyn.lab.report import build_report

    if not directory.is_dir():
        raise UserError(f"report directory {str(directory)!r} does not exist")
    console.print(f"report: {build_report(directory)}")


def _print_scores(out) -> None:  # noqa: ANN001
    """One table per paper: its results × status, from the paper-default runs in ``out``."""
    from ssldyn.lab.registry import PAPERS, all_experiments
    from ssldyn.lab.scores import canonical_runs, paper_scores
    from ssldyn.lab.store import RunStore

    canon = canonical_runs(RunStore(out).finished())
    scores = paper_scores([e for e in all_experiments() if e.name in canon], canon)
    for paper in PAPERS:
        sc = scores.get(paper)
        if sc is None:
            continue
        table = Table(title=f"{paper}: {sc.passed}/{sc.total} paper claims pass · sanity {sc.sanity_passed}/"
                      f"{sc.sanity_total}")  # fmt: skip
        for col in ("result", "status", "claims"):
            table.add_column(col)
        styles = {"reproduced": "green", "partly": "yellow", "does not reproduce": "red"}
        for r in sc.rows:
            st = styles.get(r.status, "dim")
            table.add_row(r.result, f"[{st}]{r.status}[/{st}]", f"{r.passed}/{r.total}")
        console.print(table)


def _check_executor(executor: str) -> None:
    if executor not in EXECUTORS:
        raise UserError(f"--executor {executor!r}: allowed values are {', '.join(EXECUTORS)}")


def _fmt_s(s: float) -> str:
    return f"~{s:.0f} s" if s < 120 else f"~{s / 60:.0f} min"


def _print_run(o) -> None:  # noqa: ANN001
    run = o.run
    claims = run.claims
    cached = o.status == "cached"
    table = Table(title=f"{run.experiment} — {'from store (cached)' if cached else f'{o.seconds:.1f} s'}")
    for col in ("", "claim", "paper", "measured", "expected"):
        table.add_column(col, overflow="fold")
    for c in claims:
        table.add_row(
            "[green]PASS[/green]" if c.passed else "[red]FAIL[/red]",
            c.statement,
            c.location,
            c.measured_text(),
            c.expected,
        )
    console.print(table)
    console.print(f"claims passed: {sum(c.passed for c in claims)}/{len(claims)} · run directory: {run.path}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: one clean line and exit code 2 for user mistakes."""
    try:
        raw = os.environ.get("SSLDYN_THREADS", "").strip()
        if raw and (not raw.isdigit() or not 1 <= int(raw) <= 4096):
            raise UserError(f"SSLDYN_THREADS={raw[:40]!r}: must be an integer from 1 to 4096 (torch threads)")
        if raw:  # applied when torch is imported for a run (no torch import for list/show/--help)
            from ssldyn.lab.context import set_threads

            set_threads()
        rv = typer.main.get_command(app).main(args=argv, prog_name="ssldyn", standalone_mode=False)
    except UserError as e:
        err_console.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except _click_classes("UsageError") as e:
        err_console.print(f"error: {e.format_message()}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except (*_click_classes("Abort"), KeyboardInterrupt):
        err_console.print("interrupted; finished runs are kept — run the same command again to resume")
        sys.exit(130)
    except _click_classes("Exit") as e:
        sys.exit(e.exit_code)
    except Exception as e:  # an internal failure: one line here, the traceback in a log file
        import tempfile
        import traceback

        from ssldyn.lab.runner import format_exception_line

        with tempfile.NamedTemporaryFile("w", prefix="ssldyn-crash-", suffix=".log", delete=False) as fh:
            traceback.print_exc(file=fh)
        err_console.print(
            f"error (internal): {format_exception_line(e)}; traceback in {fh.name}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
