"""One timing run per GPU at a time, across processes and users.

Timing on a shared GPU box is only honest if nobody else's kernel runs at
the same time. Every timing phase (grader timing, microbenchmarks, bench)
holds an exclusive advisory lock on a file per GPU in the system temp
folder; a waiting learner is told who holds it. Correctness checks never
take the lock.
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


def lock_dir() -> Path:
    return Path(os.environ.get("GPULAB_LOCK_DIR") or tempfile.gettempdir())


def _paths(gpu: int) -> tuple[Path, Path]:
    base = lock_dir() / f"gpulab-gpu{gpu}"
    return base.with_suffix(".lock"), base.with_suffix(".holder")


def holder(gpu: int = 0) -> dict | None:
    """Who holds the GPU's timing lock, as they wrote it, or None."""
    try:
        return json.loads(_paths(gpu)[1].read_text())
    except (OSError, ValueError):
        return None


def describe(h: dict | None) -> str:
    if not h:
        return "another process"
    since = time.strftime("%H:%M:%S", time.localtime(h.get("since", 0)))
    return f"{h.get('user', '?')} (pid {h.get('pid', '?')}, {h.get('what', '?')}, since {since})"


def _open_shared(path: Path) -> int:
    # World-writable so learners on one box share the lock; umask would
    # otherwise leave it writable by its creator only.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return fd


@contextlib.contextmanager
def gpu_timing_lock(
    what: str, gpu: int = 0, on_wait: Callable[[str], None] | None = None, poll_s: float = 0.5
) -> Iterator[None]:
    """Hold GPU `gpu`'s timing lock; call `on_wait(message)` while waiting."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - no flock (Windows): nothing to serialise with
        yield
        return
    lock_path, holder_path = _paths(gpu)
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_shared(lock_path)
    try:
        told = None
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                msg = f"waiting for the GPU: timing is held by {describe(holder(gpu))}"
                if on_wait and msg != told:
                    on_wait(msg)
                    told = msg
                time.sleep(poll_s)
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


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return str(os.getuid())
