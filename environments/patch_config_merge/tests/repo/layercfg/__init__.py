"""layercfg: layered configuration from defaults, JSON files and environment variables."""

from .config import Config, ConfigError, MissingKeyError
from .loader import env_layer, load, load_json

__all__ = ["Config", "ConfigError", "MissingKeyError", "env_layer", "load", "load_json"]

__version__ = "2.1.0"
