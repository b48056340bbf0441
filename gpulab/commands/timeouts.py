"""How long a check may run before it is killed, and why (CLI and TUI).

gpulab.runner's default (300 s) is sized for a GPU check: compiling, autotuning
and timing a kernel at full size. On the CPU the Triton interpreter grades
correctness only, at reduced sizes, and every reference solution finishes
in under 15 s on a busy 2-core box (scripts/tools/app_speed.py measures it), so an
endless loop there is stopped after 60 s instead of five minutes. The
message of a timed-out check says which limit applied and why.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpulab.runner import DEFAULT_TIMEOUT, TIMEOUT

CPU_TIMEOUT = 60.0
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
    from gpulab.device import nvml

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
    result: dict[str, Any], seconds: float, reason: str, option: str = "--timeout SECONDS"
) -> dict[str, Any]:
    """Add to a timed-out result's message which limit applied and why."""
    if result.get("status") == TIMEOUT and reason:
        extra = f"The limit was {seconds:g} s because {reason}; {option} changes it."
        result["message"] = f"{result.get('message', '')} {extra}".strip()
    return result
