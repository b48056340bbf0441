"""Calling a learner's function that works on records and numbers (lesson
09): arguments go to the sandbox as JSON, the value comes back as JSON, so
the judge only ever sees plain ints, floats, strings, lists and dicts,
whatever the learner's code returned. No torch here."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from gpulab.sandbox.learner import LearnerError
from gpulab.wire.replies import Broken, Raised
from gpulab.wire.sandbox_start import PlainCall, PlainReturned

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext


def encode(obj: Any) -> Any:
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        # A record of plain fields (a model config): an object with attributes there.
        return {"__ns__": {f.name: encode(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
    if isinstance(obj, (list, tuple)):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    raise TypeError(f"cannot pass a {type(obj).__name__} to the sandbox")


def plain_call(ctx: GradeContext, fn: Any, *args: Any) -> Any:
    """The value the learner's function returned, as JSON data."""
    call = PlainCall(fn.name, [encode(a) for a in args])
    got = ctx.sandbox.ask(call, PlainReturned)
    if isinstance(got, Raised):
        raise LearnerError(got.summary, got.message)
    if isinstance(got, Broken):
        ctx.fail(f"the sandbox failed: {got.summary}", got.message)
    return got.value


class Named:
    """Stands for a returned object that is not plain data (named by type)."""

    def __init__(self, type_name: Any) -> None:
        self.name = str(type_name)[:80]

    def __repr__(self) -> str:
        return f"<a {self.name}>"


QUOTED = 300  # characters of a returned value a case's detail quotes


def fmt(v: Any) -> str:
    """A returned value as a case's detail quotes it: cut, since the learner
    chose it (a 2 MiB string quoted in each of 54 cases made a result over
    the 16 MiB a frame holds, and the check ended "the grader stopped
    without a result")."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool)
    out = f"{v:.10g}" if ok else repr(v)
    return out if len(out) <= QUOTED else out[:QUOTED] + f"… ({len(out)} characters)"


def try_call(ctx: GradeContext, fn: Any, *args: Any) -> tuple[Any, str]:
    """(value, "") or (None, the learner's error): one case's failure, not the check's."""
    try:
        value = plain_call(ctx, fn, *args)
        if isinstance(value, dict) and set(value) == {"__unsupported__"}:
            return Named(value["__unsupported__"]), ""
        return value, ""
    except LearnerError as exc:
        return None, exc.summary
