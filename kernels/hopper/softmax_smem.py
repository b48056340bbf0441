"""A softmax whose rows live in shared memory: the Hopper (sm_90) path of
softmax.py for wide fp16/bf16 rows, written in Gluon. softmax.py's Triton
kernel stays the lesson and the portable path; it reached 68-85% of copy
bandwidth on these rows on an H200 (BENCHMARKS.md, softmax).

Why: one Triton program per row keeps the row in registers (a 32768-wide
fp16 row is 64 KiB, a quarter of an SM's register file), so loading, the
two reductions and storing happen one after the other in each program, and
the few programs that fit on an SM cannot hide each other's DRAM latency.
The chunked online variants free the registers but read each row twice,
and the second read misses L2 once 132 SMs have rows in flight.

Here a row is read from DRAM once, by TMA, into a ring of chunk slots in
shared memory; the compute warps make two passes over the row's chunks (an
online max and sum, then exp and scale, written back in place) and TMA
stores each finished chunk. A loader warp streams the next rows' chunks in
behind: a slot goes back to it as soon as its chunk has been stored, so
DRAM reads of the following rows overlap the passes and stores of this one.
One persistent program per SM (or two) walks rows pid, pid + grid, ...

TMA boxes are at most 256 elements a side, so a row of N elements is viewed
as R = N / 256 lines of 256 ([M * R, 256] for the whole input), and moved in
chunks of CR lines. No swizzle: each warp reads whole 512-byte lines of a
chunk, which is bank-conflict free without one.

Gluon has no interpreter: the CPU tests compile it for sm_90 and check the
PTX; `python3 scripts/sweeps/sweep_softmax.py OUT --only=smem` times its
configurations on a GPU, and softmax.py checks each against its own Triton
kernel before it uses it.
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
def _loader(x_desc, bufs, ready, empty, n_rows, R: gl.constexpr):
    """One warp: TMA-copy this program's rows, chunk after chunk, into the
    ring of chunk slots, each slot once the compute warps have handed it back."""
    NSLOT: gl.constexpr = bufs.type.shape[0]
    CR: gl.constexpr = x_desc.block_type.shape[0]
    NCH: gl.constexpr = R // CR
    g = 0  # this program's chunk count: chunk g goes to slot g % NSLOT
    for row in range(gl.program_id(0), n_rows, gl.num_programs(0)):
        for c in gl.static_range(NCH):
            slot = g % NSLOT
            # A fresh mbarrier counts its phase -1 as done: the first pass
            # through the ring goes straight on.
            mbarrier.wait(empty.index(slot), ((g // NSLOT) & 1) ^ 1)
            mbarrier.expect(ready.index(slot), x_desc.block_type.nbytes)
            _tma_load(x_desc, [row * R + c * CR, 0], ready.index(slot), bufs.index(slot))
            g += 1


@gluon.jit
def _store_chunk(y_desc, chunk, line, g, empty):
    """TMA-store the finished chunk g (written to shared memory by every
    compute thread) at `line` of y: each thread fences its generic-proxy
    writes for the copy engine, then the barrier, then the store. Once all
    but the newest store have read their slots, the slot of chunk g - 1 goes
    back to the loader."""
    NSLOT: gl.constexpr = empty.type.shape[0]
    fence_async_shared()
    _barrier()
    _tma_store(y_desc, [line, 0], chunk)
    tma.store_wait(pendings=1)
    if g > 0:
        mbarrier.arrive(empty.index((g - 1) % NSLOT))


@gluon.jit
def _compute(y_desc, bufs, ready, empty, n_rows, R: gl.constexpr):
    """The default partition: two passes over each row's chunks in shared
    memory; each chunk's slot goes back to the loader as soon as its
    normalised values have been stored, so the next rows stream in behind."""
    NSLOT: gl.constexpr = bufs.type.shape[0]
    CR: gl.constexpr = y_desc.block_type.shape[0]
    NCH: gl.constexpr = R // CR
    # Each warp owns whole 256-wide lines (8 elements, 16 bytes, a thread):
    # the reductions along a line stay inside the warp.
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [gl.num_warps(), 1], [1, 0])
    lines: gl.constexpr = gl.SliceLayout(1, layout)
    g0 = 0  # the chunk count at this row's first chunk
    for row in range(gl.program_id(0), n_rows, gl.num_programs(0)):
        # Pass 1: per line of each chunk, an online max and sum (log2
        # units); folded across lines once at the end, so no cross-warp
        # reduction per chunk.
        m = gl.full([CR], float("-inf"), gl.float32, layout=lines)
        s = gl.zeros([CR], gl.float32, layout=lines)
        for c in gl.static_range(NCH):
            g = g0 + c
            mbarrier.wait(ready.index(g % NSLOT), (g // NSLOT) & 1)
            x = bufs.index(g % NSLOT).load(layout).to(gl.float32) * LOG2E
            m_new = gl.maximum(m, gl.max(x, axis=1))
            s = s * gl.exp2(m - m_new) + gl.sum(gl.exp2(x - gl.expand_dims(m_new, 1)), axis=1)
            m = m_new
        row_max = gl.max(m, axis=0)
        inv = 1.0 / gl.sum(s * gl.exp2(m - row_max), axis=0)
        # Pass 2: normalise in place and store each chunk as soon as it is
        # written (_store_chunk hands its slot back once the store has read it).
        for c in gl.static_range(NCH):
            g = g0 + c
            chunk = bufs.index(g % NSLOT)
            x = chunk.load(layout).to(gl.float32) * LOG2E
            chunk.store((gl.exp2(x - row_max) * inv).to(y_desc.dtype))
            _store_chunk(y_desc, chunk, row * R + c * CR, g, empty)
        g0 += NCH
    tma.store_wait(pendings=0)


@gluon.jit
def _compute_one_exp(y_desc, bufs, ready, empty, n_rows, R: gl.constexpr):
    """_compute with one exp2 an element instead of two. _compute's passes
    run two exp2 per element (the online sum's, then the normalising one's)
    and the SM's MUFU unit does 16 a clock: on a 32768-wide fp16 row that is
    ~2.3 us of the ~4 us its bytes take at the copy ceiling. Here pass 1
    finds only the max (no exp); pass 2 computes p = exp2(x - max) once,
    sums it and writes p over x in the row's storage dtype; pass 3 scales p
    by 1/sum. The price: p is rounded to the storage dtype before the
    scaling, so y is up to 1.44 fp16 ulp from the exact result (measured)
    instead of 0.5. On an H200 it was no faster (the MUFU unit was not the
    limit: BENCHMARKS.md, softmax), so softmax.py does not offer it; it stays
    as the measured alternative, for scripts/research/softmax_ring_probe.py."""
    NSLOT: gl.constexpr = bufs.type.shape[0]
    CR: gl.constexpr = y_desc.block_type.shape[0]
    NCH: gl.constexpr = R // CR
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [1, 32], [gl.num_warps(), 1], [1, 0])
    lines: gl.constexpr = gl.SliceLayout(1, layout)
    g0 = 0
    for row in range(gl.program_id(0), n_rows, gl.num_programs(0)):
        m = gl.full([CR], float("-inf"), gl.float32, layout=lines)
        for c in gl.static_range(NCH):
            g = g0 + c
            mbarrier.wait(ready.index(g % NSLOT), (g // NSLOT) & 1)
            m = gl.maximum(m, gl.max(bufs.index(g % NSLOT).load(layout).to(gl.float32), axis=1))
        row_max = gl.max(m, axis=0) * LOG2E  # max(x) * log2(e) = max(x * log2(e))
        s = gl.zeros([CR], gl.float32, layout=lines)
        for c in gl.static_range(NCH):
            # Each thread writes back exactly the elements it read (one
            # layout throughout), so no barrier is needed before pass 3.
            chunk = bufs.index((g0 + c) % NSLOT)
            p = gl.exp2(chunk.load(layout).to(gl.float32) * LOG2E - row_max)
            s += gl.sum(p, axis=1)
            chunk.store(p.to(y_desc.dtype))
        inv = 1.0 / gl.sum(s, axis=0)
        for c in gl.static_range(NCH):
            g = g0 + c
            chunk = bufs.index(g % NSLOT)
            chunk.store((chunk.load(layout).to(gl.float32) * inv).to(y_desc.dtype))
            _store_chunk(y_desc, chunk, row * R + c * CR, g, empty)
        g0 += NCH
    tma.store_wait(pendings=0)


@gluon.jit
def softmax_smem(x_desc, y_desc, n_rows, R: gl.constexpr, NSLOT: gl.constexpr,
                 ONE_EXP: gl.constexpr = False):
    """The kernel: the ring's shared memory and barriers, then the compute
    warps (the launch's num_warps) and the loader warp, side by side."""
    CR: gl.constexpr = x_desc.block_type.shape[0]
    bufs = gl.allocate_shared_memory(x_desc.dtype, [NSLOT, CR, WIDTH], x_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NSLOT, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NSLOT, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NSLOT):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    fence_async_shared()
    # The tuples written out here: R stays a constexpr only so (a tuple
    # bound to a name first makes it an int32).
    if ONE_EXP:
        gl.warp_specialize([(_compute_one_exp, (y_desc, bufs, ready, empty, n_rows, R)),
                            (_loader, (x_desc, bufs, ready, empty, n_rows, R))], [1], [24])
    else:
        gl.warp_specialize([(_compute, (y_desc, bufs, ready, empty, n_rows, R)),
                            (_loader, (x_desc, bufs, ready, empty, n_rows, R))], [1], [24])


@functools.cache
def shared_layout(dtype):
    # Cached: building a Gluon layout object costs more Python than the
    # descriptor that carries it (~15 us on the H200's host).
    bits = {torch.float16: 16, torch.bfloat16: 16, torch.float32: 32}[dtype]
    return gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=bits, rank=2)


