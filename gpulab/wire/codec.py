"""One codec for every frame: a frame is a dataclass whose fields are
declared once, with their types; `encode` writes its JSON and `decode`
reads it back, field by field, from the field's type.

Two kinds of frame, read by two rules (issue 45 measured the choice:
BENCHMARKS.md, "The wire's codec"):

- a **request** (`Frame`): built by gpulab's own code (the judge's to the
  sandbox), so a field that is missing or of the wrong type is a bug or a
  hostile middle, refused with a ProtocolError naming the field;
- a **reply** (`Tolerant`): from the sandbox, which runs the learner's code,
  so nothing in it is trusted and nothing in it may crash the judge: a field
  of the wrong type reads as absent (its default), a list keeps only the
  items of the right type, a string is cut at its limit, a number past a
  float's range is the infinity of its sign, and a count is never a bool.

A field's own rule, where the type alone does not say it, goes in its
metadata (`wire(...)`): the string limit, the JSON key when it differs
from the name, whether it is left out of the JSON (at its default, or when
a function of the frame says so), or a function that reads the value
itself (`read`), from its key, from more keys than its own (`also`) or
from the whole object (`whole`: the order its keys came in). Extra keys
are ignored, as they always were, or kept as they came in a catch-all
field (`extra`); `Frame.EXTRA = False` refuses them. A value that writes
its own JSON (a `to_json` method: a tensor reference, a part shaped as a
list) is written by it.

A third rule is a frame's own: a reply the judge must refuse whole when a
field is unusable (the kernel path's, gpulab.wire.replies.Checked) reads
each field with its own `read`, which raises `Unfit`; the codec names the
field in it, from the outer frame down, for the frame's own message.

This module imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, Union

from gpulab.wire.protocol import JsonObject, ProtocolError, TensorRef, number, text

# The protocol's version: the first frame each way says it (the judge's
# `config` and the sandbox's `ready`; the judge's first event to the lab),
# and a process that reads another refuses it with a message naming both.
# Raise it whenever a frame's fields change meaning.
PROTOCOL = 1

STRING_LIMIT = 20000
_MISSING: Any = dataclasses.MISSING
# An absent value, both ways through a field's own reader (`wire(read=...)`):
# what it returns for a value it reads as absent (the field's default, or, for
# a field without one, the request refused or the part of a reply left out
# where it sits), and, with `wire(absent=ABSENT)`, what it is given for a
# missing key, to tell one from a null.
ABSENT: Any = _MISSING


def wire(
    default: Any = _MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    limit: int | None = None,
    key: str | None = None,
    omit: bool | Callable[[Any], bool] = False,
    read: Callable[..., Any] | None = None,
    absent: Any = None,
    write: Callable[[Any], Any] | None = None,
    also: tuple[str, ...] = (),
    whole: bool = False,
    extra: bool = False,
) -> Any:
    """A field with its wire rules: `limit` cuts its strings (a reply's are
    cut at STRING_LIMIT unless it says otherwise; a request's are never cut
    unless it says so: a file's source travels whole), `key` is its
    JSON name, `omit` leaves it out of the JSON when it is its default (or,
    a function, when it says so of the frame: a field that goes with
    another), `read` reads its JSON value instead of the type's rule
    (raising a ProtocolError, in a request, for one it cannot use; ABSENT
    for one it reads as absent) and is given `absent` where the key is
    missing (None: most readers take a missing key as null; ABSENT, for a
    reader that tells a missing key from a null). `write`, a function of
    the frame, gives the field's JSON value instead of the field's own
    (ABSENT: the key left out): for two fields that share one key (a
    stage's `progress`, [done, total]).

    `also`: more keys the field reads (a result's `status` falls back on
    its `passed`): `read` is given its key's value, then each of theirs
    (`absent` for one missing); they are keys of the frame, not extra ones.
    `whole`: `read` is given the whole object (the order its keys came in);
    the field reads no key of its own and writes none. `extra`: the field
    (a dict) holds the object's keys that no other field reads, as they
    came, in their order, and writes them back after the fields' (one that
    shares a field's key, over it)."""
    meta = {
        "limit": limit,
        "key": key,
        "omit": omit,
        "read": read,
        "absent": absent,
        "write": write,
        "also": also,
        "whole": whole,
        "extra": extra,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class Frame:
    """A frame read strictly (a request from gpulab's own code). `TYPE`:
    its `type` key (none for a part nested in a frame)."""

    __slots__ = ()
    TYPE: ClassVar[str] = ""
    STRICT: ClassVar[bool] = True
    EXTRA: ClassVar[bool] = True  # keys the frame does not declare, ignored

    @classmethod
    def parse(cls: type[F], msg: JsonObject) -> F:
        return decode(cls, msg)

    def to_json(self) -> JsonObject:
        return encode(self)


class Tolerant(Frame):
    """A frame read tolerantly (a reply from the sandbox: untrusted)."""

    __slots__ = ()
    STRICT: ClassVar[bool] = False


F = TypeVar("F", bound=Frame)


def encode(frame: Frame) -> JsonObject:
    """The frame's JSON: `type` first, then each field by its key."""
    cls = type(frame)
    out: JsonObject = {"type": frame.TYPE} if frame.TYPE else {}
    for f in _plan(cls):
        if f.write is not None:
            if (written := f.write(frame)) is not _MISSING:
                out[f.key] = written
            continue
        value = getattr(frame, f.name)
        omit = f.omit
        if omit and (value == f.default if omit is True else omit(frame)):
            continue
        out[f.key] = _dump(value) if f.nested else value
    if (extra := _EXTRA.get(cls)) is not None:
        out.update(getattr(frame, extra))
    return out


def keys(cls: type[Frame]) -> tuple[str, ...]:
    """The keys the frame's fields write, in their order (not its extra ones)."""
    return tuple(f.key for f in _plan(cls) if f.write is not _unwritten)


def decode(cls: type[F], msg: Any) -> F:
    """`cls` read from its JSON by its fields' rules (module docstring)."""
    if not isinstance(msg, dict):
        if cls.STRICT:
            raise ProtocolError(f"{_what(cls)} that is not an object")
        msg = {}
    plan = _plan(cls)
    if not cls.EXTRA:
        known = _KNOWN[cls]
        unknown = sorted(str(k) for k in msg if k not in known)
        if unknown:
            raise ProtocolError(f"{_what(cls)} with unknown fields: {', '.join(unknown)}")
    values = {}
    for f in plan:
        got = f.decode(msg if f.whole else msg.get(f.key, _MISSING))
        if got is _MISSING:
            if f.required:
                if cls.STRICT:
                    raise ProtocolError(f"{_what(cls)} without its `{f.key}`")
                return _absent(cls)
            continue  # the dataclass's default
        values[f.name] = got
    return cls(**values)


class Unfit(ProtocolError):
    """A value a field's own reader (`wire(read=...)`) cannot use, in a frame
    that words its own refusal: `problem` says what is wrong with it, and
    `path` is filled in by decode, the field's key and those of the frames
    around it, outermost first."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []

    @property
    def field(self) -> str:
        """The field's place: `report.launches`."""
        return ".".join(self.path)


class _Dropped(ProtocolError):
    """A part of a reply without a field it needs: left out where it sits."""


def _absent(cls: type[F]) -> F:
    raise _Dropped(f"{_what(cls)} without a field it needs")


def _what(cls: type[Frame]) -> str:
    return f"a `{cls.TYPE}` frame" if cls.TYPE else f"a {cls.__name__}"


def _dump(value: Any) -> Any:
    if hasattr(value, "to_json"):  # a frame, a tensor reference, a view: writes its own JSON
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


# --- each field's plan, made once a class --------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    key: str
    required: bool
    default: Any
    omit: bool | Callable[[Any], bool]
    decode: Callable[[Any], Any]  # the JSON value (or _MISSING) -> the field's, or _MISSING
    whole: bool  # `decode` is given the whole object (`wire(also=, whole=, extra=)`)
    nested: bool  # its value holds what writes its own JSON (or tuples), written by _dump
    write: Callable[[Any], Any] | None  # the frame -> the key's JSON value, or _MISSING


_PLANS: dict[type, tuple[_Field, ...]] = {}
_KNOWN: dict[type, frozenset[str]] = {}  # the keys a frame's fields read
_EXTRA: dict[type, str] = {}  # a frame's catch-all field (`wire(extra=True)`), if any


def _by(read: Callable[[Any], Any], absent: Any, key: str) -> Callable[[Any], Any]:
    """A field's own reader, given `absent` for a missing key; an Unfit it
    raises gains the field's key (decode, field by field, from the outer
    frame down, fills in its path)."""

    def decode(value: Any) -> Any:
        try:
            return read(absent if value is _MISSING else value)
        except Unfit as exc:
            exc.path.insert(0, key)
            raise

    return decode


def _unwritten(frame: Any) -> Any:
    return _MISSING


def _plan(cls: type) -> tuple[_Field, ...]:
    plan = _PLANS.get(cls)
    if plan is None:
        hints = typing.get_type_hints(cls)
        strict = bool(getattr(cls, "STRICT", True))
        fields = []
        known = {"type"} if getattr(cls, "TYPE", "") else set()
        extra = None
        for f in dataclasses.fields(cls):
            meta = f.metadata
            limit = meta.get("limit")
            if limit is None and not strict:
                limit = STRING_LIMIT
            key = meta.get("key") or f.name
            default = f.default
            if f.default_factory is not _MISSING:
                default = f.default_factory()  # type: ignore[operator]
            what = f"`{getattr(cls, 'TYPE', '') or cls.__name__}`'s `{key}`"
            also = tuple(meta.get("also") or ())
            keyless = bool(meta.get("whole") or meta.get("extra"))  # reads and writes no key
            if (also or meta.get("whole")) and not meta.get("read"):
                raise TypeError(f"{what}: `also` and `whole` read with the field's own `read`")
            if meta.get("extra"):
                extra = f.name
                read: Callable[[Any], Any] = _others(known)
            elif also:
                read = _by_keys(meta["read"], meta.get("absent"), (key, *also))
            elif meta.get("read"):
                read = _by(meta["read"], meta.get("absent"), key)
            else:
                read = _reader(hints[f.name], strict, limit, what)
            if not keyless:
                known.update((key, *also))
            fields.append(
                _Field(
                    name=f.name,
                    key=key,
                    required=f.default is _MISSING and f.default_factory is _MISSING,
                    default=default,
                    omit=meta.get("omit") or False,
                    decode=read,
                    whole=keyless or bool(also),
                    nested=_nested(hints[f.name]),
                    write=_unwritten if keyless else meta.get("write"),
                )
            )
        if extra is not None:
            _EXTRA[cls] = extra
        _KNOWN[cls] = frozenset(known | {"type"})  # a request may say its type
        plan = _PLANS[cls] = tuple(fields)
    return plan


def _others(known: set[str]) -> Callable[[JsonObject], JsonObject]:
    """A catch-all's reader: the keys no field reads (`known`, whole once
    the frame's plan is made), as they came, in their order."""
    return lambda msg: {k: v for k, v in msg.items() if k not in known}


def _by_keys(read: Callable[..., Any], absent: Any, keys: tuple[str, ...]) -> Callable[[Any], Any]:
    """A field's own reader of several keys (`wire(also=...)`), given the
    whole object: `read` gets each key's value, `absent` for one missing."""
    one = _by(lambda values: read(*values), absent, keys[0])
    return lambda msg: one(tuple(msg.get(k, absent) for k in keys))


def _nested(hint: Any) -> bool:
    """Whether a value of type `hint` may hold a frame, a tensor reference,
    another value that writes its own JSON (`to_json`) or a tuple (written
    as a list, as json.loads gives it back); the others are JSON as they
    are."""
    if isinstance(hint, type) and hasattr(hint, "to_json"):
        return True
    if typing.get_origin(hint) is tuple:
        return True
    return any(_nested(a) for a in typing.get_args(hint) if a is not Ellipsis)


def _reader(hint: Any, strict: bool, limit: int | None, what: str) -> Callable[[Any], Any]:
    """The reader of a JSON value for a field of type `hint`: the value, or
    _MISSING when it is absent or (in a reply) of the wrong type. In a
    request a value of the wrong type is a ProtocolError."""

    def wrong(value: Any) -> Any:
        if value is _MISSING or not strict:
            return _MISSING
        raise ProtocolError(f"a frame whose {what} is {type(value).__name__}, not {_name(hint)}")

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        inner = _reader(rest[0] if len(rest) == 1 else Any, strict, limit, what)
        # None, or the inner type; in a reply, the wrong type reads as None
        return lambda v: None if v is None else _or_none(inner(v), strict)
    if hint is Any:  # plain JSON, read where it is used (`read=plain` to tame its ints)
        return lambda v: v
    if hint is str:
        return lambda v: v[:limit] if isinstance(v, str) else wrong(v)
    if hint is bool:
        return lambda v: v if isinstance(v, bool) else wrong(v)
    if hint is int:
        return lambda v: v if isinstance(v, int) and not isinstance(v, bool) else wrong(v)
    if hint is float:
        if strict:
            return lambda v: _float(v, wrong)
        return lambda v: _or_missing(number(v))
    if hint is TensorRef:
        return lambda v: TensorRef.from_json(v) if v is not _MISSING else _MISSING
    if isinstance(hint, type) and issubclass(hint, Frame):
        if strict:
            return lambda v: decode(hint, v) if v is not _MISSING else _MISSING
        return lambda v: _part(hint, v)
    if origin in (tuple, list) and args:
        item = _reader(args[0], strict, limit, what)
        make: Callable[[Any], Any] = tuple if origin is tuple else list
        if len(args) != 2 or args[1] is not Ellipsis:
            if origin is tuple:  # a fixed tuple: (m, n, k)
                return lambda v: _fixed(v, args, strict, limit, what, wrong)
        if args[0] is str:  # the common list, in one pass of C loops
            return lambda v: _strings(v, make, strict, limit, wrong)
        return lambda v: _items(v, item, make, strict, wrong)
    if origin is dict and args:
        item = _reader(args[1], strict, limit, what)
        return lambda v: (
            {str(k): got for k, x in v.items() if (got := item(x)) is not _MISSING}
            if isinstance(v, dict)
            else wrong(v)
        )
    if hint in (list, dict) or origin in (list, dict):
        kind = list if hint is list or origin is list else dict
        return lambda v: v if isinstance(v, kind) else wrong(v)
    raise TypeError(f"the codec cannot read a field of type {hint!r}")


def _float(value: Any, wrong: Callable[[Any], Any]) -> Any:
    """A request's number as a float; an int past a float's range is of the
    wrong type (float() would raise OverflowError, not a ProtocolError)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            pass
    return wrong(value)


def _part(cls: type[Frame], value: Any) -> Any:
    """A part of a reply (a row, a report): _MISSING when it is not an
    object or lacks a field it needs."""
    if not isinstance(value, dict):
        return _MISSING
    try:
        return decode(cls, value)
    except _Dropped:
        return _MISSING


def _or_none(value: Any, strict: bool) -> Any:
    return None if value is _MISSING else value


def _or_missing(value: Any) -> Any:
    return _MISSING if value is None else value


def _items(
    value: Any, item: Callable[[Any], Any], make: Callable[[Any], Any], strict: bool, wrong: Any
) -> Any:
    if not isinstance(value, list):
        return wrong(value)
    if strict:
        return make(item(v) for v in value)
    # A reply: the items of the right type, the others left out.
    return make(x for v in value if (x := item(v)) is not _MISSING)


def _strings(value: Any, make: Any, strict: bool, limit: int | None, wrong: Any) -> Any:
    if not isinstance(value, list):
        return wrong(value)
    if strict:
        if not all(isinstance(s, str) for s in value):
            return wrong([s for s in value if not isinstance(s, str)][0])
        return make(s[:limit] for s in value)
    return make(s[:limit] for s in value if isinstance(s, str))


def _fixed(
    value: Any, args: tuple[Any, ...], strict: bool, limit: int | None, what: str, wrong: Any
) -> Any:
    if not isinstance(value, list) or len(value) != len(args):
        return wrong(value)
    got = [_reader(a, strict, limit, what)(v) for a, v in zip(args, value, strict=True)]
    return _MISSING if any(g is _MISSING for g in got) else tuple(got)


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _plain(value: Any) -> Any:
    """A JSON value from the sandbox, each int past a float's range (JSON
    has no limit: `return 10**400`) made the infinity of its sign. The
    judge's arithmetic and formatting turn such an int into a float
    (`math.isfinite`, `f"{v:.10g}"`, `got / want`), and the OverflowError
    read as gpulab's own failure; as an infinity it is a wrong answer."""
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
        return value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def plain(value: Any) -> Any:
    """`_plain`, for a reader of a field of its own (`wire(read=...)`)."""
    return _plain(value)


def text_or_empty(limit: int = STRING_LIMIT) -> Callable[[Any], str]:
    """A reader: the string cut, "" for anything else (the judge's `text`)."""
    return lambda v: text(v, limit)


def check_version(got: Any, who: str) -> None:
    """Refuse a first frame of another protocol's version, naming both."""
    if got != PROTOCOL:
        said = "no version" if got is None else f"version {text(str(got), 20)}"
        raise ProtocolError(
            f"{who} speaks {said} of gpulab's check protocol, this gpulab version {PROTOCOL}:"
            " the two come from different installs of gpulab (reinstall one so both match)"
        )
