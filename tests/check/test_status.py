"""The one Status and StageKind (gpulab.wire.status): each travels as its
value and reads back as its member, and what a frame or a file says that
is not one of them reads as a safe default, never a crash."""

from __future__ import annotations

import json

import pytest

from gpulab.wire.events import Stage, parse
from gpulab.wire.result import CheckResult
from gpulab.wire.status import ENDS, LESSON, RECORDED, StageKind, Status


@pytest.mark.parametrize("member", [*Status, *StageKind])
def test_a_member_travels_as_its_value_and_reads_back_as_itself(member):
    said = json.loads(json.dumps({"status": member, member: 1}))
    assert said == {"status": member.value, member.value: 1}
    assert type(member)(said["status"]) is member
    assert str(member) == f"{member}" == member.value == member


def test_the_groups_of_statuses():
    assert set(ENDS) | set(LESSON) == set(Status)
    assert set(ENDS) & set(LESSON) == set(RECORDED) == {Status.PASSED, Status.FAILED}
    assert Status.of("coming") is Status.COMING and Status.of("pending") is None
    # A lesson's word is never a check's end.
    assert Status.ended("coming") is None and Status.ended("timeout") is Status.TIMEOUT


def test_a_results_status_is_a_checks_end_or_recomputed():
    assert CheckResult.from_json({"status": "crashed"}).status is Status.CRASHED
    for odd in ("not started", "coming", "broken", "pending", 3, None):
        read = CheckResult.from_json({"status": odd, "passed": False})
        assert read.status is Status.FAILED, odd


def test_a_stage_carries_its_kind_as_data():
    stage = Stage("compiling your step", kind=StageKind.COMPILE)
    frame = json.loads(json.dumps(stage.to_json()))
    assert frame["kind"] == "compile"
    assert parse(frame) == stage
    # The words are the learner's to read: the kind is never guessed from them.
    assert parse({**frame, "text": "case 1 of 2: 4×4"}).kind is StageKind.COMPILE


@pytest.mark.parametrize("kind", [None, "a newer judge's kind", 3, ["timing"]])
def test_a_stage_without_a_kind_it_knows_is_other(kind):
    frame = {"type": "stage", "text": "case 1 of 2: 4×4", "progress": [0, 2]}
    if kind is not None:
        frame["kind"] = kind
    got = parse(frame)
    assert got == Stage("case 1 of 2: 4×4", 0, 2, kind=StageKind.OTHER)


def test_stage_seconds_are_keyed_by_the_kinds_values():
    from gpulab.wire.protocol import stage_seconds

    marks = [(StageKind.START, 0.0), (StageKind.CORRECTNESS, 1.0), (StageKind.START, 3.0)]
    assert stage_seconds(marks, 4.0) == {"start": 2.0, "correctness": 2.0}


def test_a_state_files_warning_quotes_the_words_not_the_members():
    from gpulab.lab.state import validate_state

    (problem,) = validate_state(
        {"exercises": {"a": {"status": "x", "attempts": [{"passed": True}]}}}
    ).problems
    assert problem == (
        "exercises.a.status is a string ('x'), expected 'passed' or 'failed'; "
        "recomputed from its attempts as 'passed'"
    )
