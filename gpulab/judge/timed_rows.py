"""A GPU timing as the judge makes it, typed: what a grader sets on
`ctx.timing` (TimingResult), and the kernel exercises' own (KernelTiming)
with its rows and the batches behind them.

Each writes the JSON the result's `timing` always held (`to_json`, the
same keys in the same order; gpulab.wire.result.Timing reads it back), so
the typed values live in the judge and only the result is JSON. No torch
here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypedDict

if TYPE_CHECKING:
    from gpulab.gpu.ceilings import Roof
    from gpulab.wire.timed_batch import Clocks

Json = dict[str, object]  # a JSON object the judge writes (and never reads back)


class GradedOn(TypedDict):
    """What a kernel exercise's letter was measured against (gpulab.judge.speed.graded_on):
    its basis ("roofline" or "speedup"), the roof or baseline by name, the
    score, the bands as [threshold, letter], and all that in words."""

    basis: str
    against: str
    score: float
    bands: list[list[float | str]]
    text: str


class TimingResult(Protocol):
    """What the harness reads of a grader's timing: the summary it adds to
    the check's, why the times are refused (a failed check), and its JSON."""

    @property
    def summary(self) -> str: ...

    @property
    def implausible(self) -> str | None: ...

    def to_json(self) -> Json: ...


@dataclass
class BatchWall:
    """One timed batch as the judge's clock saw it, against what the sandbox claimed."""

    reps: int
    wall_ms: float
    claimed_ms: float
    copy_ms_median: float
    repeated: str | None = None  # why it was timed again (the key only then)

    def to_json(self) -> Json:
        out: Json = {
            "reps": self.reps,
            "wall_ms": self.wall_ms,
            "claimed_ms": self.claimed_ms,
            "copy_ms_median": self.copy_ms_median,
        }
        if self.repeated is not None:
            out["repeated"] = self.repeated
        return out


@dataclass
class RemoteTiming:
    """A case timed in the judge's batches (gpulab.judge.batches.time_remote):
    the claimed times' statistics (gpulab.measure.timing's: ms, min_ms,
    p20_ms, p80_ms, mean_ms, rse, reps), how they were checked, and why they
    are implausible, if they are."""

    stats: dict[str, float]
    clocks: Clocks
    batch_reps: int
    judge_flush_ms: float
    judge_copy_ms: float
    batches: list[BatchWall]
    implausible: str | None = None
    # Where the times are the replay's (gpulab.judge.replay_timing): the
    # median the sandbox claimed for the same case, shown beside them.
    claimed_ms: float | None = None

    @property
    def ms(self) -> float:
        return self.stats["ms"]

    def to_json(self) -> Json:
        """The row's timing keys; `implausible` is the whole timing's (a row never held it)."""
        return {
            **self.stats,
            "clocks": self.clocks,
            "batch_reps": self.batch_reps,
            "judge_flush_ms": self.judge_flush_ms,
            "judge_copy_ms": self.judge_copy_ms,
            "batches": [b.to_json() for b in self.batches],
            **({"claimed_ms": self.claimed_ms} if self.claimed_ms is not None else {}),
        }


