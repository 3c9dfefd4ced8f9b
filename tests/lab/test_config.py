import pytest

from ssldyn.contract.config import build_config, load_config_file, parse_sets
from ssldyn.lab import UserError
from tests.lab.toy import ToyConfig


def test_parse_sets_nested_json_and_strings():
    got = parse_sets(["optim.lr=0.5", "n=3", "label=hello world", "xs=[1, 2.5]", "flag=true", "y=1e-3"])
    assert got == {"optim": {"lr": 0.5}, "n": 3, "label": "hello world", "xs": [1, 2.5], "flag": True, "y": 1e-3}


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1"])
def test_parse_sets_rejects_malformed(bad):
    with pytest.raises(UserError, match="expected key=value|empty key"):
        parse_sets([bad])


def test_a_dotted_key_under_a_value_is_one_error_in_sets_and_sweeps():
    """--set and --sweep nest their dotted keys with one helper (set_path): "a=1" then "a.b=2" is refused by both
    (the sweep's copy failed with a TypeError)."""
    from ssldyn.lab.sweep import nest

    assert nest({"optim.lr": 0.1, "optim.momentum": 0.9, "n": 3}) == {"optim": {"lr": 0.1, "momentum": 0.9}, "n": 3}
    with pytest.raises(UserError, match=r"^--set 'optim.lr=0.1': 'optim' was already set to a value$"):
        parse_sets(["optim=3", "optim.lr=0.1"])
    with pytest.raises(UserError, match=r"^--sweep 'optim.lr': 'optim' was already set to a value$"):
        nest({"optim": 3, "optim.lr": 0.1})


def test_flatten_is_nests_inverse_and_names_empty_sections_only_when_asked():
    """flatten (the run store's config columns, --sweep's overlap check with --config) undoes nest key by key; an
    empty section is a key of its own only with empty_leaf (the overlap check: "optim: {}" in a file still names
    optim)."""
    from ssldyn.lab.sweep import flatten, nest

    tree = {"optim": {"lr": 0.1, "sched": {"kind": "cos"}}, "n": 3, "taus": [0.1, 0.2], "extra": {}}
    flat = dict(flatten(tree))
    assert flat == {"optim.lr": 0.1, "optim.sched.kind": "cos", "n": 3, "taus": [0.1, 0.2]}
    assert nest(flat) == {k: v for k, v in tree.items() if k != "extra"}
    assert dict(flatten(tree, empty_leaf=True)) == {**flat, "extra": {}}
    assert list(flatten({"a": {"b": {}}}, empty_leaf=True)) == [("a.b", {})]


def test_build_config_layers_and_validation():
    cfg = build_config(ToyConfig, {"n": 4}, parse_sets(["optim.lr=0.25"]))
    assert (cfg.n, cfg.optim.lr, cfg.tau) == (4, 0.25, 0.5)
    with pytest.raises(UserError) as e:
        build_config(ToyConfig, {"tua": 1})
    msg = str(e.value)
    assert "unknown config key 'tua'" in msg and "did you mean 'tau'" in msg and "\n" not in msg
    with pytest.raises(UserError, match=r"invalid value for 'tau': -1: Input should be greater than 0"):
        build_config(ToyConfig, {"tau": -1})
    with pytest.raises(UserError, match=r"invalid value for 'optim.lr'"):
        build_config(ToyConfig, parse_sets(["optim.lr=zero"]))
    with pytest.raises(UserError, match=r"unknown config key 'optim.momentum'.*allowed keys: lr"):
        build_config(ToyConfig, parse_sets(["optim.momentum=0.9"]))


def test_config_file(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("n: 5\noptim:\n  lr: 0.3\n")
    assert build_config(ToyConfig, load_config_file(p)).optim.lr == 0.3
    p.write_text("- a\n- b\n")
    with pytest.raises(UserError, match="expected a mapping"):
        load_config_file(p)
    p.write_text("a: [1, 2\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_config_file(p)
    with pytest.raises(UserError, match="file not found"):
        load_config_file(tmp_path / "missing.yaml")
    p.write_text("!!python/object/apply:os.system ['echo hi']\n")  # safe_load refuses code
    with pytest.raises(UserError, match="not valid YAML"):
        load_config_file(p)


def test_setting_one_nested_key_keeps_the_parents_defaults_of_the_others():
    """pydantic fills a partial nested dict from the nested class's own defaults: `--set standin_simclr.lr=0.002`
    on variational.fig1 also doubled its SimCLR steps (1500 -> 3000, SimCLRRunConfig's own default) and
    `--set cifar_simclr.steps=...` turned on rotation and noise (10.0, 0.05). The merge now starts from cls()."""
    from ssldyn.experiments.variational.fig1 import Fig1Config
    from ssldyn.lab.runner import plan_run

    default = Fig1Config()
    cfg = build_config(Fig1Config, {"cifar_simclr": {"steps": 5}}, {"standin_simclr": {"lr": 0.002}})
    assert cfg.cifar_simclr.steps == 5 and cfg.standin_simclr.lr == 0.002
    assert cfg.cifar_simclr.model_dump() == {**default.cifar_simclr.model_dump(), "steps": 5}
    assert cfg.standin_simclr.model_dump() == {**default.standin_simclr.model_dump(), "lr": 0.002}
    assert default.standin_simclr.steps != type(default.standin_simclr)().steps  # the case the test is about
    spec = plan_run("variational.fig1", sets=["standin_simclr.lr=0.002"])
    assert spec.overrides == {"standin_simclr.lr": 0.002}
