"""The judge's events as the lab reads them: one frozen type per frame the
judge sends the lab (gpulab.judge.channel.Channel, gpulab.judge.context).

A frame is parsed once, where it comes in (gpulab.lab.runner), and the CLI and
the lab's Results pane read attributes, never a frame's keys. The judge is
trusted, but what it relays is not (a case's name, a summary quoting the
learner's exception), and a frame could come from a judge of another
version: `parse` checks every field with gpulab.wire.protocol's helpers, and a
frame it cannot use is a ProtocolError naming what is wrong, never a crash
further on.

This module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpulab.wire.protocol import ProtocolError, dict_field, number, text
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


@dataclass(frozen=True, slots=True)
class Stage:
    """A stage's words and, where it has steps, how many are done of how
    many (`done` and `total` are both set or both None; 0 <= done <= total).
    `allow_s`: where the judge may move the lab's deadline (a check on the
    CPU with no limit of the learner's), how many seconds from now this
    stage may take before the check is stopped (gpulab.judge.allowance).
    `kind`: what it spends its time on, named by the judge (the words are
    the learner's to read, never parsed); OTHER in a frame that names none
    or one this gpulab does not know."""

    text: str
    done: int | None = None
    total: int | None = None
    allow_s: float | None = None
    kind: StageKind = StageKind.OTHER

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Stage:
        words = frame.get("text")
        if not isinstance(words, str):
            raise ProtocolError("a stage frame without its text")
        p = frame.get("progress")
        done, total = (
            (count(p[0]), count(p[1])) if isinstance(p, list) and len(p) == 2 else (None, None)
        )
        if done is None or total is None or not 0 <= done <= total or total == 0:
            done = total = None  # no progress rather than a bar that lies
        allow = number(frame.get("allow_s"))
        return cls(
            text(words, TEXT_LIMIT),
            done,
            total,
            allow if allow and allow > 0 else None,
            StageKind.read(frame.get("kind")),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "stage", "kind": self.kind.value, "text": self.text}
        if self.done is not None and self.total is not None:
            out["progress"] = [self.done, self.total]
        if self.allow_s is not None:
            out["allow_s"] = self.allow_s
        return out


@dataclass(frozen=True, slots=True)
class CaseDone:
    """A correctness case graded: the `index`-th of `total` (None when the
    grader does not know how many there will be), and the grader's row."""

    index: int
    total: int | None
    case: CaseRow

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def passed(self) -> bool:
        return self.case.passed

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> CaseDone:
        index = count(frame.get("index"))
        if index is None:
            raise ProtocolError("a case frame without its index")
        return cls(
            index, count(frame.get("total")) or None, CaseRow.from_json(dict_field(frame, "case"))
        )

    def to_json(self) -> dict[str, Any]:
        return {"type": "case", "index": self.index, "total": self.total, "case": self.case.json}


@dataclass(frozen=True, slots=True)
class Correct:
    """Every correctness case passed; the timing begins (`cases`: how many,
    None when the frame did not say)."""

    cases: int | None

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Correct:
        return cls(count(frame.get("cases")))

    def to_json(self) -> dict[str, Any]:
        return {"type": "correct", "cases": self.cases}


@dataclass(frozen=True, slots=True)
class Graded:
    """The grade, sent as the timing ends, before the advice that follows it."""

    grade: str
    summary: str

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Graded:
        return cls(text(frame.get("grade"), GRADE_LIMIT), text(frame.get("summary"), SUMMARY_LIMIT))

    def to_json(self) -> dict[str, Any]:
        return {"type": "graded", "grade": self.grade, "summary": self.summary}


@dataclass(frozen=True, slots=True)
class Stuck:
    """Where the learner's code was when the check ran out of time: the
    judge's answer to the lab's SIGUSR1 (gpulab.judge.stuck), read from what
    the sandbox printed. Advice, never a verdict: the sandbox is the
    learner's process, and may print anything."""

    text: str

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Stuck:
        return cls(text(frame.get("text"), SUMMARY_LIMIT))

    def to_json(self) -> dict[str, Any]:
        return {"type": "stuck", "text": self.text}


@dataclass(frozen=True, slots=True)
class Finished:
    """The judge's last frame: its result (the lab adds where and how long)."""

    result: CheckResult

    @classmethod
    def parse(cls, frame: dict[str, Any]) -> Finished:
        result = frame.get("result")
        if not isinstance(result, dict):
            raise ProtocolError("a result frame without its result")
        return cls(CheckResult.from_json(result))


# What the lab's callbacks receive (gpulab.lab.runner's `on_event`).
Event = Stage | CaseDone | Correct | Graded

_TYPES: dict[str, Any] = {
    "stage": Stage,
    "case": CaseDone,
    "correct": Correct,
    "graded": Graded,
    "stuck": Stuck,
    "result": Finished,
}


def parse(frame: dict[str, Any]) -> Event | Finished | Stuck | None:
    """The event a frame is; None for a type the lab does not know (a newer
    judge's: ignored, as the lab always has). Raises ProtocolError for a
    frame of a known type that it cannot use."""
    kind = _TYPES.get(str(frame.get("type")))
    if kind is None:
        return None
    event: Event | Finished | Stuck = kind.parse(frame)
    return event
