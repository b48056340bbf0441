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
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    ProtocolError,
    read_frame,
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
    try:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=3)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


def run_check(
    lesson: Lesson,
    file: Path,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    timing: bool = True,
    device: str = "auto",
    on_event: EventCallback | None = None,
    cancel: threading.Event | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Grade `file` for `lesson` and return the result dict.

    `device` is "auto" (CUDA when available, else the Triton interpreter on the
    CPU), "cpu" or "cuda". `timing=False` checks correctness only. `on_event`
    receives progress events ({"type": "stage"|"case", ...}) from the reader
    loop. Setting `cancel` stops the check (its processes are killed).
    """
    started = time.monotonic()
    file = Path(file).resolve()
    base = {"exercise": lesson.exercise, "lesson": lesson.id, "file": str(file),
            "passed": False, "cases": [], "timing": None, "output": ""}
    extra = dict(extra or {})
    request = CheckRequest(
        exercise=lesson.exercise, function=lesson.function, file=str(file), timing=timing,
        device=device, flops=lesson.flops, bytes=lesson.bytes, kind=lesson.kind,
        content_root=str(lesson.root), workspace=extra.pop("workspace", None),
        timeout=timeout, extra=extra).to_json()
    request.update(request.pop("extra"))  # graders read extras at the top level
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryDirectory(prefix="gpulab-judge-") as tmp:
        log_path = Path(tmp) / "judge.log"
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env["GPULAB_EVENTS_FD"] = str(write_fd)
        # The judge must import the same gpulab as this process, installed or not.
        pkg_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
        with open(log_path, "wb") as log:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gpulab.judge"], stdin=subprocess.PIPE,
                    stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,),
                    start_new_session=True, cwd=tmp, env=env)
            except OSError as exc:
                os.close(read_fd)
                os.close(write_fd)
                return {**base, "status": ERROR, "summary": f"could not start the check: {exc}",
                        "message": str(exc), "duration_s": 0.0}
        os.close(write_fd)
        result: dict[str, Any] | None = None
        status_override = None
        try:
            assert proc.stdin is not None
            try:
                proc.stdin.write(json.dumps(request).encode())
                proc.stdin.close()
            except BrokenPipeError:
                pass
            result, status_override = _read_events(proc, read_fd, started + timeout,
                                                   on_event, cancel)
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
        judge_log = _tail(log_path)

    duration = round(time.monotonic() - started, 2)
    if status_override == TIMEOUT:
        return {**base, "status": TIMEOUT, "duration_s": duration,
                "summary": f"timed out after {timeout:g} s (an infinite loop in Python or in a kernel?)",
                "message": "The check was stopped and its processes were killed. "
                           "Look for a loop whose bound never changes, or a kernel grid that "
                           "never finishes. Raise the limit with --timeout if it is just slow."}
    if status_override == CANCELLED:
        return {**base, "status": CANCELLED, "summary": "cancelled", "message": "",
                "duration_s": duration}
    if result is None:
        code = proc.returncode
        return {**base, "status": ERROR, "duration_s": duration,
                "summary": f"the grader stopped without a result (exit {code})",
                "message": judge_log}
    merged = {**base, **result, "duration_s": duration}
    merged["passed"] = merged.get("status") == PASSED
    return merged


def _read_events(proc, read_fd, deadline, on_event, cancel):
    """Read the judge's frames until a result, EOF, timeout or cancel."""
    while True:
        if cancel is not None and cancel.is_set():
            _stop(proc)
            return None, CANCELLED
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _stop(proc)
            return None, TIMEOUT
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.1))
        if not ready:
            continue
        try:
            event = read_frame(read_fd)
        except (EOFError, ProtocolError, OSError):
            return None, None
        if event.get("type") == "result" and isinstance(event.get("result"), dict):
            return event["result"], None
        if on_event is not None:
            on_event(event)
