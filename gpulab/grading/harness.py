"""Drive one check inside the child: load the grader module, grade, report.

An exercise's grader is `gpulab.grading.<exercise>` with a function
`grade(ctx: GradeContext)`. It records cases with `ctx.add_case`, fails with
`ctx.fail` (or by letting a LearnerError escape), and sets `ctx.timing` on a
GPU. This module turns all of that into the result dict the parent receives.
"""

from __future__ import annotations

import importlib
import platform
from dataclasses import dataclass, field
from typing import Any

from gpulab.grading.learner import LearnerError, get_function, load_module


class GradeFailed(Exception):
    def __init__(self, summary: str, message: str = "", status: str = "failed") -> None:
        super().__init__(summary)
        self.summary, self.message, self.status = summary, message, status


@dataclass
class GradeContext:
    request: dict[str, Any]
    device: str  # "cuda" or "cpu"
    channel: Any
    cases: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timing: dict[str, Any] | None = None
    # Set by the kernel grader when kernels ran (in the interpreter on a CPU);
    # lessons without Triton (JAX, torch.compile, arithmetic) leave it False.
    uses_triton: bool = False
    # A grader may name where it ran ("8 simulated CPU devices (JAX)").
    device_label: str | None = None
    _module: Any = None
    _snapshot: Any = None

    @property
    def file(self) -> str:
        return self.request["file"]

    @property
    def interpreter(self) -> bool:
        """True when kernels run in the Triton interpreter on the CPU."""
        return self.device == "cpu"

    @property
    def want_timing(self) -> bool:
        return bool(self.request.get("timing", True)) and self.device == "cuda"

    def seed(self, public: int) -> int:
        """A public seed mixed with this run's secret one."""
        return (public * 1_000_003 + int(self.request.get("secret_seed", 0))) % (2**31 - 1)

    def stage(self, text: str) -> None:
        self.channel.stage(text)

    def module(self) -> Any:
        if self._module is None:
            self.stage("importing your file")
            self._module = load_module(self.file)
            self.check_tampering()
        return self._module

    def check_tampering(self) -> None:
        """Fail now if the learner's code replaced torch's ops or the grader's."""
        if self._snapshot is None:
            return
        from gpulab.grading.guards import namespace_changes

        changed = namespace_changes(self._snapshot)
        if changed:
            raise GradeFailed(f"cheat: your code replaced {', '.join(changed[:5])} "
                              "(the grader's own functions or torch's ops)",
                              "A solution must not patch torch or gpulab.")

    def function(self, name: str | None = None) -> Any:
        return get_function(self.module(), name or self.request["function"], self.file)

    def add_case(self, case: dict[str, Any], total: int | None = None) -> None:
        self.cases.append(case)
        self.channel.send({"type": "case", "index": len(self.cases), "total": total,
                           "case": case})

    def fail(self, summary: str, message: str = "") -> None:
        raise GradeFailed(summary, message)


def device_label(device: str, triton: bool = True) -> str:
    if device == "cuda":
        import torch

        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.machine()})" + (", Triton interpreter" if triton else "")


# Optional modules whose install command is a gpulab extra.
EXTRAS = {"jax": "pip install 'gpulab[jax]'", "jaxlib": "pip install 'gpulab[jax]'"}


def install_hint(module: str) -> str:
    return EXTRAS.get(module, f"pip install {module}")


def grade_request(request: dict[str, Any], device: str, channel: Any) -> dict[str, Any]:
    exercise = request["exercise"]
    try:
        grader = importlib.import_module(f"gpulab.grading.{exercise}")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("gpulab"):
            return {"status": "error", "summary": f"no grader for exercise '{exercise}' yet"}
        return {"status": "error", "summary": f"this exercise needs `{exc.name}`, which is not "
                f"installed ({install_hint(exc.name or '')})"}
    ctx = GradeContext(request=request, device=device, channel=channel)
    from gpulab.grading.guards import namespace_changes, namespace_snapshot

    # Taken before the learner's file is imported: anything it swaps in
    # torch's ops or gpulab's grading code afterwards is a cheat.
    before = namespace_snapshot()
    ctx._snapshot = before
    result: dict[str, Any] = {}
    try:
        grader.grade(ctx)
    except LearnerError as exc:
        result.update(status="failed", summary=exc.summary, message=exc.message)
    except GradeFailed as exc:
        result.update(status=exc.status, summary=exc.summary, message=exc.message)
    else:
        bad = [c for c in ctx.cases if not c.get("passed")]
        if bad:
            result.update(status="failed",
                          summary=f"{len(bad)} of {len(ctx.cases)} cases wrong; first: "
                          f"{bad[0]['name']}: {bad[0].get('detail', '')}".rstrip(": "))
        elif not ctx.cases:
            result.update(status="error", summary="the grader checked no case (a gpulab bug)")
        else:
            summary = f"all {len(ctx.cases)} cases correct"
            if ctx.timing and ctx.timing.get("summary"):
                summary += "; " + ctx.timing["summary"]
            elif ctx.interpreter and ctx.uses_triton:
                summary += " (Triton interpreter on the CPU: correctness only, no timing)"
            result.update(status="passed", summary=summary)
    result["device"] = ctx.device_label or device_label(device, ctx.uses_triton)
    result["mode"] = ("interpreter" if ctx.uses_triton else "cpu") if ctx.interpreter else "native"
    changed = namespace_changes(before)
    if changed:
        result.update(status="failed", summary="cheat: your code replaced "
                      f"{', '.join(changed[:5])} (the grader's own functions or torch's ops)",
                      message="A solution must not patch torch or gpulab.")
    if ctx.timing and ctx.timing.get("implausible") and result.get("status") == "passed":
        result.update(status="failed", summary="implausible timing: " + ctx.timing["implausible"])
    result.update(cases=ctx.cases, skipped=ctx.skipped, notes=ctx.notes, timing=ctx.timing)
    return result
