"""Small file helpers: atomic writes and advisory locks.

Every piece of learner state goes through `atomic_write_*`, so a crash or a
SIGKILL mid-write leaves either the old file or the new one, never half of each.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` via a temporary file in the same folder and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        # Keep the permissions of the file we replace (an exercise may be 0644).
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_problem(folder: Path) -> str | None:
    """Why no new file can be written in `folder` ("Read-only file system",
    "Permission denied", a full disk...), or None when one can: found by
    writing one, the only test that sees every cause."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gpulab-probe-")
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    return None


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def file_lock(path: Path, *, shared: bool = False, blocking: bool = True) -> Iterator[bool]:
    """Hold an advisory lock on `path` (created if missing).

    Yields True when the lock is held. With `blocking=False` it yields False
    instead of waiting when another process holds it. On platforms without
    fcntl (Windows) it always yields True: gpulab's state is still written
    atomically there, only concurrent writers are not serialised.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux/macOS
        yield True
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        flags = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        if not blocking:
            flags |= fcntl.LOCK_NB
        try:
            fcntl.flock(f.fileno(), flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def own_temp_folder(name: str) -> Path:
    """A folder in the shared temp folder that is this user's alone: another
    user who made one of that name first (or a link to elsewhere) gets a
    fresh one instead."""
    folder = Path(tempfile.gettempdir()) / f"{name}-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
        return folder
    return Path(tempfile.mkdtemp(prefix=f"{name}-"))


def is_within(path: Path, root: Path) -> bool:
    """True when `path` resolves inside `root` (symlinks followed)."""
    try:
        Path(path).resolve().relative_to(Path(root).resolve())
    except ValueError:
        return False
    return True


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (fifo)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def unreadable_file(path: Path) -> str | None:
    """Why `path` is not a regular file gpulab can read, in words; None if it is one.

    Says what the path is (a directory, a fifo, a device...) rather than "no such
    file": a learner who typed the folder's name needs to be told so. Never opens
    the path, since opening a fifo would block until someone writes to it.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            return f"{path} is a symbolic link to something that does not exist"
        return f"no such file: {path}"
    except NotADirectoryError:
        return f"no such file: {path} (a part of that path is a file, not a folder)"
    except OSError as exc:
        return f"{path} cannot be read: {exc.strerror or exc}"
    for test, kind in _KINDS:
        if test(st.st_mode):
            return f"{path} is {kind}, not a file"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if not os.access(path, os.R_OK):
        return f"{path} cannot be read: permission denied"
    return None


# An exercise is a few KB; a file this big is not one (a log, a model saved
# over it), and a TextArea would take seconds to lay it out.
MAX_EDIT_BYTES = 1_000_000


def read_for_editor(path: Path) -> tuple[str | None, str | None]:
    """(the file's text, None), or (None, why it cannot be edited here, in words).

    The editor reads and writes UTF-8 only; the check also honours a `# coding:`
    line, so a file it grades may still be one this editor refuses, with the
    reason and the byte that stops it.
    """
    problem = unreadable_file(path)  # never opens it: a fifo would block
    if problem:
        return None, problem
    try:
        size = path.stat().st_size
        if size > MAX_EDIT_BYTES:
            return None, (
                f"{path.name} is {size / 1e6:.1f} MB, and the editor opens files up to "
                f"{MAX_EDIT_BYTES // 1_000_000} MB (an exercise is a few KB: is it the right file?)"
            )
        data = path.read_bytes()
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        return None, (
            f"{path.name} is not UTF-8 text: byte 0x{data[exc.start]:02x} at line {line}, "
            f"column {column}. Save it as UTF-8 in another editor, or reset it (r; your "
            "file is backed up first)"
        )
    # As read_text does: universal newlines.
    return text.replace("\r\n", "\n").replace("\r", "\n"), None


def load_toml(path: Path, error: type[Exception], missing: str) -> dict[str, Any]:
    """The TOML file at `path` as a dict, or `error(message)` naming the file.

    The one mapping of a file's problems to words for the lesson manifest and
    the glossary: absent (`missing` says what it is), not valid TOML (where),
    or unreadable (permissions, a directory, bytes that are not UTF-8).
    """
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(f"{path}: {missing}") from None
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{path}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"{path}: cannot be read: {exc}") from None


def default_root() -> Path:
    """The learner's workspace folder: $GPULAB_HOME, else ~/gpulab. Here, below
    the lab, so a child (the bench) finds the cached ceilings without the lab's
    workspace module."""
    env = os.environ.get("GPULAB_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return (Path.home() / "gpulab").resolve()
