"""Profiles on the lab's side: trace paths, nsys/ncu command lines, and a
summary of the trace torch.profiler wrote.

Nothing here imports torch: the trace is Chrome/Perfetto JSON, written by the
check's judge or by the profile target (`python -m gpulab.targets.profiling`, its own
process) and summarised here in plain Python. The tables that show a summary
are gpulab.lab.report's.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

if TYPE_CHECKING:
    from gpulab.wire.protocol import JsonObject


def targets() -> list[str]:
    """The exercises `gpulab profile` can run: the manifest's `tools = ["profile"]`."""
    from gpulab.course.content import load_course

    return load_course().covered_by("profile")


def _profile_range(exercise: str) -> str:
    """The manifest's profile_range of `exercise` ("" for none)."""
    from gpulab.course.content import load_course

    lesson = load_course().find(exercise)
    return lesson.profile_range if lesson is not None and lesson.exercise == exercise else ""


RANGES = ("train_step", "forward", "loss", "backward", "optimizer_step")


def trace_dir(workspace_root: Path | str) -> Path:
    return Path(workspace_root) / "traces"


def trace_path(workspace_root: Path | str, exercise: str, suffix: str = ".json") -> Path:
    """Where a profile of `exercise` goes: <workspace>/traces/<exercise><suffix>."""
    return trace_dir(workspace_root) / f"{exercise}{suffix}"


def tools() -> dict[str, str | None]:
    """Paths of Nsight Systems (nsys) and Nsight Compute (ncu), None when absent."""
    return {"nsys": shutil.which("nsys"), "ncu": shutil.which("ncu")}


def target_argv(exercise: str, file: Path | str, *, steps: int = 5) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gpulab.targets.profiling",
        exercise,
        str(file),
        "--steps",
        str(steps),
    ]


def nsys_command(exercise: str, file: Path | str, out: Path | str, *, steps: int = 5) -> list[str]:
    """Nsight Systems: a timeline of the steady-state steps, with the NVTX ranges.

    The target brackets the steps with cudaProfilerStart/Stop, so only they
    are captured; `out` gets a .nsys-rep suffix from nsys.
    """
    return [
        "nsys",
        "profile",
        "--trace=cuda,nvtx,osrt",
        "--capture-range=cudaProfilerApi",
        "--capture-range-end=stop",
        "--force-overwrite=true",
        "-o",
        str(out),
        *target_argv(exercise, file, steps=steps),
    ]


def ncu_command(
    exercise: str, file: Path | str, out: Path | str, *, steps: int = 1, kernels: int = 20
) -> list[str]:
    """Nsight Compute: per-kernel counters for the first `kernels` kernels of
    the profiled steps (ncu replays each kernel many times, so keep it small).
    Where the manifest names the exercise's profile_range, only kernels
    inside that NVTX range are taken."""
    cmd = [
        "ncu",
        "--profile-from-start",
        "off",
        # ncu locks the clocks to the base clock by default: the kernel would
        # run slower than it does anywhere else. The course's counters
        # (BENCHMARKS.md) and --explain's Nsight step leave them alone too.
        "--clock-control",
        "none",
        "--set",
        "full",
        "--launch-count",
        str(kernels),
        "--force-overwrite",
        "-o",
        str(out),
    ]
    nvtx_range = _profile_range(exercise)
    if nvtx_range:
        cmd[1:1] = ["--nvtx", "--nvtx-include", f"{nvtx_range}/"]
    return cmd + target_argv(exercise, file, steps=steps)


def shell_line(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


# --- reading a trace ------------------------------------------------------------


class OpTime(TypedDict):
    """A CPU operator's row: its calls, self time and total time (the nvtx
    grader's rows add the time on the device: gpulab.judge.graders.nvtx_profile)."""

    name: str
    calls: int
    self_cpu_ms: float
    cpu_total_ms: float


class KernelTime(TypedDict):
    """A GPU kernel's row (the trace's, and the nvtx grader's profile's)."""

    name: str
    calls: int
    device_ms: float


class RangeCalls(TypedDict):
    """A user range (record_function) of the trace: its calls and wall time."""

    name: str
    calls: int
    ms: float


class RangeTime(TypedDict):
    """A range the nvtx grader found, as the result's profile lists it
    (gpulab.judge.nvtx_ranges.range_times): its wall time and how many ops
    ran inside it."""

    name: str
    ms: float
    ops: int


class TraceSummary(TypedDict):
    """`read_trace`'s answer: the top rows of each table, the ranges in order."""

    ops: list[OpTime]  # by self CPU time
    ops_by_total: list[OpTime]  # by CPU total time
    kernels: list[KernelTime]  # by device time
    ranges: list[RangeCalls]  # as first seen


def read_trace(path: Path | str) -> TraceSummary:
    """Summarise a torch.profiler Chrome trace: top CPU ops by self time (and
    by total time), top GPU kernels by total time, and the user ranges
    (record_function)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    complete = [
        e
        for e in events
        if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))
    ]
    ops: dict[str, OpTime] = {}
    kernels: dict[str, KernelTime] = {}
    ranges: dict[str, RangeCalls] = {}
    by_thread: dict[tuple[object, object], list[JsonObject]] = {}  # the trace's events
    for e in complete:
        cat = e.get("cat", "")
        if cat == "cpu_op":
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        elif cat == "kernel":
            name = e["name"]
            k = kernels.setdefault(name, {"name": name, "calls": 0, "device_ms": 0.0})
            k["calls"] += 1
            k["device_ms"] += e["dur"] / 1e3
        elif cat == "user_annotation" and not e["name"].startswith(("Optimizer.", "ProfilerStep")):
            name = e["name"]
            r = ranges.setdefault(name, {"name": name, "calls": 0, "ms": 0.0})
            r["calls"] += 1
            r["ms"] += e["dur"] / 1e3
    for evs in by_thread.values():
        _self_times(evs, ops)
    by_self = sorted(ops.values(), key=lambda r: r["self_cpu_ms"], reverse=True)
    by_total = sorted(ops.values(), key=lambda r: r["cpu_total_ms"], reverse=True)
    return {
        # Copies: the two tables share no row, so neither changes the other.
        "ops": [r.copy() for r in by_self[:TOP]],
        "ops_by_total": [r.copy() for r in by_total[:TOP]],
        "kernels": sorted(kernels.values(), key=lambda r: r["device_ms"], reverse=True)[:TOP],
        "ranges": list(ranges.values()),
    }


TOP = 15  # rows kept of each table


def _self_times(events: list[JsonObject], ops: dict[str, OpTime]) -> None:
    """Self time = duration minus the time of the ops nested directly inside."""
    events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
    stack: list[tuple[JsonObject, list[float]]] = []
    for e in events + [None]:
        while stack and (e is None or e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]):
            done, child = stack.pop()
            name = done["name"]
            row = ops.setdefault(
                name, {"name": name, "calls": 0, "self_cpu_ms": 0.0, "cpu_total_ms": 0.0}
            )
            row["calls"] += 1
            # An op inside one of its own name (aten::div_ with a scalar calls
            # aten::div_ with a tensor) is already in the outer one's total:
            # counted twice, the child outranked mean, its parent, in a
            # starter's profile on a loaded CPU.
            if not any(f["name"] == done["name"] for f, _ in stack):
                row["cpu_total_ms"] += done["dur"] / 1e3
            row["self_cpu_ms"] += max(0.0, done["dur"] - child[0]) / 1e3
            if stack:
                stack[-1][1][0] += done["dur"]
        if e is not None:
            stack.append((e, [0.0]))
