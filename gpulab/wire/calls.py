"""The guarded call, judge <-> sandbox: `call` (the learner's function once,
under the guards, its result copied into a slot) and its `return` (what
came back, what the guards saw, the launch record); and the end of the
correctness calls' shared profile, `audit_end` and its `audited`.

Each frame is declared once (gpulab.wire.codec): the judge's requests are
read strictly by the sandbox, and the sandbox's replies, which decide a
verdict, are Checked (gpulab.wire.replies): a field the judge cannot use
is the learner's failure, naming it, never a crash of the judge.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import Frame, Unfit, decode, encode, wire
from gpulab.wire.launch_record import LaunchRecord
from gpulab.wire.protocol import JsonObject, Kwargs, TensorRef
from gpulab.wire.replies import (
    MAX_ITEMS,
    NAME_LIMIT,
    BadReply,
    Checked,
    Reply,
    checked,
    count,
    flag,
    flags,
    items,
    names,
    part,
    string,
)

MAX_DIMS = 64

# --- the request ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Guards(Frame):
    """What the sandbox watches during a call (gpulab.sandbox.guards): the
    banned torch callables (dotted) and aten ops, those banned only on large
    tensors, the eager-maths guard's width (0: off), and whether the call is
    a window of the shared profile (`audit_span`) or records its launches
    for a replay (`replay`). The switches are sent only when set."""

    banned: tuple[str, ...] = ()
    banned_aten: tuple[str, ...] = ()
    banned_large: tuple[str, ...] = ()
    label: str = ""
    eager_width: int = wire(0, omit=True)
    audit_span: bool = wire(False, omit=True)
    replay: bool = wire(False, omit=True)
    # torch's profiler watches the call (gpulab.sandbox.audit). Off on a GPU
    # where the replay decides whether the kernels alone did the work: there
    # the audit was the learner's own process reporting on itself, and its
    # CUPTI start and stop cost seconds a check.
    audit: bool = wire(True, omit=True)


def _forward(call: CallRequest) -> bool:
    """A call without a backward: its backward's fields are not sent."""
    return not call.grad_args


@dataclass(frozen=True, slots=True)
class CallRequest(Frame):
    """`call`: the learner's `function(*args, **kwargs)` once, under `guards`
    (None: no guards and no audit, lesson 06's torch step), its result copied
    into `out`. `args` and `kwargs` are the arguments' JSON (tensors as
    TensorRef JSON, gpulab.judge.kernel.encode). With `grad_args` the
    backward runs too: the gradients of those arguments for `grad_output`,
    through `grad_api` ("grad": torch.autograd.grad, "backward":
    y.backward), copied into `grad_slots`. With `rest`, the function returns
    a tuple of tensors (lesson 05's backward step: dx and dweight): its first
    goes into `out`, the others into `rest`, in order."""

    TYPE: ClassVar[str] = "call"
    function: str
    args: list[Any]
    kwargs: Kwargs  # the call's, by name
    out: TensorRef | None
    guards: Guards | None = None
    grad_slots: tuple[TensorRef, ...] = ()
    # What the contract asks; the judge checks it.
    contiguous: bool | None = wire(None, omit=True)
    grad_args: tuple[int, ...] = wire((), omit=True)
    grad_output: TensorRef | None = wire(None, omit=_forward)
    grad_api: str | None = wire(None, omit=_forward)
    rest: tuple[TensorRef, ...] = wire((), omit=True)


# --- the reply ------------------------------------------------------------------------


def _shape(value: Any) -> tuple[int, ...]:
    dims = items(value)
    if len(dims) > MAX_DIMS or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in dims
    ):
        raise Unfit("is not a shape")
    return tuple(dims)


@dataclass(frozen=True, slots=True)
class Desc(Checked):
    """What the call returned, as the sandbox describes it (the judge never
    sees the object): a type's name and, for a tensor, its layout."""

    type: str = checked("", string(80))
    exact: bool = checked(False, flag)  # a plain torch.Tensor, not a subclass
    shape: tuple[int, ...] | None = checked(None, _shape, omit=True)
    dtype: str | None = checked(None, string(40), omit=True)  # torch's name without "torch."
    device: str | None = checked(None, string(40), omit=True)  # "cpu", "cuda"
    contiguous: bool | None = checked(None, flag, omit=True)
    grad_fn: bool | None = checked(None, flag, omit=True)

    def to_json(self) -> JsonObject:
        """A tensor's layout; anything else is its type alone."""
        return encode(self) if self.type == "Tensor" else {"type": self.type}


def _first_names(value: Any) -> tuple[str, ...]:
    return names(value)[:3]


