"""What a check reports when its sandbox died or broke the protocol."""

from __future__ import annotations

import subprocess
from typing import TYPE_CHECKING

from gpulab.wire import crashes, protocol
from gpulab.wire.result import JUDGE_ORDER, CheckResult
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from gpulab.judge.remote import Sandbox, SandboxDied
    from gpulab.wire.sandbox_start import Policy


def crash_result(
    exc: SandboxDied | protocol.ProtocolError, sandbox: Sandbox | None, policy: Policy
) -> CheckResult:
    """The result of a check whose sandbox died (`exc` SandboxDied) or
    wrote to its private channel to the grader (a ProtocolError): the
    crash in the learner's words."""
    code = None
    if sandbox is not None and isinstance(exc, protocol.ProtocolError):
        sandbox.killed_by_judge = (
            "your code wrote to the sandbox's private channel to the grader (stopped by gpulab)"
        )
    elif sandbox is not None:
        try:
            code = sandbox.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            sandbox.killed_by_judge = "your code stopped answering (stopped by gpulab)"
    summary, hint = crashes.crash_summary(
        code,
        sandbox.killed_by_judge if sandbox else "",
        policy,
        sandbox.output.text() if sandbox else "",
    )
    return CheckResult(
        Status.CRASHED if code is not None else Status.FAILED,
        summary,
        message=hint or str(exc),
        order=JUDGE_ORDER,
    )
