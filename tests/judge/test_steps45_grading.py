"""The steps of lessons 04 and 05 graded on the CPU (Triton interpreter):
honest solutions in several styles pass, wrong-but-plausible ones fail for
the stated reason. (Each starter fails and each reference passes in
`gpulab dev check`, tests/cli/test_cli.py, which covers every exercise.)

Cheap by construction (CI is near its limit): every variant is graded by
the real grader and the sandbox's real handlers in ONE child process
(tests/inprocess.py; the child exists only because Triton's interpreter is
chosen when triton is first imported). One honest variant a step also goes
the whole way, through a judge, a sandbox of its own and the CPU replay of
its kernels apart from its code (gpulab.judge.replay).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, gpulab_env, reference_source

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("steps45_grading")]


def edit(exercise: str, *edits: tuple[str, str]) -> str:
    """The reference of `exercise` with (old, new) edits, each applied once."""
    src = reference_source(exercise)
    for old, new in edits:
        assert old in src, f"{exercise}: variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


def replace_kernel(exercise: str, body: str) -> str:
    """The reference of `exercise` with everything from its first @triton.jit
    on replaced by `body` (a kernel and the wrapper, in another style)."""
    src = reference_source(exercise)
    return src[: src.index("@triton.jit")] + body


# --- attention_tile: honest styles --------------------------------------------

TILE_EXP_NORMALISED_FIRST = replace_kernel(
    "attention_tile",
    """
