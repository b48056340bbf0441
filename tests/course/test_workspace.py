"""Workspace: copies, progress, atomic state, corruption, locking, reset."""

from __future__ import annotations

import json
import multiprocessing as mp

from gpulab.lab.workspace import Workspace
from gpulab.wire.result import CheckResult
from gpulab.wire.status import Status


def test_copies_the_starter_once_and_never_touches_it(ws, course):
    lesson = course.find("softmax")
    path = ws.ensure_exercise(lesson)
    assert path.read_text() == lesson.starter_path.read_text()
    path.write_text("# mine\n")
    assert ws.ensure_exercise(lesson).read_text() == "# mine\n"
    assert "TODO" in lesson.starter_path.read_text()


def test_progress_is_kept_and_passing_is_not_undone(ws):
    assert ws.status("softmax") == Status.NOT_STARTED
    ws.record_result("softmax", CheckResult.from_json({"passed": False, "summary": "wrong"}))
    assert ws.status("softmax") == Status.FAILED
    ws.record_result(
        "softmax",
        CheckResult.from_json(
            {"passed": True, "summary": "ok", "timing": {"grade": "B", "ms": 0.1}}
        ),
    )
    ws.record_result(
        "softmax", CheckResult.from_json({"passed": False, "summary": "broke it again"})
    )
    st = ws.exercise_state("softmax")
    assert st["status"] == Status.PASSED and st["grade"] == "B"
    assert [a["passed"] for a in st["attempts"]] == [False, True, False]
    assert ws.last_result("softmax").summary == "broke it again"


