"""The launch record: what gpulab.sandbox.replay records of a correctness
call's Triton launches (each launch's kernel, grid and arguments, the torch
ops a replay runs again between them, the buffers they were handed, and on
a GPU the compiled kernels), sent inside the call's guard report
(gpulab.wire.calls.GuardReport.replay).

It is the sandbox's claim: gpulab.judge.replay decides what of it a replay
may use, so the reading here only types it and keeps everything that
decision and its messages read. A field of the wrong type reads as absent,
unless absent would let it pass where it failed: then it reads as a value
that fails the same way (said where it happens). The reading never raises:
a forged record is refused by the replay, not here.

The records are declared for gpulab.wire.codec (read tolerantly); the
fields whose rule is their own (a place in shared memory, a launch's
arguments with their hex floats and nested tuples, its options, its
compiled kernel) keep their readers, as `wire(read=...)`. A view and a
tensor descriptor travel as lists, and each argument kind under its own
key, so those write their JSON themselves.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpulab.wire.codec import ABSENT, Tolerant, decode, wire
from gpulab.wire.kernel_binary import MAX_BINARIES, KernelBinary
from gpulab.wire.protocol import JsonObject

# The sandbox's strings here are kept whole: the judge checks their size
# (a buffer's bytes, base64) and decodes them.
WHOLE = 1 << 62

# A place given in the judge's shared memory that is not two whole numbers:
# it matches none of the judge's inputs, so the buffer starts as poison.
NOWHERE = (-1, -1)
MAX_INT_ARG = 1 << 63  # an integer argument as large or larger cannot be passed again


def _counted(value: Any) -> str | None:
    """A field that counts when it is truthy (an error, an overflow): its
    text ("" for a value that is not a string), or None when falsy."""
    return (value if isinstance(value, str) else "") if value else None


def _whole(value: Any) -> int | None:
    """A number equal to an integer, as the judge's `==` compared it."""
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _ints(value: Any) -> tuple[int, ...] | None:
    if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
        return None
    return tuple(value)


# --- a launch's arguments -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class View:
    """A tensor as a view of a recorded buffer: [buffer number, storage
    offset, shape, stride, dtype]. Typed only: whether it fits its buffer
    is gpulab.judge.replay's to check."""

    buffer: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str

    @classmethod
    def parse(cls, value: Any) -> View | None:
        """None for anything but five fields of these types."""
        if not isinstance(value, list) or len(value) != 5:
            return None
        buffer, offset, shape, stride, dtype = value
        shape, stride = _ints(shape), _ints(stride)
        if not isinstance(buffer, int) or not isinstance(offset, int) or not isinstance(dtype, str):
            return None
        if shape is None or stride is None:
            return None
        return cls(buffer, offset, shape, stride, dtype)

    def to_json(self) -> list[Any]:
        return [self.buffer, self.offset, list(self.shape), list(self.stride), self.dtype]


@dataclass(frozen=True, slots=True)
class BufferArg:
    """A tensor argument: `{"__buf__": view}`."""

    view: View


# The shared-memory layouts a Gluon TMA descriptor may carry: the replay
# makes one again from its class's name in Gluon's language and its fields.
DESC_LAYOUTS = ("NVMMASharedLayout", "SwizzledSharedLayout")
LayoutValue = int | bool | None | tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class DescLayout:
    """A Gluon shared-memory layout: `[class name, {field: value}]`, values
    numbers, bools, null or lists of them (two deep at most)."""

    kind: str
    fields: tuple[tuple[str, LayoutValue], ...]  # sorted by name

    @classmethod
    def parse(cls, value: Any) -> DescLayout | None:
        if not isinstance(value, list) or len(value) != 2 or value[0] not in DESC_LAYOUTS:
            return None
        raw = value[1]
        if not isinstance(raw, dict) or len(raw) > 12:
            return None
        fields = []
        for name, v in sorted(raw.items()):
            if (
                not isinstance(name, str)
                or not name.isidentifier()
                or name.startswith("_")
                or len(name) > 32
            ):
                return None
            parsed = _layout_value(v, 2)
            if parsed is _BAD:
                return None
            fields.append((name, parsed))
        return cls(value[0], tuple(fields))

    def to_json(self) -> list[Any]:
        return [self.kind, {name: _layout_json(v) for name, v in self.fields}]


_BAD = object()


def _layout_value(v: Any, depth: int) -> Any:
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if abs(v) < 1 << 31 else _BAD
    if isinstance(v, list) and depth > 0 and len(v) <= 8:
        items = tuple(_layout_value(x, depth - 1) for x in v)
        return _BAD if any(x is _BAD for x in items) else items
    return _BAD


def _layout_json(v: LayoutValue) -> Any:
    return [_layout_json(x) for x in v] if isinstance(v, tuple) else v


