"""Sweep Triton matmul variants against cuBLAS (torch.matmul) on a GPU.

    python3 scripts/sweeps/sweep_matmul.py OUT.json [--quick] [--shapes 8192x8192] [--variants tma]
    python3 scripts/sweeps/sweep_matmul.py --selftest      # CPU: every variant in the interpreter
    python3 scripts/sweeps/sweep_matmul.py --list          # the cases and variants, no GPU

C = A @ B, A (M, K) and B (K, N) row-major (the layout torch.matmul gets),
fp32 accumulation, C in the input dtype; bf16 and fp16 on 4096³, 8192³ and
the MLP projections (M, N, K) = (8192, 14336, 4096) and (8192, 4096, 14336).

Variant families (each with a few known-good Hopper configs, named
BMxBNxBK sN wN [sub]: tile, pipeline stages, warps, epilogue subtiling):
  grouped          one program per tile, grouped (swizzled) tile order,
                   pointer loads (Triton tutorial 03; what the lesson teaches)
  persistent       one program per SM looping over tiles (tl.range flatten=True
                   so the next tile's loads overlap this tile's epilogue)
  tma              one program per tile, loads and stores through host-built
                   TMA descriptors (TensorDescriptor): the copy engine moves
                   whole tiles, no address arithmetic in the registers
  tma_persistent   persistent + host TMA descriptors (tutorial 09), optionally
                   storing the C tile in two halves (less shared memory for the
                   epilogue, so one more pipeline stage fits)
  desc_persistent  persistent + descriptors built on the device
                   (tl.make_tensor_descriptor; needs triton.set_allocator)
  desc_ws          desc_persistent with warp specialisation (tl.range
                   warp_specialize=True, flatten=False): producer warps issue
                   TMA loads, consumer warps run wgmma. On sm_90 this may not
                   compile in a given Triton release; the error is recorded.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

if "--selftest" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import sweep_common as common  # noqa: E402
from sweep_common import Variant  # noqa: E402

NAME = "matmul"
BASELINES = ["cublas"]
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
TOL = {"bf16": 2e-2, "fp16": 5e-3}  # outputs are ~N(0, 1): a few output ulps
NUM_SMS = 132  # replaced from the device in setup(); small in the interpreter


# --------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------


@triton.jit
def _tile_mn(tile, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: walk GROUP_M tile-rows column by column, so the tiles
    in flight together share A rows and B columns in L2."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile // in_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (tile % in_group) % group_m
    pid_n = (tile % in_group) // group_m
    return pid_m, pid_n


@triton.jit
def _store_ptr(c_ptr, acc, off_m, off_n, M, N, scm, scn, BM: tl.constexpr, BN: tl.constexpr):
    rows = off_m + tl.arange(0, BM)
    cols = off_n + tl.arange(0, BN)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    tl.store(
        c_ptr + rows[:, None] * scm + cols[None, :] * scn, acc.to(c_ptr.dtype.element_ty), mask=mask
    )


@triton.jit
def mm_grouped(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
):
    pid_m, pid_n = _tile_mn(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    # Rows/columns past M/N wrap to valid ones (never stored): unmasked loads.
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None] * sam + offs_k[None, :] * sak
    b_ptrs = b_ptr + offs_k[:, None] * sbk + offs_n[None, :] * sbn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        if EVEN_K:  # no K tail: no mask, no select per element
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * sak
        b_ptrs += BK * sbk
    _store_ptr(c_ptr, acc, pid_m * BM, pid_n * BN, M, N, scm, scn, BM, BN)


@triton.jit
def mm_persistent(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    sam,
    sak,
    sbk,
    sbn,
    scm,
    scn,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr,
    NUM_SMS: tl.constexpr,
):
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    offs_k = tl.arange(0, BK)
    # The epilogue recomputes its tile from its own counter: this keeps the
    # prologue's values out of the epilogue when the loops are flattened.
    tile_c = start - NUM_SMS
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile_mn(tile, num_pid_m, num_pid_n, GROUP_M)
        offs_m = (pid_m * BM + tl.arange(0, BM)) % M
        offs_n = (pid_n * BN + tl.arange(0, BN)) % N
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            ks = ki * BK + offs_k
            a_ptrs = a_ptr + offs_m[:, None] * sam + ks[None, :] * sak
            b_ptrs = b_ptr + ks[:, None] * sbk + offs_n[None, :] * sbn
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=ks[None, :] < K, other=0.0)
                b = tl.load(b_ptrs, mask=ks[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        tile_c += NUM_SMS
        pid_m, pid_n = _tile_mn(tile_c, num_pid_m, num_pid_n, GROUP_M)
        _store_ptr(c_ptr, acc, pid_m * BM, pid_n * BN, M, N, scm, scn, BM, BN)


@triton.jit
def _store_desc(
    c_desc,
    acc,
    off_m,
    off_n,
    BM: tl.constexpr,
    BN: tl.constexpr,
    SUBTILE: tl.constexpr,
    OUT_BF16: tl.constexpr,
):
    dtype = tl.bfloat16 if OUT_BF16 else tl.float16
    if SUBTILE:
        # Two BM x BN/2 halves: the staging buffer for the TMA store is half
        # the size, which leaves shared memory for a deeper pipeline.
        acc3 = tl.permute(tl.reshape(acc, (BM, 2, BN // 2)), (0, 2, 1))
        c0, c1 = tl.split(acc3)
        c_desc.store([off_m, off_n], c0.to(dtype))
        c_desc.store([off_m, off_n + BN // 2], c1.to(dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(dtype))


@triton.jit
def mm_tma(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    SUBTILE: tl.constexpr,
    OUT_BF16: tl.constexpr,
):
    pid_m, pid_n = _tile_mn(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    off_m = pid_m * BM
    off_n = pid_n * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        # TMA zero-fills out-of-bounds parts of a box: no masks anywhere.
        a = a_desc.load([off_m, k * BK])
        b = b_desc.load([k * BK, off_n])
        acc = tl.dot(a, b, acc)
    _store_desc(c_desc, acc, off_m, off_n, BM, BN, SUBTILE, OUT_BF16)


@triton.jit
def mm_tma_persistent(
    a,
    b,
    c,
    M,
    N,
    K,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    GROUP_M: tl.constexpr,
    SUBTILE: tl.constexpr,
    OUT_BF16: tl.constexpr,
    NUM_SMS: tl.constexpr,
    DEVICE_DESC: tl.constexpr,
    FLATTEN: tl.constexpr,
    WS: tl.constexpr,
):
    if DEVICE_DESC:
        # Built on the device, into scratch from triton.set_allocator's allocator.
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
        if SUBTILE:
            c_desc = tl.make_tensor_descriptor(
                c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2]
            )
        else:
            c_desc = tl.make_tensor_descriptor(
                c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN]
            )
    else:
        a_desc = a
        b_desc = b
        c_desc = c
    start = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BK)
    tile_c = start - NUM_SMS
    for tile in tl.range(start, num_tiles, NUM_SMS, flatten=FLATTEN, warp_specialize=WS):
        pid_m, pid_n = _tile_mn(tile, num_pid_m, num_pid_n, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a_t = a_desc.load([off_m, ki * BK])
            b_t = b_desc.load([ki * BK, off_n])
            acc = tl.dot(a_t, b_t, acc)
        tile_c += NUM_SMS
        pid_m, pid_n = _tile_mn(tile_c, num_pid_m, num_pid_n, GROUP_M)
        _store_desc(c_desc, acc, pid_m * BM, pid_n * BN, BM, BN, SUBTILE, OUT_BF16)


# --------------------------------------------------------------------------
# Variants
# --------------------------------------------------------------------------


def _cfg(bm, bn, bk, stages, warps, sub=False, group=8):
    return {
        "BM": bm,
        "BN": bn,
        "BK": bk,
        "stages": stages,
        "warps": warps,
        "sub": sub,
        "group": group,
    }


# Shared memory per stage is (BM + BN)·BK·2 bytes: 48 KiB for 128x256x64, so
# 4 stages are 192 KiB of the 227 KiB an sm_90 block may use. Persistent TMA
# kernels also hold the C tile for the TMA store (64 KiB at 128x256 bf16), so
# 4 stages fit only with the subtiled epilogue (32 KiB).
FAMILIES = {
    "tma_persistent": [
        _cfg(128, 256, 64, 3, 8),
        _cfg(128, 256, 64, 4, 8, sub=True),
        _cfg(128, 256, 64, 3, 8, sub=True),
        _cfg(256, 128, 64, 3, 8),
        _cfg(128, 128, 64, 4, 8),
        # How many tile-rows share B panels in L2 (default 8).
        _cfg(128, 256, 64, 3, 8, group=4),
        _cfg(128, 256, 64, 3, 8, group=16),
    ],
    # Fewer, longer K steps (96 KiB a stage): half the barrier round trips.
    "tma": [
        _cfg(128, 256, 64, 3, 8),
        _cfg(128, 256, 64, 4, 8),
        _cfg(256, 128, 64, 3, 8),
        _cfg(128, 256, 128, 2, 8),
        # The winner of the quick sweep with fewer/more tile-rows per group.
        _cfg(128, 256, 64, 4, 8, group=4),
        _cfg(128, 256, 64, 4, 8, group=16),
    ],
    "desc_persistent": [_cfg(128, 256, 64, 3, 8), _cfg(128, 256, 64, 4, 8, sub=True)],
    "persistent": [_cfg(128, 256, 64, 3, 8), _cfg(256, 128, 64, 3, 8), _cfg(128, 128, 64, 4, 8)],
    "grouped": [
        _cfg(128, 256, 64, 3, 8),
        _cfg(128, 256, 64, 4, 8),
        _cfg(256, 128, 64, 3, 8),
        _cfg(128, 128, 64, 4, 4),
    ],
    "desc_ws": [_cfg(128, 256, 64, 3, 8), _cfg(128, 128, 64, 4, 4), _cfg(128, 256, 64, 4, 8)],
}


def _vname(family: str, c: dict) -> str:
    return (
        f"{family} {c['BM']}x{c['BN']}x{c['BK']} s{c['stages']} w{c['warps']}"
        + (" sub" if c["sub"] else "")
        + (f" g{c['group']}" if c["group"] != 8 else "")
    )


def variants(case: dict) -> list[Variant]:
    return [Variant(_vname(f, c), f, c) for f, cfgs in FAMILIES.items() for c in cfgs]


def cases() -> list[dict]:
    out = []
    for dt in ("bf16", "fp16"):
        for M, N, K in (
            (4096, 4096, 4096),
            (8192, 8192, 8192),
            (8192, 14336, 4096),
            (8192, 4096, 14336),
        ):
            out.append(
                {
                    "label": f"{M}x{N}x{K} {dt}",
                    "M": M,
                    "N": N,
                    "K": K,
                    "dtype": dt,
                    "flops": 2.0 * M * N * K,
                    "compile_key": dt,
                    "quick": (M, N, K) == (8192, 8192, 8192)
                    or ((M, N, K) == (4096, 4096, 4096) and dt == "fp16"),
                }
            )
    return out


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


def _alloc(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cpu" if _interpreting() else "cuda")


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def setup() -> None:
    global NUM_SMS
    triton.set_allocator(_alloc)  # scratch for device-side TMA descriptors
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference is fp32
    if torch.cuda.is_available() and not _interpreting():
        NUM_SMS = torch.cuda.get_device_properties(0).multi_processor_count


def prepare(case: dict, device: str = "cuda") -> dict:
    M, N, K, dt = case["M"], case["N"], case["K"], DTYPES[case["dtype"]]
    g = torch.Generator(device=device).manual_seed(1234 + M + 7 * N + 13 * K)
    scale = K**-0.25  # each output sums K products: std about 1
    a = (torch.randn(M, K, generator=g, device=device) * scale).to(dt)
    b = (torch.randn(K, N, generator=g, device=device) * scale).to(dt)
    ref = torch.matmul(a.float(), b.float())
    return {
        "case": case,
        "a": a,
        "b": b,
        "ref": ref,
        "tol": TOL[case["dtype"]],
        "c": torch.empty(M, N, dtype=dt, device=device),
    }


def baselines(state: dict) -> dict:
    a, b = state["a"], state["b"]
    return {"cublas": lambda: torch.matmul(a, b)}


def error(state: dict, out: torch.Tensor) -> float:
    return float((out.float() - state["ref"]).abs().max())


def check(state: dict, out: torch.Tensor) -> tuple[bool, float]:
    err = error(state, out)
    tol = state["tol"]
    ok = bool(torch.allclose(out.float(), state["ref"], atol=tol, rtol=tol))
    return ok, err


def launcher(v: Variant, state: dict):
    """A no-argument callable that runs variant v into state['c'] and returns it."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    a, b, c = state["a"], state["b"], state["c"]
    M, K = a.shape
    N = b.shape[1]
    k = v.cfg
    BM, BN, BK, sub = k["BM"], k["BN"], k["BK"], k["sub"]
    opts = {"num_warps": k["warps"], "num_stages": k["stages"]}
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    bf16 = a.dtype == torch.bfloat16
    f = v.family
    if f == "grouped":

        def run():
            mm_grouped[(tiles,)](
                a,
                b,
                c,
                M,
                N,
                K,
                *a.stride(),
                *b.stride(),
                *c.stride(),
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=k["group"],
                EVEN_K=K % BK == 0,
                **opts,
            )
            return c
    elif f == "persistent":

        def run():
            mm_persistent[(min(NUM_SMS, tiles),)](
                a,
                b,
                c,
                M,
                N,
                K,
                *a.stride(),
                *b.stride(),
                *c.stride(),
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=k["group"],
                EVEN_K=K % BK == 0,
                NUM_SMS=NUM_SMS,
                **opts,
            )
            return c
    elif f == "tma":
        da = TensorDescriptor.from_tensor(a, [BM, BK])
        db = TensorDescriptor.from_tensor(b, [BK, BN])
        dc = TensorDescriptor.from_tensor(c, [BM, BN // 2 if sub else BN])

        def run():
            mm_tma[(tiles,)](
                da,
                db,
                dc,
                M,
                N,
                K,
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=k["group"],
                SUBTILE=sub,
                OUT_BF16=bf16,
                **opts,
            )
            return c
    elif f in ("tma_persistent", "desc_persistent", "desc_ws"):
        device_desc = f != "tma_persistent"
        ws = f == "desc_ws"
        if device_desc:
            args = (a, b, c)
        else:
            args = (
                TensorDescriptor.from_tensor(a, [BM, BK]),
                TensorDescriptor.from_tensor(b, [BK, BN]),
                TensorDescriptor.from_tensor(c, [BM, BN // 2 if sub else BN]),
            )

        def run():
            mm_tma_persistent[(min(NUM_SMS, tiles),)](
                *args,
                M,
                N,
                K,
                BM=BM,
                BN=BN,
                BK=BK,
                GROUP_M=k["group"],
                SUBTILE=sub,
                OUT_BF16=bf16,
                NUM_SMS=NUM_SMS,
                DEVICE_DESC=device_desc,
                # Hopper's warp specialisation does not handle flattened loops.
                FLATTEN=not ws,
                WS=ws,
                **opts,
            )
            return c
    else:
        raise ValueError(f"unknown family {f}")
    return run


def selftest(args) -> int:
    """Every variant, at its real tile sizes, on small shapes in the Triton
    interpreter: catches indexing and API mistakes before the GPU call.
    Sizes: several tiles per persistent program (NUM_SMS = 3), an M and N
    that no tile divides, and a K tail. fp16 only: the interpreter's bf16
    arithmetic is broken (numpy has no bf16), the GPU run checks bf16."""
    global NUM_SMS
    import time

    setup()
    NUM_SMS = 3
    shapes = [(384, 512, 192, "fp16"), (200, 328, 104, "fp16")]
    failures = 0
    for M, N, K, dt in shapes:
        case = {"label": f"{M}x{N}x{K} {dt}", "M": M, "N": N, "K": K, "dtype": dt}
        state = prepare(case, device="cpu")
        for v in variants(case):
            if not common.wanted(v.name, args.variants):
                continue
            t0 = time.time()
            state["c"].fill_(float("nan"))
            try:
                ok, err = check(state, launcher(v, state)())
                msg = f"{'ok ' if ok else 'BAD'} err {err:.4f}"
            except Exception as exc:  # noqa: BLE001
                ok, msg = False, "ERROR " + common._short(exc).splitlines()[-1][:150]
            failures += not ok
            print(f"{case['label']:20} {v.name:44} {msg}  ({time.time() - t0:.1f} s)", flush=True)
    print(f"selftest: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(common.main(__file__, sys.modules[__name__]))
