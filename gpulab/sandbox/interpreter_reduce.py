"""tl.reduce and tl.associative_scan with a combine function of the kernel's
own, in whole numpy arrays (the Triton interpreter, the CPU path).

Triton's interpreter (3.6, 3.8 and 3.9 alike) runs such a reduction one
element at a time: for a row of 4096 it calls the combine function 4095
times, each call a few Triton ops in Python. An honest softmax whose max
and sum went through `tl.reduce(x, 0, combine)` took 224 s on the CPU and was
stopped at the 60 s limit as "an infinite loop?". Here the combine function
is called on whole halves instead, in a tree: element 2i with element 2i+1,
then the results pairwise again, log2(n) calls in all, each pair in its
order (left operand first), so an associative combine function gives the
result it gives on a GPU, whose reduction is a tree too. A scan doubles
its stride the same way (Hillis-Steele): log2(n) calls, element i combined
with element i - d, the earlier one first. (Blocks stay whole: Triton
allows only shapes of powers of two, and the interpreter checks.)

The combine function is Python the kernel's author wrote, run on tensors of
many elements where the interpreter gave it one. Where it branches on a
value (`if a > b: return a`: legal in a Triton combine function, whose
arguments are scalars on a GPU) a block has no single truth value: any
use of one as a bool raises here and the reduction runs as Triton's
interpreter runs it, element by element. So does any other error, and a
result that is not one tensor a half's shape per operand: the fast path
gives the interpreter's own answer or none.

The fix applies where the interpreter calls the combine function once an
element (probed by counting its calls, not by Triton's version).
"""

from __future__ import annotations

from typing import Any

import numpy as np

STATE: dict[str, str] = {}


class _Scalar(Exception):
    """A combine function asked a block for one truth value."""


def apply() -> str:
    """Patch the interpreter's element-by-element reduce and scan, once a
    process. "fixed", "absent" (it does not call once an element) or
    "failed: why"."""
    if "state" in STATE:
        return STATE["state"]
    try:
        from triton.runtime import interpreter

        calls = _calls_for(interpreter, 64)
        if calls <= 12:
            STATE["state"] = "absent"
        else:
            _patch(interpreter)
            calls = _calls_for(interpreter, 64)
            STATE["state"] = "fixed" if calls <= 12 else f"failed: {calls} calls for 64 elements"
    except Exception as exc:  # noqa: BLE001 - an interpreter built otherwise
        STATE["state"] = f"failed: {type(exc).__name__}: {exc}"
    return STATE["state"]


def _calls_for(interpreter: Any, n: int) -> int:
    """How often the interpreter calls a combine function to reduce and to
    scan n elements (the larger), and whether it got the answer."""
    import triton.language as tl

    count = [0]

    def add(a: Any, b: Any) -> Any:
        # On the data: outside a kernel's launch, tl's operators have no builder.
        count[0] += 1
        total = np.asarray(a.handle.data) + np.asarray(b.handle.data)
        return tl.core.tensor(interpreter.TensorHandle(total.astype(np.int32), tl.int32), a.type)

    class Combine:
        fn = staticmethod(add)

    data = np.arange(n, dtype=np.int32)
    handle = interpreter.TensorHandle(data, tl.int32)
    x = tl.core.tensor(handle, tl.block_type(tl.int32, [n]))
    total = interpreter.ReduceOps(0, Combine, False).apply(x)
    reduced = count[0]
    count[0] = 0
    prefix = interpreter.ScanOps(0, Combine, False).apply(x)
    right = int(np.asarray(total.handle.data).reshape(-1)[0]) == int(data.sum())
    right = right and np.array_equal(prefix.handle.data, np.cumsum(data))
    return max(reduced, count[0]) if right else 10**9


def _patch(interpreter: Any) -> None:
    reduce_one_by_one = interpreter.ReduceOps.generic_reduce
    scan_one_by_one = interpreter.ScanOps.generic_scan

    def generic_reduce(self: Any, input: Any) -> Any:
        try:
            return _tree_reduce(self, input)
        except Exception:  # noqa: BLE001 - the interpreter's own way, and its own errors
            return reduce_one_by_one(self, input)

    def generic_scan(self: Any, input: Any) -> Any:
        try:
            return _doubling_scan(self, input)
        except Exception:  # noqa: BLE001 - as above
            return scan_one_by_one(self, input)

    interpreter.ReduceOps.generic_reduce = generic_reduce
    interpreter.ScanOps.generic_scan = generic_scan


