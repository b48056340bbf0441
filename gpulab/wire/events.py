"""The judge's events as the lab reads them: one frozen type per frame the
judge sends the lab (gpulab.judge.channel.Channel, gpulab.judge.context).

A frame is parsed once, where it comes in (gpulab.lab.runner), and the CLI and
the lab's Results pane read attributes, never a frame's keys. The judge is
trusted, but what it relays is not (a case's name, a summary quoting the
learner's exception), and a frame could come from a judge of another
version: each frame is declared once with gpulab.wire.codec and read as a
reply (`Tolerant`), trusting nothing: a field of the wrong type reads as
absent, words are cut at their limit, and a frame without what it needs (a
stage's words, a case's index, the result) is a ProtocolError naming its
type, never a crash further on.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from gpulab.wire.codec import ABSENT, Tolerant, decode, wire
from gpulab.wire.protocol import JsonObject, number
from gpulab.wire.result import CaseRow, CheckResult
from gpulab.wire.status import StageKind

# Longer than any honest frame's words ("case 3 of 14: 64×64 fp16"); a
# bigger one is cut, not printed whole on every progress line.
TEXT_LIMIT = 1000
SUMMARY_LIMIT = 300  # what the judge's `graded` frame cuts a summary to
GRADE_LIMIT = 8


def count(value: Any) -> int | None:
    """A whole number, 0 or more (bool is not a count here), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _progress(value: Any) -> tuple[int, int] | None:
    """[done, total], two counts in order with total > 0, else None: no
    progress rather than a bar that lies."""
    if not isinstance(value, list) or len(value) != 2:
        return None
    done, total = count(value[0]), count(value[1])
    if done is None or total is None or not 0 < total or done > total:
        return None
    return done, total


def _written_progress(stage: Stage) -> Any:
    if stage.done is None or stage.total is None:
        return ABSENT
    return [stage.done, stage.total]


def _allowance(value: Any) -> float | None:
    allow = number(value)
    return allow if allow and allow > 0 else None


@dataclass(frozen=True, slots=True)
class Stage(Tolerant):
    """A stage's words and, where it has steps, how many are done of how
    many (`done` and `total` are both set or both None; 0 <= done <= total).
    `allow_s`: where the judge may move the lab's deadline (a check on the
    CPU with no limit of the learner's), how many seconds from now this
    stage may take before the check is stopped (gpulab.judge.allowance).
    `kind`: what it spends its time on, named by the judge (the words are
    the learner's to read, never parsed); OTHER in a frame that names none
    or one this gpulab does not know."""

    TYPE: ClassVar[str] = "stage"

    text: str = wire(limit=TEXT_LIMIT)  # without it, the frame is refused
    # Both travel as `progress`, [done, total], written with `done`.
    done: int | None = wire(
        None,
        key="progress",
        read=lambda v: None if (p := _progress(v)) is None else p[0],
        write=_written_progress,
    )
    total: int | None = wire(
        None,
        key="progress",
        read=lambda v: None if (p := _progress(v)) is None else p[1],
        write=lambda _: ABSENT,
    )
    allow_s: float | None = wire(None, omit=True, read=_allowance)
    kind: StageKind = wire(StageKind.OTHER, read=StageKind.read)


def _case(value: Any) -> CaseRow:
    return CaseRow.from_json(value if isinstance(value, dict) else {})


@dataclass(frozen=True, slots=True)
class CaseDone(Tolerant):
    """A correctness case graded: the `index`-th of `total` (None when the
    grader does not know how many there will be), and the grader's row."""

    TYPE: ClassVar[str] = "case"

    # Without a count for its index, the frame is refused.
    index: int = wire(read=lambda v: ABSENT if (n := count(v)) is None else n)
    total: int | None = wire(read=lambda v: count(v) or None)
    case: CaseRow = wire(read=_case)

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def passed(self) -> bool:
        return self.case.passed


@dataclass(frozen=True, slots=True)
class Correct(Tolerant):
    """Every correctness case passed; the timing begins (`cases`: how many,
    None when the frame did not say)."""

    TYPE: ClassVar[str] = "correct"

    cases: int | None = wire(None, read=count)


@dataclass(frozen=True, slots=True)
class Graded(Tolerant):
    """The grade, sent as the timing ends, before the advice that follows it."""

    TYPE: ClassVar[str] = "graded"

    grade: str = wire("", limit=GRADE_LIMIT)
    summary: str = wire("", limit=SUMMARY_LIMIT)


@dataclass(frozen=True, slots=True)
class Stuck(Tolerant):
    """Where the learner's code was when the check ran out of time: the
    judge's answer to the lab's SIGUSR1 (gpulab.judge.stuck), read from what
    the sandbox printed. Advice, never a verdict: the sandbox is the
    learner's process, and may print anything."""

    TYPE: ClassVar[str] = "stuck"

    text: str = wire("", limit=SUMMARY_LIMIT)


def _result(value: Any) -> CheckResult:
    return CheckResult.from_json(value) if isinstance(value, dict) else ABSENT


@dataclass(frozen=True, slots=True)
class Finished(Tolerant):
    """The judge's last frame: its result (the lab adds where and how long).
    Without a result object, the frame is refused."""

    TYPE: ClassVar[str] = "result"

    result: CheckResult = wire(read=_result)


# What the lab's callbacks receive (gpulab.lab.runner's `on_event`).
Event = Stage | CaseDone | Correct | Graded

_TYPES: dict[str, type[Event | Finished | Stuck]] = {
    kind.TYPE: kind for kind in (Stage, CaseDone, Correct, Graded, Stuck, Finished)
}


def parse(frame: JsonObject) -> Event | Finished | Stuck | None:
    """The event a frame is; None for a type the lab does not know (a newer
    judge's: ignored, as the lab always has). Raises ProtocolError for a
    frame of a known type that it cannot use."""
    kind = _TYPES.get(str(frame.get("type")))
    if kind is None:
        return None
    return decode(kind, frame)
