"""The warp-specialised Gluon matmul candidate (scripts/matmul_gluon.py).

Gluon has no interpreter, so on the CPU the kernel is compiled for sm_90 by
the installed Triton (3.6 on the GPU machine; later releases too) and the
PTX and the cubin are checked for the design the file promises: a loader
warp that gives its registers to two or three consumer warpgroups
(setmaxnreg), TMA loads on mbarriers, one wgmma step kept in flight, the
epilogue by TMA stores from two buffers per consumer, shared memory within
the 227 KiB, and no spills. On a GPU (marked gpu) every variant runs on the
benchmark shapes and ragged ones against an fp32 torch.matmul, the output
poisoned with NaN first."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Compiled in a child: gluon compiles torch-free and without a GPU, but a
# compile takes seconds and the parent may hold an interpreter-mode triton.
COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
try:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon._runtime import GluonASTSource
    from triton.experimental.gluon.language.nvidia import hopper  # noqa: F401
except Exception as e:  # no gluon in this triton: the tests skip
    print(json.dumps({"skip": f"gluon unavailable: {type(e).__name__}: {e}"}))
    sys.exit(0)
sys.path.insert(0, sys.argv[1])
import matmul_gluon as m

GL = {"bf16": gl.bfloat16, "fp16": gl.float16}
CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")

def desc(block, dt):
    lay = gl.NVMMASharedLayout.get_default_for(block, GL[dt])
    return f"tensordesc<{dt}[{block[0]}, {block[1]}],{lay!r}>"

out = {}
for wg, stages, bn, dt in ((2, 4, 256, "bf16"), (2, 3, 256, "fp16"), (3, 3, 256, "bf16"),
                           (3, 3, 256, "fp16"), (3, 4, 128, "bf16")):
    mn = m.mma_n(wg, bn)
    sig = {"a_desc": desc([m.ROWS, 64], dt), "b_desc": desc([64, mn], dt),
           "c_desc": desc([m.ROWS, m.EPI_N], dt), "M": "i32", "N": "i32", "K": "i32",
           "STAGES": "constexpr", "N_SPLIT": "constexpr"}
    src = GluonASTSource(m.matmul_ws_kernel(wg), sig,
                         constexprs={"STAGES": stages, "N_SPLIT": bn // mn})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    usage = None
    if os.path.exists(CUOBJDUMP):
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            res = subprocess.run([CUOBJDUMP, "-res-usage", f.name], capture_output=True,
                                 text=True).stdout
        usage = {key: int(v) for key, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", res)}
    out[f"{wg}-{stages}-{bn}-{dt}"] = {
        "ptx": k.asm["ptx"], "shared": k.metadata.shared, "warps": k.metadata.num_warps,
        "usage": usage, "budget": m.smem_bytes(wg, stages, bn)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    r = subprocess.run([sys.executable, "-c", COMPILE, str(ROOT / "scripts")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in out:
        pytest.skip(out["skip"])
    return out


def _key(key):
    wg, stages, bn, dt = key.split("-")
    return int(wg), int(stages), int(bn), dt


def test_matmul_gluon_compiles_for_sm90_with_its_design(compiled):
    for key, k in compiled.items():
        wg, stages, bn, dt = _key(key)
        ptx = k["ptx"]
        # 4 warps per consumer + 1 loader warp, rounded up to whole warpgroups.
        assert k["warps"] == 4 * (wg + 1), key
        # The ring and the epilogue buffers, within the 227 KiB of a block.
        assert k["budget"] <= k["shared"] <= 227 * 1024, key
        # The loader gives registers away, the consumers take them.
        assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx), key
        want = {2: 240, 3: 160}[wg]
        assert re.search(rf"setmaxnreg\.inc\.sync\.aligned\.u32\s+{want};", ptx), key
        # A and B arrive by TMA on mbarriers (Triton 3.6 names the shared
        # side ::cluster, later releases ::cta); C leaves by TMA stores.
        assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global\.mbarrier", ptx), key
        assert "mbarrier.try_wait.parity" in ptx, key
        assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx, key
        assert "fence.proxy.async.shared::cta" in ptx, key
        # wgmma with A and B both from shared memory (descriptors, no
        # {register list} for A).
        f16 = {"bf16": "bf16", "fp16": "f16"}[dt]
        assert re.search(rf"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16\.f32\.{f16}\.{f16}\s+"
                         r"\{[^}]*\},\s*%rd", ptx), key
        assert "ld.local" not in ptx and "st.local" not in ptx, key


def test_wgmma_shape_and_pipelining(compiled):
    """Two consumers: one m64n256k16 wgmma per 16 of K, one step in flight
    (wait_group 1). Three: two m64n128k16 per 16 of K on the two halves of
    B (ptxas refuses an m64n256k16 in a 512-thread kernel: 128 registers a
    thread before setmaxnreg), so the previous step is done at wait_group 2.
    BLOCK_K = 64 is 4 k16 steps, issued by every consumer."""
    for key, k in compiled.items():
        wg, stages, bn, dt = _key(key)
        ptx = k["ptx"]
        shapes = re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)", ptx)
        n = bn if wg == 2 else min(bn, 128)
        assert set(shapes) == {f"m64n{n}k16"}, (key, set(shapes))
        assert len(shapes) == wg * (bn // n) * 4, (key, len(shapes))
        in_flight = bn // n
        assert f"wgmma.wait_group.sync.aligned {in_flight};" in ptx, key
        assert "wgmma.wait_group.sync.aligned 0;" in ptx, key


def test_epilogue_stores_64_column_chunks_from_two_buffers(compiled):
    """Each consumer stores BLOCK_N / 64 chunks per tile; before writing a
    buffer it waits until only the other buffer's store is pending."""
    for key, k in compiled.items():
        wg, stages, bn, dt = _key(key)
        ptx = k["ptx"]
        assert ptx.count("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group") == wg * bn // 64, key
        waits = set(re.findall(r"cp\.async\.bulk\.wait_group\.read\s+(\d+);", ptx))
        assert waits == {"1", "0"}, (key, waits)  # per chunk, then once at the end
        assert "stmatrix" in ptx, key  # registers to shared memory 16 bytes a lane


