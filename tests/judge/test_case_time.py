"""A CPU check's time limit scales with its cases, and a timeout names the
case that was running (gpulab.judge.allowance, gpulab.lab.runner).

An honest softmax whose reductions went through tl.reduce took 224 s in the
interpreter and was stopped at the 60 s default as "an infinite loop?",
without a word on where it was.
"""

from __future__ import annotations

import re
import time

import pytest

from gpulab.judge import allowance
from gpulab.judge.allowance import FLOOR_S, PER_ELEMENT_S, SLACK, CaseClock
from gpulab.wire.events import Stage


class _Case:
    def __init__(self, *shape: int) -> None:
        torch = pytest.importorskip("torch")
        self.args = (torch.empty(*shape),)
        self.kwargs: dict = {}


def test_each_case_is_given_time_in_proportion_to_its_size():
    clock = CaseClock([_Case(1, 1), _Case(3, 32768), _Case(1, (1 << 20) + 1000)])
    assert clock.allow(0) == FLOOR_S  # never less than the floor
    assert clock.allow(1) == pytest.approx(max(FLOOR_S, SLACK * 3 * 32768 * PER_ELEMENT_S), 0.01)
    assert clock.allow(2) > clock.allow(1) > FLOOR_S - 1


def test_the_rate_is_learned_from_the_cases_that_ran(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(allowance.time, "monotonic", lambda: now[0])
    cases = [_Case(1, 1), _Case(8, 1000), _Case(8, 1000), _Case(4, 100_000)]
    clock = CaseClock(cases)
    before = clock.allow(3)
    clock.start(0)
    now[0] += 20.0  # the first case starts the replay and the profiler: not a rate
    clock.start(1)
    assert clock.rate == 0.0
    now[0] += 8.0  # 1 ms an element: a kernel ten times slower than PER_ELEMENT_S
    clock.start(2)
    assert clock.rate == pytest.approx(1e-3)
    assert clock.allow(3) == pytest.approx(SLACK * 400_000 * 1e-3)
    assert clock.allow(3) > 5 * before
    assert clock.last() >= clock.allow(3)


class _Events:
    """child.Events as _relay reads it: frames, and a deadline it may move."""

    def __init__(self, frames: list[dict], deadline: float) -> None:
        self.frames, self.deadline = frames, deadline

    def __iter__(self):
        return iter(self.frames)


def test_a_stage_moves_the_lab_deadline_later_and_never_past_the_cap():
    from gpulab.lab.runner import _relay

    now = time.monotonic()
    from gpulab.wire.codec import PROTOCOL

    frames = [
        {**Stage("case 1 of 3: 1×1 fp32", 0, 3, 30.0).to_json(), "protocol": PROTOCOL},
        Stage("case 2 of 3: 3×32768 fp32", 1, 3, 500.0).to_json(),
        Stage("case 3 of 3: 1×1 fp32", 2, 3, 1.0).to_json(),  # never earlier
    ]
    events = _Events(frames, now + 60)
    _relay(events, None, cap=now + 200)  # type: ignore[arg-type]
    assert events.deadline == pytest.approx(now + 200, abs=1)
    events = _Events(frames, now + 60)
    _relay(events, None)  # type: ignore[arg-type]  # no cap: the learner's own limit
    assert events.deadline == now + 60
    assert Stage.parse(frames[1]).allow_s == 500.0
    assert Stage.parse({**frames[1], "allow_s": -5}).allow_s is None
    assert Stage.parse({**frames[1], "allow_s": "9"}).allow_s is None


def test_the_cpu_default_may_scale_and_a_learners_limit_may_not(course):
    from gpulab.lab.plan import CPU_TIMEOUT, CPU_TIMEOUT_CAP, plan_check

    lesson = course.find("softmax")
    plan = plan_check(lesson, device="cpu")
    assert (plan.timeout, plan.cap) == (CPU_TIMEOUT, CPU_TIMEOUT_CAP)
    assert plan_check(lesson, device="cpu", limit=90.0).cap is None


HANGS = """
import time
_real = softmax


def softmax(x):
    if x.shape[1] == 1000:  # case 4 of 8: this wrapper hangs there
        while True:
            time.sleep(0.2)
    return _real(x)
"""


def test_a_timeout_names_the_case_and_the_time_it_was_given(tmp_path, course):
    """A real check whose wrapper hangs in one case (asleep: no CPU burnt):
    every case's stage carries its time, the lab waits past its first limit
    for the case, and the summary names it."""
    from gpulab.lab.runner import run_check

    lesson = course.find("softmax_row")
    path = tmp_path / "softmax_row.py"
    path.write_text(lesson.reference_path.read_text() + HANGS)
    stages: list[Stage] = []
    started = time.monotonic()
    r = run_check(
        lesson,
        path,
        device="cpu",
        timing=False,
        timeout=45,  # the start alone took 5-19 s on a busy 2-core box
        timeout_cap=600,
        workspace=str(tmp_path / "ws"),
        on_event=lambda ev: stages.append(ev) if isinstance(ev, Stage) else None,
    ).to_json()
    took = time.monotonic() - started
    assert r["status"] == "timeout", r["summary"]
    assert re.search(r" in case 4 of \d+ \(5×1000 fp32\)", r["summary"]), r["summary"]
    assert f"this one was given {FLOOR_S:g} s" in r["message"], r["message"]
    cases = [s for s in stages if s.text.startswith("case ")]
    assert len(cases) == 4 and all(s.allow_s and s.allow_s >= FLOOR_S for s in cases)
    assert took >= FLOOR_S  # at least the case's time
