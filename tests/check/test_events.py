"""The judge's frames as the lab parses them (gpulab.wire.events) and a result
read back from JSON (gpulab.wire.result): wrong types, missing fields and
huge strings are refused or dropped, never a crash further on."""

from __future__ import annotations

import json
import math

import pytest

from gpulab.wire.events import (
    TEXT_LIMIT,
    CaseDone,
    Correct,
    Finished,
    Graded,
    Stage,
    parse,
)
from gpulab.wire.protocol import ProtocolError
from gpulab.wire.result import CaseRow, CheckResult
from gpulab.wire.status import Status

JUNK = [None, True, 1.5, -1, "7", [], {}, [1], [1, 2, 3]]


def test_each_frame_the_judge_sends_parses_to_its_type():
    assert parse({"type": "stage", "text": "starting"}) == Stage("starting")
    assert parse({"type": "stage", "text": "case 2 of 3", "progress": [1, 3]}) == Stage(
        "case 2 of 3", 1, 3
    )
    case = {"name": "4×8 fp32", "passed": True, "max_abs": 0.0}
    got = parse({"type": "case", "index": 1, "total": 3, "case": case})
    assert got == CaseDone(1, 3, CaseRow.from_json(case))
    assert isinstance(got, CaseDone) and (got.name, got.passed) == ("4×8 fp32", True)
    assert got.case.max_abs == 0.0 and got.case.json == case
    assert parse({"type": "correct", "cases": 14}) == Correct(14)
    assert parse({"type": "graded", "grade": "B", "summary": "grade B"}) == Graded("B", "grade B")
    done = parse({"type": "result", "result": {"status": "passed", "summary": "ok"}})
    assert isinstance(done, Finished) and done.result.passed and done.result.summary == "ok"


def test_what_is_written_out_parses_back_the_same():
    for event in (
        Stage("starting"),
        Stage("case 2 of 3", 1, 3),
        CaseDone(2, None, CaseRow.from_json({"name": "x"})),
        Correct(None),
        Graded("A", "grade A"),
    ):
        assert parse(event.to_json()) == event


def test_a_type_the_lab_does_not_know_is_left_out():
    assert parse({"type": "progress_of_a_newer_judge", "text": "hi"}) is None


@pytest.mark.parametrize("text", [None, 3, ["starting"], {"a": 1}])
def test_a_stage_without_words_is_refused(text):
    with pytest.raises(ProtocolError, match="stage"):
        parse({"type": "stage", "text": text})
    with pytest.raises(ProtocolError):
        parse({"type": "stage"})


@pytest.mark.parametrize(
    "progress", [*JUNK, [3, 2], [-1, 2], [0, 0], [True, 2], [1.0, 2], ["1", "2"]]
)
def test_progress_that_is_not_two_counts_in_order_is_dropped(progress):
    assert parse({"type": "stage", "text": "t", "progress": progress}) == Stage("t")


def test_progress_at_either_end_is_kept():
    assert parse({"type": "stage", "text": "t", "progress": [0, 5]}) == Stage("t", 0, 5)
    assert parse({"type": "stage", "text": "t", "progress": [5, 5]}) == Stage("t", 5, 5)


@pytest.mark.parametrize("index", [None, "1", 1.0, True, -2, [1]])
def test_a_case_without_its_index_is_refused(index):
    with pytest.raises(ProtocolError, match="case"):
        parse({"type": "case", "index": index, "case": {"name": "a"}})


@pytest.mark.parametrize("case", JUNK)
def test_a_case_of_the_wrong_shape_has_no_name(case):
    got = parse({"type": "case", "index": 2, "total": "many", "case": case})
    assert isinstance(got, CaseDone) and got.index == 2 and got.total is None
    assert isinstance(got.name, str) and isinstance(got.case, CaseRow)
    if not isinstance(case, dict):
        assert got.name == "" and not got.passed


@pytest.mark.parametrize("cases", JUNK)
def test_a_correct_frame_without_a_count_says_none(cases):
    got = parse({"type": "correct", "cases": cases})
    assert got == Correct(None)


def test_huge_strings_are_cut():
    huge = "x" * 5_000_000
    stage = parse({"type": "stage", "text": huge})
    assert isinstance(stage, Stage) and len(stage.text) == TEXT_LIMIT
    case = parse({"type": "case", "index": 1, "case": {"name": huge}})
    assert isinstance(case, CaseDone) and len(case.name) == TEXT_LIMIT
    graded = parse({"type": "graded", "grade": huge, "summary": huge})
    assert isinstance(graded, Graded) and len(graded.grade) <= 8 and len(graded.summary) <= 300
    result = CheckResult.from_json({"status": "failed", "summary": huge, "output": huge})
    assert len(result.summary) <= 20000 and len(result.output) < len(huge)


@pytest.mark.parametrize("payload", [None, "passed", [], 3])
def test_a_result_frame_without_its_result_is_refused(payload):
    with pytest.raises(ProtocolError, match="result"):
        parse({"type": "result", "result": payload})


