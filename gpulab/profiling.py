"""Profiles for the app: trace paths, top-operation tables, nsys/ncu command lines.

Nothing here imports torch at module level: the app reads the Chrome/Perfetto
trace JSON that torch.profiler wrote (in the check's child process, or in the
profile target below) and summarises it in plain Python.

`python -m gpulab.profiling EXERCISE FILE` is the program that Nsight Systems,
Nsight Compute or torch.profiler records: it loads the learner's file, warms
up, and runs a few steps between cudaProfilerStart and cudaProfilerStop, so
`--capture-range=cudaProfilerApi` records the steady state only. Like a check,
it runs in its own process: the learner's code never runs in the lab's.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from gpulab.textsafe import visible

# Exercises with a profile target (what `gpulab profile` can run).
TARGETS = ("nvtx_profile", "graph_breaks")
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
    return [sys.executable, "-m", "gpulab.profiling", exercise, str(file), "--steps", str(steps)]


def nsys_command(exercise: str, file: Path | str, out: Path | str, *, steps: int = 5) -> list[str]:
    """Nsight Systems: a timeline of the steady-state steps, with the NVTX ranges.

    The target brackets the steps with cudaProfilerStart/Stop, so only they
    are captured; `out` gets a .nsys-rep suffix from nsys.
    """
    return ["nsys", "profile", "--trace=cuda,nvtx,osrt", "--capture-range=cudaProfilerApi",
            "--capture-range-end=stop", "--force-overwrite=true", "-o", str(out),
            *target_argv(exercise, file, steps=steps)]


def ncu_command(exercise: str, file: Path | str, out: Path | str, *, steps: int = 1,
                kernels: int = 20) -> list[str]:
    """Nsight Compute: per-kernel counters for the first `kernels` kernels of
    the profiled steps (ncu replays each kernel many times, so keep it small).
    For nvtx_profile only kernels inside the NVTX range train_step are taken."""
    cmd = ["ncu", "--profile-from-start", "off", "--set", "full", "--launch-count", str(kernels),
           "--force-overwrite", "-o", str(out)]
    if exercise == "nvtx_profile":
        cmd[1:1] = ["--nvtx", "--nvtx-include", "train_step/"]
    return cmd + target_argv(exercise, file, steps=steps)


def shell_line(argv: list[str]) -> str:
    import shlex

    return " ".join(shlex.quote(a) for a in argv)


# --- reading a trace ------------------------------------------------------------

def read_trace(path: Path | str) -> dict[str, Any]:
    """Summarise a torch.profiler Chrome trace: top CPU ops by self time, top
    GPU kernels by total time, and the user ranges (record_function)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    complete = [e for e in events if isinstance(e, dict) and e.get("ph") == "X"
                and isinstance(e.get("dur"), (int, float))]
    ops: dict[str, dict[str, float]] = {}
    kernels: dict[str, dict[str, float]] = {}
    ranges: dict[str, dict[str, float]] = {}
    by_thread: dict[tuple, list[dict]] = {}
    for e in complete:
        cat = e.get("cat", "")
        if cat == "cpu_op":
            by_thread.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        elif cat == "kernel":
            k = kernels.setdefault(e["name"], {"calls": 0, "device_ms": 0.0})
            k["calls"] += 1
            k["device_ms"] += e["dur"] / 1e3
        elif cat == "user_annotation" and not e["name"].startswith(("Optimizer.", "ProfilerStep")):
            r = ranges.setdefault(e["name"], {"calls": 0, "ms": 0.0})
            r["calls"] += 1
            r["ms"] += e["dur"] / 1e3
    for evs in by_thread.values():
        _self_times(evs, ops)
    return {
        "ops": _rows(ops, "self_cpu_ms"),
        "kernels": _rows(kernels, "device_ms"),
        "ranges": [{"name": n, **v} for n, v in ranges.items()],
    }


def _self_times(events: list[dict], ops: dict[str, dict[str, float]]) -> None:
    """Self time = duration minus the time of the ops nested directly inside."""
    events = sorted(events, key=lambda e: (e["ts"], -e["dur"]))
    stack: list[tuple[dict, list[float]]] = []
    for e in events + [None]:
        while stack and (e is None or e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]):
            done, child = stack.pop()
            row = ops.setdefault(done["name"], {"calls": 0, "self_cpu_ms": 0.0,
                                                "cpu_total_ms": 0.0})
            row["calls"] += 1
            row["cpu_total_ms"] += done["dur"] / 1e3
            row["self_cpu_ms"] += max(0.0, done["dur"] - child[0]) / 1e3
            if stack:
                stack[-1][1][0] += done["dur"]
        if e is not None:
            stack.append((e, [0.0]))


