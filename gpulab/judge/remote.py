"""The judge's handle on the sandbox: start it confined, hand it tensors,
take its results as data.

The sandbox is `python -I` (no PYTHONPATH, no user site, no script folder
on sys.path) in its own session, with an allow-listed environment, a
private folder as HOME, TMPDIR and working directory, stdout and stderr
read through a pipe with a cap, and the judge as its child subreaper so a
`setsid` grandchild cannot outlive the check (see `kill_descendants`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.wire.codec import check_version
from gpulab.wire.fields import Frame
from gpulab.wire.protocol import (
    ArenaSpec,
    JsonObject,
    ProtocolError,
    TensorRef,
    read_frame,
    write_frame,
)
from gpulab.wire.replies import Broken, R, Raised, read_reply
from gpulab.wire.sandbox_start import (
    ArenaRequest,
    Exit,
    Go,
    Held,
    Importing,
    LoadRequest,
    Ok,
    Policy,
    Ready,
    SandboxConfig,
    sandbox_argv,
)

if TYPE_CHECKING:
    from gpulab.judge.forks import Forked, ForkServer
    from gpulab.sandbox.namespaces import MountSpec

OUTPUT_HEAD = 2000
OUTPUT_TAIL = 6000
ENV_ALLOWED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "TRITON_PTXAS_PATH",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
)

_PR_SET_CHILD_SUBREAPER, _PR_SET_DUMPABLE = 36, 4


def harden_judge() -> None:
    """The judge adopts orphaned descendants (so it can kill them) and is not
    dumpable (another process of the same user cannot read its memory)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    except (OSError, AttributeError):
        pass


# Processes a sandbox's close leaves running, with what is below them: the
# check's fork server (gpulab.judge.forks), which later sandboxes of the same
# check still need. The judge's own end kills them too.
SPARED: set[int] = set()


def kill_descendants(spare: bool = False) -> int:
    """SIGKILL every process below this one (orphans reparent to us, the
    subreaper), but for SPARED's with `spare`; returns how many were killed."""
    me, killed = os.getpid(), 0
    for _ in range(20):
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
        below = [p for p in parents if _descends(p, me, parents)]
        if spare and SPARED:
            below = [
                p
                for p in below
                if p not in SPARED and not any(_descends(p, k, parents) for k in SPARED)
            ]
        if not below:
            break
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.02)
    _reap()
    return killed


def _descends(pid: int, root: int, parents: dict[int, int]) -> bool:
    seen = 0
    while pid in parents and seen < 64:
        pid = parents[pid]
        if pid == root:
            return True
        seen += 1
    return False


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class Output:
    """The learner's stdout and stderr: the head and the tail, and a count."""

    def __init__(self, fd: int) -> None:
        self.head, self.tail, self.total = b"", b"", 0
        self._thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
        self._thread.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as f:
            while chunk := f.read(65536):
                self.total += len(chunk)
                if len(self.head) < OUTPUT_HEAD:
                    room = OUTPUT_HEAD - len(self.head)
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                self.tail = (self.tail + chunk)[-OUTPUT_TAIL:]

    def recent(self) -> str:
        """What was printed so far, the tail last (without waiting for the end)."""
        return (self.head + self.tail).decode("utf-8", "replace")

    def text(self) -> str:
        self._thread.join(timeout=1)
        shown = len(self.head) + len(self.tail)
        middle = b""
        if self.total > shown:
            middle = f"\n… {self.total - shown} bytes of output left out …\n".encode()
        return (self.head + middle + self.tail).decode("utf-8", "replace")


# Every sandbox this judge started, for gpulab.judge.stuck to ask where it is.
_LIVE: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def live_sandboxes() -> list[Sandbox]:
    return [s for s in list(_LIVE) if s.proc.poll() is None]


