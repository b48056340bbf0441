"""Reference solution for lesson 04: the FlashAttention-2 forward pass.

    O = softmax(Q Kᵀ · sm_scale) V        per batch b and head h

q is (B, H, Sq, D), k and v are (B, H, Sk, D), D in {16, 32, 64, 128}.

The naive way materialises the Sq × Sk score matrix: at S = 16384 that is
16384² · 4 bytes = 1 GiB per head in fp32, written and read back through HBM.
FlashAttention never stores it. A program owns BLOCK_M query rows and keeps
their running output in registers while tiles of K and V stream past:

    for each tile of BLOCK_N keys:
        s   = (q · kᵀ) · scale              (BLOCK_M × BLOCK_N, in registers)
        m'  = max(m, rowmax(s))             running row max
        p   = exp(s - m')                   unnormalised probabilities
        l   = l · exp(m - m') + rowsum(p)   running denominator, rescaled
        acc = acc · exp(m - m') + p · v     running numerator, rescaled
    O = acc / l

This is the *online softmax*: whenever the row max grows from m to m', every
term summed so far was exp(x - m) and must become exp(x - m'), which is a
multiplication by exp(m - m'). The rescaling is exact, so the result equals
the two-pass softmax up to rounding.

Details that make it fast:
  * exp2 instead of exp: exp(x) = 2^(x · log2 e). log2(e) is folded into the
    softmax scale once (qk_scale), so each score costs one multiply and one
    exp2, the instruction the hardware's special-function unit provides.
  * Causal masking: for the query block [m0, m0 + BLOCK_M), keys below m0
    are visible to every row, so those tiles run with no mask at all; keys
    past the diagonal are invisible to every row, so those tiles are never
    loaded (half the work of a causal pass is skipped). Only the tiles on the
    diagonal pay for the mask. Non-causal runs mask only the last, partial
    key tile.
  * Grid order: program (i, b·H + h) with i fastest, so the programs running
    together belong to the same head and share its K and V through L2.
  * Causal runs start the longest query blocks (the last ones) first, so the
    short ones fill the gaps at the end instead of a long one running alone.

Portable: plain pointer loads (no TMA, no warp specialisation) run in the
Triton interpreter and on T4, A100, H100 and H200. On Hopper (sm_90+) a
second kernel at the end of this file loads tiles through TMA descriptors;
`launch` picks it when the shapes allow. On sm_90 itself a third,
hopper/flash_attention_fa3.py next to this file, goes further: the
FlashAttention-3 schedule written in Gluon, where warps and barriers are
explicit (read this file first; that one is the next step).
"""

import importlib.util
import math
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

_INTERPRETER = os.environ.get("TRITON_INTERPRET") == "1"
LOG2E = 1.4426950408889634  # log2(e): exp(x) == exp2(x * LOG2E)


def _config(bm, bn, warps, stages):
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=warps, num_stages=stages)


# BLOCK_M must be a multiple of BLOCK_N (the causal diagonal is walked in
# BLOCK_N steps from a BLOCK_M boundary). Shared memory per stage holds a K
# and a V tile: 2 · BLOCK_N · D · elt bytes (32 KiB for 64 × 128 in bf16).
GPU_CONFIGS = [
    _config(128, 64, 8, 3),   # D = 128: the q tile and accumulator need 8 warps' registers
    _config(128, 128, 8, 3),  # D = 64: bigger key tiles, fewer loop trips
    _config(128, 64, 4, 3),   # fewer warps, more registers each
    _config(64, 64, 4, 3),    # small shared memory (T4) and short sequences
]
INTERPRETER_CONFIGS = [_config(64, 32, 4, 1)]
SMALL_WORK = 512 * 512 * 64  # below this (per head), one config, no tuning
SMALL_CONFIG = _config(64, 64, 4, 2)


def _prune(configs, named_args, **kwargs):
    if _INTERPRETER:
        return configs
    if named_args["Sq"] * named_args["Sk"] * kwargs.get("HEAD_DIM", 128) <= SMALL_WORK:
        return [SMALL_CONFIG]
    return configs