@dataclass(frozen=True, slots=True)
class GuardReport(Checked):
    """What the guards saw during one call (gpulab.sandbox.calls): torch ops
    called that the exercise bans, maths run eagerly, the profiler's
    findings (`audit`; its window of the shared profile, `audit_window`),
    how many Triton kernels launched, and where the result came from. A
    field that is None was not reported (the backward's report has fewer);
    a check treats it as the dicts' `.get` did: falsy."""

    banned: tuple[str, ...] = checked((), names)
    eager: tuple[str, ...] = checked((), names)
    audit: tuple[str, ...] = checked((), names)
    launches: int = checked(0, count)
    side_stream: bool = checked(False, flag)
    audit_threads: str | None = checked(None, string(40), omit=True)  # "all" or "calling"
    # Why the profiler could not watch ("" when it did).
    audit_off: str | None = checked(None, string(200), omit=True)
    overruns: int | None = checked(None, count, omit=True)  # canaries past a buffer's end written
    audit_window: int | None = checked(None, count, omit=True)
    wrote_out: bool | None = checked(None, flag, omit=True)  # a kernel handed the inputs wrote it
    altered_after: bool | None = checked(None, flag, omit=True)
    aliases_input: bool | None = checked(None, flag, omit=True)
    # The launch record, typed, never refused here: gpulab.judge.replay checks it.
    replay: LaunchRecord | None = checked(None, LaunchRecord.parse, omit=True)
    # The kernel lines where the interpreter made a NaN from numbers
    # (gpulab.sandbox.nan_watch): the sandbox's word, quoted as advice only.
    nan_at: tuple[str, ...] = checked((), _first_names, omit=True)


def _no_grad(backward: BackwardReply) -> bool:
    return backward.no_grad_fn


@dataclass(frozen=True, slots=True)
class BackwardReply(Checked):
    """The backward of a call with `grad_args`: its guards' report, whether
    each gradient reached its slot (`copied`) or was None (`missing`), or
    that the result carried no gradient at all (`no_grad_fn`: then nothing
    else is sent)."""

    report: GuardReport = checked(GuardReport(), part(GuardReport), omit=_no_grad)
    copied: tuple[bool, ...] = checked((), flags, omit=_no_grad)
    missing: tuple[bool, ...] = checked((), flags, omit=_no_grad)
    no_grad_fn: bool = checked(False, flag, omit=True)


def _backward(value: Any) -> BackwardReply | None:
    """An object; an empty one is no backward."""
    if not isinstance(value, dict):
        raise Unfit(f"is {type(value).__name__}")
    return decode(BackwardReply, value) if value else None


def _some_flags(value: Any) -> tuple[bool, ...]:
    return flags(value) if value else ()  # anything falsy: none


@dataclass(frozen=True, slots=True)
class Returned(Checked, Reply):
    """`return`: the call returned; `copied`: its result reached the slot
    (asked with `rest`: its first tensor; `rest_copied`: each later one)."""

    TYPE: ClassVar[str] = "return"
    desc: Desc = checked(Desc(), part(Desc))
    report: GuardReport = checked(GuardReport(), part(GuardReport))
    copied: bool = checked(False, flag)
    # Asked with grad_args; None when absent.
    backward: BackwardReply | None = checked(None, _backward, omit=True)
    rest_copied: tuple[bool, ...] = checked((), _some_flags, omit=True)


# --- the shared profile's end ---------------------------------------------------------

AUDIT_MALFORMED = "cheat: the profile of your calls came back malformed"
AUDIT_MALFORMED_WHY = (
    "gpulab watches each graded call with torch's profiler, in the sandbox "
    "that runs your code; its report did not match the calls made."
)


@dataclass(frozen=True, slots=True)
class AuditEnd(Frame):
    """`audit_end`: stop the correctness calls' shared profile and send its
    findings, a list a window (gpulab.sandbox.audit.SpanAudit)."""

    TYPE: ClassVar[str] = "audit_end"


def _findings(value: Any) -> tuple[tuple[str, ...], ...]:
    """A list of lists of names (absent: none, which is no profile)."""
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise Unfit("is not a list of windows")
    if not all(
        isinstance(w, list) and len(w) <= MAX_ITEMS and all(isinstance(s, str) for s in w)
        for w in value
    ):
        raise Unfit("holds something other than lists of names")
    return tuple(tuple(s[:NAME_LIMIT] for s in w) for w in value)


@dataclass(frozen=True, slots=True)
class Audited(Checked, Reply):
    """`audited`: each window's findings, in the order of the calls. The
    judge takes any other reply as this one malformed (AUDIT_MALFORMED)."""

    TYPE: ClassVar[str] = "audited"
    findings: tuple[tuple[str, ...], ...] = wire(read=_findings)

    @classmethod
    def refused(cls, unfit: Unfit) -> BadReply:
        """The cheat message the judge always gave a profile it could not read."""
        return BadReply(AUDIT_MALFORMED, AUDIT_MALFORMED_WHY)
