"""The replay's frames, judge <-> the replay's sandbox
(gpulab.judge.replay, gpulab.sandbox.replay): the plan of a launch record
run again, and timed.

Each frame is declared once; gpulab.wire.codec writes and reads it (a
request strictly, a reply tolerantly).

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Tolerant, wire
from gpulab.wire.kernel_binary import MAX_BINARIES, KernelBinary
from gpulab.wire.launch_record import (
    Arg,
    Option,
    OtherArg,
    RecordedLaunch,
    TorchStep,
    View,
    arg_json,
    parse_step,
)
from gpulab.wire.protocol import JsonObject, ProtocolError, TensorRef, number
from gpulab.wire.replies import Reply

# --- the replay (gpulab.judge.replay, gpulab.sandbox.replay) --------------------------


@dataclass(frozen=True, slots=True)
class ReplayBuffer(Frame):
    """A buffer as the replay starts it: the judge's own copy of an input
    (`input`: its arena, offset and size in bytes), a constant fill (hex
    bytes), the recorded bytes (`data`, base64), or none of these: all bits
    set (`poison`, NaN and -1: never an answer)."""

    nbytes: int
    input: tuple[int, int, int] | None = wire(None, omit=True)
    fill: str | None = wire(None, omit=True)
    data: str | None = wire(None, key="bytes", omit=True)
    poison: bool = wire(False, omit=True)


@dataclass(frozen=True, slots=True)
class ReplayLaunch:
    """A launch the replay runs: a kernel, its grid, its arguments and its
    launch options (checked by the judge: gpulab.judge.replay). `binary`:
    on a GPU, the compiled kernel to launch (a KernelBinary's ident); None
    on the CPU, where the kernel of that name is kept from the file. Read
    as a record's launch is (gpulab.wire.launch_record.RecordedLaunch)."""

    kernel: str
    grid: tuple[int, ...]
    args: dict[str, Arg]
    options: dict[str, Option] = field(default_factory=dict)
    binary: int | None = None

    def to_json(self) -> JsonObject:
        out: JsonObject = {
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


def _list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ProtocolError(f"a replay request whose `{key}` is not a list")
    return value


def _step(value: Any) -> ReplayLaunch | TorchStep:
    step = parse_step(value)
    if isinstance(step, TorchStep):
        if step.op is None or step.src is None or step.dst is None:
            raise ProtocolError("a `replay` request with a malformed torch step")
        return step
    return ReplayLaunch.parse(value)


def _launches(value: Any) -> tuple[ReplayLaunch | TorchStep, ...]:
    return tuple(_step(la) for la in _list(value, "launches"))


def _views(value: Any) -> tuple[View, ...]:
    """A replay request's results, as views: one at least."""
    outs = [View.parse(v) for v in _list(value, "outs")]
    views = tuple(v for v in outs if v is not None)
    if not views or len(views) != len(outs):
        raise ProtocolError("a replay request whose `outs` are not views")
    return views


def _binaries(value: Any) -> tuple[KernelBinary, ...]:
    """A request's compiled kernels (those the replay's sandbox has not been
    sent before)."""
    raw = value or []
    if not isinstance(raw, list) or len(raw) > MAX_BINARIES:
        raise ProtocolError("a replay request whose `binaries` is not a short list")
    found = tuple(KernelBinary.parse(b) for b in raw)
    binaries = tuple(b for b in found if b is not None)
    if len(binaries) != len(found):
        raise ProtocolError("a replay request with a malformed compiled kernel")
    return binaries


def _count(value: Any) -> str:
    return str(value) if value in ("count", "map") else ""


@dataclass(frozen=True, slots=True)
class ReplayRequest(Frame):
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
    launches: tuple[ReplayLaunch | TorchStep, ...] = wire(read=_launches)
    outs: tuple[View, ...] = wire(read=_views)
    slots: tuple[TensorRef, ...] = wire()  # required (as the fields before it)
    again: tuple[ReplayBuffer, ...] = ()
    again_slots: tuple[TensorRef, ...] = ()
    # A GPU's compiled kernels, new to the replay.
    binaries: tuple[KernelBinary, ...] = wire((), read=_binaries)
    # Advice (gpulab.sandbox.costcount, CPU only): "count" what the first
    # run's kernels move and compute, "map" that and which elements each
    # program loaded and stored; "" neither.
    count: str = wire("", omit=True, read=_count)

    def __post_init__(self) -> None:
        if len(self.slots) != len(self.outs) or len(self.again_slots) not in (0, len(self.outs)):
            raise ProtocolError("a `replay` request with a slot for each result")


@dataclass(frozen=True, slots=True)
class ReplayRep(Frame):
    """One timed repetition of a replay: its buffers (the judge's fresh
    inputs in their places) and the slots its results go to."""

    buffers: tuple[ReplayBuffer, ...]
    slots: tuple[TensorRef, ...]


@dataclass(frozen=True, slots=True)
class ReplayTimeRequest(Frame):
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
    launches: tuple[ReplayLaunch | TorchStep, ...] = wire(read=_launches)
    outs: tuple[View, ...] = wire(read=_views)
    reps: tuple[ReplayRep, ...] = wire()  # required (as the fields before it)
    warmup_s: float = 0.0
    flush: bool = True
    # A GPU's compiled kernels, new to the replay.
    binaries: tuple[KernelBinary, ...] = wire((), read=_binaries)

    def __post_init__(self) -> None:
        if not self.reps or any(len(r.slots) != len(self.outs) for r in self.reps):
            raise ProtocolError("a `replay_time` request with a slot for each result")
        if not 0 <= self.warmup_s <= 10:
            raise ProtocolError("a `replay_time` request whose `warmup_s` is not seconds")


def _times(value: Any) -> tuple[float, ...]:
    """Every time a finite number, or none."""
    got = [number(t) for t in value] if isinstance(value, list) else []
    return () if None in got else tuple(t for t in got if t is not None)


@dataclass(frozen=True, slots=True)
class ReplayTimed(Tolerant, Reply):
    """`replay_timed`: each repetition's time in ms, in order, or why the
    replay stopped. The replay's sandbox ran no learner Python, so these are
    the judge's own measurement, made by gpulab's code."""

    TYPE: ClassVar[str] = "replay_timed"
    times_ms: tuple[float, ...] = wire((), read=_times)
    problem: str = wire("", limit=400)


@dataclass(frozen=True, slots=True)
class Replayed(Tolerant, Reply):
    """`replayed`: why the replay stopped ("": it ran, the result is in the slot);
    and, where the request asked, what its kernels did (`counts`: plain
    JSON, read field by field by gpulab.judge.cost; advice only)."""

    TYPE: ClassVar[str] = "replayed"
    problem: str = wire("", limit=400)
    counts: JsonObject | None = wire(None, omit=True)
