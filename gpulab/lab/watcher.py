"""Noticing when the exercise file changes on disk: one watcher for the lab
and for `gpulab watch`.

Three uses: the lab's editor must notice another editor's saves (reload when
clean, ask when dirty, never overwrite silently), the lab's watch mode and
`gpulab watch` re-run the check on every save. All go through `file_changes`:
watchfiles (inotify/FSEvents) when it works, polling the file's stat otherwise
(network drives, WSL's /mnt, exhausted inotify watches), as rustlings does.
Both see an editor that writes a new file and renames it over the old one.
No UI here: the CLI imports it without textual.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

Stamp = tuple[int, int, int]  # inode, mtime_ns, size


def stamp(path: Path) -> Stamp | None:
    """What identifies one version of a file; None when it does not exist.

    The inode is part of it because the lab and many editors write atomically
    (a new file renamed over the old one): two writes in the same mtime tick
    (a few ms on Linux, 2 s on FAT) with the same size differ only by it.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


async def file_changes(
    path: Path,
    stop: asyncio.Event,
    *,
    poll: bool = False,
    interval: float = 0.5,
    on_fallback: Callable[[str], None] | None = None,
) -> AsyncIterator[str]:
    """Yield "events" or "poll" each time `path` may have changed, until `stop` is set.

    The caller decides whether a change is real (compares stamps): editors
    save in several steps and both backends may report one save twice.
    `on_fallback` hears why file events were given up for polling.
    """
    path = Path(path)
    if not poll:
        try:
            from watchfiles import awatch  # ~20 ms; only once a lesson is open
        except ImportError:
            poll = True
    if not poll:
        try:
            # The folder is watched, not the file: editors and the lab itself
            # save by renaming a new file over the old one, which a watch on
            # the old file's inode would miss. `stop` is also how the rust
            # thread is told to finish (cancelling the task alone can't).
            async for _changes in awatch(
                path.parent,
                watch_filter=lambda _c, p: Path(p) == path,
                debounce=200,
                step=50,
                rust_timeout=1000,
                stop_event=stop,
                recursive=False,
            ):
                yield "events"
            return
        except (OSError, RuntimeError) as exc:
            # e.g. inotify watch limit reached: fall back to polling
            if on_fallback is not None:
                on_fallback(f"file events unavailable ({exc}); polling instead")
    last = stamp(path)
    while not stop.is_set():
        await asyncio.sleep(interval)
        now = stamp(path)
        if now != last:
            last = now
            yield "poll"
