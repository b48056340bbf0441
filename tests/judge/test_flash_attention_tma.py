"""The reference's Hopper (TMA) path, run in the Triton interpreter on the
CPU: the GPU picks it for every bench shape, so a bug in it must fail here
and not only on an H200. In a child process: TRITON_INTERPRET must be set
before triton is imported, and this process may have imported it already."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import importlib.util, json, math, os, sys
os.environ["TRITON_INTERPRET"] = "1"
import torch
spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec); spec.loader.exec_module(ref)
torch.manual_seed(0)
out = []
# Sq != Sk (non-causal), several key tiles, the causal diagonal at block 0
# and further down; BLOCK_M = 2 x BLOCK_N at D = 64.
for B, H, Sq, Sk, D, causal in ((1, 2, 256, 384, 64, False), (2, 1, 256, 256, 64, True),
                                (1, 1, 128, 256, 128, False), (1, 2, 256, 256, 128, True)):
    q = torch.randn(B, H, Sq, D, dtype=torch.float16)
    k = torch.randn(B, H, Sk, D, dtype=torch.float16)
    v = torch.randn(B, H, Sk, D, dtype=torch.float16)
    o = torch.full_like(q, float("nan"))
    ref.launch_tma(q, k, v, o, causal, 1 / math.sqrt(D), ref.TMA_TILES[D])
    want = torch.nn.functional.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal)
    out.append({"case": [B, H, Sq, Sk, D, causal],
                "err": float((o.double() - want).abs().max())})
print(json.dumps(out))
"""


def test_tma_path_matches_sdpa_in_the_interpreter():
    r = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "kernels" / "flash_attention.py")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    for row in json.loads(r.stdout.strip().splitlines()[-1]):
        # fp16 output of an fp32-accumulated softmax: a few fp16 ulps of ~1.
        assert row["err"] < 5e-3, row
