"""Every message the lab posts: workers to the UI, panes to the app.

Workers never touch widgets: they post one of these (post_message is
thread-safe) and the app reacts on its own event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.message import Message

from gpulab.course.content import Lesson
from gpulab.gpu.devinfo import GpuInfo
from gpulab.wire.events import Event
from gpulab.wire.result import CheckResult

if TYPE_CHECKING:
    from gpulab.lab.microbench_runner import BenchOutcome
    from gpulab.wire.microbench import ShownEvent


class CheckStarted(Message):
    """The shell started a check of `lesson` (published on the check bus, not posted)."""

    def __init__(self, run_id: int, lesson: Lesson, device: str, limit: float = 0.0) -> None:
        super().__init__()
        self.run_id = run_id
        self.lesson = lesson
        self.device = device
        self.limit = limit  # the check's time limit in seconds (0: not known)


class CheckProgress(Message):
    """A stage, case, correct or graded event from the running check's judge."""

    def __init__(self, run_id: int, event: Event) -> None:
        super().__init__()
        self.run_id = run_id
        self.event = event

    def can_replace(self, message: Message) -> bool:
        # Only the latest stage matters on screen; a flood of case events from
        # a fast grader coalesces in the queue instead of queueing repaints.
        return isinstance(message, CheckProgress) and message.run_id == self.run_id


class CheckFinished(Message):
    """A check ended (passed, failed, crashed, timed out or was cancelled)."""

    def __init__(self, run_id: int, lesson: Lesson, result: CheckResult) -> None:
        super().__init__()
        self.run_id = run_id
        self.lesson = lesson
        self.result = result


class LessonPainted(Message):
    """The Lesson pane's first screenful of a lesson is on screen (the
    lab's start waits for it before starting work that competes for the CPU)."""


class ExerciseChangedOnDisk(Message):
    """The exercise file changed, and not by one of the lab's own writes."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path


class GpuDetected(Message):
    """NVML / nvidia-smi answered (or didn't)."""

    def __init__(self, info: GpuInfo) -> None:
        super().__init__()
        self.info = info


class ExerciseSaved(Message):
    """The Exercise pane saved the exercise file (explicit: ctrl+s, not the
    autosave; changed False: ctrl+s found it saved already)."""

    def __init__(self, path: Path, explicit: bool, changed: bool = True) -> None:
        super().__init__()
        self.path = path
        self.explicit = explicit
        self.changed = changed


class RooflineBuilt(Message):
    """The Roofline pane's model is ready (model None: `error` says why not)."""

    def __init__(self, model: Any, why: str, error: str = "") -> None:
        super().__init__()
        self.model, self.why, self.error = model, why, error


class RooflineExported(Message):
    """The roofline's SVG text is ready to be written to `path` (or `error` says why not)."""

    def __init__(self, path: Path | None, svg: str = "", error: str = "") -> None:
        super().__init__()
        self.path, self.svg, self.error = path, svg, error


class DeviceSnapshot(Message):
    """The device probe's answer, ready to show."""

    def __init__(self, renderable: Any) -> None:
        super().__init__()
        self.renderable = renderable


class BenchProgress(Message):
    """A progress event or note from the microbenchmarks' child process."""

    def __init__(self, event: ShownEvent) -> None:
        super().__init__()
        self.event = event

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, BenchProgress)


class BenchDone(Message):
    """The microbenchmarks ended; a measured result is saved by the UI thread."""

    def __init__(self, outcome: BenchOutcome) -> None:
        super().__init__()
        self.outcome = outcome
