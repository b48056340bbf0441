"""How the judge reads a reply from the sandbox, whatever it asked: the
reply of the kind it expects, the learner's exception (`Raised`) or
anything else (`Broken`); and the rule of the kernel path's replies
(`Checked`), which are refused whole when a field cannot be used.

A reply is untrusted: the learner's code runs in the sandbox and can write
frames of its own. Most replies are read tolerantly (gpulab.wire.codec's
`Tolerant`: a field of the wrong type reads as absent). The kernel path's
(the guarded call's `return`, the timed batch's `timed`, the shared
profile's `audited`) decide a verdict, so each of their fields is checked
by its reader below: a wrong type, a list too long, a count below zero is
a `BadReply` carrying the learner-facing failure, never a KeyError in the
judge. A field an honest sandbox may leave out (or send as null) reads as
its default, and names are cut, not refused.

This module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gpulab.wire.codec import Frame, Tolerant, Unfit, decode, wire
from gpulab.wire.protocol import JsonObject, ProtocolError, text

NAME_LIMIT = 120  # an op's or a finding's name, as a message quotes it
MAX_ITEMS = 10_000  # names in a report, repetitions in a batch: far above any honest one


class BadReply(ProtocolError):
    """A reply the judge cannot use: the learner's failure, worded for them."""

    def __init__(self, summary: str, message: str = "") -> None:
        super().__init__(summary)
        self.summary, self.message = summary, message


MALFORMED = "the sandbox's reply to your call came back malformed"
MALFORMED_WHY = (
    "The sandbox that runs your code answers the judge in a fixed format; "
    "this answer did not fit it ({}), so the call cannot be graded."
)


# --- replies every request may get ------------------------------------------------


class Reply:
    """A reply the judge reads with `read_reply`: its `type` and its `parse`."""

    __slots__ = ()
    TYPE: ClassVar[str]

    @classmethod
    def parse(cls: type[R], frame: JsonObject) -> R:
        raise NotImplementedError


R = TypeVar("R", bound=Reply)


def read_reply(frame: JsonObject, kind: type[R]) -> R | Raised | Broken:
    """The judge's reading of a reply it expects to be a `kind`: that reply,
    the learner's exception (`Raised`) or anything else (`Broken`). A `kind`
    whose fields are checked strictly (`Checked`: the kernel path's) raises
    BadReply for one it cannot use."""
    got = frame.get("type")
    if got == kind.TYPE:
        return kind.parse(frame)
    if got == "raised":
        return Raised.parse(frame)
    return Broken.parse(frame)


@dataclass(frozen=True, slots=True)
class Raised(Tolerant):
    """`raised`: the learner's code raised (gpulab.sandbox.failure.LearnerFailure)."""

    TYPE: ClassVar[str] = "raised"
    summary: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True)
class Broken(Tolerant):
    """Any other answer: the sandbox failed ("broken"), or sent a type the
    request does not expect (`kind`: that type)."""

    kind: str = wire("", key="type", limit=40)
    summary: str = ""
    message: str = ""


# --- the kernel path's replies: checked, refused whole ------------------------------


class Checked(Frame):
    """A reply read strictly though it is untrusted: every field has a reader
    of its own (`checked`, or `wire(read=...)` raising Unfit), and a field
    it cannot use refuses the whole reply with `refused`: by default the
    call's malformed reply, naming the field."""

    __slots__ = ()

    @classmethod
    def parse(cls: type[C], msg: JsonObject) -> C:
        try:
            return decode(cls, msg)
        except Unfit as exc:
            raise cls.refused(exc) from None

    @classmethod
    def refused(cls, unfit: Unfit) -> BadReply:
        return BadReply(MALFORMED, MALFORMED_WHY.format(f"`{unfit.field}` {unfit.problem}"))


C = TypeVar("C", bound=Checked)


def checked(
    default: Any, reader: Callable[[Any], Any], *, omit: bool | Callable[[Any], bool] = False
) -> Any:
    """A field of a Checked reply: its default where it is absent or null
    (what an honest sandbox may leave out), else what `reader` makes of it."""
    return wire(default, read=lambda v: default if v is None else reader(v), omit=omit)


# Each reader takes a value that is not None; Unfit for one it cannot use.


def flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Unfit(f"is {type(value).__name__}")
    return value


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unfit("is not a count")
    return value


def string(limit: int) -> Callable[[Any], str]:
    def read(value: Any) -> str:
        if not isinstance(value, str):
            raise Unfit(f"is {type(value).__name__}")
        return text(value, limit)

    return read


def items(value: Any) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise Unfit(f"is not a list of at most {MAX_ITEMS}")
    return value


def names(value: Any) -> tuple[str, ...]:
    listed = items(value)
    if not all(isinstance(s, str) for s in listed):
        raise Unfit("holds something other than names")
    return tuple(text(s, NAME_LIMIT) for s in listed)


def flags(value: Any) -> tuple[bool, ...]:
    listed = items(value)
    if not all(isinstance(b, bool) for b in listed):
        raise Unfit("holds something other than true and false")
    return tuple(listed)


def part(cls: type[C]) -> Callable[[Any], C]:
    """A Checked part of a Checked reply (an object), its fields checked."""

    def read(value: Any) -> C:
        if not isinstance(value, dict):
            raise Unfit(f"is {type(value).__name__}")
        return decode(cls, value)

    return read
