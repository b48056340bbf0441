"""Measured ceilings: HBM bandwidth, the L2 plateau, matmul and FMA peaks.

Run as a child process, `python -m gpulab.microbench [--quick]`; it prints one
JSON event a line on stdout, so the CLI and the TUI can show progress:

    {"type": "progress", "done": 3, "total": 30, "label": "copy 2.0 GiB (torch)"}
    {"type": "row", "group": "bandwidth", ...}          one measurement
    {"type": "result", "result": {...}}                 the ceilings (see below)
    {"type": "error", "message": "..."}                 then exit 2 (e.g. no GPU)

The parent (gpulab.microbench_runner) caches the result per device, where
gpulab.ceilings finds it: copy_tbs, read_tbs, write_tbs, tflops{dtype}.

How (see docs/grading.md): gpulab.grading.timing's `measure` (CUDA
events, warm-up by time, adaptive stopping, median), an L2 flush before every
timed call, random data (never zeros), and NVML clock/power/temperature logs
per row with throttling flagged. Every ceiling is the best of torch's own op
and a plain Triton kernel, each named in its row; a copy moves its bytes twice
(read + write) and is counted so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

GiB, MiB = 2**30, 2**20
DEVICE = "cuda"  # a test's dry run points this at the CPU, with CUDA's calls faked
FMA_ITERS, FMA_PROGRAMS_PER_SM = 1024, 64


def emit(event: dict[str, Any]) -> None:
    print(json.dumps(event, default=str), flush=True)


class Steps:
    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0

    def next(self, label: str) -> None:
        """Announce the step about to run; `done` counts the steps finished."""
        emit({"type": "progress", "done": self.done, "total": self.total, "label": label})
        self.done += 1

    def finish(self) -> None:
        emit({"type": "progress", "done": self.total, "total": self.total, "label": "done"})


def _row(group: str, name: str, method: str, t: dict[str, Any], **extra: Any) -> dict[str, Any]:
    row = {"group": group, "name": name, "method": method, "ms": t["ms"],
           "min_ms": t["min_ms"], "p20_ms": t["p20_ms"], "p80_ms": t["p80_ms"], "reps": t["reps"],
           "clocks": t.get("clocks", {}), **extra}
    emit({"type": "row", **row})
    return row


def buffer_bytes(l2: int, free: int, quick: bool) -> int:
    """At least 8x the L2 and 1 GiB (2 GiB when not quick), at most a quarter of
    free memory (the copy needs two buffers plus the L2 flusher)."""
    want = max(8 * l2, (1 if quick else 2) * GiB)
    return int(min(want, free // 4)) // MiB * MiB


def bench_bandwidth(torch: Any, steps: Steps, nbytes: int, flusher: Any,
                    budget: float) -> list[dict[str, Any]]:
    from gpulab import microbench_kernels as K
    from gpulab.grading.timing import measure

    n = nbytes // 4
    src = torch.rand(n, device=DEVICE)
    dst = torch.empty_like(src)
    partial = torch.empty(triton_cdiv(n, 1024), device=DEVICE)
    gib = _size(nbytes)
    rows = []
    fill_value = 1.2345  # not zero: writes of zeros could be special-cased

    def check_copy() -> bool:
        return bool(torch.equal(dst, src))

    def check_fill() -> bool:
        return bool((dst == torch.tensor(fill_value, device=DEVICE)).all())

    chunk = 2**26  # float64 sums chunk by chunk: a float64 copy of the buffer is 2x its size
    want = sum(float(src[i:i + chunk].double().sum()) for i in range(0, n, chunk))

    def check_read(total: Any) -> Any:
        return lambda: abs(float(total()) - want) <= 1e-3 * abs(want)

    plans = [
        ("copy", "torch: dst.copy_(src)", lambda: dst.copy_(src), 2, check_copy),
        # Small programs too: at 134 MB an H200 copied 4-6% faster in 2 KB
        # programs than in 8 KB ones; see BENCHMARKS.md, "Counters, and
        # copies of the same bytes".
        ("copy", "triton: copy_kernel BLOCK=512 warps=4",
         lambda: K.copy(dst, src, 512, 4), 2, check_copy),
        ("copy", "triton: copy_kernel BLOCK=4096 warps=4",
         lambda: K.copy(dst, src, 4096, 4), 2, check_copy),
        ("copy", "triton: copy_kernel BLOCK=8192 warps=8",
         lambda: K.copy(dst, src, 8192, 8), 2, check_copy),
        ("read", "torch: torch.sum(x)", lambda: torch.sum(src), 1,
         check_read(lambda: torch.sum(src))),
        ("read", "triton: read_kernel BLOCK=4096 warps=4",
         lambda: K.read(src, partial, 4096, 4), 1,
         check_read(lambda: partial[:triton_cdiv(n, 4096)].double().sum())),
        ("read", "triton: read_kernel BLOCK=8192 warps=8",
         lambda: K.read(src, partial, 8192, 8), 1,
         check_read(lambda: partial[:triton_cdiv(n, 8192)].double().sum())),
        ("write", "torch: x.fill_(v)", lambda: dst.fill_(fill_value), 1, check_fill),
        ("write", "triton: fill_kernel BLOCK=4096 warps=4",
         lambda: K.fill(dst, fill_value, 4096, 4), 1, check_fill),
    ]
    for kind, method, fn, moves, check in plans:
        steps.next(f"{kind} {gib} ({method.split(':')[0]})")
        try:
            t = measure(fn, flusher=flusher, budget_s=budget)
            fn()
            torch.cuda.synchronize()
            if not check():
                emit({"type": "note", "text": f"{kind} via {method} gave a wrong result; "
                      "left out"})
                continue
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the rest
            emit({"type": "note", "text": f"{kind} via {method} failed: {exc}"})
            continue
        counted = moves * nbytes
        rows.append(_row("bandwidth", kind, method, t, buffer_bytes=nbytes, bytes=counted,
                         counted="read + write" if moves == 2 else kind,
                         tbs=counted / (t["ms"] * 1e-3) / 1e12))
    src = dst = partial = None  # drop the buffers before the next stage
    torch.cuda.empty_cache()
    return rows


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def sweep_sizes(quick: bool, limit: int) -> list[int]:
    top = (1 if quick else 4) * GiB
    step = 4 if quick else 2
    sizes, s = [], MiB
    while s <= min(top, limit):
        sizes.append(s)
        s *= step
    return sizes


def bench_sweep(torch: Any, steps: Steps, sizes: list[int], l2: int) -> list[dict[str, Any]]:
    """Copy and read bandwidth by buffer size, without an L2 flush: buffers that
    fit in the L2 are served from it (the plateau), larger ones from HBM.

    Small copies take well under a microsecond, less than a launch costs, so
    each timed call is a CUDA graph of k copies (k * size >= 256 MiB)."""
    from gpulab.grading.timing import measure

    rows = []
    for size in sizes:
        src = torch.rand(size // 4, device=DEVICE)
        dst = torch.empty_like(src)
        k = max(1, min(512, (256 * MiB) // size))
        # An elementwise kernel, not copy_: inside a CUDA graph copy_ becomes a
        # memcpy node served by the copy engines (2.76 TB/s for 1 GiB on an
        # H200, against 4.25 for the same copy launched as a kernel).
        for kind, op, moves in (
                ("copy", lambda src=src, dst=dst: torch.mul(src, 1.0, out=dst), 2),
                ("read", lambda src=src: torch.sum(src), 1)):
            steps.next(f"sweep {kind} {_size(size)}")
            fn, graphed = _graphed(torch, op, k)
            try:
                t = measure(fn, budget_s=0.5, warmup_s=0.05, log_clocks=False)
            except Exception as exc:  # noqa: BLE001
                emit({"type": "note", "text": f"sweep {kind} {_size(size)} failed: {exc}"})
                continue
            per_call = t["ms"] / k
            rows.append(_row("sweep", kind, "torch", t, size_bytes=size, calls=k,
                             cuda_graph=graphed, per_call_ms=per_call,
                             fits_l2=moves * size <= l2,
                             tbs=moves * size / (per_call * 1e-3) / 1e12))
        src = dst = None  # free before the next size
    torch.cuda.empty_cache()
    return rows


def _graphed(torch: Any, op: Any, k: int) -> tuple[Any, bool]:
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up off the capture, as CUDA graphs require
            for _ in range(3):
                op()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(k):
                op()
        return g.replay, True
    except Exception:  # noqa: BLE001 - no graphs: time plain launches (slower, said so)
        torch.cuda.synchronize()

        def loop() -> None:
            for _ in range(k):
                op()

        return loop, False


def _size(b: int) -> str:
    return f"{b / GiB:g} GiB" if b >= GiB else f"{b / MiB:g} MiB"


def matmul_plan(torch: Any, cc: tuple[int, int], quick: bool) -> tuple[list, dict[str, str]]:
    """[(dtype, M, N, K)], and {dtype: why skipped}."""
    skipped = {}
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
    plan = []
    for dt in dtypes:
        for s in sizes:
            if dt == "fp32" and s > 8192:
                continue  # minutes of CUDA-core work for a number 8192 already gives
            plan.append((dt, s, s, s))
    if not quick:
        plan += [(dt, 16384, 8192, 4096) for dt in dtypes if dt in ("bf16", "fp16", "fp8")]
    return plan, skipped


def _matmul_fn(torch: Any, dt: str, m: int, n: int, k: int) -> Any:
    if dt == "fp8":
        e4m3 = torch.float8_e4m3fn
        a = torch.randn(m, k, device=DEVICE).to(e4m3)
        b = torch.randn(n, k, device=DEVICE).to(e4m3).t()  # column-major, as cuBLAS wants
        one = torch.ones((), device=DEVICE)
        return lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16, use_fast_accum=True)
    dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16,
             "bf16": torch.bfloat16}[dt]
    a = torch.randn(m, k, device=DEVICE, dtype=dtype)
    b = torch.randn(k, n, device=DEVICE, dtype=dtype)
    c = torch.empty(m, n, device=DEVICE, dtype=dtype)
    return lambda: torch.mm(a, b, out=c)


def bench_matmul(torch: Any, steps: Steps, plan: list, flusher: Any,
                 budget: float) -> tuple[list[dict[str, Any]], dict[str, str]]:
    from gpulab.grading.timing import measure

    rows, failed = [], {}
    for dt, m, n, k in plan:
        shape = f"{m}x{n}x{k}"
        steps.next(f"matmul {dt} {shape}")
        if dt in failed:
            continue
        torch.set_float32_matmul_precision("high" if dt == "tf32" else "highest")
        try:
            fn = _matmul_fn(torch, dt, m, n, k)
            t = measure(fn, flusher=flusher, budget_s=budget)
        except Exception as exc:  # noqa: BLE001 - e.g. _scaled_mm refuses this build
            failed[dt] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            emit({"type": "note", "text": f"matmul {dt} failed: {failed[dt]}"})
            continue
        finally:
            torch.set_float32_matmul_precision("highest")
        flops = 2 * m * n * k
        method = ("torch._scaled_mm e4m3 (fast accumulation)" if dt == "fp8"
                  else f"torch.mm (cuBLAS){' with TF32' if dt == 'tf32' else ''}")
        rows.append(_row("matmul", dt, method, t, shape=shape, flops=flops,
                         tflops=flops / (t["ms"] * 1e-3) / 1e12))
        del fn
        torch.cuda.empty_cache()
    return rows, failed


def bench_fma(torch: Any, steps: Steps, sms: int, budget: float) -> list[dict[str, Any]]:
    from gpulab import microbench_kernels as K
    from gpulab.grading.timing import measure

    steps.next("FMA ceiling (Triton, fp32 CUDA cores)")
    # 64 programs an SM: several waves, so the last, partial wave costs little.
    # Each program's 4 warps carry 32 independent FMAs a thread (8 elements x
    # 4 chains), enough to keep an SM's FP32 pipes full even alone.
    block, iters = 1024, FMA_ITERS
    n = sms * FMA_PROGRAMS_PER_SM * block
    x = torch.rand(n, device=DEVICE)
    out = torch.empty_like(x)
    try:
        t = measure(lambda: K.fma(x, out, iters, block), budget_s=budget)
    except Exception as exc:  # noqa: BLE001
        emit({"type": "note", "text": f"FMA kernel failed: {exc}"})
        return []
    if not bool(torch.isfinite(out).all()):
        emit({"type": "note", "text": "FMA kernel produced non-finite values; left out"})
        return []
    flops = 2 * K.FMA_CHAINS * iters * n
    return [_row("fma", "fp32 FMA", f"triton: fma_kernel {K.FMA_CHAINS} chains x {iters}",
                 t, flops=flops, tflops=flops / (t["ms"] * 1e-3) / 1e12)]


def _best(rows: list[dict[str, Any]], name: str, key: str) -> tuple[float | None, str | None]:
    cands = [r for r in rows if r["name"] == name and r.get(key)]
    if not cands:
        return None, None
    r = max(cands, key=lambda r: r[key])
    return round(r[key], 4), r["method"] + (f" {r['shape']}" if r.get("shape") else "")


def _driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001
        return None


def run(quick: bool = False) -> int:
    try:
        import torch
    except ImportError as exc:
        return _refuse(f"torch is not installed ({exc})")
    if not torch.cuda.is_available():
        return _refuse("torch sees no CUDA GPU here (microbenchmarks measure a GPU; "
                       "`gpulab probe` shows what this machine has)")
    from gpulab.gpulock import gpu_timing_lock

    # Ceilings measured beside someone else's timing run would read low.
    with gpu_timing_lock("gpulab probe --bench", gpu=0,  # it measures device 0
                         on_wait=lambda m: emit({"type": "note", "text": m})):
        return _run(torch, quick)


def _run(torch: Any, quick: bool) -> int:
    started = time.monotonic()
    from importlib.metadata import version

    from gpulab.grading.timing import L2Flusher, l2_bytes

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
        emit({"type": "note", "text": f"only {_size(free)} free on the GPU: bandwidth buffers "
              f"of {_size(nbytes)}, under 1 GiB or 8x the L2, may read low"})
    flusher = L2Flusher()
    bw = bench_bandwidth(torch, steps, nbytes, flusher, budget)
    sweep = bench_sweep(torch, steps, sizes, l2)
    mm, failed = bench_matmul(torch, steps, plan, flusher, budget)
    fma = bench_fma(torch, steps, props.multi_processor_count, budget)
    skipped.update(failed)
    rows = bw + mm + fma
    throttle = sorted({r for row in rows for r in row["clocks"].get("throttle_reasons", [])})
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "driver": _driver(), "cuda": torch.version.cuda, "torch": torch.__version__,
        "triton": _safe_version(version, "triton"),
        "compute_capability": f"{cc[0]}.{cc[1]}", "sms": props.multi_processor_count,
        "l2_bytes": l2, "buffer_bytes": nbytes, "quick": quick,
        "bandwidth": bw, "sweep": sweep, "matmul": mm, "fma": fma,
        "skipped": skipped, "tflops": {}, "tflops_method": {},
        "throttled": any(row["clocks"].get("throttled") for row in rows),
        "throttle_reasons": throttle,
    }
    for name in ("copy", "read", "write"):
        result[f"{name}_tbs"], result[f"{name}_method"] = _best(bw, name, "tbs")
    for dt in dict.fromkeys(r["name"] for r in mm):
        result["tflops"][dt], result["tflops_method"][dt] = _best(mm, dt, "tflops")
    if fma:
        result["fma_tflops"] = round(fma[0]["tflops"], 6)
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    steps.finish()
    emit({"type": "result", "result": result})
    return 0


def _safe_version(version: Any, dist: str) -> str | None:
    try:
        return version(dist)
    except Exception:  # noqa: BLE001
        return None


def _refuse(message: str) -> int:
    emit({"type": "error", "message": message})
    print(f"gpulab microbench: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpulab.microbench", description=__doc__.split(
        "\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer sizes and shapes (about a minute)")
    args = p.parse_args(argv)
    return run(quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
