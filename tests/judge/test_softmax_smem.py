"""The shared-memory-resident softmax candidate (kernels/hopper/softmax_smem.py),
a Gluon kernel for sm_90. Gluon has no interpreter, so here it is compiled
for sm_90 by the installed Triton and the PTX checked for its design: rows
in by TMA on mbarriers and out by TMA stores, 16-byte shared-memory
accesses, a loader warp that gives its registers away, and no local memory.
Its numbers come from `scripts/sweeps/sweep_softmax.py --only=smem` on a GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("softmax_smem")

ROOT = Path(__file__).resolve().parents[2]

COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from kernels.hopper import softmax_smem as m

out = {}
for n, slots, cr, w, one_exp in ((32768, 12, 32, 8, 0), (16384, 3, 64, 4, 0),
                                 (32768, 6, 64, 16, 1)):
    lay = m.shared_layout(torch.float16)
    d = f"tensordesc<fp16[{cr}, {m.BOX}],{lay!r}>"
    sig = {"x_desc": d, "y_desc": d, "n_rows": "i32", "R": "constexpr", "NSLOT": "constexpr",
           "ONE_EXP": "constexpr"}
    src = GluonASTSource(m.softmax_smem, sig,
                         constexprs={"R": n // m.BOX, "NSLOT": slots, "ONE_EXP": bool(one_exp)})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w})
    out[f"{n}-{slots}-{cr}-{w}-{one_exp}"] = {"ptx": k.asm["ptx"], "shared": k.metadata.shared}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    r = subprocess.run(
        [sys.executable, "-c", COMPILE, str(ROOT)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_softmax_smem_compiles_for_sm90_with_its_design(compiled):
    for key, k in compiled.items():
        ptx, n, slots, cr, w, one_exp = k["ptx"], *map(int, key.split("-"))
        # The ring of chunk slots is the shared memory: slots x cr lines of
        # 256 fp16.
        ring = slots * cr * 256 * 2
        assert ring <= k["shared"] <= ring + 4096, key
        assert slots >= n // 256 // cr + 1, key  # a row and a chunk: no deadlock
        # TMA loads completing on an mbarrier (Triton 3.6 names the shared
        # side ::cluster, later releases ::cta), and TMA stores.
        assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global\.mbarrier", ptx), key
        assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx, key
        assert "ld.shared.v4" in ptx, key  # 16-byte loads (stores: the test below)
        assert "fence.proxy.async.shared::cta" in ptx, key  # writes ordered for the TMA
        assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx), key  # the loader
        assert "ld.local" not in ptx and "st.local" not in ptx, key
        # exp2 a thread runs per row: one per element on the one-exp path;
        # two per element (and a few per line) on the default one.
        per_thread = n // (w * 32)
        ex2 = len(re.findall(r"ex2\.approx", ptx))
        assert ex2 == per_thread if one_exp else ex2 > 2 * per_thread, (key, ex2)


@pytest.mark.triton_version("3.6", "3.9")
def test_softmax_smem_stores_to_shared_memory_16_bytes_at_a_time(compiled):
    # Triton 3.6 and 3.9 vectorise the stores of the exp'd row into the ring
    # to 16 bytes; Triton 3.8 emits narrower ones for the same kernel (seen
    # with torch 2.14.1), a codegen difference the GPU sweep would measure.
    for key, k in compiled.items():
        assert "st.shared.v4" in k["ptx"], key


def test_a_slot_is_released_once_all_but_the_newest_store_have_read_it(compiled):
    # After each chunk's store: wait until at most one store is still
    # reading shared memory, then hand the slot before back; at the end,
    # wait for all.
    for key, k in compiled.items():
        waits = set(re.findall(r"cp\.async\.bulk\.wait_group\.read\s+(\d+);", k["ptx"]))
        assert waits == {"1", "0"}, key


def test_supported_needs_a_row_and_a_chunk_in_the_ring():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT))
    m = pytest.importorskip("kernels.hopper.softmax_smem")
    row = torch.empty(1, 32768, dtype=torch.float16)  # 128 lines: 4 chunks of 32
    assert not m.supported(row, 4, 32)  # the row alone: pass 1 would wait forever
    assert m.supported(row, 5, 32)
    assert m.supported(row, 12, 32) and not m.supported(row, 13, 32)  # 200 KiB
    assert not m.supported(row, 12, 32, per_sm=2)
    assert not m.supported(torch.empty(1, 1000, dtype=torch.float16), 12, 32)  # not whole lines


@pytest.mark.gpu
def test_softmax_smem_matches_torch_on_the_gpu():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Gluon kernel is for sm_90")
    sys.path.insert(0, str(ROOT))
    from kernels.hopper import softmax_smem as m

    torch.manual_seed(0)
    bad = []
    # Fewer rows than programs, a ragged last round, both 16-bit dtypes.
    for rows, cols in ((1, 4096), (7, 32768), (300, 16384), (1000, 8192)):
        for dtype in (torch.float16, torch.bfloat16):
            x = torch.randn(rows, cols, device="cuda", dtype=dtype) * 4
            want = torch.softmax(x.float(), -1)
            for cr, w, per_sm in ((32, 8, 1), (16, 8, 1), (64, 4, 1), (32, 8, 2), (16, 16, 1)):
                slots = 200 * 1024 // per_sm // (cr * m.BOX * 2)
                if not m.supported(x, slots, cr, per_sm):
                    continue
                for n in {slots, cols // m.BOX // cr + 1}:  # deepest ring, and the least
                    for one_exp in (False, True):
                        # Through the JIT, then the Launcher's direct launch.
                        launcher = m.Launcher(
                            rows,
                            cols,
                            dtype,
                            x.device,
                            slots=n,
                            chunk_rows=cr,
                            num_warps=w,
                            per_sm=per_sm,
                            one_exp=one_exp,
                        )
                        for _ in range(2):
                            y = torch.full_like(x, float("nan"))
                            launcher(x, y)
                            err = float((y.float() - want).abs().max())
                            if not err < 2e-3:
                                bad.append((rows, cols, str(dtype), cr, w, per_sm, n, one_exp, err))
    assert not bad, bad


def test_reference_keeps_the_fastest_candidate_that_matches(monkeypatch):
    """kernels/softmax.py's first call of a shape: a candidate that raises
    or disagrees with the Triton kernel is dropped, however fast; of the
    rest the fastest is kept (timings faked: this runs on the CPU)."""
    import importlib.util

    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location(
        "ref_softmax_choice", ROOT / "kernels" / "softmax.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    last = [None]

    def launcher(name, wrong=False, broken=False):
        def fn(x, y):
            last[0] = name
            if broken:
                raise RuntimeError("no Gluon here")
            y.copy_(torch.softmax(x.float(), -1).to(y.dtype))
            if wrong:
                y[0, 0] += 0.5

        return fn

    times = {"triton": 2.0, "good": 1.0, "slow": 3.0, "wrong": 0.5, "broken": 0.1, "noise": 1.95}
    monkeypatch.setattr(mod, "_launch_triton", launcher("triton"))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(triton.testing, "do_bench", lambda f, **kw: (f(), times[last[0]])[1])
    x = torch.randn(4, 512, dtype=torch.float16)
    y = torch.empty_like(x)
    launchers = {
        "triton": mod._launch_triton,
        "slow": launcher("slow"),
        "wrong": launcher("wrong", wrong=True),
        "broken": launcher("broken", broken=True),
        "good": launcher("good"),
    }
    assert mod._choose(x, y, launchers) == "good"
    del launchers["good"]
    assert mod._choose(x, y, launchers) == "triton"
    launchers["noise"] = launcher("noise")  # 2.5% faster: within the margin
    assert mod._choose(x, y, launchers) == "triton"
    # fp32, where y.float() is y itself: the expected output must be a copy,
    # or a candidate would be compared with its own output and always pass.
    x32, y32 = x.float(), y.float()
    assert (
        mod._choose(
            x32,
            y32,
            {
                "triton": mod._launch_triton,
                "wrong": launcher("wrong", wrong=True),
                "slow": launcher("slow"),
            },
        )
        == "triton"
    )


def test_reference_finds_the_smem_kernel_in_kernels_hopper(monkeypatch):
    """softmax.py loads the Gluon kernel by path; where it misses the file
    it falls back to the Triton kernels without a word, so check the path."""
    import importlib.util

    pytest.importorskip("triton.experimental.gluon")
    monkeypatch.delenv("GPULAB_SOFTMAX_SMEM", raising=False)
    spec = importlib.util.spec_from_file_location(
        "ref_softmax_smem_path", ROOT / "kernels" / "softmax.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    smem = mod._smem_module()
    assert smem is not None and hasattr(smem, "softmax_smem")
    assert Path(smem.__file__) == ROOT / "kernels" / "hopper" / "softmax_smem.py"
