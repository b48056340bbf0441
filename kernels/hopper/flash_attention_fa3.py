"""FlashAttention-3-style forward for Hopper (sm_90), written in Gluon.

The Triton kernel in flash_attention.py is the lesson: one instruction stream
per program, and the compiler decides how the two matmuls and the softmax
overlap. On Hopper that leaves the tensor cores idle while the softmax runs
(the exponentials go through the MUFU unit, ~16 per clock per SM, against
the tensor cores' ~4096 FLOP per clock). FlashAttention-3 closes the gap with
three schedules that Triton 3.6 cannot express, so this file writes them by
hand in Gluon, Triton's dialect where warps, barriers and wgmma waits are
explicit:

1. Warp specialisation. One warp only issues TMA copies of K and V into a
   ring of shared-memory stages; the consumer warpgroups only compute.
   Ready/empty mbarriers hand each stage over.
2. Ping-pong. The program owns 64 query rows per consumer warpgroup (two
   or three of them), and one mbarrier per warpgroup makes them take turns
   issuing their matmuls, so one warpgroup's softmax runs while another's
   wgmmas keep the tensor cores busy (optional: on the H200 it moved
   results a few percent either way; SCHEDULES says where it is on).
3. Intra-warpgroup overlap. Each warpgroup issues S_j = Q K_j^T and
   O += P_{j-1} V_{j-1} together, asynchronously, then waits only for S_j,
   so its softmax of tile j runs while P_{j-1} V_{j-1} is still in flight.

Only for sm_90 (wgmma is Hopper's), bf16/fp16, head dim 64 or 128,
contiguous (B, H, S, D) tensors with S a multiple of the tiles;
flash_attention.py decides. Gluon
has no interpreter, so the CPU tests compile this file for sm_90 and check
the PTX; the numbers are checked on the GPU (tests marked gpu).
"""
from __future__ import annotations

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

LOG2E = 1.4426950408889634

# Gluon renamed the TMA copies after Triton 3.6 (async_load/async_store);
# take whichever this release has.
_tma_load = getattr(tma, "async_load", None) or tma.async_copy_global_to_shared
_tma_store = getattr(tma, "async_store", None) or tma.async_copy_shared_to_global

# The schedule per (head dim, causal), chosen on an H200 with
# scripts/sweeps/sweep_attention.py (family fa3) and scripts/research/fa3_probe.py:
#   num_wg    consumer warpgroups of 64 query rows each. Three at D = 64,
#             as FlashAttention-3 does: there the softmax takes as long as
#             both matmuls, and a third warpgroup keeps the tensor cores fed
#             (1.07 against 1.25 ms at B4 H32 S4096; 0.67 against 0.72 ms
#             causal). Three get 160 registers a thread: enough for causal
#             only with the split loops (see _attend), and too few for
#             D = 128's 64 x 128 accumulator.
#   block_n   keys per tile: 128 keeps each wgmma long (64 lost 10-20%).
#   stages    depth of the K/V ring: at D = 128 two stages of K and V are
#             2 x 2 x 128 x 128 x 2 bytes = 128 KiB, which with Q and the
#             output staging fills most of the 227 KiB of shared memory.
#             At D = 64 two, three and four were within 3% of each other.
#   pingpong  the warpgroups take turns issuing their matmuls: +2-5% for
#             three warpgroups, a few percent either way for two.
#   lpt       causal launch order: heads in L2-sized groups, longest row
#             blocks first (see _setup). +8% at D64 S4096, +1-3% elsewhere.
#   poly      one exp2 in `poly` by the polynomial above; it lost 0-15%.
SCHEDULES = {
    (64, False): {"num_wg": 3, "block_n": 128, "stages": 2, "pingpong": True, "poly": 0},
    (64, True): {"num_wg": 3, "block_n": 128, "stages": 2, "pingpong": True, "poly": 0,
                 "lpt": True},
    (128, False): {"num_wg": 2, "block_n": 128, "stages": 2, "pingpong": False, "poly": 0},
    (128, True): {"num_wg": 2, "block_n": 128, "stages": 2, "pingpong": True, "poly": 0,
                  "lpt": True},
}


