"""The Roofline, Device and Roadmap & Glossary panes.

Each shows a core module (gpulab.roofline, gpulab.probe, gpulab.microbench_runner,
gpulab.roadmap, gpulab.glossary), imported when the pane is first shown, never
at start-up; a module that is missing or broken becomes a message in its pane,
not a crash. Slow work (NVML, torch's device properties asked in a child
process, microbenchmarks) runs in thread workers that post messages back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Label, ProgressBar, Select, Static
from textual.worker import get_current_worker

from gpulab.content import Lesson
from gpulab.tui.devinfo import GpuInfo


def unavailable(what: str, exc: BaseException) -> Text:
    return Text(f"{what} is not available in this installation "
                f"({type(exc).__name__}: {exc}).", style="yellow")


class _LazyPane(VerticalScroll):
    """A pane that builds its content the first time it is shown."""

    HELP_TOPIC = ""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, can_focus=True)
        self._stale = True

    def ensure_rendered(self) -> None:
        if self._stale:
            self._stale = False
            self.build()

    def build(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


# --- Roofline -------------------------------------------------------------------------
class RooflinePane(_LazyPane):
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

    class Built(Message):
        def __init__(self, model: Any, why: str, error: str = "") -> None:
            super().__init__()
            self.model, self.why, self.error = model, why, error

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.chosen: str | None = None
        """The GPU key picked in this pane this session (None: gpulab's choice)."""
        self._drawn: str | None = None  # the GPU key of the plot on screen

    def compose(self) -> ComposeResult:
        yield Static("Drawing the roofline…", id="roofline-summary")

    def set_lesson(self, lesson: Lesson) -> None:
        """A lesson was opened or checked: new points may exist."""
        self._stale = True
        if getattr(self.app, "active_pane", None) == "roofline":
            self.ensure_rendered()

    def build(self) -> None:
        if not self.query("#roofline-gpu"):
            from gpulab import hardware

            options = [(gpu.name, key) for key, gpu in hardware.GPUS.items()]
            row = Horizontal(Label("datasheet GPU"),
                             Select(options, value=hardware.DEFAULT_GPU, allow_blank=False,
                                    compact=True, id="roofline-gpu",
                                    tooltip="Draw this GPU's datasheet roofline (saved as "
                                            "the workspace setting 'gpu')"),
                             id="roofline-gpu-row")
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
        if (not isinstance(key, str) or key != event.select.value or self._drawn is None
                or key == self._drawn):
            # Not the learner choosing: the list's first value, a change the
            # pane made to show what it drew, or an event older than that change.
            return
        self.chosen = key
        self.app.workspace.set_setting("gpu", key)  # type: ignore[attr-defined]
        self._build_worker(key)

    @work(thread=True, exclusive=True, group="roofline", exit_on_error=False,
          description="roofline")
    def _build_worker(self, gpu: str | None = None) -> None:
        try:
            from gpulab import roofline

            model, why = roofline.workspace_model(self.app.workspace,  # type: ignore[attr-defined]
                                                  gpu)
        except Exception as exc:  # noqa: BLE001 - a missing module or bad data: say so
            self.post_message(self.Built(None, "", f"{type(exc).__name__}: {exc}"))
            return
        if gpu:
            why = "chosen here; saved as the workspace setting 'gpu'"
        self.post_message(self.Built(model, why))

    @on(Built)
    def _built(self, event: Built) -> None:
        summary = self.query_one("#roofline-summary", Static)
        if event.model is None:
            summary.update(Text(f"The roofline could not be drawn: {event.error}", "yellow"))
            return
        self._drawn = event.model.gpu.key
        select = self.query_one("#roofline-gpu", Select)
        if select.value != self._drawn:
            select.value = self._drawn  # its Changed is ignored: it is what is drawn
        try:
            from gpulab import roofline
            from gpulab.tui.plot import roofline_plot
        except ImportError as exc:
            summary.update(unavailable("The roofline plot", exc))
            return
        plots = self.query("#roofline-plot")
        plot = plots.first() if plots else roofline_plot("roofline-plot")
        if not plots:
            self.mount(plot, before=summary)
        plot.show_model(event.model)
        summary.update(roofline.summary_renderable(event.model, event.why))

    def export_svg(self) -> None:
        self._export_worker()

    @work(thread=True, group="roofline-export", exit_on_error=False, description="export")
    def _export_worker(self) -> None:
        app: Any = self.app
        try:
            from gpulab import roofline

            model, _ = roofline.workspace_model(app.workspace)
            path = Path(app.workspace.root) / "roofline.svg"
            roofline.export(model, path)
        except Exception as exc:  # noqa: BLE001
            app.call_from_thread(app.notify, f"export failed: {type(exc).__name__}: {exc}",
                                 severity="error")
            return
        app.call_from_thread(app.notify, f"wrote {path}", title="Roofline exported", timeout=6)


# --- Device -----------------------------------------------------------------------------
class DevicePane(_LazyPane):
    """What this machine has (NVML, torch in a child), and its measured ceilings."""

    HELP_TOPIC = "device"
    BINDINGS = [
        Binding("g", "refresh", "Refresh", tooltip="Ask the GPU again"),
        Binding("m", "microbench", "Measure", tooltip="Run the microbenchmarks"),
    ]

    class Snapshot(Message):
        def __init__(self, renderable: Any) -> None:
            super().__init__()
            self.renderable = renderable

    class BenchProgress(Message):
        def __init__(self, event: dict[str, Any]) -> None:
            super().__init__()
            self.event = event

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, DevicePane.BenchProgress)

    class BenchDone(Message):
        def __init__(self, outcome: dict[str, Any]) -> None:
            super().__init__()
            self.outcome = outcome

    def compose(self) -> ComposeResult:
        yield Static("", id="device-line")
        yield Static("", id="bench-stage")
        yield ProgressBar(total=None, show_eta=False, id="bench-bar")
        yield Static("", id="bench-result")
        yield Static(Text("Asking the GPU…", style="dim"), id="snapshot")

    def on_mount(self) -> None:
        self.query_one("#bench-bar").display = False
        self.query_one("#bench-stage").display = False

    def show_gpu_info(self, info: GpuInfo) -> None:
        from gpulab import hardware
        from gpulab.tui.screens import device_line

        sheet = hardware.GPUS[hardware.DEFAULT_GPU].name
        self.query_one("#device-line", Static).update(
            Text(device_line(info, sheet).replace("**", "")))

    def build(self) -> None:
        app: Any = self.app
        if app.gpu_info is not None:
            self.show_gpu_info(app.gpu_info)
        else:
            app.want_gpu_info()
        self._snapshot_worker()

    def action_refresh(self) -> None:
        self.query_one("#snapshot", Static).update(Text("Asking the GPU…", style="dim"))
        self._snapshot_worker()

    @work(thread=True, exclusive=True, group="probe-snapshot", exit_on_error=False,
          description="device probe")
    def _snapshot_worker(self) -> None:
        try:
            from gpulab import probe

            snap = probe.snapshot(self.app.workspace)  # type: ignore[attr-defined]
            renderable: Any = probe.snapshot_renderable(snap)
        except Exception as exc:  # noqa: BLE001
            renderable = unavailable("The device probe", exc)
        self.post_message(self.Snapshot(renderable))

    @on(Snapshot)
    def _snapshot(self, event: Snapshot) -> None:
        self.query_one("#snapshot", Static).update(event.renderable)

    # --- microbenchmarks --------------------------------------------------------------
    def action_microbench(self) -> None:
        self.run_probe()

    def run_probe(self) -> None:
        app: Any = self.app
        if app.probing:
            app.notify("The microbenchmarks are already running (x cancels).", timeout=3)
            return
        app.probing = True
        stage = self.query_one("#bench-stage", Static)
        stage.display = True
        stage.update("starting the microbenchmarks in a fresh process… (x cancels)")
        bar = self.query_one("#bench-bar", ProgressBar)
        bar.display = True
        bar.update(total=None, progress=0)
        self.scroll_home(animate=False)
        self._bench_worker()

    @work(thread=True, exclusive=True, group="probe", exit_on_error=False,
          description="microbenchmarks")
    def _bench_worker(self) -> None:
        worker = get_current_worker()
        try:
            from gpulab.microbench_runner import run_microbench

            outcome = run_microbench(self.app.workspace.root,  # type: ignore[attr-defined]
                                     on_event=lambda ev: self.post_message(self.BenchProgress(ev)),
                                     cancel=worker.cancelled_event)
        except Exception as exc:  # noqa: BLE001
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self.post_message(self.BenchDone(outcome))

    @on(BenchProgress)
    def _bench_progress(self, event: BenchProgress) -> None:
        ev = event.event
        if ev.get("type") == "progress":
            self.query_one("#bench-stage", Static).update(
                f"step {ev.get('done', 0)} of {ev.get('total', '?')}: {ev.get('label', '')} "
                "(x cancels)")
            self.query_one("#bench-bar", ProgressBar).update(total=ev.get("total"),
                                                            progress=ev.get("done", 0))

    @on(BenchDone)
    def _bench_done(self, event: BenchDone) -> None:
        app: Any = self.app
        app.probing = False
        self.query_one("#bench-bar").display = False
        stage = self.query_one("#bench-stage", Static)
        out = event.outcome
        if not out.get("ok"):
            stage.update(Text(f"Microbenchmarks: {out.get('error')}", style="yellow"))
            return
        stage.update(Text(f"Measured ceilings saved to {out.get('cache')}; checks and "
                          "rooflines on this GPU use them from now on.", style="green"))
        try:
            from gpulab.microbench_runner import results_renderable

            self.query_one("#bench-result", Static).update(results_renderable(out["result"]))
        except Exception as exc:  # noqa: BLE001
            self.query_one("#bench-result", Static).update(unavailable("The results table", exc))
        app.query_one("#roofline-pane").set_lesson(app.lesson)  # new ceilings: redraw


