"""Reference solution for lesson 02: row-wise softmax in Triton.

Softmax is memory-bound: each element is read once and written once, with a
handful of arithmetic operations in between (about 5 FLOP per 2-4 bytes moved,
far left of any GPU's ridge point). So the kernel's one job is to move bytes
at full bandwidth: read each row exactly once, keep it in registers, write it
once.

Design:
  * One program per row while the row fits in registers (up to 32768 columns):
    the max, the exponentials and the sum all come from one load. Loading the
    row twice (once for the max, once for the sum) would read 1.5x the bytes.
  * The maths is in fp32 whatever the storage dtype: fp16 sums of thousands of
    terms lose digits, and exp of an fp16 would overflow past 11.
  * Padding lanes load as -inf: exp(-inf - max) = 0, so they vanish from both
    the max and the sum without a branch.
  * num_warps grows with the row: a 32768-wide row spread over 4 warps would
    need 256 fp32 registers a thread for the row alone and spill.

On a GPU the first call of each shape also tries the two kernels further
down (several rows a program for narrow rows; groups with a single
cross-warp reduction for wide rows) and, on Hopper (sm_90) for wide
fp16/bf16 rows, hopper/softmax_smem.py next to this file, where each row
streams through shared memory by TMA while a loader warp fetches the next
rows. It checks each candidate's output against this kernel's, times them
all back to back and keeps a candidate only if it is 3% faster (what
@triton.autotune does, with a margin). So the lesson's kernel runs wherever
it is as fast, and everywhere the others cannot (the interpreter runs it
alone). On an H200 (BENCHMARKS.md, softmax) the multi-row kernel wins
8192 x 1024 fp16, the grouped one 4096 x 16384 fp16 (70 us against 74) and
the shared-memory one 2048 x 32768 fp16 (78 us against 93).
"""

import importlib.util
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: rows * stride can pass 2**31
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    x = x - tl.max(x, axis=0)  # the stable form: the largest exponent is exp(0) = 1
    num = tl.exp(x)
    y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * y_row_stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    # About 8-16 elements of the row per thread keeps registers in check.
    if block >= 16384:
        return 16
    if block >= 4096:
        return 8
    if block >= 1024:
        return 4
    return 2 if block >= 256 else 1


def _launch_triton(x: torch.Tensor, y: torch.Tensor) -> None:
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                              BLOCK=block, num_warps=_num_warps(block))


# --- two more Triton kernels, for the shapes where they pay ------------------
# Both are candidates beside softmax_kernel on a GPU: the first call of a
# shape times them and keeps the fastest (see _choose).

@triton.jit
def softmax_rows_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """ROWS rows a program, for narrow rows: a 1024-wide fp16 row is 2 KB,
    too little for one program to keep the memory system busy; two or four
    rows a program halve or quarter the number of programs (and their
    launch and reduction overheads). 8% faster at 8192 x 1024 fp16 on an
    H200."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    mask = (r < n_rows) & (c < n_cols)
    x = tl.load(x_ptr + r * x_row_stride + c, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=1)[:, None]
    num = tl.exp(x)
    y = num * (1.0 / tl.sum(num, axis=1))[:, None]
    tl.store(y_ptr + r * y_row_stride + c, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _max_and_sum(m1, s1, m2, s2):
    # Combine two (max, sum of 2^(x - max)) pairs. Equal maxima (-inf
    # included, where 2^(-inf - -inf) would be NaN) need no rescaling.
    m = tl.maximum(m1, m2)
    s = (s1 * tl.where(m1 == m, 1.0, tl.exp2(m1 - m))
         + s2 * tl.where(m2 == m, 1.0, tl.exp2(m2 - m)))
    return m, s


@triton.jit
def softmax_grouped_kernel(y_ptr, x_ptr, x_row_stride, y_row_stride, n_cols,
                           G: tl.constexpr, E: tl.constexpr):
    """One row a program, seen as G groups of E elements, for wide rows.

    softmax_kernel reduces over the whole row twice (the max, then the sum),
    and across the warps of a program each reduction is a round trip
    through shared memory with barriers: with 32 warps on a 16384-wide row
    those rounds cost more than the exponentials. Here each group's max and
    sum of exp2 stay inside a warp (registers and shuffles), and a single
    cross-warp reduction combines the (max, sum) pairs, online-softmax
    style. Each element's exp2 is computed once, against its group's max,
    then scaled by its group's factor 2^(m_g - M) / S. 70.7 us against
    74.2 at 4096 x 16384 fp16 on an H200 (32 warps, E = 16: one group a
    thread); with fewer warps a thread holds several groups, whose combine
    steps cost exponentials of their own, and it loses (as on fp32 rows), so
    it is a candidate, not the default."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, G)[:, None] * E + tl.arange(0, E)[None, :]
    mask = offs < n_cols
    x = tl.load(x_ptr + row * x_row_stride + offs, mask=mask, other=-float("inf"))
    x = x.to(tl.float32) * 1.4426950408889634  # log2(e): exp(x) = exp2(x * log2(e))
    m = tl.max(x, axis=1)
    m_safe = tl.where(m == -float("inf"), 0.0, m)  # a group of padding lanes only
    p = tl.exp2(x - m_safe[:, None])
    row_max, total = tl.reduce((m, tl.sum(p, axis=1)), 0, _max_and_sum)
    scale = tl.where(m == -float("inf"), 0.0, tl.exp2(m - row_max) / total)
    tl.store(y_ptr + row * y_row_stride + offs, (p * scale[:, None]).to(y_ptr.dtype.element_ty),
             mask=mask)