@gluon.jit
def _loader(k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty,
            kv_row0, n_tiles):
    """One warp: TMA-copy K_j then V_j into stage j % STAGES once it is free."""
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    for j in range(n_tiles):
        s = j % STAGES
        # A fresh mbarrier counts as having finished the phase before phase 0,
        # so waiting on the opposite parity lets the first pass through the
        # ring go straight on.
        free_phase = ((j // STAGES) & 1) ^ 1
        row = kv_row0 + j * BLOCK_N
        mbarrier.wait(k_empty.index(s), free_phase)
        mbarrier.expect(k_ready.index(s), k_desc.block_type.nbytes)
        _tma_load(k_desc, [row, 0], k_ready.index(s), k_smem.index(s))
        mbarrier.wait(v_empty.index(s), free_phase)
        mbarrier.expect(v_ready.index(s), v_desc.block_type.nbytes)
        _tma_load(v_desc, [row, 0], v_ready.index(s), v_smem.index(s))


@gluon.jit
def _wait_turn(turn, i, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """Block until it is this warpgroup's i-th turn to issue matmuls.

    Round robin: warpgroup w arrives on turn[w + 1] (the last on turn[0])
    once its matmuls are issued. Warpgroup 0 goes first: its i-th turn needs
    i arrivals from the last warpgroup; warpgroup w > 0 needs i + 1 arrivals
    from warpgroup w - 1. None can run two turns ahead, so parity waits
    suffice.
    """
    if PINGPONG:
        if WG == 0:
            mbarrier.wait(turn.index(0), (i & 1) ^ 1)
        else:
            mbarrier.wait(turn.index(WG), i & 1)


@gluon.jit
def _end_turn(turn, WG: gl.constexpr, PINGPONG: gl.constexpr):
    """This warpgroup's matmuls are issued: the next one may issue its own."""
    if PINGPONG:
        mbarrier.arrive(turn.index((WG + 1) % turn.type.shape[0]))


# 2^x by a degree-3 polynomial on the FMA pipe (FlashAttention-4's trick), in
# PTX: x clamped at -126; adding 1.5 * 2^23 rounds it to n and leaves n in the
# low mantissa bits; f = x - n in [-1/2, 1/2]; 2^f by a minimax cubic (max
# relative error 7.5e-5 against exp2, far under the bf16 rounding of P that
# follows); n shifted into the exponent field. scripts/sweeps/sweep_attention.py's
# _exp2_poly is the same algorithm in Triton, with its derivation.
# Its PTX in three pieces, around the input and output registers: the asm
# strings below are expressions of constants, which gpulab's replay keeps
# with the kernels (it runs no Python function to build them). For pack = n:
# the polynomial on $n into $0, then MUFU's ex2 of $n+i into $i, i = 1..n-1.
_POLY_IN = "max.f32 x, "
_POLY_MID = """, 0fC2FC0000;
add.rn.f32 xr, x, 0f4B400000;
sub.rn.f32 f, xr, 0f4B400000;
sub.rn.f32 f, x, f;
fma.rn.f32 y, f, 0f3D61FBC6, 0f3E786F1A;
fma.rn.f32 y, y, f, 0f3F31798D;
fma.rn.f32 y, y, f, 0f3F7FFB49;
mov.b32 bx, xr;
shl.b32 bx, bx, 23;
mov.b32 by, y;
add.s32 by, by, bx;
mov.b32 """
_POLY_OUT = ", by;\n"
_ASM_HEAD = "{\n.reg .f32 x, xr, f, y;\n.reg .b32 bx, by;\n\n" + _POLY_IN
_EX2 = "\nex2.approx.ftz.f32 "


_EXP2_ASM_2 = gl.constexpr(_ASM_HEAD + "$2" + _POLY_MID + "$0" + _POLY_OUT
                           + _EX2 + "$1, $3;" + "\n}")
_EXP2_ASM_4 = gl.constexpr(_ASM_HEAD + "$4" + _POLY_MID + "$0" + _POLY_OUT
                           + _EX2 + "$1, $5;" + _EX2 + "$2, $6;" + _EX2 + "$3, $7;" + "\n}")
_EXP2_ASM_8 = gl.constexpr(_ASM_HEAD + "$8" + _POLY_MID + "$0" + _POLY_OUT
                           + _EX2 + "$1, $9;" + _EX2 + "$2, $10;" + _EX2 + "$3, $11;"
                           + _EX2 + "$4, $12;" + _EX2 + "$5, $13;" + _EX2 + "$6, $14;"
                           + _EX2 + "$7, $15;" + "\n}")


@gluon.jit
def _exp2(x, POLY: gl.constexpr):
    """exp2 of a tile; with POLY = n, one element in n goes to the FMA pipe.

    MUFU does ~16 exp2 per clock per SM against the tensor cores' ~4096
    FLOP: at D = 64 a score's exp2 takes as long as its 256 FLOP of matmul,
    so moving a share of them to the (otherwise idle) FMA pipe can pay.
    """
    if POLY == 2:
        return gl.inline_asm_elementwise(_EXP2_ASM_2, "=f,=f,f,f", [x], dtype=gl.float32,
                                         is_pure=True, pack=2)
    elif POLY == 4:
        return gl.inline_asm_elementwise(_EXP2_ASM_4, "=f,=f,=f,=f,f,f,f,f", [x],
                                         dtype=gl.float32, is_pure=True, pack=4)
    elif POLY == 8:
        return gl.inline_asm_elementwise(_EXP2_ASM_8, "=f,=f,=f,=f,=f,=f,=f,=f,f,f,f,f,f,f,f,f", [x],
                                         dtype=gl.float32, is_pure=True, pack=8)
    else:
        return gl.exp2(x)


@gluon.jit
def _softmax(s, m_i, l_i, qk_scale, offs_m, start_n, MASKED: gl.constexpr,
             s_layout: gl.constexpr, BLOCK_N: gl.constexpr, POLY: gl.constexpr):
    """Online softmax of one score tile: returns p (fp32), new m, new l, alpha."""
    if MASKED:  # the causal diagonal
        offs_n = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        keep = gl.expand_dims(offs_m, 1) >= gl.expand_dims(offs_n, 0)
        s = gl.where(keep, s * qk_scale, -1.0e6)
        m_new = gl.maximum(m_i, gl.max(s, axis=1))
        s = s - gl.expand_dims(m_new, 1)
    else:
        # scale the row maxima, not the tile: scale-and-subtract is one FMA
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        s = s * qk_scale - gl.expand_dims(m_new, 1)
    p = _exp2(s, POLY)
    alpha = gl.exp2(m_i - m_new)  # 0 on the first tile (m_i = -inf)
    l_i = l_i * alpha + gl.sum(p, axis=1)
    return p, m_new, l_i, alpha


@gluon.jit
def _kv_loop(acc, p, m_i, l_i, my_q, s_zero, k_smem, v_smem, k_ready, v_ready, k_empty,
             v_empty, turn, offs_m, qk_scale, n_full, lo, hi, WG: gl.constexpr,
             PINGPONG: gl.constexpr, POLY: gl.constexpr, MASK: gl.constexpr):
    """Steps lo..hi-1: S_j = Q K_j^T and O += P_{j-1} V_{j-1} issued together,
    the softmax of tile j under the second. MASK: 0 never, 1 always, 2 from
    tile n_full on (a branch per tile)."""
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    s_layout: gl.constexpr = s_zero.type.layout
    o_layout: gl.constexpr = acc.type.layout
    for j in range(lo, hi):
        s_idx = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_ready.index(s_idx), (j // STAGES) & 1)
        mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
        _wait_turn(turn, j, WG, PINGPONG)
        s = warpgroup_mma(my_q, k_smem.index(s_idx).permute((1, 0)), s_zero, use_acc=False,
                          is_async=True)
        acc = warpgroup_mma(p, v_smem.index(prev), acc, is_async=True)
        _end_turn(turn, WG, PINGPONG)
        # S_j was issued first, so it is done once at most one group is left.
        s = warpgroup_mma_wait(1, deps=(s, ))
        mbarrier.arrive(k_empty.index(s_idx))
        if MASK == 2:
            if j >= n_full:
                p_next, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N,
                                                   True, s_layout, BLOCK_N, POLY)
            else:
                p_next, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N,
                                                   False, s_layout, BLOCK_N, POLY)
        else:
            p_next, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, j * BLOCK_N,
                                               MASK == 1, s_layout, BLOCK_N, POLY)
        acc, p = warpgroup_mma_wait(0, deps=(acc, p))
        mbarrier.arrive(v_empty.index(prev))
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p = gl.convert_layout(p_next.to(p.dtype), p.type.layout)
    return acc, p, m_i, l_i


@gluon.jit
def _consumer(args, WG: gl.constexpr, PINGPONG: gl.constexpr, POLY: gl.constexpr,
              SPLIT: gl.constexpr):
    """One warpgroup: 64 query rows against every K/V tile of the ring
    (`args`: what _setup made).

    With three warpgroups (192 rows) the last row block of a head can be
    short: a warpgroup whose rows all lie past Sq only hands the stages
    back, so the loader and the others never wait for it.
    """
    (q_desc, o_desc, q_smem, o_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
     k_empty, v_empty, turn, q_row, q_pos, Sq, n_tiles, n_full, qk_scale) = args
    if q_pos + WG * 64 < Sq:
        _attend(q_desc, o_desc, q_smem, o_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
                k_empty, v_empty, turn, q_row, q_pos, n_tiles, n_full, qk_scale,
                WG, PINGPONG, POLY, SPLIT)
    else:
        _drain(k_smem, k_ready, v_ready, k_empty, v_empty, turn, n_tiles, WG, PINGPONG)


@gluon.jit
def _drain(k_smem, k_ready, v_ready, k_empty, v_empty, turn, n_tiles,
           WG: gl.constexpr, PINGPONG: gl.constexpr):
    STAGES: gl.constexpr = k_smem.type.shape[0]
    for j in range(n_tiles):
        mbarrier.wait(k_ready.index(j % STAGES), (j // STAGES) & 1)
        _wait_turn(turn, j, WG, PINGPONG)
        _end_turn(turn, WG, PINGPONG)
        mbarrier.arrive(k_empty.index(j % STAGES))
        mbarrier.wait(v_ready.index(j % STAGES), (j // STAGES) & 1)
        mbarrier.arrive(v_empty.index(j % STAGES))
    _wait_turn(turn, n_tiles, WG, PINGPONG)
    _end_turn(turn, WG, PINGPONG)


@gluon.jit
def _attend(q_desc, o_desc, q_smem, o_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
            k_empty, v_empty, turn, q_row, q_pos, n_tiles, n_full, qk_scale,
            WG: gl.constexpr, PINGPONG: gl.constexpr, POLY: gl.constexpr, SPLIT: gl.constexpr):
    """The FlashAttention-2 loop of flash_attention.py for 64 rows, with the
    loads taken from the ring and the two matmuls of each step in flight
    together: step j issues S_j = Q K_j^T and O += P_{j-1} V_{j-1}, waits
    for S_j only, and runs the softmax of tile j under P_{j-1} V_{j-1}."""
    ROWS: gl.constexpr = 64
    STAGES: gl.constexpr = k_smem.type.shape[0]
    BLOCK_N: gl.constexpr = k_smem.type.shape[1]
    HEAD_DIM: gl.constexpr = k_smem.type.shape[2]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HEAD_DIM, 16])
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_layout: gl.constexpr = gl.SliceLayout(1, s_layout)

    my_q = q_smem.index(WG)
    mbarrier.expect(q_bar.index(WG), q_desc.block_type.nbytes)
    _tma_load(q_desc, [q_row + WG * ROWS, 0], q_bar.index(WG), my_q)
    offs_m = q_pos + WG * ROWS + gl.arange(0, ROWS, layout=row_layout)

    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=row_layout)
    l_i = gl.zeros([ROWS], gl.float32, layout=row_layout)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    mbarrier.wait(q_bar.index(WG), 0)

    # Tile 0: S_0 alone (there is no P_{-1} to multiply yet).
    mbarrier.wait(k_ready.index(0), 0)
    _wait_turn(turn, 0, WG, PINGPONG)
    s = warpgroup_mma(my_q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
    _end_turn(turn, WG, PINGPONG)
    s = warpgroup_mma_wait(0, deps=(s, ))
    mbarrier.arrive(k_empty.index(0))
    if n_full == 0:  # causal, first row block: tile 0 is the diagonal
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, 0, True, s_layout, BLOCK_N, POLY)
    else:
        p, m_i, l_i, alpha = _softmax(s, m_i, l_i, qk_scale, offs_m, 0, False, s_layout, BLOCK_N, POLY)
    p = gl.convert_layout(p.to(dtype), p_layout)

    if SPLIT:
        # Tiles left of the diagonal need no mask, the diagonal ones do: two
        # loops, each compiled for its own case, so the unmasked one never
        # holds the mask's registers (three warpgroups at 160 registers
        # spill otherwise). With two warpgroups one loop that branches per
        # tile measured 5-7% faster on the causal shapes, so SCHEDULES says.
        split = gl.maximum(gl.minimum(n_full, n_tiles), 1)
        acc, p, m_i, l_i = _kv_loop(acc, p, m_i, l_i, my_q, s_zero, k_smem, v_smem, k_ready,
                                    v_ready, k_empty, v_empty, turn, offs_m, qk_scale, n_full,
                                    1, split, WG, PINGPONG, POLY, 0)
        acc, p, m_i, l_i = _kv_loop(acc, p, m_i, l_i, my_q, s_zero, k_smem, v_smem, k_ready,
                                    v_ready, k_empty, v_empty, turn, offs_m, qk_scale, n_full,
                                    split, n_tiles, WG, PINGPONG, POLY, 1)
    else:
        acc, p, m_i, l_i = _kv_loop(acc, p, m_i, l_i, my_q, s_zero, k_smem, v_smem, k_ready,
                                    v_ready, k_empty, v_empty, turn, offs_m, qk_scale, n_full,
                                    1, n_tiles, WG, PINGPONG, POLY, 2)

    last = (n_tiles - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n_tiles - 1) // STAGES) & 1)
    _wait_turn(turn, n_tiles, WG, PINGPONG)
    acc = warpgroup_mma(p, v_smem.index(last), acc, is_async=True)
    _end_turn(turn, WG, PINGPONG)
    acc, p = warpgroup_mma_wait(0, deps=(acc, p))
    mbarrier.arrive(v_empty.index(last))

    out = acc / gl.expand_dims(gl.convert_layout(l_i, gl.SliceLayout(1, o_layout)), 1)
    my_o = o_smem.index(WG)
    my_o.store(out.to(dtype))
    fence_async_shared()
    _tma_store(o_desc, [q_row + WG * ROWS, 0], my_o)
    tma.store_wait(pendings=0)


@gluon.jit
def _setup(q_desc, k_desc, v_desc, o_desc, Sq, Sk, qk_scale, G,
           CAUSAL: gl.constexpr, STAGES: gl.constexpr, NUM_WG: gl.constexpr):
    """This program's rows and tiles, its shared memory and barriers."""
    BLOCK_M: gl.constexpr = 64 * NUM_WG
    BLOCK_N: gl.constexpr = k_desc.block_type.shape[0]
    HEAD_DIM: gl.constexpr = k_desc.block_type.shape[1]
    dtype: gl.constexpr = q_desc.dtype

    # One flat grid over (head, row block). Programs run roughly in launch
    # order, so with a causal mask (a row block's work grows with its
    # position) the longest blocks go first and the short ones fill the
    # last wave. Heads go in groups of G whose K and V stay in L2 while
    # their blocks run: the longest block of each of G heads, then the
    # next longest of each, and so on (FlashAttention-3's LPT scheduler).
    # G = 1 is head after head.
    n_blocks = gl.cdiv(Sq, BLOCK_M)
    pid = gl.program_id(0)
    group = pid // (G * n_blocks)
    heads = gl.minimum(G, gl.num_programs(0) // n_blocks - group * G)
    idx = pid - group * G * n_blocks
    bh = group * G + idx % heads
    block = idx // heads
    if CAUSAL:
        block = n_blocks - 1 - block
    q_pos = block * BLOCK_M
    q_row = bh * Sq + q_pos
    kv_row0 = bh * Sk
    if CAUSAL:  # Sq == Sk
        n_tiles = gl.minimum((q_pos + BLOCK_M + BLOCK_N - 1) // BLOCK_N, Sk // BLOCK_N)
        n_full = q_pos // BLOCK_N  # tiles wholly left of the diagonal
    else:
        n_tiles = Sk // BLOCK_N
        n_full = n_tiles

    q_smem = gl.allocate_shared_memory(dtype, [NUM_WG, 64, HEAD_DIM], q_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [NUM_WG, 64, HEAD_DIM], o_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [NUM_WG, 1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_WG):
        mbarrier.init(q_bar.index(i), count=1)
        mbarrier.init(turn.index(i), count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=NUM_WG)  # every warpgroup releases a stage
        mbarrier.init(v_empty.index(i), count=NUM_WG)
    fence_async_shared()

    args = (q_desc, o_desc, q_smem, o_smem, k_smem, v_smem, q_bar, k_ready, v_ready,
            k_empty, v_empty, turn, q_row, q_pos, Sq, n_tiles, n_full, qk_scale)
    load_args = (k_desc, v_desc, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty,
                 kv_row0, n_tiles)
    return args, load_args


@gluon.jit
def attention_fa3(q_desc, k_desc, v_desc, o_desc, Sq, Sk, qk_scale, G,
                  CAUSAL: gl.constexpr, STAGES: gl.constexpr, NUM_WG: gl.constexpr = 2,
                  PINGPONG: gl.constexpr = True, POLY: gl.constexpr = 0,
                  SPLIT: gl.constexpr = False):
    """The kernel: NUM_WG consumer warpgroups and a loader warp (SCHEDULES
    says which schedule each shape takes)."""
    args, load_args = _setup(q_desc, k_desc, v_desc, o_desc, Sq, Sk, qk_scale, G,
                             CAUSAL, STAGES, NUM_WG)
    # Warpgroup 0 is the default partition (the kernel's 4 warps), the
    # other consumer warpgroups 4-warp workers, the loader a 1-warp
    # worker. setmaxnreg hands registers out by warpgroup, 64K in all:
    # the loader's gets 24 a thread, two consumers 240 each, three 160.
    # Each consumer is _consumer with its warpgroup's constants.
    if NUM_WG == 2:
        gl.warp_specialize([(_consumer, (args, 0, PINGPONG, POLY, SPLIT)),
                            (_consumer, (args, 1, PINGPONG, POLY, SPLIT)),
                            (_loader, load_args)], [4, 1], [240, 24])
    else:
        gl.warp_specialize([(_consumer, (args, 0, PINGPONG, POLY, SPLIT)),
                            (_consumer, (args, 1, PINGPONG, POLY, SPLIT)),
                            (_consumer, (args, 2, PINGPONG, POLY, SPLIT)),
                            (_loader, load_args)], [4, 4, 1], [160, 160, 24])


def shared_layout(dtype, block):
    gl_dtype = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}[dtype]
    return gl.NVMMASharedLayout.get_default_for(block, gl_dtype)


def supported(q, k, v, o, causal: bool) -> bool:
    """True where this kernel applies (the caller has checked for sm_90)."""
    D = q.shape[3]
    if (D, causal) not in SCHEDULES or q.dtype not in (torch.float16, torch.bfloat16):
        return False
    sched = SCHEDULES[D, causal]
    # Each warpgroup's 64 rows are all in or all out (see _consumer); two
    # warpgroups need whole 128-row blocks.
    if q.shape[2] % (64 if sched["num_wg"] == 3 else 128) or k.shape[2] % sched["block_n"]:
        return False
    return all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v, o))


def launch(q, k, v, o, causal: bool, sm_scale: float, schedule: dict | None = None) -> None:
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    sched = dict(SCHEDULES[D, causal], **(schedule or {}))
    bn, num_wg = sched["block_n"], sched["num_wg"]

    def desc(t, rows, box):
        block = [box, D]
        return TensorDescriptor(t, [rows, D], [D, 1], block, shared_layout(t.dtype, block))

    # Three warpgroups (160 registers each) need the split loops on causal
    # shapes, where the mask's registers made one loop spill; two do not.
    split = sched.get("split", num_wg == 3 and causal)
    n_blocks = triton.cdiv(Sq, 64 * num_wg)
    attention_fa3[(n_blocks * B * H, )](
        desc(q, B * H * Sq, 64), desc(k, B * H * Sk, bn), desc(v, B * H * Sk, bn),
        desc(o, B * H * Sq, 64), Sq, Sk, sm_scale * LOG2E,
        heads_per_group(sched.get("lpt", False), B * H, Sk, D, q.element_size()),
        CAUSAL=causal, STAGES=sched["stages"], NUM_WG=num_wg, PINGPONG=sched["pingpong"],
        POLY=sched["poly"], SPLIT=split, num_warps=4,
    )


L2_SHARE = 32 << 20  # bytes of K and V to keep in L2 at once: the H200 has 50 MiB


def heads_per_group(lpt: bool | int, heads: int, Sk: int, D: int, elt: int) -> int:
    """G for the kernel's launch order: 1 (head after head) unless `lpt`,
    then as many heads as have their K and V fit in L2_SHARE (a number
    instead of True sets G itself, for the tests)."""
    if lpt is True:
        return max(1, min(heads, L2_SHARE // (2 * Sk * D * elt)))
    return max(1, min(heads, int(lpt)))
