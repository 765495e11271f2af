"""Exceptions raised by semverlite."""


class InvalidVersion(ValueError):
    """A string is not a valid semantic version."""

    def __init__(self, text: str, reason: str = "not a valid semantic version") -> None:
        super().__init__(f"{text!r}: {reason}")
        self.text = text


class InvalidRange(ValueError):
    """A string is not a valid version range."""

    def __init__(self, text: str, reason: str = "not a valid version range") -> None:
        super().__init__(f"{text!r}: {reason}")
        self.text = text
