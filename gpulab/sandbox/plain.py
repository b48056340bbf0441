"""Plain calls (lesson 09): records in, data out, no torch in this path."""

from __future__ import annotations

import decimal
import numbers
import types
from typing import Any

from gpulab.sandbox import learner
from gpulab.wire.sandbox_start import PlainCall, PlainReturned


def _args(obj: Any) -> Any:
    if isinstance(obj, dict):
        if set(obj) == {"__ns__"} and isinstance(obj["__ns__"], dict):
            return types.SimpleNamespace(**{k: _args(v) for k, v in obj["__ns__"].items()})
        return {k: _args(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_args(v) for v in obj]
    return obj


def plain(v: Any, depth: int = 0) -> Any:
    """The learner's value as JSON data; what is not data is named, not sent."""
    if depth > 8:
        return {"__unsupported__": "nesting"}
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    # A Fraction, a Decimal, a NumPy scalar: honest numbers, sent as numbers.
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, (numbers.Real, decimal.Decimal)):
        return float(v)
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, (list, tuple)):
        return [plain(x, depth + 1) for x in v]
    if isinstance(v, dict):
        return {str(k): plain(x, depth + 1) for k, x in v.items()}
    return {"__unsupported__": type(v).__name__}


def plain_call(server: Any, msg: PlainCall) -> PlainReturned:
    from gpulab.sandbox.failure import LearnerFailure

    fn = server.function(msg.function)
    try:
        out = learner.call(fn, server.file, *_args(msg.args), **_args(msg.kwargs))
    except learner.LearnerError as exc:
        raise LearnerFailure(exc.summary, exc.message) from None
    try:
        value = plain(out)
    except Exception as exc:  # noqa: BLE001 - the returned object's own code
        # Reading the value runs the learner's code (a float subclass's
        # __float__, a dict key's __str__): what it raises is the learner's
        # failure, not "the sandbox failed" with gpulab's traceback.
        tb, last, _ = learner.described(exc, server.file)
        raise LearnerFailure(f"what your function returned could not be read: {last}", tb) from None
    return PlainReturned(value)