@dataclass(frozen=True, slots=True)
class DescArg:
    """A TMA tensor descriptor (triton.tools.tensor_descriptor, or Gluon's,
    which carries a shared-memory layout too): its tensor as a view, and the
    shape, strides and block shape the kernel reads it by, its padding and
    whether fp32 is rounded to tf32:
    `{"__desc__": [view, shape, strides, block_shape, padding, tf32]}`, and
    Gluon's layout after them. Typed only: gpulab.judge.replay checks that
    it stays in its buffer."""

    view: View
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    padding: str = "zero"
    tf32: bool = False
    layout: DescLayout | None = None  # Gluon's descriptor; None for triton.tools'

    @classmethod
    def parse(cls, value: Any) -> DescArg | None:
        if not isinstance(value, list) or len(value) not in (6, 7):
            return None
        view = View.parse(value[0])
        shape, strides, block = _ints(value[1]), _ints(value[2]), _ints(value[3])
        padding = value[4]
        if view is None or shape is None or strides is None or block is None:
            return None
        if not isinstance(padding, str) or len(padding) > 8 or not isinstance(value[5], bool):
            return None
        layout = None
        if len(value) == 7:
            layout = DescLayout.parse(value[6])
            if layout is None:
                return None
        return cls(view, shape, strides, block, padding, value[5], layout)

    def to_json(self) -> list[Any]:
        out = [
            self.view.to_json(),
            list(self.shape),
            list(self.strides),
            list(self.block_shape),
            self.padding,
            self.tf32,
        ]
        if self.layout is not None:
            out.append(self.layout.to_json())
        return out


@dataclass(frozen=True, slots=True)
class FloatArg:
    """A float argument, exact: `{"__float__": float.hex()}`."""

    hex: str


@dataclass(frozen=True, slots=True)
class DtypeArg:
    """A triton.language dtype: `{"__tl_dtype__": name}`."""

    name: str


@dataclass(frozen=True, slots=True)
class TupleArg:
    """A tuple argument (Triton takes tuples of tensors, numbers and
    constexprs: strides passed as one argument): `{"__tuple__": [arg, ...]}`."""

    items: tuple[Arg, ...]


MAX_TUPLE = 32  # items in a tuple argument
MAX_TUPLE_DEPTH = 3


@dataclass(frozen=True, slots=True)
class OtherArg:
    """An argument the replay cannot pass again: what the recorder could not
    write (`{"__unsupported__": type name}`), or one that came back malformed
    (`unsupported` None)."""

    unsupported: str | None = None


# A launch's argument: JSON's null, true/false, an integer or a short
# string as it is; anything else one of the records above.
Arg = None | bool | int | str | BufferArg | DescArg | FloatArg | DtypeArg | TupleArg | OtherArg


def parse_arg(value: Any, depth: int = MAX_TUPLE_DEPTH) -> Arg:
    """An argument as the replay would pass it, or an OtherArg (the replay
    refuses the launch)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < MAX_INT_ARG else OtherArg()
    if isinstance(value, str):
        return value if len(value) <= 64 else OtherArg()
    if not isinstance(value, dict):
        return OtherArg()
    if len(value) == 1:
        key, inner = next(iter(value.items()))
        view = View.parse(inner) if key == "__buf__" else None
        if view is not None:
            return BufferArg(view)
        desc = DescArg.parse(inner) if key == "__desc__" else None
        if desc is not None:
            return desc
        if key == "__float__" and _float_hex(inner):
            return FloatArg(inner)
        if key == "__tuple__" and isinstance(inner, list) and len(inner) <= MAX_TUPLE and depth:
            items = tuple(parse_arg(v, depth - 1) for v in inner)
            if not any(isinstance(v, OtherArg) for v in items):
                return TupleArg(items)
        if (
            key == "__tl_dtype__"
            and isinstance(inner, str)
            and inner.isidentifier()
            and len(inner) < 16
        ):
            return DtypeArg(inner)
    return OtherArg(_counted(value.get("__unsupported__")))


def flat_args(args: dict[str, Arg]) -> list[tuple[str, Arg]]:
    """A launch's arguments with each tuple's items in its place
    (`strides[1]`), for rules that look at every tensor a launch is handed."""
    out: list[tuple[str, Arg]] = []

    def walk(key: str, v: Arg) -> None:
        if isinstance(v, TupleArg):
            for i, item in enumerate(v.items):
                walk(f"{key}[{i}]", item)
        else:
            out.append((key, v))

    for k, v in args.items():
        walk(k, v)
    return out


def _float_hex(value: Any) -> bool:
    try:
        float.fromhex(value)
    except (TypeError, ValueError, OverflowError):
        # OverflowError: "0x1p+1024000" is well formed and past a float's
        # range; it read as gpulab's own failure ("could not run this check").
        return False
    return True


def arg_json(arg: Arg) -> Any:
    """An argument's JSON (any JSON value: a scalar as it is)."""
    if isinstance(arg, BufferArg):
        return {"__buf__": arg.view.to_json()}
    if isinstance(arg, DescArg):
        return {"__desc__": arg.to_json()}
    if isinstance(arg, FloatArg):
        return {"__float__": arg.hex}
    if isinstance(arg, DtypeArg):
        return {"__tl_dtype__": arg.name}
    if isinstance(arg, TupleArg):
        return {"__tuple__": [arg_json(v) for v in arg.items]}
    if isinstance(arg, OtherArg):
        return {"__unsupported__": arg.unsupported}
    return arg


