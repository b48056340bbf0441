"""The lab's first screen comes first (issue 48: under `gpulab serve` the
panes stayed empty for ~3 s in the browser).

Two things held it back, both measured in the lab's own process under
textual-serve's driver. On a first start, the welcome dialog and the lesson
behind it were drawn only once the whole lesson (~160 Markdown widgets for
lesson 01) had been built behind the dialog: Textual draws nothing while a
batch of mounts is open, and the lesson's batches came one after another.
And the spare judge, started with the lab, imported torch and Triton in
processes of its own beside the lab's start: seconds of CPU that, on a
2-core machine, held the lesson's text back by 0.5-1 s.

Ordered here by what happens, not by the clock. A real Spares would start a
judge that imports torch: a stand-in records when it is asked for one.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from gpulab.gpu.devinfo import GpuInfo  # noqa: E402
from gpulab.tui.app import build_app  # noqa: E402
from gpulab.tui.messages import LessonPainted  # noqa: E402
from gpulab.tui.screens import WelcomeScreen  # noqa: E402

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


class SpareSpy:
    """Stands for gpulab.lab.runner.Spares; `seen` is shared with the test."""

    closed = False

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def prepare(self, request, hold: bool = False) -> None:  # from the lab's spare thread
        self.seen.append("spare")

    def close(self) -> None:
        pass


def built(app) -> int:
    """How many blocks of the lesson's text the Lesson pane has built."""
    found = app.query("#lesson-text")
    return len(found.first().children) if found else 0


async def until(pilot, done, what: str) -> None:
    for _ in range(500):
        if done():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"never saw {what}")


def lab(tmp_path, seen: list[str], **options):
    app = build_app(tmp_path / "ws", device="cpu", gpu_info=GpuInfo(), **options)
    app.spares = app.lab.spares = SpareSpy(seen)  # the shell's and its Lab.check's
    return app


async def test_under_the_welcome_only_the_lessons_first_screenful_is_built(tmp_path):
    seen: list[str] = []
    app = lab(tmp_path, seen)  # a new workspace: the welcome dialog opens
    assert app.show_welcome
    async with app.run_test(size=(80, 24), message_hook=record(seen)) as pilot:
        await until(pilot, lambda: isinstance(app.screen, WelcomeScreen) and built(app), "it")
        # pause() without a delay returns once the process is idle: the
        # lesson's rest, were it being built, would be built by then.
        for _ in range(3):
            await pilot.pause()
        assert built(app) == 1, "the whole lesson was built behind the dialog"
        assert seen == [], "the spare started before the learner saw the lesson"
        await pilot.press("escape")  # Look around
        await app.query_one("#lesson-pane").wait_rendered()
        assert built(app) > 1  # the rest, once the dialog has closed
        await until(pilot, lambda: "spare" in seen, "the spare")
        assert seen == ["painted", "spare"]


async def test_the_spare_starts_once_the_lessons_text_is_on_screen(tmp_path):
    seen: list[str] = []
    app = lab(tmp_path, seen, welcome=False)
    async with app.run_test(size=(80, 24), message_hook=record(seen)) as pilot:
        await until(pilot, lambda: "spare" in seen, "the spare")
        assert seen[:2] == ["painted", "spare"]
        # Opening another lesson starts its spare at once.
        app.open_lesson(app.course.find("softmax"))
        await until(pilot, lambda: seen.count("spare") == 2, "the next spare")


def record(seen: list[str]):
    """A message hook: "painted" for each LessonPainted (the hook sees a
    message at every widget it bubbles through: counted once)."""
    painted: list[LessonPainted] = []

    def hook(message) -> None:
        if isinstance(message, LessonPainted) and not any(m is message for m in painted):
            painted.append(message)
            seen.append("painted")

    return hook
