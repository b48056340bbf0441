"""One timing run per GPU at a time, and no other gpulab kernel beside it,
across processes and users.

Timing on a shared GPU box is only honest if nobody else's kernel runs at
the same time. Two advisory locks per GPU, files in the system temp folder:

- every timing phase (grader timing, microbenchmarks, bench) holds the GPU
  *exclusive*; a waiting learner is told who holds it;
- every other phase of a check on the GPU (correctness runs, profiling,
  Nsight) holds it *shared* (`gpu_in_use`): many checks at once, but none
  while someone times. Without this, one learner's correctness runs landed
  in another's timed batches, and the judge rightly refused that timing as
  "work outside the timed region" (an H200 measurement, 2026-12-02: 33 ms a
  call unexplained, from a neighbour's long kernels).

A check holds its shared hold for its whole life and hands it back while it
times (`gpu_timing_lock` does that itself): a process never waits on its
own lock. A gate file gives a waiting timer priority, so that checks
starting later wait behind it rather than keeping it out for ever:
readers take the gate shared only while they join; a timer holds it
exclusive while it waits and times.

Processes that are not gpulab's are outside these locks; the judge names
them when a timing is refused (gpulab.device.nvml.other_processes).
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock (Windows): nothing to serialise with
    fcntl = None  # type: ignore[assignment]

# This process's shared holds: GPU index -> [fd of the main lock, depth].
_shared: dict[int, list[int]] = {}


def lock_dir() -> Path:
    return Path(os.environ.get("GPULAB_LOCK_DIR") or tempfile.gettempdir())


def _paths(gpu: int) -> tuple[Path, Path, Path]:
    base = lock_dir() / f"gpulab-gpu{gpu}"
    return base.with_suffix(".lock"), base.with_suffix(".holder"), base.with_suffix(".gate")


def holder(gpu: int = 0) -> dict[str, Any] | None:
    """Who holds the GPU's timing lock, as they wrote it, or None."""
    try:
        written: dict[str, Any] = json.loads(_paths(gpu)[1].read_text())
        return written
    except (OSError, ValueError):
        return None


def describe(h: dict[str, Any] | None) -> str:
    if not h:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(h.get("since", 0)))
    return f"{h.get('user', '?')} (pid {h.get('pid', '?')}, {h.get('what', '?')}, since {since})"


def _open_shared(path: Path) -> int:
    # World-writable so learners on one box share the lock; umask would
    # otherwise leave it writable by its creator only.
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        # Another user's file that umask left read-only: flock needs no write.
        try:
            return os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot open the GPU lock {path}: {exc.strerror} (ask its owner)"
            ) from exc
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


def _flock(
    fd: int, op: int, why: Callable[[], str], on_wait: Callable[[str], None] | None, poll_s: float
) -> None:
    """flock(fd, op), polling, telling `on_wait` why it waits (once per reason)."""
    told = None
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            msg = why()
            if on_wait and msg != told:
                on_wait(msg)
                told = msg
            time.sleep(poll_s)


def _join(gpu: int, fd: int, on_wait: Callable[[str], None] | None, poll_s: float) -> None:
    """Take the main lock shared on `fd`, behind any timer already waiting."""
    gate = _open_shared(_paths(gpu)[2])
    try:
        _flock(gate, fcntl.LOCK_SH, lambda: _timing_msg(gpu), on_wait, poll_s)
        _flock(fd, fcntl.LOCK_SH, lambda: _timing_msg(gpu), on_wait, poll_s)
    finally:
        os.close(gate)  # closing drops the gate: it was only for joining


def _timing_msg(gpu: int) -> str:
    return f"waiting for the GPU: timing is held by {describe(holder(gpu))}"


@contextlib.contextmanager
def gpu_in_use(
    gpu: int = 0, on_wait: Callable[[str], None] | None = None, poll_s: float = 0.5
) -> Iterator[None]:
    """Hold GPU `gpu` shared while this process runs kernels that are not
    timed: no gpulab timing runs meanwhile. Re-entrant; `gpu_timing_lock`
    inside it hands the hold back while it times."""
    if fcntl is None:
        yield
        return
    held = _shared.get(gpu)
    if held is not None:
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
        return
    fd = _open_shared(_paths(gpu)[0])
    try:
        _join(gpu, fd, on_wait, poll_s)
        _shared[gpu] = [fd, 1]
        yield
    finally:
        _shared.pop(gpu, None)
        os.close(fd)  # closing the descriptor drops the lock


@contextlib.contextmanager
def gpu_timing_lock(
    what: str, gpu: int = 0, on_wait: Callable[[str], None] | None = None, poll_s: float = 0.5
) -> Iterator[None]:
    """Hold GPU `gpu` exclusive (no other gpulab kernel runs); call
    `on_wait(message)` while waiting."""
    if fcntl is None:
        yield
        return
    lock_path, holder_path, gate_path = _paths(gpu)
    mine = _shared.get(gpu)
    if mine is not None:
        fcntl.flock(mine[0], fcntl.LOCK_UN)  # this process's own shared hold
    gate = _open_shared(gate_path)
    fd = _open_shared(lock_path)
    try:
        _flock(gate, fcntl.LOCK_EX, lambda: _timing_msg(gpu), on_wait, poll_s)
        _flock(
            fd,
            fcntl.LOCK_EX,
            lambda: "waiting for the GPU: other gpulab checks are running kernels on it",
            on_wait,
            poll_s,
        )
        info = {"user": _user(), "pid": os.getpid(), "what": what, "since": time.time()}
        with contextlib.suppress(OSError):
            tmp = holder_path.with_name(f".{holder_path.name}.{os.getpid()}")
            tmp.write_text(json.dumps(info))
            os.chmod(tmp, 0o666)
            os.replace(tmp, holder_path)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                holder_path.unlink()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
        os.close(gate)  # the gate goes last: checks waiting to join follow
        if mine is not None:
            _join(gpu, mine[0], on_wait, poll_s)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return str(os.getuid())
