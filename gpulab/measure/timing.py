"""The GPU timing harness shared by the grader, the probe and the bench.

Follows docs/grading.md:
- CUDA events around each call, read only after a device synchronise;
- warm-up by time (compilation and autotuning happen before timing starts);
- the L2 is flushed before every timed call by writing a buffer of at least
  8x the device's L2 (256 MB floor);
- adaptive stopping: repeat until the relative standard error of the mean is
  under `rel_err` (1%) or the time budget runs out, with a minimum count;
- report the median and the spread (min, p20, p80), not one number;
- SM clock, power and temperature are sampled through NVML while timing, and
  throttling is flagged.
"""

from __future__ import annotations

import math
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any, TypedDict

import torch

from gpulab.wire.microbench import ClockSummary

FLUSH_FLOOR_BYTES = 256 * 1024 * 1024


class Measured(TypedDict):
    """`measure`'s answer: the median and spread in ms, the repetitions, the
    warm-up calls and the clocks."""

    ms: float
    min_ms: float
    p20_ms: float
    p80_ms: float
    mean_ms: float
    rse: float  # relative standard error of the mean
    reps: int
    warmup_calls: int
    clocks: ClockSummary


def l2_bytes(device: int = 0) -> int:
    props = torch.cuda.get_device_properties(device)
    return int(getattr(props, "L2_cache_size", 0) or 50 * 1024 * 1024)


class L2Flusher:
    """Writes a buffer several times the L2 so each timed call starts cold."""

    def __init__(self, device: int = 0) -> None:
        n = max(FLUSH_FLOOR_BYTES, 8 * l2_bytes(device))
        self.buf = torch.empty(n, dtype=torch.int8, device=f"cuda:{device}")

    def __call__(self) -> None:
        self.buf.zero_()


# NVML's clock-event (throttle) reason bits.
_THROTTLE_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "power_brake": 0x80,
}


class ClockLog:
    """Samples SM clock, power and temperature through NVML in a thread."""

    def __init__(self, device: int = 0, period_s: float = 0.02) -> None:
        self.samples: list[dict[str, float]] = []
        self.device, self.period = device, period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml: Any = None
        self.max_sm_clock: float | None = None
        self.throttle_reasons: set[str] = set()

    def __enter__(self) -> ClockLog:
        from gpulab.gpu import nvml

        try:
            # Opened, never shut down: see nvml.init (each measurement opens it).
            nv = self._nvml = nvml.init()
            self._handle = nv.nvmlDeviceGetHandleByIndex(self.device)
            self.max_sm_clock = float(nv.nvmlDeviceGetMaxClockInfo(self._handle, nv.NVML_CLOCK_SM))
        except Exception:  # noqa: BLE001 - no NVML: timing still works, unlogged
            self._nvml = None
            return self
        self._sample()  # at least one sample, however short the run
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> bool:
        nv, h = self._nvml, self._handle
        try:
            s = {
                "sm_mhz": float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                "power_w": nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                "temp_c": float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            }
            mask = nv.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        except Exception:  # noqa: BLE001
            return False
        self.throttle_reasons |= {k for k, bit in _THROTTLE_BITS.items() if mask & bit}
        self.samples.append(s)
        return True

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            if not self._sample():
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=1)
            self._sample()

    def summary(self) -> ClockSummary:
        if not self.samples:
            return {"logged": False}
        sm = [s["sm_mhz"] for s in self.samples]
        out: ClockSummary = {
            "logged": True,
            "sm_mhz_median": statistics.median(sm),
            "sm_mhz_min": min(sm),
            "sm_mhz_max_supported": self.max_sm_clock,
            "power_w_max": max(s["power_w"] for s in self.samples),
            "temp_c_max": max(s["temp_c"] for s in self.samples),
            "throttle_reasons": sorted(self.throttle_reasons),
        }
        out["throttled"] = bool(self.throttle_reasons - {"sw_power_cap"}) or bool(
            self.max_sm_clock and statistics.median(sm) < 0.8 * self.max_sm_clock
        )
        return out


def _stats(times_ms: list[float]) -> dict[str, float]:
    xs = sorted(times_ms)
    n = len(xs)

    def q(p: float) -> float:
        return xs[min(n - 1, max(0, round(p * (n - 1))))]

    mean = statistics.fmean(xs)
    sd = statistics.stdev(xs) if n > 1 else 0.0
    return {
        "ms": statistics.median(xs),
        "min_ms": xs[0],
        "p20_ms": q(0.2),
        "p80_ms": q(0.8),
        "mean_ms": mean,
        "rse": (sd / math.sqrt(n)) / mean if n > 1 and mean > 0 else float("inf"),
        "reps": n,
    }


def measure(
    fn: Callable[[], Any],
    *,
    flusher: L2Flusher | None = None,
    warmup_s: float = 0.2,
    max_warmup_s: float = 2.0,
    min_reps: int = 10,
    max_reps: int = 2000,
    budget_s: float = 3.0,
    rel_err: float = 0.01,
    log_clocks: bool = True,
) -> Measured:
    """Time `fn` on the current CUDA stream. Returns median and spread in ms."""
    stream = torch.cuda.current_stream()
    # Warm-up by time: the first call compiles/autotunes; keep going until the
    # caches, clocks and allocator have settled. A heavy kernel pulls the
    # clocks down to the power cap over about a second (seen on an H200: an
    # 8192^3 bf16 matmul went 1980 -> 1515 MHz), so warm-up also continues,
    # up to `max_warmup_s`, until two successive batches agree within 2%.
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    warm, previous = 0, None
    while True:
        batch_start = time.perf_counter()
        n = 0
        while True:
            fn()
            n += 1
            torch.cuda.synchronize()
            if time.perf_counter() - batch_start >= warmup_s / 2 and n >= 2:
                break
        warm += n
        per_call = (time.perf_counter() - batch_start) / n
        elapsed = time.perf_counter() - t0
        settled = previous is not None and abs(per_call - previous) <= 0.02 * previous
        if elapsed >= warmup_s and (settled or elapsed >= max_warmup_s):
            break
        previous = per_call
    times: list[float] = []
    new_event: Callable[..., torch.cuda.Event] = torch.cuda.Event  # its __new__ is unannotated
    started = time.perf_counter()
    with ClockLog() if log_clocks else _nullctx() as clocks:
        while len(times) < max_reps:
            batch = []
            for _ in range(min(10, max_reps - len(times))):
                if flusher is not None:
                    flusher()
                start = new_event(enable_timing=True)
                end = new_event(enable_timing=True)
                start.record(stream)
                fn()
                end.record(stream)
                batch.append((start, end))
            torch.cuda.synchronize()
            times.extend(s.elapsed_time(e) for s, e in batch)
            st = _stats(times)
            if len(times) >= min_reps and st["rse"] <= rel_err:
                break
            if time.perf_counter() - started > budget_s:
                break
    st = _stats(times)
    return {
        "ms": st["ms"],
        "min_ms": st["min_ms"],
        "p20_ms": st["p20_ms"],
        "p80_ms": st["p80_ms"],
        "mean_ms": st["mean_ms"],
        "rse": st["rse"],
        "reps": int(st["reps"]),
        "warmup_calls": warm,
        "clocks": clocks.summary() if clocks is not None else {"logged": False},
    }


class _nullctx:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
