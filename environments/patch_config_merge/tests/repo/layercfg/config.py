"""The Config object: a read-only mapping of settings with dotted-path access."""

from __future__ import annotations

import copy
from typing import Any, Iterator, Mapping

_MISSING = object()


class ConfigError(Exception):
    """A configuration source is invalid."""


class MissingKeyError(ConfigError, KeyError):
    """A required setting is absent."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path

    def __str__(self) -> str:
        return f"missing required setting {self.path!r}"


class Config(Mapping[str, Any]):
    """Read-only settings. Nested mappings come back as Config objects, so that
    ``config["db"]["port"]`` and ``config.get("db.port")`` both work. The data is copied on the way in
    and on the way out (:meth:`as_dict`), so a Config never changes after it is built.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = copy.deepcopy(dict(data or {}))

    @classmethod
    def _wrap(cls, data: dict[str, Any]) -> Config:
        config = cls.__new__(cls)
        config._data = data
        return config

    def __getitem__(self, key: str) -> Any:
        value = self._data[key]
        return Config._wrap(value) if isinstance(value, dict) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Config({self._data!r})"

    def _lookup(self, path: str) -> Any:
        node: Any = self._data
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return _MISSING
            node = node[part]
        return node

    def get(self, path: str, default: Any = None) -> Any:
        """The setting at a dotted ``path`` (``"db.port"``), or ``default`` if it is absent.
        Mappings come back as Config objects, lists as copies."""
        value = self._lookup(path)
        if value is _MISSING:
            return default
        if isinstance(value, dict):
            return Config._wrap(value)
        return copy.deepcopy(value)

    def require(self, path: str) -> Any:
        """Like :meth:`get`, but raises MissingKeyError if the setting is absent."""
        value = self.get(path, _MISSING)
        if value is _MISSING:
            raise MissingKeyError(path)
        return value

    def section(self, path: str) -> Config:
        """The mapping at ``path`` as a Config; an empty Config if it is absent. Raises ConfigError if
        the setting exists but is not a mapping."""
        value = self._lookup(path)
        if value is _MISSING:
            return Config()
        if not isinstance(value, dict):
            raise ConfigError(f"setting {path!r} is a {type(value).__name__}, not a section")
        return Config(value)

    def as_dict(self) -> dict[str, Any]:
        """A deep copy of the settings as plain dicts and lists."""
        return copy.deepcopy(self._data)

    @classmethod
    def from_layers(cls, *layers: Mapping[str, Any]) -> Config:
        """Combine configuration layers, later layers taking precedence over earlier ones: a key in
        a later layer replaces the same key of every earlier layer."""
        merged: dict[str, Any] = {}
        for layer in layers:
            merged.update(layer)
        return cls(merged)
