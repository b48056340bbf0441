"""The check's bus: the signals a pane subscribes to, to follow a check itself.

The shell publishes on it (shell.py) once a worker's message has reached the
UI thread and the result is recorded; only the latest check is published (a
check that a newer one replaced updates no pane), and only while the layout
is up. Each pane that shows part of a check subscribes in its on_mount and
decides for itself what the check means to it: the shell no longer updates
the panes one by one.

Callbacks run at once, inside publish (`immediate=True`): every pane has
shown the finished check before the shell moves on (after a step passes,
it opens the next step, and the panes must not show the old one over it).
"""

from __future__ import annotations

from textual.dom import DOMNode
from textual.signal import Signal

from gpulab.tui.messages import CheckFinished, CheckProgress, CheckStarted


class CheckBus:
    """Three signals, one per kind of check message; owned by the app."""

    def __init__(self, owner: DOMNode) -> None:
        self.started: Signal[CheckStarted] = Signal(owner, "check-started")
        self.progress: Signal[CheckProgress] = Signal(owner, "check-progress")
        self.finished: Signal[CheckFinished] = Signal(owner, "check-finished")
