"""Drive one check: load the grader module, grade, report.

An exercise's grader is `gpulab.graders.<exercise>` with a function
`grade(ctx: GradeContext)` (gpulab.grading.interface declares it; only
gpulab.grading.loader loads one). It records cases with `ctx.add_case`, fails with
`ctx.fail` (or by letting a LearnerError escape), and sets `ctx.timing` on a
GPU. This module turns all of that into the result dict.

It runs in the judge: `ctx.function(name)` is a `Remote`, the learner's
function living in the sandbox, called through gpulab.grading.kernel or a
request of the exercise's own (`ctx.sandbox.request`).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from gpulab.grading.learner import LearnerError
from gpulab.install_hint import install_hint  # the same advice the CLI and the TUI give
from gpulab.protocol import CheckRequest
from gpulab.protocol import text as _text
from gpulab.status import Status

if TYPE_CHECKING:
    from gpulab.grading.interface import Channel
    from gpulab.grading.remote import Arena, Remote, Sandbox
    from gpulab.grading.replay import Replayer


class GradeFailed(Exception):
    def __init__(self, summary: str, message: str = "", status: str = Status.FAILED) -> None:
        super().__init__(summary)
        self.summary, self.message, self.status = summary, message, status


@dataclass
class GradeContext:
    request: CheckRequest
    device: str  # "cuda" or "cpu"
    channel: Channel
    # The judge's handle on the sandbox.
    sandbox: Sandbox
    cases: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timing: dict[str, Any] | None = None
    # Set by the kernel grader when kernels ran (in the interpreter on a CPU);
    # lessons without Triton (JAX, torch.compile, arithmetic) leave it False.
    uses_triton: bool = False
    # A grader may name where it ran ("8 simulated CPU devices (JAX)").
    device_label: str | None = None
    # The replay's sandbox on the CPU (gpulab.grading.replay), or None.
    replayer: Replayer | None = None
    # The judge's own: the seed mixed into every case's (never sent anywhere),
    # and a folder of its own a sandbox may write into (lesson 07's trace).
    secret_seed: int = 0
    outbox: str = ""
    _loaded: set[str] | None = None
    _arena: Arena | None = None

    @property
    def file(self) -> str:
        return self.request.file

    @property
    def interpreter(self) -> bool:
        """True when kernels run in the Triton interpreter on the CPU."""
        return self.device == "cpu"

    @property
    def want_timing(self) -> bool:
        return self.request.timing and self.device == "cuda"

    def seed(self, public: int) -> int:
        """A public seed mixed with this run's secret one."""
        return (public * 1_000_003 + self.secret_seed) % (2**31 - 1)

    def stage(self, text: str, done: int | None = None, total: int | None = None) -> None:
        if done is None:
            self.channel.stage(text)
        else:
            self.channel.stage(text, done, total)

    def correct(self) -> None:
        """Every correctness case passed and the timing begins: the lab shows
        that verdict now, and the grade when the timing ends (a timed check
        on a GPU takes several times as long as its correctness cases)."""
        self.channel.send({"type": "correct", "cases": len(self.cases)})

    def function(self, name: str | None = None) -> Remote:
        name = name or self.request.function
        from gpulab.grading.remote import Remote

        if self._loaded is None:
            self.stage("importing your file")
            if self.sandbox.pending:
                self.sandbox.pending = False
                reply = self.sandbox.receive()
            else:
                reply = self.sandbox.request({"type": "load", "functions": [name]})
            if reply.get("type") == "raised":
                raise LearnerError(_text(reply.get("summary")), _text(reply.get("message")))
            if reply.get("type") != "loaded":
                raise GradeFailed(
                    f"the sandbox could not load your file: {_text(reply.get('summary'))}",
                    status=Status.ERROR,
                )
            self._loaded = {n for n in reply.get("functions", []) if isinstance(n, str)}
        if name not in self._loaded:
            reply = self.sandbox.request({"type": "load", "functions": [name]})
            self._loaded |= {n for n in reply.get("functions", []) if isinstance(n, str)}
        if name not in self._loaded:
            raise LearnerError(
                f"{Path(self.file).name} does not define `{name}`",
                f"The exercise asks for a function named `{name}`.",
            )
        return Remote(name)

    def arena(self, nbytes: int) -> Arena:
        """Shared memory of at least `nbytes`, reused while it is big enough
        (the sandbox keeps every arena it was given mapped)."""
        if self._arena is None or self._arena.nbytes < nbytes:
            self._arena = self.sandbox.arena(
                max(nbytes, int(1.5 * (self._arena.nbytes if self._arena else 0)))
            )
        self._arena.reset()
        return self._arena

    def add_case(self, case: dict[str, Any], total: int | None = None) -> None:
        self.cases.append(case)
        self.channel.send({"type": "case", "index": len(self.cases), "total": total, "case": case})

    def fail(self, summary: str, message: str = "") -> NoReturn:
        raise GradeFailed(summary, message)


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
    from gpulab.grading.loader import UnknownExercise, load

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
        bad = [c for c in ctx.cases if not c.get("passed")]
        if bad:
            result.update(
                status=Status.FAILED,
                summary=f"{len(bad)} of {len(ctx.cases)} cases wrong; first: "
                f"{bad[0]['name']}: {bad[0].get('detail', '')}".rstrip(": "),
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
    result.update(cases=ctx.cases, skipped=ctx.skipped, notes=ctx.notes, timing=ctx.timing)
    return result
