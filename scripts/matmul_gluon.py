"""A warp-specialised Hopper (sm_90) matmul in Gluon: a candidate to beat
kernels/matmul.py's 1.03x of cuBLAS on an H200. Measured there
(benchmarks/h200-2026-11-30/matmul-gluon.json): correct on every shape,
0.995x cuBLAS at best (two warpgroups, persistent, 3 stages), 0.93-0.998x
with three; so it stays an experiment and BENCHMARKS.md says why.

C = A @ B, A (M, K) and B (K, N) row-major, C (M, N); bf16 or fp16 in and
out, fp32 accumulation.

Why: on the H200's 700 W cap a large matmul is power-bound, so throughput is
energy per FLOP, and a large share of that energy is moving A and B from L2
into shared memory. A BLOCK_M x BLOCK_N tile moves (BLOCK_M + BLOCK_N) *
BLOCK_K elements per 2 * BLOCK_M * BLOCK_N * BLOCK_K FLOP: 128 x 256 (the
Triton kernel's tile) does 85 FLOP per bf16 byte moved, 192 x 256 110, so
22% fewer bytes per FLOP. cuBLAS gets its saving with clusters and TMA multicast, which
Triton 3.6 lacks; a taller tile is the part we can write. A 192 x 256 fp32
accumulator is 192 KiB of registers: 128 a thread over three warpgroups,
which only fits if the warps that load do not also hold registers. So:

* Warp specialisation. One loader warp issues the TMA copies of A and B
  into a ring of STAGES shared-memory stages; NUM_WG consumer warpgroups
  (2 or 3) each own 64 rows of the tile and only issue wgmmas. A `ready`
  mbarrier per stage says "its bytes have landed" (the loader's expect plus
  the TMA's byte count), an `empty` one "every consumer is done reading it"
  (count NUM_WG).
* setmaxnreg. The register file (64K 32-bit registers) is handed out per
  warpgroup (Triton pads the loader warp to a whole one: 12 or 16 warps in
  all): the loader's keeps 24 a thread, the consumers take the rest, 240
  each with two, 160 each with three (24 + 3 * 160 = 504 <= 512).
* One k-step of wgmmas in flight. A consumer issues k-step i's wgmma
  asynchronously, waits until only i's is pending, so i - 1's has finished
  reading its stage, and only then gives stage i - 1 back to the loader.
  With three consumers the step is two m64n128 wgmmas, not one m64n256
  (ptxas would not take it in a 512-thread kernel; see _consumer).
* Persistence. The tile loop is the same code either way: one program per
  tile (grid = #tiles) or one per SM striding through the tiles (grid =
  #SMs). Persistent, the loader runs ahead into the next tile's K loop while
  the consumers do this tile's epilogue, and the epilogue's TMA stores drain
  while the next tile's wgmmas run.
* Grouped tile order (GROUP_M tile-rows at a time, as kernels/matmul.py),
  so the tiles in flight at once share A and B panels in L2.
* Epilogue in 64-column chunks. Each consumer writes its 64 x BLOCK_N
  result to shared memory 64 x 64 at a time, alternating between two
  buffers, and a TMA store copies each out; writing a buffer first waits
  for the store that last read it. A whole 64 x 256 tile per warpgroup
  would not fit beside the ring (3 stages at 192 x 256 are 168 KiB).

Edges: the descriptors cover the real M, N, K, so TMA zero-fills reads past
them (zeros add nothing to the dot products) and clips stores. 8192 is not
a multiple of 192: the last M tile is two-thirds real. TMA needs 16-byte
aligned row strides, so N and K must be multiples of 8 (supported()).

Shared memory (bf16/fp16, BLOCK_K 64): a stage is (64 * NUM_WG + BLOCK_N) *
64 * 2 bytes, 48 KiB at 128 x 256, 56 KiB at 192 x 256; the epilogue
buffers 16 KiB per consumer. Of the 227 KiB a block may have, that allows
4 stages at 128 x 256 (224 KiB) and 3 at 192 x 256 (216 KiB).

Wave quantisation works against the 192-row tile: at 4096^3 it makes 22 x
16 = 352 tiles, 2.67 waves on 132 SMs (3 waves' time, 89% busy), where
128 x 256 makes 512 tiles, 3.88 waves (97%). `__main__` prints the tile
counts with the timings so a win or loss can be read against them.

`python3 scripts/matmul_gluon.py [OUT.json]` on an sm_90 GPU checks every
variant against torch.matmul and times it against cuBLAS;
tests/test_matmul_gluon.py compiles it for sm_90 on the CPU and checks the
PTX (Gluon has no interpreter).
"""
from __future__ import annotations

