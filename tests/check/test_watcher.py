"""The one file watcher (gpulab.lab.watcher), used by the lab and by `gpulab watch`,
sees an editor's atomic save: a new file written beside the old one and
renamed over it, in the same mtime tick and with the same size."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from gpulab.lab.watcher import file_changes, stamp
from gpulab.wire.result import CheckResult

MODES = [pytest.param(True, id="polling"), pytest.param(False, id="file-events")]


def atomic_save(path: Path, text: str) -> None:
    """What vim, VS Code and the lab do: write a temporary file, rename it over.

    The new file gets the old one's mtime, and the texts have the same size,
    so only the inode tells the versions apart (as when both writes land in
    one coarse timestamp tick).
    """
    old = os.stat(path)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.utime(tmp, ns=(old.st_atime_ns, old.st_mtime_ns))
    os.replace(tmp, path)


class Saver:
    """Saves atomically every 0.3 s until stopped: the watcher may start late
    on a busy machine, and a save made before it watches is not a change."""

    def __init__(self, path: Path) -> None:
        self.path, self.done = path, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self.done.wait(0.3):
            n += 1
            atomic_save(self.path, f"x = {n % 10}\n")

    def __enter__(self) -> Saver:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.done.set()
        self.thread.join(5)


@pytest.fixture
def exercise(tmp_path: Path) -> Path:
    path = tmp_path / "softmax.py"
    path.write_text("x = 0\n", encoding="utf-8")
    return path


def test_an_atomic_save_changes_the_stamp(exercise):
    before = stamp(exercise)
    atomic_save(exercise, "x = 1\n")
    after = stamp(exercise)
    assert before is not None and after is not None
    assert before[1:] == after[1:]  # same mtime, same size: only the inode differs
    assert before != after


@pytest.mark.parametrize("poll", MODES)
def test_the_watcher_sees_an_atomic_save(exercise, poll):
    if not poll:
        pytest.importorskip("watchfiles")

    async def first_change() -> str:
        stop = asyncio.Event()
        changes = file_changes(exercise, stop, poll=poll, interval=0.05)
        try:
            return await asyncio.wait_for(changes.__anext__(), 30)
        finally:
            stop.set()
            await changes.aclose()

    with Saver(exercise):
        assert asyncio.run(first_change()) == ("poll" if poll else "events")


class Rechecked(Exception):
    pass


@pytest.mark.parametrize("poll", MODES)
def test_gpulab_watch_rechecks_after_an_atomic_save(exercise, poll):
    """`gpulab watch` goes through the same watcher (its own copy compared
    mtime and size only, and missed such a save when polling)."""
    if not poll:
        pytest.importorskip("watchfiles")
    from gpulab.cli.commands.check import _recheck_on_save

    def once() -> None:
        raise Rechecked

    async def watch() -> None:
        await asyncio.wait_for(_recheck_on_save(exercise, once, poll=poll), 30)

    with Saver(exercise), pytest.raises(Rechecked):
        asyncio.run(watch())


@pytest.fixture
def ctrl_c():
    """Ctrl-C as a terminal sends it, once the test sets the event it yields."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    ready, finished = threading.Event(), threading.Event()

    def press() -> None:
        # A moment after `ready`, as a person would: a signal that lands just
        # before time.sleep's system call starts does not end the sleep.
        if ready.wait(30) and not finished.wait(0.5):
            # To the main thread, where a terminal's Ctrl-C lands too (sent to
            # the process, Linux may pick another thread, whose wait it ends).
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    presser = threading.Thread(target=press, daemon=True)
    presser.start()
    yield ready
    finished.set()
    ready.set()
    presser.join(5)
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("during", ["a re-check", "the wait for a save"])
def test_ctrl_c_ends_gpulab_watch_at_once(exercise, ctrl_c, during):
    """Even in the middle of a re-check (asyncio.run's Ctrl-C would only cancel
    the task and wait for the check to end)."""
    from gpulab.cli.commands.check import _recheck_on_save, _until_interrupted

    def once() -> None:
        ctrl_c.set()
        time.sleep(30)  # a long check

    start = time.monotonic()
    with Saver(exercise), pytest.raises(KeyboardInterrupt):
        if during == "the wait for a save":
            threading.Timer(1.0, ctrl_c.set).start()
            _until_interrupted(_recheck_on_save(exercise.with_name("nobody.py"), once, poll=True))
        else:
            _until_interrupted(_recheck_on_save(exercise, once, poll=True))
    assert time.monotonic() - start < 20


def test_gpulab_watch_sees_a_save_made_before_its_watcher_is_up(ws, course, monkeypatch):
    """A save during the first check, or right after its "watching" line, while
    the watcher is still starting, is re-checked (it used to be missed: the
    watcher started after the first check and no stamps were compared)."""
    from gpulab.cli import build_parser
    from gpulab.cli.commands import check
    from gpulab.lab import check as lab_check

    exercise = ws.ensure_exercise(course.find("softmax"))
    exercise.write_text("x = 0\n", encoding="utf-8")
    seen: list[str] = []

    def run_check(lesson, path, **_kw):
        seen.append(Path(path).read_text(encoding="utf-8"))
        if len(seen) == 1:
            atomic_save(exercise, "x = 1\n")  # saved before the watcher is up
            return CheckResult.from_json(
                {"status": "fail", "passed": False, "exercise": lesson.exercise}
            )
        raise Rechecked

    monkeypatch.setattr(lab_check, "run_check", run_check)  # Lab.check runs it
    args = build_parser().parse_args(["watch", "softmax"])
    outcome: list[BaseException] = []

    def watch() -> None:
        try:
            check.run(args)
        except BaseException as exc:  # Rechecked, on the second check
            outcome.append(exc)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    thread.join(10)
    assert seen == ["x = 0\n", "x = 1\n"]
    assert outcome and isinstance(outcome[0], Rechecked)


def test_gpulab_watch_ignores_an_event_that_changes_nothing(exercise):
    """Only a new stamp re-checks: a touch-free event (the file read, an
    editor's swap file beside it) does not."""
    from gpulab.cli.commands import check

    checks: list[float] = []

    async def watch() -> None:
        task = asyncio.get_running_loop().create_task(
            check._recheck_on_save(exercise, lambda: checks.append(1), poll=True)
        )
        await asyncio.sleep(0.3)
        exercise.with_name(".softmax.py.swp").write_text("swap")
        exercise.read_text()
        await asyncio.sleep(check.RESTAMP_S + 0.5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    asyncio.run(watch())
    assert checks == []