@triton.jit
def tile_kernel(Q, K, V, O, Sq, Sk, sm_scale,
                D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Contiguous offsets instead of strides, tl.exp with the plain scale,
    # and the weights normalised before the second matmul.
    i = tl.program_id(0) * BM + tl.arange(0, BM)
    j = tl.arange(0, BN)
    d = tl.arange(0, D)
    bh = tl.program_id(1)
    q = tl.load(Q + (bh * Sq + i[:, None]) * D + d[None, :], mask=i[:, None] < Sq, other=0.0)
    k = tl.load(K + (bh * Sk + j[:, None]) * D + d[None, :], mask=j[:, None] < Sk, other=0.0)
    v = tl.load(V + (bh * Sk + j[:, None]) * D + d[None, :], mask=j[:, None] < Sk, other=0.0)
    scores = tl.dot(q, tl.trans(k)) * sm_scale
    scores = tl.where(j[None, :] < Sk, scores, -float("inf"))
    e = tl.exp(scores - tl.max(scores, axis=1)[:, None])
    w = e / tl.sum(e, axis=1)[:, None]
    o = tl.dot(w.to(v.dtype), v)
    tl.store(O + (bh * Sq + i[:, None]) * D + d[None, :], o.to(O.dtype.element_ty),
             mask=i[:, None] < Sq)


def attention(q, k, v, sm_scale=None):
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    scale = sm_scale if sm_scale is not None else D ** -0.5
    o = torch.empty_like(q)
    tile_kernel[(triton.cdiv(Sq, 16), B * H)](q, k, v, o, Sq, Sk, scale, D=D, BM=16, BN=64)
    return o
""",
)

TILE_QUERY_LOOP = replace_kernel(
    "attention_tile",
    """
@triton.jit
def head_kernel(Q, K, V, O, sqb, sqh, sqs, skb, skh, sks, sob, soh, sos,
                H, Sq, Sk, qk_scale,
                HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # One program per (batch, head), walking its query blocks in a loop; k
    # and v loaded once for all of them; the division after the matmul.
    b = tl.program_id(0) // H
    h = tl.program_id(0) % H
    n = tl.arange(0, BLOCK_N)
    d = tl.arange(0, HEAD_DIM)
    kv = (b * skb + h * skh) + n[:, None] * sks + d[None, :]
    k = tl.load(K + kv, mask=n[:, None] < Sk, other=0.0)
    v = tl.load(V + kv, mask=n[:, None] < Sk, other=0.0)
    for start in range(0, Sq, BLOCK_M):
        m = start + tl.arange(0, BLOCK_M)
        q = tl.load(Q + b * sqb + h * sqh + m[:, None] * sqs + d[None, :],
                    mask=m[:, None] < Sq, other=0.0)
        s = tl.where(n[None, :] < Sk, tl.dot(q, tl.trans(k)) * qk_scale, -float("inf"))
        p = tl.exp2(s - tl.max(s, 1)[:, None])
        o = tl.dot(p.to(v.dtype), v) / tl.sum(p, 1)[:, None]
        tl.store(O + b * sob + h * soh + m[:, None] * sos + d[None, :],
                 o.to(O.dtype.element_ty), mask=m[:, None] < Sq)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              sm_scale: float | None = None) -> torch.Tensor:
    B, H, Sq, D = q.shape
    scale = (1.0 / math.sqrt(D) if sm_scale is None else sm_scale) * LOG2E
    o = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    # k and v share their strides (one layout): k's serve both.
    head_kernel[(B * H,)](q, k, v, o, q.stride(0), q.stride(1), q.stride(2),
                          k.stride(0), k.stride(1), k.stride(2),
                          o.stride(0), o.stride(1), o.stride(2),
                          H, Sq, k.shape[2], scale, HEAD_DIM=D, BLOCK_M=64, BLOCK_N=BLOCK_N)
    return o
""",
)

# --- attention_online: honest styles -------------------------------------------

ONLINE_TWO_PASSES = edit(
    "attention_online",
    # The row max over every key first, then one pass that sums under it:
    # no rescaling at all, at the price of reading K twice.
    (
        "    for start_n in range(0, Sk, BLOCK_N):\n        offs_n = start_n",
        "    for start_n in range(0, Sk, BLOCK_N):\n"
        "        offs_n = start_n + tl.arange(0, BLOCK_N)\n"
        "        k = tl.load(k_base + offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd,\n"
        "                    mask=(offs_n < Sk)[:, None], other=0.0)\n"
        "        s = tl.dot(q, tl.trans(k)) * qk_scale\n"
        '        s = tl.where((offs_n < Sk)[None, :], s, float("-inf"))\n'
        "        m_i = tl.maximum(m_i, tl.max(s, 1))\n"
        "    for start_n in range(0, Sk, BLOCK_N):\n        offs_n = start_n",
    ),
    ("        m_new = tl.maximum(m_i, tl.max(s, 1))\n", "        m_new = m_i\n"),
    ("        acc = acc * alpha[:, None] + tl.dot", "        acc = acc + tl.dot"),
    ("        l_i = l_i * alpha + tl.sum(p, 1)", "        l_i = l_i + tl.sum(p, 1)"),
)

ONLINE_NORMALISED_SPLIT = replace_kernel(
    "attention_online",
    """
@triton.jit
def _fold(acc, l, m, q, k_ptrs, v_ptrs, offs_n, Sk, scale, MASKED: tl.constexpr):
    # One key tile into a running output kept normalised (the first
    # FlashAttention's form), with natural exp.
    if MASKED:
        k = tl.load(k_ptrs, mask=(offs_n < Sk)[:, None], other=0.0)
        v = tl.load(v_ptrs, mask=(offs_n < Sk)[:, None], other=0.0)
    else:
        k = tl.load(k_ptrs)
        v = tl.load(v_ptrs)
    s = tl.dot(q, tl.trans(k)) * scale
    if MASKED:
        s = tl.where((offs_n < Sk)[None, :], s, -float("inf"))
    m_new = tl.maximum(m, tl.max(s, 1))
    p = tl.exp(s - m_new[:, None])
    l_new = l * tl.exp(m - m_new) + tl.sum(p, 1)
    acc = acc * (l * tl.exp(m - m_new) / l_new)[:, None] \\
        + tl.dot(p.to(v.dtype), v) / l_new[:, None]
    return acc, l_new, m_new


@triton.jit
def split_kernel(Q, K, V, O, Sq, Sk, scale,
                 D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    # Contiguous offsets; the whole tiles unmasked, the last partial one masked.
    bh = tl.program_id(1)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(Q + (bh * Sq + rows[:, None]) * D + d[None, :], mask=rows[:, None] < Sq, other=0.0)
    acc = tl.zeros((BM, D), tl.float32)
    l = tl.zeros((BM,), tl.float32)
    m = tl.full((BM,), -float("inf"), tl.float32)
    whole = Sk // BN * BN
    for n0 in range(0, whole, BN):
        n = n0 + tl.arange(0, BN)
        ptrs = (bh * Sk + n[:, None]) * D + d[None, :]
        acc, l, m = _fold(acc, l, m, q, K + ptrs, V + ptrs, n, Sk, scale, False)
    for n0 in range(whole, Sk, BN):
        n = n0 + tl.arange(0, BN)
        ptrs = (bh * Sk + n[:, None]) * D + d[None, :]
        acc, l, m = _fold(acc, l, m, q, K + ptrs, V + ptrs, n, Sk, scale, True)
    tl.store(O + (bh * Sq + rows[:, None]) * D + d[None, :], acc.to(O.dtype.element_ty),
             mask=rows[:, None] < Sq)


def attention(q, k, v, sm_scale=None):
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    o = torch.empty_like(q)
    scale = D ** -0.5 if sm_scale is None else sm_scale
    split_kernel[(triton.cdiv(Sq, 32), B * H)](q, k, v, o, Sq, Sk, scale, D=D, BM=32, BN=32)
    return o
""",
)

# --- rope: honest styles --------------------------------------------------------

ROPE_PARTNER = replace_kernel(
    "rope",
    """
@triton.jit
def partner_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, S, H, sb, ss, sh,
                   D: tl.constexpr, BLOCK_H: tl.constexpr):
    # The whole head as one (BLOCK_H, D) tile, each element beside its
    # partner j ± D/2 and a sign: y = x·cos + sign·partner·sin.
    pos = tl.program_id(0)
    b = pos // S
    s = pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, D)
    half = D // 2
    partner = (j + half) % D
    sign = tl.where(j < half, -1.0, 1.0)
    row = x_ptr + b * sb + s * ss + h[:, None] * sh
    ok = h[:, None] < H
    x = tl.load(row + j[None, :], mask=ok, other=0.0).to(tl.float32)
    xp = tl.load(row + partner[None, :], mask=ok, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + s * half + j % half)
    sn = tl.load(sin_ptr + s * half + j % half)
    y = x * c[None, :] + sign[None, :] * xp * sn[None, :]
    tl.store(y_ptr + (pos * H + h[:, None]) * D + j[None, :], y.to(y_ptr.dtype.element_ty),
             mask=ok)


