import pytest

from layercfg import Config, ConfigError, MissingKeyError

SETTINGS = {"service": "billing", "db": {"host": "db.internal", "port": 5432, "options": {"sslmode": "require"}},
            "features": ["invoices"]}


def test_mapping_interface():
    config = Config(SETTINGS)
    assert set(config) == {"service", "db", "features"}
    assert len(config) == 3
    assert config["service"] == "billing"
    assert isinstance(config["db"], Config)
    assert config["db"]["port"] == 5432


def test_get_dotted_path():
    config = Config(SETTINGS)
    assert config.get("db.port") == 5432
    assert config.get("db.options.sslmode") == "require"
    assert config.get("db.user") is None
    assert config.get("db.port.x", "fallback") == "fallback"


def test_require():
    config = Config(SETTINGS)
    assert config.require("db.host") == "db.internal"
    with pytest.raises(MissingKeyError) as info:
        config.require("db.password")
    assert info.value.path == "db.password"
    assert isinstance(info.value, KeyError)


def test_section():
    config = Config(SETTINGS)
    assert config.section("db.options") == {"sslmode": "require"}
    assert config.section("cache") == Config()
    with pytest.raises(ConfigError):
        config.section("service")


def test_config_is_a_copy():
    data = {"db": {"port": 1}, "features": ["a"]}
    config = Config(data)
    data["db"]["port"] = 2
    data["features"].append("b")
    assert config.get("db.port") == 1
    assert config.get("features") == ["a"]


def test_as_dict_is_a_deep_copy():
    config = Config(SETTINGS)
    copied = config.as_dict()
    copied["db"]["port"] = 1
    copied["features"].append("x")
    assert config.get("db.port") == 5432
    assert config.get("features") == ["invoices"]


def test_equality_with_dicts():
    assert Config(SETTINGS) == SETTINGS
    assert Config({"a": 1}) != Config({"a": 2})


def test_from_layers_later_layer_wins():
    config = Config.from_layers({"debug": False, "service": "billing"}, {"debug": True})
    assert config.get("debug") is True
    assert config.get("service") == "billing"


def test_from_layers_keeps_keys_of_every_layer():
    config = Config.from_layers({"a": 1}, {"b": 2}, {"c": {"d": 3}})
    assert config == {"a": 1, "b": 2, "c": {"d": 3}}


def test_from_layers_later_none_wins():
    assert Config.from_layers({"timeout": 30}, {"timeout": None}).get("timeout", "absent") is None


def test_from_layers_empty():
    assert Config.from_layers() == Config()
    assert Config.from_layers({}) == {}


def test_from_layers_does_not_modify_layers():
    first, second = {"db": {"port": 1}}, {"db": {"port": 2}, "x": [1]}
    config = Config.from_layers(first, second)
    assert first == {"db": {"port": 1}} and second == {"db": {"port": 2}, "x": [1]}
    assert config.get("db.port") == 2
