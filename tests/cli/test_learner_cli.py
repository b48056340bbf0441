"""The command line a learner meets in their first hour (issue 48):
`gpulab next`, the glossary's Triton words, the lessons' headings, serve's
address at 80 columns, the profile without Kineto's chatter, and a spare
judge that the lab stops without waiting on it."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from gpulab.course.content import load_course
from gpulab.course.glossary import lookup

REPO = Path(__file__).resolve().parents[2]


def test_next_says_where_you_are_and_opens_it_in_the_lab(run_gpulab, tmp_path):
    p = run_gpulab("next")
    assert p.returncode == 0, p.stderr
    said = " ".join(p.stdout.split())
    assert "You are on lesson 01, step 1 of 8" in said and "(copy_ceiling)" in said
    assert "gpulab check copy_ceiling" in said and "exercises/copy_ceiling.py" in said
    data = json.loads(run_gpulab("next", "--json").stdout)
    assert data["exercise"] == "copy_ceiling" and data["passed"] == 0
    state = json.loads((tmp_path / "workspace" / ".gpulab" / "state.json").read_text())
    assert state["last_lesson"] == "copy_ceiling"  # the lab opens there


@pytest.mark.parametrize("term", ["mask", "constexpr", "tl.dot", "warp divergence", "program"])
def test_the_glossary_has_the_triton_words(term):
    found, _ = lookup(term)
    assert found is not None, term


def test_coalescing_says_what_it_means_in_triton():
    found, _ = lookup("coalescing")
    assert found is not None and "tl.arange" in found.definition


def test_a_lessons_heading_carries_its_sidebar_title():
    """The sidebar said "Grouped-order tiled matmul", the lesson another title."""
    for lesson in load_course().lessons:
        head = lesson.text().splitlines()[0]
        assert head.startswith(f"# Lesson {lesson.number} — {lesson.title}"), (head, lesson.title)


def test_no_word_is_split_by_a_line_break():
    """Markdown joins lines with a space: "special-\\nfunction" read "special- function"."""
    for path in sorted((REPO / "lessons").glob("*/lesson.md")):
        inside_code = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                inside_code = not inside_code
            if not inside_code:
                assert not re.search(r"[a-z]-$", line), f"{path.parent.name}:{n}: {line}"


def test_serves_address_fits_80_columns():
    pytest.importorskip("textual_serve")
    from gpulab.cli.webserve import LabServer

    server = LabServer("true", host="127.0.0.1", port=8000)
    url = f"http://127.0.0.1:8000{server.prefix}/?token={server.token}"
    assert len(url) < 80, url
    assert len(server.token) >= 32  # 192 bits


def test_the_lab_stops_its_spare_without_waiting(tmp_path):
    """A spare still importing answers SIGTERM late: the lab quitting waited
    for it (up to 3 s, then SIGKILL), past `gpulab serve`'s grace, and a lab
    killed meanwhile left its gpulab-judge-* folder behind."""
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    from gpulab.lab import runner

    def slow_judge() -> runner._Judge:
        deaf = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
        proc = subprocess.Popen([sys.executable, "-c", deaf], start_new_session=True)
        read_fd, write_fd = os.pipe()
        os.close(write_fd)
        tmp = tempfile.TemporaryDirectory(prefix="gpulab-judge-", dir=tmp_path)
        return runner._Judge(proc, read_fd, tmp, None)

    spares = runner.Spares(early=False)
    spares._spare = judge = slow_judge()
    time.sleep(0.5)  # its SIGTERM handler set
    started = time.monotonic()
    spares.close()
    assert time.monotonic() - started < 1.0
    assert not Path(judge.tmp.name).exists()
    assert judge.proc.wait(timeout=30) == -signal.SIGKILL  # made sure of, in a thread
    # The hang-up's stop_all removes the lab's folder for each judge first.
    other = slow_judge()
    time.sleep(0.5)
    folder = Path(other.tmp.name)
    killer = __import__("threading").Thread(target=runner.stop_all)
    killer.start()
    deadline = time.monotonic() + 2.0
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()
    killer.join(timeout=30)


def test_a_small_machine_keeps_one_sandbox_warm(monkeypatch):
    from gpulab.judge import prepared

    monkeypatch.setenv("GPULAB_SPARE_SANDBOXES", "1")
    assert prepared.small_memory()
    monkeypatch.setenv("GPULAB_SPARE_SANDBOXES", "2")
    assert not prepared.small_memory()
    monkeypatch.delenv("GPULAB_SPARE_SANDBOXES")
    total = int(Path("/proc/meminfo").read_text().split()[1]) * 1024
    assert prepared.small_memory() == (total < prepared.SMALL_MEMORY_BYTES)


def test_a_lesson_in_a_terminal_goes_through_the_pager(tmp_path):
    """`gpulab lesson` printed 170-290 lines at once; in a terminal it pages."""
    import os
    import pty
    import subprocess
    import sys

    from tests.conftest import gpulab_env

    paged = tmp_path / "paged.txt"
    master, slave = pty.openpty()
    try:
        env = gpulab_env(tmp_path / "ws", PAGER=f"cat > {paged}", TERM="xterm")
        p = subprocess.run(
            [sys.executable, "-m", "gpulab", "lesson", "3"],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            timeout=120,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert p.returncode == 0
    assert "Grouped-order tiled matmul" in paged.read_text()
