"""A softmax whose rows live in shared memory: a candidate for the wide fp16
rows where the Triton kernels stop at 68-85% of copy bandwidth (BENCHMARKS.md,
softmax). Written in Gluon for sm_90; a sweep family (`smem`) in
scripts/sweep_softmax.py, not the lesson's reference until it measures better.

Why: one Triton program per row keeps the row in registers (a 32768-wide
fp16 row is 64 KiB, a quarter of an SM's register file), so loading, the two
reductions and storing happen one after the other in each program, and the
few programs that fit on an SM cannot hide each other's DRAM latency. The
chunked online variants free the registers but read each row twice, and the
second read misses L2 once 132 SMs have rows in flight.

Here a row is read from DRAM once, by TMA, into a shared-memory buffer; the
compute warps make two passes over that buffer (an online max and sum, then
exp and scale, written back in place) and TMA stores each finished chunk
while the next is computed. A loader warp fills the next rows' buffers
meanwhile, so DRAM reads of rows i+1.. overlap the compute and the stores of
row i. One persistent program per SM walks rows pid, pid + grid, ...

TMA boxes are at most 256 elements a side, so a row of N elements is viewed
as R = N / 256 rows of 256 ([M * R, 256] for the whole input), and moved in
chunks of CR such rows. No swizzle: each warp reads whole 512-byte lines of
a chunk, which is bank-conflict free without one.

Not yet run on a GPU (written when the device time was spent): the CPU test
compiles it for sm_90; `python3 scripts/sweep_softmax.py OUT --family smem`
checks and times it.
"""
from __future__ import annotations

import functools

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma

LOG2E = gl.constexpr(1.4426950408889634)
BOX = 256  # the TMA box's inner side, elements (at most 256)
WIDTH = gl.constexpr(BOX)

# Gluon renamed these after Triton 3.6: take whichever this release has.
_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global


