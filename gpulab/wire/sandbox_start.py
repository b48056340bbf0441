"""The sandbox's start and its housekeeping, judge <-> sandbox: `config`
and `ready` (each carries the protocol's version), loading the file, the
arenas, the warm-up, a spare's hold, and the plain calls of lesson 09.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.fields import _items, _names, _need_list, _need_str, _opt_str, _plain, _strings
from gpulab.wire.frames import Reply
from gpulab.wire.protocol import ArenaSpec, ProtocolError, text

# --- the sandbox's start ------------------------------------------------------------


def _paths(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ProtocolError(f"a sandbox's policy whose `{key}` is not a list of paths")
    return list(value)


def _limit(value: Any, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(f"a sandbox's policy whose `{key}` is not a number")
    return value


@dataclass(frozen=True, slots=True)
class ProfilerPolicy:
    """What a profiled sandbox's policy opens for the profiler (judge-built,
    gpulab.explain.nsight.profiler_policy): its install folders, read-only."""

    tool: str
    read: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"tool": self.tool, "read": list(self.read)}

    @classmethod
    def parse(cls, value: Any) -> ProfilerPolicy:
        if not isinstance(value, dict):
            raise ProtocolError("a sandbox's policy whose `profiler` is not an object")
        return cls(tool=text(value.get("tool"), 40), read=_paths(value.get("read", []), "read"))


@dataclass(frozen=True, slots=True)
class Policy:
    """What the sandbox may touch (gpulab.sandbox.isolation applies it).
    Paths are absolute."""

    read: list[str] = field(default_factory=list)  # trees, read and execute
    listable: list[str] = field(default_factory=list)  # trees: names listed, files unread
    hidden: list[str] = field(default_factory=list)  # inside `read`, but never readable
    write: list[str] = field(default_factory=list)  # trees, read and write
    cpu_seconds: int = 600
    file_bytes: int = 256 * 1024 * 1024
    address_space: int | None = None  # bytes; None on a GPU (CUDA maps far more)
    blocked_modules: list[str] = field(default_factory=list)
    # For the sandbox Nsight Compute profiles only (None for every other).
    profiler: ProfilerPolicy | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "read": list(self.read),
            "hidden": list(self.hidden),
            "listable": list(self.listable),
            "write": list(self.write),
            "cpu_seconds": self.cpu_seconds,
            "file_bytes": self.file_bytes,
            "address_space": self.address_space,
            "blocked_modules": list(self.blocked_modules),
        }
        if self.profiler is not None:
            out["profiler"] = self.profiler.to_json()
        return out

    @classmethod
    def parse(cls, value: Any) -> Policy:
        if not isinstance(value, dict):
            raise ProtocolError("a sandbox's config without its policy")
        default = cls()
        space = value.get("address_space")
        profiler = value.get("profiler")
        return cls(
            read=_paths(value.get("read", []), "read"),
            listable=_paths(value.get("listable", []), "listable"),
            hidden=_paths(value.get("hidden", []), "hidden"),
            write=_paths(value.get("write", []), "write"),
            cpu_seconds=_limit(value.get("cpu_seconds", default.cpu_seconds), "cpu_seconds"),
            file_bytes=_limit(value.get("file_bytes", default.file_bytes), "file_bytes"),
            address_space=None if space is None else _limit(space, "address_space"),
            blocked_modules=_paths(value.get("blocked_modules", []), "blocked_modules"),
            profiler=None if profiler is None else ProfilerPolicy.parse(profiler),
        )


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """`config`, the judge's first frame: where the sandbox runs, the file,
    the isolation policy (Policy), the judge's import path, and the file's
    bytes (base64) or why the judge could not read them."""

    TYPE: ClassVar[str] = "config"
    device: str
    file: str
    policy: Policy
    sys_path: tuple[str, ...] = ()
    source: str | None = None
    problem: str | None = None
    # A spare's sandbox (gpulab.lab.runner.Spares): its imports at once,
    # then it waits for `go` before it starts CUDA and confines itself.
    hold: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "device": self.device,
            "file": self.file,
            "policy": self.policy.to_json(),
            "sys_path": list(self.sys_path),
        }
        if self.source is not None:
            out["source"] = self.source
        elif self.problem:
            out["problem"] = self.problem
        if self.hold:
            out["hold"] = True
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> SandboxConfig:
        return cls(
            device=_need_str(msg, "device"),
            file=_need_str(msg, "file"),
            policy=Policy.parse(msg.get("policy")),
            sys_path=tuple(p for p in _items(msg.get("sys_path")) if isinstance(p, str)),
            source=_opt_str(msg.get("source")),
            problem=_opt_str(msg.get("problem")),
            hold=msg.get("hold") is True,
        )


@dataclass(frozen=True, slots=True)
class Ready(Reply):
    """`ready`: the sandbox confined itself; what is in force, its own
    report (sent before any learner code runs)."""

    TYPE: ClassVar[str] = "ready"
    isolation: tuple[str, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Ready:
        return cls(_strings(frame.get("isolation"), 200))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "isolation": list(self.isolation)}


@dataclass(frozen=True, slots=True)
class Fatal:
    """`fatal`: the sandbox could not confine itself, and exits."""

    summary: str

    def to_json(self) -> dict[str, Any]:
        return {"type": "fatal", "summary": self.summary}


@dataclass(frozen=True, slots=True)
class Exit:
    """`exit`: the sandbox stops (no reply)."""

    TYPE: ClassVar[str] = "exit"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> Exit:
        return cls()


@dataclass(frozen=True, slots=True)
class Ok(Reply):
    """`ok`: an arena mapped, a warm-up or a replay's imports done."""

    TYPE: ClassVar[str] = "ok"

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Ok:
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}


