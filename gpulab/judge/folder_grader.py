"""The grader of a folder exercise (gpulab.course.exercise_folder,
docs/new-exercise.md): its spec.py made into the cases and the KernelSpec
every kernel grader gives gpulab.judge.standard, so the sandbox, the replay,
the timing, the roofline and the cost model treat it as they treat the
course's own kernels (softmax's grader is the model).

What spec.py defines is checked as it loads (gpulab.judge.folder_spec). An
error its functions raise during a check ends the check as gpulab's error,
not as the learner's failure, naming spec.py, the function and the line:
the exercise's own code is at fault there, not the file being checked.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import torch

from gpulab.judge.compare import DEFAULT_TOLERANCE
from gpulab.judge.context import GradeFailed
from gpulab.judge.folder_spec import DTYPES, FolderCase, FolderSpec, at_line, describe
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.standard import STEP_NOTE, grade_kernel
from gpulab.sandbox.learner import LearnerError
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.measure.compile_specs import Spec as CompileSpec

NO_TIMING_NOTE = "This exercise is graded on correctness only: its spec.py names no TIMING_CASES."
# Public seeds by list, so no two cases of an exercise share one.
SEED_BASE = {"CASES": 1, "GPU_CASES": 100, "TIMING_CASES": 1000}
SECOND_DRAW = 500  # added to a case's seed for its second draw


class FolderGrader:
    """A folder exercise's grader: gpulab.judge.interface.TimedGrader, an
    object where the course's own graders are modules."""

    def __init__(self, spec: FolderSpec) -> None:
        self.spec = spec
        self.kernel = KernelSpec(
            reference=self._reference,
            banned=spec.banned,
            banned_aten=spec.banned_aten,
            banned_label=spec.banned_label,
            tolerance=lambda dt: spec.tolerance.get(dt) or DEFAULT_TOLERANCE[dt],
            expect=self._expect,
            baseline=self._baseline if spec.baseline is not None else None,
            baseline_name=spec.baseline_name,
        )
        if spec.grades is not None:
            self.kernel.grades = spec.grades

    # --- gpulab.judge.interface ---------------------------------------------

    def grade(self, ctx: GradeContext) -> None:
        timing = self.spec.timing_cases
        grade_kernel(
            ctx,
            self.kernel,
            ctx.request.function,
            lambda: self._formulas_fit(ctx, self.correctness_cases(ctx)),
            (lambda: self._formulas_fit(ctx, self.timing_cases(ctx))) if timing else None,
        )
        if not timing and STEP_NOTE in ctx.notes:
            ctx.notes[ctx.notes.index(STEP_NOTE)] = NO_TIMING_NOTE

    def timing_cases(self, ctx: CaseContext) -> list[Case]:
        return self._drawn(ctx, "TIMING_CASES", self.spec.timing_cases)

    def kernel_spec(self, ctx: CaseContext) -> KernelSpec:
        return self.kernel

    @property
    def COMPILE_SPECS(self) -> tuple[CompileSpec, ...]:  # a module grader's name for it
        """`gpulab dev compile`'s hook (gpulab.judge.loader.compile_specs)."""
        return self.spec.compile_specs

    # --- the cases ------------------------------------------------------------

    def correctness_cases(self, ctx: CaseContext) -> list[Case]:
        """CASES (and GPU_CASES on a GPU), then the last of CASES drawn
        again with other values: a kernel that hands back an answer it kept
        from an earlier call, or its launches' numbers worked out from the
        values, fails there (the replay compares the two draws' launches)."""
        cases = self._drawn(ctx, "CASES", self.spec.cases)
        if not ctx.interpreter:
            cases += self._drawn(ctx, "GPU_CASES", self.spec.gpu_cases)
        last = self.spec.cases[-1]
        seed = _seed("CASES", len(self.spec.cases) - 1, last) + SECOND_DRAW
        label = " ".join(x for x in (last.label, "second draw") if x)
        cases.append(self._case(ctx, replace(last, seed=seed, label=label)))
        return cases

    def _drawn(self, ctx: CaseContext, key: str, raw: list[FolderCase]) -> list[Case]:
        return [self._case(ctx, replace(c, seed=_seed(key, i, c))) for i, c in enumerate(raw)]

    def _case(self, ctx: CaseContext, raw: FolderCase) -> Case:
        sizes = raw.sizes
        dtype = DTYPES[raw.dtype]
        shape = " ".join(f"{k}={v}" for k, v in sizes.items())
        name = " ".join(x for x in (shape, raw.dtype, raw.label) if x)
        # Drawn where the case runs, from a seed mixed with the check's secret one.
        generator = torch.Generator(device=ctx.device).manual_seed(ctx.seed(raw.seed))
        drawn = self._run(
            f"make_inputs (case {name})",
            self.spec.make_inputs,
            **sizes,
            dtype=dtype,
            generator=generator,
            device=ctx.device,
        )
        args = (drawn,) if isinstance(drawn, torch.Tensor) else drawn
        if not isinstance(args, (tuple, list)) or not any(
            isinstance(a, torch.Tensor) for a in args
        ):
            self._broken(
                f"make_inputs returned {type(drawn).__name__} for case {name}",
                "It returns the learner's function's arguments: a tensor, or a tuple "
                "of them (numbers may be among them).",
            )
        return Case(
            name=name,
            args=tuple(args),
            dtype=dtype,
            sizes=dict(sizes),
            kwargs=dict(raw.kwargs),
            shape=shape,
        )

    def _formulas_fit(self, ctx: GradeContext, cases: list[Case]) -> list[Case]:
        """exercise.toml's bytes and flops formulas worked out for each case,
        before any is run: a name no case gives is the exercise's mistake,
        said once, here, rather than a roofline left empty on a GPU."""
        from gpulab.course.content import eval_formula

        for label, text in (("bytes", ctx.request.bytes or ""), ("flops", ctx.request.flops or "")):
            for case in cases if text else ():
                try:
                    eval_formula(text, {**case.sizes, "elt": case.dtype.itemsize})
                except (ValueError, ZeroDivisionError, OverflowError) as exc:
                    self._broken(
                        f"exercise.toml's {label} formula does not fit case {case.name}: {exc}",
                        f"Its names are the sizes of spec.py's cases ({', '.join(case.sizes)}) "
                        "and `elt`, the element's size in bytes.",
                    )
        return cases

    # --- what KernelSpec calls ----------------------------------------------

    def _reference(self, case: Case) -> torch.Tensor:
        out = self._run(
            f"reference (case {case.name})", self.spec.reference, *case.args, **case.kwargs
        )
        if not isinstance(out, torch.Tensor):
            self._broken(
                f"reference returned {type(out).__name__} for case {case.name}, not a tensor"
            )
        return out

    def _expect(self, case: Case) -> Expect:
        first = next(a for a in case.args if isinstance(a, torch.Tensor))
        shape = tuple(first.shape)
        if self.spec.output_shape is not None:
            got = self._run(
                f"output_shape (case {case.name})",
                self.spec.output_shape,
                *case.args,
                **case.kwargs,
            )
            if not isinstance(got, (tuple, list, torch.Size)) or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in got
            ):
                self._broken(f"output_shape returned {got!r} for case {case.name}, not a shape")
            shape = tuple(got)
        return Expect(shape, first, "the first tensor argument", contiguous=True)

    def _baseline(self, case: Case) -> Callable[[], Any]:
        assert self.spec.baseline is not None  # only set where spec.py has one
        return functools.partial(self.spec.baseline, *case.args, **case.kwargs)

    # --- the instructor's code, run with care -------------------------------

    def _run(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (GradeFailed, LearnerError):
            raise
        except Exception as exc:  # noqa: BLE001 - the exercise's code: any error, with its line
            self._broken(f"{what} raised {describe(exc)}", f"At {at_line(self.spec.path, exc)}.")

    def _broken(self, summary: str, message: str = "") -> NoReturn:
        """The exercise itself is wrong: the check ends as gpulab's error."""
        path = self.spec.path
        raise GradeFailed(
            f"{path.name}: {summary}",
            f"{message} {path} is this exercise's own code (its author's), "
            "not the file being checked: the check cannot go on until it is fixed "
            "(`gpulab dev check` proves it).".strip(),
            status=Status.ERROR,
        )


def _seed(key: str, index: int, raw: FolderCase) -> int:
    return raw.seed or SEED_BASE[key] + index


def load(folder: Path) -> FolderGrader:
    """The grader of the exercise in `folder`. Raises folder_spec.SpecError
    (or ModuleNotFoundError) where its spec.py cannot be used."""
    from gpulab.judge import folder_spec

    return FolderGrader(folder_spec.load(folder / "spec.py"))
