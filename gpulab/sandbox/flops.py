"""Lesson 01's matmul_ceiling exercise in the sandbox: the learner's TFLOP/s
benchmark, run on the GPU or, on a CPU, on a model of one.

`matmul_tflops(gpu, m, n, k)` gets a device with torch.cuda's names (as
copy_ceiling's does: gpulab.sandbox.ceiling) and two of torch's:
`gpu.randn(rows, cols)`, a random bf16 matrix on the device, and `a @ b`.
On a GPU those are the real ones. On a CPU they drive `ModelMatmulGPU`,
whose stream runs asynchronously like a GPU's (events, synchronize, an L2
flush that is device work) and whose products behave as a big bf16 matmul
does on a real one: the first pays a one-off cost (the library's setup),
and the clock starts high and falls, over a fraction of a second of
sustained products, to where the power limit holds it (BENCHMARKS.md: on
the H200 the SM clock fell from 1980 to about 1515 MHz within about a
second of dense 8192³ bf16 products, and a 0.2 s warm-up left two timings
7.4% apart). A benchmark that warms up by time, times products with events
read after a synchronize, takes a robust statistic and counts 2·M·N·K
FLOPs reads the model's sustained rate; the judge knows it
(gpulab.judge.graders.matmul_ceiling) and compares.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from gpulab.sandbox import learner
from gpulab.sandbox.ceiling import JITTER, ModelGPU
from gpulab.sandbox.failure import LearnerFailure
from gpulab.wire.benches import Bench, MatmulBenchRequest


class ModelMatrix:
    """A bf16 matrix on the model GPU: its shape, and nothing to read."""

    dtype = "bfloat16"

    def __init__(self, gpu: ModelMatmulGPU, rows: int, cols: int) -> None:
        self.gpu, self.rows, self.cols = gpu, int(rows), int(cols)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return self.rows * self.cols

    def element_size(self) -> int:
        return 2

    def __matmul__(self, other: Any) -> ModelMatrix:
        return self.gpu.matmul(self, other)

    def __repr__(self) -> str:
        return f"<bf16 matrix {self.rows}×{self.cols} on the model GPU>"


class ModelMatmulGPU(ModelGPU):
    """The copy benchmark's model GPU (events, synchronize, flush_l2) with
    bf16 products: `peak_flops` sustained, `boost` above it at first,
    falling with e-folding time `tau_s` of product time."""

    def __init__(
        self,
        peak_flops: float,
        overhead_s: float,
        boost: float,
        tau_s: float,
        first_s: float,
        hbm_bps: float,
        l2_bytes: int,
        seed: int,
    ) -> None:
        super().__init__(hbm_bps, l2_bytes, overhead_s, seed)
        self.peak, self.boost, self.tau, self.first = (
            float(peak_flops),
            float(boost),
            float(tau_s),
            float(first_s),
        )
        self.busy_s = 0.0  # seconds of products so far: how far the clock has fallen
        self.products = 0

    # torch's names
    def randn(self, rows: int, cols: int, **_: Any) -> ModelMatrix:
        if int(rows) <= 0 or int(cols) <= 0:
            raise ValueError("randn: a matrix needs positive sizes")
        return ModelMatrix(self, rows, cols)

    def matmul(self, a: Any, b: Any) -> ModelMatrix:
        if not isinstance(a, ModelMatrix) or not isinstance(b, ModelMatrix):
            raise TypeError("matmul: both operands must be matrices from gpu.randn")
        if a.cols != b.rows:
            raise RuntimeError(
                f"mat1 and mat2 shapes cannot be multiplied ({a.rows}x{a.cols} and "
                f"{b.rows}x{b.cols})"
            )
        flops = 2.0 * a.rows * b.cols * a.cols
        clock = 1.0 + self.boost * math.exp(-self.busy_s / self.tau)
        work = flops / (self.peak * clock)
        t = self.overhead + work
        if self.products == 0:
            t += self.first  # the library's handle and heuristics, once
        t *= 1 + self._rng.uniform(-JITTER, JITTER)
        self.products += 1
        self.busy_s += work
        self.device_s += t
        self._in_l2.clear()  # a product's operands stream through the L2
        return ModelMatrix(self, a.rows, b.cols)


class CudaMatmulGPU:
    """The real device under the same names."""

    def __init__(self) -> None:
        import torch

        from gpulab.measure.timing import L2Flusher

        self._torch = torch
        self.Event = torch.cuda.Event
        self.synchronize = torch.cuda.synchronize
        self.flush_l2 = L2Flusher()
        self.matmul = torch.matmul

    def randn(self, rows: int, cols: int, **_: Any) -> Any:
        torch = self._torch
        return torch.randn(int(rows), int(cols), dtype=torch.bfloat16, device="cuda")


def matmul_bench_request(server: Any, msg: MatmulBenchRequest) -> Bench:
    """matmul_tflops(gpu, m, n, k) for each shape; each value, or the learner's error."""
    fn = server.function(msg.function)
    out: list[Any] = []
    read: list[int] = []  # event times read on the model; -1 on a GPU (not counted)
    for i, (m, n, k) in enumerate(msg.shapes):
        gpu: Any
        if msg.device == "model" and msg.model is not None:
            p = msg.model
            gpu = ModelMatmulGPU(
                p.peak_flops,
                p.overhead_s,
                p.boost,
                p.tau_s,
                p.first_s,
                p.hbm_bps,
                p.l2_bytes,
                p.seed + i,
            )
        else:
            gpu = CudaMatmulGPU()
        try:
            value = learner.call(fn, server.file, gpu, int(m), int(n), int(k))
        except learner.LearnerError as exc:
            raise LearnerFailure(exc.summary, exc.message) from None
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        try:
            out.append(float(value) if ok else {"__unsupported__": type(value).__name__})
        except Exception as exc:  # noqa: BLE001 - a number type's own __float__
            tb, last, _ = learner.described(exc, server.file)
            raise LearnerFailure(
                f"what your function returned could not be read: {last}", tb
            ) from None
        read.append(gpu.times_read if isinstance(gpu, ModelMatmulGPU) else -1)
        del gpu
        if msg.device == "cuda":
            import torch

            torch.cuda.empty_cache()  # the judge allocates its own matrices next
    return Bench(tuple(out), tuple(read))
