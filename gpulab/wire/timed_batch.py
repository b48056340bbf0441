"""The timed batch, judge <-> sandbox: `time` (the learner's function on
each repetition's inputs, each call timed between events, the L2 flushed
before it, after a warm-up that logs the clocks) and its `timed` reply.

Declared once (gpulab.wire.codec): the request is read strictly by the
sandbox; the reply is Checked (gpulab.wire.replies): any field the judge
cannot use is NO_TIMING, the learner's failure. That each list has one
entry a repetition is the judge's check (it knows how many it asked for),
with the same message.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Unfit, wire
from gpulab.wire.protocol import Kwargs, TensorRef, number
from gpulab.wire.replies import BadReply, Checked, Reply, checked, flags, items

NO_TIMING = "the sandbox sent no usable timing"


@dataclass(frozen=True, slots=True)
class TimedInputs(Frame):
    """One repetition's arguments (JSON, tensors as TensorRef JSON) and, for
    a backward, its upstream gradient."""

    args: list[Any]
    kwargs: Kwargs  # the call's, by name
    grad_output: TensorRef | None = wire(None, omit=True)


def _forward(request: TimeRequest) -> bool:
    """A forward's timing: the backward's fields are not sent."""
    return not request.grad_args


@dataclass(frozen=True, slots=True)
class TimeRequest(Frame):
    """`time`: `function` once on each repetition's inputs, the L2 flushed
    before each call (`flush`), each result copied into its slot (`outs`)
    after its end event; first, for `warmup_s` seconds, warm-up calls on the
    first set, clocks logged. With `grad_args`, the backward is timed (the
    first gradient to `outs`, the others to the row of `extra_outs`, one row
    a repetition; a forward has none), each repetition led by `lead_cycles`
    of GPU spin."""

    TYPE: ClassVar[str] = "time"
    function: str
    inputs: tuple[TimedInputs, ...]
    outs: tuple[TensorRef, ...]
    flush: bool = True
    warmup_s: float = 0.0
    grad_args: tuple[int, ...] = wire((), omit=True)
    extra_outs: tuple[tuple[TensorRef, ...], ...] = wire((), omit=_forward)
    lead_cycles: int = wire(0, omit=_forward)


# A clock reading's values as the judge keeps them (gpulab.measure.timing.ClockLog).
_CLOCK_VALUES = (int, float, bool, str, list)
# The warm-up's clock summary (gpulab.measure.timing.ClockLog.summary), by
# key, as the sandbox sent it: values of those kinds only (`_clocks`).
ClockValue = int | float | bool | str | list[Any]
Clocks = dict[str, ClockValue]


def _times(value: Any) -> tuple[float, ...]:
    """Finite numbers, one a repetition."""
    times = [number(v) for v in items(value)]
    if any(t is None for t in times):
        raise Unfit("holds something other than finite numbers")
    return tuple(t for t in times if t is not None)


def _clocks(value: Any) -> Clocks | None:
    """They decide nothing: values of another kind are left out, and
    anything but an object is none."""
    if not isinstance(value, dict):
        return None
    return {k: v for k, v in value.items() if isinstance(v, _CLOCK_VALUES)}


@dataclass(frozen=True, slots=True)
class Timed(Checked, Reply):
    """`timed`: each repetition's claimed time (`ms`), its copy out after
    the end event (`copy_ms`), whether its result reached its slot(s)
    (`copied`), for a backward each forward's time (`fwd_ms`), and the
    clocks the warm-up logged. Absent lists are empty: the judge's count
    (one a repetition) refuses them with its message."""

    TYPE: ClassVar[str] = "timed"
    ms: tuple[float, ...] = checked((), _times)
    copy_ms: tuple[float, ...] = checked((), _times)
    copied: tuple[bool, ...] = checked((), flags)
    fwd_ms: tuple[float, ...] = checked((), _times)
    clocks: Clocks | None = checked(None, _clocks)

    @classmethod
    def refused(cls, unfit: Unfit) -> BadReply:
        return BadReply(NO_TIMING)