# --- the buffers, launches and torch steps --------------------------------------------


def _nbytes(value: Any) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def _place(value: Any) -> tuple[int, int] | None:
    """A place in the judge's shared memory (arena id, offset): None where
    none was given, NOWHERE where it is not two whole numbers."""
    if value is None:
        return None
    if isinstance(value, list) and len(value) == 2:
        ident, offset = (_whole(v) for v in value)
        if ident is not None and offset is not None:
            return (ident, offset)
    return NOWHERE


@dataclass(frozen=True, slots=True)
class RecordedBuffer(Tolerant):
    """A buffer the first time a launch was handed it, as it was then: a
    place in the judge's shared memory (`arena`: arena id, offset), a
    constant fill (hex bytes), its bytes (`data`, base64), or `unknown`
    (too large, or not on the CPU)."""

    # None: missing or not a count (the record is malformed)
    nbytes: int | None = wire(None, omit=True, read=_nbytes)
    dtype: str | None = wire(None, omit=True, limit=WHOLE)
    arena: tuple[int, int] | None = wire(None, omit=True, read=_place)  # NOWHERE: no place
    fill: str | None = wire(None, omit=True, limit=WHOLE)
    data: str | None = wire(None, key="bytes", omit=True, limit=WHOLE)
    unknown: bool = wire(False, omit=True)


def _qualname(value: Any) -> str | None:
    """Not a string: "", a name no kernel has."""
    return value if value is None or isinstance(value, str) else ""


def _grid(value: Any) -> tuple[int, ...] | str | None:
    """A string is a forged grid, quoted back."""
    return value if isinstance(value, str) else _ints(value)


def _args(value: Any) -> dict[str, Arg] | None:
    """Each argument typed (JSON's keys are strings); None: not an object."""
    return {str(k): parse_arg(v) for k, v in value.items()} if isinstance(value, dict) else None


def _binary_ident(value: Any) -> int | None:
    """A binary's number, or -1 for one that is not a number (the judge
    refuses the launch: no binary has it)."""
    if value is None:
        return None
    return value if type(value) is int and value >= 0 else -1


# Triton's launch options a record keeps (the CUDA backend's, as a kernel
# launch or an autotune Config passes them): how a kernel runs, which the
# replay must repeat to time it as it ran. gpulab.judge.replay checks values.
LAUNCH_OPTIONS = (
    "num_warps",
    "num_stages",
    "num_ctas",
    "maxnreg",
    "enable_fp_fusion",
    "launch_cooperative_grid",
    "launch_pdl",
)
Option = int | bool | None


def parse_options(value: Any) -> dict[str, Option] | None:
    """A launch's options; None when not an object of known names with
    number, bool or null values (the judge then refuses the launch)."""
    if not isinstance(value, dict):
        return None
    out: dict[str, Option] = {}
    for k, v in value.items():
        if k not in LAUNCH_OPTIONS or not (v is None or isinstance(v, (int, bool))):
            return None
        out[k] = v
    return out


@dataclass(frozen=True, slots=True)
class RecordedLaunch(Tolerant):
    """One launch: a @triton.jit kernel's name, where it was defined
    (`qualname`, `file`), its grid and its arguments by name. Or what was
    launched that is not one (`kernel` None, `what`: its type), or why the
    recorder could not read the launch (`error`). `options`: the launch
    options it was given (num_warps, num_stages...: LAUNCH_OPTIONS), which
    change how it runs, not what it computes; None when malformed (an
    absent key is none given)."""

    kernel: str | None = wire(None, limit=WHOLE)
    what: str = wire("", limit=80)
    error: str | None = wire(None, read=_counted)  # any truthy value counts
    qualname: str | None = wire(None, read=_qualname)
    file: str | None = wire(None, limit=WHOLE)
    grid: tuple[int, ...] | str | None = wire(None, read=_grid)
    args: dict[str, Arg] | None = wire(None, read=_args)  # None: not an object (malformed)
    options: dict[str, Option] | None = wire(factory=dict, read=parse_options, absent={})
    # On a GPU: the compiled kernel the launch ran (KernelBinary.ident), which
    # the replay launches; None on the CPU (the interpreter compiles nothing).
    binary: int | None = wire(None, read=_binary_ident)

    @classmethod
    def parse(cls, value: Any) -> RecordedLaunch:
        if not isinstance(value, dict):
            return cls(what="?")
        return decode(cls, value)

    def to_json(self) -> JsonObject:
        """Three shapes: what is not a kernel, a launch the recorder could
        not read, a kernel's launch."""
        if self.kernel is None:
            return {"kernel": None, "what": self.what}
        if self.error is not None:
            return {"kernel": self.kernel, "error": self.error}
        out: JsonObject = {
            "kernel": self.kernel,
            "qualname": self.qualname,
            "file": self.file,
            "grid": list(self.grid) if isinstance(self.grid, tuple) else self.grid,
            "args": {k: arg_json(v) for k, v in (self.args or {}).items()},
        }
        if self.options:
            out["options"] = dict(self.options)
        elif self.options is None:
            out["options"] = None
        if self.binary is not None:
            out["binary"] = self.binary
        return out


