"""The judge <-> sandbox frames of the kernel-grading path, typed.

The judge builds each request typed and sends its `to_json()`; the sandbox
reads it back with `parse` (the judge is trusted: a malformed request is a
ProtocolError, answered "broken"). The sandbox builds its replies typed too;
the judge reads each reply once, where it comes in, with its `parse`. A
reply is untrusted (the learner's code runs in the sandbox and can write
frames of its own), so every field is checked: a wrong type, a list too
long, a missing frame is a `BadReply` carrying the learner-facing failure,
never a KeyError in the judge. A field an honest sandbox may leave out
reads as it always did (absent = falsy), and strings are cut, not refused.

The JSON keys are those the dicts had; a field that is None is a key left out.
The launch record inside a guard report (`replay`, LaunchRecord) is typed
here but never refused here: gpulab.judge.replay decides what of it a
replay may use. Every other frame between the judge and the sandbox is
typed in the conversation modules (gpulab.wire.sandbox_start, dynamo,
training, benches, replay, explain; gpulab.wire.requests reads them).

This module imports nothing heavy.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from gpulab.wire.kernel_binary import MAX_BINARIES, KernelBinary
from gpulab.wire.protocol import ProtocolError, TensorRef, number, text

NAME_LIMIT = 120  # an op's or a finding's name, as a message quotes it
MAX_ITEMS = 10_000  # names in a report, repetitions in a batch: far above any honest one
MAX_DIMS = 64


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
NO_TIMING = "the sandbox sent no usable timing"
AUDIT_MALFORMED = "cheat: the profile of your calls came back malformed"
AUDIT_MALFORMED_WHY = (
    "gpulab watches each graded call with torch's profiler, in the sandbox "
    "that runs your code; its report did not match the calls made."
)


def _malformed(what: str) -> BadReply:
    return BadReply(MALFORMED, MALFORMED_WHY.format(what))


# --- checked fields ---------------------------------------------------------------
# Each takes the value, the name it is reported by and what to raise.


def _bool(value: Any, name: str, absent: bool | None = False) -> Any:
    if value is None:
        return absent
    if not isinstance(value, bool):
        raise _malformed(f"`{name}` is {type(value).__name__}")
    return value


def _count(value: Any, name: str, absent: int | None = 0) -> Any:
    if value is None:
        return absent
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _malformed(f"`{name}` is not a count")
    return value


def _str(value: Any, name: str, limit: int = 20000, absent: str | None = "") -> Any:
    if value is None:
        return absent
    if not isinstance(value, str):
        raise _malformed(f"`{name}` is {type(value).__name__}")
    return text(value, limit)


def _list(value: Any, name: str, bad: Any = _malformed) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MAX_ITEMS:
        raise bad(f"`{name}` is not a list of at most {MAX_ITEMS}")
    return value


def _names(value: Any, name: str) -> tuple[str, ...]:
    items = _list(value, name)
    if not all(isinstance(s, str) for s in items):
        raise _malformed(f"`{name}` holds something other than names")
    return tuple(text(s, NAME_LIMIT) for s in items)


def _dict(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(f"`{name}` is {type(value).__name__}")
    return value


def _omit_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


# --- replies every request may get ------------------------------------------------


class Reply:
    """A reply the judge reads with `read_reply`: its `type` and its `parse`."""

    __slots__ = ()
    TYPE: ClassVar[str]

    @classmethod
    def parse(cls: type[R], frame: dict[str, Any]) -> R:
        raise NotImplementedError


R = TypeVar("R", bound=Reply)


def read_reply(frame: dict[str, Any], kind: type[R]) -> R | Raised | Broken:
    """The judge's reading of a reply it expects to be a `kind`: that reply,
    the learner's exception (`Raised`) or anything else (`Broken`). A `kind`
    whose fields are checked strictly (the kernel path's) raises BadReply
    for one it cannot use."""
    got = frame.get("type")
    if got == kind.TYPE:
        return kind.parse(frame)
    if got == "raised":
        return Raised.parse(frame)
    return Broken.parse(frame)


@dataclass(frozen=True, slots=True)
class Raised:
    """The learner's code raised (gpulab.sandbox.failure.LearnerFailure)."""

    summary: str
    message: str

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Raised:
        return cls(text(frame.get("summary")), text(frame.get("message")))

    def to_json(self) -> dict[str, Any]:
        return {"type": "raised", "summary": self.summary, "message": self.message}


@dataclass(frozen=True, slots=True)
class Broken:
    """Any other answer: the sandbox failed ("broken"), or sent a type the
    request does not expect."""

    kind: str
    summary: str
    message: str

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Broken:
        return cls(
            text(frame.get("type"), 40), text(frame.get("summary")), text(frame.get("message"))
        )

    def to_json(self) -> dict[str, Any]:
        return {"type": self.kind, "summary": self.summary, "message": self.message}


# --- the launch record --------------------------------------------------------------
# What gpulab.sandbox.replay records of a correctness call's Triton launches,
# inside its guard report. It is the sandbox's claim: gpulab.judge.replay
# decides what of it a replay may use, so the parse here only types it and
# keeps everything that decision and its messages read. A field of the wrong
# type reads as absent, unless absent would let it pass where it failed:
# then it reads as a value that fails the same way (said where it happens).
# The parse never raises: a forged record is refused by the replay, not here.

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


@dataclass(frozen=True, slots=True)
class RecordedBuffer:
    """A buffer the first time a launch was handed it, as it was then: a
    place in the judge's shared memory (`arena`: arena id, offset), a
    constant fill (hex bytes), its bytes (`data`, base64), or `unknown`
    (too large, or not on the CPU). Strings are kept whole: the judge
    checks their size and decodes them."""

    nbytes: int | None  # None: missing or not a count (the record is malformed)
    dtype: str | None = None
    arena: tuple[int, int] | None = None  # NOWHERE: given, but no place
    fill: str | None = None
    data: str | None = None  # "bytes"
    unknown: bool = False

    @classmethod
    def parse(cls, value: Any) -> RecordedBuffer:
        if not isinstance(value, dict):
            return cls(None)
        nbytes = value.get("nbytes")
        arena = value.get("arena")
        place = NOWHERE
        if isinstance(arena, list) and len(arena) == 2:
            ident, offset = (_whole(v) for v in arena)
            if ident is not None and offset is not None:
                place = (ident, offset)
        return cls(
            nbytes=nbytes if isinstance(nbytes, int) and nbytes >= 0 else None,
            dtype=_str_or_none(value.get("dtype")),
            arena=None if arena is None else place,
            fill=_str_or_none(value.get("fill")),
            data=_str_or_none(value.get("bytes")),
            unknown=value.get("unknown") is True,
        )

    def to_json(self) -> dict[str, Any]:
        out = _omit_none(
            {
                "nbytes": self.nbytes,
                "dtype": self.dtype,
                "arena": None if self.arena is None else list(self.arena),
                "fill": self.fill,
                "bytes": self.data,
            }
        )
        if self.unknown:
            out["unknown"] = True
        return out


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RecordedLaunch:
    """One launch: a @triton.jit kernel's name, where it was defined
    (`qualname`, `file`), its grid and its arguments by name. Or what was
    launched that is not one (`kernel` None, `what`: its type), or why the
    recorder could not read the launch (`error`). `options`: the launch
    options it was given (num_warps, num_stages...: LAUNCH_OPTIONS), which
    change how it runs, not what it computes; None when malformed."""

    kernel: str | None = None
    what: str = ""
    error: str | None = None  # any truthy value counts ("" when not a string)
    qualname: str | None = None  # not a string: "", a name no kernel has
    file: str | None = None
    grid: tuple[int, ...] | str | None = None  # a string: a forged one, quoted back
    args: dict[str, Arg] | None = None  # None: not an object (malformed)
    options: dict[str, Option] | None = dataclasses.field(default_factory=dict)
    # On a GPU: the compiled kernel the launch ran (KernelBinary.ident), which
    # the replay launches; None on the CPU (the interpreter compiles nothing).
    binary: int | None = None

    @classmethod
    def parse(cls, value: Any) -> RecordedLaunch:
        if not isinstance(value, dict):
            return cls(what="?")
        kernel = value.get("kernel")
        qualname = value.get("qualname")
        grid = value.get("grid")
        args = value.get("args")
        return cls(
            kernel=_str_or_none(kernel),
            what=text(value.get("what"), 80),
            error=_counted(value.get("error")),
            qualname=qualname if qualname is None or isinstance(qualname, str) else "",
            file=_str_or_none(value.get("file")),
            grid=grid if isinstance(grid, str) else _ints(grid),
            # JSON's keys are strings.
            args=(
                {str(k): parse_arg(v) for k, v in args.items()} if isinstance(args, dict) else None
            ),
            options=parse_options(value.get("options", {})),
            binary=_binary_ident(value.get("binary")),
        )

    def to_json(self) -> dict[str, Any]:
        if self.kernel is None:
            return {"kernel": None, "what": self.what}
        if self.error is not None:
            return {"kernel": self.kernel, "error": self.error}
        out: dict[str, Any] = {
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


# The torch ops a replay runs again between launches (TorchStep.op).
STEP_OPS = ("copy", "sum")


@dataclass(frozen=True, slots=True)
class TorchStep:
    """A torch op the wrapper ran between its launches that the replay runs
    again: `copy` (src's values into dst, cast to dst's dtype: a cast, a
    clone, `copy_`) or `sum` (src added up over `dims`, into dst: lesson
    05's (P, D) -> (D,) sum of dweight partials). Which of them a replay
    may run is gpulab.judge.replay's to decide; `op` None: malformed."""

    op: str | None
    src: View | None
    dst: View | None
    dims: tuple[int, ...] | None = None  # sum: None for every dimension
    keepdim: bool = False

    @classmethod
    def parse(cls, value: dict[str, Any]) -> TorchStep:
        op = value.get("op")
        dims = value.get("dims")
        return cls(
            op=op if op in STEP_OPS else None,
            src=View.parse(value.get("src")),
            dst=View.parse(value.get("dst")),
            dims=None if dims is None else _ints(dims) or (),
            keepdim=value.get("keepdim") is True,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "op": self.op,
            "src": None if self.src is None else self.src.to_json(),
            "dst": None if self.dst is None else self.dst.to_json(),
        }
        if self.dims is not None:
            out["dims"] = list(self.dims)
        if self.keepdim:
            out["keepdim"] = True
        return out


def parse_step(value: Any) -> RecordedLaunch | TorchStep:
    """One entry of a record's `launches`: a torch op where it names one."""
    if isinstance(value, dict) and "op" in value:
        return TorchStep.parse(value)
    return RecordedLaunch.parse(value)


@dataclass(frozen=True, slots=True)
class LaunchRecord:
    """A call's launches (and the torch ops a replay runs again between
    them) and the buffers they were handed, in order; the returned tensor
    as a view of one (`out`: None when it was handed to no launch;
    `tensor_out`: the call returned a tensor at all); after a backward, each
    gradient as a view (`grads`: None where it is in no recorded buffer);
    `overflow`: why the record stopped (too many launches)."""

    buffers: tuple[RecordedBuffer, ...] | None  # None: not a list (malformed)
    launches: tuple[RecordedLaunch | TorchStep, ...] | None
    out: View | None = None
    tensor_out: bool = False
    overflow: str | None = None  # any truthy value counts
    grads: tuple[View | None, ...] | None = None
    # The compiled kernels first launched in this call (a GPU's; gpulab.lab
    # .kernel_binary): None where one came back malformed.
    binaries: tuple[KernelBinary | None, ...] = ()

    @classmethod
    def parse(cls, value: Any) -> LaunchRecord | None:
        """The record, or None where there is none (or no object)."""
        if not isinstance(value, dict):
            return None
        buffers, launches = value.get("buffers"), value.get("launches")
        grads = value.get("grads")
        return cls(
            buffers=(
                tuple(RecordedBuffer.parse(b) for b in buffers)
                if isinstance(buffers, list)
                else None
            ),
            launches=(
                tuple(parse_step(la) for la in launches) if isinstance(launches, list) else None
            ),
            out=View.parse(value.get("out")),
            tensor_out="out" in value,
            overflow=_counted(value.get("overflow")),
            grads=tuple(View.parse(g) for g in grads[:8]) if isinstance(grads, list) else None,
            binaries=_binaries(value.get("binaries")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "buffers": None if self.buffers is None else [b.to_json() for b in self.buffers],
            "launches": (None if self.launches is None else [la.to_json() for la in self.launches]),
        }
        if self.overflow is not None:
            out["overflow"] = self.overflow
        if self.tensor_out:
            out["out"] = None if self.out is None else self.out.to_json()
        if self.grads is not None:
            out["grads"] = [None if g is None else g.to_json() for g in self.grads]
        if self.binaries:
            out["binaries"] = [None if b is None else b.to_json() for b in self.binaries]
        return out


def _binaries(value: Any) -> tuple[KernelBinary | None, ...]:
    if not isinstance(value, list):
        return () if value is None else (None,)
    if len(value) > MAX_BINARIES:
        return (None,)
    return tuple(KernelBinary.parse(b) for b in value)


# --- the guarded call ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Guards:
    """What the sandbox watches during a call (gpulab.sandbox.guards): the
    banned torch callables (dotted) and aten ops, those banned only on large
    tensors, the eager-maths guard's width (0: off), and whether the call is
    a window of the shared profile (`audit_span`) or records its launches
    for a replay (`replay`)."""

    banned: tuple[str, ...] = ()
    banned_aten: tuple[str, ...] = ()
    banned_large: tuple[str, ...] = ()
    label: str = ""
    eager_width: int = 0
    audit_span: bool = False
    replay: bool = False
    # torch's profiler watches the call (gpulab.sandbox.audit). Off on a GPU
    # where the replay decides whether the kernels alone did the work: there
    # the audit was the learner's own process reporting on itself, and its
    # CUPTI start and stop cost seconds a check.
    audit: bool = True

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "banned": list(self.banned),
            "banned_aten": list(self.banned_aten),
            "banned_large": list(self.banned_large),
            "label": self.label,
        }
        # Sent only when set, as the dicts were.
        if self.eager_width:
            out["eager_width"] = self.eager_width
        if self.audit_span:
            out["audit_span"] = True
        if self.replay:
            out["replay"] = True
        if not self.audit:
            out["audit"] = False
        return out

    @classmethod
    def parse(cls, obj: Any) -> Guards | None:
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise ProtocolError("a call's guards that are not an object")
        return cls(
            banned=_request_names(obj.get("banned"), "banned"),
            banned_aten=_request_names(obj.get("banned_aten"), "banned_aten"),
            banned_large=_request_names(obj.get("banned_large"), "banned_large"),
            label=str(obj.get("label") or ""),
            eager_width=int(obj.get("eager_width") or 0),
            audit_span=bool(obj.get("audit_span")),
            replay=bool(obj.get("replay")),
            audit=obj.get("audit", True) is not False,
        )


def _request_names(value: Any, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
        raise ProtocolError(f"a request's `{name}` is not a list of names")
    return tuple(value)


def _ref(value: Any) -> TensorRef | None:
    return None if value is None else TensorRef.from_json(value)


def _refs(value: Any, name: str) -> tuple[TensorRef, ...]:
    if not isinstance(value, list):
        raise ProtocolError(f"a request's `{name}` is not a list")
    return tuple(TensorRef.from_json(v) for v in value)


@dataclass(frozen=True, slots=True)
class CallRequest:
    """`call`: the learner's `function(*args, **kwargs)` once, under `guards`
    (None: no guards and no audit, lesson 06's torch step), its result copied
    into `out`. `args` and `kwargs` are the arguments' JSON (tensors as
    TensorRef JSON, gpulab.judge.kernel.encode). With `grad_args` the
    backward runs too: the gradients of those arguments for `grad_output`,
    through `grad_api` ("grad": torch.autograd.grad, "backward":
    y.backward), copied into `grad_slots`. With `rest`, the function returns
    a tuple of tensors (lesson 05's backward step: dx and dweight): its first
    goes into `out`, the others into `rest`, in order."""

    function: str
    args: list[Any]
    kwargs: dict[str, Any]
    out: TensorRef | None
    guards: Guards | None = None
    grad_slots: tuple[TensorRef, ...] = ()
    contiguous: bool | None = None  # what the contract asks; the judge checks it
    grad_args: tuple[int, ...] = ()
    grad_output: TensorRef | None = None
    grad_api: str | None = None
    rest: tuple[TensorRef, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "call",
            "function": self.function,
            "args": self.args,
            "kwargs": self.kwargs,
            "guards": None if self.guards is None else self.guards.to_json(),
            "out": None if self.out is None else self.out.to_json(),
            "grad_slots": [r.to_json() for r in self.grad_slots],
        }
        if self.contiguous is not None:
            out["contiguous"] = self.contiguous
        if self.grad_args:
            out["grad_args"] = list(self.grad_args)
            out["grad_output"] = None if self.grad_output is None else self.grad_output.to_json()
            out["grad_api"] = self.grad_api or "grad"
        if self.rest:
            out["rest"] = [r.to_json() for r in self.rest]
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> CallRequest:
        function, args, kwargs = msg.get("function"), msg.get("args"), msg.get("kwargs")
        if not isinstance(function, str) or not isinstance(args, list):
            raise ProtocolError("a call without its function or arguments")
        if not isinstance(kwargs, dict):
            raise ProtocolError("a call whose kwargs are not an object")
        grad_args = msg.get("grad_args") or []
        if not isinstance(grad_args, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in grad_args
        ):
            raise ProtocolError("a call's `grad_args` is not a list of indices")
        contiguous = msg.get("contiguous")
        return cls(
            function=function,
            args=args,
            kwargs=kwargs,
            out=_ref(msg.get("out")),
            guards=Guards.parse(msg.get("guards")),
            grad_slots=_refs(msg.get("grad_slots") or [], "grad_slots"),
            contiguous=None if contiguous is None else bool(contiguous),
            grad_args=tuple(grad_args),
            grad_output=_ref(msg.get("grad_output")),
            grad_api=None if msg.get("grad_api") is None else str(msg["grad_api"]),
            rest=_refs(msg.get("rest") or [], "rest"),
        )


@dataclass(frozen=True, slots=True)
class Desc:
    """What the call returned, as the sandbox describes it (the judge never
    sees the object): a type's name and, for a tensor, its layout."""

    type: str
    exact: bool = False  # a plain torch.Tensor, not a subclass
    shape: tuple[int, ...] | None = None
    dtype: str | None = None  # torch's name without "torch."
    device: str | None = None  # "cpu", "cuda"
    contiguous: bool | None = None
    grad_fn: bool | None = None

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> Desc:
        shape = obj.get("shape")
        if shape is not None:
            dims = _list(shape, "desc.shape")
            if len(dims) > MAX_DIMS or not all(
                isinstance(d, int) and not isinstance(d, bool) for d in dims
            ):
                raise _malformed("`desc.shape` is not a shape")
            shape = tuple(dims)
        return cls(
            type=_str(obj.get("type"), "desc.type", 80),
            exact=_bool(obj.get("exact"), "desc.exact"),
            shape=shape,
            dtype=_str(obj.get("dtype"), "desc.dtype", 40, None),
            device=_str(obj.get("device"), "desc.device", 40, None),
            contiguous=_bool(obj.get("contiguous"), "desc.contiguous", None),
            grad_fn=_bool(obj.get("grad_fn"), "desc.grad_fn", None),
        )

    def to_json(self) -> dict[str, Any]:
        if self.type != "Tensor":
            return {"type": self.type}
        return _omit_none(
            {
                "type": self.type,
                "exact": self.exact,
                "shape": None if self.shape is None else list(self.shape),
                "dtype": self.dtype,
                "device": self.device,
                "contiguous": self.contiguous,
                "grad_fn": self.grad_fn,
            }
        )


@dataclass(frozen=True, slots=True)
class GuardReport:
    """What the guards saw during one call (gpulab.sandbox.calls): torch ops
    called that the exercise bans, maths run eagerly, the profiler's
    findings (`audit`; its window of the shared profile, `audit_window`),
    how many Triton kernels launched, and where the result came from. A
    field that is None was not reported (the backward's report has fewer);
    a check treats it as the dicts' `.get` did: falsy."""

    banned: tuple[str, ...] = ()
    eager: tuple[str, ...] = ()
    audit: tuple[str, ...] = ()
    launches: int = 0
    side_stream: bool = False
    audit_threads: str | None = None  # "all" or "calling"
    audit_off: str | None = None  # why the profiler could not watch ("" when it did)
    overruns: int | None = None  # canaries past a buffer's end found written
    audit_window: int | None = None
    wrote_out: bool | None = None  # a kernel handed the inputs wrote the result
    altered_after: bool | None = None
    aliases_input: bool | None = None
    replay: LaunchRecord | None = None  # the launch record (gpulab.judge.replay checks it)
    # The kernel lines where the interpreter made a NaN from numbers
    # (gpulab.sandbox.nan_watch): the sandbox's word, quoted as advice only.
    nan_at: tuple[str, ...] = ()

    @classmethod
    def parse(cls, obj: dict[str, Any], where: str = "report") -> GuardReport:
        def key(name: str) -> str:
            return f"{where}.{name}"

        return cls(
            banned=_names(obj.get("banned"), key("banned")),
            eager=_names(obj.get("eager"), key("eager")),
            audit=_names(obj.get("audit"), key("audit")),
            launches=_count(obj.get("launches"), key("launches")),
            side_stream=_bool(obj.get("side_stream"), key("side_stream")),
            audit_threads=_str(obj.get("audit_threads"), key("audit_threads"), 40, None),
            audit_off=_str(obj.get("audit_off"), key("audit_off"), 200, None),
            overruns=_count(obj.get("overruns"), key("overruns"), None),
            audit_window=_count(obj.get("audit_window"), key("audit_window"), None),
            wrote_out=_bool(obj.get("wrote_out"), key("wrote_out"), None),
            altered_after=_bool(obj.get("altered_after"), key("altered_after"), None),
            aliases_input=_bool(obj.get("aliases_input"), key("aliases_input"), None),
            replay=LaunchRecord.parse(obj.get("replay")),
            nan_at=_names(obj.get("nan_at"), key("nan_at"))[:3],
        )

    def to_json(self) -> dict[str, Any]:
        return _omit_none(
            {
                "nan_at": list(self.nan_at) or None,
                "banned": list(self.banned),
                "eager": list(self.eager),
                "audit": list(self.audit),
                "audit_threads": self.audit_threads,
                "audit_off": self.audit_off,
                "launches": self.launches,
                "side_stream": self.side_stream,
                "overruns": self.overruns,
                "audit_window": self.audit_window,
                "wrote_out": self.wrote_out,
                "altered_after": self.altered_after,
                "aliases_input": self.aliases_input,
                "replay": None if self.replay is None else self.replay.to_json(),
            }
        )


@dataclass(frozen=True, slots=True)
class BackwardReply:
    """The backward of a call with `grad_args`: its guards' report, whether
    each gradient reached its slot (`copied`) or was None (`missing`), or
    that the result carried no gradient at all (`no_grad_fn`)."""

    report: GuardReport
    copied: tuple[bool, ...] = ()
    missing: tuple[bool, ...] = ()
    no_grad_fn: bool = False

    @classmethod
    def parse(cls, obj: dict[str, Any]) -> BackwardReply:
        return cls(
            report=GuardReport.parse(_dict(obj.get("report"), "backward.report"), "backward"),
            copied=_bools(obj.get("copied"), "backward.copied"),
            missing=_bools(obj.get("missing"), "backward.missing"),
            no_grad_fn=_bool(obj.get("no_grad_fn"), "backward.no_grad_fn"),
        )

    def to_json(self) -> dict[str, Any]:
        if self.no_grad_fn:
            return {"no_grad_fn": True}
        return {
            "report": self.report.to_json(),
            "copied": list(self.copied),
            "missing": list(self.missing),
        }


def _bools(value: Any, name: str, bad: Any = _malformed) -> tuple[bool, ...]:
    items = _list(value, name, bad)
    if not all(isinstance(b, bool) for b in items):
        raise bad(f"`{name}` holds something other than true and false")
    return tuple(items)


@dataclass(frozen=True, slots=True)
class Returned(Reply):
    """`return`: the call returned; `copied`: its result reached the slot
    (asked with `rest`: its first tensor; `rest_copied`: each later one)."""

    TYPE: ClassVar[str] = "return"
    desc: Desc
    report: GuardReport
    copied: bool = False
    backward: BackwardReply | None = None  # asked with grad_args; None when absent
    rest_copied: tuple[bool, ...] = ()

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Returned:
        back = _dict(frame.get("backward"), "backward")
        return cls(
            desc=Desc.parse(_dict(frame.get("desc"), "desc")),
            report=GuardReport.parse(_dict(frame.get("report"), "report")),
            copied=_bool(frame.get("copied"), "copied"),
            backward=BackwardReply.parse(back) if back else None,
            rest_copied=_bools(frame.get("rest_copied") or [], "rest_copied"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "return",
            "desc": self.desc.to_json(),
            "report": self.report.to_json(),
            "copied": self.copied,
        }
        if self.backward is not None:
            out["backward"] = self.backward.to_json()
        if self.rest_copied:
            out["rest_copied"] = list(self.rest_copied)
        return out


def call_reply(frame: dict[str, Any]) -> Returned | Raised | Broken:
    """The judge's reading of the reply to a `call`. Raises BadReply for a
    `return` it cannot use."""
    return read_reply(frame, Returned)


# --- the timed batch --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TimedInputs:
    """One repetition's arguments (JSON, tensors as TensorRef JSON) and, for
    a backward, its upstream gradient."""

    args: list[Any]
    kwargs: dict[str, Any]
    grad_output: TensorRef | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"args": self.args, "kwargs": self.kwargs}
        if self.grad_output is not None:
            out["grad_output"] = self.grad_output.to_json()
        return out

    @classmethod
    def parse(cls, obj: Any) -> TimedInputs:
        if (
            not isinstance(obj, dict)
            or not isinstance(obj.get("args"), list)
            or not isinstance(obj.get("kwargs"), dict)
        ):
            raise ProtocolError("a repetition without its arguments")
        return cls(obj["args"], obj["kwargs"], _ref(obj.get("grad_output")))


@dataclass(frozen=True, slots=True)
class TimeRequest:
    """`time`: `function` once on each repetition's inputs, the L2 flushed
    before each call (`flush`), each result copied into its slot (`outs`)
    after its end event; first, for `warmup_s` seconds, warm-up calls on the
    first set, clocks logged. With `grad_args`, the backward is timed (the
    first gradient to `outs`, the others to the row of `extra_outs`, one row
    a repetition; a forward has none), each repetition led by `lead_cycles`
    of GPU spin."""

    function: str
    inputs: tuple[TimedInputs, ...]
    outs: tuple[TensorRef, ...]
    flush: bool = True
    warmup_s: float = 0.0
    grad_args: tuple[int, ...] = ()
    extra_outs: tuple[tuple[TensorRef, ...], ...] = ()
    lead_cycles: int = 0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "time",
            "function": self.function,
            "inputs": [i.to_json() for i in self.inputs],
            "outs": [r.to_json() for r in self.outs],
            "flush": self.flush,
            "warmup_s": self.warmup_s,
        }
        if self.grad_args:
            out["grad_args"] = list(self.grad_args)
            out["extra_outs"] = [[r.to_json() for r in row] for row in self.extra_outs]
            out["lead_cycles"] = self.lead_cycles
        return out

    @classmethod
    def parse(cls, msg: dict[str, Any]) -> TimeRequest:
        function, inputs = msg.get("function"), msg.get("inputs")
        if not isinstance(function, str) or not isinstance(inputs, list):
            raise ProtocolError("a timing request without its function or inputs")
        grad_args = msg.get("grad_args") or []
        if not isinstance(grad_args, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in grad_args
        ):
            raise ProtocolError("a timing request's `grad_args` is not a list of indices")
        rows = msg.get("extra_outs") or []
        if not isinstance(rows, list):
            raise ProtocolError("a timing request's `extra_outs` is not a list")
        return cls(
            function=function,
            inputs=tuple(TimedInputs.parse(i) for i in inputs),
            outs=_refs(msg.get("outs"), "outs"),
            flush=bool(msg.get("flush", True)),
            warmup_s=float(msg.get("warmup_s") or 0.0),
            grad_args=tuple(grad_args),
            extra_outs=tuple(_refs(row, "extra_outs") for row in rows),
            lead_cycles=int(msg.get("lead_cycles") or 0),
        )


# A clock reading's values as the judge keeps them (gpulab.measure.timing.ClockLog).
_CLOCK_VALUES = (int, float, bool, str, list)
# The warm-up's clock summary (gpulab.measure.timing.ClockLog.summary), by key.
Clocks = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Timed(Reply):
    """`timed`: each repetition's claimed time (`ms`), its copy out after
    the end event (`copy_ms`), whether its result reached its slot(s)
    (`copied`), for a backward each forward's time (`fwd_ms`), and the
    clocks the warm-up logged. Checked here for their types; that each
    list has one entry a repetition is the judge's check (it knows how many
    it asked for), with the same message."""

    TYPE: ClassVar[str] = "timed"
    ms: tuple[float, ...] = ()
    copy_ms: tuple[float, ...] = ()
    copied: tuple[bool, ...] = ()
    fwd_ms: tuple[float, ...] = ()
    clocks: Clocks | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Timed:
        clocks = frame.get("clocks")
        return cls(
            ms=_times(frame.get("ms")),
            copy_ms=_times(frame.get("copy_ms")),
            copied=_bools(frame.get("copied"), "copied", _no_timing),
            fwd_ms=_times(frame.get("fwd_ms")),
            clocks=(
                {k: v for k, v in clocks.items() if isinstance(v, _CLOCK_VALUES)}
                if isinstance(clocks, dict)
                else None
            ),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "timed",
            "ms": list(self.ms),
            "copy_ms": list(self.copy_ms),
            "copied": list(self.copied),
            "fwd_ms": list(self.fwd_ms),
            "clocks": self.clocks or {},
        }


def _no_timing(_why: str = "") -> BadReply:
    return BadReply(NO_TIMING)


def _times(value: Any) -> tuple[float, ...]:
    """Finite numbers, one a repetition ("" absent: the judge's count fails it)."""
    items = _list(value, "times", _no_timing)
    times = [number(v) for v in items]
    if any(t is None for t in times):
        raise _no_timing()
    return tuple(t for t in times if t is not None)


def time_reply(frame: dict[str, Any]) -> Timed | Raised | Broken:
    """The judge's reading of the reply to a `time` request. Raises BadReply
    (NO_TIMING) for a `timed` reply whose fields are not what they must be."""
    return read_reply(frame, Timed)


# --- the shared profile's end, and the compile-ahead ------------------------------


@dataclass(frozen=True, slots=True)
class AuditEnd:
    """`audit_end`: stop the correctness calls' shared profile and send its
    findings, a list a window (gpulab.sandbox.audit.SpanAudit)."""

    def to_json(self) -> dict[str, Any]:
        return {"type": "audit_end"}


@dataclass(frozen=True, slots=True)
class Audited(Reply):
    """`audited`: each window's findings, in the order of the calls. The
    judge takes any other reply as this one malformed (AUDIT_MALFORMED)."""

    TYPE: ClassVar[str] = "audited"
    findings: tuple[tuple[str, ...], ...]

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Audited:
        """Anything but a list of lists of names is the cheat message the
        judge always gave a profile it could not read."""
        found = frame.get("findings") if frame.get("type") == "audited" else None
        bad = BadReply(AUDIT_MALFORMED, AUDIT_MALFORMED_WHY)
        if not isinstance(found, list) or len(found) > MAX_ITEMS:
            raise bad
        if not all(
            isinstance(w, list) and len(w) <= MAX_ITEMS and all(isinstance(s, str) for s in w)
            for w in found
        ):
            raise bad
        return cls(tuple(tuple(text(s, NAME_LIMIT) for s in w) for w in found))

    def to_json(self) -> dict[str, Any]:
        return {"type": "audited", "findings": [list(w) for w in self.findings]}


@dataclass(frozen=True, slots=True)
class CompileAhead:
    """`compile_ahead`: compile the kernels the last check of this file
    compiled, side by side (gpulab.sandbox.ahead). Speed only."""

    def to_json(self) -> dict[str, Any]:
        return {"type": "compile_ahead"}


@dataclass(frozen=True, slots=True)
class CompiledAhead(Reply):
    """`compiled_ahead`: how many kernels matched, compiled, in how many
    workers, in how long. It decides nothing, so a malformed field is None
    (not a failure): the numbers only go into the result's `compiled_ahead`,
    and any other reply is nothing compiled ahead."""

    TYPE: ClassVar[str] = "compiled_ahead"
    kernels: int | None = 0
    compiled: int | None = 0
    workers: int | None = 0
    seconds: float | None = None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> CompiledAhead:
        def count(key: str) -> int | None:
            v = frame.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None

        return cls(
            count("kernels"), count("compiled"), count("workers"), number(frame.get("seconds"))
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "compiled_ahead",
            "kernels": self.kernels,
            "compiled": self.compiled,
            "workers": self.workers,
        }
        if self.seconds is not None:
            out["seconds"] = self.seconds
        return out

    def record(self) -> dict[str, Any]:
        """What the result's `compiled_ahead` keeps of it, as it always did."""
        return {
            "kernels": self.kernels,
            "compiled": self.compiled,
            "workers": self.workers,
            "seconds": self.seconds,
        }
