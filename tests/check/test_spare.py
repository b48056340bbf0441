"""The spare judge (gpulab.lab.runner.Spares): started ahead of the check it
expects, it grades the file as it is when the check begins, serves only
that very request, and leaves nothing behind when no check takes it.

Real processes throughout: the judge, its two sandboxes (the check's and
the replay's), the Triton interpreter."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from gpulab.course.content import load_course
from gpulab.lab import runner

pytestmark = pytest.mark.slow

EXERCISE = "softmax_row"  # the smallest kernel exercise: one row a program


@pytest.fixture
def lesson():
    found = load_course().find(EXERCISE)
    assert found is not None and found.ready
    return found


@pytest.fixture
def judge_tmp(tmp_path, monkeypatch):
    """The judges' temporary folders (their TMPDIR), to look for leftovers."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


def request_for(lesson, path: Path, **options):
    return runner.check_request(lesson, path, device="cpu", timeout=120, **options)


def none_left(folder: Path) -> None:
    """No process and no file left under `folder` once the judges end:
    Spares.close returns at once (the lab quitting waits on no spare), and
    its judge ends within moments."""
    deadline = time.monotonic() + 30
    while (processes_in(folder) or leftovers(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)  # a judge removes its folders after its sandboxes have ended
    assert processes_in(folder) == []
    assert leftovers(folder) == []


def processes_in(folder: Path) -> list[int]:
    """Processes whose working folder lies under `folder` (a sandbox's is its
    private folder, a judge's the runner's own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = Path(os.readlink(entry / "cwd"))
        except OSError:
            continue
        if cwd.is_relative_to(folder):
            found.append(int(entry.name))
    return found


def wait_for_sandboxes(folder: Path) -> None:
    deadline = time.monotonic() + 90
    while not processes_in(folder) and time.monotonic() < deadline:
        time.sleep(0.1)  # a sandbox starts in its private folder
    assert processes_in(folder), "the spare started no sandbox"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("gpulab-"))


def test_a_spare_grades_the_file_saved_after_it_started(lesson, tmp_path, judge_tmp):
    path = tmp_path / f"{EXERCISE}.py"
    path.write_text(lesson.starter_path.read_text())
    spares = runner.Spares()
    try:
        spares.prepare(request_for(lesson, path))
        wait_for_sandboxes(judge_tmp)
        time.sleep(0.5)  # their mount namespaces built: the file as it was then
        # A save as editors make it: a new file renamed over the old one.
        new = tmp_path / "saving.tmp"
        new.write_text(lesson.reference_path.read_text())
        os.replace(new, path)
        r = runner.run_check(lesson, path, device="cpu", timeout=120, spares=spares).to_json()
        assert r["warm"] is True
        assert r["status"] == "passed", (r["summary"], r.get("message", "")[-2000:])
        # A slow check explains itself: its longest steps, longest first.
        steps = r["slowest"]
        assert steps and all(isinstance(w, str) and s >= 0 for w, s in steps), steps
        assert [s for _, s in steps] == sorted((s for _, s in steps), reverse=True)
        assert any(w.startswith("case ") for w, _ in steps), steps
        # And the starter, saved in place, fails through the next spare.
        path.write_text(lesson.starter_path.read_text())
        r = runner.run_check(lesson, path, device="cpu", timeout=120, spares=spares).to_json()
        assert r["warm"] is True and r["status"] == "failed", r["summary"]
    finally:
        spares.close()
    none_left(judge_tmp)


def test_a_spare_serves_only_the_request_it_was_made_for(lesson, tmp_path, judge_tmp):
    path = tmp_path / f"{EXERCISE}.py"
    path.write_text(lesson.starter_path.read_text())
    spares = runner.Spares()
    try:
        spares.prepare(request_for(lesson, path))
        spare = spares._spare
        assert spare is not None
        # Another limit is another sandbox policy: a fresh judge grades it.
        r = runner.run_check(lesson, path, device="cpu", timeout=119, spares=spares).to_json()
        assert r["warm"] is False and r["status"] == "failed", r["summary"]
        assert spare.proc.poll() is not None  # the unfit spare was stopped
    finally:
        spares.close()
    none_left(judge_tmp)


def test_a_spare_no_check_takes_leaves_nothing_behind(lesson, tmp_path, judge_tmp):
    path = tmp_path / f"{EXERCISE}.py"
    path.write_text(lesson.starter_path.read_text())
    spares = runner.Spares()
    try:
        spares.prepare(request_for(lesson, path))
        spare = spares._spare
        assert spare is not None
        wait_for_sandboxes(judge_tmp)
    finally:
        spares.close()  # returns at once (the lab quitting waits on no spare)
    spare.proc.wait(timeout=30)
    # Its sandboxes are killed as it goes; on a busy 2-core box (the full
    # suite's two workers) their exits were seen to take longer than 10 s.
    deadline = time.monotonic() + 30
    while processes_in(judge_tmp) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_in(judge_tmp) == []
    assert leftovers(judge_tmp) == []
    spares.prepare(request_for(lesson, path))  # closed: starts nothing
    assert spares._spare is None


def test_an_early_spare_starts_beside_the_check_and_waits_to_start_cuda(
    lesson, tmp_path, judge_tmp
):
    # Spares(early=True), as on a machine of 8 CPUs or more: the next check's
    # judge starts as this check begins, held (imports only: on a GPU, no
    # CUDA start beside this check's timing), and is let go as it ends.
    path = tmp_path / f"{EXERCISE}.py"
    path.write_text(lesson.reference_path.read_text())
    spares = runner.Spares(early=True)
    seen = []

    def on_event(event):
        spare = spares._spare
        seen.append(spare is not None and spare.held)

    try:
        r = runner.run_check(
            lesson, path, device="cpu", timeout=120, spares=spares, on_event=on_event
        ).to_json()
        assert r["warm"] is False and r["status"] == "passed", r["summary"]
        assert seen and all(seen), "no held spare while the check ran"
        spare = spares._spare
        assert spare is not None and not spare.held  # let go once the check ended
        r = runner.run_check(lesson, path, device="cpu", timeout=120, spares=spares).to_json()
        assert r["warm"] is True and r["status"] == "passed", r["summary"]
    finally:
        spares.close()
    none_left(judge_tmp)


def test_a_held_spare_that_a_check_takes_starts_cuda_then(lesson, tmp_path, judge_tmp):
    # A check that comes before the spare was let go (the lab's previous check
    # was cancelled): the judge finishes the spare's start as the check begins.
    path = tmp_path / f"{EXERCISE}.py"
    path.write_text(lesson.reference_path.read_text())
    spares = runner.Spares(early=False)
    try:
        spares.prepare(request_for(lesson, path), hold=True)
        assert spares._spare is not None and spares._spare.held
        wait_for_sandboxes(judge_tmp)
        r = runner.run_check(lesson, path, device="cpu", timeout=120, spares=spares).to_json()
        assert r["warm"] is True and r["status"] == "passed", (r["summary"], r.get("message"))
    finally:
        spares.close()
    none_left(judge_tmp)
