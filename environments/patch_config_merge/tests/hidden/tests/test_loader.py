from pathlib import Path

import pytest

from layercfg import ConfigError, env_layer, load, load_json

DATA = Path(__file__).parent / "data"


def test_load_json():
    data = load_json(DATA / "base.json")
    assert data["db"]["port"] == 5432
    assert data["features"] == ["invoices", "refunds"]


def test_load_json_rejects_non_objects():
    with pytest.raises(ConfigError):
        load_json(DATA / "list.json")


def test_load_json_rejects_invalid_json():
    with pytest.raises(ConfigError):
        load_json(DATA / "broken.json")


def test_load_json_missing_file():
    with pytest.raises(FileNotFoundError):
        load_json(DATA / "absent.json")


def test_env_layer_nesting_and_values():
    environ = {"APP__DEBUG": "true", "APP__DB__PORT": "5433", "APP__DB__HOST": "localhost",
               "APP__FEATURES": '["a", "b"]', "APP__NAME": "not json", "OTHER__X": "1", "APPX": "2"}
    assert env_layer(environ) == {"debug": True, "db": {"port": 5433, "host": "localhost"},
                                  "features": ["a", "b"], "name": "not json"}


def test_env_layer_prefix_and_case():
    assert env_layer({"MyApp__Cache__TTL": "60"}, prefix="myapp") == {"cache": {"ttl": 60}}


def test_env_layer_conflicts():
    with pytest.raises(ConfigError):
        env_layer({"APP__DB": "x", "APP__DB__PORT": "1"})
    with pytest.raises(ConfigError):
        env_layer({"APP__DB____PORT": "1"})


def test_load_layers_in_order():
    config = load(DATA / "base.json", defaults={"service": "default", "workers": 4},
                  environ={"APP__SERVICE": "billing-eu"})
    assert config.get("service") == "billing-eu"
    assert config.get("workers") == 4
    assert config.get("db.host") == "db.internal"


def test_load_missing_file():
    with pytest.raises(FileNotFoundError):
        load(DATA / "absent.json", environ={})
    assert load(DATA / "absent.json", environ={}, missing_ok=True) == {}


def test_load_without_environment():
    config = load(DATA / "base.json", prefix=None)
    assert config.get("debug") is False
