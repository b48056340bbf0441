"""Lesson 06's frames, judge <-> sandbox: Dynamo's reports (graph breaks,
fullgraph, config changes, compile modes, recompiles) and the
reduce-overhead step.

Each frame is declared once; gpulab.wire.codec writes and reads it (a
request strictly, a reply tolerantly).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Tolerant, plain, wire
from gpulab.wire.fields import each, flag, reached, said, trues
from gpulab.wire.protocol import ProtocolError, TensorRef, text
from gpulab.wire.replies import Reply

# --- lesson 06: Dynamo's reports ---------------------------------------------------


def _changed() -> Any:
    """Dynamo config keys the learner's code changed, as the judge quotes them."""
    return wire((), limit=80)


@dataclass(frozen=True, slots=True)
class DynamoBreak(Tolerant):
    """A graph break: the learner's line, its code and Dynamo's reasons."""

    line: int = 0
    code: str = ""
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DynamoTrace(Tolerant):
    """One trace of the step (gpulab.sandbox.dynamo.trace): the graphs, the
    breaks, the ops captured, fullgraph's error ("" when one came that is
    not text) and the graph's opaque targets."""

    graphs: int = 0
    breaks: tuple[DynamoBreak, ...] = ()
    op_count: int = 0
    error: str | None = wire(None, read=said())
    opaque: tuple[str, ...] = wire((), limit=120)


@dataclass(frozen=True, slots=True)
class DynamoRequest(Frame):
    """`dynamo`: trace the step on `args` (TensorRef JSON), plain, then with
    fullgraph=True when the plain trace has no break."""

    TYPE: ClassVar[str] = "dynamo"
    function: str
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Traced(Tolerant, Reply):
    """`traced`: the plain trace, the fullgraph one (None: not run), whether
    the step is wrapped so Dynamo never traces it, config keys changed."""

    TYPE: ClassVar[str] = "traced"
    plain: DynamoTrace = DynamoTrace()
    full: DynamoTrace | None = None
    disabled: bool = flag()
    config_changed: tuple[str, ...] = _changed()


@dataclass(frozen=True, slots=True)
class DynamoConfigRequest(Frame):
    """`dynamo_config`: Dynamo config changes since the snapshot (undone)."""

    TYPE: ClassVar[str] = "dynamo_config"
    function: str


@dataclass(frozen=True, slots=True)
class DynamoConfig(Tolerant, Reply):
    """`config`: the keys changed, and whether the step is wrapped so that
    Dynamo never traces it."""

    TYPE: ClassVar[str] = "config"
    changed: tuple[str, ...] = _changed()
    disabled: bool = flag()


@dataclass(frozen=True, slots=True)
class CompileRequest(Frame):
    """`compiled`: torch.compile(step, backend, fullgraph=True) on each
    input set (TensorRef JSON), each output copied into its slot."""

    TYPE: ClassVar[str] = "compiled"
    function: str
    backend: str
    inputs: list[list[Any]]
    outs: tuple[TensorRef, ...]


@dataclass(frozen=True, slots=True)
class CompiledSteps(Tolerant, Reply):
    """`compiled`: whether each output reached its slot, config keys changed."""

    TYPE: ClassVar[str] = "compiled"
    copied: tuple[bool, ...] = reached()
    config_changed: tuple[str, ...] = _changed()


@dataclass(frozen=True, slots=True)
class ModesRequest(Frame):
    """`modes`: time the step eagerly (None) and under each torch.compile
    mode (GPU), each output copied into its slot."""

    TYPE: ClassVar[str] = "modes"
    function: str
    modes: tuple[str | None, ...]
    args: list[Any]
    outs: tuple[TensorRef, ...]


_MODE_TIMES = ("ms", "reps", "rse", "min_ms", "max_ms")


