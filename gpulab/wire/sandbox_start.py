"""The sandbox's start and its housekeeping, judge <-> sandbox: `config`
and `ready` (each carries the protocol's version), loading the file, the
arenas, the warm-up, a spare's hold, the compile-ahead, and the plain calls
of lesson 09.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, TypedDict

from gpulab.wire.codec import PROTOCOL, Frame, Tolerant, plain, wire
from gpulab.wire.protocol import ArenaSpec, JsonObject, Kwargs, ProtocolError
from gpulab.wire.replies import Reply

# --- the sandbox's start ------------------------------------------------------------
# Each frame is declared once; gpulab.wire.codec writes and reads it (a
# request strictly, a reply tolerantly).


@dataclass(frozen=True, slots=True)
class ProfilerPolicy(Frame):
    """What a profiled sandbox's policy opens for the profiler (judge-built,
    gpulab.explain.nsight.profiler_policy): its install folders, read-only."""

    tool: str = wire(limit=40)
    read: list[str] = wire(factory=list)


@dataclass(frozen=True, slots=True)
class Policy(Frame):
    """What the sandbox may touch (gpulab.sandbox.isolation applies it).
    Paths are absolute."""

    read: list[str] = wire(factory=list)  # trees, read and execute
    listable: list[str] = wire(factory=list)  # trees: names listed, files unread
    hidden: list[str] = wire(factory=list)  # inside `read`, but never readable
    write: list[str] = wire(factory=list)  # trees, read and write
    cpu_seconds: int = 600
    file_bytes: int = 256 * 1024 * 1024
    address_space: int | None = None  # bytes; None on a GPU (CUDA maps far more)
    blocked_modules: list[str] = wire(factory=list)
    # For the sandbox Nsight Compute profiles only (None for every other).
    profiler: ProfilerPolicy | None = wire(None, omit=True)


def _version(value: Any) -> Any:
    """The version a first frame says, as it came (None: none), for
    gpulab.wire.codec.check_version."""
    return value


@dataclass(frozen=True, slots=True)
class SandboxConfig(Frame):
    """`config`, the judge's first frame: where the sandbox runs, the file,
    the isolation policy (Policy), the judge's import path, and the file's
    bytes (base64) or why the judge could not read them; the protocol's
    version (the sandbox refuses another)."""

    TYPE: ClassVar[str] = "config"
    device: str
    file: str
    policy: Policy
    sys_path: tuple[str, ...] = ()
    source: str | None = wire(None, omit=True)
    problem: str | None = wire(None, omit=True)
    # A spare's sandbox (gpulab.lab.runner.Spares): its imports at once,
    # then it waits for `go` before it starts CUDA and confines itself.
    hold: bool = wire(False, omit=True)
    protocol: Any = wire(PROTOCOL, read=_version)


@dataclass(frozen=True, slots=True)
class Ready(Tolerant, Reply):
    """`ready`: the sandbox confined itself; what is in force, its own
    report (sent before any learner code runs); the protocol's version (the
    judge refuses another)."""

    TYPE: ClassVar[str] = "ready"
    isolation: tuple[str, ...] = wire((), limit=200)
    protocol: Any = wire(PROTOCOL, read=_version)


@dataclass(frozen=True, slots=True)
class Fatal(Tolerant):
    """`fatal`: the sandbox could not confine itself, and exits."""

    TYPE: ClassVar[str] = "fatal"
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Exit(Frame):
    """`exit`: the sandbox stops (no reply)."""

    TYPE: ClassVar[str] = "exit"


@dataclass(frozen=True, slots=True)
class Ok(Tolerant, Reply):
    """`ok`: an arena mapped, a warm-up or a replay's imports done."""

    TYPE: ClassVar[str] = "ok"


@dataclass(frozen=True, slots=True)
class LoadRequest(Frame):
    """`load`: import the learner's file (once) and say which of
    `functions` it defines. `before_load`: what the sandbox records before
    the file runs ("dynamo", "jax"); `source`: the file's bytes (base64)
    where the config had none, `problem`: why the judge could not read it."""

    TYPE: ClassVar[str] = "load"
    functions: tuple[str, ...]
    before_load: tuple[str, ...] = ()
    source: str | None = wire(None, omit=True)
    problem: str | None = wire(None, omit=True)


@dataclass(frozen=True, slots=True)
class Importing(Tolerant, Reply):
    """`importing`: sent by the sandbox as it starts to run the learner's
    file, before any of it runs. A reply that comes after it may be the
    file's doing (gpulab.judge.remote.Sandbox.learner_ran); one before it
    cannot be: the learner cannot take it back, nor send it earlier."""

    TYPE: ClassVar[str] = "importing"


