"""The profile target: `python -m gpulab.targets.profiling EXERCISE FILE`.

It is the program that Nsight Systems, Nsight Compute or torch.profiler
records: it loads the learner's file, warms up, and runs a few steps between
cudaProfilerStart and cudaProfilerStop, so `--capture-range=cudaProfilerApi`
records the steady state only. Like a check, it runs in its own process: the
learner's code never runs in the lab's. It imports torch and the grader,
whose profile_step builds the step on the check's inputs; the lab's side
(paths, command lines, reading the trace) is gpulab.gpu.traces, the tables
gpulab.lab.report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpulab.gpu.traces import targets
from gpulab.textsafe import visible

if TYPE_CHECKING:
    from gpulab.judge.interface import ProfiledGrader

# --- the profile target (runs in its own process; imports torch) -----------------


def _run_target(argv: list[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m gpulab.targets.profiling")
    ap.add_argument("exercise", choices=targets())
    ap.add_argument("file")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument(
        "--torch-trace",
        metavar="OUT.json",
        help="record with torch.profiler and write a Chrome trace here",
    )
    args = ap.parse_args(argv)

    import torch

    from gpulab.sandbox.learner import LearnerError, load_module

    try:
        module = load_module(args.file)
    except LearnerError as exc:
        print(visible(f"gpulab: {exc.summary}\n{exc.message}"), file=sys.stderr)
        return 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)  # tiny tensors: OpenMP wake-ups cost more than the work
        return _profile(args, module, device)
    from gpulab.gpu.gpulock import gpu_in_use

    def waiting(message: str) -> None:
        print(f"gpulab: {message}", file=sys.stderr, flush=True)

    # Shared with other checks, never during someone's timing (gpulock).
    with gpu_in_use(torch.cuda.current_device(), waiting):
        return _profile(args, module, device)


def _profile(args: Any, module: Any, device: str) -> int:
    import torch

    step = _workload(args.exercise, module, device)
    for _ in range(3):  # warm-up: lazy init, cuBLAS handles, compilation
        step()

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

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
    # torch leaves these two unannotated: typed here for the strict check.
    profiler_start: Callable[[], None] = torch.cuda.profiler.start
    profiler_stop: Callable[[], None] = torch.cuda.profiler.stop
    if device == "cuda":
        profiler_start()  # cudaProfilerStart: nsys/ncu capture from here
    for _ in range(args.steps):
        step()
    sync()
    if device == "cuda":
        profiler_stop()
    return 0


def _workload(exercise: str, module: Any, device: str) -> Callable[[], object]:
    """One step of the learner's code on the check's inputs: the grader's
    profile_step (the manifest's `tools = [..., "profile"]`), through the
    judge's one loader."""
    from gpulab.judge.loader import load

    grader = cast("ProfiledGrader", load(exercise))
    return grader.profile_step(module, device)


if __name__ == "__main__":
    raise SystemExit(_run_target(sys.argv[1:]))
