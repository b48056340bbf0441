"""Sweep softmax kernel variants on a GPU to choose the reference's configs.

Variants: one row per program with num_warps in {4, 8, 16, 32}; several rows
per program (a 2-D block) for narrow rows; a persistent grid that loops over
rows with software pipelining (tl.range num_stages), as in Triton's fused
softmax tutorial; on sm_90, for fp16/bf16 rows of 8192 and more, the
shared-memory-resident Gluon kernel of kernels/hopper/softmax_smem.py ("smem nS cC
wW pP": a ring of S chunks of C lines of 256, W compute warps, P programs an
SM); row kernels with a reciprocal instead of a division ("recip"), with
one cross-warp reduction over groups of E elements ("grouped eE"), and with
two programs a row that combine through global memory ("split eE", "r32":
at most 32 registers a thread). Each is
checked against torch.softmax and timed with gpulab's harness (L2 flushed)
beside torch.softmax. Writes JSON to argv[1]; `--only=PREFIX[,PREFIX]`
keeps the variants whose names start so (`--only=smem`) (run it under `timeout`: there is
no watchdog here).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpulab.measure.timing import L2Flusher, measure  # noqa: E402

# The reference's grouped (one cross-warp reduction) and multi-row kernels, swept as they are.
from kernels.softmax import _max_and_sum as _max_sum  # noqa: E402
from kernels.softmax import softmax_grouped_kernel as grouped_kernel  # noqa: E402
from kernels.softmax import softmax_rows_kernel as rows_kernel  # noqa: E402


@triton.jit
def row_kernel(y_ptr, x_ptr, xs, ys, n_cols, BLOCK: tl.constexpr, RECIP: tl.constexpr = False):
    """softmax.py's kernel; RECIP: y = num * (1 / sum), one reciprocal a row
    instead of a division an element."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * xs + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    if RECIP:
        y = num * (1.0 / tl.sum(num, axis=0))
    else:
        y = num / tl.sum(num, axis=0)
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def persistent_kernel(
    y_ptr, x_ptr, xs, ys, n_rows, n_cols, BLOCK: tl.constexpr, STAGES: tl.constexpr
):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    for row in tl.range(start, n_rows, step, num_stages=STAGES):
        row64 = row  # rows * stride < 2**31 for every swept shape
        x = tl.load(x_ptr + row64 * xs + offs, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(
            y_ptr + row64 * ys + offs,
            (num / tl.sum(num, axis=0)).to(y_ptr.dtype.element_ty),
            mask=mask,
        )


@triton.jit
def online_kernel(y_ptr, x_ptr, xs, ys, n_cols, CHUNK: tl.constexpr, STAGES: tl.constexpr):
    """Two passes over a row in chunks: a lane-wise online max/sum, then the
    normalised store. Few registers, so many programs per SM hide latency;
    the second read hits L2 while the rows in flight fit there."""
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * xs
    y_row = y_ptr + row * ys
    offs = tl.arange(0, CHUNK)
    m = tl.full([CHUNK], -float("inf"), tl.float32)
    s = tl.zeros([CHUNK], tl.float32)
    for start in tl.range(0, n_cols, CHUNK, num_stages=STAGES):
        x = tl.load(x_row + start + offs, mask=start + offs < n_cols, other=-float("inf")).to(
            tl.float32
        )
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        p = tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        s = s * alpha + p
        m = m_new
    mx = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - mx), axis=0)
    inv = 1.0 / total
    for start in tl.range(0, n_cols, CHUNK, num_stages=STAGES):
        mask = start + offs < n_cols
        x = tl.load(x_row + start + offs, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + offs, (tl.exp(x - mx) * inv).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def row_recompute_kernel(y_ptr, x_ptr, xs, ys, n_cols, BLOCK: tl.constexpr):
    """The whole row in registers in its storage dtype; exp recomputed."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    mask = offs < n_cols
    x = tl.load(x_ptr + row * xs + offs, mask=mask, other=-float("inf"))
    mx = tl.max(x, axis=0).to(tl.float32)
    total = tl.sum(tl.exp(x.to(tl.float32) - mx), axis=0)
    inv = 1.0 / total
    y = tl.exp(x.to(tl.float32) - mx) * inv
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def split_kernel(
    y_ptr, x_ptr, xs, ys, n_cols, half, part_ptr, flag_ptr, G: tl.constexpr, E: tl.constexpr
):
    """Two programs a row, each a half, for rows too wide for two programs
    an SM to hold whole (2048 x 32768 fp16: a whole row is one program an
    SM, and its reductions cannot overlap another's loads). Each half takes
    its (max, sum) as grouped_kernel does and publishes them; whichever of
    the two arrives second (an atomic counter a row, zeroed per launch)
    combines both and writes the whole row: its own half from registers,
    the other re-read from L2, where its partner loaded it moments before.
    No program ever waits for another, so there is no deadlock however the
    programs are scheduled (the interpreter runs them one after another)."""
    pid = tl.program_id(0)
    row = (pid // 2).to(tl.int64)
    part = pid % 2  # columns [part * half, part * half + half), half a multiple of 16
    offs = tl.arange(0, G)[:, None] * E + tl.arange(0, E)[None, :]
    start = part * half
    cols = start + offs
    mask = cols < tl.minimum(start + half, n_cols)
    x = tl.load(x_ptr + row * xs + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x * 1.4426950408889634
    m = tl.max(x, axis=1)
    m_safe = tl.where(m == -float("inf"), 0.0, m)
    p = tl.exp2(x - m_safe[:, None])
    m_own, s_own = tl.reduce((m, tl.sum(p, axis=1)), 0, _max_sum)
    tl.store(part_ptr + pid * 2, m_own)
    tl.store(part_ptr + pid * 2 + 1, s_own)
    # acq_rel: our partial is visible before the count moves; the partner's
    # is visible to us once we see its count.
    if tl.atomic_add(flag_ptr + row, 1, sem="acq_rel") == 1:
        other = pid ^ 1
        m_other = tl.load(part_ptr + other * 2, volatile=True)
        s_other = tl.load(part_ptr + other * 2 + 1, volatile=True)
        row_max, total = _max_sum(m_own, s_own, m_other, s_other)
        inv = 1.0 / total
        scale = tl.where(m == -float("inf"), 0.0, tl.exp2(m - row_max) * inv)
        tl.store(
            y_ptr + row * ys + cols, (p * scale[:, None]).to(y_ptr.dtype.element_ty), mask=mask
        )
        o_start = (1 - part) * half
        o_cols = o_start + offs
        o_mask = o_cols < tl.minimum(o_start + half, n_cols)
        xo = tl.load(x_ptr + row * xs + o_cols, mask=o_mask, other=-float("inf")).to(tl.float32)
        yo = tl.exp2(xo * 1.4426950408889634 - row_max) * inv
        tl.store(y_ptr + row * ys + o_cols, yo.to(y_ptr.dtype.element_ty), mask=o_mask)


def launch_split(x, y, group: int, num_warps: int, maxnreg: int | None = None) -> None:
    n_rows, n_cols = x.shape
    # Halves of a multiple of 16 columns, so the second starts aligned (and
    # Triton, seeing the argument divisible by 16, vectorises its loads).
    half = triton.cdiv(triton.cdiv(n_cols, 2), 16) * 16
    block = triton.next_power_of_2(half)
    part = torch.empty(n_rows * 4, dtype=torch.float32, device=x.device)
    flags = torch.zeros(n_rows, dtype=torch.int32, device=x.device)
    split_kernel[(2 * n_rows,)](
        y,
        x,
        x.stride(0),
        y.stride(0),
        n_cols,
        half,
        part,
        flags,
        G=block // group,
        E=group,
        num_warps=num_warps,
        **({"maxnreg": maxnreg} if maxnreg else {}),
    )


def smem_variants(n_rows: int, n_cols: int, dtype):
    """The Gluon kernel's configurations that fit: a ring of `slots` chunks
    of C lines of 256 (a row and a chunk at least, 200 KiB at most a
    program), W compute warps, P programs an SM."""
    if torch.cuda.get_device_capability() != (9, 0) or dtype not in (torch.float16, torch.bfloat16):
        return
    from kernels.hopper import softmax_smem

    probe = torch.empty(1, n_cols, dtype=dtype)
    line_bytes = softmax_smem.BOX * probe.element_size()
    for per_sm in (1, 2):
        for cr in (16, 32, 64):
            most = 200 * 1024 // per_sm // (cr * line_bytes)
            for slots in (most,):  # the deepest ring that fits
                for w in (4, 8, 16):
                    if not softmax_smem.supported(probe, slots, cr, per_sm):
                        continue
                    yield (
                        f"smem n{slots} c{cr} w{w} p{per_sm}",
                        lambda x, y, n=slots, c=cr, w=w, p=per_sm: softmax_smem.launch(
                            x, y, slots=n, chunk_rows=c, num_warps=w, per_sm=p
                        ),
                    )


def variants(n_rows: int, n_cols: int, dtype=torch.float32):
    block = triton.next_power_of_2(n_cols)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if block >= 8192:
        yield from smem_variants(n_rows, n_cols, dtype)
    for w in (4, 8, 16, 32):
        yield (
            f"row w{w}",
            lambda x, y, w=w: row_kernel[(n_rows,)](
                y, x, x.stride(0), y.stride(0), n_cols, BLOCK=block, num_warps=w
            ),
        )
        yield (
            f"recip w{w}",
            lambda x, y, w=w: row_kernel[(n_rows,)](
                y, x, x.stride(0), y.stride(0), n_cols, BLOCK=block, RECIP=True, num_warps=w
            ),
        )
        for e in sorted({min(block, e) for e in (8, 16, 32)}):  # group sizes
            yield (
                f"grouped e{e} w{w}",
                lambda x, y, w=w, e=e: grouped_kernel[(n_rows,)](
                    y, x, x.stride(0), y.stride(0), n_cols, G=block // e, E=e, num_warps=w
                ),
            )
        if block >= 16384 and w >= 8:
            for e in (8, 16):
                yield f"split e{e} w{w}", lambda x, y, w=w, e=e: launch_split(x, y, e, w)
                if w == 32:
                    # 32 registers a thread (no spills when compiled for
                    # sm_90 by Triton 3.6): two 1024-thread programs an SM.
                    yield (
                        f"split e{e} w{w} r32",
                        lambda x, y, w=w, e=e: launch_split(x, y, e, w, maxnreg=32),
                    )
    if block >= 8192:
        for chunk in (1024, 2048, 4096):
            for w in (4, 8):
                for st in (1, 2, 3):
                    yield (
                        f"online c{chunk} w{w} s{st}",
                        lambda x, y, c=chunk, w=w, st=st: online_kernel[(n_rows,)](
                            y, x, x.stride(0), y.stride(0), n_cols, CHUNK=c, STAGES=st, num_warps=w
                        ),
                    )
        for w in (8, 16, 32):
            yield (
                f"recompute w{w}",
                lambda x, y, w=w: row_recompute_kernel[(n_rows,)](
                    y, x, x.stride(0), y.stride(0), n_cols, BLOCK=block, num_warps=w
                ),
            )
    if block <= 4096:
        for rows in (2, 4, 8):
            for w in (4, 8, 16):
                if rows * block > 16384:
                    continue
                yield (
                    f"rows{rows} w{w}",
                    lambda x, y, rows=rows, w=w: rows_kernel[(triton.cdiv(n_rows, rows),)](
                        y,
                        x,
                        x.stride(0),
                        y.stride(0),
                        n_rows,
                        n_cols,
                        ROWS=rows,
                        BLOCK=block,
                        num_warps=w,
                    ),
                )
    for w in (8, 16):
        for per_sm in (1, 2, 4):
            for st in (1, 2):
                yield (
                    f"persist{per_sm} w{w} s{st}",
                    lambda x, y, w=w, p=per_sm, st=st: persistent_kernel[(min(n_rows, sms * p),)](
                        y,
                        x,
                        x.stride(0),
                        y.stride(0),
                        n_rows,
                        n_cols,
                        BLOCK=block,
                        STAGES=st,
                        num_warps=w,
                    ),
                )


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--only=")]
    only = ()  # name prefixes to keep; () keeps every variant
    for a in sys.argv[1:]:
        if a.startswith("--only="):
            only = tuple(a.split("=", 1)[1].split(","))
    out = Path(args[0] if args else "softmax_sweep.json")
    flusher = L2Flusher()
    shapes = [(8192, 1024), (8192, 4096), (4096, 16384), (2048, 32768)]
    results = []
    for dt in (torch.float16, torch.float32):
        for n_rows, n_cols in shapes:
            x = torch.randn(n_rows, n_cols, device="cuda", dtype=dt)
            ref = torch.softmax(x.float(), -1)
            base = measure(lambda: torch.softmax(x, -1), flusher=flusher, log_clocks=False)["ms"]
            nbytes = 2 * x.numel() * x.element_size()
            best = None
            for name, launch in variants(n_rows, n_cols, dt):
                if only and not name.startswith(only):
                    continue
                y = torch.full_like(x, float("nan"))
                try:
                    launch(x, y)
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - e.g. out of resources
                    results.append(
                        {
                            "shape": [n_rows, n_cols],
                            "dtype": str(dt),
                            "variant": name,
                            "error": str(exc)[:200],
                        }
                    )
                    continue
                err = (y.float() - ref).abs().max().item()
                ms = measure(lambda: launch(x, y), flusher=flusher, log_clocks=False)["ms"]
                row = {
                    "shape": [n_rows, n_cols],
                    "dtype": str(dt),
                    "variant": name,
                    "ms": ms,
                    "tbs": nbytes / ms / 1e9,
                    "speedup": base / ms,
                    "err": err,
                    "torch_ms": base,
                }
                results.append(row)
                if err < 1e-2 and (best is None or ms < best["ms"]):
                    best = row
            if best is None:
                print(f"{str(dt):14} {n_rows}x{n_cols}: no variant ran correctly")
                continue
            print(
                f"{str(dt):14} {n_rows}x{n_cols}: torch {base * 1e3:7.1f} µs; best "
                f"{best['variant']:18} {best['ms'] * 1e3:7.1f} µs {best['tbs']:.2f} TB/s "
                f"{best['speedup']:.2f}x"
            )
    out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
