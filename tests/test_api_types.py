"""API polish (issue 29, item 5): a string option of the library is typed with its choices (``Literal``).

A parameter of a public library function (or ``__init__``) whose default is a string names one of a
fixed set of choices; its annotation says which (``Literal[...]`` or an alias of one), so that an IDE
completes it and pyright catches a typo. Only parameters whose value is open-ended are exempt, with
the reason. Runtime checks stay (``check_choice``): configs and the CLI pass plain strings.
"""

import ast
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest

import ssldyn.contract.claims
import ssldyn.data.images
import ssldyn.dynamics.q_ode
import ssldyn.lab.executors
import ssldyn.lab.tasks
import ssldyn.models.stiefel
import ssldyn.models.two_layer
import ssldyn.objectives._common
import ssldyn.objectives.grassmann
from ssldyn.objectives.info_nce import NEGATIVES, Negatives  # the module name is shadowed by the function

SRC = Path(ssldyn.data.images.__file__).resolve().parents[1]
LIBRARY = ("data", "models", "objectives", "kernels", "probes", "viz", "dynamics")
#: parameters with a string default whose values are open-ended, not a choice
OPEN = {
    "name", "what", "who", "title", "prefix",
    "guard_what",  # engine.run: the word used in the guard's error message
}  # fmt: skip


def _defs(body: list[ast.stmt]) -> Iterator[ast.FunctionDef]:
    """The functions of a module or class body and the methods of its public classes (not closures inside
    functions)."""
    for node in body:
        if isinstance(node, ast.FunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _defs(node.body)
        elif isinstance(node, ast.If):  # ``if TYPE_CHECKING:`` / version branches
            yield from _defs(node.body + node.orelse)


def _library_functions() -> Iterator[tuple[str, ast.FunctionDef]]:
    """(path relative to the package, node) of every public function, method and ``__init__`` of the library
    layers."""
    for layer in LIBRARY:
        for path in sorted((SRC / layer).rglob("*.py")):
            for node in _defs(ast.parse(path.read_text()).body):
                if not node.name.startswith("_") or node.name == "__init__":
                    yield str(path.relative_to(SRC)), node


def _string_options() -> list[tuple[str, str, str]]:
    """(file:line function, parameter, annotation) of every library parameter with a non-empty string default."""
    out = []
    for rel, node in _library_functions():
        a = node.args
        params = a.posonlyargs + a.args + a.kwonlyargs
        defaults = [None] * (len(a.posonlyargs + a.args) - len(a.defaults)) + list(a.defaults)
        defaults += list(a.kw_defaults)
        for p, d in zip(params, defaults):
            if isinstance(d, ast.Constant) and isinstance(d.value, str) and d.value and p.arg not in OPEN:
                out.append(
                    (f"{rel}:{node.lineno} {node.name}", p.arg, ast.unparse(p.annotation) if p.annotation else "")
                )
    return out


def test_the_scan_sees_the_library_options():
    names = {(w.split()[-1], p) for w, p, _ in _string_options()}
    assert {("info_nce", "similarity"), ("empirical_ntk", "mode"), ("output_gap", "reduce")} <= names


def test_every_string_option_is_typed_with_its_choices():
    untyped = [f"{w}({p}: {ann or 'no annotation'})" for w, p, ann in _string_options() if ann == "str" or not ann]
    assert not untyped, "string options without Literal types: " + ", ".join(untyped)


@pytest.mark.parametrize(
    ("alias", "choices"),
    [
        (ssldyn.objectives._common.Similarity, ssldyn.objectives._common.SIMILARITIES),
        (Negatives, NEGATIVES),
        (ssldyn.objectives.grassmann.Reduction, ssldyn.objectives.grassmann.REDUCTIONS),
        (ssldyn.models.stiefel.Retraction, ssldyn.models.stiefel.RETRACTIONS),
        (ssldyn.models.two_layer.Regime, ssldyn.models.two_layer.REGIMES),
        (ssldyn.data.images.ImageSource, ssldyn.data.images.IMAGE_SOURCES),
        (ssldyn.models.two_layer.WeightInit, ssldyn.models.two_layer.WEIGHT_INITS),
        (ssldyn.dynamics.q_ode.AdaptiveMethod, ssldyn.dynamics.q_ode.ADAPTIVE_METHODS),
        (ssldyn.contract.claims.ClaimKind, ssldyn.contract.claims.KINDS),
        (ssldyn.contract.claims.Statistic, ssldyn.contract.claims.STATISTICS),
        (ssldyn.contract.claims.ClaimStatus, ssldyn.contract.claims.STATUSES),
        (ssldyn.lab.executors.Executor, ssldyn.lab.executors.EXECUTORS),
        (ssldyn.lab.tasks.TaskExecutor, ssldyn.lab.tasks.TASK_EXECUTORS),
    ],
)
def test_runtime_choices_are_the_literal_alias(alias, choices):
    """One source of truth: the tuple the runtime check uses is the alias's arguments, in order."""
    assert tuple(choices) == typing.get_args(alias)


def test_a_bad_choice_is_one_error_naming_the_allowed_values():
    import torch

    from ssldyn.kernels import empirical_ntk
    from ssldyn.objectives import info_nce

    z = torch.randn(4, 3)
    with pytest.raises(ValueError, match="similarity 'cos': allowed values are 'cosine', 'sqdist', 'dot'"):
        info_nce(z, z, 0.5, similarity="cos")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="mode 'block': allowed values are 'full', 'trace', 'diagonal'"):
        empirical_ntk(torch.nn.Linear(3, 2), None, z, mode="block")  # pyright: ignore[reportArgumentType]


