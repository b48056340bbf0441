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

The manifest's `tools` names the commands beyond `check` that cover an
exercise; for some of them the grader provides a hook, found by name where
the tool loads the grader (gpulab.judge.loader): "compile", COMPILE_SPECS
(gpulab.measure.compile_specs, whose Spec it holds: typed there, since that
module imports the loader, which imports this one); "counters",
COUNTER_CASES (gpulab.targets.counter_cases); "profile", profile_step
(gpulab.targets.profiling). A grader has a hook exactly when the manifest
names its tool (tests/judge/test_grader_loader.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.kernel_spec import Case, KernelSpec

# A grader's COUNTER_CASES: a recording's name (gpulab.gpu.counters) -> what
# builds its inputs from the reference module, returning the call to count.
CounterCases = Mapping[str, Callable[[Any], Callable[[], object]]]


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


class CountedGrader(Grader, Protocol):
    """A grader of an exercise the manifest's tools name "counters"."""

    COUNTER_CASES: CounterCases


class ProfiledGrader(Grader, Protocol):
    """A grader of an exercise the manifest's tools name "profile": one step
    of the learner's `module` on the check's inputs, for `gpulab profile`
    to run between cudaProfilerStart and cudaProfilerStop."""

    def profile_step(self, module: Any, device: str) -> Callable[[], object]: ...
