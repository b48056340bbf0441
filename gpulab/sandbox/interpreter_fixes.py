"""Fixes for known bugs of Triton's interpreter (TRITON_INTERPRET=1, the CPU path).

An honest kernel must not fail on the CPU because the interpreter computes
something other than what a GPU computes. The interpreter keeps a bf16
tensor as its raw bits in a uint16 numpy array, and Triton 3.6, 3.8 and 3.9
(each run, 2026-12-07: tests/sandbox/interpreter_checks.py) then treat those
bits as integers:

- a cast *to* bf16 from fp64 or from any integer is numpy's `astype(uint16)`
  of the value (0.3 becomes 0: an fp64 softmax stored as bf16 was "640 of
  640 elements wrong"); from fp32 and fp16 it truncates where a GPU rounds
  to nearest even (50.0 came out 49.75);
- bf16 arithmetic and comparisons (`x + y`, `x * y`, `tl.maximum`,
  `x > y`, a bf16 `tl.sum` or `tl.cumsum`) add, multiply and compare the
  bits as integers;
- a bf16 `tl.dot` multiplies the bits as integers (garbage of 1e10);
- Triton 3.6-3.8's builder cannot make a bf16 constant at all
  (`'InterpreterBuilder' object has no attribute 'get_bf16'`).

Each fix here is applied only where its bug shows: `apply()` runs a probe
of the interpreter's own builder for each (a few microseconds) and patches
what the probe finds wrong, then probes again; a Triton whose interpreter
is right is left alone, whatever its version. The fixed paths compute in
fp32 (exact for bf16 values) and round once to bf16, as a GPU's bf16
arithmetic does. `gpulab.sandbox.interpreter_reduce` (tl.reduce and
tl.associative_scan with a combine function of the kernel's own) and
`gpulab.sandbox.interpreter_autotune` (@triton.autotune) are applied from
here too.

Who applies them: the check's sandbox before the learner's file is
imported, the replay's sandbox before it runs a kernel, and the judge before
its own probe kernels (gpulab.judge.interpreter_gaps), all with this one
module. The learner's code runs after the fixes and could undo them in its
own sandbox; that only hurts itself: the judge compares every result with
its own float64 reference, and the replay runs the kernels again in a
sandbox the learner's code never ran in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

# What apply() found and did in this process: fix name -> "fixed" (the bug
# showed and the probe passes after the patch), "absent" (no bug here) or
# "failed: why" (the bug shows and stays: the judge skips what it breaks).
STATE: dict[str, str] = {}


def f64_to_bf16_bits(x: Any) -> np.ndarray[Any, Any]:
    """float64 values -> bf16 bits (uint16), rounded once to nearest even.

    Through fp32 by rounding to odd (inexact values keep a sticky last bit),
    so the second rounding, fp32 -> bf16, is the only one that counts:
    exact for every finite value, overflow to inf, NaN kept a NaN."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
        back = f.astype(np.float64)
        inexact = (back != x) & np.isfinite(x)
        away = inexact & (np.abs(back) > np.abs(x))
        f = np.where(away, np.nextafter(f, np.float32(0)), f).astype(np.float32)
    bits = np.ascontiguousarray(f).view(np.uint32)
    bits = np.where(inexact, bits | np.uint32(1), bits).astype(np.uint32)
    return f32_bits_to_bf16_bits(bits)


