"""The judge <-> sandbox frames outside the kernel-grading path, typed.

gpulab.wire.frames types the guarded call, the timed batch and the
compile-ahead; this module types the rest, in the same way: the sandbox's
start (`config`, `ready`), loading the file, the arenas, the warm-up, the
plain calls of lesson 09, lesson 06's Dynamo requests, lesson 07's
training and bottleneck requests, the copy benchmark, the JAX export, the
replay, and `--explain`'s requests.

The judge builds each request typed and sends its `to_json()`; the sandbox
reads it back with `parse` (`request`, below: the judge is trusted, so a
malformed request is a ProtocolError, answered "broken"). Each sandbox
handler returns its reply typed; the judge reads a reply once, where it
comes in, with gpulab.wire.frames.read_reply(frame, Kind) (through
gpulab.judge.remote.Sandbox.ask): the reply of that kind, or the
learner's exception (`Raised`), or anything else (`Broken`). A reply is
untrusted, so each field is read as the judge always read it: a field of
the wrong type reads as absent (a list of the wrong items keeps those of
the right type), strings are cut, and the messages a learner sees are
the judge's, unchanged.

The JSON keys are those the dicts had. A profile's events and table rows
are typed too (ProfileEvent, OpRow, KernelRow, BlockOp): parsing keeps
only the rows the graders always kept. Two kinds of content stay plain
JSON inside their typed frame, each checked where it is read: the
arguments of a call and the values it returns (any JSON the learner's
records hold), and `--explain`'s facts (they go into the result as JSON,
gpulab.explain). The replay's plan (ReplayBuffer, ReplayLaunch) is made
by gpulab.judge.replay from the launch record (gpulab.wire.frames) it checked.

This module imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from gpulab.wire.frames import (
    Arg,
    AuditEnd,
    CallRequest,
    CompileAhead,
    Option,
    OtherArg,
    RecordedLaunch,
    Reply,
    TimeRequest,
    TorchStep,
    View,
    arg_json,
    parse_step,
)
from gpulab.wire.frames import read_reply as read_reply  # defined beside the kernel path's replies
from gpulab.wire.kernel_binary import MAX_BINARIES, KernelBinary
from gpulab.wire.protocol import ArenaSpec, ProtocolError, TensorRef, number, text


class Frame(Protocol):
    """What a sandbox handler returns: a reply that knows its JSON."""

    def to_json(self) -> dict[str, Any]: ...


# --- tolerant fields of untrusted replies -------------------------------------------
# As the judge always read them: the wrong type is the field left out.


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any, limit: int = 20000) -> tuple[str, ...]:
    return tuple(text(s, limit) for s in _items(value) if isinstance(s, str))


def _int(value: Any) -> int:
    """An int (not a bool), else 0 (gpulab.judge.graph_dynamo.as_int)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _real(value: Any) -> int | float | None:
    """An int or a float as it came (not a bool), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        real: int | float = _plain(value)
        return real
    return None


def _plain(value: Any) -> Any:
    """A JSON value from the sandbox, each int past a float's range (JSON
    has no limit: `return 10**400`) made the infinity of its sign. The
    judge's arithmetic and formatting turn such an int into a float
    (`math.isfinite`, `f"{v:.10g}"`, `got / want`), and the OverflowError
    read as gpulab's own failure; as an infinity it is a wrong answer."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _trues(value: Any) -> tuple[bool, ...]:
    """Each entry `is True` (a slot the sandbox says it wrote)."""
    return tuple(v is True for v in _items(value))


# --- checked fields of trusted requests ---------------------------------------------


def _need_str(msg: dict[str, Any], key: str) -> str:
    value = msg.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"a `{msg.get('type')}` request without its `{key}`")
    return value


def _need_list(msg: dict[str, Any], key: str) -> list[Any]:
    value = msg.get(key)
    if not isinstance(value, list):
        raise ProtocolError(f"a `{msg.get('type')}` request whose `{key}` is not a list")
    return value


def _names(msg: dict[str, Any], key: str) -> tuple[str, ...]:
    value = msg.get(key) or []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ProtocolError(f"a `{msg.get('type')}` request whose `{key}` is not a list of names")
    return tuple(value)


def _refs(msg: dict[str, Any], key: str) -> tuple[TensorRef, ...]:
    return tuple(TensorRef.from_json(v) for v in _need_list(msg, key))


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


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


# --- lesson 06: Dynamo's reports ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class DynamoBreak:
    """A graph break: the learner's line, its code and Dynamo's reasons."""

    line: int = 0
    code: str = ""
    reasons: tuple[str, ...] = ()

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> DynamoBreak:
        return cls(_int(obj.get("line")), text(obj.get("code")), _strings(obj.get("reasons")))

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "code": self.code, "reasons": list(self.reasons)}


@dataclass(frozen=True, slots=True)
class DynamoTrace:
    """One trace of the step (gpulab.sandbox.dynamo.trace): the graphs, the
    breaks, the ops captured, fullgraph's error ("" when one came that is
    not text) and the graph's opaque targets."""

    graphs: int = 0
    breaks: tuple[DynamoBreak, ...] = ()
    op_count: int = 0
    error: str | None = None
    opaque: tuple[str, ...] = ()

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> DynamoTrace:
        error = obj.get("error")
        return cls(
            graphs=_int(obj.get("graphs")),
            breaks=tuple(
                DynamoBreak.parse(b) for b in _items(obj.get("breaks")) if isinstance(b, dict)
            ),
            op_count=_int(obj.get("op_count")),
            error=None if error is None else text(error),
            opaque=_strings(obj.get("opaque"), 120),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "graphs": self.graphs,
            "breaks": [b.to_json() for b in self.breaks],
            "op_count": self.op_count,
            "error": self.error,
            "opaque": list(self.opaque),
        }


def _changed(value: Any) -> tuple[str, ...]:
    """Dynamo config keys the learner's code changed, as the judge quotes them."""
    return _strings(value, 80)


@dataclass(frozen=True, slots=True)
class DynamoRequest:
    """`dynamo`: trace the step on `args` (TensorRef JSON), plain, then with
    fullgraph=True when the plain trace has no break."""

    TYPE: ClassVar[str] = "dynamo"
    function: str
    args: list[Any]

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "function": self.function, "args": self.args}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> DynamoRequest:
        return cls(_need_str(msg, "function"), _need_list(msg, "args"))


