"""Measured ceilings: HBM bandwidth, the L2 plateau, matmul and FMA peaks.

Run as a child process, `python -m gpulab.measure.microbench [--quick]`; it prints one
JSON event a line on stdout, so the CLI and the TUI can show progress:

    {"type": "progress", "done": 3, "total": 30, "label": "copy 2.0 GiB (torch)"}
    {"type": "row", "group": "bandwidth", ...}          one measurement
    {"type": "result", "result": {...}}                 the ceilings (see below)
    {"type": "error", "message": "..."}                 then exit 2 (e.g. no GPU)

The parent (gpulab.lab.microbench_runner) caches the result per device, where
gpulab.gpu.ceilings finds it: copy_tbs, read_tbs, write_tbs, tflops{dtype}.

How (see docs/grading.md): gpulab.measure.timing's `measure` (CUDA
events, warm-up by time, adaptive stopping, median), an L2 flush before every
timed call, random data (never zeros), and NVML clock/power/temperature logs
per row with throttling flagged. Every ceiling is the best of torch's own op
and a plain Triton kernel, each named in its row; a copy moves its bytes twice
(read + write) and is counted so.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

from gpulab.measure.microbench_measure import (
    GiB,
    MatmulShape,
    MiB,
    Steps,
    bench_bandwidth,
    bench_fma,
    bench_matmul,
    bench_sweep,
    emit,
    size_label,
)
from gpulab.wire.microbench import Ceilings, Row


def buffer_bytes(l2: int, free: int, quick: bool) -> int:
    """At least 8x the L2 and 1 GiB (2 GiB when not quick), at most a quarter of
    free memory (the copy needs two buffers plus the L2 flusher)."""
    want = max(8 * l2, (1 if quick else 2) * GiB)
    return int(min(want, free // 4)) // MiB * MiB


def sweep_sizes(quick: bool, limit: int) -> list[int]:
    top = (1 if quick else 4) * GiB
    step = 4 if quick else 2
    sizes, s = [], MiB
    while s <= min(top, limit):
        sizes.append(s)
        s *= step
    return sizes


def matmul_plan(
    torch: Any, cc: tuple[int, int], quick: bool
) -> tuple[list[MatmulShape], dict[str, str]]:
    """[(dtype, M, N, K)], and {dtype: why skipped}."""
    skipped: dict[str, str] = {}
    dtypes = ["fp32", "fp16"]
    if cc >= (8, 0):
        dtypes += ["tf32", "bf16"]
    else:
        skipped.update(tf32="needs compute capability 8.0", bf16="needs compute capability 8.0")
    if cc >= (8, 9) and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm"):
        dtypes.append("fp8")
    else:
        skipped["fp8"] = "needs compute capability 8.9 and torch._scaled_mm"
    sizes = [4096, 8192] if quick else [2048, 4096, 8192, 16384]
    plan: list[MatmulShape] = []
    for dt in dtypes:
        for s in sizes:
            if dt == "fp32" and s > 8192:
                continue  # minutes of CUDA-core work for a number 8192 already gives
            plan.append((dt, s, s, s))
    if not quick:
        plan += [(dt, 16384, 8192, 4096) for dt in dtypes if dt in ("bf16", "fp16", "fp8")]
    return plan, skipped


def _best(
    rows: list[Row], name: str, key: Literal["tbs", "tflops"]
) -> tuple[float | None, str | None]:
    cands = [r for r in rows if r["name"] == name and r.get(key)]
    if not cands:
        return None, None
    r = max(cands, key=lambda r: r[key])
    return round(r[key], 4), r["method"] + (f" {r['shape']}" if r.get("shape") else "")


def _driver() -> str | None:
    from gpulab.gpu import nvml

    try:
        return nvml.text(nvml.init().nvmlSystemGetDriverVersion())  # left open, as timing does
    except Exception:  # noqa: BLE001
        return None


def run(quick: bool = False) -> int:
    try:
        import torch
    except ImportError as exc:
        return _refuse(f"torch is not installed ({exc})")
    if not torch.cuda.is_available():
        return _refuse(
            "torch sees no CUDA GPU here (microbenchmarks measure a GPU; "
            "`gpulab probe` shows what this machine has)"
        )
    from gpulab.gpu.gpulock import gpu_timing_lock

    # Ceilings measured beside someone else's timing run would read low.
    with gpu_timing_lock(
        "gpulab probe --bench",
        gpu=0,  # it measures device 0
        on_wait=lambda m: emit({"type": "note", "text": m}),
    ):
        return _run(torch, quick)


def _run(torch: Any, quick: bool) -> int:
    started = time.monotonic()
    from importlib.metadata import version

    from gpulab.measure.timing import L2Flusher, l2_bytes

    props = torch.cuda.get_device_properties(0)
    cc = (props.major, props.minor)
    l2 = l2_bytes()
    free, _total = torch.cuda.mem_get_info()
    nbytes = buffer_bytes(l2, free, quick)
    sizes = sweep_sizes(quick, limit=free // 4)
    plan, skipped = matmul_plan(torch, cc, quick)
    steps = Steps(9 + 2 * len(sizes) + len(plan) + 1)
    budget = 1.0 if quick else 2.0
    if nbytes < max(GiB, 8 * l2):
        emit(
            {
                "type": "note",
                "text": f"only {size_label(free)} free on the GPU: bandwidth buffers "
                f"of {size_label(nbytes)}, under 1 GiB or 8x the L2, may read low",
            }
        )
    flusher = L2Flusher()
    bw = bench_bandwidth(torch, steps, nbytes, flusher, budget)
    sweep = bench_sweep(torch, steps, sizes, l2)
    mm, failed = bench_matmul(torch, steps, plan, flusher, budget)
    fma = bench_fma(torch, steps, props.multi_processor_count, budget)
    skipped.update(failed)
    rows = bw + mm + fma
    throttle = sorted({r for row in rows for r in row["clocks"].get("throttle_reasons", [])})
    result: Ceilings = {
        "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "driver": _driver(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": _safe_version(version, "triton"),
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "sms": props.multi_processor_count,
        "l2_bytes": l2,
        "buffer_bytes": nbytes,
        "quick": quick,
        "bandwidth": bw,
        "sweep": sweep,
        "matmul": mm,
        "fma": fma,
        "skipped": skipped,
        "tflops": {},
        "tflops_method": {},
        "throttled": any(row["clocks"].get("throttled") for row in rows),
        "throttle_reasons": throttle,
    }
    result["copy_tbs"], result["copy_method"] = _best(bw, "copy", "tbs")
    result["read_tbs"], result["read_method"] = _best(bw, "read", "tbs")
    result["write_tbs"], result["write_method"] = _best(bw, "write", "tbs")
    for dt in dict.fromkeys(r["name"] for r in mm):
        result["tflops"][dt], result["tflops_method"][dt] = _best(mm, dt, "tflops")
    if fma:
        result["fma_tflops"] = round(fma[0]["tflops"], 6)
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    steps.finish()
    emit({"type": "result", "result": result})
    return 0


def _safe_version(version: Callable[[str], str], dist: str) -> str | None:
    try:
        return version(dist)
    except Exception:  # noqa: BLE001
        return None


def _refuse(message: str) -> int:
    emit({"type": "error", "message": message})
    print(f"gpulab microbench: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpulab.measure.microbench", description=__doc__.split("\n")[0]
    )
    p.add_argument("--quick", action="store_true", help="fewer sizes and shapes (about a minute)")
    args = p.parse_args(argv)
    return run(quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