def _launch_rows(rows: int, num_warps: int):
    def launch(x: torch.Tensor, y: torch.Tensor) -> None:
        n_rows, n_cols = x.shape
        softmax_rows_kernel[(triton.cdiv(n_rows, rows),)](
            y, x, x.stride(0), y.stride(0), n_rows, n_cols, ROWS=rows,
            BLOCK=triton.next_power_of_2(n_cols), num_warps=num_warps)
    return launch


def _launch_grouped(group: int, num_warps: int):
    def launch(x: torch.Tensor, y: torch.Tensor) -> None:
        n_rows, n_cols = x.shape
        block = triton.next_power_of_2(n_cols)
        softmax_grouped_kernel[(n_rows,)](y, x, x.stride(0), y.stride(0), n_cols,
                                          G=block // group, E=group, num_warps=num_warps)
    return launch


# The shared-memory kernel's configurations tried on the first call of a
# shape: (lines of 256 per chunk, compute warps, programs per SM), each with
# the deepest ring of chunks that fits. The three fastest of 18 in the H200
# sweep (scripts/sweeps/sweep_softmax.py --only=smem) on the two widest fp16 shapes;
# 16-line chunks lost 20-30% and two programs an SM did not help.
SMEM_CONFIGS = [(64, 16, 1), (64, 4, 1), (32, 8, 1)]
SMEM_MIN_COLS = 4096  # narrower rows: the Triton kernel's launch is cheaper
MARGIN = 1.03  # how much faster a candidate must time to replace softmax_kernel
_SMEM = None  # the Gluon module once loaded, False where it cannot be
_CHOICE: dict = {}  # (rows, cols, dtype, device, contiguous) -> the fastest launcher


def _smem_module():
    """hopper/softmax_smem.py next to this file, on an sm_90 GPU with Gluon.
    GPULAB_SOFTMAX_SMEM=0 turns it off, to compare."""
    global _SMEM
    if _SMEM is None:
        _SMEM = False
        path = Path(__file__).parent / "hopper" / "softmax_smem.py"
        if os.environ.get("GPULAB_SOFTMAX_SMEM", "1") != "0" and path.is_file():
            try:
                spec = importlib.util.spec_from_file_location("gpulab_softmax_smem", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                _SMEM = mod
            except Exception as exc:  # an older Triton without Gluon, say
                print(f"softmax: shared-memory kernel unavailable ({exc}); using the Triton one",
                      file=sys.stderr)
    return _SMEM or None


def _candidates(x: torch.Tensor) -> dict:
    """Launchers for x: softmax_kernel; on a GPU the multi-row kernel for
    narrow rows and the grouped one for wide rows; on sm_90 the
    shared-memory kernel's configurations that fit."""
    out = {"triton": _launch_triton}
    if not x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        return out  # the interpreter: the lesson's kernel alone
    block = triton.next_power_of_2(x.shape[1])
    if block <= 2048:
        out["rows2 w4"] = _launch_rows(2, 4)
        out["rows4 w4"] = _launch_rows(4, 4)
    if block >= 8192:
        out["grouped e16 w32"] = _launch_grouped(16, 32)
    if (x.dtype not in (torch.float16, torch.bfloat16) or x.shape[1] < SMEM_MIN_COLS
            or torch.cuda.get_device_capability(x.device) != (9, 0)):
        return out
    smem = _smem_module()
    if smem is None:
        return out
    line = smem.BOX * x.element_size()
    for cr, warps, per_sm in SMEM_CONFIGS:
        slots = 200 * 1024 // per_sm // (cr * line)
        if smem.supported(x, slots, cr, per_sm):
            out[f"smem c{cr} w{warps} p{per_sm}"] = smem.Launcher(
                *x.shape, x.dtype, x.device, slots=slots, chunk_rows=cr, num_warps=warps,
                per_sm=per_sm)
    return out


@triton.jit
def _max_abs_diff_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    d = tl.abs(a - b)
    d = tl.where(d == d, d, float("inf"))  # a NaN is the largest difference
    tl.atomic_max(out_ptr, tl.max(d, axis=0))


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| over two contiguous tensors of one shape, in a Triton
    kernel: the graded call may not do maths in torch, even to check itself
    (one scalar read back is allowed)."""
    if not a.is_cuda:  # only a test calls this on the CPU (there one candidate runs)
        return float((a.float() - b.float()).abs().max())
    out = torch.zeros(1, dtype=torch.float32, device=a.device)
    n, block = a.numel(), 4096
    _max_abs_diff_kernel[(triton.cdiv(n, block),)](a, b, out, n, BLOCK=block)
    return float(out)


def _choose(x: torch.Tensor, y: torch.Tensor, launchers: dict) -> str:
    """The fastest launcher among those whose output matches the Triton
    kernel's on x (a candidate that fails or disagrees is dropped)."""
    _launch_triton(x, y)
    want = y.float().clone()  # a copy even for fp32: the candidates write into y below
    tol = 1e-5 if y.dtype == torch.float32 else 2e-3  # outputs are at most 1
    ok = {"triton": _launch_triton}
    for name, fn in launchers.items():
        if name == "triton":
            continue
        try:
            fn(x, y)  # the first call compiles; the one checked is a later, direct launch
            got = torch.full_like(y, float("nan"))
            fn(x, got)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - a Triton whose Gluon no longer compiles it
            print(f"softmax: {name} failed ({type(exc).__name__}); not used", file=sys.stderr)
            continue
        if _max_abs_diff(got, want) <= tol:  # NaN fails too
            ok[name] = fn
        else:
            print(f"softmax: {name} disagrees with the Triton kernel; not used", file=sys.stderr)
    if len(ok) == 1:
        return "triton"
    # Back-to-back calls, as a model runs them: a launch whose Python side
    # takes longer than the kernel (through Gluon's JIT dispatch the
    # shared-memory kernel's did, ~100 us a call on the H200's host against
    # 80 us on the GPU) is timed as slow as it really is. A candidate must
    # beat this file's kernel by MARGIN, not by noise.
    times = {name: triton.testing.do_bench(lambda fn=fn: fn(x, y), warmup=10, rep=40)
             for name, fn in ok.items()}
    best = min(times, key=times.get)
    return best if times[best] < times["triton"] / MARGIN else "triton"


def softmax(x: torch.Tensor) -> torch.Tensor:
    assert x.ndim == 2 and x.stride(1) == 1, "expects a 2-D tensor with unit column stride"
    n_rows, n_cols = x.shape
    y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    key = (n_rows, n_cols, x.dtype, x.device, x.is_contiguous())
    launch = _CHOICE.get(key)
    if launch is None:
        launchers = _candidates(x)
        # The launcher objects are kept, not rebuilt: the shared-memory
        # kernel's keeps its compiled kernel to launch it directly.
        launch = launchers[_choose(x, y, launchers) if len(launchers) > 1 else "triton"]
        _CHOICE[key] = launch
    launch(x, y)
    return y
