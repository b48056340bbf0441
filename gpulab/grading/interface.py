"""The grader interface: what a module in gpulab.graders provides, and what
it is given.

A grader is a module, `gpulab.graders.<exercise>`, one per exercise of the
course manifest (gpulab.grading.loader loads nothing else). The harness
calls its `grade(ctx)` with a GradeContext (gpulab.grading.harness). A
kernel exercise's grader also builds its timing cases for `--explain`
(gpulab.diagnosis.cases) and `gpulab bench`, which have no sandbox, so
`timing_cases(ctx)` is given a CaseContext: the little that building cases
needs. These are Protocols, structural types as harlequin declares its
adapters: a module or class satisfies one by having the names, and mypy
checks each grader's functions against the types named here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpulab.grading.harness import GradeContext
    from gpulab.grading.kernel import Case


class Channel(Protocol):
    """Where a check's frames go (gpulab.judge.Channel, the judge's events)."""

    def send(self, event: dict[str, Any]) -> None: ...

    def stage(self, text: str, done: int | None = None, total: int | None = None) -> None: ...


class CaseContext(Protocol):
    """What drawing an exercise's cases needs: where they run and the seeds
    (a GradeContext; gpulab.bench's and gpulab.diagnosis.cases' own)."""

    @property
    def device(self) -> str: ...

    @property
    def interpreter(self) -> bool: ...

    def seed(self, public: int) -> int: ...


class Grader(Protocol):
    """Every module in gpulab.graders: grades one check, recording its cases
    on `ctx` and failing through `ctx.fail` or a LearnerError."""

    def grade(self, ctx: GradeContext) -> None: ...


class TimedGrader(Grader, Protocol):
    """A kernel exercise's grader (gpulab.diagnosis.kinds.KERNEL_EXERCISES):
    its timed shapes, drawn without a sandbox; a case may come paired with
    what only its timing needs."""

    def timing_cases(self, ctx: CaseContext) -> Sequence[Case | tuple[Any, ...]]: ...
