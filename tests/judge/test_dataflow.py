"""Issue 44, data flow rather than launch shape: what must hold is that the
result's values came from the learner's kernels applied to the inputs,
through steps the replay can make again (copies, casts, padding, zero
fills, workspaces, a second kernel). A wrapper that makes its inputs
contiguous, pads them into zeroed buffers, or splits K into an fp32
workspace with atomics and finishes with a cast kernel or a torch cast was
refused with "the returned tensor was not written by your Triton kernel"
(the kernel that wrote the result had to be handed an input). Real checks
in real child processes, in the Triton interpreter."""

from __future__ import annotations

import pytest

HEAD = """
import torch
import triton
import triton.language as tl

BM, BN, BK = 32, 32, 16


@triton.jit
def mm_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
              SPLIT: tl.constexpr, ATOMIC: tl.constexpr, MASKED: tl.constexpr,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    ps = tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(ps * BK, K, BK * SPLIT):
        rk = k0 + tl.arange(0, BK)
        if MASKED:
            a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak,
                        mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn,
                        mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        else:
            a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak)
            b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    ptrs = c_ptr + rm[:, None] * scm + rn[None, :] * scn
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if ATOMIC:
        tl.atomic_add(ptrs, acc, mask=mask)
    else:
        tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src_ptr + offs, mask=offs < n)
    tl.store(dst_ptr + offs, v.to(dst_ptr.dtype.element_ty), mask=offs < n)


def _mm(a, b, c, split=1, atomic=False, masked=True):
    M, K = a.shape
    N = b.shape[1]
    grid = (triton.cdiv(M, BM), triton.cdiv(N, BN), split)
    mm_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                    c.stride(0), c.stride(1), SPLIT=split, ATOMIC=atomic, MASKED=masked,
                    BM=BM, BN=BN, BK=BK)
"""

