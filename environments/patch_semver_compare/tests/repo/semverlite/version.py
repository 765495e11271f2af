"""Semantic versions (https://semver.org/spec/v2.0.0.html): parsing, formatting, bumping and ordering."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Union

from .errors import InvalidVersion

Identifier = Union[int, str]

_NUMBER = r"0|[1-9]\d*"
_PRERELEASE_ID = rf"(?:{_NUMBER}|\d*[A-Za-z-][0-9A-Za-z-]*)"
_BUILD_ID = r"[0-9A-Za-z-]+"
_VERSION = re.compile(
    rf"(?P<major>{_NUMBER})\.(?P<minor>{_NUMBER})\.(?P<patch>{_NUMBER})"
    rf"(?:-(?P<prerelease>{_PRERELEASE_ID}(?:\.{_PRERELEASE_ID})*))?"
    rf"(?:\+(?P<build>{_BUILD_ID}(?:\.{_BUILD_ID})*))?"
)


def _identifier(text: str) -> Identifier:
    """One pre-release identifier: identifiers made only of digits become ints, so that 2 < 10."""
    return int(text) if text.isdigit() else text


@functools.total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A semantic version ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]``.

    ``prerelease`` holds the dot-separated pre-release identifiers, numeric ones as ints
    (``1.0.0-rc.1`` has ``('rc', 1)``); ``build`` holds the build metadata identifiers as strings.

    Versions are ordered by SemVer precedence (section 11 of the specification): major, minor and
    patch compare numerically; a pre-release version has lower precedence than the release with the
    same major, minor and patch; pre-releases compare identifier by identifier, numeric identifiers
    numerically and alphanumeric ones in ASCII order, a numeric identifier having lower precedence
    than an alphanumeric one, and a shorter list of identifiers lower precedence than a longer one
    that starts with it. Build metadata does not take part in precedence, so ``1.0.0+a == 1.0.0+b``.
    """

    major: int
    minor: int
    patch: int
    prerelease: tuple[Identifier, ...] = ()
    build: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("major", "minor", "patch"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        object.__setattr__(self, "prerelease", tuple(self.prerelease))
        object.__setattr__(self, "build", tuple(self.build))

    @classmethod
    def parse(cls, text: str) -> Version:
        """The version written as ``text``; raises InvalidVersion. Surrounding whitespace is ignored,
        a leading ``v`` is not accepted."""
        if not isinstance(text, str):
            raise TypeError(f"expected a version string, got {type(text).__name__}")
        match = _VERSION.fullmatch(text.strip())
        if match is None:
            raise InvalidVersion(text)
        prerelease, build = match["prerelease"], match["build"]
        return cls(
            int(match["major"]),
            int(match["minor"]),
            int(match["patch"]),
            tuple(_identifier(part) for part in prerelease.split(".")) if prerelease else (),
            tuple(build.split(".")) if build else (),
        )

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += "-" + ".".join(str(part) for part in self.prerelease)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Version('{self}')"

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def release(self) -> tuple[int, int, int]:
        """``(major, minor, patch)``."""
        return (self.major, self.minor, self.patch)

    def finalize(self) -> Version:
        """The release this version leads to: pre-release and build metadata dropped."""
        return Version(self.major, self.minor, self.patch)

    def bump_major(self) -> Version:
        """The next major release; ``2.0.0-rc.1`` bumps to ``2.0.0``."""
        if self.prerelease and self.minor == 0 and self.patch == 0:
            return self.finalize()
        return Version(self.major + 1, 0, 0)

    def bump_minor(self) -> Version:
        """The next minor release; ``1.3.0-rc.1`` bumps to ``1.3.0``."""
        if self.prerelease and self.patch == 0:
            return self.finalize()
        return Version(self.major, self.minor + 1, 0)

    def bump_patch(self) -> Version:
        """The next patch release; ``1.2.4-rc.1`` bumps to ``1.2.4``."""
        if self.prerelease:
            return self.finalize()
        return Version(self.major, self.minor, self.patch + 1)

    def _key(self) -> tuple:
        """The tuple that orders versions by precedence (build metadata left out)."""
        return (self.major, self.minor, self.patch, self.prerelease)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: Version) -> bool:
        if not isinstance(other, Version):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())


def parse(text: str) -> Version:
    """Shorthand for :meth:`Version.parse`."""
    return Version.parse(text)


def compare(a: Version | str, b: Version | str) -> int:
    """-1, 0 or 1 as ``a`` has lower, equal or higher precedence than ``b``. Strings are parsed."""
    left = a if isinstance(a, Version) else Version.parse(a)
    right = b if isinstance(b, Version) else Version.parse(b)
    return (left > right) - (left < right)
