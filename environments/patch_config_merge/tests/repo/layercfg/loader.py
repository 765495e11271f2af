"""Configuration layers from JSON files and environment variables, and :func:`load` to combine them."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Optional, Union

from .config import Config, ConfigError

PathLike = Union[str, "os.PathLike[str]"]


def load_json(path: PathLike) -> dict[str, Any]:
    """The JSON object stored in ``path``. Raises ConfigError if the file is not valid JSON or does
    not hold an object, FileNotFoundError if it does not exist."""
    path = Path(path).expanduser()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a JSON object, not {type(data).__name__}")
    return data


def _parse_env_value(raw: str) -> Any:
    """JSON if the value is valid JSON (numbers, true/false/null, lists, objects), else the string."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def env_layer(environ: Optional[Mapping[str, str]] = None, prefix: str = "APP") -> dict[str, Any]:
    """The settings given by environment variables ``PREFIX__KEY`` and ``PREFIX__SECTION__KEY``:
    double underscores separate levels, names are lower-cased. ``environ`` defaults to
    ``os.environ``. Raises ConfigError if one variable sets a section that another sets as a value.
    """
    environ = os.environ if environ is None else environ
    start = prefix.upper() + "__"
    layer: dict[str, Any] = {}
    for name in sorted(environ):
        if not name.upper().startswith(start):
            continue
        parts = [part.lower() for part in name[len(start):].split("__")]
        if not all(parts):
            raise ConfigError(f"environment variable {name!r}: empty name between '__' separators")
        node = layer
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"environment variable {name!r}: {part!r} is already set as a value")
            node = child
        if isinstance(node.get(parts[-1]), dict):
            raise ConfigError(f"environment variable {name!r}: {parts[-1]!r} is already a section")
        node[parts[-1]] = _parse_env_value(environ[name])
    return layer


def load(*paths: PathLike, defaults: Optional[Mapping[str, Any]] = None, environ: Optional[Mapping[str, str]] = None,
         prefix: Optional[str] = "APP", missing_ok: bool = False) -> Config:
    """The configuration made of ``defaults``, then each JSON file in ``paths``, then the environment
    variables with ``prefix`` (none if ``prefix`` is None), each layer taking precedence over the ones
    before it (see :meth:`Config.from_layers`). Files that do not exist are skipped if ``missing_ok``.
    """
    layers: list[Mapping[str, Any]] = [defaults or {}]
    for path in paths:
        try:
            layers.append(load_json(path))
        except FileNotFoundError:
            if not missing_ok:
                raise
    if prefix is not None:
        layers.append(env_layer(environ, prefix))
    return Config.from_layers(*layers)
