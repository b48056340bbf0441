"""Lesson 06's frames, judge <-> sandbox: Dynamo's reports (graph breaks,
fullgraph, config changes, compile modes, recompiles) and the
reduce-overhead step.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.fields import (
    _int,
    _items,
    _need_list,
    _need_str,
    _object,
    _opt_str,
    _real,
    _refs,
    _strings,
    _trues,
)
from gpulab.wire.protocol import ProtocolError, TensorRef, number, text
from gpulab.wire.replies import Reply

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
