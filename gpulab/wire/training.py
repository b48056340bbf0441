"""Lesson 07's frames, judge <-> sandbox: the training steps and the
bottleneck, with torch.profiler's tables as the sandbox reads them.

Each frame is declared once; gpulab.wire.codec writes and reads it (a
request strictly, a reply tolerantly).

This module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gpulab.wire.codec import ABSENT, Frame, Tolerant, decode, encode, wire
from gpulab.wire.fields import items, reached, said
from gpulab.wire.protocol import JsonObject, TensorRef, number, text
from gpulab.wire.replies import Reply

# --- lesson 07: the training steps and the bottleneck ---------------------------------
# torch.profiler's tables as the sandbox reads them off its profile. The
# sandbox fills each row with the profiler's own values; the judge keeps,
# where it reads a reply, only the rows it can use.


def _calls(value: Any) -> int:
    """A table's count of calls: a finite number cut to an int, else 0."""
    return int(number(value) or 0.0)


def _size(value: Any) -> Any:
    """A count or a time an operator row needs: a finite number, not
    negative; else the row is left out."""
    got = number(value)
    return got if got is not None and got >= 0 else ABSENT


@dataclass(frozen=True, slots=True)
class ProfileEvent(Tolerant):
    """One of a profile's host-side events: its name, start and end (µs),
    and whether it is a record_function range (None on an older torch). An
    event with a field of the wrong type is left out."""

    name: str = wire(limit=300)
    start: float = wire()  # required, as `name`
    end: float = wire()
    user: bool | None = None


# A table's cell of the wrong type reads as 0: its JSON is the row the
# result's profile shows.


@dataclass(frozen=True, slots=True)
class OpRow(Tolerant):
    """A training step's top operation: calls and times in ms."""

    name: str = wire("", limit=300)
    calls: int = wire(0, read=_calls)
    self_cpu_ms: float = 0.0
    cpu_total_ms: float = 0.0
    self_device_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class KernelRow(Tolerant):
    """The GPU's work by kernel: calls and device time in ms."""

    name: str = wire("", limit=300)
    calls: int = wire(0, read=_calls)
    device_ms: float = 0.0


Row = TypeVar("Row", OpRow, KernelRow)


def _first(kind: type[Row], limit: int) -> Callable[[Any], tuple[Row, ...]]:
    """A table's reader: its first `limit` rows, those that are objects."""
    return lambda value: tuple(decode(kind, r) for r in items(value)[:limit] if isinstance(r, dict))


@dataclass(frozen=True, slots=True)
class BlockOp(Tolerant):
    """An operator row of the bottleneck's profile, times in µs: a row whose
    name, calls or CPU times are not there, or are negative, is left out; a
    device time of the wrong type reads as 0."""

    name: str = wire(limit=300)
    calls: float = wire(read=_size)
    self_cpu_us: float = wire(read=_size)
    cpu_total_us: float = wire(read=_size)
    self_device_us: float = 0.0


@dataclass(frozen=True, slots=True)
class TrainRequest(Frame):
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


@dataclass(frozen=True, slots=True)
class Trained(Tolerant, Reply):
    """`trained`: the losses (a loss that is not a finite number is None),
    or the type train_step returned instead of a loss (`returned`); the
    profiled step's host events, its top operations and kernels (the first
    20 rows), the NVTX ranges pushed, and why the trace was not written."""

    TYPE: ClassVar[str] = "trained"
    losses: tuple[float | None, ...] = ()
    returned: str | None = wire(None, omit=True, read=said(80))
    events: tuple[ProfileEvent, ...] = ()
    top_ops: tuple[OpRow, ...] = wire((), read=_first(OpRow, 20))
    top_kernels: tuple[KernelRow, ...] = wire((), omit=True, read=_first(KernelRow, 20))
    nvtx: tuple[str, ...] = wire((), omit=True, limit=300)
    trace_error: str = wire("", limit=300)


@dataclass(frozen=True, slots=True)
class BottleneckRequest(Frame):
    """`bottleneck`: the learner's block once on each input, each output
    into its slot; with `profile`, the calls under torch.profiler, its
    trace written to `trace`."""

    TYPE: ClassVar[str] = "bottleneck"
    function: str
    weights: dict[str, TensorRef]
    inputs: tuple[TensorRef, ...]
    outs: tuple[TensorRef, ...]
    profile: bool = wire(False, omit=True)
    trace: str | None = wire(None, omit=True)


def _answer(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _answer_type(value: Any) -> str:
    if isinstance(value, str):
        return "str"
    return text(value.get("type"), 40) if isinstance(value, dict) else "?"


@dataclass(frozen=True, slots=True)
class Blocks(Tolerant, Reply):
    """`blocks`: the file's BOTTLENECK (`answer`, None when it is not a
    string, then `answer_type` names its type: on the wire, one `answer`,
    the string or {"type": its type's name}), whether each output reached
    its slot, and the sandbox's own figures: the calls' seconds, or for a
    profile the calls, their wall time, the profile's CPU total, its
    operator rows, its first 10 kernel rows and why the trace was not
    written."""

    TYPE: ClassVar[str] = "blocks"
    answer: str | None = wire(None, read=_answer)
    answer_type: str = wire("?", key="answer", read=_answer_type)
    copied: tuple[bool, ...] = reached()
    seconds: float | None = None
    calls: int | None = None
    wall_s: float | None = None
    cpu_total_us: float | None = None
    ops: tuple[BlockOp, ...] = ()
    top_kernels: tuple[KernelRow, ...] = wire((), omit=True, read=_first(KernelRow, 10))
    trace_error: str = wire("", limit=300)

    def to_json(self) -> JsonObject:
        out = encode(self)
        out["answer"] = self.answer if self.answer is not None else {"type": self.answer_type}
        return out
