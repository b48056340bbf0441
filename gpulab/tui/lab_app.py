"""What the App's parts need of the App: the lab's state and a few of its calls.

GpulabApp (app.py) is one Textual App that composes its parts: the layout
and the moves between panes (shell.py), the checks (check_runner.py), the
lesson actions (actions.py) and the keys' order (keyqueue.py). Each part
holds the App and is typed against this protocol rather than GpulabApp, so
that app.py alone imports them all (tests/test_import_cycles.py counts
type-only imports as well). mypy checks that GpulabApp is a LabApp where
the App builds its parts.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, overload

if TYPE_CHECKING:
    from textual.geometry import Size
    from textual.message import Message
    from textual.notifications import SeverityLevel
    from textual.screen import Screen
    from textual.widget import Widget
    from textual.worker import Worker
    from textual.worker_manager import WorkerManager

    from gpulab.course.content import Course, Lesson
    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.lab.check import CheckOptions, Lab, Planned
    from gpulab.lab.runner import Spares
    from gpulab.lab.workspace import Workspace
    from gpulab.tui.check_bus import CheckBus

W = TypeVar("W", bound="Widget")
R = TypeVar("R")


class LabApp(Protocol):
    """The lab's App as its parts see it (GpulabApp, app.py)."""

    workspace: Workspace
    course: Course
    lesson: Lesson | None
    """The lesson open now."""
    gpu_info: GpuInfo | None
    """NVML's answer, once there is one."""
    syntax: bool
    """Python highlighting in the editor and the solution."""
    checks: CheckBus
    """What the panes subscribe to, to follow the latest check."""
    lab: Lab
    """The one check use case (gpulab.lab.check): plan, run, record."""
    spares: Spares | None
    """The judges started ahead of the next check (gpulab.lab.runner)."""

    # The App's reactives.
    @property
    def checking(self) -> bool: ...
    @checking.setter
    def checking(self, value: bool) -> None: ...
    @property
    def probing(self) -> bool: ...
    @probing.setter
    def probing(self, value: bool) -> None: ...
    @property
    def watch_mode(self) -> bool: ...
    @watch_mode.setter
    def watch_mode(self, value: bool) -> None: ...

    # The lab's own calls, which the parts make of one another through the App.
    def remember(self, write: Callable[..., Any], *args: Any) -> Any: ...
    def start_check(self, lesson: Lesson, path: Path, explain: bool = False) -> None: ...
    def check_worker(
        self, run_id: int, lesson: Lesson, path: Path, options: CheckOptions, planned: Planned
    ) -> object: ...  # the check's thread worker
    def watch_file(self, path: Path | None) -> None: ...
    def want_gpu_info(self) -> None: ...

    # Textual's App.
    @property
    def workers(self) -> WorkerManager: ...
    @property
    def focused(self) -> Widget | None: ...
    @property
    def screen(self) -> Screen[object]: ...
    @property
    def screen_stack(self) -> list[Screen[Any]]: ...
    @property
    def size(self) -> Size: ...
    @property
    def sub_title(self) -> str: ...
    @sub_title.setter
    def sub_title(self, value: str) -> None: ...
    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None: ...
    def push_screen(
        self, screen: Screen[R], callback: Callable[[R | None], None] | None = None
    ) -> Any: ...
    def refresh_bindings(self) -> None: ...
    def post_message(self, message: Message) -> bool: ...
    def run_worker(
        self,
        work: Callable[[], object],
        name: str | None = "",
        group: str = "default",
        description: str = "",
        exit_on_error: bool = True,
        start: bool = True,
        exclusive: bool = False,
        thread: bool = False,
    ) -> Worker[Any]: ...
    # In Textual's order of its overloads: mypy matches them one by one.
    @overload
    def query_one(self, selector: str) -> Widget: ...
    @overload
    def query_one(self, selector: type[W]) -> W: ...
    @overload
    def query_one(self, selector: str, expect_type: type[W]) -> W: ...
