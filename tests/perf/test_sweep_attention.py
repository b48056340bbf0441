"""The FlashAttention sweep's tricks that can be checked on the CPU: the
polynomial exp2 of the tma_poly family (FlashAttention-4's) against
torch.exp2, and the hand-pipelined tma_pipe loop against the reference on
shapes that hit its edges (one key tile only, the causal diagonal at the
first tile, several unmasked tiles before it). Both in the Triton
interpreter, in a child process: TRITON_INTERPRET must be set before triton
is imported, and this process may have imported it already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, os, sys
os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, sys.argv[1])
import torch, triton, triton.language as tl
import sweep_attention as sa

@triton.jit
def exp2_kernel(X, Y, POLY: tl.constexpr, DEG: tl.constexpr, BN: tl.constexpr):
    offs = tl.program_id(0) * 64 * BN + tl.arange(0, 64)[:, None] * BN + tl.arange(0, BN)[None, :]
    tl.store(Y + offs, sa._exp2_mixed(tl.load(X + offs), POLY, DEG))

out = {}
BN = 64
x = torch.linspace(-126.0, 0.0, 64 * BN * 64, dtype=torch.float64).float()
masked = torch.tensor([-126.5, -150.0, -1e6, -1e30, float("-inf")] * (64 * BN // 5 + 1))[:64 * BN]
x = torch.cat([x, masked])
n = x.numel() - masked.numel()
for poly, deg in ((1, 3), (1, 4), (4, 3)):
    y = torch.empty_like(x)
    exp2_kernel[(x.numel() // (64 * BN),)](x, y, poly, deg, BN)
    ref = torch.exp2(x[:n].double())
    rel = float(((y[:n].double() - ref) / ref).abs().max())
    out[f"poly{poly}_deg{deg}"] = {"rel": rel, "nan": int(torch.isnan(y).sum()),
                                   "masked_max": float(y[n:].max())}

sa.setup()
bad = []
for S in (128, 384):
    for causal in (False, True):
        case = {"label": f"S{S}", "B": 1, "H": 2, "S": S, "D": 64, "causal": causal}
        st = sa.prepare(case, device="cpu", dtype=torch.float16)
        for v in sa.variants(case):
            if v.name not in ("tma_pipe 128x128 w8 s3 pv", "tma_pipe 128x128 w8 s3 qk",
                              "tma_pipe 128x64 w4 s3 pv", "tma_poly 128x64 w4 s3 p1/2"):
                continue
            st["o"].fill_(float("nan"))
            ok, err = sa.check(st, sa.launcher(v, st)())
            if not ok:
                bad.append([S, causal, v.name, err])
out["bad"] = bad
print(json.dumps(out))
"""


def test_poly_exp2_and_pipelined_loop_in_interpreter():
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "scripts" / "sweeps")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # Degree 3: 7.5e-5 on normal results, 1.4e-4 just above -126 (a denormal).
    assert out["poly1_deg3"]["rel"] < 1.5e-4, out
    assert out["poly1_deg4"]["rel"] < 1e-5, out
    assert out["poly4_deg3"]["rel"] < 1.5e-4, out
    for k in ("poly1_deg3", "poly1_deg4", "poly4_deg3"):
        assert out[k]["nan"] == 0 and out[k]["masked_max"] < 1e-30, out
    assert out["bad"] == [], out["bad"]