class Sandbox:
    """One sandbox process for one check."""

    def __init__(
        self,
        *,
        file: str,
        device: str,
        private: Path,
        policy: Policy,
        triton_cache: str | None = None,
        sys_path: tuple[str, ...] = (),
        prefix: list[str] | None = None,
        source: bytes | None = None,
        problem: str = "",
        switches: dict[str, str] | None = None,
        wait: bool = True,
        hold: bool = False,
        forks: ForkServer | None = None,
    ) -> None:
        """`forks`: the check's fork server (CPU checks): the sandbox is forked
        from it, its imports done, unless it is gone or `prefix` is given.
        `wait`: read the sandbox's "ready" before returning; without it,
        the caller does its own work while the sandbox starts (its imports,
        and CUDA on a GPU) and calls `wait_ready` before the first request.
        `prefix`: a command the sandbox runs under (Nsight Compute for
        `--explain`'s measurement, issue 21); it inherits the socket and the
        environment and must exec the sandbox's argv as given. `source`: the
        file's bytes where the judge has read them already (a sandbox
        started ahead of its check gets them with its `load`), `problem`:
        why the judge could not; the sandbox imports the file from these,
        and its mount namespace does not hold the file itself. `switches`:
        the kernel-path variables the check asked for
        (gpulab.wire.protocol.paths_off_env), never taken from the judge's own
        environment. `hold`: the sandbox does its imports, then waits for
        `go()` before it starts CUDA (a spare's, while another check times).
        `triton_cache`: the compiler cache's folder (a private one if not
        given); `sys_path`: the judge's import path, which the sandbox takes."""
        self.file, self.device, self.private = file, device, private
        ours, theirs = socket.socketpair()
        out_r, out_w = os.pipe()
        env = sandbox_env(device, private, triton_cache, switches)
        spec = namespace_spec(private, policy, theirs.fileno(), file)
        forked = None
        if forks is not None and not prefix:
            forked = forks.spawn(spec, env, str(private), theirs.fileno(), out_w)
        self.proc: subprocess.Popen[bytes] | Forked = forked or self._exec(
            spec, env, private, prefix, theirs.fileno(), out_w
        )
        theirs.close()
        os.close(out_w)
        self.sock = ours
        self.fd = ours.fileno()
        self.output = Output(out_r)
        _LIVE.add(self)
        self.killed_by_judge = ""
        self.pending = False
        # The sandbox said it was running the learner's file (Importing):
        # from then on, what it sends may be the file's.
        self.learner_ran = False
        self.arenas: list[Any] = []  # kept alive until the sandbox is gone
        encoded = None
        if source is not None:
            import base64

            encoded = base64.b64encode(source).decode("ascii")
        config = SandboxConfig(device, file, policy, sys_path, encoded, problem or None, hold)
        write_frame(self.fd, config.to_json())
        self.isolation: list[str] = []
        self.ready = False
        if wait:
            self.wait_ready()

    @staticmethod
    def _exec(
        spec: MountSpec,
        env: dict[str, str],
        private: Path,
        prefix: list[str] | None,
        fd: int,
        out: int,
    ) -> subprocess.Popen[bytes]:
        """The keeper, then the sandbox, each a fresh `python -I`."""
        pkg_parent = str(Path(__file__).resolve().parent.parent.parent)
        return subprocess.Popen(
            [*(prefix or []), *sandbox_argv(sys.executable, pkg_parent, json.dumps(spec), fd)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            pass_fds=(fd,),
            start_new_session=True,
            cwd=str(private),
            env=env,
        )

    def wait_held(self) -> None:
        """Read a held sandbox's report that its imports are done."""
        held = self.reply(Held)
        if not isinstance(held, Held):
            raise SandboxDied(held.summary or self._not_started())

    def _not_started(self) -> str:
        self.proc.poll()  # a Forked learns then what the fork server said, if anything
        why = getattr(self.proc, "why", "")
        return "the sandbox did not start" + (f" ({why})" if why else "")

    def go(self) -> None:
        """Let a held sandbox start CUDA and confine itself."""
        self.send(Go())

    def wait_ready(self) -> None:
        """Read the sandbox's report that it has confined itself (before any
        learner code runs: the report is its own)."""
        if self.ready:
            return
        ready = self.reply(Ready)
        if not isinstance(ready, Ready):
            raise SandboxDied(ready.summary or self._not_started())
        try:
            check_version(ready.protocol, "the sandbox")
        except ProtocolError as exc:  # a sandbox of another install
            raise SandboxDied(str(exc)) from None
        self.isolation = list(ready.isolation)
        self.ready = True

    # --- frames -----------------------------------------------------------------
    # A reply is read where it comes in, typed (gpulab.wire.replies.read_reply):
    # no frame from the sandbox leaves this class as a dict.

    def ask(self, message: Frame, kind: type[R]) -> R | Raised | Broken:
        """Send a typed request; its reply read as a `kind`, or the learner's
        exception (Raised), or anything else (Broken). A kernel-path reply
        whose fields cannot be used raises gpulab.wire.replies.BadReply."""
        if self.pending:  # a reply the judge has not read yet comes first
            self.pending = False
            self._receive()
        self.send(message)
        return read_reply(self._receive(), kind)

    def reply(self, kind: type[R]) -> R | Raised | Broken:
        """The next reply, read as a `kind` (as `ask` reads it): the answer to
        a request sent with `send`, or to a `preload`."""
        return read_reply(self._receive(), kind)

    def _receive(self) -> JsonObject:
        try:
            frame = read_frame(self.fd)
            while frame.get("type") == Importing.TYPE:  # a mark, not a reply
                self.learner_ran = True
                frame = read_frame(self.fd)
            return frame
        except (EOFError, OSError) as exc:
            raise SandboxDied(str(exc)) from None

    def send(self, message: Frame) -> None:
        try:
            write_frame(self.fd, message.to_json())
        except (BrokenPipeError, OSError) as exc:
            raise SandboxDied(str(exc)) from None

    def preload(
        self,
        function: str,
        before_load: Sequence[str] = (),
        source: bytes | None = None,
        problem: str = "",
        switches: dict[str, str] | None = None,
    ) -> None:
        """Start importing the learner's file now, while the judge imports
        its grader: the reply is read by the first `load` request.
        `before_load`: what the sandbox records before the file runs
        ("dynamo": Dynamo's config and the registered operators).
        `source`: the file's bytes as the judge read them, which the sandbox
        imports (it may not see the file at all); `problem`: why the judge
        could not read it, which the sandbox reports as the learner's."""
        import base64

        encoded = None if source is None else base64.b64encode(source).decode("ascii")
        self.send(LoadRequest((function,), tuple(before_load), encoded, problem or None))
        self.pending = True

    # --- shared memory ---------------------------------------------------------

    def arena(self, nbytes: int) -> Arena:
        arena = Arena(len(self.arenas), max(nbytes, 256), self.device)
        self.arenas.append(arena)
        if self.pending:
            self.pending = False
            self._receive()
        self.send(ArenaRequest(arena.spec))
        try:
            socket.send_fds(self.sock, [b"A"], [arena.fd])
        except OSError as exc:
            raise SandboxDied(str(exc)) from None
        finally:
            os.close(arena.fd)
        mapped = self.reply(Ok)
        if not isinstance(mapped, Ok):
            raise SandboxDied(f"the sandbox could not map shared memory: {mapped.summary}")
        return arena

    def kill(self) -> None:
        """SIGKILL the sandbox's process group now, from any thread: a request
        in flight then ends with SandboxDied. close() still follows."""
        try:
            if self.proc.pid > 0:  # a fork the server refused has none
                os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self) -> None:
        try:
            write_frame(self.fd, Exit().to_json())
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        try:
            if self.proc.pid > 0:  # a fork the server refused has none
                os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_descendants(spare=True)
        self.sock.close()


