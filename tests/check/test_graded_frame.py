"""The grade reaches the lab as soon as the timing ends (issue 32): the
judge sends a `graded` frame before the diagnosis that follows a timed
check, and sends none for a check with no grade. A real pipe, the judge's
own Channel and frame reader."""

from __future__ import annotations

import os

from gpulab.judge.channel import Channel, graded
from gpulab.wire import protocol
from gpulab.wire.result import CheckResult


def frames_after(result: dict) -> list[dict]:
    """The frames `graded` sends for the judge's result whose JSON is `result`."""
    read, write = os.pipe()
    try:
        graded(Channel(write), CheckResult.from_json(result))
        os.close(write)
        write = -1
        out = []
        while True:
            try:
                out.append(protocol.read_frame(read))
            except EOFError:
                return out
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def test_a_timed_pass_sends_its_grade_before_the_advice():
    summary = "all 18 cases correct; grade B: 72% of the roofline, 1.57x torch.softmax"
    got = frames_after({"status": "passed", "summary": summary, "timing": {"grade": "B"}})
    assert got == [{"type": "graded", "grade": "B", "summary": summary}]


def test_no_grade_no_frame():
    assert frames_after({"status": "passed", "summary": "all 18 cases correct"}) == []
    assert frames_after({"status": "passed", "timing": {"grade": None}}) == []
    assert frames_after({"status": "failed", "timing": {"grade": "A"}}) == []


def test_a_long_summary_is_cut_not_sent_whole():
    got = frames_after({"status": "passed", "summary": "x" * 5000, "timing": {"grade": "A"}})
    assert len(got) == 1 and len(got[0]["summary"]) <= 300