def f32_bits_to_bf16_bits(bits: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """fp32 bits (uint32) -> bf16 bits (uint16), round to nearest even."""
    bits = bits.astype(np.uint32)
    nan = (bits & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + np.uint32(0x7FFF) + lsb) >> np.uint32(16)
    quiet = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(nan, quiet, rounded).astype(np.uint16)


def bf16_bits_to_f32(bits: Any) -> np.ndarray[Any, Any]:
    """bf16 bits (uint16) -> their exact float32 values."""
    wide = np.asarray(bits).astype(np.uint32) << np.uint32(16)
    return np.ascontiguousarray(wide).view(np.float32)


class _Interp:
    """The interpreter's module and the names the fixes use, looked up once
    (an AttributeError here means a Triton these fixes do not know)."""

    def __init__(self) -> None:
        import triton.language as tl
        from triton.runtime import interpreter

        self.tl = tl
        self.mod: Any = interpreter
        self.Handle: Any = interpreter.TensorHandle
        self.Builder: Any = interpreter.InterpreterBuilder
        self.builder: Any = interpreter.interpreter_builder
        self.bf16: Any = tl.bfloat16
        self.fp32: Any = tl.float32

    def is_bf16(self, arg: Any) -> bool:
        return isinstance(arg, self.Handle) and arg.dtype == self.bf16

    def widened(self, arg: Any) -> Any:
        """A bf16 handle as an fp32 one holding the same values."""
        return self.Handle(bf16_bits_to_f32(arg.data), self.fp32)

    def bf16_handle(self, values: Any) -> Any:
        return self.Handle(f64_to_bf16_bits(values), self.bf16)

    def tensor(self, handle: Any, like: Any, dtype: Any) -> Any:
        """A tl tensor of `handle` and `dtype`, shaped as the tensor `like`."""
        return self.shaped(handle, list(like.shape) if like.type.is_block() else [], dtype)

    def shaped(self, handle: Any, shape: list[int], dtype: Any) -> Any:
        tl = self.tl
        return tl.core.tensor(handle, tl.block_type(dtype, shape) if shape else dtype)


# --- the probes: True where the interpreter gets it wrong ---------------------


def _cast_broken(it: _Interp) -> bool:
    # 0.3 from fp64 (astype gave 0) and 1 + 0.75 * 2**-7 from fp32
    # (truncation gave 1.0; nearest even is 1 + 2**-7).
    b = it.builder
    f64 = b.cast_impl(it.Handle(np.array([0.3, -115.5]), it.tl.float64), it.bf16)
    f32 = b.cast_impl(it.Handle(np.array([1 + 0.75 * 2**-7], dtype=np.float32), it.fp32), it.bf16)
    i32 = b.cast_impl(it.Handle(np.array([3], dtype=np.int32), it.tl.int32), it.bf16)
    got = np.concatenate([f64.data, f32.data, i32.data]).astype(np.uint16)
    want = f64_to_bf16_bits([0.3, -115.5, 1 + 2**-7, 3.0])
    return not np.array_equal(got, want)


def _arith_broken(it: _Interp) -> bool:
    x = it.bf16_handle([1.5, -2.0])
    y = it.bf16_handle([0.25, 3.0])
    b = it.builder
    add = b.create_fadd(x, y).data.astype(np.uint16)
    less = b.create_fcmpOLT(x, y).data.astype(bool)
    return not (
        np.array_equal(add, f64_to_bf16_bits([1.75, 1.0])) and less.tolist() == [False, True]
    )


def _dot_broken(it: _Interp) -> bool:
    a = it.bf16_handle([[1.5, -2.0], [0.5, 1.0]])
    acc = it.Handle(np.zeros((2, 2), dtype=np.float32), it.fp32)
    out = it.builder.create_dot(a, a, acc, None, 0).data
    return not np.array_equal(np.asarray(out, dtype=np.float64), [[1.25, -5.0], [1.25, 0.0]])


def _constant_broken(it: _Interp) -> bool:
    # Triton 3.6-3.8's builder has get_bf16_ty but no get_bf16: any bf16
    # constant in a kernel (tl.full(..., tl.bfloat16)) raised AttributeError.
    try:
        got = it.builder.get_bf16(1 + 0.75 * 2**-7)
    except AttributeError:
        return True
    return not np.array_equal(np.asarray(got.data).astype(np.uint16), f64_to_bf16_bits([1 + 2**-7]))


def _reduce_broken(it: _Interp) -> bool:
    tl = it.tl
    x = it.shaped(it.bf16_handle([1.5, -2.0]), [2], it.bf16)
    got = it.mod.ReduceOps(0, tl.standard._sum_combine, False).apply(x)
    return not np.array_equal(got.handle.data.astype(np.uint16), f64_to_bf16_bits([-0.5]))


# --- the patches ---------------------------------------------------------------


def _patch_casts(it: _Interp) -> None:
    """A cast to or from bf16 through its value: from bf16 exactly to fp32,
    then as numpy casts; to bf16 from the value in float64, rounded once
    to nearest even (a GPU's cvt.rn). fp8 conversions are left as they were."""
    original = it.Builder.cast_impl

    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        s, d = src.dtype.scalar, dst_type.scalar
        if (s == it.bf16) == (d == it.bf16) or _fp8(s) or _fp8(d):
            return original(self, src, dst_type)
        if d == it.bf16:
            data = src.data
            if s == it.bf16:
                data = bf16_bits_to_f32(data)
            return it.Handle(f64_to_bf16_bits(np.asarray(data, dtype=np.float64)), it.bf16)
        values = bf16_bits_to_f32(src.data)
        return it.Handle(values.astype(it.mod._get_np_dtype(dst_type)), d)

    it.Builder.cast_impl = cast_impl
    fp_to_fp = it.Builder.create_fp_to_fp
    rtne = it.mod._ir.ROUNDING_MODE.RTNE

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        # fp16 -> bf16 (and back) keeps its own path in Triton's semantics,
        # rounding to nearest even.
        s, d = src.dtype.scalar, dst_type.scalar
        if d == it.bf16 and not _fp8(s) and rounding_mode in (None, rtne):
            return cast_impl(self, src, dst_type)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    it.Builder.create_fp_to_fp = create_fp_to_fp


def _patch_constant(it: _Interp) -> None:
    """A bf16 constant: its value rounded once to bf16, as 3.9's builder
    makes it (through fp32 and the cast above)."""

    def get_bf16(self: Any, value: Any) -> Any:
        return self.create_fp_trunc(self.get_fp32(value), it.bf16)

    it.Builder.get_bf16 = get_bf16


def _fp8(dtype: Any) -> bool:
    return bool(getattr(dtype, "is_fp8", lambda: False)())


# The builder's arithmetic, comparisons and maths whose numpy op would see
# bf16's bits as integers. Looked up by name: one a Triton lacks is skipped.
ARITH = (
    "create_fadd",
    "create_fsub",
    "create_fmul",
    "create_fdiv",
    "create_frem",
    "create_fneg",
    "create_precise_divf",
    "create_minimumf",
    "create_maximumf",
    "create_minnumf",
    "create_maxnumf",
    "create_fma",
    "create_clampf",
    "create_exp",
    "create_exp2",
    "create_log",
    "create_log2",
    "create_sqrt",
    "create_precise_sqrt",
    "create_rsqrt",
    "create_sin",
    "create_cos",
    "create_floor",
    "create_ceil",
    "create_erf",
    *(
        f"create_fcmp{kind}{op}"
        for kind in ("O", "U")
        for op in ("LT", "GT", "LE", "GE", "EQ", "NE")
    ),
)


def _widening(it: _Interp, original: Callable[..., Any], rounds_back: bool = True) -> Any:
    """`original` with bf16 handles widened to fp32 first; a float result
    rounded back to bf16 when every float operand was bf16 (a GPU's bf16
    op), left in fp32 otherwise (a dot's fp32 accumulator)."""

    def method(self: Any, *args: Any) -> Any:
        if not any(it.is_bf16(a) for a in args):
            return original(self, *args)
        floats = [a for a in args if isinstance(a, it.Handle) and a.dtype.is_floating()]
        wide = [it.widened(a) if it.is_bf16(a) else a for a in args]
        out = original(self, *wide)
        if not isinstance(out, it.Handle) or out.dtype != it.fp32:
            return out
        if out.data.dtype != np.float32:  # a comparison's bools: int1, what they are
            return it.Handle(out.data, it.tl.int1)
        if rounds_back and all(it.is_bf16(a) for a in floats):
            return it.Handle(f32_bits_to_bf16_bits(out.data.view(np.uint32)), it.bf16)
        return out

    return method


def _patch_arith(it: _Interp) -> None:
    for name in ARITH:
        original = getattr(it.Builder, name, None)
        if original is not None:
            setattr(it.Builder, name, _widening(it, original))


def _patch_dot(it: _Interp) -> None:
    it.Builder.create_dot = _widening(it, it.Builder.create_dot)


def _patch_reduce(it: _Interp) -> None:
    """numpy's sum, min, max, argmin/argmax, cumsum and cumprod on bf16
    tensors: on their fp32 values, the results rounded back to bf16."""

    def wrap(owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            return

        def method(self: Any, input: Any, *rest: Any, **kw: Any) -> Any:
            first = input[0] if isinstance(input, (tuple, list)) else input
            if not it.is_bf16(getattr(first, "handle", None)):
                return original(self, input, *rest, **kw)
            wide = it.tensor(it.widened(first.handle), first, it.fp32)
            args = (wide, *input[1:]) if isinstance(input, (tuple, list)) else wide
            return _narrowed(it, original(self, args, *rest, **kw))

        setattr(owner, name, method)

    for name in ("sum", "min_max"):
        wrap(it.mod.ReduceOps, name)
    for name in ("cumsum", "cumprod"):
        wrap(it.mod.ScanOps, name)


def _narrowed(it: _Interp, out: Any) -> Any:
    """Every fp32 tl tensor in `out` (one, or a tuple or list) as bf16."""
    if isinstance(out, (tuple, list)):
        return type(out)(_narrowed(it, o) for o in out)
    handle = getattr(out, "handle", None)
    if isinstance(handle, it.Handle) and handle.dtype == it.fp32:
        bits = f32_bits_to_bf16_bits(np.ascontiguousarray(handle.data).view(np.uint32))
        return it.tensor(it.Handle(bits, it.bf16), out, it.bf16)
    return out


# name -> (the probe: True while broken, the patch)
FIXES: dict[str, tuple[Callable[[_Interp], bool], Callable[[_Interp], None]]] = {
    "bf16 casts": (_cast_broken, _patch_casts),
    "bf16 constants": (_constant_broken, _patch_constant),
    "bf16 arithmetic": (_arith_broken, _patch_arith),
    "bf16 tl.dot": (_dot_broken, _patch_dot),
    "bf16 reductions": (_reduce_broken, _patch_reduce),
}


def apply() -> dict[str, str]:
    """Apply every fix this interpreter needs, once a process; returns STATE.
    Never raises: a fix whose probe cannot run (a Triton whose interpreter
    is built otherwise) is reported, and that gap stays for the judge to
    find (gpulab.judge.interpreter_gaps)."""
    if STATE:
        return STATE
    try:
        it = _Interp()
    except Exception as exc:  # noqa: BLE001 - no Triton, or one built otherwise
        STATE["interpreter"] = f"failed: {type(exc).__name__}: {exc}"
        return STATE
    for name, (broken, patch) in FIXES.items():
        STATE[name] = _fix(it, broken, patch)
    from gpulab.sandbox import interpreter_autotune, interpreter_reduce

    STATE["tl.reduce with a combine function"] = interpreter_reduce.apply()
    STATE["autotune"] = interpreter_autotune.apply()
    return STATE


def _fix(it: _Interp, broken: Callable[[_Interp], bool], patch: Callable[[_Interp], None]) -> str:
    try:
        if not broken(it):
            return "absent"
        patch(it)
        return "failed: still wrong after the fix" if broken(it) else "fixed"
    except Exception as exc:  # noqa: BLE001 - an interpreter built otherwise
        return f"failed: {type(exc).__name__}: {exc}"


__all__ = ["FIXES", "STATE", "apply", "bf16_bits_to_f32", "f64_to_bf16_bits"]
