"""Package-level contracts of ssldyn.objectives: exports, docstrings, one-line ValueErrors."""

import inspect

import pytest
import torch

import ssldyn.objectives as obj

TWO_VIEW_LOSSES = [
    obj.info_nce,
    obj.generalized_contrastive_loss,
    obj.quadratic_contrastive_loss,
    obj.vicreg_loss,
    obj.byol_loss,
    obj.negative_cosine,
    obj.spectral_contrastive_loss,
    obj.alpha_cl_energy,
    obj.contrastive_covariance,
    obj.non_contrastive,
]


def test_all_public_names_are_exported_and_documented():
    assert obj.__doc__.startswith("ssldyn.objectives")
    for name in obj.__all__:
        thing = getattr(obj, name)
        doc = inspect.getdoc(thing) or ""
        assert doc, f"{name} has no docstring"
    for fn in TWO_VIEW_LOSSES + [obj.latent_measure_nt_xent, obj.trace_loss, obj.contrast_matrix]:
        doc = inspect.getdoc(fn)
        assert "(N, d)" in doc or "(n, d)" in doc or "(N, p)" in doc or "(n, z)" in doc or "(h, d)" in doc, fn.__name__
        assert any(ref in doc for ref in ("eq.", "Prop.", "et al.", "Lemma", "Sec.")), fn.__name__


@pytest.mark.parametrize("fn", TWO_VIEW_LOSSES, ids=lambda f: f.__name__)
def test_bad_inputs_raise_one_clear_value_error(fn):
    z = torch.randn(4, 3, dtype=torch.float64)
    cases = [
        ((z, z[:3]), "shape"),
        ((z[0], z[0]), "at least 2 dimensions"),
        ((z.long(), z.long()), "floating-point"),
        (([[1.0]], z), "torch.Tensor"),
    ]
    for args, match in cases:
        with pytest.raises(ValueError, match=match) as info:
            fn(*args)
        msg = str(info.value)
        assert "\n" not in msg and msg.split(":")[0] == fn.__name__


@pytest.mark.parametrize(
    "make",
    [
        lambda t: obj.InfoNCE(t),
        lambda t: obj.GeneralizedContrastiveLoss(temperature=t),
        lambda t: obj.QuadraticContrastiveLoss(t),
        lambda t: obj.LatentMeasureNTXent(t),
    ],
)
@pytest.mark.parametrize("bad", [0.0, -0.5, float("inf"), "warm", True])
def test_modules_validate_temperature_at_construction(make, bad):
    with pytest.raises(ValueError, match="temperature"):
        make(bad)


def test_modules_are_parameter_free_nn_modules():
    for mod in (obj.InfoNCE(), obj.VICRegLoss(), obj.TraceLoss(), obj.AlphaCLEnergy(), obj.SpectralContrastiveLoss()):
        assert isinstance(mod, torch.nn.Module) and not list(mod.parameters())