import functools

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

# Gluon renamed the TMA copies after Triton 3.6 (async_load/async_store);
# take whichever this release has.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

ROWS = 64          # rows of C per consumer warpgroup: one wgmma's M
EPI_N = 64         # columns per epilogue chunk (64 x 64 x 2 bytes = 8 KiB)
EPI_BUFS = 2       # epilogue buffers per consumer
# The same, for the kernels (a jitted function may read only constexpr globals).
_ROWS = gl.constexpr(ROWS)
_EPI_N = gl.constexpr(EPI_N)
_EPI_BUFS = gl.constexpr(EPI_BUFS)
SMEM_LIMIT = 227 * 1024  # the most shared memory an sm_90 block may have
SMEM_SLACK = 1024  # mbarriers and warp_specialize's captured arguments

# setmaxnreg budgets per thread: the loader's warpgroup keeps 24, consumers
# share the rest of the 512 a thread the four warpgroups may hold together.
CONSUMER_REGS = {2: 240, 3: 160}
LOADER_REGS = 24


@gluon.jit
def _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M: gl.constexpr):
    """Tile number -> (pid_m, pid_n) in grouped order: GROUP_M tile-rows are
    walked column by column, so consecutive tiles reuse the same B panel
    and a group's A panels, as in kernels/matmul.py."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile // in_group) * GROUP_M
    group_rows = gl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile % in_group) % group_rows
    pid_n = (tile % in_group) // group_rows
    return pid_m, pid_n


@gluon.jit
def _loader(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, GROUP_M: gl.constexpr):
    """One warp: for every k-step of every tile of this program, wait until
    its stage is free, then TMA-copy NUM_WG 64-row slices of A and N_SPLIT
    BLOCK_K x MMA_N slices of B into it, all landing on ready[stage]."""
    STAGES: gl.constexpr = ready.type.shape[0]
    NUM_WG: gl.constexpr = a_smem.type.shape[0] // STAGES
    N_SPLIT: gl.constexpr = b_smem.type.shape[0] // STAGES
    BLOCK_K: gl.constexpr = b_smem.type.shape[1]
    MMA_N: gl.constexpr = b_smem.type.shape[2]
    BLOCK_N: gl.constexpr = MMA_N * N_SPLIT
    BLOCK_M: gl.constexpr = _ROWS * NUM_WG
    # Every box counts in full, also where part of it lies past M, N or K
    # (TMA writes zeros there).
    STAGE_BYTES: gl.constexpr = (NUM_WG * a_desc.block_type.nbytes
                                 + N_SPLIT * b_desc.block_type.nbytes)
    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    it = 0  # k-steps issued so far, over all tiles: picks stage and phase
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for ki in range(k_steps):
            s = it % STAGES
            # A fresh mbarrier counts as having finished the phase before
            # phase 0, so waiting on the opposite parity lets the first pass
            # through the ring go straight on.
            mbarrier.wait(empty.index(s), ((it // STAGES) & 1) ^ 1)
            bar = ready.index(s)
            mbarrier.expect(bar, STAGE_BYTES)
            k = ki * BLOCK_K
            for w in gl.static_range(NUM_WG):
                _tma_load(a_desc, [off_m + w * _ROWS, k], bar, a_smem.index(s * NUM_WG + w))
            for h in gl.static_range(N_SPLIT):
                _tma_load(b_desc, [k, off_n + h * MMA_N], bar, b_smem.index(s * N_SPLIT + h))
            it += 1


@gluon.jit
def _halves(x):
    """Split a [R, C] register tile into its left and right [R, C / 2]
    halves. Only renames registers: in the wgmma layout each thread holds
    pairs of columns spread over the whole width."""
    R: gl.constexpr = x.shape[0]
    C: gl.constexpr = x.shape[1]
    return gl.split(x.reshape([R, 2, C // 2]).permute((0, 2, 1)))


@gluon.jit
def _store_chunk(x, c_desc, c_smem, buf, row, col):
    """Write one 64 x EPI_N chunk to an epilogue buffer and TMA-store it."""
    # At most one store still pending (the other buffer's): the one that
    # last read this buffer, two chunks ago, is done.
    tma.store_wait(pendings=_EPI_BUFS - 1)
    dst = c_smem.index(buf)
    dst.store(x)
    # Make the generic-proxy writes visible to the TMA (async proxy).
    fence_async_shared()
    _tma_store(c_desc, [row, col], dst)


@gluon.jit
def _store_acc(acc, c_desc, c_smem, row, col, WG: gl.constexpr):
    """A 64 x 128 or 64 x 256 accumulator out in 64-column chunks, the
    chunks alternating between this warpgroup's two buffers."""
    W: gl.constexpr = acc.shape[1]
    out = acc.to(c_desc.dtype)
    b0: gl.constexpr = WG * _EPI_BUFS
    if W == 2 * _EPI_N:
        c0, c1 = _halves(out)
        _store_chunk(c0, c_desc, c_smem, b0, row, col)
        _store_chunk(c1, c_desc, c_smem, b0 + 1, row, col + _EPI_N)
    else:
        gl.static_assert(W == 4 * _EPI_N, "accumulators are 128 or 256 wide")
        lo, hi = _halves(out)
        c0, c1 = _halves(lo)
        c2, c3 = _halves(hi)
        _store_chunk(c0, c_desc, c_smem, b0, row, col)
        _store_chunk(c1, c_desc, c_smem, b0 + 1, row, col + _EPI_N)
        _store_chunk(c2, c_desc, c_smem, b0, row, col + 2 * _EPI_N)
        _store_chunk(c3, c_desc, c_smem, b0 + 1, row, col + 3 * _EPI_N)


