"""The replay's sandbox starts with the first passing case, so a file that
passes no case (a starter, most cheats, most of a learner's wrong tries)
never pays for its start: a second Python importing torch and Triton, about
a third of a failing check's CPU time on a 2-core box. The grader, the
judge's checks and the sandbox's handlers are the real ones, called in a
fresh interpreter (tests/inprocess.py)."""

from __future__ import annotations

from tests.judge.test_replay_record import in_interpreter


def test_the_replays_sandbox_starts_with_the_first_passing_case(tmp_path):
    in_interpreter("tests.judge.test_replay_start:starts", tmp_path)


def starts(tmp_path):
    from gpulab.judge.harness import grade_request
    from gpulab.judge.replay import Replayer
    from gpulab.wire.check_request import CheckRequest
    from tests.conftest import starter_source
    from tests.inprocess import Channel, InProcessSandbox

    # The reference's replay starting is every replay test's business; a
    # wrong try's, one check, is this one's (where the start came before the
    # first case, it started here too).
    for name, source, passes, started in (("starter", starter_source("bandwidth"), False, 0),):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        boxes: list[InProcessSandbox] = []

        def start(path=path, boxes=boxes):
            boxes.append(InProcessSandbox(path, [], "cpu"))
            return boxes[-1]

        replayer = Replayer(start, str(path), device="cpu")
        request = CheckRequest(exercise="bandwidth", function="triad", file=str(path))
        result = grade_request(
            request, "cpu", Channel(), sandbox=InProcessSandbox(path, []), replayer=replayer
        ).to_json()
        assert result["passed"] is passes, (name, result["summary"])
        assert len(boxes) == started, (name, len(boxes))
