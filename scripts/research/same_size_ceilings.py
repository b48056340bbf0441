"""What the best plain copies reach at the size of each near-miss kernel,
timed exactly as `gpulab bench` times (CUDA events, the 480 MB L2 flush
before every call), beside the kernel itself and the 2 GiB copy the bench
divides by.

    python3 scripts/research/same_size_ceilings.py OUT.json

The bench's "fraction of the copy ceiling" divides by a 2 GiB cudaMemcpy.
A 268 MB kernel pays the same launch, ramp-up and tail as a 2 GiB one but
over an eighth of the bytes, so the question for a kernel at 89-90% of
that ceiling is what a copy of its own bytes reaches. Three copies:
  memcpy   torch's copy_ (a cudaMemcpy device to device)
  neg      torch.neg into a preallocated output: torch's vectorised
           elementwise kernel, one read and one write a byte
  triton   the probe's Triton copy kernel, best of the block sizes below
           (torch.neg's blocks are 2048 elements, 128 threads)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpulab.measure.microbench_kernels import copy as triton_copy  # noqa: E402
from gpulab.measure.timing import L2Flusher, measure  # noqa: E402

# (elements a program, warps): 16-byte accesses, 1 to 8 a thread
TRITON_COPIES = [(1024, 4), (2048, 4), (2048, 2), (4096, 4), (4096, 8), (8192, 8), (16384, 8)]


def copies(x: torch.Tensor, flusher: L2Flusher) -> dict:
    y = torch.empty_like(x)
    flat_x, flat_y = x.view(-1), y.view(-1)
    out = {
        "memcpy": measure(lambda: y.copy_(x), flusher=flusher)["ms"],
        "neg": measure(lambda: torch.neg(x, out=y), flusher=flusher)["ms"],
    }
    each = {}
    for block, warps in TRITON_COPIES:
        each[f"{block} w{warps}"] = measure(
            lambda b=block, w=warps: triton_copy(flat_y, flat_x, b, w), flusher=flusher
        )["ms"]
    out["triton"] = min(each.values())
    out["triton_each"] = each
    return out


def copy_ceiling_tbs() -> float:
    src = torch.randn(512 * 1024 * 1024, device="cuda")  # 2 GiB, as gpulab.targets.bench
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / (measure(lambda: dst.copy_(src))["ms"] * 1e-3) / 1e12


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else "same_size_ceilings.json"
    flusher = L2Flusher()
    ceiling_tbs = copy_ceiling_tbs()
    torch.cuda.empty_cache()
    print(f"2 GiB copy ceiling: {ceiling_tbs:.3f} TB/s", flush=True)

    from kernels.rope_rmsnorm import rmsnorm_rope
    from kernels.softmax import softmax

    rows = []
    for label, shape in (
        ("softmax fp16 4096x16384", (4096, 16384)),
        ("softmax fp16 2048x32768", (2048, 32768)),
    ):
        x = torch.randn(*shape, device="cuda", dtype=torch.float16)
        nbytes = 2 * x.numel() * 2
        row = {"case": label, "bytes": nbytes, **copies(x, flusher)}
        row["kernel"] = measure(lambda x=x: softmax(x), flusher=flusher)["ms"]
        rows.append(row)
    S, H, D = 16384, 32, 128
    x = torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    ang = torch.rand(S, D // 2, device="cuda")
    cos, sin = ang.cos(), ang.sin()
    row = {
        "case": "rope_rmsnorm fwd 1x16384x32x128 bf16 (copies: x alone)",
        "bytes": 2 * x.numel() * 2 + 2 * cos.numel() * 4,
        **copies(x, flusher),
    }
    row["kernel"] = measure(lambda: rmsnorm_rope(x, w, cos, sin), flusher=flusher)["ms"]
    row["copy_bytes"] = 2 * x.numel() * 2
    rows.append(row)

    for r in rows:
        copy_bytes = r.get("copy_bytes", r["bytes"])
        r["fraction_of_ceiling"] = {
            k: (copy_bytes if k != "kernel" else r["bytes"]) / (r[k] * 1e-3) / 1e12 / ceiling_tbs
            for k in ("memcpy", "neg", "triton", "kernel")
        }
        print(
            f"{r['case']}: "
            + ", ".join(
                f"{k} {r[k] * 1e3:.1f} us ({r['fraction_of_ceiling'][k]:.1%})"
                for k in ("memcpy", "neg", "triton", "kernel")
            )
            + "; triton copies "
            + ", ".join(f"{k} {v * 1e3:.1f}" for k, v in r["triton_each"].items()),
            flush=True,
        )
    import triton

    Path(out_path).write_text(
        json.dumps(
            {
                "meta": {
                    "device": torch.cuda.get_device_name(0),
                    "torch": torch.__version__,
                    "triton": triton.__version__,
                    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                "ceiling_tbs": ceiling_tbs,
                "rows": rows,
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