@gluon.jit
def _consumer(c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K,
              WG: gl.constexpr, GROUP_M: gl.constexpr):
    """One warpgroup: rows [64 WG, 64 WG + 64) of every tile of this program.

    Walks the same tiles and k-steps in the same order as the loader, so
    the running count `it` names the same stage and phase on both sides.

    With N_SPLIT = 2 the 64 x BLOCK_N accumulator is two 64 x MMA_N halves,
    each fed by its own wgmma on its own half of B. Three consumers need it:
    their kernel has 16 warps (the loader's warpgroup counts in full), so
    ptxas compiles it for 65536 / 512 = 128 registers a thread, and it
    refuses any single instruction that needs more, whatever setmaxnreg
    grants later: an m64n256k16 wgmma holds all 128 accumulator registers
    and its descriptors at once (ptxas asks for 154). Two m64n128k16 need
    64 + a few each. The price: each half re-reads A from shared memory."""
    STAGES: gl.constexpr = ready.type.shape[0]
    NUM_WG: gl.constexpr = a_smem.type.shape[0] // STAGES
    N_SPLIT: gl.constexpr = b_smem.type.shape[0] // STAGES
    BLOCK_K: gl.constexpr = b_smem.type.shape[1]
    MMA_N: gl.constexpr = b_smem.type.shape[2]
    BLOCK_N: gl.constexpr = MMA_N * N_SPLIT
    BLOCK_M: gl.constexpr = _ROWS * NUM_WG
    # wgmma's accumulator layout: the warpgroup's 4 warps stacked along M
    # (16 rows each), one m64nMMA_Nk16 instruction per 16 of K.
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, MMA_N, 16])
    gl.static_assert(N_SPLIT == 1 or N_SPLIT == 2, "B comes in one or two slices")
    acc0 = gl.zeros([_ROWS, MMA_N], gl.float32, layout=acc_layout)
    acc1 = gl.zeros([_ROWS, MMA_N], gl.float32, layout=acc_layout)  # unused if N_SPLIT == 1

    num_pid_m = gl.cdiv(M, BLOCK_M)
    num_pid_n = gl.cdiv(N, BLOCK_N)
    k_steps = gl.cdiv(K, BLOCK_K)
    it = 0
    for tile in range(gl.program_id(0), num_pid_m * num_pid_n, gl.num_programs(0)):
        pid_m, pid_n = _tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        row = pid_m * BLOCK_M + WG * _ROWS
        off_n = pid_n * BLOCK_N
        for ki in range(k_steps):
            s = it % STAGES
            mbarrier.wait(ready.index(s), (it // STAGES) & 1)
            a = a_smem.index(s * NUM_WG + WG)
            # use_acc=False on the first k-step zeroes the accumulator: no
            # separate clear between tiles.
            acc0 = warpgroup_mma(a, b_smem.index(s * N_SPLIT), acc0, use_acc=ki > 0,
                                 is_async=True)
            if N_SPLIT == 2:
                acc1 = warpgroup_mma(a, b_smem.index(s * N_SPLIT + 1), acc1, use_acc=ki > 0,
                                     is_async=True)
            # Wait until only this step's wgmmas are pending: the previous
            # step's have read their stage, which goes back to the loader.
            if N_SPLIT == 2:
                acc0, acc1 = warpgroup_mma_wait(2, deps=(acc0, acc1))
            else:
                acc0 = warpgroup_mma_wait(1, deps=(acc0, ))
            mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES), pred=ki > 0)
            it += 1
        if N_SPLIT == 2:
            acc0, acc1 = warpgroup_mma_wait(0, deps=(acc0, acc1))
        else:
            acc0 = warpgroup_mma_wait(0, deps=(acc0, ))
        mbarrier.arrive(empty.index((it + STAGES - 1) % STAGES))
        # From here the loader is already filling the ring for the next tile.
        if row < M:  # the last M tile's third warpgroup can lie wholly past M
            _store_acc(acc0, c_desc, c_smem, row, off_n, WG)
            if N_SPLIT == 2:
                _store_acc(acc1, c_desc, c_smem, row, off_n + MMA_N, WG)
    tma.store_wait(pendings=0)


