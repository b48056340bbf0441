"""The Device pane: what this machine has (NVML, torch asked in a child
process) and its measured ceilings (the microbenchmarks, in a fresh process).

Slow work runs in thread workers that post messages back; the measured
ceilings are saved to the workspace on the UI thread, when they arrive.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import ProgressBar, Static
from textual.worker import get_current_worker

from gpulab.gpu.devinfo import GpuInfo
from gpulab.lab.workspace import Workspace
from gpulab.tui.lazy_pane import LazyPane, unavailable
from gpulab.tui.messages import BenchDone, BenchProgress, DeviceSnapshot


class DevicePane(LazyPane):
    """What this machine has (NVML, torch in a child), and its measured ceilings."""

    HELP_TOPIC = "device"
    BINDINGS = [
        Binding("g", "refresh", "Refresh", tooltip="Ask the GPU again"),
        Binding("m", "microbench", "Measure", tooltip="Run the microbenchmarks"),
        # Where there is no GPU, m is not offered, and says why when pressed.
        Binding("m", "no_gpu_to_measure", "Measure", show=False),
    ]

    def __init__(self, workspace: Workspace, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.workspace = workspace

    def compose(self) -> ComposeResult:
        yield Static("", id="device-line")
        yield Static("", id="bench-stage")
        yield ProgressBar(total=None, show_eta=False, id="bench-bar")
        yield Static("", id="bench-result")
        yield Static(Text("Asking the GPU…", style="dim"), id="snapshot")

    def on_mount(self) -> None:
        self.query_one("#bench-bar").display = False
        self.query_one("#bench-stage").display = False

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "microbench":
            return not self.no_gpu  # nothing to measure: not offered
        if action == "no_gpu_to_measure":
            return self.no_gpu
        return True

    @property
    def no_gpu(self) -> bool:
        """Detection has answered, and found no GPU."""
        info = getattr(self.app, "gpu_info", None)
        return info is not None and not info.found

    def show_gpu_info(self, info: GpuInfo) -> None:
        from gpulab.gpu import hardware
        from gpulab.tui.screens import device_line

        sheet = hardware.GPUS[hardware.DEFAULT_GPU].name
        self.query_one("#device-line", Static).update(
            Text(device_line(info, sheet).replace("**", ""))
        )
        self.app.refresh_bindings()  # m is offered only where there is a GPU

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

    @work(
        thread=True,
        exclusive=True,
        group="probe-snapshot",
        exit_on_error=False,
        description="device probe",
    )
    def _snapshot_worker(self) -> None:
        workspace = self.workspace
        try:
            from gpulab.lab import probe

            # NVML answers in milliseconds, torch's child in seconds (tens of
            # them on a loaded machine): NVML's answer is shown meanwhile.
            first = probe.snapshot(workspace, torch_info=probe.TORCH_PENDING)
            self.post_message(DeviceSnapshot(probe.snapshot_renderable(first)))
            snap = probe.snapshot(workspace)
            renderable: Any = probe.snapshot_renderable(snap)
        except Exception as exc:  # noqa: BLE001
            renderable = unavailable("The device probe", exc)
        self.post_message(DeviceSnapshot(renderable))

    @on(DeviceSnapshot)
    def _snapshot(self, event: DeviceSnapshot) -> None:
        self.query_one("#snapshot", Static).update(event.renderable)

    # --- microbenchmarks --------------------------------------------------------------
    def action_microbench(self) -> None:
        self.run_probe()

    def action_no_gpu_to_measure(self) -> None:
        self.run_probe()  # which says why not

    def run_probe(self) -> None:
        app: Any = self.app
        if self.no_gpu:
            app.notify(
                "No GPU here, so nothing to measure: the microbenchmarks time a GPU's "
                "memory bandwidth and FLOP/s. Rooflines use the datasheet figures.",
                timeout=5,
            )
            return
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

    @work(
        thread=True,
        exclusive=True,
        group="probe",
        exit_on_error=False,
        description="microbenchmarks",
    )
    def _bench_worker(self) -> None:
        worker = get_current_worker()
        try:
            from gpulab.lab.microbench_runner import run_microbench

            # No workspace here: _bench_done saves the result, on the UI thread.
            outcome = run_microbench(
                None,
                on_event=lambda ev: self.post_message(BenchProgress(ev)),
                cancel=worker.cancelled_event,
            )
        except Exception as exc:  # noqa: BLE001
            outcome = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self.post_message(BenchDone(outcome))

    @on(BenchProgress)
    def _bench_progress(self, event: BenchProgress) -> None:
        ev = event.event
        if ev["type"] == "progress":
            self.query_one("#bench-stage", Static).update(
                f"step {ev.get('done', 0)} of {ev.get('total', '?')}: {ev.get('label', '')} "
                "(x cancels)"
            )
            self.query_one("#bench-bar", ProgressBar).update(
                total=ev.get("total"), progress=ev.get("done", 0)
            )

    @on(BenchDone)
    def _bench_done(self, event: BenchDone) -> None:
        app: Any = self.app
        app.probing = False
        self.query_one("#bench-bar").display = False
        stage = self.query_one("#bench-stage", Static)
        out = event.outcome
        if out.get("ok") and isinstance(out.get("result"), dict) and out["result"].get("device"):
            try:
                from gpulab.lab.microbench_runner import save

                out["cache"] = str(save(app.workspace.root, out["result"]))
            except Exception as exc:  # noqa: BLE001 - as the worker reported it before
                out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        if not out.get("ok"):
            stage.update(Text(f"Microbenchmarks: {out.get('error')}", style="yellow"))
            return
        stage.update(
            Text(
                f"Measured ceilings saved to {out.get('cache')}; checks and "
                "rooflines on this GPU use them from now on.",
                style="green",
            )
        )
        try:
            from gpulab.lab.microbench_runner import results_renderable

            self.query_one("#bench-result", Static).update(results_renderable(out["result"]))
        except Exception as exc:  # noqa: BLE001
            self.query_one("#bench-result", Static).update(unavailable("The results table", exc))
        app.query_one("#roofline-pane").set_lesson(app.lesson)  # new ceilings: redraw