def test_no_spills(compiled):
    """No local memory: the consumers' accumulators (128 registers a thread
    at BLOCK_N = 256) fit their setmaxnreg budget. ptxas reports the
    register count at entry: 168 with two consumers (65536 / 384), 128 with
    three (65536 / 512)."""
    for key, k in compiled.items():
        wg, *_ = _key(key)
        if k["usage"] is None:
            pytest.skip("no cuobjdump beside this triton")
        assert k["usage"]["STACK"] == 0 and k["usage"]["LOCAL"] == 0, (key, k["usage"])
        assert k["usage"]["REG"] == {2: 168, 3: 128}[wg], (key, k["usage"])


def test_stage_budget_and_supported():
    pytest.importorskip("triton.experimental.gluon")
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import matmul_gluon as m
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    # 48 KiB stages at 128 x 256, 56 KiB at 192 x 256, 40 KiB at 192 x 128,
    # beside 16 KiB of epilogue buffers per consumer.
    assert m.max_stages(2) == 4 and m.default_stages(2) == 4
    assert m.max_stages(3) == 3 and m.default_stages(3) == 3
    assert m.max_stages(3, block_n=128) == 4
    assert m.mma_n(2, 256) == 256 and m.mma_n(3, 256) == 128
    assert m.num_tiles(8192, 8192, 3) == 43 * 32 and m.num_tiles(8192, 8192, 2) == 64 * 32

    def mats(M, N, K, dtype=torch.bfloat16):
        return (torch.empty(M, K, dtype=dtype), torch.empty(K, N, dtype=dtype),
                torch.empty(M, N, dtype=dtype))

    assert m.supported(*mats(1000, 1096, 520))
    assert m.supported(*mats(8, 136, 24, torch.float16), num_wg=2)
    assert not m.supported(*mats(256, 256, 256, torch.float32))  # fp32: not wgmma bf16/fp16
    assert not m.supported(*mats(256, 260, 256))  # N * 2 bytes not a multiple of 16
    assert not m.supported(*mats(256, 256, 100))  # nor K
    a, b, c = mats(256, 256, 256)
    assert not m.supported(a.t(), b, c)  # not row-major
    assert not m.supported(a, b, c, num_wg=3, stages=4)  # 224 + 48 KiB > 227 KiB
    assert not m.supported(a, b, c, num_wg=4)


GPU_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
import matmul_gluon as m
torch.manual_seed(0)
rows = []
variants = m.variants()
# Few programs, many tiles each: the ring's phases and the epilogue buffers
# carry across tiles.
few = [(n + "-p7", dict(kw, num_programs=7)) for n, kw in variants if kw["persistent"]]
for M, N, K in m.BENCH_SHAPES + m.RAGGED_SHAPES:
    for dtype in (torch.bfloat16, torch.float16):
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        ref = a.float() @ b.float()
        for name, kw in variants + (few if (M, N, K) in m.RAGGED_SHAPES else []):
            row, _ = m._check(dtype, M, N, K, a, b, c, ref, name, kw)
            rows.append(row)
        del a, b, c, ref
print(json.dumps(rows))
"""


@pytest.mark.gpu
def test_matmul_gluon_matches_torch_on_the_gpu():
    import torch

    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon kernel is for sm_90")
    r = subprocess.run([sys.executable, "-c", GPU_CHILD, str(ROOT / "scripts")],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(rows) >= 6 * 6 * 2
    # Relative to the largest |entry|: the bf16 rounding of C is 2^-9 of it.
    bad = [row for row in rows if "err" not in row or not row["err"] < 1e-2
           or math.isnan(row["err"])]
    assert not bad, bad
