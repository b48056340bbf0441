"""Run a check and collect its result (the lab's side).

The learner's code never runs in the lab's own process, nor in the process
that grades it. A check is a fresh judge (`python -m gpulab.judge`, in its
own session) which starts a confined sandbox for the learner's code; see
gpulab.judge and docs/grading.md. The judge's frames come back over a
private pipe that only the judge holds; the learner's printed output comes
back inside the result, as text.

A crash, hang, CUDA fault or out-of-memory becomes a failed check with a
clear message; the caller (CLI or TUI) carries on. Each check gets a fresh
judge and sandbox, so a dead CUDA context never leaks into the next run.

This module imports neither torch nor triton.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpulab import child
from gpulab.content import Lesson

# Statuses of a result (`passed` is True only for "passed").
from gpulab.protocol import (
    CANCELLED,
    CRASHED,
    ERROR,
    FAILED,
    PASSED,
    TIMEOUT,
    CheckRequest,
    ExplainOptions,
)

DEFAULT_TIMEOUT = 300.0
OUTPUT_LIMIT = 4000

__all__ = ["CANCELLED", "CRASHED", "ERROR", "FAILED", "PASSED", "TIMEOUT", "run_check"]

EventCallback = Callable[[dict[str, Any]], None]


def _tail(path: Path, limit: int = OUTPUT_LIMIT) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode("utf-8", "replace")
    return ("…\n" if len(data) > limit else "") + text


def _stop(proc: subprocess.Popen) -> None:
    """Ask the judge to stop (it kills the sandbox and everything under it),
    then make sure."""
    child.kill_tree(proc, term_s=3)


def run_check(
    lesson: Lesson,
    file: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    timing: bool = True,
    device: str = "auto",
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    workspace: str | None = None,
    explain: ExplainOptions | None = None,
) -> dict[str, Any]:
    """Grade `file` for `lesson` and return the result dict.

    `device` is "auto" (CUDA when available, else the Triton interpreter on the
    CPU), "cpu" or "cuda". `timing=False` checks correctness only. `on_event`
    receives progress events ({"type": "stage"|"case", ...}) from the reader
    loop. Setting `cancel` stops the check (its processes are killed).
    """
    started = time.monotonic()
    file = Path(file).resolve()
    base = {
        "exercise": lesson.exercise,
        "lesson": lesson.id,
        "file": str(file),
        "passed": False,
        "cases": [],
        "timing": None,
        "output": "",
    }
    request = CheckRequest(
        exercise=lesson.exercise,
        function=lesson.function,
        file=str(file),
        timing=timing,
        device=device,
        flops=lesson.flops,
        bytes=lesson.bytes,
        kind=lesson.kind,
        content_root=str(lesson.root),
        workspace=workspace,
        timeout=timeout,
        explain=explain is not None,
        explain_gpu=explain.gpu if explain else None,
        gpu_setting=explain.gpu_setting if explain else None,
        explain_budget_s=explain.budget_s if explain else None,
    )
    with tempfile.TemporaryDirectory(prefix="gpulab-judge-") as tmp:
        try:
            run = _judge(request, Path(tmp), started + timeout, on_event, cancel)
        except _NotStarted as failed:
            exc = failed.__cause__
            return {
                **base,
                "status": ERROR,
                "summary": f"could not start the check: {exc}",
                "message": str(exc),
                "duration_s": 0.0,
            }
    duration = round(time.monotonic() - started, 2)
    if run.stopped == child.TIMEOUT:
        return {
            **base,
            "status": TIMEOUT,
            "duration_s": duration,
            "summary": f"timed out after {timeout:g} s (an infinite loop in Python or in a kernel?)",
            "message": "The check was stopped and its processes were killed. "
            "Look for a loop whose bound never changes, or a kernel grid that "
            "never finishes. Raise the limit with --timeout if it is just slow.",
        }
    if run.stopped == child.CANCELLED:
        return {
            **base,
            "status": CANCELLED,
            "summary": str(CANCELLED),
            "message": "",
            "duration_s": duration,
        }
    if run.result is None:
        return {
            **base,
            "status": ERROR,
            "duration_s": duration,
            "summary": f"the grader stopped without a result (exit {run.returncode})",
            "message": run.log,
        }
    merged = {**base, **run.result, "duration_s": duration}
    merged["passed"] = merged.get("status") == PASSED
    stages = merged.get("stages")
    if isinstance(stages, dict) and all(isinstance(v, (int, float)) for v in stages.values()):
        # Before the judge's first stage: its process starting and importing.
        rest = round(max(0.0, duration - sum(stages.values())), 3)
        merged["stages"] = {"judge start-up": rest, **stages}
    return merged


class _NotStarted(Exception):
    """The judge could not be started (its OSError is the cause)."""


@dataclass
class _JudgeRun:
    result: dict[str, Any] | None  # the judge's result frame, None without one
    stopped: str | None  # child.TIMEOUT or child.CANCELLED when the lab stopped it
    returncode: int | None
    log: str  # the tail of the judge's own stdout and stderr


def _judge(
    request: CheckRequest,
    tmp: Path,
    deadline: float,
    on_event: EventCallback | None,
    cancel: threading.Event | None,
) -> _JudgeRun:
    """Start the judge in `tmp`, hand it `request`, relay its events until a
    result, its end, the deadline or `cancel`. Raises _NotStarted if it cannot start."""
    read_fd, write_fd = os.pipe()
    log_path = tmp / "judge.log"
    with open(log_path, "wb") as log:
        try:
            proc = child.spawn(
                child.python_module("gpulab.judge"),
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                cwd=tmp,
                env=child.env(PYTHONUNBUFFERED="1", GPULAB_EVENTS_FD=str(write_fd)),
            )
        except OSError as exc:
            os.close(read_fd)
            os.close(write_fd)
            raise _NotStarted from exc
    os.close(write_fd)
    result: dict[str, Any] | None = None
    events = child.Events(child.frame_reader(read_fd), deadline=deadline, cancel=cancel)
    try:
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(request.to_json()).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        result = _relay(events, on_event)
        if events.stopped:
            _stop(proc)
    except BaseException:
        _stop(proc)  # Ctrl-C or any error here: no orphan processes
        raise
    finally:
        os.close(read_fd)
        if proc.poll() is None:
            try:
                proc.wait(timeout=5 if result else 0.1)
            except subprocess.TimeoutExpired:
                _stop(proc)
    return _JudgeRun(result, events.stopped, proc.returncode, _tail(log_path))


def _relay(events: child.Events, on_event: EventCallback | None) -> dict[str, Any] | None:
    """The judge's result frame; every other frame goes to `on_event`."""
    for event in events:
        if event.get("type") == "result" and isinstance(event.get("result"), dict):
            return event["result"]
        if on_event is not None:
            on_event(event)
    return None
