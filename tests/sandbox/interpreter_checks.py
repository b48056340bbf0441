"""Kernels run in Triton's interpreter and compared with the numerically right
answer, for tests/sandbox/test_interpreter_gaps.py.

Run as a script (`python -m tests.sandbox.interpreter_checks [--fixed]`) in a
fresh Python with TRITON_INTERPRET=1: it prints one JSON object, each
check's name -> [right, detail, seconds]. With --fixed,
gpulab.sandbox.interpreter_fixes.apply() runs first, as in the sandbox. A
fresh process because the fixes patch Triton's interpreter for the
process, and a pytest worker's Triton may have been imported for a GPU.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

CHECKS: dict[str, Callable[[], tuple[bool, str]]] = {}


def check(fn: Callable[[], tuple[bool, str]]) -> Callable[[], tuple[bool, str]]:
    CHECKS[fn.__name__] = fn
    return fn


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- casts ------------------------------------------------------------------------


@triton.jit
def cast_kernel(x_ptr, y_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(y_ptr + i, tl.load(x_ptr + i).to(y_ptr.dtype.element_ty))


def _cast(src: torch.dtype, dst: torch.dtype) -> tuple[bool, str]:
    base = torch.randn(256, generator=_gen(), dtype=torch.float64) * 40
    base[:4] = torch.tensor([0.3, 1 + 0.75 * 2**-7, -115.5, 1e-3], dtype=torch.float64)
    x = base.to(src)
    y = torch.empty(256, dtype=dst)
    cast_kernel[(1,)](x, y, N=256)
    want = x.to(dst)  # torch rounds once, to nearest even
    bad = int((y.view(torch.int16) != want.view(torch.int16)).sum()) if dst.itemsize == 2 else 0
    if dst.itemsize != 2:
        bad = int((y != want).sum())
    return bad == 0, f"{bad} of 256 differ: {y[:4].tolist()} for {want[:4].tolist()}"


@check
def cast_fp64_to_bf16() -> tuple[bool, str]:
    return _cast(torch.float64, torch.bfloat16)


@check
def cast_fp32_to_bf16_rounds_to_nearest_even() -> tuple[bool, str]:
    return _cast(torch.float32, torch.bfloat16)


@check
def cast_fp16_to_bf16() -> tuple[bool, str]:
    return _cast(torch.float16, torch.bfloat16)


@check
def cast_int32_to_bf16() -> tuple[bool, str]:
    return _cast(torch.int32, torch.bfloat16)


@check
def cast_bf16_to_fp64_fp16_int32() -> tuple[bool, str]:
    for dst in (torch.float64, torch.float16, torch.int32, torch.float32):
        ok, why = _cast(torch.bfloat16, dst)
        if not ok:
            return False, f"bf16 -> {dst}: {why}"
    return True, ""


# An honest softmax in fp64 whose result is stored as the output's dtype:
# the kernel the issue met ("640 of 640 elements wrong" in bf16).
@triton.jit
def softmax64_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float64)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@check
def softmax_in_fp64_stored_as_bf16() -> tuple[bool, str]:
    x = torch.randn(5, 128, generator=_gen(1)).to(torch.bfloat16)
    y = torch.empty_like(x)
    softmax64_kernel[(5,)](y, x, 128, BLOCK=128)
    ref = torch.softmax(x.double(), -1)
    err = float((y.double() - ref).abs().max())
    return err < 1e-2 * float(ref.abs().max()), f"max error {err:.3g}"


@triton.jit
def bf16_constant_kernel(o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(o_ptr + i, tl.full([N], 1.00585937, tl.bfloat16) + tl.zeros([N], tl.bfloat16))


@check
def bf16_constants() -> tuple[bool, str]:
    # Triton 3.6-3.8: "'InterpreterBuilder' object has no attribute 'get_bf16'".
    o = torch.empty(16, dtype=torch.bfloat16)
    bf16_constant_kernel[(1,)](o, N=16)
    want = torch.tensor(1.00585937, dtype=torch.float64).to(torch.bfloat16)
    return bool((o == want).all()), f"{o[:2].tolist()} for {want.item()}"


# --- bf16 arithmetic, tl.dot ---------------------------------------------------------


@triton.jit
def bf16_ops_kernel(x_ptr, y_ptr, o_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(x_ptr + i)
    y = tl.load(y_ptr + i)
    r = tl.where(x > y, x * y, x + y) - tl.maximum(x, y)
    tl.store(o_ptr + i, r + tl.sum(x, axis=0))


@check
def bf16_arithmetic_compares_and_sums() -> tuple[bool, str]:
    x = torch.randn(64, generator=_gen(2)).to(torch.bfloat16)
    y = torch.randn(64, generator=_gen(3)).to(torch.bfloat16)
    o = torch.empty(64, dtype=torch.bfloat16)
    bf16_ops_kernel[(1,)](x, y, o, N=64)
    xd, yd = x.double(), y.double()
    ref = torch.where(xd > yd, xd * yd, xd + yd) - torch.maximum(xd, yd) + xd.sum()
    err = float(((o.double() - ref).abs() / (ref.abs() + 1)).max())
    return err < 3e-2, f"max relative error {err:.3g}"


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, B: tl.constexpr):
    i = tl.arange(0, B)
    a = tl.load(a_ptr + i[:, None] * B + i[None, :])
    b = tl.load(b_ptr + i[:, None] * B + i[None, :])
    tl.store(c_ptr + i[:, None] * B + i[None, :], tl.dot(a, b))


@check
def bf16_dot() -> tuple[bool, str]:
    a = torch.randn(32, 32, generator=_gen(4)).to(torch.bfloat16)
    b = torch.randn(32, 32, generator=_gen(5)).to(torch.bfloat16)
    c = torch.empty(32, 32)
    dot_kernel[(1,)](a, b, c, B=32)
    err = float((c.double() - a.double() @ b.double()).abs().max())
    return err < 1e-4, f"max error {err:.3g}"


# --- tl.reduce and tl.associative_scan with combine functions ------------------------


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def _add_combine(a, b):
    return a + b


@triton.jit
def _argmax_combine(v1, i1, v2, i2):  # the left one on a tie: order matters
    take = (v1 > v2) | ((v1 == v2) & (i1 < i2))
    return tl.where(take, v1, v2), tl.where(take, i1, i2)


@triton.jit
def _affine_combine(a1, b1, a2, b2):  # x -> a x + b, composed: not commutative
    return a1 * a2, b1 * a2 + b2


@triton.jit
def _branching_max(a, b):  # legal on a GPU, where a and b are scalars
    if a > b:
        return a
    return b


@triton.jit
def reduce_kernel(x_ptr, out_ptr, idx_ptr, R: tl.constexpr, C: tl.constexpr, KIND: tl.constexpr):
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + r * C + c)
    if KIND == 0:
        tl.store(out_ptr + tl.arange(0, R), tl.reduce(x, 1, _max_combine))
    elif KIND == 1:
        tl.store(out_ptr + tl.arange(0, C), tl.reduce(x, 0, _add_combine))
    elif KIND == 2:
        idx = tl.broadcast_to(c, (R, C))
        v, i = tl.reduce((x, idx), 1, _argmax_combine)
        tl.store(out_ptr + tl.arange(0, R), v)
        tl.store(idx_ptr + tl.arange(0, R), i)
    elif KIND == 3:
        tl.store(out_ptr + tl.arange(0, R), tl.reduce(x, 1, _branching_max))
    elif KIND == 4:
        tl.store(out_ptr, tl.reduce(x, None, _add_combine))


@check
def reduce_with_combine_functions() -> tuple[bool, str]:
    x = torch.randn(4, 128, generator=_gen(6))
    x[1, 7] = x[1, 100] = 50.0  # a tie: the left index wins
    out, idx = torch.empty(128), torch.empty(4, dtype=torch.int32)
    reduce_kernel[(1,)](x, out, idx, R=4, C=128, KIND=0)
    if not torch.equal(out[:4], x.max(1).values):
        return False, f"row max {out[:4].tolist()}"
    reduce_kernel[(1,)](x, out, idx, R=4, C=128, KIND=1)
    if not torch.allclose(out, x.sum(0), atol=1e-5):
        return False, "column sum"
    reduce_kernel[(1,)](x, out, idx, R=4, C=128, KIND=2)
    if not torch.equal(idx.long(), x.argmax(1)) or idx[1] != 7:
        return False, f"argmax {idx.tolist()} for {x.argmax(1).tolist()}"
    reduce_kernel[(1,)](x, out, idx, R=4, C=128, KIND=3)
    if not torch.equal(out[:4], x.max(1).values):
        return False, f"branching max {out[:4].tolist()}"
    reduce_kernel[(1,)](x, out, idx, R=4, C=128, KIND=4)
    if abs(float(out[0]) - float(x.double().sum())) > 1e-3:
        return False, "sum of everything"
    return True, ""


@triton.jit
def scan_kernel(a_ptr, b_ptr, oa_ptr, ob_ptr, N: tl.constexpr, REVERSE: tl.constexpr):
    i = tl.arange(0, N)
    a, b = tl.associative_scan(
        (tl.load(a_ptr + i), tl.load(b_ptr + i)), 0, _affine_combine, reverse=REVERSE
    )
    tl.store(oa_ptr + i, a)
    tl.store(ob_ptr + i, b)


@check
def associative_scan_not_commutative() -> tuple[bool, str]:
    n = 128
    a = 1 + 0.01 * torch.randn(n, generator=_gen(7), dtype=torch.float64)
    b = torch.randn(n, generator=_gen(8), dtype=torch.float64)
    oa, ob = torch.empty_like(a), torch.empty_like(b)
    for reverse in (False, True):
        scan_kernel[(1,)](a, b, oa, ob, N=n, REVERSE=reverse)
        # h_i = a_i h_{i-1} + b_i from h = 0, in the scan's order.
        order = range(n - 1, -1, -1) if reverse else range(n)
        h, want = 0.0, torch.empty(n, dtype=torch.float64)
        for i in order:
            h = float(a[i]) * h + float(b[i])
            want[i] = h
        if not torch.allclose(ob, want, rtol=1e-9, atol=1e-9):
            return False, f"reverse={reverse}: {ob[:3].tolist()} for {want[:3].tolist()}"
    return True, ""


# The softmax of the issue: its max and sum through tl.reduce.
@triton.jit
def softmax_reduce_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.reduce(x, 0, _max_combine)
    num = tl.exp(x)
    tl.store(y_ptr + row * n_cols + offs, num / tl.reduce(num, 0, _add_combine), mask=mask)


@triton.jit
def softmax_builtin_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(y_ptr + row * n_cols + offs, num / tl.sum(num, axis=0), mask=mask)


@check
def softmax_through_tl_reduce_is_fast() -> tuple[bool, str]:
    # Against the same softmax through tl.max and tl.sum (numpy's own
    # reductions) in the same process, so a busy box slows both: element
    # by element it was 30-100x slower here (2-core box, Triton 3.9).
    x = torch.randn(4, 2048, generator=_gen(9))
    y = torch.empty_like(x)
    took = []
    for kernel in (softmax_builtin_kernel, softmax_reduce_kernel, softmax_builtin_kernel):
        start = time.perf_counter()
        kernel[(4,)](y, x, 2048, BLOCK=2048)
        took.append(time.perf_counter() - start)
    right = torch.allclose(y.double(), torch.softmax(x.double(), -1), atol=1e-6)
    ratio = took[1] / min(took[0], took[2])
    return right and ratio < 5, f"{ratio:.1f}x the builtin reductions' time, right: {right}"


# --- @triton.autotune ------------------------------------------------------------------


def _autotuned(prune: bool) -> Any:
    seen: list[int] = []

    def early(configs: list[Any], named: dict[str, Any], **kw: Any) -> list[Any]:
        return [c for c in configs if c.kwargs["BLOCK"] >= 64]  # drops the first

    @triton.autotune(
        configs=[triton.Config({"BLOCK": b}, num_warps=w) for b, w in ((32, 1), (64, 2), (128, 4))],
        key=["n"],
        reset_to_zero=["acc_ptr"],
        prune_configs_by={"early_config_prune": early} if prune else None,
    )
    @triton.jit
    def add_into(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(
            acc_ptr + offs,
            tl.load(acc_ptr + offs, mask=mask) + tl.load(x_ptr + offs, mask=mask),
            mask=mask,
        )

    def launch(x: torch.Tensor, acc: torch.Tensor) -> None:
        n = x.numel()
        add_into[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, acc, n)
        seen.append(add_into.best_config.kwargs["BLOCK"])

    return launch, seen


@check
def autotune_several_configs() -> tuple[bool, str]:
    for prune, first in ((False, 32), (True, 64)):
        launch, seen = _autotuned(prune)
        x = torch.randn(300, generator=_gen(10))
        acc = torch.full((300,), 7.0)
        launch(x, acc)  # chooses: reset_to_zero zeroes acc first, as after timing
        if not torch.allclose(acc, x):
            return False, f"prune={prune}: reset_to_zero not kept ({acc[:3].tolist()})"
        launch(x, acc)  # the key is cached: no reset, acc accumulates
        if not torch.allclose(acc, 2 * x) or seen != [first, first]:
            return False, f"prune={prune}: configs {seen}, acc {acc[:3].tolist()}"
    return True, ""


@triton.autotune(
    configs=[triton.Config({"BLOCK": 16}), triton.Config({"BLOCK": 64})],
    key=["n"],
)
@triton.jit
def copy_wide_blocks(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK >= 32, "this kernel needs blocks of 32 or more")
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@check
def autotune_skips_a_config_that_cannot_run() -> tuple[bool, str]:
    # On a GPU the autotuner skips a config that fails to compile.
    x = torch.randn(100, generator=_gen(11))
    y = torch.empty_like(x)
    copy_wide_blocks[lambda meta: (triton.cdiv(100, meta["BLOCK"]),)](x, y, 100)
    chosen = copy_wide_blocks.best_config.kwargs["BLOCK"]
    return torch.equal(x, y) and chosen == 64, f"BLOCK {chosen}"


def main() -> None:
    warnings.filterwarnings("ignore")
    if "--fixed" in sys.argv:
        from gpulab.sandbox import interpreter_fixes

        interpreter_fixes.apply()
    results: dict[str, Any] = {}
    for name, fn in CHECKS.items():
        start = time.perf_counter()
        try:
            ok, why = fn()
        except Exception as exc:  # noqa: BLE001 - a check that raises is one that fails
            ok, why = False, f"{type(exc).__name__}: {str(exc)[:300]}"
        results[name] = [ok, why, round(time.perf_counter() - start, 3)]
    print(json.dumps(results))


if __name__ == "__main__":
    main()
