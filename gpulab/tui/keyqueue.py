"""Keys handled one after another, each after the one before has done its work.

Textual sends each key to the widget focused when the app takes the key from
its queue, but a key's binding runs only once the key has come back up to
the app. Typed in one burst (`2`, `e` and the first letters on a fresh
start, or any typing on a loaded machine), every key went to the widget
focused before `2` moved the focus: the letters were dropped, and `q` among
them quit the lab in VIEW mode (issue 30, item 5: the text vanished in 2 of
3 tries). Here a key waits until the one before it has been stopped by a
widget or has come back to the app, and then until what its binding set
going has run: Widget.focus() and call_later() post to the app's queue and
a pane's own messages wait in the pane's, so the next key waits for the
app's and the screen's queues to empty (a 5 ms timer could fire before the
binding's deferred focus ran, and the key went to the old focus: 1 in
about 30 full-suite runs on a loaded 2-core box). At most KEY_WAIT_S a key.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from textual import events
from textual.app import App

# Far above a key's round trip (milliseconds; up to 1 s seen on a loaded 2-core box); a
# key lost on its way only holds the next this long.
KEY_WAIT_S = 5.0
POLL_S = 0.005


class KeysInOrder:
    """One key at a time, in the order typed, for the App that holds it.

    The App hands over each key it takes from its queue (`take`) and each
    key that comes back up to it (`came_back`); `deliver` is App.on_event,
    which sends a key on to the focused widget and runs its bindings.
    """

    def __init__(self, app: App[Any], deliver: Callable[[events.Event], Awaitable[None]]) -> None:
        self.app, self.deliver = app, deliver
        self.in_flight: events.Key | None = None
        self.deadline = 0.0
        self.pending: deque[events.Key] = deque()

    def busy(self) -> bool:
        key = self.in_flight
        return key is not None and not key._stop_propagation and time.monotonic() < self.deadline

    async def take(self, event: events.Key) -> None:
        """A key from the App's queue: sent on now, or after the keys before it."""
        if self.pending or self.busy():
            self.pending.append(event)
            if len(self.pending) == 1:
                self.app.set_timer(POLL_S, self.drain)
            return
        await self.send(event)

    async def send(self, event: events.Key) -> None:
        focused = self.app.focused
        typed = focused is not None and focused.check_consume_key(event.key, event.character)
        # A letter typed into a field moves no focus: the next key need not
        # wait for it (typing keeps its pace on a loaded machine).
        self.in_flight = None if typed else event
        self.deadline = time.monotonic() + KEY_WAIT_S
        await self.deliver(event)
        if not event.is_forwarded:  # a priority binding took it: done already
            self.in_flight = None

    def came_back(self, event: events.Key) -> None:
        """The key has come back up to the App, which runs its bindings next:
        the following key goes after that, from the App's queue."""
        if event is self.in_flight:
            self.in_flight = None

    def settled(self) -> bool:
        """Nothing queued in the app or on its screen: the last key's work is done."""
        if time.monotonic() >= self.deadline:
            return True  # a busy screen (a spinner, a stream of output) holds no key longer
        if not self.app._message_queue.empty():
            return False
        try:
            nodes = self.app.screen.walk_children(with_self=True)
        except Exception:  # noqa: BLE001 - no screen yet, or one closing
            return True
        return all(node._message_queue.empty() for node in nodes)

    async def drain(self) -> None:
        pending = self.pending
        while pending and not self.busy() and self.settled():
            await self.send(pending.popleft())
        if pending:
            self.app.set_timer(POLL_S, self.drain)