def _real(value: Any) -> int | float | None:
    """An int or a float as it came (not a bool; an int past a float's
    range its infinity), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        real: int | float = plain(value)
        return real
    return None


def _time() -> Any:
    """One of a row's timing numbers (gpulab.measure.timing.measure's): left
    out of the JSON when it did not come."""
    return wire(None, omit=True, read=_real)


@dataclass(frozen=True, slots=True)
class ModeRow(Tolerant):
    """One variant's timing (gpulab.measure.timing.measure's numbers), its
    kernels a call and its compile time; a number of the wrong type is None."""

    ms: int | float | None = _time()
    reps: int | float | None = _time()
    rse: int | float | None = _time()
    min_ms: int | float | None = _time()
    max_ms: int | float | None = _time()
    kernels: int = 0
    compile_s: float | None = None

    def times(self) -> dict[str, int | float]:
        """The timing's numbers that came, by their keys."""
        got = {k: getattr(self, k) for k in _MODE_TIMES}
        return {k: v for k, v in got.items() if v is not None}


@dataclass(frozen=True, slots=True)
class Modes(Tolerant, Reply):
    """`modes`: a row a mode, in the order asked (a row that is not an
    object reads as an empty row, in its place)."""

    TYPE: ClassVar[str] = "modes"
    rows: tuple[ModeRow, ...] = wire((), read=each(ModeRow))


@dataclass(frozen=True, slots=True)
class StreamRequest(Frame):
    """`compile_stream`: compile_step(backend), then each request's
    arguments (TensorRef JSON) through what it returned, each output into
    its slot (gpulab.sandbox.recompiles)."""

    TYPE: ClassVar[str] = "compile_stream"
    function: str
    backend: str
    requests: list[Any]
    outs: tuple[TensorRef, ...]


@dataclass(frozen=True, slots=True)
class StreamGraph(Tolerant):
    """A graph the check's backend was handed: during which request (-1:
    while compile_step ran) and its ops."""

    request: int = 0
    ops: int = 0


@dataclass(frozen=True, slots=True)
class Recompile(Tolerant):
    """The guard that failed (its text) and the learner's line (0: none)."""

    guard: str = wire("", limit=300)
    line: int = 0


@dataclass(frozen=True, slots=True)
class Compile(Tolerant):
    """A frame Dynamo compiled: which function, for a recompile why."""

    function: str = wire("", limit=80)
    recompile: Recompile | None = None
    failed: str | None = None


@dataclass(frozen=True, slots=True)
class StreamStep(Tolerant):
    """One request of the stream: its output reached the slot, and what
    Dynamo compiled while it ran."""

    copied: bool = False
    compiles: tuple[Compile, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamBreak(Tolerant):
    """A graph break in the stream: the learner's line and what kind."""

    line: int = 0
    reason: str = wire("", limit=300)


@dataclass(frozen=True, slots=True)
class Stream(Tolerant, Reply):
    """`stream`: config keys the file changed at import and while it ran,
    each graph compiled, the graph each call ran (by request), each
    request's report (in its place), and Dynamo's graph breaks."""

    TYPE: ClassVar[str] = "stream"
    config_at_import: tuple[str, ...] = _changed()
    config_changed: tuple[str, ...] = _changed()
    graphs: tuple[StreamGraph, ...] = ()
    calls: tuple[int, ...] = ()
    requests: tuple[StreamStep, ...] = wire((), read=each(StreamStep))
    graph_breaks: tuple[StreamBreak, ...] = ()


# --- lesson 06's reduce-overhead step (reduce_overhead) -------------------------------

# A simulated device for the method check: (launch_ms, work_ms, slow_calls, slow_ms).
Scenario = tuple[float, float, int, float]
_PARTS = ("method", "compile", "run", "report")


def _part(value: Any) -> str:
    if value not in _PARTS:
        raise ProtocolError(f"an `overhead` request of unknown part {text(value, 20)!r}")
    part: str = value
    return part


@dataclass(frozen=True, slots=True)
class OverheadRequest(Frame):
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
    part: str = wire(read=_part)
    weights: dict[str, TensorRef] = wire(factory=dict)
    inputs: tuple[TensorRef, ...] = ()
    outs: tuple[TensorRef, ...] = ()
    calls: int = 0
    scenarios: tuple[Scenario, ...] = ()


@dataclass(frozen=True, slots=True)
class Overhead(Tolerant, Reply):
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
    errors: tuple[str, ...] = wire((), limit=600)
    compiles: tuple[str, ...] = wire((), limit=300)
    cudagraphs: tuple[bool, ...] = wire((), read=trues)
    copied: tuple[bool, ...] = reached()
    eager_ms: float | None = None
    step_ms: float | None = None
