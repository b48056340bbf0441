"""A check on the CPU gets a short default limit (not the GPU's 300 s), and a
timed-out check says which limit applied and why."""

from __future__ import annotations

import json

import pytest

from gpulab.lab import plan as timeouts
from gpulab.lab.runner import DEFAULT_TIMEOUT
from gpulab.wire.result import CheckResult

LOOP = "def softmax(x):\n    while True:\n        pass\n"


def test_cpu_checks_default_to_a_minute_gpu_checks_to_the_runners_limit(monkeypatch):
    assert timeouts.CPU_TIMEOUT == 60 < DEFAULT_TIMEOUT
    assert timeouts.default_timeout("cpu")[0] == 60
    assert timeouts.default_timeout("auto", gpu=False)[0] == 60
    assert timeouts.default_timeout("auto", gpu=True)[0] == DEFAULT_TIMEOUT
    assert timeouts.default_timeout("cuda")[0] == DEFAULT_TIMEOUT
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # every GPU hidden from the child
    assert timeouts.default_timeout("auto")[0] == 60


def run_cli(argv, capsys) -> tuple[int, dict]:
    from gpulab.cli import build_parser
    from gpulab.cli.commands import check

    code = check.run(build_parser().parse_args(argv))
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_an_endless_loop_on_the_cpu_stops_at_the_cpu_limit_with_the_reason(
    tmp_path, monkeypatch, capsys
):
    """The real command and a real child; the CPU limit shortened to 8 s for
    the test (the policy, not the number, is what is checked here). Not
    shorter: the limit counts the judge's start, which took 3.6 s on a busy
    2-core box, and a limit spent before case 1 began tests nothing here."""
    monkeypatch.setattr(timeouts, "CPU_TIMEOUT", 8.0)
    loop = tmp_path / "loop.py"
    loop.write_text(LOOP)
    argv = [
        "--workspace",
        str(tmp_path / "ws"),
        "check",
        "softmax",
        "--file",
        str(loop),
        "--device",
        "cpu",
        "--json",
    ]
    code, result = run_cli(argv, capsys)
    assert code == 1 and result["status"] == "timeout"
    # The loop is in case 1, which the judge gives at least 30 s on the CPU
    # (gpulab.judge.allowance): the check ran that long, and says which case
    # it was in, what the case was given, and the first limit and why.
    assert result["duration_s"] < 60
    assert "timed out after" in result["summary"], result["summary"]
    assert "in case 1 of" in result["summary"], result["summary"]
    assert "judge start-up" in result["stages"]
    assert "this one was given 30 s" in result["message"], result["message"]
    assert "The limit was 8 s because this check ran on the CPU" in result["message"]
    code, result = run_cli([*argv, "--timeout", "2"], capsys)
    assert result["status"] == "timeout" and "you asked for it with --timeout" in result["message"]


def test_a_stopped_check_names_the_stage_it_was_in():
    from gpulab.lab.runner import _stopped_in
    from gpulab.wire.events import Stage
    from gpulab.wire.status import StageKind as K

    marks = [(K.JUDGE_START, 0.0), (K.START, 0.1), (K.IMPORT, 2.0)]
    stages = {"judge start-up": 0.1, "start": 1.9, "import": 6.07}
    assert _stopped_in(marks, stages) == ", 6.1 s of it importing your file"
    assert _stopped_in([*marks, (K.CORRECTNESS, 8.0)], {**stages, "correctness": 1.0}) == (
        ", 1.0 s of it running the cases"
    )
    # A case the judge had sent: its number from the stage's progress, its name from its words.
    case = Stage("case 7 of 14: 4×1000 fp16", 6, 14, kind=K.CORRECTNESS)
    assert _stopped_in([*marks, (K.CORRECTNESS, 8.0)], stages, [case]) == (
        " in case 7 of 14 (4×1000 fp16)"
    )
    assert _stopped_in([(K.OTHER, 0.0)], {}) == ""


def test_one_plan_for_the_cli_and_the_lab():
    """gpulab.lab.plan decides the limit, --explain's options and what is recorded,
    for `gpulab check` and the lab alike."""
    from gpulab.course.content import load_course
    from gpulab.lab.plan import EXPLAIN_EXTRA_S, plan_check, recorded

    course = load_course()
    softmax, step = course.find("softmax"), course.find("softmax_row")
    plain = plan_check(softmax, device="cpu")
    assert (plain.timeout, plain.explain, plain.note) == (timeouts.CPU_TIMEOUT, None, "")
    explained = plan_check(softmax, device="cpu", explain=True, explain_gpu="H200")
    assert explained.timeout == timeouts.CPU_TIMEOUT + EXPLAIN_EXTRA_S
    assert explained.explain is not None and explained.explain.gpu == "H200"
    # The learner's own limit stands, --explain or not, with their reason.
    mine = plan_check(softmax, device="cuda", limit=7, limit_why="you asked", explain=True)
    assert (mine.timeout, mine.why) == (7, "you asked")
    # A step has nothing to explain: a note, no options, no extra time.
    noted = plan_check(step, device="cpu", explain=True)
    assert noted.explain is None and noted.timeout == timeouts.CPU_TIMEOUT
    assert "softmax_row is a step" in noted.note

    def said(status: str) -> bool:
        return recorded(CheckResult.from_json({"status": status}))

    assert said("failed") and said("timeout")
    assert not said("error") and not said("cancelled")
