"""The learner's file as the judge reads it once, when a check begins."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MAX_SOURCE = 8 << 20  # a submission's bytes, sent whole in one frame


def read_submission(file: str) -> tuple[bytes | None, str]:
    """The submission's bytes, read once when the check begins: the sandbox
    imports these, and the replay keeps its kernels from the same text.
    (bytes, "") or (None, why not) in words."""
    from gpulab.fsutil import unreadable_file

    path = Path(file)
    problem = unreadable_file(path)
    if problem:
        return None, problem
    try:
        # Opened without blocking and checked once open: a file swapped for
        # a FIFO after unreadable_file looked would otherwise hold the judge
        # in open() until the check's timeout.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None, f"{path} is not a plain file"
            os.set_blocking(fd, True)
            data = f.read(MAX_SOURCE + 1)
    except OSError as exc:
        return None, f"{path} cannot be read: {exc.strerror or exc}"
    if len(data) > MAX_SOURCE:
        return None, (
            f"{path.name} is over {MAX_SOURCE >> 20} MiB: a submission is Python source, "
            "and gpulab grades files up to that size"
        )
    return data, ""
