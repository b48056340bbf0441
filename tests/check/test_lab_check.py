"""gpulab.lab.check.Lab: the one check use case the CLI, watch, the TUI and
the gradebook call. The judge is faked (what reaches run_check is the test);
real checks through it are tests/cli's, tests/tui's and tests/gradebook's."""

from __future__ import annotations

import pytest

from gpulab.lab import check as lab_check
from gpulab.lab.check import CheckOptions, Lab
from gpulab.lab.runner import check_request
from gpulab.wire.result import CheckResult


@pytest.fixture
def runs(monkeypatch):
    """run_check answers with the status each test sets; the calls are kept."""
    calls: list[dict] = []
    answer = {"status": "failed"}

    def fake(lesson, path, **kw):
        calls.append(kw)
        return CheckResult.from_json(
            {**answer, "exercise": lesson.exercise, "summary": "timed out after 60 s"}
        )

    monkeypatch.setattr(lab_check, "run_check", fake)
    return calls, answer


def test_a_check_plans_runs_explains_a_timeout_and_records(ws, course, runs):
    calls, answer = runs
    softmax = course.find("softmax")
    path = ws.ensure_exercise(softmax)
    lab = Lab(ws, device="cpu")
    answer["status"] = "timeout"
    result = lab.check(softmax, path)
    assert calls[0]["timeout"] == 60 and calls[0]["timeout_cap"] == 600  # the CPU's plan
    assert calls[0]["workspace"] == str(ws.root) and calls[0]["explain"] is None
    assert "The limit was 60 s because this check ran on the CPU" in (result.message or "")
    assert "`gpulab check --timeout SECONDS` changes it" in (result.message or "")
    assert ws.last_result("softmax").status.value == "timeout"
    assert len(ws.exercise_state("softmax")["attempts"]) == 1

    # The learner's own limit and --explain; not recorded when asked not to.
    options = CheckOptions(limit=7, limit_why="you asked", explain=True, record=False)
    lab.check(softmax, path, options=options)
    assert calls[1]["timeout"] == 7 and calls[1]["timeout_cap"] is None
    assert calls[1]["explain"] is not None
    assert len(ws.exercise_state("softmax")["attempts"]) == 1


def test_a_cancelled_check_or_one_without_a_workspace_is_not_recorded(ws, course, runs):
    calls, answer = runs
    softmax = course.find("softmax")
    path = ws.ensure_exercise(softmax)
    answer["status"] = "cancelled"
    Lab(ws, device="cpu").check(softmax, path)
    assert ws.exercise_state("softmax").get("attempts") is None
    # The gradebook's lab: no workspace, so no compiler cache and no record.
    answer["status"] = "passed"
    lab = Lab(None, device="cpu")
    assert lab.check(softmax, path, options=CheckOptions(limit=30)).passed
    assert calls[-1]["workspace"] is None and calls[-1]["timeout"] == 30
    assert not lab.record(softmax, CheckResult.from_json({"status": "passed"}))


def test_a_read_only_workspace_is_planned_as_blocked_and_not_recorded(read_only_ws, course, runs):
    calls, _ = runs
    softmax = course.find("softmax")
    lab = Lab(read_only_ws, device="cpu")
    planned = lab.plan(softmax)
    assert planned.blocked and "cannot be written to" in planned.blocked
    assert planned.workspace is None
    state = read_only_ws.load_state()
    lab.check(softmax, read_only_ws.exercise_path(softmax), planned=planned)
    assert calls[0]["workspace"] is None and read_only_ws.load_state() == state


def test_the_spare_is_made_for_the_request_the_check_sends(ws, course):
    """A spare judge fits a check only if the request is the same: the lab
    builds both from one plan."""
    softmax = course.find("softmax")
    path = ws.ensure_exercise(softmax)

    class Spares:
        closed, early = False, False
        asked: list = []

        def prepare(self, request, hold=False):
            self.asked.append(request)

    spares = Spares()
    lab = Lab(ws, device="cpu", spares=spares)  # type: ignore[arg-type]
    options = CheckOptions(limit=90, record=False)
    lab.prepare_spare(softmax, path, options)
    plan = lab.plan(softmax, options).plan
    expected = check_request(
        softmax, path, timeout=plan.timeout, device="cpu", workspace=str(ws.root)
    )
    assert spares.asked == [expected]
