"""Lesson 01's copy_ceiling exercise in the sandbox: the learner's
copy-bandwidth benchmark, run on the GPU or, on a CPU, on a model of one.

`copy_bandwidth(gpu, nbytes)` gets a device with torch.cuda's names:
`gpu.buffer(nbytes)` (random bytes on the device), `gpu.Event`,
`gpu.synchronize()` and `gpu.flush_l2()`. On a GPU those are the real ones.
On a CPU they drive `ModelGPU`, whose stream runs asynchronously like a
GPU's: an event's time exists only once the host has synchronized, a copy
whose buffers are still in the L2 runs at the L2's speed, a flush is work
on the stream like any other, and the first copies on the device are slow
(its clocks ramp, its first launches load code). A benchmark that flushes
before each timed copy, warms up or takes a robust statistic, and reads
events after a synchronize reads the model's ceiling; one that skips a step
reads something else. The judge knows the ceiling
(gpulab.judge.graders.copy_ceiling) and compares.
"""

from __future__ import annotations

import numbers
import random
from typing import Any

from gpulab.sandbox import learner
from gpulab.sandbox.failure import LearnerFailure
from gpulab.wire.benches import Bench, BenchRequest

COLD = (3.0, 2.0, 1.5)  # the device's first copies: clocks ramping, code loading
JITTER = 0.02  # each copy's time, uniformly within ±2%


class ModelBuffer:
    def __init__(self, gpu: ModelGPU, nbytes: int) -> None:
        self.gpu, self.nbytes = gpu, int(nbytes)

    def numel(self) -> int:
        return self.nbytes

    def element_size(self) -> int:
        return 1

    def copy_(self, src: ModelBuffer, non_blocking: bool = False) -> ModelBuffer:
        if not isinstance(src, ModelBuffer) or src.nbytes != self.nbytes:
            raise RuntimeError("copy_: the buffers differ in size")
        self.gpu._copy(self, src)
        return self

    def clone(self) -> ModelBuffer:
        out = ModelBuffer(self.gpu, self.nbytes)
        return out.copy_(self)

    def __repr__(self) -> str:
        return f"<buffer of {self.nbytes} bytes on the model GPU>"


class ModelEvent:
    def __init__(self, gpu: ModelGPU, enable_timing: bool = False) -> None:
        self.gpu, self.timing = gpu, enable_timing
        self.at: float | None = None  # device time, once recorded
        self.done = False

    def record(self, stream: Any = None) -> None:
        self.at, self.done = self.gpu.device_s, False
        self.gpu._pending.append(self)

    def synchronize(self) -> None:
        """Waits for this event, and so for everything queued before it."""
        if self.at is not None and self in self.gpu._pending:
            k = self.gpu._pending.index(self)
            for e in self.gpu._pending[: k + 1]:
                e.done = True
            del self.gpu._pending[: k + 1]

    def query(self) -> bool:
        # The model's device time is not the host's: a poll finds it done.
        self.synchronize()
        return self.done

    def elapsed_time(self, end: ModelEvent) -> float:
        if not (self.timing and end.timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        if self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded before calculating elapsed time.")
        if not (self.done and end.done):
            # What CUDA says when the host reads an event the GPU has not reached.
            raise RuntimeError("CUDA error: device not ready")
        self.gpu.times_read += 1
        return (end.at - self.at) * 1e3


class ModelGPU:
    """A GPU's stream, in device seconds: copies, flushes, events."""

    def __init__(self, hbm_bps: float, l2_bytes: int, overhead_s: float, seed: int) -> None:
        self.hbm, self.l2_bps = float(hbm_bps), 2.0 * float(hbm_bps)
        self.l2_bytes, self.overhead = int(l2_bytes), float(overhead_s)
        self.device_s = 0.0
        self._rng = random.Random(seed)
        self._calls = 0
        # Event times the benchmark read: none means its figure came from
        # somewhere else (the host's clock around copies it only queued).
        self.times_read = 0
        self._in_l2: set[int] = set()  # ids of buffers the L2 holds
        self._pending: list[ModelEvent] = []

    # torch.cuda's names
    def Event(self, enable_timing: bool = False, **_: Any) -> ModelEvent:  # noqa: N802
        return ModelEvent(self, enable_timing)

    def synchronize(self, device: Any = None) -> None:
        for e in self._pending:
            e.done = True
        self._pending.clear()

    def buffer(self, nbytes: int) -> ModelBuffer:
        if int(nbytes) <= 0:
            raise ValueError("buffer: nbytes must be positive")
        return ModelBuffer(self, int(nbytes))

    def flush_l2(self) -> None:
        # Writes 8x the L2 (gpulab's own flush): device time like any work.
        self.device_s += 8 * self.l2_bytes / self.hbm
        self._in_l2.clear()

    def _copy(self, dst: ModelBuffer, src: ModelBuffer) -> None:
        moved = 2 * dst.nbytes
        cached = {id(dst), id(src)} <= self._in_l2
        t = self.overhead + moved / (self.l2_bps if cached else self.hbm)
        t *= COLD[self._calls] if self._calls < len(COLD) else 1.0
        t *= 1 + self._rng.uniform(-JITTER, JITTER)
        self._calls += 1
        self.device_s += t
        self._in_l2 = {id(dst), id(src)} if moved <= self.l2_bytes else set()


class CudaGPU:
    """The real device under the same names."""

    def __init__(self) -> None:
        import torch

        from gpulab.measure.timing import L2Flusher

        self._torch = torch
        self.Event = torch.cuda.Event
        self.synchronize = torch.cuda.synchronize
        self.flush_l2 = L2Flusher()

    def buffer(self, nbytes: int) -> Any:
        torch = self._torch
        return torch.randint(0, 256, (int(nbytes),), dtype=torch.uint8, device="cuda")


def bench_request(server: Any, msg: BenchRequest) -> Bench:
    """copy_bandwidth(gpu, n) for each size; each value, or the learner's error."""
    fn = server.function(msg.function)
    out: list[Any] = []
    read: list[int] = []  # event times read on the model; -1 on a GPU (not counted)
    for k, nbytes in enumerate(msg.sizes):
        if msg.device == "model" and msg.model is not None:
            p = msg.model
            gpu: Any = ModelGPU(p.hbm_bps, p.l2_bytes, p.overhead_s, p.seed + k)
        else:
            gpu = CudaGPU()
        try:
            value = learner.call(fn, server.file, gpu, int(nbytes))
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
        read.append(gpu.times_read if isinstance(gpu, ModelGPU) else -1)
        del gpu
        if msg.device == "cuda":
            import torch

            torch.cuda.empty_cache()  # the judge allocates its own buffers next
    return Bench(tuple(out), tuple(read))