@dataclass(frozen=True, slots=True)
class Traced(Reply):
    """`traced`: the plain trace, the fullgraph one (None: not run), whether
    the step is wrapped so Dynamo never traces it, config keys changed."""

    TYPE: ClassVar[str] = "traced"
    plain: DynamoTrace = DynamoTrace()
    full: DynamoTrace | None = None
    disabled: bool = False
    config_changed: tuple[str, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Traced:
        full = frame.get("full")
        return cls(
            plain=DynamoTrace.parse(_object(frame.get("plain"))),
            full=DynamoTrace.parse(full) if isinstance(full, dict) else None,
            disabled=bool(frame.get("disabled")),
            config_changed=_changed(frame.get("config_changed")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "plain": self.plain.to_json(),
            "full": None if self.full is None else self.full.to_json(),
            "disabled": self.disabled,
            "config_changed": list(self.config_changed),
        }


@dataclass(frozen=True, slots=True)
class DynamoConfigRequest:
    """`dynamo_config`: Dynamo config changes since the snapshot (undone)."""

    TYPE: ClassVar[str] = "dynamo_config"
    function: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "function": self.function}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> DynamoConfigRequest:
        return cls(_need_str(msg, "function"))


@dataclass(frozen=True, slots=True)
class DynamoConfig(Reply):
    """`config`: the keys changed, and whether the step is wrapped so that
    Dynamo never traces it."""

    TYPE: ClassVar[str] = "config"
    changed: tuple[str, ...] = ()
    disabled: bool = False

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> DynamoConfig:
        return cls(_changed(frame.get("changed")), bool(frame.get("disabled")))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "changed": list(self.changed), "disabled": self.disabled}


