"""The Roofline pane: this GPU's roofline (or a datasheet one) with the learner's
graded runs, drawn from gpulab.gpu.roofline in a thread worker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Label, Select, Static

from gpulab.course.content import Lesson
from gpulab.lab.workspace import Workspace
from gpulab.tui.check_bus import CheckBus
from gpulab.tui.lazy_pane import LazyPane, tab_shown, unavailable
from gpulab.tui.messages import CheckFinished, RooflineBuilt, RooflineExported


class RooflinePane(LazyPane):
    """The roofline of this GPU (or a datasheet one) with the learner's graded runs.

    A list above the plot picks the datasheet GPU; the choice is saved as the
    workspace setting `gpu`, the one `gpulab roofline --remember` and
    `gpulab probe --gpu` write, so the CLI draws the same GPU.
    """

    HELP_TOPIC = "roofline"
    DEFAULT_CSS = """
    RooflinePane #roofline-gpu-row { height: 1; width: 100%; }
    RooflinePane #roofline-gpu-row Label { padding: 0 1 0 0; }
    RooflinePane #roofline-gpu { width: 28; }
    """

    def __init__(
        self,
        workspace: Workspace,
        checks: CheckBus,
        remember: Callable[..., Any] | None = None,
        *,
        id: str | None = None,
    ) -> None:
        """`checks`: the bus a finished check comes on (new points to draw).
        `remember(write, *args)`: how the lab saves a setting (it says
        once when the workspace cannot be written); by default, the write."""
        super().__init__(id=id)
        self.workspace, self._checks = workspace, checks
        self.lesson: Lesson | None = None  # the lesson open
        self._remember = remember or (lambda write, *args: write(*args))
        self.chosen: str | None = None
        """The GPU key picked in this pane this session (None: gpulab's choice)."""
        self._drawn: str | None = None  # the GPU key of the plot on screen

    def compose(self) -> ComposeResult:
        yield Static("Drawing the roofline…", id="roofline-summary")

    def on_mount(self) -> None:
        self._checks.finished.subscribe(self, self._check_finished, immediate=True)

    def _check_finished(self, message: CheckFinished) -> None:
        # Redrawn for the open lesson's checks, as when the lesson is opened.
        if self.lesson is not None and self.lesson.exercise == message.lesson.exercise:
            self.set_lesson(message.lesson)

    def set_lesson(self, lesson: Lesson) -> None:
        """A lesson was opened or checked: new points may exist."""
        self.lesson = lesson
        self._stale = True
        if tab_shown(self):
            self.ensure_rendered()

    def build(self) -> None:
        if not self.query("#roofline-gpu"):
            from gpulab.gpu import hardware

            options = [(gpu.name, key) for key, gpu in hardware.GPUS.items()]
            row = Horizontal(
                Label("datasheet GPU"),
                Select(
                    options,
                    value=hardware.DEFAULT_GPU,
                    allow_blank=False,
                    compact=True,
                    id="roofline-gpu",
                    tooltip="Draw this GPU's datasheet roofline (saved as "
                    "the workspace setting 'gpu')",
                ),
                id="roofline-gpu-row",
            )
            self.mount(row, before=self.query_one("#roofline-summary"))
        self._build_worker(self.chosen)

    def choose_gpu(self) -> None:
        """Focus the GPU list (the palette's "roofline: choose the datasheet GPU")."""
        self.ensure_rendered()
        self.call_after_refresh(lambda: self.query_one("#roofline-gpu", Select).focus())

    @on(Select.Changed, "#roofline-gpu")
    def _gpu_chosen(self, event: Select.Changed) -> None:
        event.stop()
        key = event.value
        if (
            not isinstance(key, str)
            or key != event.select.value
            or self._drawn is None
            or key == self._drawn
        ):
            # Not the learner choosing: the list's first value, a change the
            # pane made to show what it drew, or an event older than that change.
            return
        self.chosen = key
        self._remember(self.workspace.set_setting, "gpu", key)
        self._build_worker(key)

    @work(
        thread=True, exclusive=True, group="roofline", exit_on_error=False, description="roofline"
    )
    def _build_worker(self, gpu: str | None = None) -> None:
        try:
            from gpulab.gpu import roofline

            lesson = self.lesson
            dtype = lesson.roof_dtype if lesson is not None else ""
            try:  # the lesson's compute roof (fp32 for the triad), where the GPU lists it
                model, why = roofline.workspace_model(self.workspace, gpu, dtype or None)
            except ValueError:
                model, why = roofline.workspace_model(self.workspace, gpu)
        except Exception as exc:  # noqa: BLE001 - a missing module or bad data: say so
            self.post_message(RooflineBuilt(None, "", f"{type(exc).__name__}: {exc}"))
            return
        if gpu:
            why = "chosen here; saved as the workspace setting 'gpu'"
        self.post_message(RooflineBuilt(model, why))

    @on(RooflineBuilt)
    def _built(self, event: RooflineBuilt) -> None:
        summary = self.query_one("#roofline-summary", Static)
        if event.model is None:
            summary.update(Text(f"The roofline could not be drawn: {event.error}", "yellow"))
            return
        self._drawn = event.model.gpu.key
        select = self.query_one("#roofline-gpu", Select)
        if select.value != self._drawn:
            select.value = self._drawn  # its Changed is ignored: it is what is drawn
        try:
            from gpulab.gpu import roofline
            from gpulab.tui.plot import roofline_plot
        except ImportError as exc:
            summary.update(unavailable("The roofline plot", exc))
            return
        plots = self.query("#roofline-plot")
        # A RooflinePlot: gpulab.tui.plot makes its class lazily, so typed Any.
        plot: Any = plots.first() if plots else roofline_plot("roofline-plot")
        if not plots:
            self.mount(plot, before=summary)
        plot.show_model(event.model)
        summary.update(roofline.summary_renderable(event.model, event.why))

    # --- export ---------------------------------------------------------------------
    def export_svg(self) -> None:
        self._export_worker()

    @work(thread=True, group="roofline-export", exit_on_error=False, description="export")
    def _export_worker(self) -> None:
        # The model and its SVG are built here (reading every result file);
        # the file is written by _exported, on the UI thread, like every
        # other write to the workspace.
        try:
            from gpulab.gpu import roofline, roofline_plot

            model, _ = roofline.workspace_model(self.workspace)
            message = RooflineExported(
                Path(self.workspace.root) / "roofline.svg", roofline_plot.to_svg(model)
            )
        except Exception as exc:  # noqa: BLE001
            message = RooflineExported(None, error=f"{type(exc).__name__}: {exc}")
        self.post_message(message)

    @on(RooflineExported)
    def _exported(self, event: RooflineExported) -> None:
        event.stop()
        if event.path is not None:
            try:
                event.path.write_text(event.svg, encoding="utf-8")
            except OSError as exc:
                event.error = f"{type(exc).__name__}: {exc}"
        if event.error:
            self.app.notify(f"export failed: {event.error}", severity="error")
            return
        self.app.notify(f"wrote {event.path}", title="Roofline exported", timeout=6)
