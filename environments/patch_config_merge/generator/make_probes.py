"""Writes ../tests/probes.json, the hidden probes of patch_config_merge, from SETUP and PROBES below.

Run it again whenever the repository, the hidden tests or the solutions change:

    python3 generator/make_probes.py

Each entry of PROBES is (id, covers, expr); deepgym.probes explains the rules the probes must meet and
refuses to write the file otherwise. Expected values are computed from solutions/reference.diff, never typed.
"""

from __future__ import annotations

SETUP = r'''
import copy
import types

import layercfg
from layercfg import Config, ConfigError, MissingKeyError, env_layer, load

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


def error_name(make):
    """The class name of the exception ``make()`` raises, or None."""
    try:
        make()
    except Exception as exc:
        return type(exc).__name__
    return None


def merge_all(base, override):
    """deep_merge with each list strategy, on copies of the arguments."""
    return [layercfg.deep_merge(copy.deepcopy(base), copy.deepcopy(override), lists=lists)
            for lists in ("replace", "append", "unique")]


def inputs_after_merging():
    """BASE and OVERRIDE (copies) after merging them with every strategy: they must not change."""
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    for lists in ("replace", "append", "unique"):
        layercfg.deep_merge(base, override, lists=lists)
    return [base, override]


def inputs_after_changing_results():
    """Merge, then change every mutable value of each result at every depth; return the arguments,
    which must not have changed."""
    base, override = copy.deepcopy(BASE), copy.deepcopy(OVERRIDE)
    base["only_base"] = {"nested": [1, {"deep": []}], "map": {"k": "v"}}
    override["only_override"] = {"nested": [2, {"deep": []}]}
    base["shared"] = [{"x": 1}]
    override["shared"] = [{"x": 2}]

    def scribble(value):
        if isinstance(value, dict):
            for key in list(value):
                scribble(value[key])
                value[key] = "changed" if not isinstance(value[key], (dict, list)) else value[key]
            value["added"] = "changed"
        elif isinstance(value, list):
            for item in value:
                scribble(item)
            value.append("changed")

    for lists in ("replace", "append", "unique"):
        scribble(layercfg.deep_merge(base, override, lists=lists))
    return [base, override]


def types_of(value):
    """The type names of ``value`` and of every dict and list inside it."""
    if isinstance(value, dict) or type(value).__name__ in ("Config", "mappingproxy"):
        return [type(value).__name__, {key: types_of(item) for key, item in value.items()}]
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, [types_of(item) for item in value]]
    return type(value).__name__


def config_copies():
    """A Config copies its data on the way in and out: changing the source or an as_dict() result
    changes nothing."""
    source = {"db": {"host": "h", "tags": ["t"]}}
    config = Config(source)
    source["db"]["host"] = "changed"
    source["db"]["tags"].append("changed")
    out = config.as_dict()
    out["db"]["tags"].append("changed")
    config.get("db.tags").append("changed")
    return config.as_dict()


def config_after_changing_its_source():
    """A Config built by from_layers keeps its values when the layers change afterwards."""
    layer = {"db": {"host": "a", "tags": ["x"]}}
    config = Config.from_layers(layer)
    layer["db"]["host"] = "changed"
    layer["db"]["tags"].append("changed")
    return config.as_dict()
'''

