"""What a check gathers for its advice while it runs (gpulab.judge.cost
makes the advice from it after the verdict). Apart from gpulab.judge.cost so
the grading context can hold one without importing what reads it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from gpulab.wire.protocol import JsonObject, Kwargs

if TYPE_CHECKING:
    from gpulab.gpu.costmodel import CostEstimate
    from gpulab.gpu.loadmap import LoadMapJson
    from gpulab.wire.sandbox_start import AheadRecord


@dataclass
class Saved:
    """A wrong case as `gpulab debug` reruns it."""

    number: int  # its row in the check's table, from 1
    name: str
    args: tuple[Any, ...]
    kwargs: Kwargs
    expected: Any  # the judge's float64 reference
    detail: str
    tolerance: tuple[float, float]  # (atol, rtol), the grader's for this dtype


@dataclass
class Advice:
    """What a check gathered for its advice (one per GradeContext)."""

    saved: list[Saved] = field(default_factory=list)
    saved_bytes: int = 0
    load_map: LoadMapJson | None = None
    map_elements: int = 0
    maps_made: int = 0


class Traced(TypedDict):
    """A case's launches replayed with per-element maps (gpulab.judge.cost.trace_case):
    the replay sandbox's counts, plain JSON as it sent them (gpulab.gpu.loadmap
    reads them field by field), and the indices where its result was wrong."""

    counts: JsonObject
    wrong: list[list[int]]


class ScaleInvariant(TypedDict):
    """Cases whose answer does not change when the inputs are scaled, and why that matters."""

    cases: list[str]
    why: str


class NothingAhead(TypedDict):
    """A run of cases before which nothing was compiled ahead: `{}` in the list."""


class JudgeKeys(TypedDict, total=False):
    """The judge's own keys of a result beside the typed ones (the
    harness's, gpulab.wire.result.CheckResult.rest), those set: how the
    cases ran and what was compiled ahead; the grader's bookkeeping in
    `--json` only (GradeContext.json_only); and the advice after the verdict
    (gpulab.judge.cost.advice_keys): where the wrong cases were saved, a
    wrong case's load map, and after a pass the cost estimate
    (gpulab.gpu.costmodel.estimate's object)."""

    mode: str
    compiled_ahead: list[AheadRecord | NothingAhead]
    replay_scale_invariant: ScaleInvariant
    debug: str
    load_map: LoadMapJson
    cost: CostEstimate