@gluon.jit
def _loader(x_desc, bufs, ready, empty, n_rows):
    """One warp: TMA-copy each of this program's rows, chunk by chunk, into
    buffer t % NBUF once the compute warps have handed it back."""
    NBUF: gl.constexpr = bufs.type.shape[0]
    R: gl.constexpr = bufs.type.shape[1]
    CR: gl.constexpr = x_desc.block_type.shape[0]
    NCH: gl.constexpr = R // CR
    t = 0
    for row in range(gl.program_id(0), n_rows, gl.num_programs(0)):
        b = t % NBUF
        # A fresh mbarrier counts its phase -1 as done: the first pass
        # through the buffers goes straight on.
        mbarrier.wait(empty.index(b), ((t // NBUF) & 1) ^ 1)
        for c in gl.static_range(NCH):
            bar = ready.index(b * NCH + c)
            mbarrier.expect(bar, x_desc.block_type.nbytes)
            _tma_load(x_desc, [row * R + c * CR, 0], bar, bufs.index(b).slice(c * CR, CR))
        t += 1


@gluon.jit
def _compute(y_desc, bufs, ready, empty, n_rows, NUM_WARPS: gl.constexpr):
    """The default partition: two passes over each row in shared memory."""
    NBUF: gl.constexpr = bufs.type.shape[0]
    R: gl.constexpr = bufs.type.shape[1]
    CR: gl.constexpr = y_desc.block_type.shape[0]
    NCH: gl.constexpr = R // CR
    # Each warp owns whole 256-wide lines (8 elements, 16 bytes, a thread):
    # the reductions along a line stay inside the warp.
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [NUM_WARPS, 1], [1, 0])
    lines: gl.constexpr = gl.SliceLayout(1, layout)
    t = 0
    for row in range(gl.program_id(0), n_rows, gl.num_programs(0)):
        b = t % NBUF
        phase = (t // NBUF) & 1
        buf = bufs.index(b)
        # Pass 1: per line of the chunk, an online max and sum (log2 units);
        # folded across lines once at the end, so no cross-warp reduction
        # per chunk.
        m = gl.full([CR], float("-inf"), gl.float32, layout=lines)
        s = gl.zeros([CR], gl.float32, layout=lines)
        for c in gl.static_range(NCH):
            mbarrier.wait(ready.index(b * NCH + c), phase)
            x = buf.slice(c * CR, CR).load(layout).to(gl.float32) * LOG2E
            m_new = gl.maximum(m, gl.max(x, axis=1))
            s = s * gl.exp2(m - m_new) + gl.sum(gl.exp2(x - gl.expand_dims(m_new, 1)), axis=1)
            m = m_new
        row_max = gl.max(m, axis=0)
        inv = 1.0 / gl.sum(s * gl.exp2(m - row_max), axis=0)
        # Pass 2: normalise in place, and store each chunk as soon as it is
        # written: every thread fences its generic-proxy writes for the
        # copy engine, then the barrier, then one thread issues the store.
        for c in gl.static_range(NCH):
            chunk = buf.slice(c * CR, CR)
            x = chunk.load(layout).to(gl.float32) * LOG2E
            chunk.store((gl.exp2(x - row_max) * inv).to(y_desc.dtype))
            fence_async_shared()
            _barrier()
            _tma_store(y_desc, [row * R + c * CR, 0], chunk)
        # A buffer goes back to the loader once the stores have read it.
        # With three or more buffers, wait only for the previous row's
        # stores, so this row's drain overlaps the next row's passes.
        if NBUF >= 3:
            tma.store_wait(pendings=NCH)
            if t > 0:
                mbarrier.arrive(empty.index((t - 1) % NBUF))
        else:
            tma.store_wait(pendings=0)
            mbarrier.arrive(empty.index(b))
        t += 1
    tma.store_wait(pendings=0)


@functools.cache
def softmax_smem_kernel(num_warps: int):
    NUM_WARPS = gl.constexpr(num_warps)

    # Partitions take no constexpr arguments in Triton 3.6: bake it in.
    @gluon.jit
    def compute(y_desc, bufs, ready, empty, n_rows):
        _compute(y_desc, bufs, ready, empty, n_rows, NUM_WARPS)

    @gluon.jit
    def softmax_smem(x_desc, y_desc, n_rows, R: gl.constexpr, NBUF: gl.constexpr):
        CR: gl.constexpr = x_desc.block_type.shape[0]
        NCH: gl.constexpr = R // CR
        bufs = gl.allocate_shared_memory(x_desc.dtype, [NBUF, R, WIDTH], x_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [NBUF * NCH, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [NBUF, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(NBUF * NCH):
            mbarrier.init(ready.index(i), count=1)
        for i in gl.static_range(NBUF):
            mbarrier.init(empty.index(i), count=1)
        fence_async_shared()
        gl.warp_specialize([(compute, (y_desc, bufs, ready, empty, n_rows)),
                            (_loader, (x_desc, bufs, ready, empty, n_rows))], [1], [24])

    return softmax_smem


def shared_layout(dtype):
    bits = {torch.float16: 16, torch.bfloat16: 16, torch.float32: 32}[dtype]
    return gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=bits, rank=2)


def supported(x: torch.Tensor, nbuf: int, chunk_rows: int) -> bool:
    n = x.shape[-1]
    R = n // BOX
    return (x.ndim == 2 and x.is_contiguous() and n % BOX == 0 and R % chunk_rows == 0
            and nbuf * n * x.element_size() <= 200 * 1024)


def launch(x: torch.Tensor, y: torch.Tensor, nbuf: int = 2, chunk_rows: int = 32,
           num_warps: int = 8, programs: int | None = None) -> None:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    M, N = x.shape
    R = N // BOX
    assert supported(x, nbuf, chunk_rows), (tuple(x.shape), nbuf, chunk_rows)
    lay = shared_layout(x.dtype)

    def desc(t):
        return TensorDescriptor(t, [M * R, BOX], [BOX, 1], [chunk_rows, BOX], lay)

    grid = programs or min(M, torch.cuda.get_device_properties(x.device).multi_processor_count)
    softmax_smem_kernel(num_warps)[(grid,)](desc(x.view(M * R, BOX)),
                                            desc(y.view(M * R, BOX)), M, R=R, NBUF=nbuf,
                                            num_warps=num_warps)


if __name__ == "__main__":  # a quick check on a GPU
    torch.manual_seed(0)
    for n in (16384, 32768):
        x = torch.randn(512, n, device="cuda", dtype=torch.float16)
        y = torch.full_like(x, float("nan"))
        launch(x, y)
        print(n, float((y.float() - torch.softmax(x.float(), -1)).abs().max()))
