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

from textual import events

# Far above a key's round trip (milliseconds; up to 1 s seen on a loaded 2-core box); a
# key lost on its way only holds the next this long.
KEY_WAIT_S = 5.0
POLL_S = 0.005


class KeysInOrder:
    """Mixin for an App: one key at a time, in the order typed."""

    _key_in_flight: events.Key | None = None
    _key_deadline = 0.0
    _pending_keys: deque[events.Key] | None = None

    def _key_busy(self) -> bool:
        key = self._key_in_flight
        return (
            key is not None and not key._stop_propagation and time.monotonic() < self._key_deadline
        )

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            if self._pending_keys is None:
                self._pending_keys = deque()
            if self._pending_keys or self._key_busy():
                self._pending_keys.append(event)
                if len(self._pending_keys) == 1:
                    self.set_timer(POLL_S, self._drain_keys)  # type: ignore[attr-defined]
                return
            await self._send_key(event)
            return
        await super().on_event(event)  # type: ignore[misc]

    async def _send_key(self, event: events.Key) -> None:
        focused = self.focused  # type: ignore[attr-defined]
        typed = focused is not None and focused.check_consume_key(event.key, event.character)
        # A letter typed into a field moves no focus: the next key need not
        # wait for it (typing keeps its pace on a loaded machine).
        self._key_in_flight = None if typed else event
        self._key_deadline = time.monotonic() + KEY_WAIT_S
        await super().on_event(event)  # type: ignore[misc]
        if not event.is_forwarded:  # a priority binding took it: done already
            self._key_in_flight = None

    def _settled(self) -> bool:
        """Nothing queued in the app or on its screen: the last key's work is done."""
        if time.monotonic() >= self._key_deadline:
            return True  # a busy screen (a spinner, a stream of output) holds no key longer
        if not self._message_queue.empty():  # type: ignore[attr-defined]
            return False
        try:
            nodes = self.screen.walk_children(with_self=True)  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - no screen yet, or one closing
            return True
        return all(node._message_queue.empty() for node in nodes)

    async def _drain_keys(self) -> None:
        pending = self._pending_keys
        while pending and not self._key_busy() and self._settled():
            await self._send_key(pending.popleft())
        if pending:
            self.set_timer(POLL_S, self._drain_keys)  # type: ignore[attr-defined]

    def _on_key(self, event: events.Key) -> None:
        # The key has come back up to the app, whose own _on_key (Textual
        # calls each class's in turn) runs its bindings next: the following
        # key goes after that, from the app's queue.
        if event is self._key_in_flight:
            self._key_in_flight = None
