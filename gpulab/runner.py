"""Run a check in a child process and collect its result (the parent side).

The learner's code never runs in the lab's own process. A check is a fresh
`python -m gpulab.child` in its own process session (so it and anything it
starts can be killed together) with a timeout. Events come back over a private
pipe, each line signed with a per-run key (HMAC), so text the learner's code
prints, or writes to stdout, can never pass for a result. The child's
stdout and stderr are kept as the learner's "output".

A crash, hang, CUDA fault or out-of-memory in the child becomes a failed check
with a clear message; the caller (CLI or TUI) carries on. Each check gets a
fresh child, so a dead CUDA context never leaks into the next run.

This module imports neither torch nor triton.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
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

DEFAULT_TIMEOUT = 300.0
OUTPUT_LIMIT = 4000

# Statuses of a result. `passed` is True only for "passed".
PASSED, FAILED, ERROR, TIMEOUT, CRASHED, CANCELLED = (
    "passed", "failed", "error", "timeout", "crashed", "cancelled",
)

EventCallback = Callable[[dict[str, Any]], None]


def sign(key: bytes, payload: str) -> str:
    return hmac.new(key, payload.encode(), hashlib.sha256).hexdigest()


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _tail(path: Path, limit: int = OUTPUT_LIMIT) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    text = data[-limit:].decode("utf-8", "replace")
    return ("…\n" if len(data) > limit else "") + text


def _diagnose_crash(code: int, output: str) -> tuple[str, str]:
    """A one-line summary and a hint for a child that died without a result."""
    low = output.lower()
    if "illegal memory access" in low or "misaligned address" in low:
        return ("CUDA illegal memory access (an out-of-bounds load or store)",
                "Check your masks and offsets; the next check runs in a fresh process.")
    if "out of memory" in low:
        return ("CUDA out of memory", "Free what you don't need, or allocate less.")
    if code < 0:
        name = _signal_name(-code)
        if name == "SIGSEGV":
            return ("crashed with a segmentation fault (SIGSEGV)",
                    "Often an out-of-bounds pointer in a kernel, or a bad ctypes/numpy call.")
        if name == "SIGABRT":
            return ("aborted (SIGABRT)", "A library assertion failed; see the output below.")
        if name == "SIGKILL":
            return ("was killed (SIGKILL), perhaps by the system for using too much memory", "")
        return (f"died from {name}", "")
    return (f"exited with code {code} before reporting a result", "")


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the child and everything it started (it leads its own session)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - unkillable child
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
    """Grade `file` for `lesson` in a child process and return the result dict.

    `device` is "auto" (CUDA when available, else the Triton interpreter on the
    CPU), "cpu" or "cuda". `timing=False` checks correctness only. `on_event`
    receives progress events ({"type": "stage"|"case", ...}) from the reader
    loop. Setting `cancel` stops the check (the child is killed).
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
    key = secrets.token_bytes(32)
    request = {
        "exercise": lesson.exercise,
        "function": lesson.function,
        "file": str(file),
        "timing": timing,
        "device": device,
        "flops": lesson.flops,
        "bytes": lesson.bytes,
        "kind": lesson.kind,
        "content_root": str(lesson.root),
        # Mixed into the public seeds so a solution can't memorise inputs.
        "secret_seed": secrets.randbelow(2**31),
        "key": key.hex(),
        **(extra or {}),
    }
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryDirectory(prefix="gpulab-check-") as tmp:
        out_path = Path(tmp) / "output.txt"
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env["GPULAB_CHANNEL_FD"] = str(write_fd)
        # The child must import the same gpulab as this process, installed or not.
        pkg_parent = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
        with open(out_path, "wb") as out:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "gpulab.child"],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    pass_fds=(write_fd,),
                    start_new_session=True,
                    cwd=str(file.parent) if file.parent.is_dir() else None,
                    env=env,
                )
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
            result, status_override = _read_events(proc, read_fd, key, started + timeout,
                                                   on_event, cancel)
        except BaseException:
            # Ctrl-C or any error here: no orphan processes.
            _kill_group(proc)
            raise
        finally:
            os.close(read_fd)
            if proc.poll() is None:
                # The result is in; give the child a moment to exit, then make sure.
                try:
                    proc.wait(timeout=2 if result else 0.1)
                except subprocess.TimeoutExpired:
                    pass
            _kill_group(proc)
        output = _tail(out_path)

    duration = round(time.monotonic() - started, 2)
    if status_override == TIMEOUT:
        return {**base, "status": TIMEOUT, "output": output, "duration_s": duration,
                "summary": f"timed out after {timeout:g} s (an infinite loop in Python or in a kernel?)",
                "message": "The check was stopped and its processes were killed. "
                           "Look for a loop whose bound never changes, or a kernel grid that "
                           "never finishes. Raise the limit with --timeout if it is just slow."}
    if status_override == CANCELLED:
        return {**base, "status": CANCELLED, "summary": "cancelled", "message": "",
                "output": output, "duration_s": duration}
    if result is None:
        code = proc.returncode if proc.returncode is not None else -9
        summary, hint = _diagnose_crash(code, output)
        return {**base, "status": CRASHED, "summary": f"your code {summary}",
                "message": hint, "output": output, "duration_s": duration}
    merged = {**base, **result, "output": output, "duration_s": duration}
    merged["passed"] = merged.get("status") == PASSED
    return merged


def _read_events(proc, read_fd, key, deadline, on_event, cancel):
    """Read signed event lines until a result, EOF, timeout or cancel."""
    buf = b""
    while True:
        if cancel is not None and cancel.is_set():
            _kill_group(proc)
            return None, CANCELLED
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            _kill_group(proc)
            return None, TIMEOUT
        ready, _, _ = select.select([read_fd], [], [], min(remaining, 0.1))
        if not ready:
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:  # the child closed the channel (exited)
            return None, None
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            payload, _, mac = line.decode("utf-8", "replace").rpartition("\t")
            if not hmac.compare_digest(mac, sign(key, payload)):
                continue  # not ours: ignore anything unsigned
            event = json.loads(payload)
            if event.get("type") == "result":
                return event["result"], None
            if on_event is not None:
                on_event(event)