def test_corrupt_state_is_kept_aside_and_rebuilt(ws):
    ws.record_result("softmax", CheckResult.from_json({"passed": True, "summary": "ok"}))
    ws.state_path.write_text("{ not json")
    again = Workspace.open(ws.root)
    assert again.warnings and "unreadable" in again.warnings[0]
    kept = list(ws.state_dir.glob("state.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{ not json"
    # Rebuilt from the last results on disk.
    assert again.status("softmax") == Status.PASSED


def test_state_writes_are_atomic_json(ws):
    ws.set_setting("gpu", "h200")
    assert json.loads(ws.state_path.read_text())["settings"]["gpu"] == "h200"
    assert not list(ws.state_dir.glob("*.tmp"))


def _hammer(root: str, n: int, tag: str) -> None:
    w = Workspace.open(root)
    for i in range(n):
        w.record_result(
            "softmax", CheckResult.from_json({"passed": False, "summary": f"{tag}-{i}"})
        )


def test_several_processes_at_once_lose_nothing(ws):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_hammer, args=(str(ws.root), 15, t)) for t in "abc"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    attempts = ws.exercise_state("softmax")["attempts"]
    assert len(attempts) == 45
    assert {a["summary"] for a in attempts} == {f"{t}-{i}" for t in "abc" for i in range(15)}


def test_reset_backs_up_then_restores(ws, course):
    lesson = course.find("softmax")
    path = ws.ensure_exercise(lesson)
    path.write_text("# my work\n")
    backup = ws.reset(lesson)
    assert backup.read_text() == "# my work\n" and backup.parent == ws.backups_dir
    assert path.read_text() == lesson.starter_path.read_text()
    path.write_text("# more work\n")
    second = ws.reset(lesson)
    assert second != backup and second.read_text() == "# more work\n"


def test_solution_only_after_passing(ws, course):
    lesson = course.find("softmax")
    assert ws.solution_text(lesson) is None
    ws.record_result("softmax", CheckResult.from_json({"passed": True}))
    assert "def softmax" in ws.solution_text(lesson)


def test_hints_reveal_one_level_at_a_time(ws, course):
    lesson = course.find("softmax")
    assert ws.hint_level("softmax") == 0
    assert [ws.reveal_hint(lesson) for _ in range(4)] == [1, 2, 3, 3]


# --- state of the wrong shape (issue 17) --------------------------------------


def _write_state(ws, state) -> None:
    ws.state_path.write_text(json.dumps(state))


def test_a_state_of_the_wrong_shape_is_repaired_field_by_field(ws):
    _write_state(
        ws,
        {
            "version": 1,
            "last_lesson": 7,
            "settings": {"gpu": 3, "theme": "nord", "mine": [1]},
            "exercises": {
                "softmax": {
                    "status": "weird",
                    "hints": 2,
                    "attempts": [{"passed": True, "summary": "ok", "ms": "fast"}, "junk"],
                },
                "matmul": "x",
                "bandwidth": {"status": "passed", "attempts": "x", "grade": "A"},
            },
            "from_a_newer_gpulab": {"kept": True},
        },
    )
    again = Workspace.open(ws.root)
    warning = " ".join(again.warnings)
    for field in (
        "last_lesson",
        "settings.gpu",
        "exercises.softmax.status",
        "exercises.softmax.attempts[0].ms",
        "exercises.softmax.attempts[1]",
        "exercises.matmul",
        "exercises.bandwidth.attempts",
    ):
        assert field in warning, (field, warning)
    state = again.load_state()
    assert state["last_lesson"] is None
    assert state["settings"] == {"theme": "nord", "mine": [1]}
    soft = state["exercises"]["softmax"]
    assert soft["status"] == Status.PASSED and soft["hints"] == 2  # recomputed from its attempts
    assert soft["attempts"] == [{"passed": True, "summary": "ok"}]
    assert "matmul" not in state["exercises"]
    assert state["exercises"]["bandwidth"] == {"status": "passed", "grade": "A"}
    assert state["from_a_newer_gpulab"] == {"kept": True}
    # The file as it was is kept aside, byte for byte, and the repair is on disk.
    aside = list(ws.state_dir.glob("state.json.before-repair-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_text())["exercises"]["matmul"] == "x"
    assert Workspace.open(ws.root).warnings == []


def test_check_records_its_attempt_whatever_the_state_held(ws, course):
    lesson = course.find("softmax")
    for odd in (
        {"exercises": {"softmax": {"attempts": "x"}}},
        {"exercises": {"softmax": "x"}},
        {"exercises": {"softmax": {"status": "weird"}}},
        {"exercises": [], "settings": []},
        {"exercises": {"softmax": {"attempts": [None, {"passed": "yes"}]}}},
    ):
        _write_state(ws, odd)
        ws.record_result("softmax", CheckResult.from_json({"passed": False, "summary": "wrong"}))
        entry = ws.exercise_state("softmax")
        assert entry["status"] == Status.FAILED, odd
        assert entry["attempts"][-1]["summary"] == "wrong", odd
        # ...and every reader of the state still works.
        assert ws.hint_level("softmax") == 0 and ws.status("softmax") == Status.FAILED
        ws.reveal_hint(lesson)
        ws.set_setting("gpu", "h200")
        assert ws.get_setting("gpu") == "h200"


def test_a_state_file_nested_too_deep_is_set_aside(ws):
    ws.state_path.write_text("[" * 100_000 + "]" * 100_000)
    again = Workspace.open(ws.root)
    assert again.warnings and "unreadable" in again.warnings[0]
    assert again.load_state()["exercises"] == {}


def test_two_corrupt_states_in_the_same_second_keep_both(ws, monkeypatch):
    import time

    monkeypatch.setattr(time, "strftime", lambda fmt, *a: "20260101-120000")
    kept = []
    for text in ("{ first", "{ second", "[]"):
        ws.state_path.write_text(text)
        Workspace.open(ws.root)
        kept.append(text)
    aside = sorted(ws.state_dir.glob("state.json.corrupt-*"))
    assert len(aside) == 3
    assert sorted(p.read_text() for p in aside) == sorted(kept)


def test_a_truncated_state_comes_back_from_the_last_good_copy(ws, course):
    """Attempts, hints, the last lesson and the watch setting survive; at most
    the last write is lost (it used to be all but the pass/fail status)."""
    ws.record_result("softmax", CheckResult.from_json({"passed": False, "summary": "first"}))
    ws.record_result("softmax", CheckResult.from_json({"passed": True, "summary": "second"}))
    ws.reveal_hint(course.find("matmul"))
    ws.set_setting("watch", True)
    ws.set_last_lesson("03_triton_tiled_matmul")
    whole = ws.state_path.read_text()
    ws.state_path.write_text(whole[: len(whole) // 2])  # truncated
    again = Workspace.open(ws.root)
    assert "last good copy" in again.warnings[0] and "at most the last change" in again.warnings[0]
    state = again.load_state()
    attempts = state["exercises"]["softmax"]["attempts"]
    assert [a["summary"] for a in attempts] == ["first", "second"]
    assert again.status("softmax") == Status.PASSED
    assert again.hint_level("matmul") == 1
    assert again.get_setting("watch") is True
    assert state["last_lesson"] is None  # the last write, the one lost
    assert len(list(ws.state_dir.glob("state.json.corrupt-*"))) == 1
