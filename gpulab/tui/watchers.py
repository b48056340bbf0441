"""What the lab watches outside itself: the open exercise's file on disk,
and the GPU (NVML, asked once).

Each runs in one of the App's workers and answers with a message to the
App (ExerciseChangedOnDisk, GpuDetected), handled on the UI thread.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING

from gpulab.gpu.devinfo import detect_gpus
from gpulab.lab.watcher import file_changes
from gpulab.tui.messages import ExerciseChangedOnDisk, GpuDetected
from gpulab.tui.screens import WelcomeScreen

if TYPE_CHECKING:
    from pathlib import Path

    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.tui.lab_app import LabApp
    from gpulab.tui.shell import Shell


class Watchers:
    """The file watcher and the GPU detection, for the App that holds them."""

    def __init__(self, app: LabApp, *, poll: bool) -> None:
        self.app, self.poll = app, poll
        self._stop: asyncio.Event | None = None

    def watch_file(self, path: Path | None) -> None:
        """(Re)start watching the current exercise file."""
        self.stop_file()
        if path is None:
            return
        self._stop = stop = asyncio.Event()
        self.app.run_worker(
            partial(self._file_changes, path, stop),
            name="file_watch",
            group="file-watch",
            description="file watcher",
            exit_on_error=False,
            exclusive=True,
        )

    def stop_file(self) -> None:
        # Lets the watchfiles thread finish now instead of at its next timeout.
        if self._stop is not None:
            self._stop.set()
            self._stop = None

    async def _file_changes(self, path: Path, stop: asyncio.Event) -> None:
        async for _ in file_changes(path, stop, poll=self.poll):
            self.app.post_message(ExerciseChangedOnDisk(path))

    def want_gpu_info(self) -> None:
        """Start NVML detection once, if nobody has the answer yet."""
        app = self.app
        if app.gpu_info is None and not any(
            w.group == "gpu" and not w.is_finished for w in app.workers
        ):
            app.run_worker(
                self._detect,
                name="detect",
                group="gpu",
                description="GPU detection",
                exit_on_error=False,
                thread=True,
            )

    def _detect(self) -> None:
        self.app.post_message(GpuDetected(detect_gpus()))

    def gpu_detected(self, info: GpuInfo, shell: Shell) -> None:
        """Tell whoever shows the device: the welcome screen, the Device pane."""
        if shell.main_screen() is None:
            return  # the app is closing
        for screen in self.app.screen_stack:
            if isinstance(screen, WelcomeScreen):
                screen.show_device(info)
        shell.pane("device").show_gpu_info(info)
