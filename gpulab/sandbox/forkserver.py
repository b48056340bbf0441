"""A process that has imported torch, Triton and the sandbox's modules once,
and forks each of a CPU check's sandboxes from there.

Why: a CPU check starts two sandboxes (the check's and the replay's), and
each imported torch and Triton itself: about 3.4 s of CPU apiece on a 2-core
box, most of a check's own work. Forked from here, a sandbox starts with its
imports done.

What keeps a forked sandbox what an exec'd one is:
- this process is started by the judge like a sandbox (`python -I`, the
  sandboxes' allow-listed environment, an empty folder of its own), before
  any learner code exists, and it never runs any: what a sandbox inherits
  from it is imports;
- it starts no CUDA (the judge uses it for CPU checks only), and it is
  single-threaded after its imports: a fork copies one thread, and a lock
  another thread held would stay held. Checked before each fork: where it
  is not (a user's own OMP_NUM_THREADS, say), the forked keeper execs the
  keeper and the sandbox afresh, as the judge would have;
- each fork is double (the child exits at once), so the sandbox's keeper is
  adopted by the judge, the subreaper: the judge waits on it and reads its
  exit status exactly as it reads a Popen'd keeper's;
- the keeper then takes the judge's environment, folder, channel and output
  for this sandbox, and makes its namespaces (gpulab.sandbox.namespaces) as
  the exec'd keeper does, before `gpulab.sandbox.main` runs in place.

Frames on the control socket (gpulab.wire.protocol framing): the judge
sends one byte carrying two descriptors (the sandbox's channel end and its
output pipe), then a `spawn` frame; this process answers `{"pid": N}` (the
keeper's) or `{"error": why}`, in order.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, TypedDict, cast

from gpulab.wire.protocol import ProtocolError, read_frame, write_frame
from gpulab.wire.sandbox_start import FORKED_NAME, sandbox_argv

if TYPE_CHECKING:
    from gpulab.sandbox.namespaces import MountSpec


class SpawnRequest(TypedDict):
    """The judge's `spawn` (gpulab.judge.forks.ForkServer.spawn): the
    sandbox's namespaces, its environment and folder, the descriptor number
    its channel must have, and the judge's pid (the keeper's parent to be)."""

    type: str
    spec: MountSpec
    env: dict[str, str]
    cwd: str
    channel: int
    judge: int


class ForkedReply(TypedDict):
    """The answer to a `spawn`: the keeper's pid, or why there is none."""

    type: str
    pid: NotRequired[int]
    error: NotRequired[str]


_PR_SET_NAME, _PR_SET_PDEATHSIG = 15, 1
_libc = ctypes.CDLL(None, use_errno=True)


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def main() -> None:
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    _libc.prctl(_PR_SET_PDEATHSIG, 9, 0, 0, 0)  # ends with the judge
    from gpulab.sandbox.main import import_ahead

    import_ahead()
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The interpreter's fixes probe it with small kernels of gpulab's
        # (half a second a sandbox): done once, here.
        from gpulab.sandbox import interpreter_fixes

        interpreter_fixes.apply()
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(ctrl, 1, 2)
        except OSError:
            os._exit(0)
        if len(fds) != 2:  # the judge closed its end: the check is over
            os._exit(0)
        try:
            # The judge's own frame, on a socket only it holds: used as it
            # sends it (gpulab.judge.forks), as it always was.
            request = cast("SpawnRequest", read_frame(ctrl.fileno()))
        except (EOFError, OSError, ProtocolError):
            os._exit(0)
        try:
            reply: ForkedReply = {"type": "forked", "pid": _spawn(ctrl, request, fds[0], fds[1])}
        except OSError as exc:
            reply = {"type": "forked", "error": f"fork: {exc}"}
        for fd in fds:
            os.close(fd)
        write_frame(ctrl.fileno(), reply)


def _spawn(ctrl: socket.socket, request: SpawnRequest, channel: int, out: int) -> int:
    """Fork twice; returns the keeper's pid once its first parent is gone
    (so it is the judge's child by then)."""
    alone = threads() == 1  # this process's threads, before the fork copies one
    r, w = os.pipe()
    first = os.fork()
    if first == 0:
        code = 125
        try:
            os.close(r)
            keeper = os.fork()
            if keeper:
                os.write(w, str(keeper).encode())
                code = 0
            else:
                os.close(w)
                _keeper(ctrl, request, channel, out, alone)
        finally:
            os._exit(code)
    os.close(w)
    said = b""
    while chunk := os.read(r, 64):
        said += chunk
    os.close(r)
    os.waitpid(first, 0)
    if not said:
        raise OSError("the keeper was not forked")
    return int(said)


def _keeper(
    ctrl: socket.socket, request: SpawnRequest, channel: int, out: int, alone: bool
) -> None:
    """In the keeper: become this sandbox's process, then confine and serve
    (exec the two afresh, where the server was not `alone` in its process).
    Never returns."""
    ctrl.detach()  # its descriptor is closed below with the rest
    os.setsid()  # a process group of its own, as Popen's start_new_session
    # The death signal follows the parent the process has when it is set:
    # wait to be the judge's (its first parent is exiting now).
    deadline = time.monotonic() + 10
    while os.getppid() != request["judge"]:
        if time.monotonic() > deadline:
            os._exit(125)
        time.sleep(0.001)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    want = int(request["channel"])  # the number the judge's namespace spec names
    if channel != want:
        os.dup2(channel, want)
    os.closerange(3, want)
    os.closerange(want + 1, 1 << 16)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    if not alone:
        # Another thread may have held a lock when this process was forked
        # (none should exist: a user's own OMP_NUM_THREADS, say): the exec'd
        # keeper and sandbox, as the judge would start them.
        os.set_inheritable(want, True)
        package_parent = str(Path(__file__).resolve().parent.parent.parent)
        spec = json.dumps(request["spec"])
        os.execv(sys.executable, sandbox_argv(sys.executable, package_parent, spec, want))
    import tempfile

    tempfile.tempdir = None  # read again from this sandbox's TMPDIR
    from gpulab.sandbox import namespaces

    namespaces.confine(request["spec"])  # returns in the sandbox's process
    _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(FORKED_NAME), 0, 0, 0)
    # What an exec'd sandbox's argv is (`python -I -c BOOT FD`): a file may
    # read its channel's number there, as it could before.
    sys.argv[:] = ["-c", str(want)]
    from gpulab.sandbox.main import main as serve

    serve(want)
    os._exit(0)


if __name__ == "__main__":
    main()
