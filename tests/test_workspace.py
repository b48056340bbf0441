"""Workspace: copies, progress, atomic state, corruption, locking, reset."""

from __future__ import annotations

import json
import multiprocessing as mp

from gpulab.workspace import FAILED, NOT_STARTED, PASSED, Workspace


def test_copies_the_starter_once_and_never_touches_it(ws, course):
    lesson = course.find("softmax")
    path = ws.ensure_exercise(lesson)
    assert path.read_text() == lesson.starter_path.read_text()
    path.write_text("# mine\n")
    assert ws.ensure_exercise(lesson).read_text() == "# mine\n"
    assert "TODO" in lesson.starter_path.read_text()


def test_progress_is_kept_and_passing_is_not_undone(ws):
    assert ws.status("softmax") == NOT_STARTED
    ws.record_result("softmax", {"passed": False, "summary": "wrong"})
    assert ws.status("softmax") == FAILED
    ws.record_result("softmax", {"passed": True, "summary": "ok",
                                 "timing": {"grade": "B", "ms": 0.1}})
    ws.record_result("softmax", {"passed": False, "summary": "broke it again"})
    st = ws.exercise_state("softmax")
    assert st["status"] == PASSED and st["grade"] == "B"
    assert [a["passed"] for a in st["attempts"]] == [False, True, False]
    assert ws.last_result("softmax")["summary"] == "broke it again"


def test_corrupt_state_is_kept_aside_and_rebuilt(ws):
    ws.record_result("softmax", {"passed": True, "summary": "ok"})
    ws.state_path.write_text("{ not json")
    again = Workspace.open(ws.root)
    assert again.warnings and "unreadable" in again.warnings[0]
    kept = list(ws.state_dir.glob("state.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{ not json"
    # Rebuilt from the last results on disk.
    assert again.status("softmax") == PASSED


def test_state_writes_are_atomic_json(ws):
    ws.set_setting("gpu", "h200")
    assert json.loads(ws.state_path.read_text())["settings"]["gpu"] == "h200"
    assert not list(ws.state_dir.glob("*.tmp"))


def _hammer(root: str, n: int, tag: str) -> None:
    w = Workspace.open(root)
    for i in range(n):
        w.record_result("softmax", {"passed": False, "summary": f"{tag}-{i}"})


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
    ws.record_result("softmax", {"passed": True})
    assert "def softmax" in ws.solution_text(lesson)


def test_hints_reveal_one_level_at_a_time(ws, course):
    lesson = course.find("softmax")
    assert ws.hint_level("softmax") == 0
    assert [ws.reveal_hint(lesson) for _ in range(4)] == [1, 2, 3, 3]