# Worker partitions take no constexpr arguments in Triton 3.6 (and a
# partition function cannot be one), so each (num_wg, group_m) gets its own
# kernel whose consumer functions have the constants baked in; the rest
# (STAGES, N_SPLIT, tile sizes) they read off the shapes of their buffers.
@functools.cache
def matmul_ws_kernel(num_wg: int = 3, group_m: int = 8):
    assert num_wg in CONSUMER_REGS, num_wg
    NUM_WG = gl.constexpr(num_wg)
    GROUP_M = gl.constexpr(group_m)
    REGS = gl.constexpr(CONSUMER_REGS[num_wg])
    LOAD_REGS = gl.constexpr(LOADER_REGS)

    def consumer(wg: int):
        WG = gl.constexpr(wg)

        def run(c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K):
            _consumer(c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K, WG, GROUP_M)
        # Its own name: Triton names a compiled function by the Python one,
        # not by the constants it closes over, so three `run`s would be one.
        run.__name__ = run.__qualname__ = f"consumer{wg}"
        return gluon.jit(run)

    consumer0, consumer1, consumer2 = consumer(0), consumer(1), consumer(2)

    def loader(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K):
        _loader(a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K, GROUP_M)
    loader.__name__ = loader.__qualname__ = "loader"
    loader = gluon.jit(loader)

    @gluon.jit
    def matmul_ws(a_desc, b_desc, c_desc, M, N, K, STAGES: gl.constexpr,
                  N_SPLIT: gl.constexpr):
        BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
        MMA_N: gl.constexpr = b_desc.block_type.shape[1]
        dtype: gl.constexpr = a_desc.dtype
        # Stage s holds A slices s * NUM_WG + w (64 x BLOCK_K each: TMA
        # boxes must be powers of two, so no 192-row box) and B slices
        # s * N_SPLIT + h (BLOCK_K x MMA_N).
        a_smem = gl.allocate_shared_memory(dtype, [STAGES * NUM_WG, _ROWS, BLOCK_K], a_desc.layout)
        b_smem = gl.allocate_shared_memory(dtype, [STAGES * N_SPLIT, BLOCK_K, MMA_N], b_desc.layout)
        c_smem = gl.allocate_shared_memory(dtype, [NUM_WG * _EPI_BUFS, _ROWS, _EPI_N], c_desc.layout)
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)  # the loader's expect
            mbarrier.init(empty.index(i), count=NUM_WG)  # every consumer releases
        fence_async_shared()

        args = (c_desc, a_smem, b_smem, c_smem, ready, empty, M, N, K)
        load_args = (a_desc, b_desc, a_smem, b_smem, ready, empty, M, N, K)
        # Warpgroup 0 is the default partition (the kernel's 4 warps), the
        # other consumers 4-warp workers, the loader a 1-warp worker.
        if NUM_WG == 2:
            gl.warp_specialize([(consumer0, args), (consumer1, args), (loader, load_args)],
                               [4, 1], [REGS, LOAD_REGS])
        else:
            gl.warp_specialize([(consumer0, args), (consumer1, args), (consumer2, args),
                                (loader, load_args)], [4, 4, 1], [REGS, REGS, LOAD_REGS])

    return matmul_ws