@triton.jit
def _attend_tiles(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                  offs_m, offs_d, lo, hi, Sk, qk_scale,
                  BLOCK_N: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr):
    """Fold the key tiles [lo, hi) into the running (acc, l, m) of one query block."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k_ptrs = k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd
        v_ptrs = v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd
        if MASKED:
            in_bounds = offs_n < Sk
            k = tl.load(k_ptrs, mask=in_bounds[:, None], other=0.0)
            v = tl.load(v_ptrs, mask=in_bounds[:, None], other=0.0)
        else:
            k = tl.load(k_ptrs)
            v = tl.load(v_ptrs)

        # Scores in log2 units: s = q·kᵀ · sm_scale · log2(e).
        s = tl.dot(q, tl.trans(k)) * qk_scale
        if MASKED:
            keep = in_bounds[None, :]
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, float("-inf"))  # exp2(-inf) = 0: masked keys vanish

        # The online softmax. Every row has seen at least one visible key by
        # now (key 0 is in the first tile every row processes), so m_new is
        # finite and m_i - m_new never computes -inf - (-inf).
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)          # rescales everything summed so far
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)   # P in the input dtype: tensor cores again
        m_i = m_new
    return acc, l_i, m_i


@triton.autotune(
    configs=INTERPRETER_CONFIGS if _INTERPRETER else GPU_CONFIGS,
    key=["Sq", "Sk", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _prune},
)
@triton.jit
def attention_kernel(
    Q, K, V, O,  # noqa: E741 - the paper's names
    stride_qb, stride_qh, stride_qs, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_os, stride_od,
    H, Sq, Sk, qk_scale,
    HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
):
    block = tl.program_id(0)
    if CAUSAL:
        # Longest first: query block i attends to i + 1 key blocks.
        block = tl.num_programs(0) - 1 - block
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)  # int64: b · stride can pass 2**31 on big batches
    h = (bh % H).to(tl.int64)
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + h * stride_kh
    v_base = V + b * stride_vb + h * stride_vh
    o_base = O + b * stride_ob + h * stride_oh

    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < Sq
    # Loaded once, reused against every key tile. Rows past Sq load zeros and
    # are never stored.
    q = tl.load(q_base + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd,
                mask=row_ok[:, None], other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)  # running row max (log2 units)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)                # running denominator
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)       # running numerator

    if CAUSAL:
        diag = block * BLOCK_M
        # Tiles wholly below the diagonal: every key is visible to every row.
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, 0, diag, Sk, qk_scale,
                                      BLOCK_N, False, CAUSAL)
        # Tiles on the diagonal: mask j > i. Tiles past it are skipped.
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, diag, tl.minimum(diag + BLOCK_M, Sk),
                                      Sk, qk_scale, BLOCK_N, True, CAUSAL)
    else:
        full = (Sk // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, 0, full, Sk, qk_scale,
                                      BLOCK_N, False, CAUSAL)
        # The partial last tile, if any (an empty range otherwise).
        acc, l_i, m_i = _attend_tiles(acc, l_i, m_i, q, k_base, v_base,
                                      stride_ks, stride_kd, stride_vs, stride_vd,
                                      offs_m, offs_d, full, Sk, Sk, qk_scale,
                                      BLOCK_N, True, CAUSAL)

    out = acc / l_i[:, None]  # l_i >= 1: the row max itself contributes exp2(0)
    o_ptrs = o_base + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od
    tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None])


# --- Hopper fast path: TMA (sm_90+) -----------------------------------------
# The Tensor Memory Accelerator copies a whole K or V tile into shared memory
# from a descriptor (base, shape, strides, box): one instruction instead of
# 128 threads computing addresses, asynchronous, and it frees the registers
# the pointer tiles held. q, k, v and o are viewed as (B·H·S, D) matrices, so
# head bh owns rows [bh·S, bh·S + S); the path is taken only when S is a
# multiple of the tile, so no box reaches into the next head.
#
# Measured on an H200 (2026-11-30, Triton 3.6, scripts/sweeps/sweep_attention.py,
# 164 variants on the eight bench shapes): TMA with these tiles was 1.32-1.58x
# the SDPA flash backend on every shape, where the pointer kernel above went
# down to 1.13x with the config its autotuner often picks. The tile is fixed
# per head dim, not autotuned: the sweep found one winner for each D, and
# autotuning at ~1% differences mostly measures noise.
#   D = 64:  128 x 64, 4 warps, 3 stages (a warpgroup; the small score tile
#            leaves registers for the 128 x 64 accumulator and q)
#   D = 128: 128 x 128, 8 warps, 3 stages (two warpgroups, 64 rows each)
# Two FA3/FA4 tricks were tried in the sweep and left out of this lesson
# kernel: a quarter of the exp2s by polynomial on the FMA pipe (+2-3% at
# D = 128 non-causal, nothing elsewhere) and P·V issued under the next
# tile's softmax (+1% at D = 64 causal, a 3x loss at 8 warps with D = 128).
TMA_TILES = {64: (128, 64, 4, 3), 128: (128, 128, 8, 3)}  # BLOCK_M, BLOCK_N, warps, stages


@triton.jit
def _attend_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, row0, offs_m, lo, hi, qk_scale,
                      BLOCK_N: tl.constexpr, MASKED: tl.constexpr):
    """_attend_tiles with TMA loads; every tile is whole (S % BLOCK_N == 0)."""
    for start_n in range(lo, hi, BLOCK_N):
        k = k_desc.load([row0 + start_n, 0])
        v = v_desc.load([row0 + start_n, 0])
        qk = tl.dot(q, k.T)
        if MASKED:  # the causal diagonal
            offs_n = start_n + tl.arange(0, BLOCK_N)
            qk = qk * qk_scale + tl.where(offs_m[:, None] >= offs_n[None, :], 0.0, -1.0e6)
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_new[:, None]
        else:
            # max(qk)·scale == max(qk·scale) for scale > 0: scale the row
            # maxima, not the tile, and scale-and-subtract is one FMA a score.
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_new[:, None]
        p = tl.exp2(qk)
        alpha = tl.exp2(m_i - m_new)  # 0 on the first tile (m_i = -inf)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel_tma(q_desc, k_desc, v_desc, o_desc, Sq, Sk, qk_scale,
                         HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    block = tl.program_id(0)
    if CAUSAL:
        block = tl.num_programs(0) - 1 - block  # longest first, as above
    bh = tl.program_id(1)
    q_row0 = bh * Sq
    k_row0 = bh * Sk
    offs_m = block * BLOCK_M + tl.arange(0, BLOCK_M)
    q = q_desc.load([q_row0 + block * BLOCK_M, 0])
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    if CAUSAL:
        diag = block * BLOCK_M
        acc, l_i, m_i = _attend_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, k_row0, offs_m,
                                          0, diag, qk_scale, BLOCK_N, False)
        acc, l_i, m_i = _attend_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, k_row0, offs_m,
                                          diag, diag + BLOCK_M, qk_scale, BLOCK_N, True)
    else:
        acc, l_i, m_i = _attend_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, k_row0, offs_m,
                                          0, Sk, qk_scale, BLOCK_N, False)
    out = acc / l_i[:, None]
    o_desc.store([q_row0 + block * BLOCK_M, 0], out.to(q.dtype))


def _tma_tiles(q, k, v, o):
    """The TMA tile for these tensors, or None where the portable kernel runs."""
    if _INTERPRETER or not q.is_cuda or torch.cuda.get_device_capability(q.device) < (9, 0):
        return None
    D = q.shape[3]
    if D not in TMA_TILES or q.dtype not in (torch.float16, torch.bfloat16):
        return None
    bm, bn, _, _ = TMA_TILES[D]
    if q.shape[2] % bm or k.shape[2] % bn:
        return None
    if not all(t.is_contiguous() and t.data_ptr() % 16 == 0 for t in (q, k, v, o)):
        return None
    return TMA_TILES[D]


def launch_tma(q, k, v, o, causal: bool, sm_scale: float, tiles) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    bm, bn, warps, stages = tiles

    def desc(t, rows, box):
        return TensorDescriptor(t, shape=[rows, D], strides=[D, 1], block_shape=[box, D])

    attention_kernel_tma[(Sq // bm, B * H)](
        desc(q, B * H * Sq, bm), desc(k, B * H * Sk, bn), desc(v, B * H * Sk, bn),
        desc(o, B * H * Sq, bm), Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, CAUSAL=causal, BLOCK_M=bm, BLOCK_N=bn, num_warps=warps, num_stages=stages,
    )


_FA3 = None  # the Gluon module once loaded, False where it cannot be


def _fa3_module():
    """hopper/flash_attention_fa3.py next to this file, where it is there, on
    an sm_90 GPU (wgmma is sm_90-only: Blackwell has other tensor-core
    instructions). GPULAB_FA3=0 turns it off, to compare."""
    global _FA3
    if _FA3 is None:
        _FA3 = False
        path = Path(__file__).parent / "hopper" / "flash_attention_fa3.py"
        if os.environ.get("GPULAB_FA3", "1") != "0" and path.is_file():
            try:
                spec = importlib.util.spec_from_file_location("gpulab_flash_attention_fa3", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                _FA3 = mod
            except Exception as exc:  # an older Triton without Gluon, say
                print(f"flash_attention: FA3 kernel unavailable ({exc}); using the Triton one",
                      file=sys.stderr)
    return _FA3 or None


def _try_fa3(q, k, v, o, causal: bool, sm_scale: float) -> bool:
    global _FA3
    if _INTERPRETER or not q.is_cuda or torch.cuda.get_device_capability(q.device)[0] != 9:
        return False
    fa3 = _fa3_module()
    if fa3 is None or not fa3.supported(q, k, v, o, causal):
        return False
    try:
        fa3.launch(q, k, v, o, causal, sm_scale)
    except Exception as exc:  # a Triton whose Gluon no longer compiles it
        print(f"flash_attention: FA3 kernel failed ({type(exc).__name__}: "
              f"{str(exc).strip().splitlines()[-1][:200]}); using the Triton one", file=sys.stderr)
        _FA3 = False
        return False
    return True


def launch(q, k, v, o, causal: bool, sm_scale: float) -> None:
    """Launch the kernel into a preallocated o (handy for benchmarks)."""
    if _try_fa3(q, k, v, o, causal, sm_scale):
        return
    tiles = _tma_tiles(q, k, v, o)
    if tiles is not None:
        launch_tma(q, k, v, o, causal, sm_scale, tiles)
        return
    B, H, Sq, D = q.shape
    Sk = k.shape[2]

    def grid(meta):
        return (triton.cdiv(Sq, meta["BLOCK_M"]), B * H)

    attention_kernel[grid](
        q, k, v, o,
        *q.stride(), *k.stride(), *v.stride(), *o.stride(),
        H, Sq, Sk, sm_scale * LOG2E,
        HEAD_DIM=D, CAUSAL=causal,
    )


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
              sm_scale: float | None = None) -> torch.Tensor:
    assert q.ndim == k.ndim == v.ndim == 4, "expects (B, H, S, D) tensors"
    B, H, Sq, D = q.shape
    assert k.shape[:2] == (B, H) and k.shape[3] == D and v.shape == k.shape, \
        f"shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not match"
    assert D in (16, 32, 64, 128), f"head dim {D} not in 16, 32, 64, 128"
    assert not causal or Sq == k.shape[2], "causal attention needs Sq == Sk"
    assert q.dtype == k.dtype == v.dtype, "q, k and v must share a dtype"
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(D)
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    launch(q, k, v, o, bool(causal), float(sm_scale))
    return o