def _rows(table: dict[str, dict[str, float]], key: str, n: int = 15) -> list[dict[str, Any]]:
    rows = [{"name": name, **v} for name, v in table.items()]
    rows.sort(key=lambda r: r[key], reverse=True)
    return rows[:n]


# --- rendering (rich, imported lazily) ---------------------------------------------

def _short(name: str, width: int = 60) -> Any:
    """A name from the trace as plain Text: learner code chooses range names, so
    they are neither markup nor terminal commands (gpulab.textsafe)."""
    from rich.text import Text

    name = visible(name)
    return Text(name if len(name) <= width else name[: width - 1] + "…")


def top_ops_table(rows: list[dict[str, Any]], *, title: str = "Top operations") -> Any:
    """Rows as produced by read_trace (ops or kernels) or the grader's top_ops."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    cols = [c for c in ("calls", "self_cpu_ms", "cpu_total_ms", "self_device_ms", "device_ms")
            if rows and c in rows[0] and any(r.get(c) for r in rows)]
    t.add_column("operation", overflow="fold")
    for c in cols:
        t.add_column(c.replace("_ms", " ms").replace("_", " "), justify="right")
    for r in rows:
        t.add_row(_short(r["name"]), *(str(r[c]) if c == "calls" else f"{r[c]:.3f}"
                                       for c in cols))
    return t


def ranges_table(ranges: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    t = Table(title="Your ranges", title_justify="left")
    t.add_column("range")
    t.add_column("ms", justify="right")
    t.add_column("calls / ops", justify="right")
    for r in ranges:
        t.add_row(_short(r["name"], 80), f"{r['ms']:.3f}", str(r.get("calls", r.get("ops", ""))))
    return t


def render_profile(profile: dict[str, Any]) -> Any:
    """A check result's timing["profile"] (see gpulab.grading.nvtx_profile)."""
    from rich.console import Group
    from rich.text import Text

    parts: list[Any] = []
    if profile.get("ranges"):
        parts.append(ranges_table(profile["ranges"]))
    if profile.get("top_kernels"):
        parts.append(top_ops_table(profile["top_kernels"], title="Top GPU kernels"))
    if profile.get("top_ops"):
        parts.append(top_ops_table(profile["top_ops"], title="Top operations"))
    if profile.get("nvtx") is not None:
        seen = visible(", ".join(map(str, profile["nvtx"]))) or "none"
        parts.append(Text(f"NVTX ranges pushed (what Nsight Systems shows): {seen}", style="dim"))
    return Group(*parts)


# --- the profile target (runs in its own process; imports torch) -----------------

def _run_target(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpulab.profiling")
    ap.add_argument("exercise", choices=TARGETS)
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--torch-trace", metavar="OUT.json",
                    help="record with torch.profiler and write a Chrome trace here")
    args = ap.parse_args(argv)

    import torch

    from gpulab.grading.learner import LearnerError, load_module

    try:
        module = load_module(args.file)
    except LearnerError as exc:
        print(visible(f"gpulab: {exc.summary}\n{exc.message}"), file=sys.stderr)
        return 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # tiny tensors: OpenMP wake-ups cost more than the work
    step = _workload(args.exercise, module, device)
    for _ in range(3):  # warm-up: lazy init, cuBLAS handles, compilation
        step()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    if args.torch_trace:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=acts) as prof:
            for _ in range(args.steps):
                step()
            sync()
        Path(args.torch_trace).parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(args.torch_trace)
        return 0
    if device == "cuda":
        torch.cuda.profiler.start()  # cudaProfilerStart: nsys/ncu capture from here
    for _ in range(args.steps):
        step()
    sync()
    if device == "cuda":
        torch.cuda.profiler.stop()
    return 0


def _workload(exercise: str, module: Any, device: str) -> Any:
    import torch

    if exercise == "nvtx_profile":
        from gpulab.grading import nvtx_profile as g

        model, opt = g.make_model(0, device)
        batch = g.make_batch(0, device)
        return lambda: module.train_step(model, batch, opt)
    from gpulab.grading import graph_breaks as g

    b, s, d = g.TIMING_SHAPES[-1] if device == "cuda" else g.CASES[1][:3]
    args = g.make_inputs(b, s, d, 0, rms=8.0, device=device)
    compiled = torch.compile(module.step)

    def both() -> None:
        for name, fn in (("eager", module.step), ("compiled", compiled)):
            # A named range for torch.profiler and, on a GPU, for nsys.
            with torch.no_grad(), torch.profiler.record_function(name):
                if device == "cuda":
                    torch.cuda.nvtx.range_push(name)
                fn(*args)
                if device == "cuda":
                    torch.cuda.nvtx.range_pop()

    return both


if __name__ == "__main__":
    raise SystemExit(_run_target(sys.argv[1:]))
