"""The lab's driver under `gpulab serve`: textual's WebDriver, made to leave.

textual's own answers the server's "quit" with an exit that skips the lab's
quit (the file being edited is not saved), and when its input ends, because
the server died, it stops reading and runs on, alone, forever. This one
quits as `q` does in both cases, and when the server is gone and quitting
hangs (its output has nowhere to go) it ends the process after a grace.

gpulab.cli.webserve names it in TEXTUAL_DRIVER for every lab it starts.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from textual import messages
from textual.drivers.web_driver import WebDriver

# Quitting saves the file and stops a check: well under a second. A lab
# whose server died that is still here after this is stuck.
ORPHAN_GRACE_S = 5.0


class LabWebDriver(WebDriver):
    """WebDriver whose lab quits when the tab or the server goes."""

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == "quit":  # the tab has closed
            self._quit()
        else:
            super().on_meta(packet_type, payload)

    def run_input_thread(self) -> None:
        super().run_input_thread()
        if not self.exit_event.is_set():
            # Input ended without the app stopping: the server has gone.
            timer = threading.Timer(ORPHAN_GRACE_S, os._exit, (1,))
            timer.daemon = True
            timer.start()
            self._quit()

    def _quit(self) -> None:
        app: Any = self._app
        try:
            # Nobody is left to answer a question: the lab's quit without one.
            app.call_from_thread(getattr(app, "leave", app.exit))
        except Exception:  # not running yet, or quitting failed: exit plainly
            app.post_message(messages.ExitApp())