PROBES = [
    # --- deep_merge
    ("nested_mappings_are_merged", ["test_nested_mappings_are_merged", "test_lists_replaced_by_default"],
     r'''layercfg.deep_merge(BASE, OVERRIDE)'''),
    ("override_wins_for_values", ["test_override_wins_for_values", "test_key_only_in_one_side_is_kept"],
     r'''[layercfg.deep_merge({"a": 1, "b": "x", "c": {"d": 1}}, {"a": 2, "b": None, "e": [1]}), layercfg.deep_merge({"a": {"b": 1}}, {}), layercfg.deep_merge({}, {"a": {"b": 1}}), layercfg.deep_merge({}, {})]'''),
    ("type_conflicts_take_the_override", ["test_type_conflicts_take_the_override"],
     r'''[layercfg.deep_merge({"db": {"host": "x"}}, {"db": "sqlite:///app.db"}), layercfg.deep_merge({"db": "sqlite:///app.db"}, {"db": {"host": "x"}}), layercfg.deep_merge({"x": [1]}, {"x": {"a": 1}}, lists="append"), layercfg.deep_merge({"x": (1, 2)}, {"x": [3]}, lists="append"), layercfg.deep_merge({"x": [1]}, {"x": (2,)}, lists="unique"), layercfg.deep_merge({"x": {"a": [1]}}, {"x": None}, lists="append")]'''),
    ("lists_by_strategy", ["test_lists_replaced_by_default", "test_lists_append",
                           "test_lists_unique_keeps_first_occurrences_in_order"],
     r'''merge_all(BASE, OVERRIDE)'''),
    ("lists_unique_keeps_first_occurrences", ["test_lists_unique_keeps_first_occurrences_in_order"],
     r'''[layercfg.deep_merge({"x": [3, 1, 3]}, {"x": [2, 1, 4, 2]}, lists="unique"), layercfg.deep_merge({"x": [1, True, 1.0, "1"]}, {"x": [0, False, "0"]}, lists="unique"), layercfg.deep_merge({"a": {"b": ["p", "q"]}}, {"a": {"b": ["q", "r", "p"]}}, lists="unique")]'''),
    ("lists_unique_with_unhashable_items", ["test_lists_unique_with_unhashable_items"],
     r'''[layercfg.deep_merge({"servers": [{"host": "a"}, {"host": "b"}]}, {"servers": [{"host": "b"}, {"host": "c"}, ["x"]]}, lists="unique"), layercfg.deep_merge({"x": [[1], [2], [1]]}, {"x": [[2], {"k": [1]}, {"k": [1]}]}, lists="unique")]'''),
    ("nested_lists_follow_the_strategy", ["test_lists_append", "test_nested_mappings_are_merged"],
     r'''[layercfg.deep_merge({"a": {"b": {"c": [1, 2]}}}, {"a": {"b": {"c": [2, 3], "d": 1}}}, lists=lists) for lists in ("replace", "append", "unique")]'''),
    ("inputs_are_not_modified", ["test_inputs_are_not_modified"],
     r'''inputs_after_merging()'''),
    ("result_shares_nothing_with_the_inputs", ["test_result_shares_nothing_with_the_inputs"],
     r'''inputs_after_changing_results()'''),
    ("unknown_list_strategy_raises", ["test_unknown_list_strategy_raises"],
     r'''[error_name(lambda: layercfg.deep_merge(*args, lists=lists)) for args, lists in [(({}, {}), "prepend"), (({"x": [1]}, {"x": [2]}), "merge"), (({"a": 1}, {"b": 2}), "prepend")]] + [layercfg.deep_merge({}, {})]'''),
    ("any_mapping_is_accepted_and_the_result_is_plain", ["test_any_mapping_is_accepted_and_the_result_is_plain"],
     r'''(lambda merged: [merged, types_of(merged)])(layercfg.deep_merge(Config({"db": {"host": "a", "port": 1}, "tags": ["t"]}), types.MappingProxyType({"db": types.MappingProxyType({"port": 2, "extra": types.MappingProxyType({"k": "v"})}), "tags": ["u"]}), lists="append"))'''),
    # --- Config.from_layers, Config.merge and load
    ("from_layers_merges_nested_sections", ["test_from_layers_merges_nested_sections"],
     r'''[Config.from_layers({"db": {"host": "a", "port": 1}}, {"db": {"port": 2}}, {"db": {"user": "u"}}).as_dict(), Config.from_layers({"a": {"b": {"c": 1, "d": 2}}}, {"a": {"b": {"d": 3}}}, {"a": {"e": 4}}).as_dict(), type(Config.from_layers({"x": {"y": 1}})).__name__]'''),
    ("from_layers_list_option", ["test_from_layers_list_option"],
     r'''[Config.from_layers({"plugins": ["auth"]}, {"plugins": ["audit", "auth"]}, {"plugins": ["cache"]}, lists=lists).get("plugins") for lists in ("replace", "append", "unique")]'''),
    ("config_merge_method", ["test_config_merge_method"],
     r'''(lambda config: (lambda merged: [type(merged).__name__, merged.as_dict(), config.as_dict(), config.merge(Config({"db": {"host": "b"}})).get("db.host"), config.merge({"tags": ["x", "z"]}, lists="unique").get("tags"), config.merge({"db": {"host": "c"}}).as_dict()])(config.merge({"db": {"port": 2}, "tags": ["y"]}, lists="append")))(Config({"db": {"host": "a", "port": 1}, "tags": ["x"]}))'''),
    ("environment_overrides_one_key_of_a_section", ["test_environment_overrides_one_key_of_a_section"],
     r'''load(defaults={"service": "billing", "debug": False, "db": {"host": "db.internal", "port": 5432, "options": {"sslmode": "require"}}}, environ={"APP__DB__PORT": "6432", "APP__DB__OPTIONS__TIMEOUT": "5", "OTHER__DB__PORT": "1"}).as_dict()'''),
    ("list_option_reaches_load", ["test_files_merge_and_list_option_reaches_load"],
     r'''[load(defaults={"features": ["invoices", "refunds"], "db": {"options": {"sslmode": "require"}}}, environ={"APP__FEATURES": '["refunds", "exports"]', "APP__DB__OPTIONS__CONNECT_TIMEOUT": "5"}, lists=lists).as_dict() for lists in ("replace", "append", "unique")] + [load(defaults={"a": {"b": [1]}}, prefix=None, lists="append").as_dict()]'''),
    # --- pass-to-pass: what works today keeps working
    ("from_layers_basics", ["test_from_layers_empty", "test_from_layers_later_layer_wins", "test_from_layers_later_none_wins",
                            "test_from_layers_keeps_keys_of_every_layer", "test_from_layers_does_not_modify_layers"],
     r'''[Config.from_layers().as_dict(), len(Config.from_layers()), Config.from_layers({"a": 1, "b": 2}, {"b": 3, "c": 4}, {"c": None}).as_dict(), Config.from_layers({"a": 1}).as_dict(), config_after_changing_its_source()]'''),
    ("config_reading", ["test_get_dotted_path", "test_require", "test_section", "test_mapping_interface",
                        "test_equality_with_dicts", "test_config_is_a_copy", "test_as_dict_is_a_deep_copy"],
     r'''(lambda c: [c.get("db.port"), c.get("db.nope", "dflt"), c.get("db").as_dict(), c["db"]["host"], c.get("tags"), sorted(c), len(c), c == {"db": {"host": "h", "port": 1}, "tags": ["t"]}, c.require("db.host"), error_name(lambda: c.require("db.user")), c.section("db").as_dict(), c.section("nope").as_dict(), error_name(lambda: c.section("tags")), issubclass(MissingKeyError, KeyError), config_copies()])(Config({"db": {"host": "h", "port": 1}, "tags": ["t"]}))'''),
    ("environment_layer", ["test_env_layer_nesting_and_values", "test_env_layer_prefix_and_case", "test_env_layer_conflicts",
                           "test_load_without_environment"],
     r'''[env_layer({"APP__DB__PORT": "6432", "APP__NAME": "svc", "app__Debug": "true", "APP__LIST": "[1, 2]", "APP__TEXT": "not json", "OTHER__X": "1"}), env_layer({"MY__A": "null"}, prefix="my"), error_name(lambda: env_layer({"APP__DB": "1", "APP__DB__PORT": "2"})), error_name(lambda: env_layer({"APP__A____B": "1"})), load(defaults={"a": 1}, environ={"APP__A": "2"}, prefix=None).as_dict()]'''),
]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    from deepgym.probes import write_probes

    sys.exit(write_probes(Path(__file__).resolve().parent.parent, SETUP, PROBES))
