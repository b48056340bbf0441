"""Run a thread of `--explain` only on CPU time nothing else wants: its work
is advice, and must not slow the check it explains."""

from __future__ import annotations

import contextlib
import os
import threading


def idle(tid: int) -> None:
    """Run thread `tid` (0: this one; its children inherit it) only on CPU
    time nothing else wants: SCHED_IDLE where Linux has it (nice 10 still
    took ~10% of a core from the check it explains and slowed a flash_attention
    check by up to 3 s on 2 cores), else nice 10."""
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except (OSError, AttributeError):
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, tid or threading.get_native_id(), 10)