def mma_n(num_wg: int, block_n: int) -> int:
    """Width of one wgmma: the whole tile with two consumers, at most 128
    with three (see _consumer)."""
    return block_n if num_wg == 2 else min(block_n, 128)


def smem_bytes(num_wg: int, stages: int, block_n: int = 256, block_k: int = 64,
               elem: int = 2) -> int:
    """Shared memory the kernel allocates, less the barriers and captures."""
    ring = stages * (ROWS * num_wg + block_n) * block_k * elem
    return ring + num_wg * EPI_BUFS * ROWS * EPI_N * elem


def max_stages(num_wg: int, block_n: int = 256, block_k: int = 64) -> int:
    s = 2
    while smem_bytes(num_wg, s + 1, block_n, block_k) + SMEM_SLACK <= SMEM_LIMIT:
        s += 1
    return s


def default_stages(num_wg: int, block_n: int = 256, block_k: int = 64) -> int:
    return min(4, max_stages(num_wg, block_n, block_k))


def shared_layout(dtype, block):
    gl_dtype = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]
    return gl.NVMMASharedLayout.get_default_for(block, gl_dtype)


def supported(a, b, c, num_wg: int = 3, stages: int | None = None, block_n: int = 256,
              block_k: int = 64) -> bool:
    """True where this kernel applies (the caller has checked for sm_90)."""
    if a.dtype not in (torch.float16, torch.bfloat16) or not (a.dtype == b.dtype == c.dtype):
        return False
    if a.ndim != 2 or b.ndim != 2 or c.ndim != 2:
        return False
    M, K = a.shape
    if b.shape[0] != K or tuple(c.shape) != (M, b.shape[1]) or min(M, K, b.shape[1]) == 0:
        return False
    if num_wg not in CONSUMER_REGS or block_n not in (128, 256) or block_k not in (32, 64):
        return False
    stages = stages or default_stages(num_wg, block_n, block_k)
    if stages < 2 or smem_bytes(num_wg, stages, block_n, block_k) + SMEM_SLACK > SMEM_LIMIT:
        return False
    # TMA: contiguous rows, 16-byte aligned base and row strides.
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 and t.shape[1] % 8 == 0
               for t in (a, b, c))


