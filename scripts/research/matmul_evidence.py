"""What separates gpulab's Triton matmul from cuBLAS on a Hopper GPU.

    python3 scripts/research/matmul_evidence.py OUT.json

For each bench shape (bf16 and fp16 on 4096³, 8192³ and the two LLM MLP
projections):
  * the kernel cuBLAS runs, from torch.profiler (its name carries the tile,
    the thread-block cluster and the warp-group layout);
  * the kernel the reference picks (TMA one-tile-per-program or persistent);
  * both run back to back for `--seconds` each in steady state, with SM
    clock and board power sampled through NVML: at the power cap the
    throughput a kernel sustains is power / energy per FLOP, so TFLOP/s per
    watt says which kernel spends less energy on the same work.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from gpulab.measure.timing import ClockLog  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 14336, 4096), (8192, 4096, 14336)]


def load_reference():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ref_matmul", ROOT / "kernels" / "matmul.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernel_names(fn) -> list[str]:
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})


def steady(fn, flops: float, seconds: float) -> dict:
    """Back-to-back calls for `seconds` (no L2 flush: this is about power,
    not cold caches); throughput from CUDA events over the second half."""
    end = time.perf_counter() + seconds / 2
    while time.perf_counter() < end:  # reach the power cap first
        fn()
        torch.cuda.synchronize()
    with ClockLog() as clocks:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n = 0
        start.record()
        t_end = time.perf_counter() + seconds / 2
        while time.perf_counter() < t_end:
            for _ in range(5):
                fn()
            n += 5
            torch.cuda.synchronize()
        stop.record()
        torch.cuda.synchronize()
    ms = start.elapsed_time(stop) / n
    power = [s["power_w"] for s in clocks.samples]
    sm = [s["sm_mhz"] for s in clocks.samples]
    tflops = flops / (ms * 1e-3) / 1e12
    watts = statistics.median(power) if power else None
    return {
        "ms": ms,
        "tflops": tflops,
        "power_w": watts,
        "sm_mhz": statistics.median(sm) if sm else None,
        "gflop_per_joule": tflops * 1e3 / watts if watts else None,
        "throttle": sorted(clocks.throttle_reasons),
    }


def main() -> int:
    out_path = sys.argv[1] if len(sys.argv) > 1 else "matmul_evidence.json"
    seconds = 3.0
    ref = load_reference()
    rows = []
    for dt_name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for M, N, K in SHAPES:
            a = torch.randn(M, K, device="cuda", dtype=dt)
            b = torch.randn(K, N, device="cuda", dtype=dt)
            c = torch.empty(M, N, device="cuda", dtype=dt)
            flops = 2.0 * M * N * K
            ours = lambda a=a, b=b, c=c: ref.launch(a, b, c)  # noqa: E731
            theirs = lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)  # noqa: E731
            ours()
            row = {
                "shape": f"{M}x{N}x{K}",
                "dtype": dt_name,
                "cublas_kernels": kernel_names(theirs),
                "our_path": ref._TMA_CHOICE.get((M, N, K, dt), "pointer"),
                "ours": steady(ours, flops, seconds),
                "cublas": steady(theirs, flops, seconds),
            }
            row["speedup"] = row["cublas"]["ms"] / row["ours"]["ms"]
            rows.append(row)
            o, t = row["ours"], row["cublas"]
            print(
                f"{row['shape']:>16} {dt_name}  ours {o['tflops']:6.1f} TF {o['power_w'] or 0:5.0f} W "
                f"{o['sm_mhz'] or 0:5.0f} MHz | cuBLAS {t['tflops']:6.1f} TF {t['power_w'] or 0:5.0f} W "
                f"{t['sm_mhz'] or 0:5.0f} MHz | x{row['speedup']:.3f} | {row['cublas_kernels']}",
                flush=True,
            )
            del a, b, c, ours, theirs
            torch.cuda.empty_cache()
    meta = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    import triton

    meta["triton"] = triton.__version__
    Path(out_path).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
