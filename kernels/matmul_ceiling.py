"""Lesson 01 reference: a TFLOP/s benchmark that reads the tensor cores' rate.

What each rule is for:
  * random data: a product of zeros toggles fewer bits, draws less power
    and runs faster than real data;
  * warm-up by time, not by count: the first product pays the library's
    setup, and under a sustained load the clock falls to where the power
    limit holds it (on the H200, from 1980 to about 1515 MHz within about a
    second; BENCHMARKS.md), so half a second of products first;
  * CUDA events around each product, read after a synchronize: the host
    only queues the product, so its clock measures the queueing;
  * the median of several products: robust to one slow call;
  * 2·m·n·k: each of the m·n outputs is k multiply-adds, two FLOPs each.
The L2 barely matters here (8192³ in bf16 moves 384 MiB of operands and
result, several times any L2), so this benchmark does not flush it.
"""

import statistics

WARMUP_MS, REPS = 500.0, 20


def matmul_tflops(gpu, m, n, k):
    a, b = gpu.randn(m, k), gpu.randn(k, n)
    start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
    start.record()
    elapsed = 0.0
    while elapsed < WARMUP_MS:  # warm up by device time
        for _ in range(5):
            a @ b
        end.record()
        gpu.synchronize()
        elapsed = start.elapsed_time(end)
    times_ms = []
    for _ in range(REPS):
        s, e = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        gpu.synchronize()
        times_ms.append(s.elapsed_time(e))
    return 2 * m * n * k / (statistics.median(times_ms) * 1e-3) / 1e12