def _combine(op: Any, left: list[Any], right: list[Any], dtypes: list[Any]) -> list[Any]:
    """op's combine function on two lists of same-shaped arrays, one per
    operand: arrays of the results, each as its operand's dtype."""
    import triton.language as tl

    def block(data: np.ndarray[Any, Any], dtype: Any) -> Any:
        return op.to_tensor(np.ascontiguousarray(data), dtype)

    args = [block(d, t) for d, t in zip(left, dtypes, strict=True)]
    args += [block(d, t) for d, t in zip(right, dtypes, strict=True)]
    tensor = tl.core.tensor
    saved = tensor.__dict__.get("__bool__")  # the interpreter's, while a kernel runs

    def one_truth(t: Any) -> bool:
        if np.asarray(t.handle.data).size != 1:
            raise _Scalar
        return True if saved is None else bool(saved(t))

    tensor.__bool__ = one_truth
    try:
        out = op.combine_fn.fn(*args)
    finally:
        if saved is None:
            del tensor.__bool__
        else:
            tensor.__bool__ = saved
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    if len(outs) != len(left):
        raise ValueError("a combine function's results do not match its operands")
    shape = left[0].shape
    done = []
    for value, dtype, like in zip(outs, dtypes, left, strict=True):
        data = value.handle.data if isinstance(value, tensor) else np.asarray(value)
        done.append(_as(np.broadcast_to(data, shape), dtype, value, like.dtype))
    return done


def _as(data: np.ndarray[Any, Any], dtype: Any, value: Any, np_dtype: Any) -> np.ndarray[Any, Any]:
    """`data` stored as an operand of `dtype` is (np_dtype): a bf16 operand's
    result from another float type rounded to bf16, as the element-by-element
    path would have stored a bf16 result's bits."""
    import triton.language as tl

    got = getattr(getattr(value, "handle", None), "dtype", None)
    if dtype == tl.bfloat16 and got is not None and got != tl.bfloat16:
        from gpulab.sandbox.interpreter_fixes import f64_to_bf16_bits

        return f64_to_bf16_bits(np.asarray(data, dtype=np.float64))
    return np.array(data, dtype=np_dtype)


def _tree_reduce(op: Any, input: Any) -> list[Any]:
    original_axis = op.axis
    input, axis = op.unravel(input, op.axis)
    dtypes = [arg.dtype for arg in input]
    parts = [np.moveaxis(np.asarray(arg.handle.data), axis, 0) for arg in input]
    shape = parts[0].shape
    if shape[0] == 0:
        raise ValueError("nothing to reduce")
    while parts[0].shape[0] > 1:
        n = parts[0].shape[0]
        half = n // 2
        left = [p[0 : 2 * half : 2] for p in parts]
        right = [p[1 : 2 * half : 2] for p in parts]
        paired = _combine(op, left, right, dtypes)
        if n % 2:  # the last element waits for the next level
            paired = [np.concatenate([c, p[n - 1 :]]) for c, p in zip(paired, parts, strict=True)]
        parts = paired
    ret = []
    for i, part in enumerate(parts):
        data = part[0]
        if op.keep_dims:
            if original_axis is not None:
                data = np.expand_dims(data, axis)
            else:
                for _ in range(len(shape)):
                    data = np.expand_dims(data, 0)
        elif original_axis is None:
            data = data.item()
        ret.append(op.to_tensor(data, input[i].dtype))
    return ret


def _doubling_scan(op: Any, input: Any) -> list[Any]:
    axis = op.axis
    dtypes = [arg.dtype for arg in input]
    parts = [np.moveaxis(np.array(arg.handle.data), axis, 0) for arg in input]
    n = parts[0].shape[0]
    step = 1
    while step < n:
        # Whole blocks (Triton's shapes are powers of two): element i with
        # element i - step; the first `step` are combined with themselves
        # and that result is dropped.
        earlier = [np.concatenate([p[:step], p[: n - step]]) for p in parts]
        combined = _combine(op, earlier, parts, dtypes)
        parts = [np.concatenate([p[:step], c[step:]]) for p, c in zip(parts, combined, strict=True)]
        step *= 2
    return [
        op.to_tensor(np.ascontiguousarray(np.moveaxis(p, 0, axis)), arg.dtype)
        for p, arg in zip(parts, input, strict=True)
    ]


__all__ = ["STATE", "apply"]
