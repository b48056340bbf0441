"""A recorded launch's arguments against its compiled kernel's parameters.

On a GPU the replay launches the compiled kernel a launch ran
(gpulab.wire.kernel_binary), passing the record's arguments through
Triton's launcher, which packs each by the parameter's type. A JIT launch
types its parameters from the very arguments it was given, so an honest
record's arguments always fit; one that does not (a pointer passed where
the kernel takes an int, a tensor of another dtype, a tuple of another
length) is a forged or broken record, refused here with what does not fit
rather than left to pack garbage.
"""

from __future__ import annotations

from typing import Any

from gpulab.wire.kernel_binary import KernelBinary, SigType
from gpulab.wire.launch_record import (
    Arg,
    BufferArg,
    DescArg,
    DtypeArg,
    FloatArg,
    OtherArg,
    TupleArg,
)

# torch's dtype names (a View's) as Triton names them in a signature.
TRITON_DTYPES = {
    "float16": "fp16",
    "bfloat16": "bf16",
    "float32": "fp32",
    "float64": "fp64",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "uint8": "u8",
    "bool": "i1",
}
_INT_BITS = {"i1": 1, "i8": 8, "i16": 16, "i32": 32, "i64": 64}
_UINT_BITS = {"u1": 1, "u8": 8, "u16": 16, "u32": 32, "u64": 64}
_FLOATS = {"fp16", "bf16", "fp32", "f32", "fp64"}


def params_problem(binary: KernelBinary, args: dict[str, Arg]) -> str:
    """ "" when `args` fit `binary`'s parameters one by one, else what does not."""
    names = [n for n, _ in binary.params]
    if sorted(args) != sorted(names):
        missing = sorted(set(names) - set(args))
        extra = sorted(set(args) - set(names))
        return (
            "its arguments are not its compiled kernel's parameters"
            + (f" (missing {', '.join(missing[:4])})" if missing else "")
            + (f" (not parameters: {', '.join(extra[:4])})" if extra else "")
            + "."
        )
    for name, kind in binary.params:
        why = _fits(kind, args[name])
        if why:
            return f"argument `{name}` ({why}) does not fit its compiled kernel's `{_show(kind)}`."
    return ""


def _show(kind: SigType) -> str:
    if isinstance(kind, tuple):
        return "(" + ", ".join(_show(k) for k in kind) + ")"
    return kind[:60]


def _fits(kind: SigType, arg: Arg) -> str:
    """ "" when `arg` can be passed as a parameter of type `kind`, else what it is."""
    if isinstance(arg, OtherArg):
        return "not an argument gpulab can pass"
    if isinstance(kind, tuple):
        if not isinstance(arg, TupleArg) or len(arg.items) != len(kind):
            return "not a tuple of that length"
        for k, a in zip(kind, arg.items, strict=True):
            why = _fits(k, a)
            if why:
                return why
        return ""
    if kind == "constexpr":
        return ""  # compiled in: the launcher passes nothing for it
    if kind.startswith("tensordesc"):
        return "" if isinstance(arg, DescArg) else "not a tensor descriptor"
    if kind.startswith("*"):
        return _pointer(kind.lstrip("*").lstrip("k"), arg)
    if kind in _INT_BITS or kind in _UINT_BITS:
        return _integer(kind, arg)
    if kind in _FLOATS:
        return "" if isinstance(arg, FloatArg) else "not a float"
    return "a type gpulab does not pass"


def _pointer(element: str, arg: Arg) -> str:
    if not isinstance(arg, BufferArg):
        return "not a tensor"
    if TRITON_DTYPES.get(arg.view.dtype) != element:
        return f"a {arg.view.dtype} tensor"
    return ""


def _integer(kind: str, arg: Any) -> str:
    if isinstance(arg, (FloatArg, DtypeArg, BufferArg, DescArg, TupleArg)) or arg is None:
        return "not an integer"
    if isinstance(arg, str):
        return "a string"
    value = int(arg)
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        low, high = (0, 1) if bits == 1 else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    else:
        low, high = 0, (1 << _UINT_BITS[kind]) - 1
    if not low <= value <= high:
        return "out of its range"
    return ""
