"""The committed registry manifest (``ssldyn list``/``show`` without importing experiments)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ssldyn.errors import UserError
from ssldyn.lab import manifest
from ssldyn.lab.registry import all_experiments, get_experiment

ROOT = Path(__file__).resolve().parents[2]


def test_committed_manifest_is_up_to_date():
    committed = json.loads(manifest.MANIFEST_PATH.read_text(encoding="utf-8"))
    live = manifest.build()
    stale = sorted(
        {e["name"] for e in committed["experiments"]} ^ {e["name"] for e in live["experiments"]}
        | {a["name"] for a, b in zip(committed["experiments"], live["experiments"]) if a != b}
    )
    assert committed == live, (
        f"src/ssldyn/lab/manifest.json is stale (differs for: {', '.join(stale) or 'papers/format'}); "
        "regenerate it with: python -m ssldyn.lab.manifest --write"
    )


def test_manifest_entries_agree_with_the_live_classes():
    shipped = [e for e in all_experiments() if e.__module__.startswith("ssldyn.experiments.")]
    data = json.loads(manifest.MANIFEST_PATH.read_text(encoding="utf-8"))
    assert [e["name"] for e in data["experiments"]] == [e.name for e in shipped]
    for entry in data["experiments"]:
        cls = get_experiment(entry["name"])
        assert entry["defaults"] == cls.default_config().model_dump(mode="json")
        assert tuple(entry["est_seconds"]) == tuple(cls.est_seconds) and entry["figure"] == cls.figure
        keys = [r["key"] for r in entry["config"]]
        quick = cls.quick_config().model_dump(mode="json")
        for r in entry["config"]:  # the quick column is exactly where the quick preset differs
            node_d, node_q = entry["defaults"], quick
            for part in r["key"].split("."):
                node_d, node_q = node_d[part], node_q[part]
            assert (r["quick"] != "") == (node_d != node_q), (entry["name"], r["key"])
        assert len(keys) == len(set(keys))


def test_check_mode_reports_stale(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(manifest, "MANIFEST_PATH", tmp_path / "manifest.json")
    (tmp_path / "manifest.json").write_text("{}")
    assert manifest.main(["--check"]) == 1
    assert "python -m ssldyn.lab.manifest --write" in capsys.readouterr().out
    assert manifest.main(["--write"]) == 0 and manifest.main(["--check"]) == 0


def test_unknown_names_are_user_errors():
    with pytest.raises(UserError, match=r"unknown experiment 'grassmann.fig33'; did you mean grassmann.fig3"):
        manifest.find("grassmann.fig33")
    with pytest.raises(UserError, match="unknown paper 'physics'; allowed: grassmann, nonlinearity, variational"):
        manifest.experiments("physics")


def test_natural_order_within_a_paper():
    names = [e["name"] for e in manifest.experiments("grassmann") if e["name"].startswith("grassmann.fig")]
    assert names == sorted(names, key=lambda n: int(n.removeprefix("grassmann.fig")))


def test_without_a_manifest_the_live_registry_answers(tmp_path, monkeypatch):
    monkeypatch.setattr(manifest, "MANIFEST_PATH", tmp_path / "missing.json")
    manifest._committed.cache_clear()
    try:
        assert manifest.find("grassmann.fig3")["figure"] == get_experiment("grassmann.fig3").figure
    finally:
        manifest._committed.cache_clear()


def _cli(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k != "SSLDYN_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "ssldyn.lab.cli", *args], env=env, capture_output=True, text=True, timeout=300
    )


def test_plugins_are_listed_and_shown_live():
    env = {"SSLDYN_PLUGINS": "tests.lab.toy_plugin", "COLUMNS": "100"}
    listed = _cli(["list"], env)
    assert listed.returncode == 0, listed.stderr
    assert "variational.zz-kill-once" in listed.stdout and "grassmann.fig3" in listed.stdout
    shown = _cli(["show", "variational.zz-kill-once"], env)
    assert shown.returncode == 0, shown.stderr
    assert "file created on the first attempt" in shown.stdout and "float ≥ 0 · default 0.0" in shown.stdout
    bad = _cli(["list"], {"SSLDYN_PLUGINS": "no_such_plugin_module"})
    assert bad.returncode == 2 and bad.stderr.startswith("error: SSLDYN_PLUGINS: cannot import module")


def test_claim_entry_states_the_relation_at_defaults_and_quick_and_survives_a_broken_one():
    from types import SimpleNamespace

    from ssldyn.contract.claims import ClaimSpec, le

    spec = ClaimSpec("c", "s", "Fig. 1", "sanity", "r", lambda cfg: le(2 * 360.0 / cfg.n_grid), "method: grid")
    e = manifest.claim_entry(spec, SimpleNamespace(n_grid=7200), SimpleNamespace(n_grid=3600))
    assert (e["expected"], e["expected_quick"]) == ("<= 0.1", "<= 0.2")
    e = manifest.claim_entry(spec, SimpleNamespace(n_grid=7200), SimpleNamespace(n_grid=7200))
    assert (e["expected"], e["expected_quick"]) == ("<= 0.1", "")
    broken = ClaimSpec("b", "s", "Fig. 1", "sanity", "r", lambda cfg: le(cfg.tol), "method: tol")
    e = manifest.claim_entry(broken, SimpleNamespace(), SimpleNamespace())  # a plugin's relation that cannot be read
    assert (
        e["expected"].startswith("set by the config (not evaluable here: AttributeError") and e["expected_quick"] == ""
    )
