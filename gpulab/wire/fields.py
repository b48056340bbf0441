"""What the sandbox's handlers return (`Frame`), and the readers of a reply's
fields whose rule its type alone does not say, shared by the conversation
modules (sandbox_start, dynamo, training, benches, replay, explain; the
kernel path's own, gpulab.wire.calls and timed_batch, are Checked:
gpulab.wire.replies).

The judge builds each request typed and sends its `to_json()`; the sandbox
reads it back with `parse` (gpulab.wire.requests.request: the judge is
trusted, so a malformed request is a ProtocolError, answered "broken").
Each sandbox handler returns its reply typed; the judge reads a reply once,
where it comes in, with gpulab.wire.replies.read_reply(frame, Kind) (through
gpulab.judge.remote.Sandbox.ask): the reply of that kind, or the learner's
exception (`Raised`), or anything else (`Broken`). gpulab.wire.codec reads
each field from its type (module docstring there); the readers below keep
the rules the judge always had where the type alone would read a field
otherwise.

This module imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from gpulab.wire.codec import Tolerant, decode, wire
from gpulab.wire.protocol import JsonObject, text


class Frame(Protocol):
    """What a sandbox handler returns: a reply that knows its JSON."""

    def to_json(self) -> JsonObject: ...


T = TypeVar("T", bound=Tolerant)


def items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def trues(value: Any) -> tuple[bool, ...]:
    """Each entry `is True`, in its place (a slot the sandbox says it wrote:
    the judge reads the n-th for the n-th output)."""
    return tuple(v is True for v in items(value))


def each(cls: type[T]) -> Callable[[Any], tuple[T, ...]]:
    """A reader of a list whose items keep their places (a row a request):
    each item read as a `cls`, one that is not an object as `cls()`."""
    return lambda value: tuple(decode(cls, v) for v in items(value))


def said(limit: int = 20000) -> Callable[[Any], str | None]:
    """A reader: None where nothing came (null), else the string cut, ""
    for one that is not text (something came, but not words)."""
    return lambda value: None if value is None else text(value, limit)


def reached() -> Any:
    """A reply's `copied`: whether each output reached its slot (`trues`)."""
    return wire((), read=trues)


def flag() -> Any:
    """A flag the judge reads as truthy, whatever its type (`disabled`)."""
    return wire(False, read=bool)
