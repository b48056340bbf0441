"""The terminal going away under the lab (an SSH link dropped, the window
closed: SIGHUP; or SIGTERM from whoever stops it). By default Python dies
at once: an edit typed in the last second, before the autosave, was lost,
and a running check's judge and the spare judge (in sessions of their own,
so the hang-up does not reach them) went on for 5-45 s (issue 30, tmux).

Quitting through Textual is no way out here (it writes to the dead terminal
and never finished, tried), so the handler does only what must not be lost,
directly: the editor's buffer is written, every judge is stopped, and the
signal is raised again with its default action."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGHUP, signal.SIGTERM)


def install(save: Callable[[], Any]) -> Callable[[], None]:
    """Handle the hang-up (main thread only); returns what puts the old
    handlers back. `save` writes the editor's unsaved edit, if any."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous: dict[int, Any] = {}

    def hung_up(signum: int, frame: Any) -> None:
        with contextlib.suppress(Exception):
            save()
        with contextlib.suppress(Exception):
            from gpulab.lab.runner import stop_all

            stop_all()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in SIGNALS:
        with contextlib.suppress(ValueError, OSError):
            previous[sig] = signal.signal(sig, hung_up)

    def undo() -> None:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)

    return undo


__all__ = ["SIGNALS", "install"]
