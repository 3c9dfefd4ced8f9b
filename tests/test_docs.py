"""The docs site and the docstring examples.

Every ``>>>`` example in the package runs as a doctest; every public module has its own API page;
grouped parameters are split and Sphinx roles become cross-references for the docs. With the
``docs`` extra, ``mkdocs build --strict`` builds the site once per session (or the tests read an
already built site from ``SSLDYN_DOCS_SITE``, as CI does after its own strict build) and the
built HTML is checked: no literal Sphinx role, one page per module, the user guide, the
tutorials as executed notebooks with their figures — also in headless Chromium (Playwright).
"""

import doctest
import importlib
import importlib.util
import os
import pkgutil
import re
import subprocess
import sys
import time
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
    assert {hooks.module_uri(m) for m in public if m.count(".") >= 2 and m != "ssldyn.experiments"} >= {
        "api/dynamics/ssl.md",
        "api/experiments/variational/fig5.md",
    }


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


def test_sphinx_roles_become_cross_references():
    griffe = pytest.importorskip("griffe", reason="griffe is not installed (pip install -e '.[docs]')")
    roles = _load("griffe_roles", ROOT / "docs" / "griffe_roles.py")
    pkg = griffe.load("ssldyn", search_paths=[str(SRC)])
    index = roles._index(pkg)
    dynamics = pkg["dynamics"]
    text = (
        "Uses :func:`train_ssl` and :class:`~ssldyn.dynamics.guards.LossGuard`; see :mod:`.monitors`, :func:`nope_x`."
    )
    out = roles.rewrite(text, pkg, dynamics, index)
    # train_ssl is re-exported by ssldyn.dynamics: the link goes to where it is documented
    assert '<autoref identifier="ssldyn.dynamics.ssl.train_ssl" optional>`train_ssl`</autoref>' in out
    assert '<autoref identifier="ssldyn.dynamics.guards.LossGuard" optional>`LossGuard`</autoref>' in out
    assert '<autoref identifier="ssldyn.dynamics.monitors" optional>`.monitors`</autoref>' in out
    assert "`nope_x`" in out and "nope_x</autoref>" not in out  # unknown: plain code
    assert not roles.ROLE.search(out)


# -- the built site ------------------------------------------------------------------------
ROLE_IN_HTML = re.compile(r":(?:py:)?(?:func|class|meth|mod|attr|data|exc|obj|const):")
GUIDE = ("install", "reproduce", "report", "sweeps", "results", "own-model", "gpu", "ray")
TUTORIALS = ("monitor_simclr", "ntk_function_space", "alpha_cl_features")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The built site: ``SSLDYN_DOCS_SITE`` when set (built by CI with ``mkdocs build --strict``), else built here."""
    given = os.environ.get("SSLDYN_DOCS_SITE")
    if given:
        assert (Path(given) / "index.html").is_file(), f"SSLDYN_DOCS_SITE={given} holds no built site"
        return Path(given)
    for mod, why in (
        ("mkdocs", "mkdocs"),
        ("mkdocstrings_handlers.python", "mkdocstrings-python"),
        ("mkdocs_jupyter", "mkdocs-jupyter"),
    ):
        pytest.importorskip(mod, reason=f"{why} is not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site") / "site"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # the kernels draw inline figures
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    env["NO_MKDOCS_2_WARNING"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"mkdocs build --strict: {time.perf_counter() - t0:.0f} s")
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


@pytest.mark.slow
def test_no_literal_sphinx_role_in_the_built_site(site):
    hits = []
    for path in [*_pages(site), site / "search" / "search_index.json"]:
        text = path.read_text(encoding="utf-8")
        hits += [
            f"{path.relative_to(site)}: …{text[max(0, m.start() - 60) : m.end() + 40]}…"
            for m in ROLE_IN_HTML.finditer(text)
        ]
    assert not hits, "\n".join(hits[:20])
    # the roles became links: LossGuard is named by a role in ssldyn.dynamics' docstring
    page = (site / "api" / "dynamics" / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<a[^>]+href="[^"]*guards/#ssldyn\.dynamics\.guards\.LossGuard"[^>]*>', page)


@pytest.mark.slow
def test_one_api_page_per_module(site):
    hooks = _load("docs_hooks", ROOT / "docs" / "hooks.py")
    for package in hooks.PACKAGES:
        index = (site / "api" / package / "index.html").read_text(encoding="utf-8")
        for mod in hooks.public_modules(package):
            page = site / hooks.module_uri(mod).removesuffix(".md") / "index.html"
            assert f'id="{mod}"' in page.read_text(encoding="utf-8"), mod
            assert f'id="{mod}.' not in index  # the package page lists its modules, it does not hold them
    ssl = (site / "api" / "dynamics" / "ssl" / "index.html").read_text(encoding="utf-8")
    assert 'id="ssldyn.dynamics.ssl.train_ssl"' in ssl


@pytest.mark.slow
def test_user_guide_and_architecture_pages(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    for name in GUIDE:
        assert (site / "guide" / name / "index.html").is_file(), name
        assert f'href="guide/{name}/"' in home  # in the navigation
    if (ROOT / "docs" / "architecture.md").is_file():
        assert (site / "architecture" / "index.html").is_file() and 'href="architecture/"' in home


@pytest.mark.slow
@pytest.mark.parametrize("name", TUTORIALS)
def test_tutorials_are_executed_notebooks_with_figures(site, name):
    page = (site / "tutorials" / name / "index.html").read_text(encoding="utf-8")
    assert "# %%" not in page  # cells, not the jupytext source
    assert page.count("jp-OutputArea-output") >= 3  # the cells' outputs
    assert re.search(r'<img[^>]+src="data:image/png;base64,', page)  # the figures
    assert "Traceback (most recent call last)" not in page
    assert not re.search(
        r'<div[^>]*data-mime-type="application/vnd.jupyter.stderr"', page
    )  # no error or warning output


@pytest.mark.slow
@pytest.mark.browser
def test_tutorial_page_shows_its_figures_in_chromium(site):
    from tests.lab.chromium import SKIP, chromium_page, images_loaded

    if SKIP:
        pytest.skip(SKIP)
    with chromium_page() as page:
        page.goto((site / "tutorials" / "ntk_function_space" / "index.html").resolve().as_uri())
        images_loaded(page)
        sizes = page.evaluate(
            "Array.from(document.querySelectorAll('.jp-OutputArea-output img'))"
            ".map(i => [i.naturalWidth, i.naturalHeight, i.getBoundingClientRect().height])"
        )
        assert len(sizes) >= 1
        assert all(w > 100 and h > 100 and shown > 50 for w, h, shown in sizes), sizes
        # the prose is rendered Markdown (headings), the code is highlighted
        assert page.evaluate("document.querySelectorAll('.jp-MarkdownOutput h2, .jp-RenderedMarkdown h2').length") >= 2
