"""Drive one check: load the grader module, grade, report.

An exercise's grader is `gpulab.judge.graders.<exercise>` with a function
`grade(ctx: GradeContext)` (gpulab.judge.interface declares it; only
gpulab.judge.loader loads one, and gpulab.judge.context is what it is
given). This module turns the cases, failures and timing it recorded on
`ctx` into the result dict.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

from gpulab.check.install_hint import install_hint  # the same advice the CLI and the TUI give
from gpulab.check.protocol import CheckRequest
from gpulab.check.status import Status
from gpulab.judge.context import GradeContext, GradeFailed
from gpulab.sandbox.learner import LearnerError

if TYPE_CHECKING:
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
) -> dict[str, Any]:
    from gpulab.judge.loader import UnknownExercise, load

    try:
        grader = load(request.exercise, request.content_root)
    except UnknownExercise as exc:
        return {"status": Status.ERROR, "summary": str(exc)}
    except ModuleNotFoundError as exc:
        return {
            "status": Status.ERROR,
            "summary": f"this exercise needs `{exc.name}`, which is not "
            f"installed ({install_hint(exc.name or '')})",
        }
    ctx = GradeContext(
        request=request,
        device=device,
        channel=channel,
        sandbox=sandbox,
        replayer=replayer,
        secret_seed=secret_seed,
        outbox=outbox,
    )
    result: dict[str, Any] = {}
    try:
        grader.grade(ctx)
    except LearnerError as exc:
        result.update(status=Status.FAILED, summary=exc.summary, message=exc.message)
    except GradeFailed as exc:
        result.update(status=exc.status, summary=exc.summary, message=exc.message)
    else:
        bad = [c for c in ctx.cases if not c.passed]
        if bad:
            result.update(
                status=Status.FAILED,
                summary=f"{len(bad)} of {len(ctx.cases)} cases wrong; first: "
                f"{bad[0].name}: {bad[0].detail or ''}".rstrip(": "),
            )
        elif not ctx.cases:
            result.update(status=Status.ERROR, summary="the grader checked no case (a gpulab bug)")
        else:
            summary = f"all {len(ctx.cases)} cases correct"
            if ctx.timing and ctx.timing.get("summary"):
                summary += "; " + ctx.timing["summary"]
            elif ctx.interpreter and ctx.uses_triton:
                summary += " (Triton interpreter on the CPU: correctness only, no timing)"
            result.update(status=Status.PASSED, summary=summary)
    result["device"] = ctx.device_label or device_label(device, ctx.uses_triton)
    result["mode"] = ("interpreter" if ctx.uses_triton else "cpu") if ctx.interpreter else "native"
    if ctx.timing and ctx.timing.get("implausible") and result.get("status") == Status.PASSED:
        result.update(
            status=Status.FAILED, summary="implausible timing: " + ctx.timing["implausible"]
        )
    result.update(
        cases=[c.json for c in ctx.cases], skipped=ctx.skipped, notes=ctx.notes, timing=ctx.timing
    )
    if ctx.warmed:
        result["compiled_ahead"] = ctx.warmed
    return result
