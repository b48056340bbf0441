"""Validate gpulab's timing harness on a GPU (issue: honest timing).

For a few kernels of 50 µs and more: time each twice with
gpulab.measure.timing.measure and once with triton.testing.do_bench, and
report the run-to-run agreement (target: within 2%) and the agreement with
do_bench's median (target: within 5%). Prints a table and writes JSON to the
path given as the first argument (default: timing_validation.json).
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

import torch
import triton
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from gpulab.measure.timing import L2Flusher, measure  # noqa: E402


def load_reference(name: str):
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ref_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    out_path = Path(sys.argv[1] if len(sys.argv) > 1 else "timing_validation.json")
    softmax = load_reference("softmax").softmax
    g = torch.Generator(device="cuda").manual_seed(0)
    x1 = torch.randn(2048, 32768, device="cuda", dtype=torch.float32, generator=g)
    x2 = torch.randn(8192, 4096, device="cuda", dtype=torch.float16, generator=g)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    big = torch.randn(256 * 1024 * 1024, device="cuda", dtype=torch.float32, generator=g)
    dst = torch.empty_like(big)
    kernels = {
        "softmax 2048x32768 fp32 (triton)": lambda: softmax(x1),
        "softmax 8192x4096 fp16 (triton)": lambda: softmax(x2),
        "torch.softmax 2048x32768 fp32": lambda: torch.softmax(x1, -1),
        "matmul 8192^3 bf16 (cuBLAS)": lambda: torch.matmul(a, b),
        "copy 1 GiB fp32": lambda: dst.copy_(big),
    }
    flusher = L2Flusher()
    rows = []
    for name, fn in kernels.items():
        t1 = measure(fn, flusher=flusher)
        t2 = measure(fn, flusher=flusher)
        db = do_bench(fn, warmup=100, rep=500, return_mode="median")
        rows.append(
            {
                "kernel": name,
                "run1_ms": t1["ms"],
                "run2_ms": t2["ms"],
                "do_bench_ms": db,
                "reps": [t1["reps"], t2["reps"]],
                "rse": [t1["rse"], t2["rse"]],
                "spread_ms": [t1["p20_ms"], t1["p80_ms"]],
                "run_to_run": abs(t1["ms"] - t2["ms"]) / min(t1["ms"], t2["ms"]),
                "vs_do_bench": abs(t1["ms"] - db) / db,
                "clocks": t1["clocks"],
            }
        )
    info = {
        "device": torch.cuda.get_device_name(0),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "rows": rows,
    }
    out_path.write_text(json.dumps(info, indent=2))
    print(f"{info['device']}  torch {info['torch']}  triton {info['triton']}")
    print(f"{'kernel':36} {'run1 µs':>9} {'run2 µs':>9} {'do_bench':>9} {'r2r':>6} {'vs db':>6}")
    for r in rows:
        print(
            f"{r['kernel']:36} {r['run1_ms'] * 1e3:9.1f} {r['run2_ms'] * 1e3:9.1f} "
            f"{r['do_bench_ms'] * 1e3:9.1f} {r['run_to_run']:6.1%} {r['vs_do_bench']:6.1%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