@dataclass(frozen=True, slots=True)
class CompileRequest:
    """`compiled`: torch.compile(step, backend, fullgraph=True) on each
    input set (TensorRef JSON), each output copied into its slot."""

    TYPE: ClassVar[str] = "compiled"
    function: str
    backend: str
    inputs: list[list[Any]]
    outs: tuple[TensorRef, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "backend": self.backend,
            "inputs": self.inputs,
            "outs": [r.to_json() for r in self.outs],
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> CompileRequest:
        inputs = _need_list(msg, "inputs")
        if not all(isinstance(i, list) for i in inputs):
            raise ProtocolError("a `compiled` request whose inputs are not lists")
        return cls(
            _need_str(msg, "function"), _need_str(msg, "backend"), inputs, _refs(msg, "outs")
        )


@dataclass(frozen=True, slots=True)
class CompiledSteps(Reply):
    """`compiled`: whether each output reached its slot, config keys changed."""

    TYPE: ClassVar[str] = "compiled"
    copied: tuple[bool, ...] = ()
    config_changed: tuple[str, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> CompiledSteps:
        return cls(_trues(frame.get("copied")), _changed(frame.get("config_changed")))

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "copied": list(self.copied),
            "config_changed": list(self.config_changed),
        }


@dataclass(frozen=True, slots=True)
class ModesRequest:
    """`modes`: time the step eagerly (None) and under each torch.compile
    mode (GPU), each output copied into its slot."""

    TYPE: ClassVar[str] = "modes"
    function: str
    modes: tuple[str | None, ...]
    args: list[Any]
    outs: tuple[TensorRef, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "modes": list(self.modes),
            "args": self.args,
            "outs": [r.to_json() for r in self.outs],
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ModesRequest:
        modes = _need_list(msg, "modes")
        if not all(m is None or isinstance(m, str) for m in modes):
            raise ProtocolError("a `modes` request whose modes are not names")
        return cls(
            _need_str(msg, "function"), tuple(modes), _need_list(msg, "args"), _refs(msg, "outs")
        )


_MODE_TIMES = ("ms", "reps", "rse", "min_ms", "max_ms")


@dataclass(frozen=True, slots=True)
class ModeRow:
    """One variant's timing (gpulab.measure.timing.measure's numbers), its
    kernels a call and its compile time; a number of the wrong type is None."""

    ms: int | float | None = None
    reps: int | float | None = None
    rse: int | float | None = None
    min_ms: int | float | None = None
    max_ms: int | float | None = None
    kernels: int = 0
    compile_s: float | None = None

    @classmethod
    def parse(cls, obj: Any) -> ModeRow:
        r = _object(obj)
        compile_s = r.get("compile_s")
        return cls(
            ms=_real(r.get("ms")),
            reps=_real(r.get("reps")),
            rse=_real(r.get("rse")),
            min_ms=_real(r.get("min_ms")),
            max_ms=_real(r.get("max_ms")),
            kernels=_int(r.get("kernels")),
            compile_s=compile_s if isinstance(compile_s, float) else None,
        )

    def times(self) -> dict[str, int | float]:
        """The timing's numbers that came, by their keys."""
        got = {k: getattr(self, k) for k in _MODE_TIMES}
        return {k: v for k, v in got.items() if v is not None}

    def to_json(self) -> dict[str, Any]:
        return {**self.times(), "kernels": self.kernels, "compile_s": self.compile_s}


@dataclass(frozen=True, slots=True)
class Modes(Reply):
    """`modes`: a row a mode, in the order asked."""

    TYPE: ClassVar[str] = "modes"
    rows: tuple[ModeRow, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Modes:
        return cls(tuple(ModeRow.parse(r) for r in _items(frame.get("rows"))))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "rows": [r.to_json() for r in self.rows]}


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """`compile_stream`: compile_step(backend), then each request's
    arguments (TensorRef JSON) through what it returned, each output into
    its slot (gpulab.sandbox.recompiles)."""

    TYPE: ClassVar[str] = "compile_stream"
    function: str
    backend: str
    requests: list[Any]
    outs: tuple[TensorRef, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "backend": self.backend,
            "requests": self.requests,
            "outs": [r.to_json() for r in self.outs],
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> StreamRequest:
        return cls(
            _need_str(msg, "function"),
            _need_str(msg, "backend"),
            _need_list(msg, "requests"),
            _refs(msg, "outs"),
        )


@dataclass(frozen=True, slots=True)
class StreamGraph:
    """A graph the check's backend was handed: during which request (-1:
    while compile_step ran) and its ops."""

    request: int = 0
    ops: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"request": self.request, "ops": self.ops}


@dataclass(frozen=True, slots=True)
class Recompile:
    """The guard that failed (its text) and the learner's line (0: none)."""

    guard: str = ""
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"guard": self.guard, "line": self.line}


@dataclass(frozen=True, slots=True)
class Compile:
    """A frame Dynamo compiled: which function, for a recompile why."""

    function: str = ""
    recompile: Recompile | None = None
    failed: str | None = None

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Compile:
        r = obj.get("recompile")
        return cls(
            function=text(obj.get("function"), 80),
            recompile=(
                Recompile(text(r.get("guard"), 300), _int(r.get("line")))
                if isinstance(r, dict)
                else None
            ),
            failed=_opt_str(obj.get("failed")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "function": self.function,
            "recompile": None if self.recompile is None else self.recompile.to_json(),
            "failed": self.failed,
        }


@dataclass(frozen=True, slots=True)
class StreamStep:
    """One request of the stream: its output reached the slot, and what
    Dynamo compiled while it ran."""

    copied: bool = False
    compiles: tuple[Compile, ...] = ()

    @classmethod
    def parse(cls, obj: Any) -> StreamStep:
        r = _object(obj)
        return cls(
            copied=r.get("copied") is True,
            compiles=tuple(
                Compile.parse(c) for c in _items(r.get("compiles")) if isinstance(c, dict)
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {"copied": self.copied, "compiles": [c.to_json() for c in self.compiles]}


@dataclass(frozen=True, slots=True)
class StreamBreak:
    """A graph break in the stream: the learner's line and what kind."""

    line: int = 0
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Stream(Reply):
    """`stream`: config keys the file changed at import and while it ran,
    each graph compiled, the graph each call ran (by request), each
    request's report, and Dynamo's graph breaks."""

    TYPE: ClassVar[str] = "stream"
    config_at_import: tuple[str, ...] = ()
    config_changed: tuple[str, ...] = ()
    graphs: tuple[StreamGraph, ...] = ()
    calls: tuple[int, ...] = ()
    requests: tuple[StreamStep, ...] = ()
    graph_breaks: tuple[StreamBreak, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Stream:
        return cls(
            config_at_import=_changed(frame.get("config_at_import")),
            config_changed=_changed(frame.get("config_changed")),
            graphs=tuple(
                StreamGraph(_int(g.get("request")), _int(g.get("ops")))
                for g in _items(frame.get("graphs"))
                if isinstance(g, dict)
            ),
            calls=tuple(_int(c) for c in _items(frame.get("calls")) if isinstance(c, int)),
            requests=tuple(StreamStep.parse(r) for r in _items(frame.get("requests"))),
            graph_breaks=tuple(
                StreamBreak(_int(b.get("line")), text(b.get("reason"), 300))
                for b in _items(frame.get("graph_breaks"))
                if isinstance(b, dict)
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "config_at_import": list(self.config_at_import),
            "config_changed": list(self.config_changed),
            "graphs": [g.to_json() for g in self.graphs],
            "calls": list(self.calls),
            "requests": [r.to_json() for r in self.requests],
            "graph_breaks": [b.to_json() for b in self.graph_breaks],
        }


# --- the copy benchmark (copy_ceiling) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchModel:
    """The model GPU the benchmark runs on without one (gpulab.sandbox.ceiling.ModelGPU)."""

    hbm_bps: float
    l2_bytes: int
    overhead_s: float
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "hbm_bps": self.hbm_bps,
            "l2_bytes": self.l2_bytes,
            "overhead_s": self.overhead_s,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, obj: Any) -> BenchModel | None:
        if obj is None:
            return None
        try:
            return cls(
                float(obj["hbm_bps"]),
                int(obj["l2_bytes"]),
                float(obj["overhead_s"]),
                int(obj["seed"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("a copy benchmark's model GPU is malformed") from None


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """`copy_bench`: copy_bandwidth(gpu, n) for each size, on the model GPU
    (`device` "model") or on this one ("cuda")."""

    TYPE: ClassVar[str] = "copy_bench"
    function: str
    device: str
    sizes: tuple[int, ...]
    model: BenchModel | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "device": self.device,
            "sizes": list(self.sizes),
        }
        if self.model is not None:
            out["model"] = self.model.to_json()
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> BenchRequest:
        sizes = _need_list(msg, "sizes")
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
            raise ProtocolError("a `copy_bench` request whose sizes are not counts")
        model = BenchModel.parse(msg.get("model"))
        device = _need_str(msg, "device")
        if device == "model" and model is None:
            raise ProtocolError("a `copy_bench` request on the model GPU without its model")
        return cls(_need_str(msg, "function"), device, tuple(sizes), model)


@dataclass(frozen=True, slots=True)
class Bench(Reply):
    """`bench`: each size's value as the learner's function returned it (a
    number, or {"__unsupported__": its type's name}); the judge checks it.
    `times_read`: on the model GPU, how many event times each run read (-1
    on a GPU, where they are not counted); a wrong type reads as absent."""

    TYPE: ClassVar[str] = "bench"
    values: tuple[Any, ...] = ()
    times_read: tuple[int, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Bench:
        read = _items(frame.get("times_read"))
        counts = all(isinstance(n, int) and not isinstance(n, bool) for n in read)
        return cls(tuple(_plain(_items(frame.get("values")))), tuple(read) if counts else ())

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "values": list(self.values), "times_read": list(self.times_read)}


# --- the matmul benchmark (matmul_ceiling) -------------------------------------------


@dataclass(frozen=True, slots=True)
class MatmulModel:
    """The model GPU the TFLOP/s benchmark runs on without one
    (gpulab.sandbox.flops.ModelMatmulGPU): its sustained bf16 rate, a
    launch's cost, how far above that rate its clock starts and how fast
    it falls (seconds of products), the first product's one-off cost, and
    the copy model's memory (for the L2 flush)."""

    peak_flops: float
    overhead_s: float
    boost: float
    tau_s: float
    first_s: float
    hbm_bps: float
    l2_bytes: int
    seed: int

    def to_json(self) -> dict[str, Any]:
        return {
            "peak_flops": self.peak_flops,
            "overhead_s": self.overhead_s,
            "boost": self.boost,
            "tau_s": self.tau_s,
            "first_s": self.first_s,
            "hbm_bps": self.hbm_bps,
            "l2_bytes": self.l2_bytes,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, obj: Any) -> MatmulModel | None:
        if obj is None:
            return None
        try:
            return cls(
                peak_flops=float(obj["peak_flops"]),
                overhead_s=float(obj["overhead_s"]),
                boost=float(obj["boost"]),
                tau_s=float(obj["tau_s"]),
                first_s=float(obj["first_s"]),
                hbm_bps=float(obj["hbm_bps"]),
                l2_bytes=int(obj["l2_bytes"]),
                seed=int(obj["seed"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ProtocolError("a matmul benchmark's model GPU is malformed") from None


@dataclass(frozen=True, slots=True)
class MatmulBenchRequest:
    """`matmul_bench`: matmul_tflops(gpu, m, n, k) for each shape, on the
    model GPU (`device` "model") or on this one ("cuda"); the reply is a
    `Bench` (each figure, and on the model the event times each run read)."""

    TYPE: ClassVar[str] = "matmul_bench"
    function: str
    device: str
    shapes: tuple[tuple[int, int, int], ...]
    model: MatmulModel | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "device": self.device,
            "shapes": [list(s) for s in self.shapes],
        }
        if self.model is not None:
            out["model"] = self.model.to_json()
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> MatmulBenchRequest:
        shapes = _need_list(msg, "shapes")
        if not all(
            isinstance(s, list)
            and len(s) == 3
            and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s)
            for s in shapes
        ):
            raise ProtocolError("a `matmul_bench` request whose shapes are not (m, n, k)")
        model = MatmulModel.parse(msg.get("model"))
        device = _need_str(msg, "device")
        if device == "model" and model is None:
            raise ProtocolError("a `matmul_bench` request on the model GPU without its model")
        return cls(
            _need_str(msg, "function"), device, tuple((s[0], s[1], s[2]) for s in shapes), model
        )


# --- lesson 07: the training steps and the bottleneck ---------------------------------
# torch.profiler's tables as the sandbox reads them off its profile. The
# sandbox fills each row with the profiler's own values; the judge keeps,
# where it parses a reply, only the rows it can use.


def _finite(value: Any) -> float:
    """A finite number as a float, else 0 (a table cell the judge shows)."""
    return number(value) or 0.0


@dataclass(frozen=True, slots=True)
class ProfileEvent:
    """One of a profile's host-side events: its name, start and end (µs),
    and whether it is a record_function range (None on an older torch)."""

    name: str
    start: float
    end: float
    user: bool | None = None

    @classmethod
    def parse(cls, obj: Any) -> ProfileEvent | None:
        """None for an event with a field of the wrong type (left out)."""
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        start, end = number(obj.get("start")), number(obj.get("end"))
        if start is None or end is None:
            return None
        user = obj.get("user")
        return cls(text(obj["name"], 300), start, end, user if isinstance(user, bool) else None)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "start": self.start, "end": self.end, "user": self.user}


@dataclass(frozen=True, slots=True)
class OpRow:
    """A training step's top operation: calls and times in ms (a cell of the
    wrong type reads as 0). Its JSON is the row the result's profile shows."""

    name: str
    calls: int
    self_cpu_ms: float
    cpu_total_ms: float
    self_device_ms: float

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> OpRow:
        return cls(
            text(obj.get("name"), 300),
            int(_finite(obj.get("calls"))),
            _finite(obj.get("self_cpu_ms")),
            _finite(obj.get("cpu_total_ms")),
            _finite(obj.get("self_device_ms")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "self_cpu_ms": self.self_cpu_ms,
            "cpu_total_ms": self.cpu_total_ms,
            "self_device_ms": self.self_device_ms,
        }


@dataclass(frozen=True, slots=True)
class KernelRow:
    """The GPU's work by kernel: calls and device time in ms (a cell of the
    wrong type reads as 0). Its JSON is the row the result's profile shows."""

    name: str
    calls: int
    device_ms: float

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> KernelRow:
        return cls(
            text(obj.get("name"), 300),
            int(_finite(obj.get("calls"))),
            _finite(obj.get("device_ms")),
        )

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "calls": self.calls, "device_ms": self.device_ms}


def _table(value: Any, kind: type[OpRow] | type[KernelRow], limit: int) -> tuple[Any, ...]:
    """The first `limit` rows, those that are objects, parsed."""
    return tuple(kind.parse(r) for r in _items(value)[:limit] if isinstance(r, dict))


@dataclass(frozen=True, slots=True)
class BlockOp:
    """An operator row of the bottleneck's profile, times in µs."""

    name: str
    calls: float
    self_cpu_us: float
    cpu_total_us: float
    self_device_us: float = 0.0

    @classmethod
    def parse(cls, obj: Any) -> BlockOp | None:
        """None for a row whose name, calls or CPU times are not there, or
        are negative (left out); a device time of the wrong type reads as 0."""
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            return None
        vals = [number(obj.get(k)) for k in ("calls", "self_cpu_us", "cpu_total_us")]
        if any(v is None or v < 0 for v in vals):
            return None
        calls, self_cpu, total = (v or 0.0 for v in vals)
        return cls(
            text(obj["name"], 300), calls, self_cpu, total, _finite(obj.get("self_device_us"))
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls": self.calls,
            "self_cpu_us": self.self_cpu_us,
            "cpu_total_us": self.cpu_total_us,
            "self_device_us": self.self_device_us,
        }


@dataclass(frozen=True, slots=True)
class TrainRequest:
    """`train`: the learner's train_step `steps` times from the judge's
    weights (`params`) and batch, step `profiled` under torch.profiler (its
    trace written to `trace`), the final weights into `final`."""

    TYPE: ClassVar[str] = "train"
    function: str
    params: tuple[TensorRef, ...]
    batch: tuple[TensorRef, ...]
    final: tuple[TensorRef, ...]
    steps: int
    profiled: int
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "params": [r.to_json() for r in self.params],
            "batch": [r.to_json() for r in self.batch],
            "final": [r.to_json() for r in self.final],
            "steps": self.steps,
            "profiled": self.profiled,
            "trace": self.trace,
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> TrainRequest:
        steps, profiled = msg.get("steps"), msg.get("profiled")
        if not isinstance(steps, int) or not isinstance(profiled, int):
            raise ProtocolError("a `train` request without its step counts")
        return cls(
            function=_need_str(msg, "function"),
            params=_refs(msg, "params"),
            batch=_refs(msg, "batch"),
            final=_refs(msg, "final"),
            steps=steps,
            profiled=profiled,
            trace=_opt_str(msg.get("trace")),
        )


@dataclass(frozen=True, slots=True)
class Trained(Reply):
    """`trained`: the losses (a loss that is not a finite number is None),
    or the type train_step returned instead of a loss (`returned`); the
    profiled step's host events (those whose every field has its type), its
    top operations and kernels (the first 20 rows), the NVTX ranges pushed,
    and why the trace was not written."""

    TYPE: ClassVar[str] = "trained"
    losses: tuple[float | None, ...] = ()
    returned: str | None = None
    events: tuple[ProfileEvent, ...] = ()
    top_ops: tuple[OpRow, ...] = ()
    top_kernels: tuple[KernelRow, ...] = ()
    nvtx: tuple[str, ...] = ()
    trace_error: str = ""

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Trained:
        returned = frame.get("returned")
        events = (ProfileEvent.parse(e) for e in _items(frame.get("events")))
        return cls(
            losses=tuple(number(v) for v in _items(frame.get("losses"))),
            returned=None if returned is None else text(returned, 80),
            events=tuple(e for e in events if e is not None),
            top_ops=_table(frame.get("top_ops"), OpRow, 20),
            top_kernels=_table(frame.get("top_kernels"), KernelRow, 20),
            nvtx=_strings(frame.get("nvtx"), 300),
            trace_error=text(frame.get("trace_error"), 300),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "losses": list(self.losses)}
        if self.returned is not None:
            out["returned"] = self.returned
            return out
        out.update(
            events=[e.to_json() for e in self.events],
            top_ops=[r.to_json() for r in self.top_ops],
            trace_error=self.trace_error,
        )
        if self.top_kernels or self.nvtx:
            out.update(top_kernels=[r.to_json() for r in self.top_kernels], nvtx=list(self.nvtx))
        return out


@dataclass(frozen=True, slots=True)
class BottleneckRequest:
    """`bottleneck`: the learner's block once on each input, each output
    into its slot; with `profile`, the calls under torch.profiler, its
    trace written to `trace`."""

    TYPE: ClassVar[str] = "bottleneck"
    function: str
    weights: dict[str, TensorRef]
    inputs: tuple[TensorRef, ...]
    outs: tuple[TensorRef, ...]
    profile: bool = False
    trace: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "weights": {k: r.to_json() for k, r in self.weights.items()},
            "inputs": [r.to_json() for r in self.inputs],
            "outs": [r.to_json() for r in self.outs],
        }
        if self.profile:
            out["profile"] = True
        if self.trace is not None:
            out["trace"] = self.trace
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> BottleneckRequest:
        weights = msg.get("weights")
        if not isinstance(weights, dict):
            raise ProtocolError("a `bottleneck` request without its weights")
        return cls(
            function=_need_str(msg, "function"),
            weights={str(k): TensorRef.from_json(r) for k, r in weights.items()},
            inputs=_refs(msg, "inputs"),
            outs=_refs(msg, "outs"),
            profile=bool(msg.get("profile")),
            trace=_opt_str(msg.get("trace")),
        )


@dataclass(frozen=True, slots=True)
class Blocks(Reply):
    """`blocks`: the file's BOTTLENECK (`answer`, None when it is not a
    string, then `answer_type` names its type), whether each output
    reached its slot, and the sandbox's own figures: the calls' seconds, or
    for a profile the calls, their wall time, the profile's CPU total, its
    operator rows (those whose every field has its type), its first 10
    kernel rows and why the trace was not written."""

    TYPE: ClassVar[str] = "blocks"
    answer: str | None = None
    answer_type: str = "?"
    copied: tuple[bool, ...] = ()
    seconds: float | None = None
    calls: int | None = None
    wall_s: float | None = None
    cpu_total_us: float | None = None
    ops: tuple[BlockOp, ...] = ()
    top_kernels: tuple[KernelRow, ...] = ()
    trace_error: str = ""

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Blocks:
        answer = frame.get("answer")
        kind = "str" if isinstance(answer, str) else "?"
        if isinstance(answer, dict):
            kind = text(answer.get("type"), 40)
        calls = frame.get("calls")
        ops = (BlockOp.parse(r) for r in _items(frame.get("ops")))
        return cls(
            answer=answer if isinstance(answer, str) else None,
            answer_type=kind,
            copied=_trues(frame.get("copied")),
            seconds=number(frame.get("seconds")),
            calls=_int(calls) if calls is not None else None,
            wall_s=number(frame.get("wall_s")),
            cpu_total_us=number(frame.get("cpu_total_us")),
            ops=tuple(r for r in ops if r is not None),
            top_kernels=_table(frame.get("top_kernels"), KernelRow, 10),
            trace_error=text(frame.get("trace_error"), 300),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "answer": self.answer if self.answer is not None else {"type": self.answer_type},
            "copied": list(self.copied),
        }
        if self.calls is None:
            out["seconds"] = self.seconds
            return out
        out.update(
            calls=self.calls,
            wall_s=self.wall_s,
            cpu_total_us=self.cpu_total_us,
            ops=[r.to_json() for r in self.ops],
            trace_error=self.trace_error,
        )
        if self.top_kernels:
            out["top_kernels"] = [r.to_json() for r in self.top_kernels]
        return out


# --- lesson 06's reduce-overhead step (reduce_overhead) -------------------------------

# A simulated device for the method check: (launch_ms, work_ms, slow_calls, slow_ms).
Scenario = tuple[float, float, int, float]


@dataclass(frozen=True, slots=True)
class OverheadRequest:
    """`overhead`, one `part` of lesson 06's reduce-overhead step:
    "method": the learner's `time_per_call` on each simulated device of
    `scenarios`; "compile": the model built from `weights`, `compile_step`
    applied to it (torch.compile's calls recorded) and the result called
    once on each of `inputs`, each output into its slot of `outs`; "run":
    the compiled step `calls` times on inputs[0], the device synchronized,
    the last output into outs[0] (the judge times the request); "report":
    the learner's `time_per_call` of the model as it is and of the compiled
    step, on inputs[0]."""

    TYPE: ClassVar[str] = "overhead"
    part: str
    weights: dict[str, TensorRef] = field(default_factory=dict)
    inputs: tuple[TensorRef, ...] = ()
    outs: tuple[TensorRef, ...] = ()
    calls: int = 0
    scenarios: tuple[Scenario, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "part": self.part,
            "weights": {k: r.to_json() for k, r in self.weights.items()},
            "inputs": [r.to_json() for r in self.inputs],
            "outs": [r.to_json() for r in self.outs],
            "calls": self.calls,
            "scenarios": [list(s) for s in self.scenarios],
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> OverheadRequest:
        part = _need_str(msg, "part")
        if part not in ("method", "compile", "run", "report"):
            raise ProtocolError(f"an `overhead` request of unknown part {text(part, 20)!r}")
        weights = msg.get("weights")
        if not isinstance(weights, dict):
            raise ProtocolError("an `overhead` request without its weights")
        scenarios = []
        for s in _need_list(msg, "scenarios"):
            if not (isinstance(s, list) and len(s) == 4):
                raise ProtocolError("an `overhead` request whose scenario is not 4 numbers")
            got = [number(v) for v in s]
            values = [v for v in got if v is not None]
            if len(values) != 4:
                raise ProtocolError("an `overhead` request whose scenario is not 4 numbers")
            launch, work, slow_calls, slow = values
            scenarios.append((launch, work, int(slow_calls), slow))
        return cls(
            part=part,
            weights={str(k): TensorRef.from_json(r) for k, r in weights.items()},
            inputs=_refs(msg, "inputs"),
            outs=_refs(msg, "outs"),
            calls=_int(msg.get("calls")),
            scenarios=tuple(scenarios),
        )


@dataclass(frozen=True, slots=True)
class Overhead(Reply):
    """`overhead_done`: what the part found, as the sandbox reports it.
    "method": the learner's milliseconds per scenario (None where it gave
    no number) and the learner's error per scenario ("" for none);
    "compile": each torch.compile call `compile_step` made (its mode and
    options, in words), whether each asked for CUDA graphs, and which
    outputs reached their slots; "run": whether the last output did;
    "report": the learner's milliseconds for the model as it is and for
    the compiled step."""

    TYPE: ClassVar[str] = "overhead_done"
    measured: tuple[float | None, ...] = ()
    errors: tuple[str, ...] = ()
    compiles: tuple[str, ...] = ()
    cudagraphs: tuple[bool, ...] = ()
    copied: tuple[bool, ...] = ()
    eager_ms: float | None = None
    step_ms: float | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Overhead:
        return cls(
            measured=tuple(number(v) for v in _items(frame.get("measured"))),
            errors=_strings(frame.get("errors"), 600),
            compiles=_strings(frame.get("compiles"), 300),
            cudagraphs=_trues(frame.get("cudagraphs")),
            copied=_trues(frame.get("copied")),
            eager_ms=number(frame.get("eager_ms")),
            step_ms=number(frame.get("step_ms")),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "measured": list(self.measured),
            "errors": list(self.errors),
            "compiles": list(self.compiles),
            "cudagraphs": list(self.cudagraphs),
            "copied": list(self.copied),
            "eager_ms": self.eager_ms,
            "step_ms": self.step_ms,
        }


# --- the JAX export (sharded_mlp) -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportRequest:
    """`jax_export`: the mesh, then each step exported at each shape
    ([batch, d, hidden, out]). Lesson 08's exercise (choose_specs) names its
    `steps` (mode -> the file's function) and gpulab's `mesh` (axis names
    and sizes) instead: then no make_mesh is asked for, and each step gets
    that mesh."""

    TYPE: ClassVar[str] = "jax_export"
    shapes: tuple[tuple[int, ...], ...]
    steps: dict[str, str] = field(default_factory=dict)
    mesh: tuple[tuple[str, int], ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "shapes": [list(s) for s in self.shapes]}
        if self.steps:
            out["steps"] = dict(self.steps)
            out["mesh"] = [[a, n] for a, n in self.mesh]
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExportRequest:
        shapes, steps, mesh = msg.get("shapes", []), msg.get("steps") or {}, msg.get("mesh") or []
        try:
            return cls(
                tuple(tuple(int(v) for v in s) for s in shapes),
                {str(k): str(v) for k, v in dict(steps).items()},
                tuple((str(a), int(n)) for a, n in mesh),
            )
        except (TypeError, ValueError):
            raise ProtocolError("a `jax_export` request whose shapes are not shapes") from None


@dataclass(frozen=True, slots=True)
class ExportedStep:
    """One step's export: what went wrong (`error`, "" when it is not
    text), or a program a shape (plain JSON: {"program": base64} or
    {"error": ...}, which gpulab.judge.graders.sharded_mlp checks)."""

    error: str | None = None
    programs: list[Any] = field(default_factory=list)

    @classmethod
    def parse(cls, obj: Any) -> ExportedStep:
        if not isinstance(obj, dict):
            return cls(error="")
        if "error" in obj:
            return cls(error=text(obj["error"]))
        return cls(programs=_items(obj.get("programs")))

    def to_json(self) -> dict[str, Any]:
        return {"error": self.error} if self.error is not None else {"programs": self.programs}


@dataclass(frozen=True, slots=True)
class Exported(Reply):
    """`exported`: why make_mesh failed (""), the devices, each step's
    export by mode (a step the file does not define is left out). `steps`
    is None when the sandbox sent no object for them."""

    TYPE: ClassVar[str] = "exported"
    mesh_problem: str = ""
    devices: int = 0
    steps: dict[str, ExportedStep] | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Exported:
        steps = frame.get("steps")
        return cls(
            mesh_problem=text(frame.get("mesh_problem")),
            devices=_int(frame.get("devices")),
            steps=(
                {str(k): ExportedStep.parse(v) for k, v in steps.items()}
                if isinstance(steps, dict)
                else None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "mesh_problem": self.mesh_problem,
            "devices": self.devices,
            "steps": {k: v.to_json() for k, v in (self.steps or {}).items()},
        }


# --- the replay (gpulab.judge.replay, gpulab.sandbox.replay) --------------------------


@dataclass(frozen=True, slots=True)
class ReplayBuffer:
    """A buffer as the replay starts it: the judge's own copy of an input
    (`input`: its arena, offset and size in bytes), a constant fill (hex
    bytes), the recorded bytes (`data`, base64), or none of these: all bits
    set (`poison`, NaN and -1: never an answer)."""

    nbytes: int
    input: tuple[int, int, int] | None = None
    fill: str | None = None
    data: str | None = None  # "bytes"
    poison: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nbytes": self.nbytes}
        if self.input is not None:
            out["input"] = list(self.input)
        if self.fill is not None:
            out["fill"] = self.fill
        if self.data is not None:
            out["bytes"] = self.data
        if self.poison:
            out["poison"] = True
        return out

    @classmethod
    def parse(cls, value: Any) -> ReplayBuffer:
        if not isinstance(value, dict) or not isinstance(value.get("nbytes"), int):
            raise ProtocolError("a `replay` request with a malformed buffer")
        place = value.get("input")
        if place is not None and (
            not isinstance(place, list)
            or len(place) != 3
            or not all(isinstance(v, int) for v in place)
        ):
            raise ProtocolError("a `replay` request with a malformed input buffer")
        return cls(
            nbytes=value["nbytes"],
            input=None if place is None else (place[0], place[1], place[2]),
            fill=_opt_str(value.get("fill")),
            data=_opt_str(value.get("bytes")),
            poison=value.get("poison") is True,
        )


@dataclass(frozen=True, slots=True)
class ReplayLaunch:
    """A launch the replay runs: a kernel, its grid, its arguments and its
    launch options (checked by the judge: gpulab.judge.replay). `binary`:
    on a GPU, the compiled kernel to launch (a KernelBinary's ident); None
    on the CPU, where the kernel of that name is kept from the file."""

    kernel: str
    grid: tuple[int, ...]
    args: dict[str, Arg]
    options: dict[str, Option] = field(default_factory=dict)
    binary: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "args": {k: arg_json(v) for k, v in self.args.items()},
        }
        if self.options:
            out["options"] = dict(self.options)
        if self.binary is not None:
            out["binary"] = self.binary
        return out

    @classmethod
    def parse(cls, value: Any) -> ReplayLaunch:
        launch = RecordedLaunch.parse(value)
        args = launch.args
        if (
            launch.kernel is None
            or not isinstance(launch.grid, tuple)
            or args is None
            or any(isinstance(v, OtherArg) for v in args.values())
            or launch.options is None
            or launch.binary == -1
        ):
            raise ProtocolError("a `replay` request with a malformed launch")
        return cls(launch.kernel, launch.grid, args, launch.options, launch.binary)


def _replay_binaries(
    msg: dict[str, Any], kind: str, launches: tuple[Any, ...]
) -> tuple[KernelBinary, ...]:
    """A request's compiled kernels (those the replay's sandbox has not been
    sent before); each launch's binary one of them or one sent before."""
    raw = msg.get("binaries") or []
    if not isinstance(raw, list) or len(raw) > MAX_BINARIES:
        raise ProtocolError(f"a `{kind}` request whose `binaries` is not a short list")
    found = tuple(KernelBinary.parse(b) for b in raw)
    binaries = tuple(b for b in found if b is not None)
    if len(binaries) != len(found):
        raise ProtocolError(f"a `{kind}` request with a malformed compiled kernel")
    return binaries


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """`replay`: the kept kernels' source (and the modules it imports), the
    plan gpulab.judge.replay made from a launch record (each buffer's start,
    each launch and torch step, the results as views), and the slots the
    results go to, one a result (the returned tensor; after a backward, the
    gradients too). `again`, where there are slots for it: the same
    launches run a second time from these buffers (the judge's other
    inputs, gpulab.judge.replay_again), their results into `again_slots`."""

    TYPE: ClassVar[str] = "replay"
    source: str
    modules: dict[str, str]
    kernels: tuple[str, ...]
    buffers: tuple[ReplayBuffer, ...]
    launches: tuple[ReplayLaunch | TorchStep, ...]
    outs: tuple[View, ...]
    slots: tuple[TensorRef, ...]
    again: tuple[ReplayBuffer, ...] = ()
    again_slots: tuple[TensorRef, ...] = ()
    binaries: tuple[KernelBinary, ...] = ()  # a GPU's compiled kernels, new to the replay
    # Advice (gpulab.sandbox.costcount, CPU only): "count" what the first
    # run's kernels move and compute, "map" that and which elements each
    # program loaded and stored; "" neither.
    count: str = ""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "source": self.source,
            "modules": self.modules,
            "kernels": list(self.kernels),
            "buffers": [b.to_json() for b in self.buffers],
            "launches": [la.to_json() for la in self.launches],
            "outs": [v.to_json() for v in self.outs],
            "slots": [s.to_json() for s in self.slots],
            "again": [b.to_json() for b in self.again],
            "again_slots": [s.to_json() for s in self.again_slots],
            "binaries": [b.to_json() for b in self.binaries],
        }
        if self.count:
            out["count"] = self.count
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ReplayRequest:
        modules, outs = _replay_parts(msg, "replay")
        slots = tuple(TensorRef.from_json(s) for s in _need_list(msg, "slots"))
        again_slots = tuple(TensorRef.from_json(s) for s in msg.get("again_slots") or ())
        if len(slots) != len(outs) or len(again_slots) not in (0, len(outs)):
            raise ProtocolError("a `replay` request with a slot for each result")
        if not isinstance(msg.get("again") or [], list):
            raise ProtocolError("a `replay` request whose `again` is not a list")
        launches = tuple(_replay_step(la) for la in _need_list(msg, "launches"))
        return cls(
            source=_need_str(msg, "source"),
            modules=modules,
            kernels=_names(msg, "kernels"),
            buffers=tuple(ReplayBuffer.parse(b) for b in _need_list(msg, "buffers")),
            launches=launches,
            outs=outs,
            slots=slots,
            again=tuple(ReplayBuffer.parse(b) for b in msg.get("again") or ()),
            again_slots=again_slots,
            binaries=_replay_binaries(msg, "replay", launches),
            count=msg["count"] if msg.get("count") in ("count", "map") else "",
        )


@dataclass(frozen=True, slots=True)
class ReplayRep:
    """One timed repetition of a replay: its buffers (the judge's fresh
    inputs in their places) and the slots its results go to."""

    buffers: tuple[ReplayBuffer, ...]
    slots: tuple[TensorRef, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "buffers": [b.to_json() for b in self.buffers],
            "slots": [s.to_json() for s in self.slots],
        }

    @classmethod
    def parse(cls, value: Any) -> ReplayRep:
        if not isinstance(value, dict):
            raise ProtocolError("a `replay_time` request with a malformed repetition")
        return cls(
            buffers=tuple(ReplayBuffer.parse(b) for b in _need_list(value, "buffers")),
            slots=tuple(TensorRef.from_json(s) for s in _need_list(value, "slots")),
        )


@dataclass(frozen=True, slots=True)
class ReplayTimeRequest:
    """`replay_time`: a record's launches (as a `replay` plans them) timed in
    the replay's sandbox, which runs no learner Python: first, for
    `warmup_s` seconds, on the first repetition's buffers; then once on each
    repetition's, the L2 flushed before each (`flush`), between CUDA events
    (a clock on the CPU), each result copied into its slot after the end
    event. gpulab.judge.replay_timing sends it and checks every slot."""

    TYPE: ClassVar[str] = "replay_time"
    source: str
    modules: dict[str, str]
    kernels: tuple[str, ...]
    launches: tuple[ReplayLaunch | TorchStep, ...]
    outs: tuple[View, ...]
    reps: tuple[ReplayRep, ...]
    warmup_s: float = 0.0
    flush: bool = True
    binaries: tuple[KernelBinary, ...] = ()  # a GPU's compiled kernels, new to the replay

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "source": self.source,
            "modules": self.modules,
            "kernels": list(self.kernels),
            "launches": [la.to_json() for la in self.launches],
            "outs": [v.to_json() for v in self.outs],
            "reps": [r.to_json() for r in self.reps],
            "warmup_s": self.warmup_s,
            "flush": self.flush,
            "binaries": [b.to_json() for b in self.binaries],
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ReplayTimeRequest:
        modules, outs = _replay_parts(msg, "replay_time")
        reps = tuple(ReplayRep.parse(r) for r in _need_list(msg, "reps"))
        if not reps or any(len(r.slots) != len(outs) for r in reps):
            raise ProtocolError("a `replay_time` request with a slot for each result")
        warmup = msg.get("warmup_s", 0.0)
        if not isinstance(warmup, (int, float)) or not 0 <= warmup <= 10:
            raise ProtocolError("a `replay_time` request whose `warmup_s` is not seconds")
        launches = tuple(_replay_step(la) for la in _need_list(msg, "launches"))
        return cls(
            source=_need_str(msg, "source"),
            modules=modules,
            kernels=_names(msg, "kernels"),
            launches=launches,
            outs=outs,
            reps=reps,
            warmup_s=float(warmup),
            flush=msg.get("flush", True) is not False,
            binaries=_replay_binaries(msg, "replay_time", launches),
        )


@dataclass(frozen=True, slots=True)
class ReplayTimed(Reply):
    """`replay_timed`: each repetition's time in ms, in order, or why the
    replay stopped. The replay's sandbox ran no learner Python, so these are
    the judge's own measurement, made by gpulab's code."""

    TYPE: ClassVar[str] = "replay_timed"
    times_ms: tuple[float, ...] = ()
    problem: str = ""

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> ReplayTimed:
        times = frame.get("times_ms")
        ok = isinstance(times, list) and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
            for t in times
        )
        return cls(
            tuple(float(t) for t in times) if ok and isinstance(times, list) else (),
            text(frame.get("problem"), 400),
        )

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "times_ms": list(self.times_ms), "problem": self.problem}


def _replay_modules(msg: dict[str, Any], kind: str) -> dict[str, str]:
    modules = msg.get("modules")
    if not isinstance(modules, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in modules.items()
    ):
        raise ProtocolError(f"a `{kind}` request whose modules are not names")
    return modules


def _replay_parts(msg: dict[str, Any], kind: str) -> tuple[dict[str, str], tuple[View, ...]]:
    """A replay request's modules (names to source) and its results' views."""
    modules = _replay_modules(msg, kind)
    outs = [View.parse(v) for v in _need_list(msg, "outs")]
    views = tuple(v for v in outs if v is not None)
    if not views or len(views) != len(outs):
        raise ProtocolError(f"a `{kind}` request whose `outs` are not views")
    return modules, views


def _replay_step(value: Any) -> ReplayLaunch | TorchStep:
    step = parse_step(value)
    if isinstance(step, TorchStep):
        if step.op is None or step.src is None or step.dst is None:
            raise ProtocolError("a `replay` request with a malformed torch step")
        return step
    return ReplayLaunch.parse(value)


@dataclass(frozen=True, slots=True)
class Replayed(Reply):
    """`replayed`: why the replay stopped ("": it ran, the result is in the slot);
    and, where the request asked, what its kernels did (`counts`: plain
    JSON, read field by field by gpulab.judge.cost; advice only)."""

    TYPE: ClassVar[str] = "replayed"
    problem: str = ""
    counts: dict[str, Any] | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Replayed:
        counts = frame.get("counts")
        return cls(text(frame.get("problem"), 400), counts if isinstance(counts, dict) else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "problem": self.problem}
        if self.counts is not None:
            out["counts"] = self.counts
        return out


# --- --explain (gpulab.explain: advice, never the grade) ----------------------------


@dataclass(frozen=True, slots=True)
class ExplainRequest:
    """`explain`: trace the learner's function on each case (gpulab.explain
    .cases' descriptions, plain JSON) and compile the kernels for `arch`
    within `budget_s`, or, with `compile` "later", send their keys back
    for `explain_compile` requests."""

    TYPE: ClassVar[str] = "explain"
    function: str
    arch: str
    budget_s: float
    cases: list[Any]
    compile: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": self.TYPE,
            "function": self.function,
            "arch": self.arch,
            "budget_s": self.budget_s,
        }
        if self.compile is not None:
            out["compile"] = self.compile
        out["cases"] = self.cases
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainRequest:
        return cls(
            function=_need_str(msg, "function"),
            arch=str(msg.get("arch") or "sm_90"),
            budget_s=float(msg.get("budget_s", 1.5)),
            cases=list(msg.get("cases") or []),
            compile=_opt_str(msg.get("compile")),
        )


@dataclass(frozen=True, slots=True)
class Explained(Reply):
    """`explained`: each case's launches and the compile facts by kernel key
    (plain JSON: they go into the result's `explain.facts`), how many
    kernels were left uncompiled, the sandbox's seconds and steps, the
    keys still to compile ("later"), or why it could not (`error`)."""

    TYPE: ClassVar[str] = "explained"
    cases: list[Any] = field(default_factory=list)
    compiled: dict[str, Any] = field(default_factory=dict)
    not_compiled: int = 0
    seconds: float | None = None
    steps: dict[str, float] = field(default_factory=dict)
    arch: str = ""
    pending: tuple[str, ...] = ()
    error: str = ""

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Explained:
        steps = _object(frame.get("steps"))
        return cls(
            cases=[c for c in _items(frame.get("cases")) if isinstance(c, dict)],
            compiled=dict(_object(frame.get("compiled"))),
            not_compiled=_int(frame.get("not_compiled")),
            seconds=number(frame.get("seconds")),
            steps={str(k): v for k, v in steps.items() if number(v) is not None},
            arch=text(frame.get("arch"), 40),
            pending=_strings(frame.get("pending")),
            error=text(frame.get("error"), 400),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "cases": self.cases, "compiled": self.compiled}
        if self.error:
            out["error"] = self.error
            return out
        out.update(
            not_compiled=self.not_compiled,
            seconds=self.seconds,
            steps=self.steps,
            arch=self.arch,
            pending=list(self.pending),
        )
        return out


@dataclass(frozen=True, slots=True)
class ExplainPrepare:
    """`explain_prepare`: CPU --explain's first request, its reply read by
    the next one: torch, a compiled Triton and the learner's file imported."""

    TYPE: ClassVar[str] = "explain_prepare"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainPrepare:
        return cls()


@dataclass(frozen=True, slots=True)
class Prepared(Reply):
    """`prepared`: the imports done, or why not (`explain` says it again)."""

    TYPE: ClassVar[str] = "prepared"
    error: str | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Prepared:
        return cls(_opt_str(frame.get("error")))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class ExplainCompile:
    """`explain_compile`: compile one kernel the last `explain` traced."""

    TYPE: ClassVar[str] = "explain_compile"
    key: str

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "key": self.key}

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ExplainCompile:
        return cls(str(msg.get("key", "")))


@dataclass(frozen=True, slots=True)
class ExplainCompiled(Reply):
    """`compiled` (to an `explain_compile`): that kernel's compile facts by
    its key (plain JSON), nothing when it was not pending."""

    TYPE: ClassVar[str] = "compiled"
    compiled: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> ExplainCompiled:
        return cls(dict(_object(frame.get("compiled"))))

    def to_json(self) -> dict[str, Any]:
        return {"type": self.TYPE, "compiled": self.compiled}


@dataclass(frozen=True, slots=True)
class ProfileRequest:
    """`profile`: one call of the function on `case` (its name, args and
    kwargs as gpulab.explain.judge.cases describes them, plain JSON) between
    cudaProfilerStart and Stop, after `warmup` calls, inputs drawn from `seed`."""

    TYPE: ClassVar[str] = "profile"
    function: str
    case: dict[str, Any]
    warmup: int = 1
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "function": self.function,
            "case": self.case,
            "warmup": self.warmup,
            "seed": self.seed,
        }

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> ProfileRequest:
        case = msg.get("case") or {}
        if not isinstance(case, dict):
            raise ProtocolError("a `profile` request whose case is not an object")
        return cls(
            _need_str(msg, "function"), case, int(msg.get("warmup", 1)), int(msg.get("seed", 0))
        )


@dataclass(frozen=True, slots=True)
class Profiled(Reply):
    """`profiled`: the kernels the profiled call launched, or why it failed
    (the numbers are ncu's own, read by the judge)."""

    TYPE: ClassVar[str] = "profiled"
    kernels: tuple[str, ...] = ()
    error: str = ""
    case: str = ""
    steps: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Profiled:
        steps = _object(frame.get("steps"))
        return cls(
            kernels=_strings(frame.get("kernels"), 300),
            error=text(frame.get("error"), 300),
            case=text(frame.get("case"), 300),
            steps={str(k): v for k, v in steps.items() if number(v) is not None},
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE, "kernels": list(self.kernels)}
        if self.error:
            out["error"] = self.error
        else:
            out.update(case=self.case, steps=self.steps)
        return out


# --- the sandbox's reading of a request ---------------------------------------------

_REQUESTS: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        LoadRequest,
        ArenaRequest,
        Warm,
        Prepare,
        ReplayRequest,
        ReplayTimeRequest,
        DynamoRequest,
        DynamoConfigRequest,
        ModesRequest,
        CompileRequest,
        StreamRequest,
        BenchRequest,
        MatmulBenchRequest,
        ExportRequest,
        TrainRequest,
        BottleneckRequest,
        OverheadRequest,
        ExplainRequest,
        ExplainPrepare,
        ExplainCompile,
        ProfileRequest,
        Exit,
    )
}

