"""The one process boundary: how gpulab starts a child, reads it, and stops it.

Every GPU measurement and every learner's file runs in a child process, never
in the lab's own (a crash, a hang or a dead CUDA context then costs a child,
not the TUI). The lab's supervisors (gpulab.lab.runner for checks,
gpulab.lab.microbench_runner for the ceilings, gpulab.measure.torch_probe,
`gpulab profile`, `gpulab bench` and the sweeps in scripts/) all start,
watch and stop their children through here:

- `env()`: the child imports the same gpulab as this process, installed or
  not (PYTHONPATH led by the folder that holds this package);
- `spawn()`: the child leads a new session, so its process group holds every
  descendant that does not leave it, and `kill_tree` reaches them all;
- `kill_tree()`: ask first (SIGTERM, or the child's own way out), then SIGKILL
  the whole group;
- `Events`: the child's events, one at a time, until it ends, the deadline
  passes or `cancel` is set; from a private pipe of frames
  (`frame_reader`) or from JSON lines on its stdout (`json_line_reader`).

The sandbox that runs a learner's file is one level further down and has
its own, stricter recipe (an allow-listed environment, a private HOME and
TMPDIR, `python -I`): gpulab.judge.remote and docs/grading.md.

Imports neither torch nor triton; safe from a UI thread worker.
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from gpulab.fsutil import own_temp_folder
from gpulab.wire.protocol import JsonObject
from gpulab.wire.status import Status

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


def env(**extra: str) -> dict[str, str]:
    """This process's environment for a trusted child, with `extra` set and
    PYTHONPATH led by the folder holding this gpulab."""
    out = dict(os.environ)
    out.update(extra)
    if "TORCHINDUCTOR_CACHE_DIR" not in out:
        # Inductor's own default is <temp>/torchinductor_<user>, a name any
        # user can make first (0777): the code and pickles it finds there it
        # loads and runs, so another user's edits ran as this one (the judge
        # compiles lesson 05's reference, `gpulab profile` the learner's step).
        try:
            out["TORCHINDUCTOR_CACHE_DIR"] = str(own_temp_folder("gpulab-inductor"))
        except OSError:
            pass  # no temp folder to write: Inductor has nowhere to cache either
    out["PYTHONPATH"] = PACKAGE_PARENT + os.pathsep + out.get("PYTHONPATH", "")
    return out


def python_module(module: str, *args: str) -> list[str]:
    """argv for `python -m module args` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def spawn(argv: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start `argv` leading its own session (and so its own process group).
    Raises OSError when it cannot start; `popen` goes to subprocess.Popen."""
    return subprocess.Popen(argv, start_new_session=True, **popen)


def kill_tree(proc: subprocess.Popen[Any], *, term_s: float = 0.0, exit_s: float = 0.0) -> None:
    """Stop `proc` and everything in its process group. Never raises.

    `term_s`: send SIGTERM first and give the child that long to stop what it
    started (the judge kills its sandbox on SIGTERM). `exit_s`: wait that long
    for the child to end by itself first (one whose work is done). Then SIGKILL
    the group, and the child itself in case it left its group.
    """
    if exit_s and proc.poll() is None:
        try:
            proc.wait(timeout=exit_s)
        except subprocess.TimeoutExpired:
            pass
    if term_s and proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGTERM)
            proc.wait(timeout=term_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    # The group outlives its leader: a descendant still in it is killed even
    # when the child itself has already exited.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
        proc.wait(timeout=5)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass


class _End(Exception):
    """The child closed its side: no more events."""


End = _End  # for a reader used past the Events loop (gpulab.lab.runner)


# A reader waits up to `timeout` seconds for one event: it returns the event,
# None when none came, and raises _End at the end of the stream.
Reader = Callable[[float], "JsonObject | None"]


def frame_reader(fd: int) -> Reader:
    """Events as gpulab.wire.protocol frames on a pipe only the child holds."""
    from gpulab.wire.protocol import ProtocolError, read_frame

    def read(timeout: float) -> JsonObject | None:
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return None
        try:
            return read_frame(fd)
        except (EOFError, ProtocolError, OSError):
            raise _End from None

    return read


def json_line_reader(stream: IO[str]) -> Reader:
    """Events as JSON objects, one a line, on the child's stdout. Other lines
    (library chatter) are skipped. A thread reads the pipe, so a child that
    prints nothing never blocks the deadline or the cancel check."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()

    def read(timeout: float) -> JsonObject | None:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise _End
        try:
            event = json.loads(line)
        except ValueError:
            return None
        return event if isinstance(event, dict) else None

    return read


class Events:
    """`for event in Events(reader, deadline=..., cancel=...)`: the child's
    events until it ends; then `stopped` is Status.TIMEOUT, Status.CANCELLED
    or None (the child ended the stream). Stopping the child is the
    caller's (kill_tree)."""

    def __init__(
        self,
        reader: Reader,
        *,
        deadline: float,
        cancel: threading.Event | None = None,
        poll_s: float = 0.1,
    ) -> None:
        self.reader, self.deadline, self.cancel, self.poll_s = reader, deadline, cancel, poll_s
        self.stopped: Status | None = None

    def __iter__(self) -> Iterator[JsonObject]:
        while True:
            if self.cancel is not None and self.cancel.is_set():
                self.stopped = Status.CANCELLED
                return
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.stopped = Status.TIMEOUT
                return
            try:
                event = self.reader(min(remaining, self.poll_s))
            except _End:
                return
            if event is not None:
                yield event
