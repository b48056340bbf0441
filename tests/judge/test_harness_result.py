"""The judge's result is typed where the harness makes it (issue 28): a
CheckResult, its status a Status, its cases CaseRows, written as JSON only
in the result frame, with the judge's keys in the order they always had."""

from __future__ import annotations

from tests.conftest import reference_source, starter_source


def _grade(tmp_path, exercise: str, function: str, src: str):
    from gpulab.judge import loader
    from gpulab.judge.harness import grade_request
    from gpulab.wire.check_request import CheckRequest
    from tests.inprocess import Channel, InProcessSandbox

    path = tmp_path / f"{exercise}.py"
    path.write_text(src)
    request = CheckRequest(exercise=exercise, function=function, file=str(path))
    sandbox = InProcessSandbox(path, [r for r in loader.records(exercise) if r != "trace"])
    return grade_request(request, "cpu", Channel(), sandbox=sandbox)


def test_a_passing_check_is_a_typed_result(tmp_path):
    from gpulab.wire.result import JUDGE_ORDER, CaseRow, CheckResult
    from gpulab.wire.status import Status

    r = _grade(tmp_path, "copy_ceiling", "copy_bandwidth", reference_source("copy_ceiling"))
    assert isinstance(r, CheckResult)
    assert r.status is Status.PASSED and r.passed, r.summary
    assert r.cases and all(isinstance(c, CaseRow) and c.passed for c in r.cases)
    assert r.rest == {"mode": "cpu"} and r.timing is None
    out = r.to_json()
    judged = [k for k in out if k in JUDGE_ORDER]
    assert judged == ["status", "summary", "device", "mode", "skipped", "notes"]
    assert out["status"] == "passed" and out["timing"] is None


def test_a_failing_check_names_its_first_wrong_case(tmp_path):
    from gpulab.wire.status import Status

    r = _grade(tmp_path, "copy_ceiling", "copy_bandwidth", starter_source("copy_ceiling"))
    assert r.status is Status.FAILED and not r.passed
    first = next(c for c in r.cases if not c.passed)
    assert r.summary.endswith(f"first: {first.name}: {first.detail}"), r.summary
    assert r.message is None and "message" not in r.to_json()


def test_a_learner_error_is_a_failure_with_its_message(tmp_path):
    from gpulab.wire.status import Status

    r = _grade(tmp_path, "copy_ceiling", "copy_bandwidth", "raise ValueError('nope')\n")
    assert r.status is Status.FAILED
    assert "ValueError" in r.summary + (r.message or ""), (r.summary, r.message)
