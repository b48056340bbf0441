"""What a learner reads when the sandbox dies: the summary and the hint.

A kernel that reads or writes past its tensors (an unmasked tl.load or
tl.store) ends the sandbox in one of two ways, run to run: the interpreter
touches an unmapped page (SIGSEGV), or it overwrites the C library's heap
bookkeeping and glibc aborts ("free(): invalid pointer", "corrupted
double-linked list": SIGABRT). Lesson 01's triad with its masks taken out
gave both on the CPU. Both say the same thing to the learner: out of bounds,
a missing mask?

The judge calls `crash_summary` with the sandbox's exit code and, where it
has it, the sandbox's output (glibc writes its reason to stderr just before
it aborts).
"""

from __future__ import annotations

import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpulab.wire.sandbox_start import Policy

OUT_OF_BOUNDS = "out of bounds: a missing mask?"

# The sandbox's exit status when its channel to the judge failed under it
# (the learner's code closed, shut down or dup2'ed over its socket). Before
# it had one, the OSError went up through the interpreter's teardown, which
# died of SIGSEGV, read as "out of bounds: a missing mask?".
CHANNEL_BROKEN = 86

MASK_HINT = (
    "A load or store outside its tensor: give every tl.load and tl.store a mask "
    "(mask=offs < n) for the lanes past the end."
)

# What glibc prints when it finds its heap overwritten, then aborts.
_HEAP_CORRUPTION = (
    "free(): ",
    "malloc(): ",
    "malloc_consolidate",
    "realloc(): ",
    "double free or corruption",
    "corrupted double-linked list",
    "corrupted size vs. prev_size",
    "munmap_chunk(): ",
    "unaligned tcache chunk",
    "stack smashing detected",
)


def heap_corrupted(output: str) -> bool:
    """Whether the output ends with glibc's report of an overwritten heap."""
    tail = (output or "")[-4000:]
    return any(marker in tail for marker in _HEAP_CORRUPTION)


# A process of the check killed by a signal gpulab did not send (SIGKILL:
# the system's out-of-memory killer, or someone's `kill`).
KILLED_HINT = (
    "Something outside gpulab killed it: most often the system's out-of-memory "
    "killer, when the machine ran short of memory (other programs, or very large "
    "tensors of your own), or another program or person with `kill`. If your code "
    "allocates nothing unusual, it is not at fault: close what uses memory and "
    "run the check again."
)


def killed_words(process: str, code: int | None) -> tuple[str, str] | None:
    """(summary, advice) for one of gpulab's own processes (the judge, the
    replay's sandbox) that a signal ended; None when no signal did. Not the
    learner's code: neither process runs it."""
    if code is None or code >= 0:
        return None
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return (
        f"{process} was killed ({name}) from outside gpulab; your code is not at fault, "
        "run the check again",
        KILLED_HINT.replace("If your code allocates nothing unusual, it is not at fault: ", "")
        if name == "SIGKILL"
        else f"{name} ended it. Run the check again.",
    )


def crash_summary(
    code: int | None, killed_by_judge: str, policy: Policy, output: str = ""
) -> tuple[str, str]:
    """(summary, hint) for a sandbox that ended with exit status `code`
    (negative: the signal), unless the judge stopped it and said why."""
    if killed_by_judge:
        return killed_by_judge, ""
    if code is None:
        return "your code stopped answering", ""
    if code == CHANNEL_BROKEN:
        return (
            "your code closed or broke the sandbox's private channel to the grader",
            "The sandbox answers the judge on a socket of its own; leave the "
            "file descriptors your code did not open alone.",
        )
    if code >= 0:
        return (
            f"your code exited (code {code}) in the middle of the check",
            "A submission must not call sys.exit or os._exit.",
        )
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    if name == "SIGXCPU":
        return (f"your code used more than {policy.cpu_seconds} s of CPU time", "")
    if name == "SIGXFSZ":
        return (f"your code wrote a file larger than {policy.file_bytes >> 20} MB", "")
    if name == "SIGSEGV":
        return (
            f"your code crashed (SIGSEGV, a segmentation fault): {OUT_OF_BOUNDS}",
            MASK_HINT + " Outside a kernel, a bad ctypes or numpy call does the same.",
        )
    if name == "SIGABRT":
        if heap_corrupted(output):
            return (
                f"your code aborted (SIGABRT: memory was overwritten): {OUT_OF_BOUNDS}",
                MASK_HINT + " A store past the end overwrote the C library's own "
                "memory, which it found and aborted on (see the output).",
            )
        return (
            f"your code aborted (SIGABRT): a failed assertion, or {OUT_OF_BOUNDS}",
            "A library assertion failed, or a kernel wrote past a tensor's end; "
            "see the output. " + MASK_HINT,
        )
    if name == "SIGKILL":
        return (
            "your code's process was killed (SIGKILL) from outside gpulab",
            KILLED_HINT,
        )
    return (f"your code died from {name}", "")
