"""What a check gathers for its advice while it runs (gpulab.judge.cost
makes the advice from it after the verdict). Apart from gpulab.judge.cost so
the grading context can hold one without importing what reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Saved:
    """A wrong case as `gpulab debug` reruns it."""

    number: int  # its row in the check's table, from 1
    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    expected: Any  # the judge's float64 reference
    detail: str
    tolerance: tuple[float, float]  # (atol, rtol), the grader's for this dtype


@dataclass
class Advice:
    """What a check gathered for its advice (one per GradeContext)."""

    saved: list[Saved] = field(default_factory=list)
    saved_bytes: int = 0
    load_map: dict[str, Any] | None = None
    map_elements: int = 0
    maps_made: int = 0