VARIANTS = {
    # Copies of the inputs first: the kernel that writes c is handed no input.
    "contiguous copies": """
def matmul(a, b):
    a = a.contiguous()
    b = b.contiguous()
    if a.dtype == torch.float32:
        a, b = a.clone(), b.clone()
    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    _mm(a, b, c)
    return c
""",
    # Zero-padded copies, a kernel with no masks, and the result cut out of
    # a padded output (a view, made contiguous: a copy of what it wrote).
    "padded buffers": """
def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    Mp, Np, Kp = (triton.cdiv(M, BM) * BM, triton.cdiv(N, BN) * BN, triton.cdiv(K, BK) * BK)
    ap = torch.zeros((Mp, Kp), dtype=a.dtype, device=a.device)
    bp = torch.zeros((Kp, Np), dtype=b.dtype, device=b.device)
    ap[:M, :K] = a
    bp[:K, :N] = b
    cp = torch.empty((Mp, Np), dtype=a.dtype, device=a.device)
    _mm(ap, bp, cp, masked=False)
    return cp[:M, :N].contiguous()
""",
    # Split-K into an fp32 workspace with atomics, then a second kernel casts.
    "split-K and a cast kernel": """
def matmul(a, b):
    M, N = a.shape[0], b.shape[1]
    ws = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    _mm(a, b, ws, split=3, atomic=True)
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    cast_kernel[(triton.cdiv(M * N, 256),)](ws, c, M * N, BLOCK=256)
    return c
""",
    # The same, with torch casting the workspace.
    "split-K and a torch cast": """
def matmul(a, b):
    M, N = a.shape[0], b.shape[1]
    ws = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    _mm(a, b, ws, split=2, atomic=True)
    return ws.to(a.dtype)
""",
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_honest_wrappers_that_route_data_through_copies_and_kernels_pass(grade, name):
    result = grade("matmul", HEAD + VARIANTS[name], timing=False)
    failed = [(c["name"], c.get("detail", "")[:300]) for c in result["cases"] if not c["passed"]]
    assert result["passed"], (result["summary"], result.get("message", "")[:1500], failed)


# The same padded wrapper, but the "padding" is the answer worked out with
# numpy (no torch op: the audit sees nothing) and a kernel copies it out: a
# buffer the replay cannot make from the inputs, so it starts as poison there.
NUMPY_ANSWER = """
def matmul(a, b):
    import numpy as np
    M, N = a.shape[0], b.shape[1]
    answer = torch.from_numpy(np.asarray(a.float().numpy() @ b.float().numpy()))
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    cast_kernel[(triton.cdiv(M * N, 256),)](answer, c, M * N, BLOCK=256)
    return c
"""


def test_an_answer_from_numpy_copied_by_a_kernel_still_fails(grade):
    result = grade("matmul", HEAD + NUMPY_ANSWER, timing=False)
    assert not result["passed"], result["summary"]


def test_padding_an_input_into_a_zeroed_buffer_is_recorded_as_a_fill_and_a_copy():
    # So the replay makes the padded buffer from its own inputs at any size,
    # with no recorded bytes: on a GPU at a timed size those ran past the
    # record's byte budget, and the buffer started as poison.
    import torch

    from gpulab.sandbox.replay import Recording, copy_watch
    from gpulab.wire.launch_record import TorchStep

    class Arena:
        def __init__(self, t):
            self.t = t

        def whole(self):
            return self.t

    store = torch.randn(100)
    a = store[:60].view(6, 10)
    rec = Recording({0: Arena(store)})
    with copy_watch(rec):
        padded = torch.zeros(8, 16)
        padded[:6, :10] = a
        out = torch.empty(8, 16)
    rec.buffer(padded)  # as the first launch handed it
    index = rec.buffer(out)
    rec.launches.append(TorchStep("copy", rec.view(0, padded), rec.view(index, out)))  # a stand-in
    record = rec.result(out)
    assert record.buffers is not None and record.launches is not None
    first = record.buffers[0]
    assert first.fill == "00000000" and first.data is None, first
    step = record.launches[0]
    assert isinstance(step, TorchStep) and step.op == "copy"
    assert step.dst is not None and step.dst.shape == (6, 10) and step.dst.stride == (16, 1)
    assert step.src is not None and record.buffers[step.src.buffer].arena == (0, 0)


# Strides passed as one tuple argument (Triton takes tuples since 3.2): the
# record held a tuple as an argument it could not pass again, and the
# replay refused the launch.
TUPLE_STRIDES = """
import torch
import triton
import triton.language as tl


@triton.jit
def row_kernel(y_ptr, x_ptr, strides, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * strides[0] + offs * strides[1], mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * n_cols + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    row_kernel[(n_rows,)](y, x, (x.stride(0), x.stride(1)), n_cols,
                          BLOCK=triton.next_power_of_2(n_cols))
    return y
"""


def test_strides_passed_as_one_tuple_argument_replay(grade):
    result = grade("softmax_row", TUPLE_STRIDES, timing=False)
    failed = [(c["name"], c.get("detail", "")[:300]) for c in result["cases"] if not c["passed"]]
    assert result["passed"], (result["summary"], result.get("message", "")[:1500], failed)


@pytest.mark.gpu
def test_gpu_torch_maths_copied_by_a_kernel_fails_naming_torchs_ops(grade):
    # On a GPU the profiler's audit is not asked while the replay judges; the
    # case the replay finds wrong is called again under it, to name the ops.
    wrapper = """
def matmul(a, b):
    M, N = a.shape[0], b.shape[1]
    answer = (a.float() @ b.float()).contiguous()
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    cast_kernel[(triton.cdiv(M * N, 256),)](answer, c, M * N, BLOCK=256)
    return c
"""
    r = grade("matmul", HEAD + wrapper, device="cuda", timeout=300, timing=False)
    assert not r["passed"], r["summary"]
    assert "torch" in r["summary"] or "matmul" in r["summary"], r["summary"]
