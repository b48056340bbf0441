"""The replay's frames, judge <-> the replay's sandbox
(gpulab.judge.replay, gpulab.sandbox.replay): the plan of a launch record
run again, and timed.

This module imports nothing heavy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from gpulab.wire.fields import _names, _need_list, _need_str, _opt_str
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
from gpulab.wire.protocol import ProtocolError, TensorRef, text
from gpulab.wire.replies import Reply

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
