"""Where a check that ran out of time was: the line of the learner's file.

An infinite loop in a kernel (a `while` whose bound never changes) or in a
wrapper ends at the check's time limit, and "timed out" alone leaves the
learner to guess which loop. When the lab's deadline passes it sends the
judge SIGUSR1 before stopping it (gpulab.lab.runner); the judge asks each
of its sandboxes for its Python stack (each registered faulthandler on
SIGUSR1 before any learner code ran: gpulab.sandbox.main), reads the dump
from what the sandbox printed, and answers with a `stuck` frame naming the
innermost frame in the learner's file, with that line's text from the bytes
the judge read.

The sandbox is the learner's process and prints what it likes, so this is
advice for the timeout's message, never part of a verdict; a learner who
prints a fake dump only misleads themselves.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

from gpulab.wire.events import Stuck
from gpulab.wire.sandbox_start import FORKED_NAME

# faulthandler's lines: `  File "/path/file.py", line 12 in softmax_kernel`.
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>\S+)\s*$')
_DUMP_START = "(most recent call first):"
DUMP_WAIT_S = 0.4  # for the sandboxes to print their stacks (a C handler: at once)


def sandbox_pids(root: int) -> list[int]:
    """The processes at or below `root` that run gpulab's sandbox (the
    keeper and its init run other code: they are left alone, since SIGUSR1
    would end the init, and the sandbox with it, before it printed)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def below(pid: int) -> bool:
        for _ in range(64):
            if pid == root:
                return True
            if pid not in parents:
                return False
            pid = parents[pid]
        return False

    found = []
    for pid in parents:
        if not below(pid):
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if len(argv) > 3 and b"gpulab.sandbox.main import main" in argv[3]:
                found.append(pid)
            # One the fork server forked has its command line: it is named.
            elif Path(f"/proc/{pid}/comm").read_bytes().strip() == FORKED_NAME:
                found.append(pid)
    return found


def last_dump(output: str) -> list[tuple[str, int, str]]:
    """The frames of the last stack dump in `output`, innermost first:
    (file, line, function). Every thread's dump is read; the first one
    with frames wins (faulthandler prints the current thread first)."""
    at = output.rfind(_DUMP_START)
    if at < 0:
        return []
    # Back to the start of the dump: the first thread's header line.
    head = output.rfind("\n\n", 0, at)
    frames = []
    for line in output[head + 1 :].splitlines():
        m = _FRAME.match(line)
        if m:
            frames.append((m["file"], int(m["line"]), m["name"]))
    return frames


def where_words(frames: list[tuple[str, int, str]], file: str, source: bytes | None) -> str:
    """'line 14 of softmax.py, in softmax_kernel: `while i < n:`' for the
    innermost frame in `file`; "" when no frame is the learner's."""
    want = os.path.realpath(file)
    for path, line, name in frames:
        # The replay's sandbox runs the kernels kept of the file from a copy
        # whose line numbers are the file's (gpulab.sandbox.replay.kernels).
        replayed = Path(path).name == "kernels.py" and Path(path).parent.name.startswith(
            "gpulab-replay-"
        )
        if os.path.realpath(path) != want and not replayed:
            continue
        words = f"line {line} of {Path(file).name}, in {name}"
        if replayed:
            words += " (as gpulab ran your kernels again)"
        if source is not None:
            lines = source.decode("utf-8", "replace").splitlines()
            if 0 < line <= len(lines) and lines[line - 1].strip():
                code = lines[line - 1].strip()
                words += f": `{code if len(code) <= 80 else code[:79] + '…'}`"
        return words
    return ""


class Reporter:
    """The judge's answer to SIGUSR1: told the check's file once it is read
    (`watch`); on the signal a thread asks every live sandbox for its stack
    and sends what it found on the channel."""

    def __init__(self, send: Any) -> None:
        self.send = send  # the channel's thread-safe frame writer
        self.file = ""
        self.source: bytes | None = None

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Not here: the main thread may be half-way through writing a frame.
        threading.Thread(target=self.report, name="gpulab-stuck", daemon=True).start()

    def report(self) -> None:
        from gpulab.judge.remote import live_sandboxes

        sandboxes = live_sandboxes()
        for box in sandboxes:
            for pid in sandbox_pids(box.proc.pid):
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGUSR1)
        time.sleep(DUMP_WAIT_S)
        words = ""
        for box in sandboxes:
            words = where_words(last_dump(box.output.recent()), self.file, self.source)
            if words:
                break
        self.send(Stuck(words).to_json())


_reporter: Reporter | None = None


def install(send: Any) -> None:
    """Answer the lab's SIGUSR1 from now on (the judge's main, at its start)."""
    global _reporter
    _reporter = Reporter(send)
    signal.signal(signal.SIGUSR1, _reporter._on_signal)


def watch(file: str, source: bytes | None) -> None:
    """The check's file and its bytes, as the judge read them."""
    if _reporter is not None:
        _reporter.file, _reporter.source = file, source
