"""A check's plan, decided once for the CLI and the lab: how long it may run
before it is killed and why, whether --explain applies, and which results
are recorded.

gpulab.lab.runner's default (300 s) is sized for a GPU check: compiling, autotuning
and timing a kernel at full size. On the CPU the Triton interpreter grades
correctness only, at reduced sizes, and every reference solution finishes
in under 15 s on a busy 2-core box (scripts/tools/app_speed.py measures it), so an
endless loop there is stopped after 60 s instead of five minutes. Past those
60 s the judge may give each case the time the interpreter needs for it
(gpulab.judge.allowance: in proportion to its size and to what the earlier
cases took, 10 minutes at most in all), so an honest kernel that is slow in
the interpreter is not taken for a loop; a limit the learner sets is kept
as it is. The message of a timed-out check says which limit applied, why,
and which case was running.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from gpulab.course.content import Lesson
from gpulab.explain.kinds import explain_unavailable
from gpulab.lab.runner import DEFAULT_TIMEOUT
from gpulab.wire.protocol import ExplainOptions
from gpulab.wire.result import CheckResult
from gpulab.wire.status import Status

CPU_TIMEOUT = 60.0
# How long a CPU check with no limit of the learner's may run in all: its
# cases may each be given more than CPU_TIMEOUT, in proportion to what the
# interpreter needs for them (gpulab.judge.allowance).
CPU_TIMEOUT_CAP = 600.0
CPU_REASON = (
    "this check ran on the CPU (the Triton interpreter, reduced sizes), where every "
    "reference solution finishes in under 15 s"
)
GPU_REASON = "a GPU check compiles, autotunes and times the kernel at full size"


def nvidia_gpu_visible() -> bool:
    """Whether a check with device "auto" will find a GPU, asked without torch
    (about 1.5 s to import): NVML, else the driver's files."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False  # CUDA hides every GPU from the child
    from gpulab.gpu import nvml

    try:
        nv = nvml.init()
    except Exception:  # noqa: BLE001 - no library, no driver: look for the driver's files
        return Path("/proc/driver/nvidia/version").exists()
    try:
        return int(nv.nvmlDeviceGetCount()) > 0
    except Exception:  # noqa: BLE001
        return False
    finally:
        nvml.shutdown(nv)


def default_timeout(device: str, gpu: bool | None = None) -> tuple[float, str]:
    """(seconds, why) for a check on `device` ("auto", "cpu", "cuda") when the
    learner set no limit. `gpu`: whether a GPU is visible, if already known."""
    if device == "cpu":
        return CPU_TIMEOUT, CPU_REASON
    if device == "auto" and not (nvidia_gpu_visible() if gpu is None else gpu):
        return CPU_TIMEOUT, CPU_REASON
    return DEFAULT_TIMEOUT, GPU_REASON


def explain_timeout(
    result: CheckResult, seconds: float, reason: str, option: str = "--timeout SECONDS"
) -> CheckResult:
    """A timed-out result with its message saying which limit applied and why."""
    if result.status == Status.TIMEOUT and reason:
        extra = f"The limit was {seconds:g} s because {reason}; {option} changes it."
        return replace(result, message=f"{result.message or ''} {extra}".strip())
    return result


# An --explain check's extra seconds: a sandbox of its own and a compile per
# kernel (docs/diagnosis.md).
EXPLAIN_EXTRA_S = 60.0


@dataclass(frozen=True)
class CheckPlan:
    """What `plan_check` decided: the limit and why, the explain options
    (None: no --explain), and a line for the learner ("" when none)."""

    timeout: float
    why: str
    explain: ExplainOptions | None
    note: str = ""
    # How long in all the judge may let the check run (its cases' own
    # times, gpulab.judge.allowance); None: `timeout` is the limit.
    cap: float | None = None


def plan_check(
    lesson: Lesson,
    *,
    device: str,
    limit: float | None = None,
    limit_why: str = "",
    explain: bool = False,
    explain_gpu: str | None = None,
    gpu_setting: str | None = None,
    gpu: bool | None = None,
) -> CheckPlan:
    """The check of `lesson` on `device`. `limit`: the learner's own limit
    (`limit_why` says where they set it), else the device's default; `gpu`:
    whether a GPU is visible, if the caller knows already. `--explain` on an
    exercise it cannot explain becomes a note instead of an option."""
    note = explain_unavailable(lesson) if explain else ""
    options = (
        ExplainOptions(gpu=explain_gpu, gpu_setting=gpu_setting) if explain and not note else None
    )
    cap = None
    if limit:
        timeout, why = limit, limit_why
    else:
        timeout, why = default_timeout(device, gpu)
        if timeout == CPU_TIMEOUT:  # the interpreter: cases may be given more
            cap = CPU_TIMEOUT_CAP
        if options is not None:
            timeout += EXPLAIN_EXTRA_S
            cap = cap + EXPLAIN_EXTRA_S if cap is not None else None
    return CheckPlan(timeout, why, options, note, cap)


def recorded(result: CheckResult) -> bool:
    """Whether a result counts as an attempt: every verdict, not a check that
    could not run (error) or that the learner stopped (cancelled)."""
    return result.status not in (Status.ERROR, Status.CANCELLED)
