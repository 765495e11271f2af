"""deep_merge and the layered loading built on it. The function is looked up on the package inside each
test, so that every test reports its own result."""

import copy
import types
from pathlib import Path

import pytest

import layercfg
from layercfg import Config, load

DATA = Path(__file__).parent / "data"

BASE = {
    "service": "billing",
    "db": {"host": "db.internal", "port": 5432, "options": {"sslmode": "require", "tags": ["primary"]}},
    "features": ["invoices", "refunds"],
    "workers": 4,
}
OVERRIDE = {
    "db": {"port": 6432, "options": {"connect_timeout": 5, "tags": ["eu"]}},
    "features": ["refunds", "exports"],
    "debug": True,
}


def test_nested_mappings_are_merged():
    merged = layercfg.deep_merge(BASE, OVERRIDE)
    assert merged["db"] == {"host": "db.internal", "port": 6432,
                            "options": {"sslmode": "require", "connect_timeout": 5, "tags": ["eu"]}}
    assert merged["service"] == "billing" and merged["workers"] == 4 and merged["debug"] is True


def test_override_wins_for_values():
    assert layercfg.deep_merge({"a": 1, "b": "x"}, {"a": 2, "b": None}) == {"a": 2, "b": None}


def test_type_conflicts_take_the_override():
    assert layercfg.deep_merge({"db": {"host": "x"}}, {"db": "sqlite:///app.db"}) == {"db": "sqlite:///app.db"}
    assert layercfg.deep_merge({"db": "sqlite:///app.db"}, {"db": {"host": "x"}}) == {"db": {"host": "x"}}
    assert layercfg.deep_merge({"x": [1]}, {"x": {"a": 1}}, lists="append") == {"x": {"a": 1}}
    assert layercfg.deep_merge({"x": (1, 2)}, {"x": [3]}, lists="append") == {"x": [3]}


def test_lists_replaced_by_default():
    merged = layercfg.deep_merge(BASE, OVERRIDE)
    assert merged["features"] == ["refunds", "exports"]
    assert merged["db"]["options"]["tags"] == ["eu"]
    assert layercfg.deep_merge(BASE, OVERRIDE, lists="replace") == merged


def test_lists_append():
    merged = layercfg.deep_merge(BASE, OVERRIDE, lists="append")
    assert merged["features"] == ["invoices", "refunds", "refunds", "exports"]
    assert merged["db"]["options"]["tags"] == ["primary", "eu"]


def test_lists_unique_keeps_first_occurrences_in_order():
    merged = layercfg.deep_merge(BASE, OVERRIDE, lists="unique")
    assert merged["features"] == ["invoices", "refunds", "exports"]
    assert layercfg.deep_merge({"x": [3, 1, 3]}, {"x": [2, 1, 4, 2]}, lists="unique") == {"x": [3, 1, 2, 4]}


def test_lists_unique_with_unhashable_items():
    base = {"servers": [{"host": "a"}, {"host": "b"}]}
    override = {"servers": [{"host": "b"}, {"host": "c"}, ["x"]]}
    merged = layercfg.deep_merge(base, override, lists="unique")
    assert merged == {"servers": [{"host": "a"}, {"host": "b"}, {"host": "c"}, ["x"]]}


def test_key_only_in_one_side_is_kept():
    assert layercfg.deep_merge({"a": {"b": 1}}, {}) == {"a": {"b": 1}}
    assert layercfg.deep_merge({}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert layercfg.deep_merge({}, {}) == {}


def test_inputs_are_not_modified():
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    for lists in ("replace", "append", "unique"):
        layercfg.deep_merge(base, override, lists=lists)
    assert base == BASE and override == OVERRIDE


def test_result_shares_nothing_with_the_inputs():
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    base["only_base"] = {"nested": [1, {"deep": []}]}
    override["only_override"] = {"nested": [2]}
    for lists in ("replace", "append", "unique"):
        merged = layercfg.deep_merge(base, override, lists=lists)
        merged["db"]["options"]["tags"].append("changed")
        merged["features"].append("changed")
        merged["only_base"]["nested"][1]["deep"].append("changed")
        merged["only_override"]["nested"].append("changed")
        merged["db"]["host"] = "changed"
    assert base["db"] == BASE["db"] and base["features"] == BASE["features"]
    assert base["only_base"] == {"nested": [1, {"deep": []}]}
    assert override["db"] == OVERRIDE["db"] and override["features"] == OVERRIDE["features"]
    assert override["only_override"] == {"nested": [2]}


def test_unknown_list_strategy_raises():
    with pytest.raises(ValueError):
        layercfg.deep_merge({}, {}, lists="prepend")
    with pytest.raises(ValueError):
        layercfg.deep_merge({"x": [1]}, {"x": [2]}, lists="merge")


def test_any_mapping_is_accepted_and_the_result_is_plain():
    base = Config({"db": {"host": "a", "port": 1}})
    override = types.MappingProxyType({"db": types.MappingProxyType({"port": 2})})
    merged = layercfg.deep_merge(base, override)
    assert merged == {"db": {"host": "a", "port": 2}}
    assert type(merged) is dict and type(merged["db"]) is dict


def test_from_layers_merges_nested_sections():
    config = Config.from_layers({"db": {"host": "a", "port": 1}}, {"db": {"port": 2}}, {"db": {"user": "u"}})
    assert config == {"db": {"host": "a", "port": 2, "user": "u"}}


def test_from_layers_list_option():
    layers = ({"plugins": ["auth"]}, {"plugins": ["audit", "auth"]}, {"plugins": ["cache"]})
    assert Config.from_layers(*layers).get("plugins") == ["cache"]
    assert Config.from_layers(*layers, lists="append").get("plugins") == ["auth", "audit", "auth", "cache"]
    assert Config.from_layers(*layers, lists="unique").get("plugins") == ["auth", "audit", "cache"]


def test_config_merge_method():
    config = Config({"db": {"host": "a", "port": 1}, "tags": ["x"]})
    merged = config.merge({"db": {"port": 2}, "tags": ["y"]}, lists="append")
    assert isinstance(merged, Config)
    assert merged == {"db": {"host": "a", "port": 2}, "tags": ["x", "y"]}
    assert config == {"db": {"host": "a", "port": 1}, "tags": ["x"]}
    assert config.merge(Config({"db": {"host": "b"}})).get("db.host") == "b"


def test_environment_overrides_one_key_of_a_section():
    config = load(DATA / "base.json", environ={"APP__DB__PORT": "6432"})
    assert config.get("db.port") == 6432
    assert config.get("db.host") == "db.internal"
    assert config.get("db.options.sslmode") == "require"


def test_files_merge_and_list_option_reaches_load():
    config = load(DATA / "base.json", DATA / "override.json", prefix=None)
    assert config.get("db.options") == {"sslmode": "require", "connect_timeout": 5}
    assert config.get("features") == ["refunds", "exports"]
    config = load(DATA / "base.json", DATA / "override.json", prefix=None, lists="unique")
    assert config.get("features") == ["invoices", "refunds", "exports"]