@dataclass(frozen=True, slots=True)
class Loaded(Tolerant, Reply):
    """`loaded`: the functions asked for that the file defines."""

    TYPE: ClassVar[str] = "loaded"
    functions: tuple[str, ...] = ()


def _arena(value: Any) -> ArenaSpec:
    try:
        return ArenaSpec(**value)
    except TypeError:
        raise ProtocolError("an arena request without its arena") from None


@dataclass(frozen=True, slots=True)
class ArenaRequest(Frame):
    """`arena`: map shared memory; its descriptor follows the frame."""

    TYPE: ClassVar[str] = "arena"
    arena: ArenaSpec = wire(read=_arena)

    def to_json(self) -> JsonObject:
        return {"type": self.TYPE, "arena": dict(self.arena.__dict__)}


@dataclass(frozen=True, slots=True)
class Held(Tolerant, Reply):
    """`held`: a held sandbox's imports are done; it waits for `go`."""

    TYPE: ClassVar[str] = "held"


@dataclass(frozen=True, slots=True)
class Go(Frame):
    """`go`: a held sandbox (SandboxConfig.hold) may start CUDA now: the
    judge holds the GPU shared, so nobody is timing."""

    TYPE: ClassVar[str] = "go"


@dataclass(frozen=True, slots=True)
class Warm(Frame):
    """`warm`: a sandbox started ahead of its check imports what every check
    imports, before any learner code exists (answered `ok`)."""

    TYPE: ClassVar[str] = "warm"


@dataclass(frozen=True, slots=True)
class Prepare(Frame):
    """`prepare`: the replay's sandbox imports what a replay needs (`ok`)."""

    TYPE: ClassVar[str] = "prepare"


def _count_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


@dataclass(frozen=True, slots=True)
class CompileAhead(Frame):
    """`compile_ahead`: compile the kernels the last check of this file
    compiled, side by side (gpulab.sandbox.ahead). Speed only."""

    TYPE: ClassVar[str] = "compile_ahead"


@dataclass(frozen=True, slots=True)
class CompiledAhead(Tolerant, Reply):
    """`compiled_ahead`: how many kernels matched, compiled, in how many
    workers, in how long. It decides nothing, so a malformed (or absent)
    field is None, not a failure: the numbers only go into the result's
    `compiled_ahead`, and any other reply is nothing compiled ahead."""

    TYPE: ClassVar[str] = "compiled_ahead"
    kernels: int | None = wire(0, read=_count_or_none)
    compiled: int | None = wire(0, read=_count_or_none)
    workers: int | None = wire(0, read=_count_or_none)
    seconds: float | None = wire(None, omit=True)

    def record(self) -> AheadRecord:
        """What the result's `compiled_ahead` keeps of it, as it always did."""
        return {
            "kernels": self.kernels,
            "compiled": self.compiled,
            "workers": self.workers,
            "seconds": self.seconds,
        }


class AheadRecord(TypedDict):
    """A sandbox's compile ahead, in the result's `compiled_ahead` list."""

    kernels: int | None
    compiled: int | None
    workers: int | None
    seconds: float | None


# --- lesson 09's plain calls -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlainCall(Frame):
    """`call` with `plain`: the learner's function on records and numbers;
    the arguments are JSON (gpulab.judge.plain.encode)."""

    TYPE: ClassVar[str] = "call"
    function: str
    args: list[Any]
    kwargs: Kwargs = wire(factory=dict)  # the call's, by name (JSON)
    plain: bool = True


@dataclass(frozen=True, slots=True)
class PlainReturned(Tolerant, Reply):
    """`return` of a plain call: the value as JSON (what is not data comes
    as {"__unsupported__": its type's name}); gpulab.judge.plain reads it."""

    TYPE: ClassVar[str] = "return"
    value: Any = wire(None, read=plain)


# What a sandbox forked by gpulab.sandbox.forkserver calls itself
# (/proc/PID/comm): its command line is the fork server's, so the judge's
# gpulab.judge.stuck finds it by this name.
FORKED_NAME = b"gpulab-sandbox"


def sandbox_argv(python: str, package_parent: str, spec_json: str, fd: int) -> list[str]:
    """The keeper's command line, then the sandbox's, which the keeper execs
    once it has made the namespaces (gpulab.sandbox.namespaces): how the
    judge starts a sandbox, and how a forked keeper restarts as one."""
    start = f"import sys; sys.path.insert(0, {package_parent!r}); "
    keeper = start + "from gpulab.sandbox.namespaces import main; main()"
    boot = start + "from gpulab.sandbox.main import main; main()"
    return [python, "-I", "-c", keeper, spec_json, python, "-I", "-c", boot, str(fd)]
