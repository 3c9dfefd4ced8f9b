"""The guide's own-experiment example (docs/guide/own-model.md) runs as written: loaded through
``SSLDYN_PLUGINS``, its claim passes and its negative control does not."""

from __future__ import annotations

import re
from pathlib import Path

from tests.lab.conftest import plugin_loaded

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "own-model.md"


def _example() -> str:
    text = GUIDE.read_text(encoding="utf-8")
    section = text.split("## Your own experiment", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S)
    assert block is not None, "the guide's own-experiment section has no python block"
    return block.group(1)


def test_the_guides_experiment_passes_and_its_control_fails(tmp_path, monkeypatch):
    (tmp_path / "my_spread.py").write_text(_example(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    from ssldyn.lab import run_experiment

    with plugin_loaded("my_spread"):
        outcome = run_experiment("variational.my-spread", quick=True, out=tmp_path / "runs")
    (claim,) = outcome.claims
    assert claim.id == "spreads" and claim.status == "pass"
    assert min(claim.values) > 0.5  # a real spread (about 1.3 nats at quick scale), not the 0.05 threshold
    assert claim.control_held is False and claim.control_value < 0  # alignment alone makes it less uniform