def supported(x: torch.Tensor, slots: int, chunk_rows: int, per_sm: int = 1) -> bool:
    """Rows of whole 256-element lines in whole chunks, and a ring that holds
    a row and one chunk more (pass 1 needs the whole row resident, and the
    slot of the row before's last chunk is only released by this row's
    first store), within the shared memory of 1/per_sm of an SM."""
    n = x.shape[-1]
    R = n // BOX
    return (x.ndim == 2 and x.is_contiguous() and n % BOX == 0 and R % chunk_rows == 0
            and slots >= R // chunk_rows + 1
            and slots * chunk_rows * BOX * x.element_size() <= 200 * 1024 // per_sm)


@functools.cache
def _sm_count(device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


class Launcher:
    """Launches of one configuration on one (rows, cols, dtype), with what
    does not change between calls built once.

    Python's share of a launch is most of its cost at these sizes: through
    Gluon's JIT dispatch (binding and specialising the arguments, looking up
    the compiled kernel) a launch with two host TMA descriptors costs
    ~100 us of the H200's host, more than the ~80 us the kernel runs, so
    back to back it was no faster than the Triton kernel (BENCHMARKS.md,
    softmax). So the first call goes through the JIT, which compiles and
    returns the compiled kernel, and later calls launch that directly: all
    that is left per call is two descriptors, which must be rebuilt because
    they hold the tensors' addresses (Triton's launcher turns each into a
    CUtensorMap in C)."""

    def __init__(self, rows: int, cols: int, dtype, device, slots: int = 12,
                 chunk_rows: int = 32, num_warps: int = 8, per_sm: int = 1,
                 one_exp: bool = False):
        self.rows, self.R, self.slots, self.num_warps = rows, cols // BOX, slots, num_warps
        self.shape, self.block = [rows * self.R, BOX], [chunk_rows, BOX]
        self.layout = shared_layout(dtype)
        self.grid = (min(rows, _sm_count(device) * per_sm), 1, 1)
        self.one_exp = one_exp
        self.compiled = None

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

        # x and y as [rows * R, 256] lines, without making views of them.
        x_desc = TensorDescriptor(x, self.shape, [BOX, 1], self.block, self.layout)
        y_desc = TensorDescriptor(y, self.shape, [BOX, 1], self.block, self.layout)
        if self.compiled is not None:
            # The launcher takes every argument, constexprs included, in order.
            self.compiled[self.grid](x_desc, y_desc, self.rows, self.R, self.slots,
                                     self.one_exp)
        else:
            self.compiled = softmax_smem[self.grid](x_desc, y_desc, self.rows, R=self.R,
                                                    NSLOT=self.slots, ONE_EXP=self.one_exp,
                                                    num_warps=self.num_warps)


def launch(x: torch.Tensor, y: torch.Tensor, slots: int = 12, chunk_rows: int = 32,
           num_warps: int = 8, per_sm: int = 1, one_exp: bool = False) -> None:
    """One launch through Gluon's JIT, everything built afresh (what the
    sweep times with the L2 flushed, where host time is hidden)."""
    M, N = x.shape
    assert supported(x, slots, chunk_rows, per_sm), (tuple(x.shape), slots, chunk_rows)
    Launcher(M, N, x.dtype, x.device, slots, chunk_rows, num_warps, per_sm, one_exp)(x, y)


if __name__ == "__main__":  # a quick check on a GPU
    torch.manual_seed(0)
    for n in (16384, 32768):
        x = torch.randn(512, n, device="cuda", dtype=torch.float16)
        y = torch.full_like(x, float("nan"))
        launch(x, y)
        print(n, float((y.float() - torch.softmax(x.float(), -1)).abs().max()))
