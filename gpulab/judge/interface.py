"""The grader interface: what a module in gpulab.judge.graders provides.

A grader is a module, `gpulab.judge.graders.<exercise>`, one per exercise of the
course manifest (gpulab.judge.loader loads nothing else). The harness
calls its `grade(ctx)` with a GradeContext. A kernel exercise's grader also
builds its timing cases and its KernelSpec for `--explain`
(gpulab.explain.judge.cases) and `gpulab bench`, which have no sandbox, so
`timing_cases(ctx)` and `kernel_spec(ctx)` are given a CaseContext, the
little that drawing cases needs (both in gpulab.judge.context). These are
Protocols, structural types as harlequin declares its adapters: a module
satisfies one by having the names, and mypy checks each grader's functions
against the types named here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.kernel_spec import Case, KernelSpec


class Grader(Protocol):
    """Every module in gpulab.judge.graders: grades one check, recording its cases
    on `ctx` and failing through `ctx.fail` or a LearnerError."""

    def grade(self, ctx: GradeContext) -> None: ...


class TimedGrader(Grader, Protocol):
    """A kernel exercise's grader (those the manifest's `tools` name for explain and bench):
    its timed shapes, drawn without a sandbox; a case may come paired with
    what only its timing needs. `kernel_spec` is its KernelSpec where `ctx`
    runs (references, bans, tolerances, baseline)."""

    def timing_cases(self, ctx: CaseContext) -> Sequence[Case | tuple[Any, ...]]: ...

    def kernel_spec(self, ctx: CaseContext) -> KernelSpec: ...
