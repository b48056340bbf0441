"""Drive one check: load the grader module, grade, report.

An exercise's grader is `gpulab.judge.graders.<exercise>` with a function
`grade(ctx: GradeContext)` (gpulab.judge.interface declares it; only
gpulab.judge.loader loads one, and gpulab.judge.context is what it is
given). This module turns the cases, failures and timing it recorded on
`ctx` into the check's result, typed as the lab reads it
(gpulab.wire.result.CheckResult): the judge's result frame is its JSON.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from gpulab.course.install_hint import install_hint  # the same advice the CLI and the TUI give
from gpulab.judge.context import GradeContext, GradeFailed
from gpulab.sandbox.learner import LearnerError
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.result import JUDGE_ORDER, CheckResult, Timing
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from gpulab.judge.advice import JudgeKeys
    from gpulab.judge.context import Channel
    from gpulab.judge.remote import Sandbox
    from gpulab.judge.replay import Replayer

__all__ = ["GradeContext", "GradeFailed", "device_label", "grade_request"]


def device_label(device: str, triton: bool = True) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.machine()})" + (", Triton interpreter" if triton else "")


def grade_request(
    request: CheckRequest,
    device: str,
    channel: Channel,
    sandbox: Sandbox,
    replayer: Replayer | None = None,
    secret_seed: int = 0,
    outbox: str = "",
) -> CheckResult:
    from gpulab.judge.loader import UnknownExercise, load

    try:
        grader = load(request.exercise, request.content_root)
    except UnknownExercise as exc:
        return CheckResult(Status.ERROR, str(exc), order=JUDGE_ORDER)
    except ModuleNotFoundError as exc:
        return CheckResult(
            Status.ERROR,
            f"this exercise needs `{exc.name}`, which is not "
            f"installed ({install_hint(exc.name or '')})",
            order=JUDGE_ORDER,
        )
    ctx = GradeContext(
        request=request,
        device=device,
        channel=channel,
        sandbox=sandbox,
        replayer=replayer,
        secret_seed=secret_seed,
        outbox=outbox,
    )
    message: str | None = None
    try:
        grader.grade(ctx)
    except LearnerError as exc:
        status, summary, message = Status.FAILED, exc.summary, exc.message
    except GradeFailed as exc:
        status = exc.status
        summary, message = exc.summary, exc.message
    else:
        bad = [c for c in ctx.cases if not c.passed]
        if bad:
            status = Status.FAILED
            summary = (
                f"{len(bad)} of {len(ctx.cases)} cases wrong; first: "
                f"{bad[0].name}: {bad[0].detail or ''}".rstrip(": ")
            )
        elif not ctx.cases:
            status, summary = Status.ERROR, "the grader checked no case (a gpulab bug)"
        else:
            status, summary = Status.PASSED, f"all {len(ctx.cases)} cases correct"
            if ctx.timing is not None and ctx.timing.summary:
                summary += "; " + ctx.timing.summary
            elif ctx.interpreter and ctx.uses_triton:
                summary += " (Triton interpreter on the CPU: correctness only, no timing)"
    implausible = ctx.timing.implausible if ctx.timing is not None else None
    if implausible and status is Status.PASSED:
        status, summary = Status.FAILED, "implausible timing: " + implausible
    mode = ("interpreter" if ctx.uses_triton else "cpu") if ctx.interpreter else "native"
    rest: JudgeKeys = {"mode": mode}
    if ctx.warmed:
        rest["compiled_ahead"] = ctx.warmed
    rest.update(ctx.json_only)
    # Advice, after the verdict and never part of it (gpulab.judge.cost).
    from gpulab.judge.cost import advice_keys

    rest.update(advice_keys(ctx, status is Status.PASSED))
    return CheckResult(
        status,
        summary,
        message=message,
        device=ctx.device_label or device_label(device, ctx.uses_triton),
        cases=list(ctx.cases),
        timing=None if ctx.timing is None else Timing.from_json(ctx.timing.to_json()),
        skipped=list(ctx.skipped),
        notes=list(ctx.notes),
        rest=dict(rest),
        order=JUDGE_ORDER,
    )
