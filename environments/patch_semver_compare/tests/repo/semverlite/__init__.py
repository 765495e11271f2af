"""semverlite: Semantic Versioning 2.0.0 without dependencies."""

from .errors import InvalidRange, InvalidVersion
from .ranges import Range, max_satisfying, satisfies, sort_versions
from .version import Version, compare, parse

__all__ = [
    "Version", "parse", "compare",
    "Range", "satisfies", "max_satisfying", "sort_versions",
    "InvalidVersion", "InvalidRange",
]

__version__ = "1.4.0"