@dataclass
class KernelRow:
    """A timed case of a kernel exercise (gpulab.judge.speed): its timing,
    the work it did, and where that puts it on the roofline and against the
    baseline. A key the row never had when a value is missing stays out."""

    name: str
    shape: str
    dtype: str
    timed: RemoteTiming
    flops: float | None
    bytes: float | None
    kind: str | None
    sizes: dict[str, float]
    intensity: float | None
    # With unit and roofline_fraction: only where the work is known.
    throughput: float | None = None
    unit: str = ""
    roofline_fraction: float | None = None
    ceiling: str = ""  # what roofline_fraction is of ("the H200 datasheet's 4.8 TB/s")
    roof: Roof | None = None  # the same, as gpulab.gpu.ceilings made it (not in the JSON)
    # Of the copy ceiling `gpulab probe --bench` measured, where it did (shown
    # beside the letter, never its basis).
    of_measured_copy: float | None = None
    # With baseline and speedup: only where the exercise has a baseline.
    baseline_ms: float | None = None
    baseline: str = ""
    speedup: float | None = None
    # Lesson 05's: torch.compile's forward beside it (gpulab.judge.rope_timing).
    compile_ms: float | None = None
    speedup_compile: float | None = None

    @property
    def ms(self) -> float:
        return self.timed.ms

    def to_json(self) -> Json:
        out: Json = {"name": self.name, "shape": self.shape, "dtype": self.dtype}
        out.update(self.timed.to_json())
        out.update(
            flops=self.flops,
            bytes=self.bytes,
            kind=self.kind,
            sizes=self.sizes,
            intensity=self.intensity,
        )
        if self.throughput is not None:
            out.update(
                throughput=self.throughput,
                unit=self.unit,
                roofline_fraction=self.roofline_fraction,
            )
        out["ceiling"] = self.ceiling
        if self.of_measured_copy is not None:
            out["of_measured_copy"] = self.of_measured_copy
        if self.baseline_ms is not None:
            out.update(baseline=self.baseline, baseline_ms=self.baseline_ms, speedup=self.speedup)
        if self.compile_ms is not None:
            out.update(compile_ms=self.compile_ms, speedup_compile=self.speedup_compile)
        return out


@dataclass
class BackwardRow:
    """Lesson 05's learner's backward, timed beside torch.compile's and not
    graded (gpulab.judge.rope_timing)."""

    name: str
    shape: str
    dtype: str
    timed: RemoteTiming
    bytes: float
    sizes: dict[str, float]
    throughput: float
    roofline_fraction: float | None
    ceiling: str
    baseline_ms: float
    speedup: float

    @property
    def ms(self) -> float:
        return self.timed.ms

    def to_json(self) -> Json:
        return {
            "name": self.name,
            "shape": self.shape,
            "dtype": self.dtype,
            **self.timed.to_json(),
            "bytes": self.bytes,
            "flops": None,
            "kind": "memory",
            "sizes": self.sizes,
            "throughput": self.throughput,
            "unit": "GB/s",
            "roofline_fraction": self.roofline_fraction,
            "ceiling": self.ceiling,
            "baseline": "torch.compile backward",
            "baseline_ms": self.baseline_ms,
            "speedup": self.speedup,
            "graded": False,
        }


@dataclass
class KernelTiming:
    """A kernel exercise's timing: its rows, the grade from their geometric
    means, and where it ran."""

    cases: list[KernelRow | BackwardRow]
    grade: str
    roofline_fraction: float
    speedup: float | None
    baseline: str
    throughput: float
    unit: str
    ms: float
    summary: str
    implausible: str | None
    device: str
    protocol: str = "judge-timed batches on fresh inputs (docs/grading.md)"
    # What the letter was measured against, and its bands (gpulab.judge.speed.graded_on).
    graded_on: GradedOn | None = None
    # Lesson 05's (gpulab.judge.rope_timing), the keys only once it set them.
    speedup_compile: float | None = None
    backward_speedup_compile: float | None = None
    baselines: list[str] = field(default_factory=list)

    def to_json(self) -> Json:
        out: Json = {
            "cases": [r.to_json() for r in self.cases],
            "grade": self.grade,
            "roofline_fraction": self.roofline_fraction,
            "speedup": self.speedup,
            "baseline": self.baseline,
            "throughput": self.throughput,
            "unit": self.unit,
            "ms": self.ms,
            "summary": self.summary,
            "implausible": self.implausible,
            "device": self.device,
            "protocol": self.protocol,
        }
        if self.graded_on is not None:
            out["graded_on"] = self.graded_on
        if self.baselines:
            out.update(
                speedup_compile=self.speedup_compile,
                backward_speedup_compile=self.backward_speedup_compile,
                baselines=self.baselines,
            )
        return out
