"""The lab's shell: the layout (a lesson sidebar, seven panes, a footer) and
the moves around it (the panes, the sidebar, the title).

GpulabApp (app.py) composes it with the checks (check_runner.py) and the
lesson actions (actions.py). The panes that show a check follow it on the
check bus (check_bus.py) themselves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual.containers import Horizontal, Vertical
from textual.widgets import Header, Input, TabbedContent, TabPane

from gpulab.tui.device_pane import DevicePane
from gpulab.tui.editor import ExercisePane
from gpulab.tui.focus import focus_now
from gpulab.tui.footer import LabFooter
from gpulab.tui.lesson_pane import LessonPane
from gpulab.tui.results import ResultsPane
from gpulab.tui.roadmap_pane import RoadmapPane
from gpulab.tui.roofline_pane import RooflinePane
from gpulab.tui.screens import HelpScreen
from gpulab.tui.serving_pane import ServingPane
from gpulab.tui.sidebar import LessonList, PassedSummary

if TYPE_CHECKING:
    from textual.app import ComposeResult
    from textual.screen import Screen

    from gpulab.tui.lab_app import LabApp

PANES = ("lesson", "exercise", "results", "roofline", "device", "roadmap", "serving")
TITLES = ("Lesson", "Exercise", "Results", "Roofline", "Device", "Roadmap", "Serving")
# Columns below which the sidebar steps aside for lessons, code, tables: the
# 38-column sidebar plus the 10 columns of pane chrome leave the 70 that lesson
# code blocks are written to (tests/course/test_lesson_width.py) from 118 up.
NARROW = 118


class Shell:
    """The layout, and the panes and sidebar shown in it; held by the App."""

    def __init__(self, app: LabApp) -> None:
        self.app = app
        self.sidebar_choice: bool | None = None
        """b's choice, shown or not; None: automatic (see fit_sidebar)."""

    def compose(self) -> ComposeResult:
        app = self.app
        yield Header(icon="▦")
        with Horizontal(id="main"):
            with Vertical(id="sidebar"):
                # The panes that show a check follow it on the bus themselves.
                checks = app.checks
                yield PassedSummary(app.course, app.workspace, checks, id="summary")
                yield LessonList(app.course, app.workspace, checks, id="lessons")
            with TabbedContent(id="panes", initial="lesson"):
                with TabPane("Lesson", id="lesson"):
                    yield LessonPane(app.workspace, checks, id="lesson-pane")
                with TabPane("Exercise", id="exercise"):
                    yield ExercisePane(app.workspace.root, syntax=app.syntax, id="exercise-pane")
                with TabPane("Results", id="results"):
                    yield ResultsPane(app.workspace, checks, id="results-pane")
                with TabPane("Roofline", id="roofline"):
                    yield RooflinePane(app.workspace, checks, app.remember, id="roofline-pane")
                with TabPane("Device", id="device"):
                    yield DevicePane(app.workspace, id="device-pane")
                with TabPane("Roadmap", id="roadmap"):
                    yield RoadmapPane(id="roadmap-pane")
                with TabPane("Serving", id="serving"):
                    yield ServingPane(id="serving-pane")
        yield LabFooter()

    @property
    def active_pane(self) -> str:
        return self.app.query_one("#panes", TabbedContent).active

    def pane(self, name: str) -> Any:
        return self.app.query_one(f"#{name}-pane")

    def update_summary(self) -> None:
        app = self.app
        app.query_one(PassedSummary).recount()
        watching = " · watching" if app.watch_mode else ""
        app.sub_title = f"{app.lesson.number} {app.lesson.title}{watching}" if app.lesson else ""

    # --- panes ----------------------------------------------------------------
    def show_pane(self, name: str) -> None:
        self.app.query_one("#panes", TabbedContent).active = name
        self.pane_shown(name)
        self.focus_pane(name)

    def glossary(self) -> None:
        """Jump to the glossary's search box (in the Roadmap pane) from
        anywhere but a text field, where / is a character."""
        self.show_pane("roadmap")
        self.app.query_one("#glossary-search", Input).focus()

    def help(self) -> None:
        """Help on the focused widget, else on the pane shown."""
        focused = self.app.focused
        chain = focused.ancestors_with_self if focused is not None else []
        found = [t for node in chain if (t := getattr(node, "HELP_TOPIC", None))]
        topic: str = (
            found[0] if found else getattr(self.pane(self.active_pane), "HELP_TOPIC", "keys")
        )
        self.app.push_screen(HelpScreen(topic))

    # The Device and Roofline panes do the work.
    def probe(self) -> None:
        self.show_pane("device")
        self.pane("device").run_probe()

    def choose_roofline_gpu(self) -> None:
        self.show_pane("roofline")
        self.pane("roofline").choose_gpu()

    def export_roofline(self) -> None:
        self.show_pane("roofline")
        self.pane("roofline").export_svg()

    def focus_pane(self, name: str) -> None:
        # At once: "2 e" and typing in one burst must reach the editor (focus.py).
        if name == "exercise":
            focus_now(self.app.query_one(ExercisePane).editor)
        else:
            focus_now(self.pane(name))

    def pane_shown(self, name: str) -> None:
        """Build a pane's content the first time it is shown (panes are lazy)."""
        main = self.main_screen()
        if main is None:
            return
        self.fit_sidebar()
        found = main.query(f"#{name}-pane") if name in PANES else None
        pane = found.first() if found else None
        if isinstance(pane, ExercisePane):
            pane.ensure_loaded()
        elif pane is not None and hasattr(pane, "ensure_rendered"):
            pane.ensure_rendered()

    def focus_tabs(self) -> None:
        self.app.query_one("#panes", TabbedContent).query_one("Tabs").focus()

    def toggle_sidebar(self) -> None:
        """b: the lesson list, shown (and focused, to pick a lesson) or put away."""
        self.sidebar_choice = not self.app.query_one("#sidebar").display
        self.fit_sidebar()
        if self.sidebar_choice:
            focus_now(self.app.query_one(LessonList))

    def editor_mode(self) -> str | None:
        """ "edit" or "view" while the Exercise pane is shown (the footer says
        which), else None."""
        # Not App.is_mounted: on the app that is a method (is a widget mounted?),
        # always true as a condition. The layout being there is what matters.
        if self.main_screen() is None or self.active_pane != "exercise":
            return None
        return "edit" if self.app.query_one(ExercisePane).editing else "view"

    # --- the sidebar ------------------------------------------------------------
    def main_screen(self) -> Screen[Any] | None:
        """The screen holding the layout, under any open dialog; None while it
        is not there: a tab or resize message can arrive as the app closes,
        after the layout has been taken down."""
        stack = self.app.screen_stack
        if not stack or not stack[0].query("#sidebar"):
            return None
        return stack[0]

    def fit_sidebar(self, width: int | None = None) -> None:
        """Code, lesson text, tables and the seven tabs need the width: below
        NARROW columns the sidebar steps aside on every pane (at 80 columns
        it pushed the first tabs off screen), unless the learner chose with b."""
        main = self.main_screen()
        if main is None:
            return
        width = self.app.size.width if width is None else width
        show = self.sidebar_choice
        if show is None:
            show = width >= NARROW
        sidebar = main.query_one("#sidebar")
        sidebar.display = show
        sidebar.set_class(width >= NARROW, "roomy")  # room for whole titles
        focused = sidebar.screen.focused
        if not show and focused is not None and sidebar in focused.ancestors_with_self:
            self.focus_pane(self.active_pane)  # not a hidden list taking the keys
