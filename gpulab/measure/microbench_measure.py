"""The microbenchmarks' measurements: bandwidth, the L2 sweep, matmul, FMA.

Each `bench_*` runs in the microbenchmark child (gpulab.measure.microbench),
emits one JSON event a line as it goes, and returns its rows. torch comes in
as an argument and Triton kernels are imported inside: importing this
module costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpulab.wire.microbench import Row

if TYPE_CHECKING:
    from gpulab.measure.timing import Measured
    from gpulab.wire.microbench import BenchEvent

GiB, MiB = 2**30, 2**20
DEVICE = "cuda"  # a test's dry run points this at the CPU, with CUDA's calls faked
FMA_ITERS, FMA_PROGRAMS_PER_SM = 1024, 64

# (kind, method, call, bytes moved per buffer byte, check of the result)
BandwidthPlan = tuple[str, str, Callable[[], object], int, Callable[[], bool]]
MatmulShape = tuple[str, int, int, int]  # (dtype, M, N, K)


def emit(event: BenchEvent) -> None:
    """One event, a JSON line on stdout (the parent reads them as they come)."""
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


def _row(group: str, name: str, method: str, t: Measured) -> Row:
    """A row's common fields; its group's own are added, then it is `_emitted`."""
    return {
        "group": group,
        "name": name,
        "method": method,
        "ms": t["ms"],
        "min_ms": t["min_ms"],
        "p20_ms": t["p20_ms"],
        "p80_ms": t["p80_ms"],
        "reps": t["reps"],
        # .get: measure always logs the clocks, a test's stand-in for it may not.
        "clocks": t.get("clocks", {}),
    }


def _emitted(row: Row) -> Row:
    emit({"type": "row", **row})
    return row


def bench_bandwidth(
    torch: Any, steps: Steps, nbytes: int, flusher: Any, budget: float
) -> list[Row]:
    from gpulab.measure import microbench_kernels as K

    n = nbytes // 4
    src = torch.rand(n, device=DEVICE)
    dst = torch.empty_like(src)
    partial = torch.empty(triton_cdiv(n, 1024), device=DEVICE)
    want = _float64_sum(src, n)
    plans = _bandwidth_plans(torch, K, src, dst, partial, n, want)
    rows = _measure_plans(torch, steps, plans, nbytes, flusher, budget)
    # Drop the buffers before the next stage; the plans' closures hold them too.
    del src, dst, partial, plans
    torch.cuda.empty_cache()
    return rows


def _float64_sum(src: Any, n: int, chunk: int = 2**26) -> float:
    """What the reads must sum to. In float64, chunk by chunk: a float64 copy
    of the whole buffer would be twice its size."""
    return sum(float(src[i : i + chunk].double().sum()) for i in range(0, n, chunk))


def _bandwidth_plans(
    torch: Any, K: Any, src: Any, dst: Any, partial: Any, n: int, want: float
) -> list[BandwidthPlan]:
    """A plan for each way of copying, reading and writing the buffer."""
    fill_value = 1.2345  # not zero: writes of zeros could be special-cased

    def check_copy() -> bool:
        return bool(torch.equal(dst, src))

    def check_fill() -> bool:
        return bool((dst == torch.tensor(fill_value, device=DEVICE)).all())

    def check_read(total: Callable[[], Any]) -> Callable[[], bool]:
        return lambda: abs(float(total()) - want) <= 1e-3 * abs(want)

    return [
        ("copy", "torch: dst.copy_(src)", lambda: dst.copy_(src), 2, check_copy),
        # Small programs too: at 134 MB an H200 copied 4-6% faster in 2 KB
        # programs than in 8 KB ones; see BENCHMARKS.md, "Counters, and
        # copies of the same bytes".
        (
            "copy",
            "triton: copy_kernel BLOCK=512 warps=4",
            lambda: K.copy(dst, src, 512, 4),
            2,
            check_copy,
        ),
        (
            "copy",
            "triton: copy_kernel BLOCK=4096 warps=4",
            lambda: K.copy(dst, src, 4096, 4),
            2,
            check_copy,
        ),
        (
            "copy",
            "triton: copy_kernel BLOCK=8192 warps=8",
            lambda: K.copy(dst, src, 8192, 8),
            2,
            check_copy,
        ),
        (
            "read",
            "torch: torch.sum(x)",
            lambda: torch.sum(src),
            1,
            check_read(lambda: torch.sum(src)),
        ),
        (
            "read",
            "triton: read_kernel BLOCK=4096 warps=4",
            lambda: K.read(src, partial, 4096, 4),
            1,
            check_read(lambda: partial[: triton_cdiv(n, 4096)].double().sum()),
        ),
        (
            "read",
            "triton: read_kernel BLOCK=8192 warps=8",
            lambda: K.read(src, partial, 8192, 8),
            1,
            check_read(lambda: partial[: triton_cdiv(n, 8192)].double().sum()),
        ),
        ("write", "torch: x.fill_(v)", lambda: dst.fill_(fill_value), 1, check_fill),
        (
            "write",
            "triton: fill_kernel BLOCK=4096 warps=4",
            lambda: K.fill(dst, fill_value, 4096, 4),
            1,
            check_fill,
        ),
    ]


def _measure_plans(
    torch: Any, steps: Steps, plans: list[BandwidthPlan], nbytes: int, flusher: Any, budget: float
) -> list[Row]:
    """Each plan measured, run once more and its result checked: a row each,
    or a note for a method that failed or gave a wrong result."""
    from gpulab.measure.timing import measure

    gib = size_label(nbytes)
    rows = []
    for kind, method, fn, moves, check in plans:
        steps.next(f"{kind} {gib} ({method.split(':')[0]})")
        try:
            t = measure(fn, flusher=flusher, budget_s=budget)
            fn()
            torch.cuda.synchronize()
            if not check():
                emit({"type": "note", "text": f"{kind} via {method} gave a wrong result; left out"})
                continue
        except Exception as exc:  # noqa: BLE001 - one method failing must not stop the rest
            emit({"type": "note", "text": f"{kind} via {method} failed: {exc}"})
            continue
        rows.append(_bandwidth_row(kind, method, t, nbytes, moves))
    return rows


def _bandwidth_row(kind: str, method: str, t: Measured, nbytes: int, moves: int) -> Row:
    """The row (emitted): bytes counted as moved, `moves` times the buffer."""
    counted = moves * nbytes
    row = _row("bandwidth", kind, method, t)
    row["buffer_bytes"] = nbytes
    row["bytes"] = counted
    row["counted"] = "read + write" if moves == 2 else kind
    row["tbs"] = counted / (t["ms"] * 1e-3) / 1e12
    return _emitted(row)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


def bench_sweep(torch: Any, steps: Steps, sizes: list[int], l2: int) -> list[Row]:
    """Copy and read bandwidth by buffer size, without an L2 flush: buffers that
    fit in the L2 are served from it (the plateau), larger ones from HBM.

    Small copies take well under a microsecond, less than a launch costs, so
    each timed call is a CUDA graph of k copies (k * size >= 256 MiB)."""
    from gpulab.measure.timing import measure

    rows: list[Row] = []
    for size in sizes:
        src = torch.rand(size // 4, device=DEVICE)
        dst = torch.empty_like(src)
        k = max(1, min(512, (256 * MiB) // size))
        # An elementwise kernel, not copy_: inside a CUDA graph copy_ becomes a
        # memcpy node served by the copy engines (2.76 TB/s for 1 GiB on an
        # H200, against 4.25 for the same copy launched as a kernel).
        for kind, op, moves in (
            ("copy", lambda src=src, dst=dst: torch.mul(src, 1.0, out=dst), 2),
            ("read", lambda src=src: torch.sum(src), 1),
        ):
            steps.next(f"sweep {kind} {size_label(size)}")
            fn, graphed = _graphed(torch, op, k)
            try:
                t = measure(fn, budget_s=0.5, warmup_s=0.05, log_clocks=False)
            except Exception as exc:  # noqa: BLE001
                emit({"type": "note", "text": f"sweep {kind} {size_label(size)} failed: {exc}"})
                continue
            per_call = t["ms"] / k
            row = _row("sweep", kind, "torch", t)
            row["size_bytes"] = size
            row["calls"] = k
            row["cuda_graph"] = graphed
            row["per_call_ms"] = per_call
            row["fits_l2"] = moves * size <= l2
            row["tbs"] = moves * size / (per_call * 1e-3) / 1e12
            rows.append(_emitted(row))
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


def size_label(b: int) -> str:
    return f"{b / GiB:g} GiB" if b >= GiB else f"{b / MiB:g} MiB"


def _matmul_fn(torch: Any, dt: str, m: int, n: int, k: int) -> Any:
    if dt == "fp8":
        e4m3 = torch.float8_e4m3fn
        a = torch.randn(m, k, device=DEVICE).to(e4m3)
        b = torch.randn(n, k, device=DEVICE).to(e4m3).t()  # column-major, as cuBLAS wants
        one = torch.ones((), device=DEVICE)
        return lambda: torch._scaled_mm(
            a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
        )
    dtype = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "fp16": torch.float16,
        "bf16": torch.bfloat16,
    }[dt]
    a = torch.randn(m, k, device=DEVICE, dtype=dtype)
    b = torch.randn(k, n, device=DEVICE, dtype=dtype)
    c = torch.empty(m, n, device=DEVICE, dtype=dtype)
    return lambda: torch.mm(a, b, out=c)


def bench_matmul(
    torch: Any, steps: Steps, plan: list[MatmulShape], flusher: Any, budget: float
) -> tuple[list[Row], dict[str, str]]:
    from gpulab.measure.timing import measure

    rows: list[Row] = []
    failed: dict[str, str] = {}
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
        method = (
            "torch._scaled_mm e4m3 (fast accumulation)"
            if dt == "fp8"
            else f"torch.mm (cuBLAS){' with TF32' if dt == 'tf32' else ''}"
        )
        row = _row("matmul", dt, method, t)
        row["shape"] = shape
        row["flops"] = flops
        row["tflops"] = flops / (t["ms"] * 1e-3) / 1e12
        rows.append(_emitted(row))
        del fn
        torch.cuda.empty_cache()
    return rows, failed


def bench_fma(torch: Any, steps: Steps, sms: int, budget: float) -> list[Row]:
    from gpulab.measure import microbench_kernels as K
    from gpulab.measure.timing import measure

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
    row = _row("fma", "fp32 FMA", f"triton: fma_kernel {K.FMA_CHAINS} chains x {iters}", t)
    row["flops"] = flops
    row["tflops"] = flops / (t["ms"] * 1e-3) / 1e12
    return [_emitted(row)]
