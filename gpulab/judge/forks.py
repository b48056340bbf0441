"""The judge's end of the fork server (gpulab.sandbox.forkserver): started
at the check's start, it does the sandboxes' imports once while the judge
does its own, and each CPU sandbox is then forked from it.

`ForkServer.spawn` never waits for the server: it sends the request and
returns a `Forked`, a Popen-like handle whose pid is read when first needed
(the sandbox's own frames come on its channel, as for an exec'd one). Where
the server is gone, `spawn` returns None and the caller execs the sandbox as
before; a spawn the server refuses gives a handle whose process never
started (exit status 125), which the check reads as a sandbox that did not
start."""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from gpulab.wire.protocol import ProtocolError, read_frame, write_frame

if TYPE_CHECKING:
    from gpulab.sandbox.forkserver import SpawnRequest
    from gpulab.sandbox.namespaces import MountSpec

# Set to 0 to exec every sandbox (the GPU's path) on the CPU too.
SWITCH = "GPULAB_SANDBOX_FORKS"


def wanted() -> bool:
    """Not turned off, and this process adopts orphans (the judge's main
    makes it so: gpulab.judge.remote.harden_judge). A forked keeper's first
    parent exits at once; in a process that is not a subreaper (a test
    grading in its own process) it would go to init, out of reach."""
    return os.environ.get(SWITCH, "1") != "0" and subreaper()


_PR_GET_CHILD_SUBREAPER = 37


def subreaper() -> bool:
    try:
        import ctypes

        flag = ctypes.c_int(0)
        ctypes.CDLL(None).prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0)
    except (OSError, AttributeError):
        return False
    return flag.value == 1


class Forked:
    """What the judge uses of a Popen, for a keeper the fork server forked
    and the judge (the subreaper) adopted."""

    def __init__(self, server: ForkServer) -> None:
        self._server = server
        self._pid: int | None = None
        self.why = ""  # the server's reason, when it forked nothing
        self.returncode: int | None = None

    @property
    def pid(self) -> int:
        if self._pid is None:
            self._server.settle(self)
        assert self._pid is not None
        return self._pid

    def _answer(self, pid: int, why: str = "") -> None:
        self._pid, self.why = pid, why
        if pid <= 0:
            self.returncode = 125

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        pid = self.pid
        if self.returncode is not None:
            return self.returncode
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere (as Popen reads it: 0)
            self.returncode = 0
            return 0
        if done:
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if end is not None and time.monotonic() > end:
                raise subprocess.TimeoutExpired("gpulab sandbox", timeout or 0)
            time.sleep(0.005)
        return code


class ForkServer:
    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        ours, theirs = socket.socketpair()
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", self.boot(), str(theirs.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
            cwd=str(cwd),
            env=env,
        )
        theirs.close()
        self.sock = ours
        self.folder = cwd  # the server's own (empty) folder, removed with it
        self._lock = threading.Lock()
        self._waiting: collections.deque[Forked] = collections.deque()

    def boot(self) -> str:
        """The server's program (`python -I -c`)."""
        pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
        return (
            f"import sys; sys.path.insert(0, {pkg_parent!r}); "
            "from gpulab.sandbox.forkserver import main; main()"
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def spawn(
        self, spec: MountSpec, env: dict[str, str], cwd: str, channel: int, out: int
    ) -> Forked | None:
        """Ask for a sandbox on `channel` (the judge's descriptor for the
        sandbox's end, which the spec names) writing to `out`. None if the
        server is gone."""
        if not self.alive():
            return None
        forked = Forked(self)
        request: SpawnRequest = {
            "type": "spawn",
            "spec": spec,
            "env": env,
            "cwd": cwd,
            "channel": channel,
            "judge": os.getpid(),
        }
        with self._lock:
            try:
                socket.send_fds(self.sock, [b"F"], [channel, out])
                write_frame(self.sock.fileno(), request)
            except OSError:
                return None
            self._waiting.append(forked)
        return forked

    def settle(self, forked: Forked) -> None:
        """Read the server's answers, in order, up to `forked`'s."""
        with self._lock:
            while forked._pid is None:
                first = self._waiting.popleft()
                try:
                    reply = read_frame(self.sock.fileno())
                except (EOFError, OSError, ProtocolError) as exc:
                    first._answer(-1, f"the fork server ended: {exc}")
                    continue
                pid = reply.get("pid")
                first._answer(pid if isinstance(pid, int) else -1, str(reply.get("error", "")))

    def pid(self) -> int:
        return self.proc.pid

    def close(self) -> None:
        self.sock.close()  # the server reads the end and exits
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
