"""The API site and the docstring examples: every ``>>>`` example in the package runs as a doctest,
every public module has an API page, grouped parameters are split for the docs, and (with mkdocs
installed) ``mkdocs build --strict`` passes."""

import doctest
import importlib
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted((SRC / "ssldyn").rglob("*.py")):
        if ">>> " in path.read_text(encoding="utf-8"):
            rel = path.relative_to(SRC).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            names.append(".".join(parts))
    return names


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name):
    mod = importlib.import_module(name)
    res = doctest.testmod(mod, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert res.attempted > 0
    assert res.failed == 0, f"{res.failed} of {res.attempted} doctest examples of {name} failed (run pytest -s to see)"


def test_there_are_docstring_examples_to_run():
    assert {"ssldyn.dynamics.ssl", "ssldyn.probes.rank", "ssldyn.kernels.closed_form"} <= set(_modules_with_examples())


def test_every_public_module_has_an_api_page():
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    hooks = _load("docs_hooks", ROOT / "docs" / "hooks.py")
    documented = {m for package in hooks.PACKAGES for m in hooks.public_modules(package)}
    documented |= {f"ssldyn.{p.replace('/', '.')}" for p in hooks.PACKAGES} | {
        f"ssldyn.{m}" for m in hooks.ROOT_MODULES
    }
    public = set()
    for info in pkgutil.walk_packages([str(SRC / "ssldyn")], prefix="ssldyn."):
        if not any(part.startswith("_") for part in info.name.split(".")) and info.name != "ssldyn.experiments":
            public.add(info.name)
    assert public - documented == set()


def test_grouped_parameters_are_split_for_the_docs():
    pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[docs]')")
    ext = _load("griffe_grouped_params", ROOT / "docs" / "griffe_grouped_params.py")
    doc = (
        "Loss.\n\n"
        "Args:\n"
        "    z1, z2: embeddings of the two views,\n"
        "        same shape.\n"
        "    temperature (float): τ > 0.\n"
        "\n"
        "Returns:\n"
        "    a, b: not parameters.\n"
    )
    want = (
        "Loss.\n\n"
        "Args:\n"
        "    z1: embeddings of the two views,\n"
        "        same shape.\n"
        "    z2: embeddings of the two views,\n"
        "        same shape.\n"
        "    temperature (float): τ > 0.\n"
        "\n"
        "Returns:\n"
        "    a, b: not parameters.\n"
    )
    assert ext.split_grouped(doc) == want


@pytest.mark.slow
def test_mkdocs_build_is_strict_clean(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings-python is not installed")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(SRC)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    page = (tmp_path / "site" / "api" / "dynamics" / "index.html").read_text(encoding="utf-8")
    assert "ssldyn.dynamics.ssl.train_ssl" in page
    for name, call in (
        ("monitor_simclr", "train_ssl"),
        ("ntk_function_space", "empirical_ntk"),
        ("alpha_cl_features", "power_iteration"),
    ):
        tutorial = (tmp_path / "site" / "tutorials" / name / "index.html").read_text(encoding="utf-8")
        assert call in tutorial and "--8&lt;--" not in tutorial  # the script's source is included (snippets)
