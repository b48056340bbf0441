"""The lab's side of a check, end to end against a stand-in judge: a real
process that reads the request and writes the frames a test gives it on the
private pipe, so what is pinned here is what `gpulab check` prints (its
`--json` schema, a documented interface, and its progress lines) for frames
that crossed a real process boundary."""

from __future__ import annotations

import json
import sys

import pytest

from gpulab.lab import child
from gpulab.wire.codec import PROTOCOL
from gpulab.wire.result import CaseRow

FAKE_JUDGE = """
import json, os, sys, time
from gpulab.wire import protocol
fd = int(os.environ["GPULAB_EVENTS_FD"])
sys.stdin.read()
for frame in json.load(open(sys.argv[1])):
    if frame.get("type") == "sleep":
        time.sleep(frame["s"])
    else:
        protocol.write_frame(fd, frame)
"""

CASE = {"name": "4×8 fp32", "dtype": "float32", "max_abs": 1e-7, "max_rel": 2e-7, "passed": True}
TIMING = {
    "device": "NVIDIA H200",
    "unit": "GB/s",
    "ms": 0.01,
    "throughput": 3000.0,
    "roofline_fraction": 0.62,
    "speedup": 1.5,
    "grade": "B",
    "summary": "grade B",
    "cases": [
        {
            "shape": "4×8",
            "dtype": "float32",
            "ms": 0.01,
            "p20_ms": 0.009,
            "p80_ms": 0.011,
            "throughput": 3000.0,
            "roofline_fraction": 0.62,
            "speedup": 1.5,
        }
    ],
}
JUDGED = {
    "status": "passed",
    "summary": "all 1 cases correct; grade B",
    "device": "NVIDIA H200",
    "mode": "native",
    "cases": [CASE],
    "skipped": [],
    "notes": ["a note"],
    "timing": TIMING,
    "verdict": "judge",
    "output": "hello\n",
    "isolation": {"landlock": True},
    "stages": {"start": 0.1, "correctness": 0.2},
    "slowest": [["case 1 of 1: 4×8 fp32", 0.2]],
}
# The judge's first frame says its protocol version (gpulab.judge.main.Channel).
FRAMES = [
    {"type": "stage", "kind": "start", "text": "starting", "protocol": PROTOCOL},
    {"type": "stage", "kind": "correctness", "text": "case 1 of 1: 4×8 fp32", "progress": [0, 1]},
    {"type": "case", "index": 1, "total": 1, "case": CASE},
    {"type": "correct", "cases": 1},
    {"type": "graded", "grade": "B", "summary": "all 1 cases correct; grade B"},
    {"type": "result", "result": JUDGED},
]

# Every key of `gpulab check --json`, in order, with the type of its value,
# for a check the judge graded, one it ended without a result, and one that
# timed out: the interface scripts read.
PASSED_KEYS = [
    ("exercise", str),
    ("lesson", str),
    ("file", str),
    ("passed", bool),
    ("cases", list),
    ("timing", dict),
    ("output", str),
    ("stages", dict),
    ("status", str),
    ("summary", str),
    ("device", str),
    ("mode", str),
    ("skipped", list),
    ("notes", list),
    ("verdict", str),
    ("isolation", dict),
    ("slowest", list),
    ("duration_s", float),
    ("warm", bool),
]
NO_RESULT_KEYS = [
    ("exercise", str),
    ("lesson", str),
    ("file", str),
    ("passed", bool),
    ("cases", list),
    ("timing", type(None)),
    ("output", str),
    ("stages", dict),
    ("status", str),
    ("summary", str),
    ("message", str),
    ("duration_s", float),
]
TIMEOUT_KEYS = NO_RESULT_KEYS


@pytest.fixture
def fake_judge(tmp_path, monkeypatch):
    """Make every judge the stand-in, sending `frames` (set by the test)."""
    script = tmp_path / "fake_judge.py"
    script.write_text(FAKE_JUDGE)
    frames = tmp_path / "frames.json"

    def python_module(module: str, *args: str) -> list[str]:
        assert module == "gpulab.judge.main"
        return [sys.executable, str(script), str(frames)]

    monkeypatch.setattr(child, "python_module", python_module)

    def send(items: list[dict]) -> None:
        frames.write_text(json.dumps(items))

    return send