def sandbox_env(
    device: str,
    private: Path,
    triton_cache: str | None = None,
    switches: dict[str, str] | None = None,
) -> dict[str, str]:
    """A sandbox's whole environment: the allow-listed variables of the
    judge's, its folders, and the settings below; nothing else."""
    env = {k: os.environ[k] for k in ENV_ALLOWED if k in os.environ}
    env.update(switches or {})
    env.update(
        HOME=str(private),
        TMPDIR=str(private),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        XDG_CACHE_HOME=str(private / "cache"),
        TRITON_CACHE_DIR=triton_cache or str(private / "triton"),
        # Inductor compiles in this process: a worker process it would
        # start is confined from birth and cannot open the GPU (the
        # sandbox starts CUDA before confining itself; H200, torch 2.11:
        # "Could not find an active GPU backend").
        TORCHINDUCTOR_COMPILE_THREADS="1",
        # The audit's profiler quiet: Kineto (torch 2.13+) logs every start
        # and stop, which would read as the learner's own output.
        KINETO_LOG_LEVEL="6",
    )
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def namespace_spec(private: Path, policy: Policy, sock: int, file: str | None = None) -> MountSpec:
    """What the sandbox's mount namespace holds (gpulab.sandbox.namespaces):
    the policy's trees, less the private folder, which becomes the fresh
    tmpfs the new root is built on, and less the learner's `file`: its bytes
    come from the judge (a file bound alone would keep its old copy once a
    save renames a new one over it)."""
    inside = Path(private).resolve()
    learner = Path(file).resolve() if file else None

    def outside(p: str) -> bool:
        return not Path(p).resolve().is_relative_to(inside)

    profiler = policy.profiler
    return {
        "private": str(private),
        "read": [
            *(p for p in policy.read if learner is None or Path(p).resolve() != learner),
            *(profiler.read if profiler is not None else []),
        ],
        "write": [p for p in policy.write if outside(p)],
        "listable": policy.listable,
        "hidden": policy.hidden,
        "network_namespace": profiler is None,
        "close_in_init": [sock],
    }


