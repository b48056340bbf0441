"""The microbenchmarks' conversation with the lab: the JSON events
`python -m gpulab.measure.microbench` prints (a row as each measurement is
made, the whole result last) and gpulab.lab.microbench_runner reads, shows
and caches. One shape for both processes; the clocks' summary is also what
a timed case's `clocks` holds (gpulab.measure.timing).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict


class ClockSummary(TypedDict):
    """What ClockLog saw while timing (`logged` False: NVML did not answer)."""

    logged: bool
    sm_mhz_median: NotRequired[float]
    sm_mhz_min: NotRequired[float]
    sm_mhz_max_supported: NotRequired[float | None]
    power_w_max: NotRequired[float]
    temp_c_max: NotRequired[float]
    throttle_reasons: NotRequired[list[str]]
    throttled: NotRequired[bool]


class Row(TypedDict):
    """One measurement, emitted as it is made: what was timed, how, `measure`'s
    numbers, and its group's own fields, in the order they are emitted."""

    group: str  # "bandwidth", "sweep", "matmul" or "fma"
    name: str  # copy, read, write; a dtype; "fp32 FMA"
    method: str
    ms: float
    min_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    clocks: ClockSummary
    buffer_bytes: NotRequired[int]  # bandwidth
    size_bytes: NotRequired[int]  # sweep
    calls: NotRequired[int]  # sweep: copies in one timed CUDA graph
    cuda_graph: NotRequired[bool]
    per_call_ms: NotRequired[float]
    fits_l2: NotRequired[bool]
    shape: NotRequired[str]  # matmul: "MxNxK"
    bytes: NotRequired[int]  # bandwidth: bytes counted as moved
    counted: NotRequired[str]
    flops: NotRequired[int]  # matmul, fma
    tbs: NotRequired[float]  # bandwidth, sweep
    tflops: NotRequired[float]  # matmul, fma


class Ceilings(TypedDict):
    """The microbenchmarks' result (the `result` event, cached by the lab per
    device), keys in the order it is written."""

    device: str
    date: str
    driver: str | None
    cuda: str | None
    torch: str
    triton: str | None
    compute_capability: str
    sms: int
    l2_bytes: int
    buffer_bytes: int
    quick: bool
    bandwidth: list[Row]
    sweep: list[Row]
    matmul: list[Row]
    fma: list[Row]
    skipped: dict[str, str]  # dtype -> why it was not measured
    tflops: dict[str, float | None]  # dtype -> the best matmul's TFLOP/s
    tflops_method: dict[str, str | None]
    throttled: bool
    throttle_reasons: list[str]
    copy_tbs: NotRequired[float | None]  # the best of the copies' methods
    copy_method: NotRequired[str | None]
    read_tbs: NotRequired[float | None]
    read_method: NotRequired[str | None]
    write_tbs: NotRequired[float | None]
    write_method: NotRequired[str | None]
    fma_tflops: NotRequired[float]
    elapsed_s: NotRequired[float]


# --- the events, one JSON line each -------------------------------------------


class Progress(TypedDict):
    """A step about to run (`done` steps finished of `total`), or "done"."""

    type: Literal["progress"]
    done: int
    total: int
    label: str


class Note(TypedDict):
    """Something the learner should know (little free memory, a method left out)."""

    type: Literal["note"]
    text: str


class RowEvent(Row):
    """A measurement as it is made: `type` first, then the Row."""

    type: Literal["row"]


class ResultEvent(TypedDict):
    """The whole result, last."""

    type: Literal["result"]
    result: Ceilings


class ErrorEvent(TypedDict):
    """Why the benchmarks did not run (no GPU, ...)."""

    type: Literal["error"]
    message: str


BenchEvent = Progress | Note | RowEvent | ResultEvent | ErrorEvent
# The events the lab hands on as they come (the CLI's bar, the TUI's Device pane).
ShownEvent = Progress | Note


__all__ = [
    "BenchEvent",
    "Ceilings",
    "ClockSummary",
    "ErrorEvent",
    "Note",
    "Progress",
    "ResultEvent",
    "Row",
    "RowEvent",
    "ShownEvent",
]