@pytest.mark.parametrize("junk", JUNK)
def test_a_result_of_wrong_types_reads_back_with_the_fields_dropped(junk):
    raw = {
        key: junk
        for key in (
            "exercise",
            "lesson",
            "file",
            "passed",
            "status",
            "summary",
            "message",
            "device",
            "output",
            "cases",
            "timing",
            "skipped",
            "notes",
            "stages",
            "duration_s",
            "warm",
        )
    }
    result = CheckResult.from_json(raw)
    # `passed: true` alone still says passed (as the state's schema reads it).
    assert result.status is (Status.PASSED if junk is True else Status.FAILED)
    for words in (result.summary, result.exercise, result.lesson, result.file, result.output):
        assert words in ("", junk)
    assert result.message in (None, junk) and result.device in (None, junk)
    assert result.timing is None or result.timing.json == junk == {}
    assert all(isinstance(c, dict) for c in result.cases)
    assert result.skipped is None or all(isinstance(s, str) for s in result.skipped)
    assert result.stages is None or result.stages == {}
    assert result.duration_s is None or result.duration_s == junk
    assert result.warm is None or result.warm is junk
    out = result.to_json()
    assert out["status"] in ("failed", "passed") and isinstance(out["passed"], bool)
    assert "timing" in out


def test_a_status_gpulab_does_not_know_is_recomputed_from_passed():
    assert CheckResult.from_json({"status": "fail", "passed": True}).status is Status.PASSED
    assert CheckResult.from_json({"passed": False}).status is Status.FAILED
    assert CheckResult.from_json({"status": "timeout", "passed": True}).status is Status.TIMEOUT


def test_timing_keeps_its_json_and_types_what_the_lab_reads():
    timing = {"grade": "B", "ms": 1, "unit": 7, "speedup": float("nan"), "cases": [{}, 3], "x": 1}
    result = CheckResult.from_json({"status": "passed", "timing": timing})
    assert result.timing is not None
    assert result.timing.json == timing  # written back as it came
    assert result.timing.attempt() == {"grade": "B", "ms": 1}  # an int stays an int
    assert [row.json for row in result.timing.cases] == [{}]  # 3 is no row
    assert result.to_json()["timing"] is timing


def test_rows_type_what_the_lab_reads_and_keep_the_rest():
    case = {"name": "4×8", "max_abs": float("nan"), "mismatches": -1, "passed": 1, "extra": [1]}
    timed = {"shape": "4×8", "ms": "fast", "p20_ms": 0.5, "sizes": {"M": 4, "N": "x"}, "y": 2}
    result = CheckResult.from_json(
        {"status": "failed", "cases": [case, "junk"], "timing": {"cases": [timed]}}
    )
    (row,) = result.cases
    assert row.label == "4×8" and math.isnan(row.max_abs)  # a NaN error is an error
    assert row.mismatches is None and row.passed is False  # only True passes
    assert result.timing is not None
    (t,) = result.timing.cases
    assert t.label == "4×8" and t.ms is None and t.p20_ms == 0.5 and t.sizes == {"M": 4}
    out = result.to_json()
    assert out["cases"] == [case] and out["timing"]["cases"] == [timed]  # as they came


def test_the_judges_other_keys_pass_through_in_order():
    raw = {
        "status": "passed",
        "summary": "ok",
        "device": "cpu",
        "mode": "interpreter",
        "skipped": ["a"],
        "notes": [],
        "compiled_ahead": None,
        "verdict": "judge",
        "diagnosis": [],
        "explain": {"error": ""},
    }
    out = CheckResult.from_json(raw).to_json()
    assert list(out)[7:] == list(raw)  # after the lab's own keys
    assert out["compiled_ahead"] is None and out["explain"] == {"error": ""}


def test_an_int_past_a_floats_range_is_no_number():
    huge = 10**400  # well-formed JSON; math.isfinite raises OverflowError on it
    timing = {"ms": huge, "cases": [{"ms": huge, "sizes": {"M": huge}}]}
    result = CheckResult.from_json(
        {"status": "passed", "duration_s": huge, "stages": {"import": huge}, "timing": timing}
    )
    assert result.duration_s is None and result.stages == {}
    assert result.timing is not None and result.timing.ms is None
    (row,) = result.timing.cases
    assert row.ms is None and row.sizes == {}


def test_a_hostile_result_reads_back_to_the_same_bytes_as_ever():
    # Every rule of CheckResult's fields at once: wrong types dropped, words
    # cut, only finite stages, `passed` standing in for a status that is no
    # check's end, a null typed key left out, `timing` always there, the
    # judge's keys (unknown ones too) in their order, how long last.
    raw = {
        "warm": "yes",
        "zz": None,
        "duration_s": 2,
        "notes": ["n", 3],
        "status": "running",
        "passed": True,
        "order": [1],
        "stages": {"start": 1, "bad": float("nan"), "big": 10**400, "flag": True},
        "message": None,
        "exercise": 5,
        "mode": "cpu",
        "device": ["gpu"],
        "rest": {"x": 1},
        "summary": "s" * 20001,
        "timing": "fast",
        "skipped": "all",
    }
    out = CheckResult.from_json(raw).to_json()
    assert json.dumps(out) == json.dumps(
        {
            "exercise": "",
            "lesson": "",
            "file": "",
            "passed": True,
            "cases": [],
            "timing": None,
            "output": "",
            "stages": {"start": 1.0},
            "zz": None,
            "notes": ["n"],
            "status": "passed",
            "order": [1],
            "mode": "cpu",
            "rest": {"x": 1},
            "summary": "s" * 20000,
            "duration_s": 2.0,
        }
    )
    assert json.dumps(CheckResult.from_json(out).to_json()) == json.dumps(out)