def gpulab_check(tmp_path, capsys, *extra: str) -> tuple[int, str, str]:
    from gpulab.cli import build_parser
    from gpulab.cli.commands import check

    # The workspace's own file (the stand-in never reads it): its result is recorded.
    argv = ["--workspace", str(tmp_path / "ws"), "check", "softmax", *extra]
    code = check.run(build_parser().parse_args(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def keys_and_types(result: dict) -> list[tuple[str, type]]:
    return [(k, type(v)) for k, v in result.items()]


def test_json_of_a_graded_check(fake_judge, tmp_path, capsys):
    fake_judge(FRAMES)
    code, out, _ = gpulab_check(tmp_path, capsys, "--device", "cpu", "--json")
    result = json.loads(out)
    assert code == 0
    assert keys_and_types(result) == PASSED_KEYS
    assert result["exercise"] == "softmax" and result["passed"] is True
    assert result["cases"] == [CASE] and result["timing"] == TIMING
    assert result["output"] == "hello\n" and result["status"] == "passed"
    assert result["notes"] == ["a note"] and result["slowest"] == JUDGED["slowest"]
    assert result["warm"] is False
    # The judge's stages, after the lab's estimate of the judge's start-up.
    assert list(result["stages"]) == ["judge start-up", "start", "correctness"]
    assert result["stages"]["start"] == 0.1
    assert isinstance(result["stages"]["judge start-up"], float)
    # The attempt recorded from it.
    state = json.loads((tmp_path / "ws" / ".gpulab" / "state.json").read_text())
    attempt = state["exercises"]["softmax"]["attempts"][-1]
    assert {k: attempt[k] for k in ("passed", "summary", "device", "ms", "grade")} == {
        "passed": True,
        "summary": "all 1 cases correct; grade B",
        "device": "NVIDIA H200",
        "ms": 0.01,
        "grade": "B",
    }
    assert attempt["throughput"] == 3000.0 and attempt["unit"] == "GB/s"
    assert attempt["roofline_fraction"] == 0.62 and attempt["speedup"] == 1.5
    saved = json.loads((tmp_path / "ws" / ".gpulab" / "results" / "softmax.json").read_text())
    assert saved == result


def test_progress_lines_of_a_graded_check(fake_judge, tmp_path, capsys):
    """Not a terminal (capsys): the progress is on stdout, before the
    verdict, so a log that keeps stdout and stderr apart, or prints one
    after the other, reads in order (issue 48)."""
    fake_judge(FRAMES)
    code, out, err = gpulab_check(tmp_path, capsys, "--device", "cpu")
    assert code == 0
    lines = out.splitlines()
    assert "… starting" in lines and "… case 1 of 1: 4×8 fp32" in lines
    assert "correct: all 1 cases right; timing now" in lines
    assert "graded: all 1 cases correct; grade B" in lines
    assert "PASS" in out and "a note" in out and "hello" in out
    assert out.index("graded: all 1") < out.index("PASS")
    assert "… case" not in err


def test_json_of_a_check_that_ended_without_a_result(fake_judge, tmp_path, capsys):
    fake_judge(FRAMES[:3])
    code, out, _ = gpulab_check(tmp_path, capsys, "--device", "cpu", "--json")
    result = json.loads(out)
    assert code == 2
    assert keys_and_types(result) == NO_RESULT_KEYS
    assert result["status"] == "error" and result["passed"] is False
    assert result["summary"] == "the grader stopped without a result (exit 0)"
    assert list(result["stages"]) == ["judge start-up", "start", "correctness"]


def test_json_of_a_check_that_timed_out(fake_judge, tmp_path, capsys):
    fake_judge([FRAMES[0], {"type": "sleep", "s": 30}])
    code, out, _ = gpulab_check(tmp_path, capsys, "--device", "cpu", "--json", "--timeout", "1")
    result = json.loads(out)
    assert code == 1
    assert keys_and_types(result) == TIMEOUT_KEYS
    assert result["status"] == "timeout"
    assert result["summary"].startswith("timed out after 1 s, ")
    assert result["message"].endswith(
        "you asked for it with --timeout; --timeout SECONDS changes it."
    )


def test_run_check_hands_on_typed_events_and_leaves_out_bad_frames(fake_judge, tmp_path):
    """Each frame parsed once, where it comes in: the callbacks get typed
    events; a frame that cannot be used, or of a type the lab does not
    know, is left out and the check goes on to its result."""
    from gpulab.course.content import load_course
    from gpulab.lab.runner import run_check
    from gpulab.wire.events import CaseDone, Correct, Graded, Stage
    from gpulab.wire.result import CheckResult
    from gpulab.wire.status import StageKind

    bad = [
        {"type": "stage", "text": 7},
        {"type": "case", "index": "one", "case": CASE},
        {"type": "result", "result": "passed"},
        {"type": "something newer"},
    ]
    fake_judge([FRAMES[0], *bad, *FRAMES[1:]])
    seen: list = []
    sub = tmp_path / "attempt.py"
    sub.write_text("")
    result = run_check(
        load_course().find("softmax"), sub, device="cpu", timeout=60, on_event=seen.append
    )
    assert seen == [
        Stage("starting", kind=StageKind.START),
        Stage("case 1 of 1: 4×8 fp32", 0, 1, kind=StageKind.CORRECTNESS),
        CaseDone(1, 1, CaseRow.from_json(CASE)),
        Correct(1),
        Graded("B", "all 1 cases correct; grade B"),
    ]
    assert isinstance(result, CheckResult) and result.passed
    assert result.timing is not None and result.timing.grade == "B"
    assert result.file == str(sub.resolve()) and result.warm is False


def test_a_judge_of_another_protocol_version_is_refused(fake_judge, tmp_path, capsys):
    """The judge's first frame says its protocol version; another one (a
    judge from another install) is a check that could not run, said in the
    learner's terms with both versions, not a crash and not its frames read."""
    fake_judge([{**FRAMES[0], "protocol": PROTOCOL + 1}, *FRAMES[1:]])
    code, out, _ = gpulab_check(tmp_path, capsys, "--device", "cpu", "--json")
    result = json.loads(out)
    assert code == 2 and result["status"] == "error" and not result["passed"]
    assert f"version {PROTOCOL + 1} of gpulab's check protocol" in result["summary"]
    assert f"this gpulab version {PROTOCOL}" in result["summary"]
    assert "Reinstall gpulab" in result["message"]
    assert result["cases"] == []  # nothing the other judge said was read
