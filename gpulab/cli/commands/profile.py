"""`gpulab profile EXERCISE`: profile your solution and show where the time goes.

Without options it records a few steady-state steps with torch.profiler (in a
child process, like a check), writes the Chrome/Perfetto trace to
<workspace>/traces/<exercise>.json and prints your ranges, the top operations
and, on a GPU, the top kernels. `--nsys` / `--ncu` run Nsight Systems /
Nsight Compute on the same program when they are installed; `--print-command`
only prints their command lines.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import (
    UsageError,
    console,
    exercise_file,
    find_lesson,
    guarded,
    open_course,
    open_workspace,
)
from gpulab.gpu import traces
from gpulab.lab import child, report

TIMEOUT_S = 600


def _target(args: Any) -> tuple[Any, Any, Path]:
    course = open_course()
    lesson = find_lesson(course, args.exercise)
    if lesson.exercise not in traces.targets():
        raise UsageError(
            f"`gpulab profile` runs {', '.join(traces.targets())}; "
            f"for {lesson.exercise} use `gpulab check` (it times on a GPU)"
        )
    ws = open_workspace(args)
    return lesson, ws, exercise_file(args, ws, lesson)[0]


def _run(argv: list[str], env: dict[str, str] | None = None) -> int:
    try:
        return subprocess.run(argv, timeout=TIMEOUT_S, env=env).returncode
    except subprocess.TimeoutExpired:
        raise UsageError(f"the profile took longer than {TIMEOUT_S} s and was stopped") from None
    except OSError as exc:
        raise UsageError(f"could not run {argv[0]}: {exc}") from None


def quiet_profiler() -> dict[str, str]:
    """Kineto, torch's profiler, logs every start and stop ("USDT: ...
    profiler_start") and, with torch's CUDA build on a machine without a
    GPU, "ERROR ... gpuGetDeviceCount failed with code 35": noise around the
    tables, none of it the learner's to act on. Quiet unless the learner
    set KINETO_LOG_LEVEL themselves (as the sandbox's, gpulab.judge.remote)."""
    return {} if "KINETO_LOG_LEVEL" in os.environ else {"KINETO_LOG_LEVEL": "6"}


@guarded
def run(args: Any) -> int:
    lesson, ws, path = _target(args)
    ex, steps = lesson.exercise, args.steps
    if steps < 1:
        raise UsageError("--steps must be at least 1")
    out_dir = traces.trace_dir(ws.root)
    # The learner's alone, as the check's traces: nsys, ncu and torch write
    # their files with the umask (0644), into a folder older gpulabs made 0755.
    out_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        out_dir.chmod(0o700)
    base = out_dir / ex
    found = traces.tools()
    nsys = traces.nsys_command(ex, path, base, steps=steps)
    ncu = traces.ncu_command(ex, path, base)
    con = console()
    if args.print_command:
        con.print(traces.shell_line(nsys), markup=False)
        con.print(traces.shell_line(ncu), markup=False)
        return 0
    for tool, cmd in (("nsys", nsys), ("ncu", ncu)):
        if getattr(args, tool):
            if not found[tool]:
                raise UsageError(
                    f"{tool} is not on PATH: install Nsight "
                    f"{'Systems' if tool == 'nsys' else 'Compute'} (it comes with "
                    "the CUDA toolkit), or run without --" + tool
                )
            con.print(f"[dim]$ {traces.shell_line(cmd)}[/]", highlight=False)
            code = _run(cmd, child.env())
            rep = f"{base}.{'nsys-rep' if tool == 'nsys' else 'ncu-rep'}"
            if code == 0 and tool == "nsys":
                # Per-range and per-kernel totals, straight from the report.
                _run(["nsys", "stats", "--report", "nvtx_sum,cuda_gpu_kern_sum", rep])
            con.print(
                f"report: {rep} (open it in Nsight {'Systems' if tool == 'nsys' else 'Compute'})"
                if code == 0
                else f"[red]{tool} exited with code {code}[/]"
            )
            return 0 if code == 0 else 1
    trace = traces.trace_path(ws.root, ex)
    argv = traces.target_argv(ex, path, steps=steps) + ["--torch-trace", str(trace)]
    con.print(f"[dim]profiling {path} with torch.profiler ({steps} steps)…[/]", highlight=False)
    code = _run(argv, child.env(**quiet_profiler()))
    if code != 0 or not trace.is_file():
        con.print(f"[red]the profile failed (exit code {code}); see the output above[/]")
        return 1
    summary = traces.read_trace(trace)
    if summary["ranges"]:
        con.print(report.ranges_table(summary["ranges"]))
    if summary["kernels"]:
        con.print(report.top_ops_table(summary["kernels"][:10], title="Top GPU kernels"))
    if lesson.profile_ops == "total":
        # The lesson's habit (its manifest entry): the operator your code
        # calls, by its total (its children do the work and may trade the
        # self-time lead).
        con.print(
            report.top_ops_table(summary["ops_by_total"][:12], title="Top operations (CPU total)")
        )
    else:
        con.print(report.top_ops_table(summary["ops"][:12], title="Top operations (self CPU time)"))
    con.print(
        f"trace: {trace}  (open it in https://ui.perfetto.dev or chrome://tracing)", markup=False
    )
    for tool, cmd in (("nsys", nsys), ("ncu", ncu)):
        if found[tool]:
            con.print(
                f"{tool} found: `gpulab profile {ex} --{tool}` runs\n  {traces.shell_line(cmd)}",
                markup=False,
            )
    return 0