#: where randomness comes in positionally on purpose: the call protocols ``augment(x, g)`` and
#: ``init_member(e, g)`` (a positional generator is the contract), and a token source whose seed is
#: its identity (required, ``TokenGenerator(spec, seed)``)
RANDOMNESS_PROTOCOLS = {"__call__", "init_member", "augment"}
RANDOMNESS_IDENTITY = {("data/tokens.py", "__init__")}


def _positional_randomness() -> list[str]:
    """``file:line function(param)`` of every library parameter named ``generator`` or ``seed`` that can be
    given positionally (the one idiom is keyword-only: ``generator=`` for torch draws, ``seed=`` for numpy /
    scikit-learn ones)."""
    out = []
    for rel, node in _library_functions():
        if node.name in RANDOMNESS_PROTOCOLS or (rel, node.name) in RANDOMNESS_IDENTITY:
            continue
        for p in node.args.posonlyargs + node.args.args:
            if p.arg in ("generator", "seed"):
                out.append(f"{rel}:{node.lineno} {node.name}({p.arg})")
    return out


def test_randomness_is_keyword_only():
    assert not _positional_randomness(), "positional generator/seed: " + ", ".join(_positional_randomness())


#: parameters that are data, not hyperparameters: they may come positionally after the inputs
DATA = {"x2", "x_pos", "z1", "z2", "weights", "a_pos", "b", "b_pos", "alpha", "labels", "B", "filter_mask", "root"}
#: where two or more defaulted options stay positional on purpose, with the reason
POSITIONAL_OPTIONS = {
    ("data/images.py", "to"): "torch's own idiom, ``.to(device, dtype)``",
    ("data/latent.py", "random"): "the model's sizes K, d, C, P (Sec. 3), not options",
    ("models/two_layer.py", "__init__"): "``TwoLayerNet(d, h, z, activation, regime)`` is the model of eq. (8)",
    ("viz/common.py", "new_figure"): "``(ncols, nrows)``, the grid's shape, as in ``plt.subplots``",
}


def _positional_options() -> list[str]:
    """``file:line function(params)`` of every library function whose defaulted positional parameters hold
    ``dtype``/``device`` or more than one option (hyperparameter) that is not data."""
    out = []
    for rel, node in _library_functions():
        if (rel, node.name) in POSITIONAL_OPTIONS:
            continue
        params = node.args.posonlyargs + node.args.args
        n_def = len(node.args.defaults)
        defaulted = [p.arg for p in params[len(params) - n_def :]] if n_def else []
        options = [p for p in defaulted if p not in DATA]
        if any(p in ("dtype", "device") for p in options) or len(options) > 1:
            out.append(f"{rel}:{node.lineno} {node.name}({', '.join(options)})")
    return out


def test_options_are_keyword_only():
    """One positional option at most (``info_nce(z1, z2, τ)``); the rest, and ``dtype``/``device``, keyword-only:
    ``vicreg_loss(z1, z2, 1.0, 2.0, 3.0)`` could not say which coefficient is which."""
    assert not _positional_options(), "positional options: " + ", ".join(_positional_options())


def test_the_option_scan_sees_a_positional_option(tmp_path, monkeypatch):
    """The scan is not vacuous: a function with two positional options is reported."""
    for layer in LIBRARY:
        (tmp_path / layer).mkdir()
    (tmp_path / "probes" / "x.py").write_text("def f(z, k=1, metric='cosine', *, seed=0):\n    pass\n")
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    assert _positional_options() == ["probes/x.py:1 f(k, metric)"]


def _unannotated() -> list[str]:
    """``file:line function(params)`` of every public library function with a parameter that has no annotation;
    the ``(ctx, *inputs)`` hooks of a ``torch.autograd.Function`` (first parameter ``ctx``) follow torch's idiom."""
    out = []
    for rel, node in _library_functions():
        a = node.args
        params = [p for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
        if params and params[0].arg == "ctx":
            continue
        missing = [p.arg for p in params if p.annotation is None]
        if missing:
            out.append(f"{rel}:{node.lineno} {node.name}({', '.join(missing)})")
    return out


def test_library_parameters_are_annotated():
    """Every parameter of the library's public functions says what it takes (``ArrayLike`` for a probe's array
    input: a tensor or anything ``np.asarray`` reads), so that the docs and pyright show it."""
    assert not _unannotated(), "parameters without annotation: " + ", ".join(_unannotated())


def test_the_annotation_scan_sees_a_missing_annotation(tmp_path, monkeypatch):
    """The scan is not vacuous: an unannotated parameter is reported; a closure and an autograd hook are not."""
    for layer in LIBRARY:
        (tmp_path / layer).mkdir()
    (tmp_path / "probes" / "x.py").write_text(
        "def f(z, k: int = 1):\n    def g(y):\n        return y\n\n"
        "class F:\n    @staticmethod\n    def forward(ctx, x):\n        return x\n"
    )
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    assert _unannotated() == ["probes/x.py:1 f(z)"]
