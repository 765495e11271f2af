"""Version ranges in the npm style: comparator sets joined by ``||``.

    >=1.2.0 <2.0.0      every comparator of the set must hold
    ^1.2.3              >=1.2.3 <2.0.0-0   (^0.2.3: <0.3.0-0, ^0.0.3: <0.0.4-0)
    ~1.2.3              >=1.2.3 <1.3.0-0
    1.2.x, 1.2          >=1.2.0 <1.3.0-0
    1.x, 1              >=1.0.0 <2.0.0-0
    *, x, (empty)       any version
    ^1.0 || >=3.1.0     either set

Upper bounds such as ``<2.0.0-0`` are the lowest possible version of 2.0.0, so that no pre-release of
2.0.0 slips into ``^1.2.3``. Comparison operators (``<``, ``<=``, ``>``, ``>=``, ``=``, ``!=``) take a
full version.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, TypeVar, Union

from .errors import InvalidRange, InvalidVersion
from .version import Version

V = TypeVar("V", Version, str)

_OPERATORS: dict[str, Callable[[Version, Version], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "=": operator.eq,
    "!=": operator.ne,
}
_COMPARATOR = re.compile(r"(?P<op><=|>=|!=|<|>|=)(?P<version>.+)")
_PARTIAL = re.compile(r"(?P<major>\d+|[xX*])(?:\.(?P<minor>\d+|[xX*]))?(?:\.(?P<patch>\d+|[xX*]))?")
_WILDCARDS = ("x", "X", "*")


@dataclass(frozen=True)
class Comparator:
    """``operator`` applied to a version and ``version``."""

    operator: str
    version: Version

    def test(self, version: Version) -> bool:
        return _OPERATORS[self.operator](version, self.version)

    def __str__(self) -> str:
        return f"{self.operator}{self.version}"


def _floor(major: int, minor: int = 0, patch: int = 0) -> Version:
    """The lowest version with this major, minor and patch: ``major.minor.patch-0``."""
    return Version(major, minor, patch, (0,))


def _number(text: Optional[str]) -> Optional[int]:
    return None if text is None or text in _WILDCARDS else int(text)


def _expand(token: str, range_text: str) -> list[Comparator]:
    """The comparators one token of a range stands for."""
    if token in _WILDCARDS:
        return []
    match = _COMPARATOR.fullmatch(token)
    if match:
        try:
            return [Comparator(match["op"], Version.parse(match["version"]))]
        except InvalidVersion:
            raise InvalidRange(range_text, f"{token!r} needs a full version after {match['op']!r}") from None
    kind, rest = (token[0], token[1:]) if token[0] in "^~" else ("", token)
    try:
        full: Optional[Version] = Version.parse(rest)
    except InvalidVersion:
        full = None
    if full is not None:
        major, minor, patch = full.release
        if kind == "":
            return [Comparator("=", full)]
        if kind == "~":
            return [Comparator(">=", full), Comparator("<", _floor(major, minor + 1))]
        if major:
            upper = _floor(major + 1)
        elif minor:
            upper = _floor(0, minor + 1)
        else:
            upper = _floor(0, 0, patch + 1)
        return [Comparator(">=", full), Comparator("<", upper)]
    match = _PARTIAL.fullmatch(rest)
    if match is None:
        raise InvalidRange(range_text, f"cannot read {token!r}")
    major, minor = _number(match["major"]), _number(match["minor"])
    if major is None:
        return []
    if minor is None:
        return [Comparator(">=", Version(major, 0, 0)), Comparator("<", _floor(major + 1))]
    if kind == "^" and major == 0:
        return [Comparator(">=", Version(0, minor, 0)), Comparator("<", _floor(0, minor + 1))]
    if kind == "^":
        return [Comparator(">=", Version(major, minor, 0)), Comparator("<", _floor(major + 1))]
    return [Comparator(">=", Version(major, minor, 0)), Comparator("<", _floor(major, minor + 1))]


def _parse(text: str) -> tuple[tuple[Comparator, ...], ...]:
    sets = []
    for part in text.split("||"):
        # Allow a space between an operator and its version: ">= 1.2.3".
        part = re.sub(r"(<=|>=|!=|<|>|=|\^|~)\s+", r"\1", part.strip())
        comparators: list[Comparator] = []
        for token in part.split():
            comparators.extend(_expand(token, text))
        sets.append(tuple(comparators))
    return tuple(sets)


def _as_version(version: Union[Version, str]) -> Version:
    return version if isinstance(version, Version) else Version.parse(version)


class Range:
    """A parsed range; see the module docstring for the syntax. Raises InvalidRange."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.sets = _parse(text)

    def contains(self, version: Union[Version, str], *, include_prerelease: bool = False) -> bool:
        """Whether ``version`` satisfies the range.

        Unless ``include_prerelease`` is true, a pre-release version only satisfies a comparator set
        in which some comparator names a pre-release of the same major.minor.patch, so that
        ``>=1.2.3-beta.1 <1.3.0`` matches ``1.2.3-beta.2`` but not ``1.2.4-alpha``.
        """
        version = _as_version(version)
        for comparators in self.sets:
            if version.is_prerelease and not include_prerelease and not any(
                c.version.is_prerelease and c.version.release == version.release for c in comparators
            ):
                continue
            if all(c.test(version) for c in comparators):
                return True
        return False

    def __contains__(self, version: Union[Version, str]) -> bool:
        return self.contains(version)

    def __str__(self) -> str:
        return " || ".join(" ".join(str(c) for c in comparators) or "*" for comparators in self.sets)

    def __repr__(self) -> str:
        return f"Range({self.text!r})"


def satisfies(version: Union[Version, str], range_text: str, *, include_prerelease: bool = False) -> bool:
    """Whether ``version`` satisfies the range written as ``range_text``."""
    return Range(range_text).contains(version, include_prerelease=include_prerelease)


def sort_versions(versions: Iterable[V], *, reverse: bool = False) -> list[V]:
    """The versions (Version objects or strings, returned as given) in order of precedence."""
    return sorted(versions, key=_as_version, reverse=reverse)


def max_satisfying(versions: Iterable[V], range_text: str, *, include_prerelease: bool = False) -> Optional[V]:
    """The version of highest precedence that satisfies the range, as given, or None.
    Strings that are not valid versions are skipped."""
    wanted = Range(range_text)
    best: Optional[V] = None
    best_version: Optional[Version] = None
    for item in versions:
        try:
            version = _as_version(item)
        except InvalidVersion:
            continue
        if wanted.contains(version, include_prerelease=include_prerelease) and (
            best_version is None or version > best_version
        ):
            best, best_version = item, version
    return best
