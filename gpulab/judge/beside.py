"""Files beside the checked one, read by the judge for the replay.

The references load their Hopper kernels from kernels/hopper/*.py beside
them, the one folder beside the checked file that its sandbox may read
(gpulab.judge.main.policy_for). The replay keeps those files' kernels too,
read here by the judge, never by the sandbox, and checked as the checked
file is (gpulab.sandbox.replay_source).

Which file is the sandbox's word (a launch record names the file its
kernel came from), so the path is checked before anything is opened: an
absolute path, already normal, inside one of the folders the sandbox could
read beside the checked file (none for a learner's file: a record naming
another student's file beside it must not make the judge read it, and
quote its names back), a `.py` file, no part hidden. It is then opened one
part at a time from that folder without following links, and without
blocking, and must be a plain file of at most MAX_BYTES: a link, a FIFO
that would hold the judge, or a device file gives a problem, not a read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence

MAX_BYTES = 1 << 20  # a file of kernels beside the checked one
MAX_DEPTH = 2  # parts of a path below its folder: hopper/sub/x.py is 2


def inside(folders: Sequence[str], path: object) -> bool:
    """Whether `path` (the sandbox's word) names something in `folders`."""
    return isinstance(path, str) and any(path.startswith(f + os.sep) for f in folders)


def where_problem(folders: Sequence[str], path: object) -> str:
    """Why `path` is not a file the judge reads in `folders` ("" if it is)."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return "it names no file"
    if not os.path.isabs(path) or os.path.normpath(path) != path:
        return "its path is not a plain absolute path"
    folder = next((f for f in folders if path.startswith(f + os.sep)), None)
    if folder is None:
        where = " or ".join(f"{os.path.basename(f)}/" for f in folders)
        return f"it is not in {where}" if where else "no file beside the checked one is read"
    parts = path[len(folder) + 1 :].split(os.sep)
    if len(parts) > MAX_DEPTH:
        return f"it is more than {MAX_DEPTH - 1} folders down"
    if any(p.startswith(".") for p in parts) or not parts[-1].endswith(".py"):
        return "it is not a .py file (or a part of its path is hidden)"
    return ""


def read_beside(folders: Sequence[str], path: str) -> tuple[bytes | None, str]:
    """(bytes, "") of `path` in one of `folders`, or (None, why not)."""
    problem = where_problem(folders, path)
    if problem:
        return None, problem
    folder = next(f for f in folders if path.startswith(f + os.sep))
    parts = path[len(folder) + 1 :].split(os.sep)
    flags = os.O_RDONLY | os.O_CLOEXEC
    fds: list[int] = []
    try:
        fds.append(os.open(folder, flags | os.O_DIRECTORY | os.O_NOFOLLOW))
        for part in parts[:-1]:
            fds.append(os.open(part, flags | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1])
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, "it is not a plain file"
            os.set_blocking(fd, True)
            data = f.read(MAX_BYTES + 1)
    except OSError as exc:
        # ELOOP: a link where a part of the path should be.
        link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
        why = "a part of its path is a link" if link else exc.strerror or str(exc)
        return None, f"it cannot be read: {why}"
    finally:
        for d in fds:
            os.close(d)
    if len(data) > MAX_BYTES:
        return None, f"it is over {MAX_BYTES >> 20} MiB"
    return data, ""
