"""The frames' shared readers of a field, and how the frames outside the
kernel path are read (the kernel path's, gpulab.wire.calls and timed_batch,
are Checked: gpulab.wire.replies; the conversation modules hold the rest:
sandbox_start, dynamo, training, benches, replay, explain).

The judge builds each request typed and sends its `to_json()`; the sandbox
reads it back with `parse` (gpulab.wire.requests.request: the judge is
trusted, so a malformed request is a ProtocolError, answered "broken").
Each sandbox handler returns its reply typed; the judge reads a reply once,
where it comes in, with gpulab.wire.replies.read_reply(frame, Kind) (through
gpulab.judge.remote.Sandbox.ask): the reply of that kind, or the learner's
exception (`Raised`), or anything else (`Broken`). A reply is untrusted, so
each field is read as the judge always read it: a field of the wrong type
reads as absent (a list of the wrong items keeps those of the right type),
strings are cut, and the messages a learner sees are the judge's,
unchanged. Frames moved to gpulab.wire.codec read these rules from their
fields' types; the readers below serve the frames not moved yet.

Two kinds of content stay plain JSON inside their typed frame, each checked
where it is read: the arguments of a call and the values it returns (any
JSON the learner's records hold), and `--explain`'s facts (they go into the
result as JSON, gpulab.explain).

This module imports nothing heavy.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpulab.wire.codec import _plain as _plain  # one reader of a reply's numbers, the codec's
from gpulab.wire.protocol import ProtocolError, TensorRef, text


class Frame(Protocol):
    """What a sandbox handler returns: a reply that knows its JSON."""

    def to_json(self) -> dict[str, Any]: ...


# --- tolerant fields of untrusted replies -------------------------------------------
# As the judge always read them: the wrong type is the field left out.


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _strings(value: Any, limit: int = 20000) -> tuple[str, ...]:
    return tuple(text(s, limit) for s in _items(value) if isinstance(s, str))


def _int(value: Any) -> int:
    """An int (not a bool), else 0 (gpulab.judge.graph_dynamo.as_int)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _real(value: Any) -> int | float | None:
    """An int or a float as it came (not a bool), else None."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        real: int | float = _plain(value)
        return real
    return None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _trues(value: Any) -> tuple[bool, ...]:
    """Each entry `is True` (a slot the sandbox says it wrote)."""
    return tuple(v is True for v in _items(value))


# --- checked fields of trusted requests ---------------------------------------------


def _need_str(msg: dict[str, Any], key: str) -> str:
    value = msg.get(key)
    if not isinstance(value, str):
        raise ProtocolError(f"a `{msg.get('type')}` request without its `{key}`")
    return value


def _need_list(msg: dict[str, Any], key: str) -> list[Any]:
    value = msg.get(key)
    if not isinstance(value, list):
        raise ProtocolError(f"a `{msg.get('type')}` request whose `{key}` is not a list")
    return value


def _names(msg: dict[str, Any], key: str) -> tuple[str, ...]:
    value = msg.get(key) or []
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ProtocolError(f"a `{msg.get('type')}` request whose `{key}` is not a list of names")
    return tuple(value)


def _refs(msg: dict[str, Any], key: str) -> tuple[TensorRef, ...]:
    return tuple(TensorRef.from_json(v) for v in _need_list(msg, key))


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