@dataclass(frozen=True, slots=True)
class LoadRequest:
    """`load`: import the learner's file (once) and say which of
    `functions` it defines. `before_load`: what the sandbox records before
    the file runs ("dynamo", "jax"); `source`: the file's bytes (base64)
    where the config had none, `problem`: why the judge could not read it."""

    TYPE: ClassVar[str] = "load"
    functions: tuple[str, ...]
    before_load: tuple[str, ...] = ()
    source: str | None = None
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "functions": list(self.functions),
            "before_load": list(self.before_load),
        }
        if self.source is not None:
            out["source"] = self.source
        elif self.problem:
            out["problem"] = self.problem
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> LoadRequest:
        return cls(
            functions=_names(msg, "functions"),
            before_load=_names(msg, "before_load"),
            source=_opt_str(msg.get("source")),
            problem=_opt_str(msg.get("problem")),
        )


@dataclass(frozen=True, slots=True)
class Importing(Reply):
    """`importing`: sent by the sandbox as it starts to run the learner's
    file, before any of it runs. A reply that comes after it may be the
    file's doing (gpulab.judge.remote.Sandbox.learner_ran); one before it
    cannot be: the learner cannot take it back, nor send it earlier."""

    TYPE: ClassVar[str] = "importing"

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Importing:
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}


@dataclass(frozen=True, slots=True)
class Loaded(Reply):
    """`loaded`: the functions asked for that the file defines."""

    TYPE: ClassVar[str] = "loaded"
    functions: tuple[str, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Loaded:
        return cls(tuple(n for n in _items(frame.get("functions")) if isinstance(n, str)))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "functions": list(self.functions)}


@dataclass(frozen=True, slots=True)
class ArenaRequest:
    """`arena`: map shared memory; its descriptor follows the frame."""

    TYPE: ClassVar[str] = "arena"
    arena: ArenaSpec

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "arena": dict(self.arena.__dict__)}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ArenaRequest:
        spec = msg.get("arena")
        try:
            return cls(ArenaSpec(**spec))  # type: ignore[arg-type]
        except TypeError:
            raise ProtocolError("an arena request without its arena") from None


@dataclass(frozen=True, slots=True)
class Held(Reply):
    """`held`: a held sandbox's imports are done; it waits for `go`."""

    TYPE: ClassVar[str] = "held"

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Held:
        return cls()

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}


@dataclass(frozen=True, slots=True)
class Go:
    """`go`: a held sandbox (SandboxConfig.hold) may start CUDA now: the
    judge holds the GPU shared, so nobody is timing."""

    TYPE: ClassVar[str] = "go"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}


@dataclass(frozen=True, slots=True)
class Warm:
    """`warm`: a sandbox started ahead of its check imports what every check
    imports, before any learner code exists (answered `ok`)."""

    TYPE: ClassVar[str] = "warm"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> Warm:
        return cls()


@dataclass(frozen=True, slots=True)
class Prepare:
    """`prepare`: the replay's sandbox imports what a replay needs (`ok`)."""

    TYPE: ClassVar[str] = "prepare"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> Prepare:
        return cls()


# --- lesson 09's plain calls -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlainCall:
    """`call` with `plain`: the learner's function on records and numbers;
    the arguments are JSON (gpulab.judge.plain.encode)."""

    TYPE: ClassVar[str] = "call"
    function: str
    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "plain": True,
            "args": self.args,
            "kwargs": self.kwargs,
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> PlainCall:
        kwargs = msg.get("kwargs", {})
        if not isinstance(kwargs, dict):
            raise ProtocolError("a plain call whose kwargs are not an object")
        return cls(_need_str(msg, "function"), _need_list(msg, "args"), kwargs)


@dataclass(frozen=True, slots=True)
class PlainReturned(Reply):
    """`return` of a plain call: the value as JSON (what is not data comes
    as {"__unsupported__": its type's name}); gpulab.judge.plain reads it."""

    TYPE: ClassVar[str] = "return"
    value: Any = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> PlainReturned:
        return cls(_plain(frame.get("value")))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "value": self.value}
