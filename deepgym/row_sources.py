"""A dataset row's own task, whatever its format: the code-test formats of :mod:`deepgym.rows` (``apps``,
``mbpp``...) or an SWE-style instance (``data_source: swe``, :mod:`deepgym.swe`). The reward functions (verl's,
TRL's) and the dataset writer ask here, so each format is dispatched in one place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .rows import ALIASES, RowTask, is_row_source, row_task
from .swe import DATA_SOURCE as SWE_SOURCE
from .swe import swe_task

# Every data_source whose row carries its own tests in ground_truth.
SOURCES = (*sorted(ALIASES), SWE_SOURCE)


def is_dataset_source(data_source: Any) -> bool:
    """Whether ``data_source`` names a format whose row's ground_truth holds its tests."""
    return data_source == SWE_SOURCE or is_row_source(data_source)


def dataset_task(data_source: str, ground_truth: Any, reward_kwargs: Mapping[str, Any] | None = None) -> RowTask:
    """The row's task, checked. Raises ConfigurationError naming the malformed field."""
    if data_source == SWE_SOURCE:
        return swe_task(ground_truth, reward_kwargs)
    return row_task(data_source, ground_truth, reward_kwargs)