def num_tiles(M: int, N: int, num_wg: int = 3, block_n: int = 256) -> int:
    return triton.cdiv(M, ROWS * num_wg) * triton.cdiv(N, block_n)


def prepare(a, b, c, num_wg: int = 3, stages: int | None = None, persistent: bool = True,
            block_n: int = 256, block_k: int = 64, group_m: int = 8,
            num_programs: int | None = None):
    """A zero-argument function that computes c = a @ b: the descriptors
    built once, so timing it times the kernel, not Python.

    persistent: one program per SM (or num_programs of them) striding
    through the tiles; otherwise one program per tile."""
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    stages = stages or default_stages(num_wg, block_n, block_k)
    assert supported(a, b, c, num_wg, stages, block_n, block_k), (
        tuple(a.shape), tuple(b.shape), a.dtype, num_wg, stages, block_n)
    M, K = a.shape
    N = b.shape[1]

    def desc(t, block):
        # Over the real shape: TMA zero-fills loads and clips stores past it.
        return TensorDescriptor(t, list(t.shape), list(t.stride()), block,
                                shared_layout(t.dtype, block))

    tiles = num_tiles(M, N, num_wg, block_n)
    if persistent:
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count
        grid = min(tiles, num_programs or sms)
    else:
        grid = tiles
    mn = mma_n(num_wg, block_n)
    kernel = matmul_ws_kernel(num_wg, group_m)[(grid, )]
    args = (desc(a, [ROWS, block_k]), desc(b, [block_k, mn]), desc(c, [ROWS, EPI_N]), M, N, K)

    def run():
        kernel(*args, STAGES=stages, N_SPLIT=block_n // mn, num_warps=4)

    return run


def launch(a, b, c, num_wg: int = 3, stages: int | None = None, persistent: bool = True,
           block_n: int = 256, block_k: int = 64, group_m: int = 8,
           num_programs: int | None = None) -> None:
    """c = a @ b (see prepare)."""
    prepare(a, b, c, num_wg, stages, persistent, block_n, block_k, group_m, num_programs)()


# ---------------------------------------------------------------- GPU check
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096),
                (8192, 4096, 14336)]
RAGGED_SHAPES = [(1000, 1096, 520), (8, 136, 24)]


def variants():
    """(name, launch kwargs) for every schedule worth timing: two or three
    consumers, 3 or 4 stages where they fit, persistent or one tile each."""
    out = []
    for num_wg in (2, 3):
        for stages in (3, 4):
            if stages > max_stages(num_wg):
                continue
            for persistent in (True, False):
                name = f"wg{num_wg}-s{stages}-{'pers' if persistent else 'tile'}"
                out.append((name, {"num_wg": num_wg, "stages": stages,
                                   "persistent": persistent}))
    return out


def rel_err(c, ref) -> float:
    """max |c - ref| / max |ref|; a NaN left in c (it was poisoned) is inf."""
    if torch.isnan(c).any():
        return float("inf")
    return float((c.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6))


def _check(dtype, M, N, K, a, b, c, ref, name, kw, extra=None):
    """Run one variant once on a NaN-poisoned c; the row, with err or error."""
    row = {"dtype": str(dtype).replace("torch.", ""), "M": M, "N": N, "K": K,
           "variant": name, **kw, **(extra or {})}
    try:
        c.fill_(float("nan"))
        fn = prepare(a, b, c, **kw)
        fn()
        torch.cuda.synchronize()
        row["err"] = rel_err(c, ref)
        return row, fn
    except Exception as e:  # one failing variant must not stop the rest
        row["error"] = f"{type(e).__name__}: {e}"[:500]
        return row, None


