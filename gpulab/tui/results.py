"""The Results pane: a running check's progress, the last result, the history."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.timer import Timer
from textual.widgets import ProgressBar, Static

from gpulab.course.content import Lesson
from gpulab.lab.state import Attempt
from gpulab.lab.workspace import Workspace
from gpulab.textsafe import visible
from gpulab.tui.check_bus import CheckBus
from gpulab.tui.messages import CheckFinished, CheckProgress, CheckStarted
from gpulab.wire.events import CaseDone, Correct, Event, Graded, Stage
from gpulab.wire.result import CheckResult
from gpulab.wire.status import Status

BARS = "▁▂▃▄▅▆▇█"
HISTORY_ROWS = 8


def spark(values: list[float]) -> str:
    """A one-line sparkline of values (higher is taller)."""
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    return "".join(BARS[int((v - lo) / span * (len(BARS) - 1))] for v in values)


def history_renderable(attempts: list[Attempt]) -> Any:
    """Attempts on this exercise: pass/fail over time and speed where timed."""
    if not attempts:
        return Text("No attempts yet.", style="dim")
    marks = Text()
    for a in attempts[-40:]:
        marks.append("✔" if a.get("passed") else "✘", style="green" if a.get("passed") else "red")
    passed = sum(1 for a in attempts if a.get("passed"))
    parts: list[Any] = [
        Text.assemble(
            ("History ", "bold"),
            f"{len(attempts)} attempt{'s' if len(attempts) != 1 else ''}, {passed} passed  ",
            marks,
        )
    ]
    speeds = [float(a["throughput"]) for a in attempts if a.get("throughput")]
    if len(speeds) >= 2:
        unit = next((a.get("unit", "") for a in reversed(attempts) if a.get("unit")), "")
        parts.append(
            Text(
                visible(
                    f"speed {spark(speeds)}  best {max(speeds):.0f} {unit}, "
                    f"last {speeds[-1]:.0f} {unit}"
                )
            )
        )
    table = Table(box=None, padding=(0, 1), show_header=True, header_style="dim")
    for col in ("when", "", "speed", "summary"):
        table.add_column(col, overflow="ellipsis", no_wrap=col != "summary")
    for a in reversed(attempts[-HISTORY_ROWS:]):
        speed = f"{a['throughput']:.0f} {a.get('unit', '')}" if a.get("throughput") else ""
        table.add_row(
            str(a.get("time", ""))[5:16].replace("T", " "),
            Text("✔", "green") if a.get("passed") else Text("✘", "red"),
            Text(visible(speed)),
            Text(visible(a.get("summary", ""))),
        )
    parts.append(table)
    return Group(*parts)


def mini_model(result: CheckResult | None, workspace: Any) -> Any:
    """The roofline model with only this result's points, or None (untimed, unknown GPU)."""
    if result is None or workspace is None:
        return None
    timing = result.timing
    if timing is None or not timing.cases:
        return estimate_model(result)
    try:
        from gpulab.gpu import hardware, roofline

        gpu = hardware.match_gpu(timing.device or result.device or "")
        if gpu is None:
            return None
        model = roofline.build_model(gpu, None, workspace.root, measured=True)
    except Exception:  # noqa: BLE001 - the plot is a nicety; the tables carry the numbers
        return None
    model.points = [p for p in model.points if p.exercise == result.exercise]
    model.notes = []
    return model if model.points else None


def estimate_model(result: CheckResult) -> Any:
    """A CPU check's estimate (its `cost`) on the roofline of the GPU it was
    made for, marked as a model; None without one."""
    try:
        from gpulab.gpu import costmodel, hardware, roofline

        cost = costmodel.read(result.rest)
        gpu = hardware.GPUS.get(cost.get("gpu_key") or "") if cost else None
        if gpu is None:
            return None
        model = roofline.build_model(gpu, None, None, points=False)
        point = roofline.estimate_point(result, model)
    except Exception:  # noqa: BLE001 - the plot is a nicety; the text carries the numbers
        return None
    if point is None:
        return None
    model.estimates = [point]
    return model


