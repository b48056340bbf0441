"""Measure and remove folders a sandbox wrote, without recursion and without
following a link.

A check's sandbox writes its file's compiler cache (and its own private
folder) as the user, and may leave anything there: folders nested 1500
deep, a link to a link to itself, a fifo, a folder it made unreadable.
`os.walk` recursed through the nesting and ended a check with "could not
run this check: RecursionError"; the cache stayed, so every later check of
that file failed the same way. `shutil.rmtree` recurses too on Python 3.11.
Here both walks keep their own stack:

- `survey` counts entries and bytes without following a link and stops at
  a depth, an entry count or a byte count, and at the first thing that is
  neither a plain file nor a folder (a link, fifo, socket or device) or a
  folder it cannot read: what it met is in `Survey.odd`, and a caller
  empties the tree rather than reason about it;
- `remove_tree` removes a tree of any depth with one open folder at a time
  (it walks back up through each folder's ".."), giving itself the right
  to enter a folder the sandbox closed (the user owns it), unlinking
  links and fifos as names, never opening them; at most `budget` entries
  a call, so a tree of millions cannot hold a check: what is left stays
  for the next call.

Pure standard library; nothing heavy (the lab and the judge's start use it).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


@dataclass(frozen=True)
class Survey:
    """What `survey` found: entries and bytes counted (until it stopped),
    whether a limit was passed, and the first odd thing met ("" if none)."""

    entries: int = 0
    bytes: int = 0
    over: bool = False
    odd: str = ""

    @property
    def clean(self) -> bool:
        return not self.over and not self.odd


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a fifo"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    return "something that is neither a file nor a folder"


def survey(
    root: Path, *, max_depth: int = 32, max_entries: int = 50_000, max_bytes: int = 1 << 30
) -> Survey:
    """Count `root`'s tree (a missing root is an empty one). Never raises."""
    try:
        top = os.open(root, _DIR)
    except FileNotFoundError:
        return Survey()
    except OSError as exc:
        what = "a link" if os.path.islink(root) else f"a folder it cannot open ({exc.strerror})"
        return Survey(odd=f"{root.name} is {what}")
    entries = used = 0
    # One (folder, path below root, depth) at a time: a folder's subfolders
    # are opened from it by name, so a link swapped in is never followed.
    stack: list[tuple[int, str, int]] = [(top, "", 0)]
    try:
        while stack:
            fd, where, depth = stack.pop()
            try:
                with os.scandir(fd) as it:
                    found = list(it)
            except OSError as exc:
                os.close(fd)
                return Survey(entries, used, odd=f"{where or '.'} cannot be read ({exc.strerror})")
            for entry in found:
                entries += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    os.close(fd)
                    return Survey(entries, used, odd=f"{where}/{entry.name}: {exc.strerror}")
                used += st.st_blocks * 512
                if entries > max_entries or used > max_bytes:
                    os.close(fd)
                    return Survey(entries, used, over=True)
                path = f"{where}/{entry.name}" if where else entry.name
                if stat.S_ISREG(st.st_mode):
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    os.close(fd)
                    return Survey(entries, used, odd=f"{path} is {_kind(st.st_mode)}")
                if depth + 1 > max_depth:
                    os.close(fd)
                    return Survey(entries, used, odd=f"folders nested over {max_depth} deep")
                try:
                    child = os.open(entry.name, _DIR, dir_fd=fd)
                except OSError as exc:
                    os.close(fd)
                    return Survey(entries, used, odd=f"{path} cannot be opened ({exc.strerror})")
                stack.append((child, path, depth + 1))
            os.close(fd)
    finally:
        for fd, _, _ in stack:
            with contextlib.suppress(OSError):
                os.close(fd)
    return Survey(entries, used)


def _open_dir(name: str, parent: int) -> int:
    """`name` in folder `parent` opened as a folder, entered first if its
    mode kept its owner out (the user owns whatever a sandbox made)."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        _enter(name, parent)
        fd = os.open(name, _DIR, dir_fd=parent)
    if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
        os.fchmod(fd, 0o700)  # to unlink inside it
    return fd


def _enter(name: str, parent: int) -> None:
    """chmod 0700 the folder `name` in `parent`, never a link: through an
    O_PATH descriptor of the folder itself (Linux's chmod cannot be told
    not to follow a link)."""
    pfd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        if not stat.S_ISDIR(os.fstat(pfd).st_mode):
            raise NotADirectoryError(name)
        os.chmod(f"/proc/self/fd/{pfd}", 0o700)
    finally:
        os.close(pfd)


def remove_tree(root: Path, budget: int = 1_000_000) -> bool:
    """Remove `root` and everything under it, at most `budget` entries this
    call. True when it is gone (or was never there). Never raises."""
    root = Path(root)
    try:
        st = os.lstat(root)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(OSError):
            os.unlink(root)
        return not os.path.lexists(root)
    try:
        parent = os.open(root.parent, _DIR)
    except OSError:
        return False
    try:
        return _remove_below(parent, root.name, budget)
    except OSError:
        return False
    finally:
        os.close(parent)


def _remove_below(parent: int, name: str, budget: int) -> bool:
    fd = _open_dir(name, parent)
    # The names from `name` down to the folder `fd` is, and each level's
    # subfolders still to remove: only `fd` is open; going up is "..".
    path: list[str] = []
    pending: list[list[str]] = [[]]
    fresh = True
    try:
        while True:
            if fresh:  # entering a folder: its files go, its folders wait
                with os.scandir(fd) as it:
                    found = list(it)
                for entry in found:
                    budget -= 1
                    if budget < 0:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        pending[-1].append(entry.name)
                    else:
                        os.unlink(entry.name, dir_fd=fd)
            if pending[-1]:
                child = pending[-1].pop()
                down = _open_dir(child, fd)
                os.close(fd)
                fd = down
                path.append(child)
                pending.append([])
                fresh = True
                continue
            if not path:
                break
            up = os.open("..", _DIR, dir_fd=fd)
            os.close(fd)
            fd = up
            os.rmdir(path.pop(), dir_fd=fd)
            pending.pop()
            fresh = False
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)
    return True


TRASH = ".trash-"


def set_aside(folder: Path, budget: int = 200_000) -> bool:
    """Move `folder` out of the way at once (a rename beside it) and remove
    what was moved, within `budget` entries. Also removes what earlier calls
    left beside it. True when `folder`'s name is free (missing or moved)."""
    folder = Path(folder)
    moved = True
    if os.path.lexists(folder):
        aside = folder.with_name(f"{folder.name}{TRASH}{secrets.token_hex(4)}")
        try:
            os.rename(folder, aside)
        except OSError:
            moved = remove_tree(folder, budget)
    clear_trash(folder.parent, budget)
    return moved


def clear_trash(parent: Path, budget: int = 200_000) -> None:
    """Remove the folders set_aside left in `parent`, within `budget`."""
    with contextlib.suppress(OSError), os.scandir(parent) as it:
        left = [e.name for e in it if TRASH in e.name]
    for name in left:
        remove_tree(parent / name, budget)


__all__ = ["Survey", "clear_trash", "remove_tree", "set_aside", "survey"]
