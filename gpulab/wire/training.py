"""Lesson 07's frames, judge <-> sandbox: the training steps and the
bottleneck, with torch.profiler's tables as the sandbox reads them.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.fields import _int, _items, _need_str, _opt_str, _refs, _strings, _trues
from gpulab.wire.protocol import ProtocolError, TensorRef, number, text
from gpulab.wire.replies import Reply

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
