"""URL slugs."""

import re


def slugify(text: str) -> str:
    """Lowercase words joined by single dashes: "Hello, World!" -> "hello-world"."""
    words = re.split(r"[^a-z0-9]", text.lower())
    return "-".join(words)
