"""How long each correctness case may take on the CPU (the Triton interpreter).

A CPU check's first limit is 60 s (gpulab.lab.plan), sized for the
reference kernels, which finish every case of an exercise in a few seconds
there. The interpreter runs a kernel as Python over numpy, though, so an
honest kernel written another way can need far more: a softmax whose max
and sum went through `tl.reduce` with its own combine function took 224 s
(one Python call an element; gpulab.sandbox.interpreter_reduce now runs those
in a tree), and any kernel that loops over small blocks is slower in the
interpreter in proportion to the elements it touches. It was stopped at
60 s and told "an infinite loop?".

So where the learner set no limit, the judge gives each case its own time
as it starts, and the lab stops the check only when the case running has
had it (or at the cap, 10 minutes in all): the limit scales with the cases,
not with the exercise. What the judge knows:

- before the check, each case's inputs: a case may take `PER_ELEMENT_S` for
  each element of its tensors, at least `FLOOR_S`, times `SLACK` (its two
  replays run beside the next case, on the same cores);
- as cases run, how long each took: a case may take `SLACK` times what the
  slowest rate seen so far (seconds an element) needs for its elements.
  The rate is learned only from cases of `RATE_MIN_ELEMENTS` or more, and
  never from the first case (it starts the replay's sandbox and the
  profiler: 15 s of a check on a busy box), where fixed costs would swamp it.

A loop that never ends is still stopped, at its case's time (a minute or two
on the exercises' CPU cases), and the lab's message names the case it was
in. Never before the first limit: an allowance only moves the deadline
later. The sandbox's CPU-seconds limit is set from the cap.
"""

from __future__ import annotations

import time
from typing import Any

# Measured on this project's 2-core CPU box (2026-12-07, Triton 3.9, torch
# 2.13, load average 7-8 from other work): the reference softmax check took
# 6-9 s for its 3×32768 and 2×32768 cases (60-140 µs an element, nearly all
# of it the judge's and the sandbox's own work around the kernel); in the
# interpreter alone an online softmax over blocks of 128 columns took 80 µs
# an element, over blocks of 32 460 µs, and the tl.reduce softmax
# before its fix 210-800 µs. PER_ELEMENT_S covers the first two before any
# case is seen; a slower style shows its rate on the smaller cases first.
PER_ELEMENT_S = 100e-6
FLOOR_S = 30.0
SLACK = 3.0
RATE_MIN_ELEMENTS = 4096


def elements(case: Any) -> int:
    """Elements in a case's tensor arguments (positional and keyword)."""
    total = 0
    for value in (*getattr(case, "args", ()), *getattr(case, "kwargs", {}).values()):
        numel = getattr(value, "numel", None)
        if callable(numel):
            total += int(numel())
    return total


class CaseClock:
    """Each case's allowance, and what the cases so far took."""

    def __init__(self, cases: list[Any]) -> None:
        self.sizes = [max(1, elements(c)) for c in cases]
        self.rate = 0.0  # the slowest seconds an element seen so far
        self.started: float | None = None
        self.current = 0

    def allow(self, i: int) -> float:
        """Seconds case `i` may take from its start."""
        n = self.sizes[i]
        need = max(n * PER_ELEMENT_S, n * self.rate)
        return round(max(FLOOR_S, SLACK * need), 1)

    def start(self, i: int) -> float:
        """Case `i` starts now: its allowance."""
        self.finish()
        self.current, self.started = i, time.monotonic()
        return self.allow(i)

    def finish(self) -> None:
        """The case running has ended: what it took teaches the rate."""
        if self.started is None:
            return
        took = time.monotonic() - self.started
        n = self.sizes[self.current]
        if self.current > 0 and n >= RATE_MIN_ELEMENTS:
            self.rate = max(self.rate, took / n)
        self.started = None

    def last(self) -> float:
        """What the last case's replays may still take after it."""
        self.finish()
        return self.allow(len(self.sizes) - 1) if self.sizes else FLOOR_S


__all__ = ["CaseClock", "elements"]