# --- Roadmap & glossary -------------------------------------------------------------------
class RoadmapPane(_LazyPane):
    """Search the glossary; below, GPU generations and the book's claims checked."""

    HELP_TOPIC = "roadmap"
    MAX_TERMS = 6

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search the glossary (e.g. ridge, coalescing, HBM)",
                    id="glossary-search")
        yield Static("", id="glossary-results")
        yield Static("", id="roadmap")

    def build(self) -> None:
        self._show_terms("")
        try:
            from gpulab.roadmap import roadmap_renderable

            roadmap: Any = roadmap_renderable()
        except Exception as exc:  # noqa: BLE001
            roadmap = unavailable("The roadmap", exc)
        self.query_one("#roadmap", Static).update(roadmap)

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and isinstance(self.app.focused, Input):
            event.stop()
            self.focus()  # leave the search box; single-letter keys work again

    @on(Input.Changed, "#glossary-search")
    def _search(self, event: Input.Changed) -> None:
        self._show_terms(event.value)

    def _show_terms(self, query: str) -> None:
        out = self.query_one("#glossary-results", Static)
        try:
            from rich.console import Group

            from gpulab.glossary import search, term_renderable

            terms = search(query)
        except Exception as exc:  # noqa: BLE001
            out.update(unavailable("The glossary", exc))
            return
        if not terms:
            out.update(Text(f"No term matches {query!r}.", style="dim"))
            return
        shown: list[Any] = []
        for term in terms[: self.MAX_TERMS]:
            shown += [term_renderable(term), Text("")]
        more = len(terms) - self.MAX_TERMS
        if more > 0:
            names = ", ".join(t.name for t in terms[self.MAX_TERMS:self.MAX_TERMS + 12])
            shown.append(Text(f"{more} more: {names}{'…' if more > 12 else ''}", style="dim"))
        out.update(Group(*shown))