def progress_text(event: Event) -> str:
    """The progress line's words for a case or a stage."""
    if isinstance(event, CaseDone):
        total = f" of {event.total}" if event.total else ""
        mark = "ok" if event.passed else "WRONG"
        return f"case {event.index}{total}: {event.name} {mark}"
    if isinstance(event, Stage):
        return event.text
    return ""


def elapsed_text(elapsed: float, limit: float) -> str:
    """'12.3 s of 60 s': the time a check has run against its limit, which
    it is stopped at (an infinite loop runs until then)."""
    return f"{elapsed:4.1f} s of {limit:g} s" if limit else f"{elapsed:4.1f} s"


class ResultsPane(VerticalScroll):
    """Progress while a check runs; afterwards the report and the history."""

    HELP_TOPIC = "results"

    def __init__(self, workspace: Workspace, checks: CheckBus, *, id: str | None = None) -> None:
        """`workspace` is read, never written (the attempts, the roofline's
        results); `checks` is the bus this pane follows a check on."""
        super().__init__(id=id, can_focus=True)
        self.workspace, self._checks = workspace, checks
        self.lesson: Lesson | None = None  # the lesson shown (opened or being checked)
        self._started = 0.0
        self._stage = ""
        self._limit = 0.0  # the running check's time limit, shown as it counts
        self._ticker: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="opened-note")
        with Vertical(id="progress-row"):
            yield Static("", id="progress-text")
            yield ProgressBar(total=None, show_eta=False, id="progress-bar")
        yield Static("", id="result")
        yield Static("", id="history")

    def on_mount(self) -> None:
        self.query_one("#progress-row").display = False
        self.query_one("#opened-note").display = False
        self._checks.started.subscribe(self, self._check_started, immediate=True)
        self._checks.progress.subscribe(self, self._check_progress, immediate=True)
        self._checks.finished.subscribe(self, self._check_finished, immediate=True)

    # --- the check bus (check_bus.py): the latest check only ------------------------
    def _check_started(self, message: CheckStarted) -> None:
        self.start(message.lesson, message.device, message.limit)

    def _check_progress(self, message: CheckProgress) -> None:
        self.progress(message.event)

    def _check_finished(self, message: CheckFinished) -> None:
        # A check of a lesson no longer open (the learner moved on) is recorded
        # and listed in the sidebar, but this pane shows the open lesson.
        lesson = message.lesson
        if self.lesson is not None and self.lesson.exercise == lesson.exercise:
            attempts = self.workspace.exercise_state(lesson.exercise).get("attempts", [])
            self.finish(message.result, attempts)

    def note_opened(self, lesson: Lesson) -> None:
        """The lab opened `lesson` after a pass: the passing results stay,
        with a line above them saying what is open now."""
        label = f"{lesson.step_label}, " if lesson.step_label else ""
        note = self.query_one("#opened-note", Static)
        note.update(
            Text.assemble(
                ("Open now: ", "b"),
                f"{label}{lesson.exercise_title} ({lesson.exercise}): its lesson is pane 1, "
                "its starter pane 2. Below: the check that passed.",
            )
        )
        note.display = True
        self.scroll_home(animate=False)

    def show_idle(self, lesson: Lesson, last: CheckResult | None, attempts: list[Attempt]) -> None:
        """A lesson was opened: its last result, if any, and its history."""
        self.lesson = lesson
        self.query_one("#opened-note").display = False
        self._stop_ticker()
        self.query_one("#progress-row").display = False
        if lesson.error or not lesson.ready:
            body: Any = Text(f"Lesson {lesson.number} has no gradable exercise yet.", style="dim")
        elif last:
            body = self._report(last)
        else:
            body = Text.from_markup(
                f"No check yet for [b]{lesson.exercise}[/]. Press [b]c[/] (or F5) to run it."
            )
        self.query_one("#result", Static).update(body)
        self.query_one("#history", Static).update(history_renderable(attempts))
        # After the first paint: building the model reads every result file.
        self.call_after_refresh(self._show_point, last if lesson.ready else None)

    def start(self, lesson: Lesson, device: str, limit: float = 0.0) -> None:
        self.lesson = lesson
        self.query_one("#opened-note").display = False
        self._started = time.monotonic()
        self._limit = limit
        self._stage = "starting a fresh Python process"
        where = {"cpu": " on the CPU (Triton interpreter)", "cuda": " on your GPU"}.get(device, "")
        self.query_one("#progress-row").display = True
        bar = self.query_one(ProgressBar)
        bar.update(total=None, progress=0)
        self.query_one("#result", Static).update(
            Text.from_markup(f"Checking [b]{lesson.exercise}[/]{where}… press [b]x[/] to cancel.")
        )
        self._tick()
        self._stop_ticker()
        # Elapsed seconds tick even when the child is silent (compiling): the
        # learner sees the lab is alive. Twice a second costs one tiny repaint.
        self._ticker = self.set_interval(0.5, self._tick)
        self.scroll_home(animate=False)

    def progress(self, event: Event) -> None:
        if isinstance(event, Correct):
            self._correct(event)
            return
        if isinstance(event, Graded):
            self._graded(event)
            return
        self._stage = progress_text(event) or self._stage
        bar = self.query_one(ProgressBar)
        if isinstance(event, CaseDone) and event.total:
            bar.update(total=event.total, progress=event.index)
        elif isinstance(event, Stage) and event.done is not None and event.total is not None:
            bar.update(total=event.total, progress=event.done)
        self._tick()

    def _correct(self, event: Correct) -> None:
        """The verdict on correctness, before the timing that follows it."""
        count = f"all {event.cases} cases" if event.cases is not None else "every case"
        self.query_one("#result", Static).update(
            Text.from_markup(
                f"[b green]correct[/]: {count} right. Timing it on your GPU now "
                "for its grade… press [b]x[/] to stop."
            )
        )
        self._stage = "timing"
        self._tick()

    def _graded(self, event: Graded) -> None:
        """The grade, while the advice on where the time went is worked out."""
        summary = event.summary or f"grade {event.grade or '?'}"
        self.query_one("#result", Static).update(
            Text.assemble(
                ("graded", "b green"),
                f": {summary}. Working out where the time went… press ",
                ("x", "b"),
                " to stop.",
            )
        )
        self._stage = "explaining"
        self._tick()

    def _tick(self) -> None:
        elapsed = time.monotonic() - self._started if self._started else 0.0
        self.query_one("#progress-text", Static).update(
            f"{elapsed_text(elapsed, self._limit)}  {self._stage}"
        )

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def finish(self, result: CheckResult, attempts: list[Attempt]) -> None:
        self._stop_ticker()
        self.query_one("#progress-row").display = False
        self.query_one("#result", Static).update(self._report(result))
        self.query_one("#history", Static).update(history_renderable(attempts))
        self._show_point(result)
        self.scroll_home(animate=False)

    def _show_point(self, result: CheckResult | None) -> None:
        """A small roofline with this run's timed cases, when it was timed on a GPU."""
        model = mini_model(result, self.workspace)
        plots = self.query("#mini-roofline")
        if model is None:
            for hidden in plots:
                hidden.display = False
            return
        from gpulab.tui.plot import roofline_plot

        # A RooflinePlot: gpulab.tui.plot makes its class lazily, so typed Any.
        plot: Any = plots.first() if plots else roofline_plot("mini-roofline")
        if not plots:
            self.mount(plot, before=self.query_one("#history"))
        plot.display = True
        plot.show_model(model)

    @staticmethod
    def _report(result: CheckResult) -> Any:
        if result.status == Status.CANCELLED:
            return Text("Check cancelled.", style="yellow")
        try:
            from gpulab.lab.report import render

            return render(result)
        except ImportError:
            raise  # gpulab changed on disk: the app offers a restart (app.py)
        except Exception as exc:  # noqa: BLE001 - a malformed result file must not crash the UI
            return Text(f"could not show this result: {type(exc).__name__}: {exc}", style="red")
