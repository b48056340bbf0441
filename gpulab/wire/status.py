"""The one list of the words a check and a lesson are shown with: what a
check can end as, what a lesson shows before it has one (`Status`), and the
kinds of stage a check's time goes to (`StageKind`).

Both are `str`s, so they travel as their values: a result's JSON says
"passed", a stage frame "correctness", and a value read back from a state
file or a frame compares equal to its member. Standard library only.
"""

from __future__ import annotations

from enum import Enum


class _Word(str, Enum):
    """A member that reads, prints and formats as its value."""

    def __str__(self) -> str:
        return str.__str__(self)  # the value: a str-based member's own characters

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


class Status(_Word):
    # What a check ends as (ENDS).
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # gpulab could not run the check (its fault or the machine's)
    TIMEOUT = "timeout"
    CRASHED = "crashed"  # the learner's process died (a fault, a signal, out of memory)
    CANCELLED = "cancelled"
    # What a lesson shows where it has no check's (LESSON): never a check's end.
    NOT_STARTED = "not started"  # gradable, never checked
    COMING = "coming"  # in the course, not gradable yet
    BROKEN = "broken"  # its content could not be loaded

    @classmethod
    def of(cls, value: object) -> Status | None:
        """The member `value` names, or None (a word from elsewhere)."""
        try:
            return cls(value)
        except ValueError:
            return None

    @classmethod
    def ended(cls, value: object) -> Status | None:
        """The check's end `value` names (one of ENDS), or None."""
        status = cls.of(value)
        return status if status in ENDS else None


# What a check can end as.
ENDS = (
    Status.PASSED,
    Status.FAILED,
    Status.ERROR,
    Status.TIMEOUT,
    Status.CRASHED,
    Status.CANCELLED,
)
# What progress records of a check: the rest leave no attempt behind.
RECORDED = (Status.PASSED, Status.FAILED)
# What a lesson in the course list shows: its last recorded check's, or why it has none.
LESSON = (*RECORDED, Status.NOT_STARTED, Status.COMING, Status.BROKEN)


class StageKind(_Word):
    """What a stage of a check spends its time on: the judge names it as it
    announces the stage (gpulab.wire.events.Stage), and the result's
    `stages` adds up the seconds of each."""

    JUDGE_START = "judge start-up"  # the lab's: before the judge's first stage
    START = "start"  # the judge starting the check and its sandbox
    WAITING = "waiting for the GPU"  # another check holds it
    IMPORT = "import"  # the learner's file importing
    COMPILE = "compile"  # kernels or a torch.compile'd step compiling
    CORRECTNESS = "correctness"  # the cases, checked
    TIMING = "timing"
    REPLAY = "replay"  # the learner's kernels run again, apart from their code
    RUNNING = "running"  # the learner's code run whole (a benchmark, a step, a block)
    TRACING = "tracing"  # Dynamo tracing the learner's step
    EXPORTING = "exporting"  # the learner's JAX steps exported
    PROFILING = "profiling"  # the learner's code under a profiler
    OTHER = "other"  # a kind this gpulab does not know (a newer judge's) or none said

    @classmethod
    def read(cls, value: object) -> StageKind:
        """The kind `value` names; OTHER for anything else."""
        try:
            return cls(value)
        except ValueError:
            return cls.OTHER
