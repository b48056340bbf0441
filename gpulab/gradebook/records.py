"""The JSON the gradebook writes to disk and reads back, by shape: the batch
file (gpulab.gradebook.plan writes it, the workers and the CLI read it), a
worker's progress lines, its result files (gpulab.gradebook.ingest reads
them), the reference's timed check kept beside them, and what the
gradebook reads of a check's result (gpulab.wire.result.CheckResult's JSON,
stored as it came in the `runs` table).

TypedDicts, not classes: each is a dict on disk and crosses into the CLI,
which indexes it. A file read back is checked where it is read (a result
file by gpulab.gradebook.ingest, a batch by gpulab.gradebook.plan.read_batch);
a check's result is stored verbatim, so its readers keep checking each
value's type as they read it (`total=False`: any key may be missing).

This module imports nothing heavy.
"""

from __future__ import annotations

from typing import TypedDict


class TaskJson(TypedDict):
    """One file to grade (gpulab.gradebook.plan.Task), in a batch file."""

    student: str
    exercise: str
    submission: int
    sha256: str
    file: str
    grader_version: str
    reference_sha: str
    timing: bool
    why: str


class BatchStudent(TypedDict):
    """One student of a batch: one worker, one Slurm array task."""

    student: str
    tasks: list[TaskJson]


class BatchFile(TypedDict):
    """`work/batches/<id>.json`."""

    batch: str
    course: str
    content_root: str
    device: str
    timeout: float | None
    results: str  # the folder the workers write the result files into
    students: list[BatchStudent]


class WorkerEvent(TypedDict):
    """One JSON line a worker prints per task (`event`: start, skipped, done)."""

    event: str
    student: str
    exercise: str


class DoneEvent(WorkerEvent):
    """A finished task's line (`event` "done"): its status, summary, seconds."""

    status: str | None
    summary: str | None
    seconds: float


class ProgressEvent(WorkerEvent):
    """A task's line as a progress bar shows it (gpulab.cli.commands.grade_run):
    a worker's (WorkerEvent, DoneEvent) or one made of the result file a
    Slurm task wrote, each value made text where it was read."""

    status: str  # "" for none
    summary: str  # "" for none


# --- a check's result, as the gradebook reads it ------------------------------


class CaseJson(TypedDict, total=False):
    """A correctness case of a result (gpulab.wire.result.CaseRow's JSON)."""

    name: str
    shape: str
    dtype: str
    max_abs: float
    max_rel: float
    mismatches: int
    passed: bool
    detail: str


class TimedCaseJson(TypedDict, total=False):
    """A timed case of a result (gpulab.wire.result.TimingRow's JSON)."""

    name: str
    shape: str
    ms: float
    throughput: float
    unit: str
    roofline_fraction: float
    speedup: float
    baseline: str


class TimingJson(TypedDict, total=False):
    """A result's `timing` (gpulab.wire.result.Timing's JSON)."""

    grade: str
    ms: float
    device: str
    implausible: str  # why the judge refused the timing
    cases: list[TimedCaseJson]


class CheckJson(TypedDict, total=False):
    """The keys the gradebook reads of a check's result
    (gpulab.wire.result.CheckResult.to_json): it stores the rest unread."""

    status: str
    summary: str
    message: str
    device: str
    cases: list[CaseJson]
    timing: TimingJson | None
    notes: list[str]
    stages: dict[str, float]
    duration_s: float


class ReferenceRecord(TypedDict, total=False):
    """The reference kernel's timed check on one GPU
    (`_reference/<exercise>.<gpu>.json`, and a result file's `reference`).
    Read back from a file or the gradebook, any key may be missing."""

    gpu: str
    gpu_uuid: str
    at: str
    result: CheckJson


class ResultRecord(TypedDict):
    """A worker's result file, `work/results/<batch>/<student>/<exercise>.json`."""

    format: int
    batch: str
    key: str  # <batch>/<student>/<exercise>: a run's `result_key`
    student: str
    exercise: str
    submission: int
    sha256: str
    grader_version: str
    reference_sha: str
    device: str
    gpu: str
    gpu_uuid: str
    host: str
    stack: str
    started_at: str
    finished_at: str
    seconds: float
    result: CheckJson
    reference: ReferenceRecord | None
