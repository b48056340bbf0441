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
them when a timing is refused (gpulab.gpu.nvml.other_processes).

The folder is every user's, so any of them may have put something at these
names first: a link to a file of yours (opened and made 0666, it would be
theirs to write), a fifo (opening it waits for ever), a holder file of their
own words. No name is followed, only a plain file is used, and the holder is
named after the owner of the holder file, shown with its control characters
made visible.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypedDict

from gpulab.textsafe import visible

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


# Never followed, never waited on (a fifo), never inherited by a child.
_OPEN = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
HOLDER_BYTES = 4096  # a few fields; anyone may have written the file


class Holder(TypedDict, total=False):
    """Who holds a GPU's timing lock: the holder file's owner, and what the
    file says (each field only where it has the type a holder writes)."""

    user: str  # the file's owner, never the file's word
    pid: int
    what: str
    since: float  # time.time() when it took the lock


def holder(gpu: int = 0) -> Holder | None:
    """Who holds the GPU's timing lock, as they wrote it, or None. The user
    is the file's owner: the words in it are anyone's."""
    try:
        fd = os.open(_paths(gpu)[1], os.O_RDONLY | _OPEN)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        written = json.loads(os.read(fd, HOLDER_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    finally:
        os.close(fd)
    if not isinstance(written, dict):
        return None
    out = Holder()
    pid, what, since = written.get("pid"), written.get("what"), written.get("since")
    if isinstance(pid, int) and not isinstance(pid, bool):
        out["pid"] = pid
    if isinstance(what, str):
        out["what"] = what
    if isinstance(since, (int, float)) and not isinstance(since, bool):
        out["since"] = since
    out["user"] = _name(st.st_uid)
    return out


def describe(h: Holder | None) -> str:
    if not h:
        return "another process"
    try:
        since = time.strftime("%H:%M:%S", time.localtime(h.get("since", 0)))
    except (TypeError, ValueError, OverflowError, OSError):
        since = "?"
    # Printed to terminals as it is (`gpulab bench`): escapes made visible.
    return visible(
        f"{h.get('user', '?')} (pid {h.get('pid', '?')}, {h.get('what', '?')}, since {since})"
    )


def _refuse(path: Path, why: str) -> OSError:
    try:
        st = os.lstat(path)
    except OSError:
        owner = ""
    else:
        why = "a symbolic link" if stat.S_ISLNK(st.st_mode) else why
        owner = f", owned by {_name(st.st_uid)}"
    return OSError(
        f"cannot open the GPU lock {path}: {why}{owner} (ask its owner, or the "
        "machine's administrator, to remove it)"
    )


def _open_shared(path: Path) -> int:
    # World-writable so learners on one box share the lock; umask would
    # otherwise leave it writable by its creator only.
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | _OPEN, 0o666)
    except PermissionError:
        # Another user's file that umask left read-only: flock needs no write.
        try:
            fd = os.open(path, os.O_RDONLY | _OPEN)
        except OSError as exc:
            raise _refuse(path, exc.strerror or str(exc)) from exc
    except OSError as exc:  # ELOOP: a link someone put there
        raise _refuse(path, exc.strerror or str(exc)) from exc
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _refuse(path, "not a plain file")
    # Made 0666 only if it is ours and has no other name: a hard link to a
    # file of ours (where the kernel lets others make one) is not opened up.
    if st.st_uid == os.getuid() and st.st_nlink == 1:
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
    h = holder(gpu)
    pids = _exclusive_pids(_paths(gpu)[2])
    if pids and (not h or h.get("pid") not in pids):
        # The gate is held, with no note or one of another process: any
        # user can take the lock and keep it, so name who really holds it.
        pid = pids[0]
        return (
            f"waiting for the GPU: timing is held by {_pid_user(pid)} (pid {pid}), "
            "who left no note of what it runs"
        )
    return f"waiting for the GPU: timing is held by {describe(h)}"


def _exclusive_pids(path: Path) -> list[int]:
    """The processes /proc/locks lists as holding `path` flock-exclusive
    (Linux; none where it cannot be read, or for another PID namespace's)."""
    try:
        st = os.lstat(path)
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids = []
    for line in lines:
        # "1: FLOCK  ADVISORY  WRITE 4823 fe:00:2147564 0 EOF"; waiters have "->".
        parts = line.split()
        if len(parts) >= 6 and parts[1:4] == ["FLOCK", "ADVISORY", "WRITE"]:
            if parts[5] == where and parts[4].isdigit() and int(parts[4]) > 0:
                pids.append(int(parts[4]))
    return pids


def _pid_user(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return _name(int(line.split()[1]))
    except (OSError, ValueError, IndexError):
        pass
    return "another user"


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
            _write_holder(holder_path, json.dumps(info))
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


def _write_holder(path: Path, text: str) -> None:
    """A new file of a name nobody could guess (a fixed one could be a link
    to a file of this user's), readable by all, renamed over `path`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return str(uid)


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return str(os.getuid())