Request = (
    LoadRequest
    | ArenaRequest
    | Warm
    | Prepare
    | ReplayRequest
    | ReplayTimeRequest
    | AuditEnd
    | CallRequest
    | PlainCall
    | DynamoRequest
    | DynamoConfigRequest
    | ModesRequest
    | CompileRequest
    | StreamRequest
    | BenchRequest
    | MatmulBenchRequest
    | ExportRequest
    | TrainRequest
    | BottleneckRequest
    | OverheadRequest
    | CompileAhead
    | TimeRequest
    | ExplainRequest
    | ExplainPrepare
    | ExplainCompile
    | ProfileRequest
    | Exit
)


def request(msg: dict[str, Any]) -> Request:
    """The sandbox's reading of a frame from the judge; a ProtocolError for
    a type it does not know or a request it cannot use."""
    kind = msg.get("type")
    if kind == "call":
        return PlainCall.parse(msg) if msg.get("plain") else CallRequest.parse(msg)
    if kind == "time":
        return TimeRequest.parse(msg)
    if kind == "audit_end":
        return AuditEnd()
    if kind == "compile_ahead":
        return CompileAhead()
    cls = _REQUESTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"a request of unknown type {text(kind, 40)!r}")
    parsed: Request = cls.parse(msg)
    return parsed