class SandboxDied(Exception):
    pass


ALIGN = 256


class Arena:
    """Shared memory the judge owns and the sandbox maps, handed over as a
    file descriptor (never a path the sandbox could swap or truncate): a
    memfd sealed against shrinking and growing on the CPU, a CUDA
    allocation of its own (gpulab.measure.vmm) on a GPU, so the descriptor
    exposes nothing else of the judge's memory."""

    def __init__(self, ident: int, nbytes: int, device: str) -> None:
        import torch

        nbytes = -(-nbytes // (2 << 20)) * (2 << 20)
        self.used = 0
        if device == "cpu":
            import fcntl
            import mmap

            fd = os.memfd_create(f"gpulab-arena-{ident}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            os.ftruncate(fd, nbytes)
            # Sealed: the sandbox can write the bytes but never change the
            # size, so the judge's mapping cannot fault (SIGBUS).
            fcntl.fcntl(
                fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
            )
            self.map = mmap.mmap(fd, nbytes)
            self.bytes = torch.frombuffer(self.map, dtype=torch.uint8, count=nbytes)
            self.spec = ArenaSpec(ident, nbytes, "memfd")
        else:
            from gpulab.measure import vmm

            index = torch.device(device).index
            index = torch.cuda.current_device() if index is None else index
            self.mapping, fd = vmm.allocate(nbytes, index)
            nbytes = self.mapping.nbytes
            self.bytes = self.mapping.tensor()
            self.spec = ArenaSpec(ident, nbytes, "cuda", device=index)
        self.fd = fd  # sent once, then closed (Sandbox.arena)
        self.nbytes = nbytes

    def reset(self) -> None:
        self.used = 0

    def place(self, nbytes: int) -> int:
        offset = -(-self.used // ALIGN) * ALIGN
        if offset + nbytes > self.nbytes:
            raise MemoryError("arena full")
        self.used = offset + nbytes
        return offset

    def put(self, t: Any) -> TensorRef:
        import torch

        """Copy `t`'s whole storage in; the reference keeps its view."""
        st = t.untyped_storage()
        offset = self.place(st.nbytes())
        raw = torch.empty(0, dtype=torch.uint8, device=t.device)
        raw.set_(st)
        self.bytes[offset : offset + st.nbytes()].copy_(raw)
        return TensorRef(
            self.spec.id,
            offset,
            st.nbytes(),
            str(t.dtype).replace("torch.", ""),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
        )

    def slot(self, shape: tuple[int, ...], dtype: Any) -> TensorRef:

        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * dtype.itemsize
        offset = self.place(nbytes)
        stride, acc = [], 1
        for s in reversed(shape):
            stride.append(acc)
            acc *= max(s, 1)
        self.bytes[offset : offset + nbytes].fill_(0xFF)  # NaN-ish until written
        return TensorRef(
            self.spec.id,
            offset,
            nbytes,
            str(dtype).replace("torch.", ""),
            tuple(shape),
            tuple(reversed(stride)),
            0,
        )

    def view(self, ref: TensorRef) -> Any:
        import torch

        dtype = getattr(torch, ref.dtype)
        typed = self.bytes[ref.offset : ref.offset + ref.nbytes].view(dtype)
        return torch.as_strided(
            typed, ref.shape, ref.stride, typed.storage_offset() + ref.storage_offset
        )

    def storage_bytes(self, ref: TensorRef) -> Any:
        return self.bytes[ref.offset : ref.offset + ref.nbytes]


def storage_bytes(t: Any) -> Any:
    import torch

    raw = torch.empty(0, dtype=torch.uint8, device=t.device)
    raw.set_(t.untyped_storage())
    return raw


class Remote:
    """A learner's function, by name: it lives in the sandbox and is called
    through gpulab.judge.kernel (never directly in the judge)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"`{self.name}` runs in the sandbox: call it through gpulab.judge.kernel.remote_call"
        )

    def __repr__(self) -> str:
        return f"Remote({self.name!r})"