def rope(x, cos, sin):
    B, S, H, D = x.shape
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    grid = (B * S, triton.cdiv(H, 4))
    partner_kernel[grid](x, cos, sin, y, S, H, *x.stride()[:3], D=D, BLOCK_H=4)
    return y
""",
)

ROPE_ROW_A_PROGRAM = replace_kernel(
    "rope",
    """
@triton.jit
def one_row_kernel(x_ptr, cos_ptr, sin_ptr, y_ptr, S, H, sb, ss, sh, HALF: tl.constexpr):
    # One program per (b, s, h) row: the simplest grid, the table row reloaded.
    r = tl.program_id(0)
    h = r % H
    s = (r // H) % S
    b = r // (H * S)
    j = tl.arange(0, HALF)
    src = x_ptr + b * sb + s * ss + h * sh
    x1 = tl.load(src + j).to(tl.float32)
    x2 = tl.load(src + HALF + j).to(tl.float32)
    c = tl.load(cos_ptr + s * HALF + j)
    sn = tl.load(sin_ptr + s * HALF + j)
    dst = y_ptr + r * 2 * HALF
    tl.store(dst + j, (x1 * c - x2 * sn).to(y_ptr.dtype.element_ty))
    tl.store(dst + HALF + j, (x1 * sn + x2 * c).to(y_ptr.dtype.element_ty))


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    B, S, H, D = x.shape
    y = x.new_empty((B, S, H, D))
    one_row_kernel[(B * S * H,)](x, cos, sin, y, S, H, x.stride(0), x.stride(1), x.stride(2),
                                 HALF=D // 2)
    return y
""",
)

# --- rmsnorm: honest styles -----------------------------------------------------

RMS_HALVES_STRIDED = replace_kernel(
    "rmsnorm",
    """
@triton.jit
def halves_kernel(x_ptr, w_ptr, y_ptr, S, H, sb, ss, sh, eps,
                  HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    # The fused exercise's layout already: a position and a block of heads,
    # each head as its two halves, rows from the strides; 1 / sqrt.
    pos = tl.program_id(0)
    b = pos // S
    s = pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, HALF)
    ok = (h < H)[:, None]
    row = x_ptr + b * sb + s * ss + h[:, None] * sh
    x1 = tl.load(row + j[None, :], mask=ok, other=0.0).to(tl.float32)
    x2 = tl.load(row + HALF + j[None, :], mask=ok, other=0.0).to(tl.float32)
    ms = (tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF)
    inv = (1.0 / tl.sqrt(ms + eps))[:, None]
    w1 = tl.load(w_ptr + j).to(tl.float32)[None, :]
    w2 = tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    out = y_ptr + (pos * H + h[:, None]) * (2 * HALF)
    tl.store(out + j[None, :], (x1 * inv * w1).to(y_ptr.dtype.element_ty), mask=ok)
    tl.store(out + HALF + j[None, :], (x2 * inv * w2).to(y_ptr.dtype.element_ty), mask=ok)


def rmsnorm(x, weight, eps=1e-6):
    B, S, H, D = x.shape
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    block_h = min(8, triton.next_power_of_2(H))
    halves_kernel[(B * S, triton.cdiv(H, block_h))](
        x, weight, y, S, H, x.stride(0), x.stride(1), x.stride(2), eps,
        HALF=D // 2, BLOCK_H=block_h)
    return y
""",
)

RMS_ROW_A_PROGRAM = replace_kernel(
    "rmsnorm",
    """
@triton.jit
def row_kernel(x_ptr, w_ptr, y_ptr, eps, D: tl.constexpr):
    # One row a program on a flat (rows, D) view; mean by tl.sum / D and a
    # division by the root.
    r = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, D)
    x = tl.load(x_ptr + r * D + c).to(tl.float32)
    rms = tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    y = x / rms * tl.load(w_ptr + c).to(tl.float32)
    tl.store(y_ptr + r * D + c, y.to(y_ptr.dtype.element_ty))


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    D = x.shape[-1]
    rows = x.view(-1, D)
    y = torch.empty_like(rows)
    row_kernel[(rows.shape[0],)](rows, weight, y, eps, D=D)
    return y.view(x.shape)
""",
)

# --- rope_rmsnorm_fwd: honest styles ----------------------------------------------


def _two_kernels(n_dtype: str) -> str:
    """Step 2's norm (on step 1's grid and strides) into a buffer n, then
    step 1's rotation of n: two kernels, n through memory in `n_dtype`."""
    return replace_kernel(
        "rope_rmsnorm_fwd",
        f"""
@triton.jit
def norm_kernel(x_ptr, w_ptr, n_ptr, S, H, sb, ss, sh, eps,
                D: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)
    b = pos // S
    s = pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, D)
    ok = (h < H)[:, None]
    x = tl.load(x_ptr + b * sb + s * ss + h[:, None] * sh + j[None, :], mask=ok,
                other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)[:, None]
    n = x * rstd * tl.load(w_ptr + j).to(tl.float32)[None, :]
    tl.store(n_ptr + (pos * H + h[:, None]) * D + j[None, :], n.to(n_ptr.dtype.element_ty),
             mask=ok)


@triton.jit
def rotate_kernel(n_ptr, cos_ptr, sin_ptr, y_ptr, S, H, HALF: tl.constexpr):
    r = tl.program_id(0)  # a row of the contiguous n: (b·S + s)·H + h
    s = (r // H) % S
    j = tl.arange(0, HALF)
    n1 = tl.load(n_ptr + r * 2 * HALF + j).to(tl.float32)
    n2 = tl.load(n_ptr + r * 2 * HALF + HALF + j).to(tl.float32)
    c = tl.load(cos_ptr + s * HALF + j)
    sn = tl.load(sin_ptr + s * HALF + j)
    tl.store(y_ptr + r * 2 * HALF + j, (n1 * c - n2 * sn).to(y_ptr.dtype.element_ty))
    tl.store(y_ptr + r * 2 * HALF + HALF + j, (n2 * c + n1 * sn).to(y_ptr.dtype.element_ty))


def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):
    B, S, H, D = x.shape
    n = torch.empty((B, S, H, D), dtype={n_dtype}, device=x.device)
    y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    bh = min(16, triton.next_power_of_2(H))
    norm_kernel[(B * S, triton.cdiv(H, bh))](x, weight, n, S, H, *x.stride()[:3], eps,
                                            D=D, BLOCK_H=bh)
    rotate_kernel[(B * S * H,)](n, cos, sin, y, S, H, HALF=D // 2)
    return y
""",
    )


FWD_WHOLE_HEAD = replace_kernel(
    "rope_rmsnorm_fwd",
    """
@triton.jit
def whole_head_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr, S, H, sb, ss, sh, eps,
                      D: tl.constexpr):
    # One program per (b, s, h) row, the head as one D-wide tile beside its
    # rotation partners (j ± D/2) and a sign; 1 / sqrt.
    r = tl.program_id(0)
    h = r % H
    s = (r // H) % S
    b = r // (S * H)
    j = tl.arange(0, D)
    partner = (j + D // 2) % D
    src = x_ptr + b * sb + s * ss + h * sh
    x = tl.load(src + j).to(tl.float32)
    xp = tl.load(src + partner).to(tl.float32)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / D + eps)
    n = x * inv * tl.load(w_ptr + j).to(tl.float32)
    npart = xp * inv * tl.load(w_ptr + partner).to(tl.float32)
    c = tl.load(cos_ptr + s * (D // 2) + j % (D // 2))
    sn = tl.load(sin_ptr + s * (D // 2) + j % (D // 2))
    y = n * c + tl.where(j < D // 2, -npart, npart) * sn
    tl.store(y_ptr + r * D + j, y.to(y_ptr.dtype.element_ty))


def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):
    B, S, H, D = x.shape
    y = x.new_empty((B, S, H, D))
    whole_head_kernel[(B * S * H,)](x, weight, cos, sin, y, S, H, *x.stride()[:3], eps, D=D)
    return y
""",
)


# --- rope_rmsnorm_bwd: honest styles -----------------------------------------------

# Atomics into one zeroed (D,) fp32 buffer instead of partial rows: the lesson's
# other way (nondeterministic order of additions, correct all the same).
BWD_ATOMICS = replace_kernel(
    "rope_rmsnorm_bwd",
    """
@triton.jit
def bwd_atomic_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, dw_ptr, S, H,
                      sxb, sxs, sxh, sdb, sds, sdh, scs, eps,
                      D: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr):
    pos = tl.program_id(0)
    b, s = pos // S, pos % S
    h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = tl.arange(0, HALF)
    mask = (h < H)[:, None]
    xr = x_ptr + b * sxb + s * sxs + h[:, None] * sxh
    dr = dy_ptr + b * sdb + s * sds + h[:, None] * sdh
    x1 = tl.load(xr + j[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(xr + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
    dy1 = tl.load(dr + j[None, :], mask=mask, other=0.0).to(tl.float32)
    dy2 = tl.load(dr + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
    c = tl.load(cos_ptr + s * scs + j)[None, :]
    sn = tl.load(sin_ptr + s * scs + j)[None, :]
    r = tl.rsqrt((tl.sum(x1 * x1, 1) + tl.sum(x2 * x2, 1)) / D + eps)
    rstd = r[:, None]
    dn1 = dy1 * c + dy2 * sn
    dn2 = dy2 * c - dy1 * sn
    tl.atomic_add(dw_ptr + j, tl.sum(dn1 * x1 * rstd, 0))
    tl.atomic_add(dw_ptr + HALF + j, tl.sum(dn2 * x2 * rstd, 0))
    g1 = dn1 * tl.load(w_ptr + j).to(tl.float32)[None, :]
    g2 = dn2 * tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    m = ((tl.sum(g1 * x1, 1) + tl.sum(g2 * x2, 1)) * r / D)[:, None]
    out = dx_ptr + (pos * H + h[:, None]) * D
    tl.store(out + j[None, :], (rstd * (g1 - x1 * rstd * m)).to(dx_ptr.dtype.element_ty),
             mask=mask)
    tl.store(out + HALF + j[None, :],
             (rstd * (g2 - x2 * rstd * m)).to(dx_ptr.dtype.element_ty), mask=mask)


def rmsnorm_rope_backward(x, weight, cos, sin, dy, eps=1e-6):
    B, S, H, D = x.shape
    bh = min(16, triton.next_power_of_2(H))
    dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    dw = torch.zeros(D, dtype=torch.float32, device=x.device)
    bwd_atomic_kernel[(B * S, triton.cdiv(H, bh))](
        x, weight, cos, sin, dy, dx, dw, S, H, x.stride(0), x.stride(1), x.stride(2),
        dy.stride(0), dy.stride(1), dy.stride(2), cos.stride(0), eps,
        D=D, HALF=D // 2, BLOCK_H=bh)
    return dx, dw.to(weight.dtype)
""",
)

# One program a row (B·S·H of them), each writing its own partial row: the
# (rows, D) buffer the lesson calls correct but wasteful.
BWD_ROW_PARTIALS = replace_kernel(
    "rope_rmsnorm_bwd",
    """
@triton.jit
def row_kernel(x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, part_ptr, S, H,
               sxb, sxs, sxh, sdb, sds, sdh, scs, eps, D: tl.constexpr):
    r = tl.program_id(0)
    h, s, b = r % H, (r // H) % S, r // (H * S)
    d = tl.arange(0, D)
    # Whole head at once; the partner of element d is (d + D/2) % D.
    p = (d + D // 2) % D
    sign = tl.where(d < D // 2, -1.0, 1.0)
    x = tl.load(x_ptr + b * sxb + s * sxs + h * sxh + d).to(tl.float32)
    dyr = dy_ptr + b * sdb + s * sds + h * sdh
    dy = tl.load(dyr + d).to(tl.float32)
    dyp = tl.load(dyr + p).to(tl.float32)
    c = tl.load(cos_ptr + s * scs + d % (D // 2))
    sn = tl.load(sin_ptr + s * scs + d % (D // 2))
    dn = dy * c - sign * dyp * sn
    rstd = tl.rsqrt(tl.sum(x * x, 0) / D + eps)
    xh = x * rstd
    tl.store(part_ptr + r * D + d, dn * xh)
    g = dn * tl.load(w_ptr + d).to(tl.float32)
    dx = rstd * (g - xh * (tl.sum(g * xh, 0) / D))
    tl.store(dx_ptr + r * D + d, dx.to(dx_ptr.dtype.element_ty))


def rmsnorm_rope_backward(x, weight, cos, sin, dy, eps=1e-6):
    B, S, H, D = x.shape
    rows = B * S * H
    dx = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)
    part = torch.empty((rows, D), dtype=torch.float32, device=x.device)
    row_kernel[(rows,)](x, weight, cos, sin, dy, dx, part, S, H,
                        x.stride(0), x.stride(1), x.stride(2),
                        dy.stride(0), dy.stride(1), dy.stride(2), cos.stride(0), eps, D=D)
    return dx, part.sum(0).to(weight.dtype)
""",
)

HONEST = {
    "attention_tile normalised first, exp, contiguous offsets": (
        "attention_tile",
        TILE_EXP_NORMALISED_FIRST,
    ),
    "attention_tile a loop over query blocks": ("attention_tile", TILE_QUERY_LOOP),
    "attention_online two passes": ("attention_online", ONLINE_TWO_PASSES),
    "attention_online normalised running output, split loop": (
        "attention_online",
        ONLINE_NORMALISED_SPLIT,
    ),
    "rope whole head with partners": ("rope", ROPE_PARTNER),
    "rope a row a program": ("rope", ROPE_ROW_A_PROGRAM),
    "rmsnorm halves and strides": ("rmsnorm", RMS_HALVES_STRIDED),
    "rmsnorm a row a program": ("rmsnorm", RMS_ROW_A_PROGRAM),
    "rope_rmsnorm_fwd a row a program, partners": ("rope_rmsnorm_fwd", FWD_WHOLE_HEAD),
    "rope_rmsnorm_fwd two kernels, n in fp32": ("rope_rmsnorm_fwd", _two_kernels("torch.float32")),
    "rope_rmsnorm_bwd atomics into dweight": ("rope_rmsnorm_bwd", BWD_ATOMICS),
    "rope_rmsnorm_bwd a row a program, a partial row each": ("rope_rmsnorm_bwd", BWD_ROW_PARTIALS),
}
# The variant of each step that also goes the whole way (judge, sandbox, replay).
REAL_PATH = [
    "attention_tile a loop over query blocks",
    "attention_online normalised running output, split loop",
    "rope whole head with partners",
    "rmsnorm halves and strides",
    "rope_rmsnorm_fwd a row a program, partners",
    "rope_rmsnorm_bwd atomics into dweight",
]

# Graded through the real judge with REAL_PATH: dweight worked out in numpy,
# out of every op guard's sight, and right. Only the replay, which runs the
# kernels alone and reads the second tensor returned where they left it,
# can tell.
NUMPY_DWEIGHT = edit(
    "rope_rmsnorm_bwd",
    (
        "    return dx, dw_part.sum(0).to(weight.dtype)\n",
        """    import numpy as np
    xf, dyf = x.detach().double().numpy(), dy.detach().double().numpy()
    c = cos.double().numpy()[None, :, None, :]
    s = sin.double().numpy()[None, :, None, :]
    h = D // 2
    dn = np.concatenate([dyf[..., :h] * c + dyf[..., h:] * s,
                         dyf[..., h:] * c - dyf[..., :h] * s], -1)
    xh = xf / np.sqrt((xf**2).mean(-1, keepdims=True) + eps)
    dw = torch.from_numpy((dn * xh).reshape(-1, D).sum(0)).to(weight.dtype)
    return dx, dw
""",
    ),
)
REAL_CHEATS = {"rope_rmsnorm_bwd dweight in numpy": ("rope_rmsnorm_bwd", NUMPY_DWEIGHT)}

# name -> (exercise, source, words one of which the failure must show)
WRONG = {
    # Keys past Sk load as zeros and score 0: each adds exp(0 - max) to a row.
    "attention_tile no key mask on the scores": (
        "attention_tile",
        edit("attention_tile", ('    s = tl.where(key_ok[None, :], s, float("-inf"))', "")),
        ("wrong",),
    ),
    # exp2 of scores in the hundreds overflows to inf, and inf / inf is NaN.
    "attention_tile no max subtracted": (
        "attention_tile",
        edit("attention_tile", ("p = tl.exp2(s - m[:, None])", "p = tl.exp2(s)")),
        ("large scores",),
    ),
    "attention_tile sm_scale ignored": (
        "attention_tile",
        edit(
            "attention_tile",
            ("    if sm_scale is None:\n        sm_scale", "    if True:\n        sm_scale"),
        ),
        ("sm_scale=0.3",),
    ),
    # The running output never rescaled when the max grows.
    "attention_online acc not rescaled": (
        "attention_online",
        edit("attention_online", ("acc = acc * alpha[:, None] + ", "acc = acc + ")),
        ("wrong",),
    ),
    # The last partial tile's missing keys score 0 instead of -inf.
    "attention_online last tile's scores unmasked": (
        "attention_online",
        edit("attention_online", ('        s = tl.where(key_ok[None, :], s, float("-inf"))', "")),
        ("wrong",),
    ),
    # The interleaved convention: pairs (2j, 2j + 1) instead of (j, j + D/2).
    "rope interleaved pairs": (
        "rope",
        edit(
            "rope",
            ("x1 = tl.load(x_row + j[None, :]", "x1 = tl.load(x_row + 2 * j[None, :]"),
            ("x2 = tl.load(x_row + HALF + j[None, :]", "x2 = tl.load(x_row + 2 * j[None, :] + 1"),
            ("tl.store(y_row + j[None, :]", "tl.store(y_row + 2 * j[None, :]"),
            ("tl.store(y_row + HALF + j[None, :]", "tl.store(y_row + 2 * j[None, :] + 1"),
        ),
        ("wrong",),
    ),
    # x assumed contiguous: the QKV slice and the transposed view go wrong.
    "rope contiguous strides assumed": (
        "rope",
        edit("rope", ("x.stride(0), x.stride(1), x.stride(2)", "S * H * D, H * D, D")),
        ("view",),
    ),
    # The table row of b·S + s instead of s: wrong (and past the tables) once B > 1.
    "rope table row of the flat position": (
        "rope",
        edit(
            "rope",
            (
                "c = tl.load(cos_ptr + s * stride_cs + j)",
                "c = tl.load(cos_ptr + pos * stride_cs + j)",
            ),
            (
                "sn = tl.load(sin_ptr + s * stride_cs + j)",
                "sn = tl.load(sin_ptr + pos * stride_cs + j)",
            ),
        ),
        ("wrong",),
    ),
    # x² in fp16: it overflows once |x| passes 256.
    "rmsnorm squares in x's dtype": (
        "rmsnorm",
        edit(
            "rmsnorm",
            ("other=0.0).to(tl.float32)", "other=0.0)"),
            ("tl.sum(x * x, axis=1)", "tl.sum((x * x).to(tl.float32), axis=1)"),
            ("y = x * rstd", "y = x.to(tl.float32) * rstd"),
        ),
        ("large magnitudes",),
    ),
    # eps added after the square root: rows of near-zeros blow up.
    "rmsnorm eps outside the root": (
        "rmsnorm",
        edit(
            "rmsnorm",
            (
                "tl.rsqrt(tl.sum(x * x, axis=1) / D + eps)",
                "tl.rsqrt(tl.sum(x * x, axis=1) / D) + eps",
            ),
        ),
        ("eps",),
    ),
}

# n rounded to x's dtype between two kernels: one rounding more than the
# contract's fp32 n, past the tolerances on fp16 and bf16 cases.
WRONG["rope_rmsnorm_fwd two kernels, n in x's dtype"] = (
    "rope_rmsnorm_fwd",
    _two_kernels("x.dtype"),
    ("wrong",),
)
WRONG["rope_rmsnorm_fwd weight after the rotation"] = (
    # RMSNorm's weight belongs to n, before RoPE mixes the two halves.
    "rope_rmsnorm_fwd",
    edit(
        "rope_rmsnorm_fwd",
        ("n1 = x1 * rstd * tl.load(w_ptr + j)", "n1 = x1 * rstd\n    w1 = tl.load(w_ptr + j)"),
        (
            "n2 = x2 * rstd * tl.load(w_ptr + HALF + j)",
            "n2 = x2 * rstd\n    w2 = tl.load(w_ptr + HALF + j)",
        ),
        ("(n1 * c - n2 * sn).to(", "((n1 * c - n2 * sn) * w1).to("),
        ("(n2 * c + n1 * sn).to(", "((n2 * c + n1 * sn) * w2).to("),
    ),
    ("wrong",),
)

# RoPE's backward is the rotation the other way: rotating dy forward again
# gives the wrong dn, so dx and dweight are both wrong.
WRONG["rope_rmsnorm_bwd dy rotated forward"] = (
    "rope_rmsnorm_bwd",
    edit(
        "rope_rmsnorm_bwd",
        ("dn1 = dy1 * c + dy2 * sn", "dn1 = dy1 * c - dy2 * sn"),
        ("dn2 = dy2 * c - dy1 * sn", "dn2 = dy2 * c + dy1 * sn"),
    ),
    ("dx:", "dweight:"),
)
# The path through rstd left out: dx = rstd · g. Only dx is wrong.
WRONG["rope_rmsnorm_bwd no path through rstd"] = (
    "rope_rmsnorm_bwd",
    edit(
        "rope_rmsnorm_bwd",
        ("(rstd * (g1 - xh1 * m))", "(rstd * g1)"),
        ("(rstd * (g2 - xh2 * m))", "(rstd * g2)"),
    ),
    ("dx:",),
)
# One program's partial row taken for the whole sum: only dweight is wrong.
WRONG["rope_rmsnorm_bwd one partial row for dweight"] = (
    "rope_rmsnorm_bwd",
    edit("rope_rmsnorm_bwd", ("dw_part.sum(0).to(weight.dtype)", "dw_part[0].to(weight.dtype)")),
    ("dweight:",),
)

# Cheats: the maths in torch, a Triton kernel only to copy or to show.
WRONG["rope eager torch, then a copy kernel"] = (
    "rope",
    replace_kernel(
        "rope",
        """
@triton.jit
def copy_kernel(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, tl.load(src + o, mask=o < n), mask=o < n)


def rope(x, cos, sin):
    x1, x2 = x.float().chunk(2, -1)
    c, s = cos[:, None, :], sin[:, None, :]
    t = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1).to(x.dtype).contiguous()
    y = torch.empty_like(t)
    copy_kernel[(triton.cdiv(t.numel(), 1024),)](t, y, t.numel(), BLOCK=1024)
    return y
""",
    ),
    ("cheat: your forward computed eagerly",),
)
WRONG["attention_tile torch's softmax on the kernel's scores"] = (
    "attention_tile",
    edit(
        "attention_tile",
        ("def attention(", "def _kernel_attention("),
        (
            "    return o\n",
            "    return o\n\n\n"
            "def attention(q, k, v, sm_scale=None):\n"
            "    _kernel_attention(q, k, v, sm_scale)\n"
            "    w = torch.softmax(q.float() @ k.float().transpose(-1, -2) / q.shape[-1] ** 0.5, -1)\n"
            "    return (w @ v.float()).to(q.dtype)\n",
        ),
    ),
    ("cheat: your code called",),
)

FUNCTIONS = {
    "attention_tile": "attention",
    "attention_online": "attention",
    "rope": "rope",
    "rmsnorm": "rmsnorm",
    "rope_rmsnorm_fwd": "rmsnorm_rope",
    "rope_rmsnorm_bwd": "rmsnorm_rope_backward",
}

IN_PROCESS_CHILD = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"  # before triton is first imported
from pathlib import Path
from tests.inprocess import grade_here

items, out_path = json.loads(sys.argv[1]), sys.argv[2]
results = {name: grade_here(ex, fn, Path(path)) for name, (ex, fn, path) in items.items()}
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
"""

JUDGE_CHILD = r"""
import json, sys
from gpulab.judge.main import judge
from gpulab.judge.remote import harden_judge

harden_judge()  # a judge adopts its sandboxes' keepers, as `python -m gpulab.judge.main` does
from gpulab.judge import prepared

prepared.KEEP_FORKS = True  # one fork server for the whole batch (tests/judge_pool.py)

class Quiet:
    def send(self, event): pass
    def stage(self, kind, text, *progress): pass

items, out_path, content, device = json.loads(sys.argv[1]), *sys.argv[2:5]
results = {}
for name, (exercise, function, path) in items.items():
    request = {"exercise": exercise, "function": function, "file": path,
               "timing": False, "device": device, "timeout": 300, "content_root": content}
    results[name] = judge(request, Quiet()).to_json()
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
prepared.close_kept_forks()
"""


def _run(child: str, tmp, items: dict, *extra: str) -> dict:
    out = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", child, json.dumps(items), str(out), *extra],
        capture_output=True,
        text=True,
        timeout=600,
        env=gpulab_env(tmp / "home"),
        cwd=REPO,
    )
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def _once(tmp_path_factory, key: str, produce) -> dict:
    """`produce(tmp)` once for the whole run: under pytest-xdist every worker
    that gets one of this module's tests would build the module's fixtures
    again (CI runs `-n auto`); the first builds them, under a lock in the
    run's shared temporary folder, and the others read its results."""
    import fcntl
    import os

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # one process: nothing to share
        return produce(tmp_path_factory.mktemp(f"steps45-{key}"))
    # A worker's basetemp is <the run's basetemp>/popen-gwN: its parent is the run's.
    shared = tmp_path_factory.getbasetemp().parent / f"steps45-{key}"
    shared.mkdir(exist_ok=True)
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = shared / "done.json"
        if not done.is_file():
            results = produce(shared)
            tmp = shared / "done.tmp"
            tmp.write_text(json.dumps(results))
            tmp.rename(done)
        return json.loads(done.read_text())


def _items(tmp, sources: dict) -> dict:
    items = {}
    for i, (name, (exercise, src)) in enumerate(sources.items()):
        path = tmp / f"variant_{i}.py"
        path.write_text(src)
        items[name] = (exercise, FUNCTIONS[exercise], str(path))
    return items


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """name -> result for every variant above, graded in one process."""
    sources = dict(HONEST)
    sources.update({n: (ex, src) for n, (ex, src, _) in WRONG.items()})
    return _once(
        tmp_path_factory, "batch", lambda tmp: _run(IN_PROCESS_CHILD, tmp, _items(tmp, sources))
    )


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """name -> result for REAL_PATH, each through a judge, a sandbox and the replay."""
    real_path = {n: HONEST[n] for n in REAL_PATH} | REAL_CHEATS
    return _once(
        tmp_path_factory,
        "real",
        lambda tmp: _run(JUDGE_CHILD, tmp, _items(tmp, real_path), str(REPO), "cpu"),
    )


@pytest.fixture(scope="module")
def gpu_batch(tmp_path_factory):
    """name -> result for every honest variant, checked on the GPU (its own
    cases: bigger shapes, tf32 and the compiled kernels), one judge for all."""
    return _once(
        tmp_path_factory,
        "gpu",
        lambda tmp: _run(JUDGE_CHILD, tmp, _items(tmp, HONEST), str(REPO), "cuda"),
    )


def _failing(r: dict) -> str:
    return (
        r.get("summary", "")
        + " "
        + " ".join(c.get("name", "") + " " + c.get("detail", "") for c in r.get("cases", []))
    )


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(batch, name):
    r = batch[name]
    assert r["status"] == "passed", (name, r.get("summary"), r.get("message", "")[:2000])
    assert all(c["passed"] for c in r["cases"]) and len(r["cases"]) >= 8


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(batch, name):
    r = batch[name]
    _, _, why = WRONG[name]
    assert r["status"] == "failed", (name, r.get("status"), r.get("summary"))
    assert any(w in _failing(r) for w in why), (name, _failing(r)[:2000])


@pytest.mark.parametrize("name", REAL_PATH)
def test_a_variant_a_step_passes_the_real_check(real, name):
    r = real[name]
    assert r["status"] == "passed", (name, r.get("summary"), r.get("message", "")[:2000])
    assert r["timing"] is None
    assert any("A step is graded on correctness only" in n for n in r["notes"])


def test_the_replay_judges_a_second_returned_tensor(real):
    """rope_rmsnorm_bwd returns (dx, dweight): a dweight the kernels did not
    compute is found by the replay, which reads it where they left it."""
    r = real["rope_rmsnorm_bwd dweight in numpy"]
    assert r["status"] == "failed", r.get("summary")
    assert "your kernels alone" in _failing(r) and "dweight" in _failing(r), _failing(r)[:2000]


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(HONEST))
def test_gpu_honest_variants_pass(gpu_batch, name):
    r = gpu_batch[name]
    assert r["status"] == "passed", (name, r.get("summary"), r.get("message", "")[:2000])
    assert not any("interpreter" in n for n in r["notes"]), r["notes"]