def main(argv: list[str]) -> int:
    import json
    import os
    import time

    from triton.testing import do_bench

    path = argv[1] if len(argv) > 1 else os.path.join(os.environ.get("OUT", "."),
                                                      "matmul_gluon.json")
    assert torch.cuda.get_device_capability() == (9, 0), "needs an sm_90 GPU"
    torch.manual_seed(0)
    t0 = time.time()
    rows = []
    head = (f"{'dtype':8} {'M':>5} {'N':>5} {'K':>5} {'variant':14} {'ms':>7} {'TFLOP/s':>7} "
            f"{'xcuBLAS':>7} {'tiles':>5} {'err':>7}")
    print(head, flush=True)
    for dtype in (torch.bfloat16, torch.float16):
        dname = str(dtype).replace("torch.", "")
        for M, N, K in BENCH_SHAPES:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            flop = 2 * M * N * K
            # cuBLAS before and after the variants: the mean is the baseline,
            # and the two show how far the clocks drifted under the power cap.
            def cublas(a=a, b=b, c=c):
                torch.matmul(a, b, out=c)

            before = do_bench(cublas)
            results = []
            for name, kw in variants():
                row, fn = _check(dtype, M, N, K, a, b, c, ref, name, kw,
                                 {"tiles": num_tiles(M, N, kw["num_wg"])})
                if fn is not None:
                    try:
                        row["ms"] = do_bench(fn)
                    except Exception as e:
                        row["error"] = f"{type(e).__name__}: {e}"[:500]
                results.append(row)
            after = do_bench(cublas)
            base = (before + after) / 2
            rows.append({"dtype": dname, "M": M, "N": N, "K": K, "variant": "cublas",
                         "ms": base, "ms_before": before, "ms_after": after,
                         "tflops": flop / base * 1e-9, "ratio": 1.0})
            print(f"{dname:8} {M:5} {N:5} {K:5} {'cublas':14} {base:7.3f} "
                  f"{flop / base * 1e-9:7.1f} {1.0:7.3f}  (before {before:.3f}, "
                  f"after {after:.3f})", flush=True)
            for row in results:
                if "ms" in row:
                    row["tflops"] = flop / row["ms"] * 1e-9
                    row["ratio"] = base / row["ms"]  # > 1: faster than cuBLAS
                    bad = "" if row["err"] < 1e-2 else "  WRONG"
                    print(f"{dname:8} {M:5} {N:5} {K:5} {row['variant']:14} {row['ms']:7.3f} "
                          f"{row['tflops']:7.1f} {row['ratio']:7.3f} {row['tiles']:5} "
                          f"{row['err']:7.1e}{bad}", flush=True)
                else:
                    print(f"{dname:8} {M:5} {N:5} {K:5} {row['variant']:14} FAILED "
                          f"{row.get('error', '')[:300]}", flush=True)
                rows.append(row)
            del a, b, c, ref
    # Ragged shapes, every edge partial, and few programs for many tiles
    # (each program walks several): correctness only.
    for dtype in (torch.bfloat16, torch.float16):
        for M, N, K in RAGGED_SHAPES:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
            c = torch.empty(M, N, device="cuda", dtype=dtype)
            ref = a.float() @ b.float()
            cases = variants() + [(f"{n}-p7", dict(kw, num_programs=7))
                                  for n, kw in variants() if kw["persistent"]]
            for name, kw in cases:
                row, _ = _check(dtype, M, N, K, a, b, c, ref, name, kw, {"ragged": True})
                if "err" in row:
                    print(f"ragged {row['dtype']:8} {M}x{N}x{K} {name:14} err {row['err']:.1e}"
                          + ("" if row["err"] < 1e-2 else "  WRONG"), flush=True)
                else:
                    print(f"ragged {row['dtype']:8} {M}x{N}x{K} {name:14} FAILED "
                          f"{row['error'][:300]}", flush=True)
                rows.append(row)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(rows, f, indent=1)
    print(f"wrote {len(rows)} rows to {path} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv))
