"""One judge process a test worker keeps, for the CPU checks of `grade`.

A check is a fresh judge (`python -m gpulab.judge.main`) that imports torch,
and a fork server beside it that imports torch and Triton for the
sandboxes: about 6 of a CPU check's 9-10 s of CPU on a 2-core box, paid
again by each of the suite's few hundred checks. Here one judge process
grades a worker's checks in turn and keeps its fork server
(gpulab.judge.prepared.KEEP_FORKS); every check still gets sandboxes of its
own, forked afresh, and the lab's side is the real one: `run_check` takes
this judge as it takes a spare (`spares=`), writes it the request, and reads
its frames with the lab's own reader, so a check's result, its stages and
its timeout are the lab's. After each check the judge kills what the check
left (`kill_descendants`, as its exit would) and removes its folders.

Used only where nothing about the judge's process itself is under test: a
CPU check at the default time limit, in the environment the pool's judge
was started with. A check that ends without a result (a timeout, a crash)
ends this judge too; the next check starts another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SERVE = r"""
import os, signal, sys
from gpulab.judge import prepared, stuck
from gpulab.judge.channel import Channel
from gpulab.judge.main import answer
from gpulab.judge.policy import trim_cache
from gpulab.judge.remote import harden_judge, kill_descendants
import gpulab.safetree  # noqa: F401 - before any handler needs it

fd = int(os.environ.pop("GPULAB_EVENTS_FD"))
done = int(os.environ.pop("GPULAB_POOL_DONE_FD"))
harden_judge()
prepared.KEEP_FORKS = True
channel = [Channel(fd)]
stuck.install(lambda frame: channel[0].write(frame))


def end(code):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    kill_descendants(spare=True)
    prepared.close_kept_forks()
    kill_descendants()
    for cache in prepared.CACHES:
        trim_cache(cache)
    prepared.remove_folders()
    os._exit(code)


signal.signal(signal.SIGTERM, lambda signum, frame: end(1))
for raw in sys.stdin:
    channel[0] = Channel(fd)  # a check's frames start with the protocol's version
    answer(raw, channel[0])
    kill_descendants(spare=True)  # what the check left behind, as a judge's end does
    prepared.remove_folders()
    os.write(done, b".")  # the check is over only now, as at a judge's exit
end(0)
"""


class _Kept:
    """What run_check uses of a judge (gpulab.lab.runner._Judge): `run` and
    `close`. Closing keeps the process for the next check."""

    def __init__(self, pool: JudgePool) -> None:
        self.pool = pool

    def run(self, request: Any, deadline: float, on_event: Any, cancel: Any, cap: Any = None):
        from gpulab.lab import child, runner
        from gpulab.wire.status import Status

        pool = self.pool
        proc, read_fd = pool.proc, pool.read_fd
        assert proc is not None and proc.stdin is not None and read_fd is not None
        events = child.Events(child.frame_reader(read_fd), deadline=deadline, cancel=cancel)
        result = None
        where = ""
        try:
            proc.stdin.write((json.dumps(request.to_json()) + "\n").encode())
            proc.stdin.flush()
            result = runner._relay(events, on_event, cap)
            if events.stopped == Status.TIMEOUT:
                where = runner._ask_where(proc, read_fd)
        except BaseException:
            pool.drop()
            raise
        if result is None:  # stopped at the time limit, cancelled, or died
            pool.drop()
        elif not pool.cleaned():
            pool.drop()  # a judge that does not finish its clean-up is not kept
        log = runner._tail(pool.log)
        return runner._JudgeRun(result, events.stopped, proc.returncode, log, where)

    def close(self, wait: bool = True) -> None:
        pass


class JudgePool:
    """The spares run_check takes its judge from: this one kept judge."""

    early = False  # run_check starts no spare for the next check beside this one

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.read_fd: int | None = None
        self.done_fd: int | None = None
        self.env: dict[str, str] | None = None
        self.tmp = tempfile.TemporaryDirectory(prefix="gpulab-test-judge-")
        self.log = Path(self.tmp.name) / "judge.log"
        self.checks = 0
        self.starts = 0  # judges started: a test that changes the environment starts one

    def take(self, request: Any) -> _Kept | None:
        from gpulab.lab import child

        if request.device != "cpu":
            return None
        env = child.env(PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1")
        # pytest names the test running in the environment: not a change.
        env.pop("PYTEST_CURRENT_TEST", None)
        if self.proc is None or self.proc.poll() is not None or env != self.env:
            self.drop()
            self._start(env)
        self.checks += 1
        return _Kept(self)

    def prepare(self, request: Any, hold: bool = False) -> None:
        pass  # one judge, kept: nothing to start ahead

    def _start(self, env: dict[str, str]) -> None:
        from gpulab.lab import child

        read_fd, write_fd = os.pipe()
        done_r, done_w = os.pipe()
        with open(self.log, "wb") as log:
            self.proc = child.spawn(
                [sys.executable, "-c", SERVE],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd, done_w),
                cwd="/",
                env={**env, "GPULAB_EVENTS_FD": str(write_fd), "GPULAB_POOL_DONE_FD": str(done_w)},
            )
        os.close(write_fd)
        os.close(done_w)
        self.starts += 1
        self.read_fd, self.done_fd, self.env = read_fd, done_r, env

    def cleaned(self, timeout: float = 60.0) -> bool:
        """Wait for the judge to say it has killed what the check left and
        removed its folders (a judge's exit, which the lab waits for)."""
        import select

        assert self.done_fd is not None
        ready, _, _ = select.select([self.done_fd], [], [], timeout)
        return bool(ready) and os.read(self.done_fd, 1) == b"."

    def drop(self) -> None:
        """End the kept judge (it kills its sandboxes and its fork server)."""
        from gpulab.lab import child

        if self.proc is not None:
            if self.proc.poll() is None:
                child.kill_tree(self.proc, term_s=3)
            self.proc = None
        for fd in (self.read_fd, self.done_fd):
            if fd is not None:
                os.close(fd)
        self.read_fd = self.done_fd = None

    def close(self) -> None:
        """The session's end: the judge reads the end of its stdin and stops."""
        if self.proc is not None and self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.drop()
        self.tmp.cleanup()


_KEPT: list[JudgePool] = []


def kept() -> JudgePool:
    """This test process's pool, made on first use and closed at its exit."""
    if not _KEPT:
        import atexit

        _KEPT.append(JudgePool())
        atexit.register(_KEPT[0].close)
    return _KEPT[0]
