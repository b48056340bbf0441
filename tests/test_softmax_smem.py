"""The shared-memory-resident softmax candidate (scripts/softmax_smem.py),
a Gluon kernel for sm_90. Gluon has no interpreter, so here it is compiled
for sm_90 by the installed Triton and the PTX checked for its design: rows
in by TMA on mbarriers and out by TMA stores, 16-byte shared-memory
accesses, a loader warp that gives its registers away, and no local memory.
Its numbers come from `scripts/sweep_softmax.py --only=smem` on a GPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

COMPILE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
import softmax_smem as m

out = {}
for n, nbuf, cr, w in ((32768, 3, 32, 8), (16384, 2, 64, 4)):
    lay = m.shared_layout(torch.float16)
    d = f"tensordesc<fp16[{cr}, {m.BOX}],{lay!r}>"
    sig = {"x_desc": d, "y_desc": d, "n_rows": "i32", "R": "constexpr", "NBUF": "constexpr"}
    src = GluonASTSource(m.softmax_smem_kernel(w), sig, constexprs={"R": n // m.BOX, "NBUF": nbuf})
    k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": w})
    out[f"{n}-{nbuf}"] = {"ptx": k.asm["ptx"], "shared": k.metadata.shared}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    r = subprocess.run([sys.executable, "-c", COMPILE, str(ROOT / "scripts")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_softmax_smem_compiles_for_sm90_with_its_design(compiled):
    for key, k in compiled.items():
        ptx, n, nbuf = k["ptx"], *map(int, key.split("-"))
        # The row buffers are the shared memory: nbuf rows of fp16.
        assert nbuf * n * 2 <= k["shared"] <= nbuf * n * 2 + 4096, key
        # TMA loads completing on an mbarrier (Triton 3.6 names the shared
        # side ::cluster, later releases ::cta), and TMA stores.
        assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global\.mbarrier", ptx), key
        assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx, key
        assert "ld.shared.v4" in ptx and "st.shared.v4" in ptx, key  # 16-byte accesses
        assert "fence.proxy.async.shared::cta" in ptx, key  # writes ordered for the TMA
        assert re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx), key  # the loader
        assert "ld.local" not in ptx and "st.local" not in ptx, key


def test_release_waits_only_for_the_previous_row_with_three_buffers(compiled):
    # Three buffers: wait until this row's 4 chunk stores are the only ones
    # left (32768 / 256 / 32 = 4 chunks); two buffers: wait for all.
    def waits(key):
        return set(re.findall(r"cp\.async\.bulk\.wait_group\.read\s+(\d+);",
                              compiled[key]["ptx"]))
    assert waits("32768-3") == {"4", "0"}  # per row, then once at the end
    assert waits("16384-2") == {"0"}