# The torch ops a replay runs again between launches (TorchStep.op).
STEP_OPS = ("copy", "sum")


def _op(value: Any) -> str | None:
    return value if value in STEP_OPS else None


def _dims(value: Any) -> tuple[int, ...] | None:
    return None if value is None else _ints(value) or ()


@dataclass(frozen=True, slots=True)
class TorchStep(Tolerant):
    """A torch op the wrapper ran between its launches that the replay runs
    again: `copy` (src's values into dst, cast to dst's dtype: a cast, a
    clone, `copy_`) or `sum` (src added up over `dims`, into dst: lesson
    05's (P, D) -> (D,) sum of dweight partials). Which of them a replay
    may run is gpulab.judge.replay's to decide; `op` None: malformed."""

    op: str | None = wire(read=_op)
    src: View | None = wire(read=View.parse)
    dst: View | None = wire(read=View.parse)
    dims: tuple[int, ...] | None = wire(
        None, omit=True, read=_dims
    )  # sum: None for every dimension
    keepdim: bool = wire(False, omit=True)


def parse_step(value: Any) -> RecordedLaunch | TorchStep:
    """One entry of a record's `launches`: a torch op where it names one."""
    if isinstance(value, dict) and "op" in value:
        return TorchStep.parse(value)
    return RecordedLaunch.parse(value)


# --- the record -----------------------------------------------------------------------


def _buffers(value: Any) -> tuple[RecordedBuffer, ...] | None:
    return tuple(RecordedBuffer.parse(b) for b in value) if isinstance(value, list) else None


def _steps(value: Any) -> tuple[RecordedLaunch | TorchStep, ...] | None:
    return tuple(parse_step(la) for la in value) if isinstance(value, list) else None


def _grads(value: Any) -> tuple[View | None, ...] | None:
    return tuple(View.parse(g) for g in value[:8]) if isinstance(value, list) else None


def _binaries(value: Any) -> tuple[KernelBinary | None, ...]:
    if not isinstance(value, list):
        return () if value is None else (None,)
    if len(value) > MAX_BINARIES:
        return (None,)
    return tuple(KernelBinary.parse(b) for b in value)


def _sent(value: Any) -> bool:  # given ABSENT where `out` is not sent at all
    return value is not ABSENT


def _no_tensor(record: LaunchRecord) -> bool:
    return not record.tensor_out


def _never_written(record: LaunchRecord) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class LaunchRecord(Tolerant):
    """A call's launches (and the torch ops a replay runs again between
    them) and the buffers they were handed, in order; the returned tensor
    as a view of one (`out`: None when it was handed to no launch;
    `tensor_out`: the call returned a tensor at all, said by `out` being
    sent); after a backward, each gradient as a view (`grads`: None where
    it is in no recorded buffer); `overflow`: why the record stopped (too
    many launches)."""

    buffers: tuple[RecordedBuffer, ...] | None = wire(read=_buffers)  # None: not a list
    launches: tuple[RecordedLaunch | TorchStep, ...] | None = wire(read=_steps)
    out: View | None = wire(None, read=View.parse, omit=_no_tensor)
    tensor_out: bool = wire(False, key="out", read=_sent, absent=ABSENT, omit=_never_written)
    overflow: str | None = wire(None, read=_counted, omit=True)  # any truthy value counts
    grads: tuple[View | None, ...] | None = wire(None, read=_grads, omit=True)
    # The compiled kernels first launched in this call (a GPU's;
    # gpulab.wire.kernel_binary): None where one came back malformed.
    binaries: tuple[KernelBinary | None, ...] = wire((), read=_binaries, omit=True)

    @classmethod
    def parse(cls, value: Any) -> LaunchRecord | None:  # type: ignore[override]
        """The record, or None where there is none (or no object): a reply
        without a record is one that recorded nothing."""
        return decode(cls, value) if isinstance(value, dict) else None
