"""Where a learner's kernel first made a NaN from numbers (the CPU's interpreter).

An online softmax whose running max is still -inf (a row or tile that is all
-inf so far, as masking makes it) computes exp(-inf - (-inf)) = exp(NaN):
the NaN then spreads through the sum to the whole row. The judge sees only
the NaN in the result (gpulab.judge.compare); the Triton interpreter runs
the kernel's arithmetic as numpy, which reports an invalid operation (inf -
inf, 0 * inf, 0 / 0) to a callback as it happens. The callback walks the
stack to the innermost frame in the learner's file: that kernel line.

Lines are reported in the order first seen, a few at most: a masked lane of
an honest kernel may compute inf - inf too, harmlessly, so the judge quotes
them only for a case whose result holds NaN where the answer is a number.
This is the sandbox's report (advice in a message), never a verdict.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
from collections.abc import Iterator
from typing import Any

MAX_LINES = 3


@contextlib.contextmanager
def nan_lines(file: str) -> Iterator[list[str]]:
    """Within the block, the learner's lines (`line 12: x - m`) where numpy
    made a NaN out of numbers, first seen first."""
    import numpy as np

    found: list[str] = []

    def on_error(kind: str, flag: int) -> None:
        if len(found) >= MAX_LINES:
            return
        frame: Any = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename == file:
                line = frame.f_lineno
                code = linecache.getline(file, line).strip()
                words = f"line {line}: `{code if len(code) <= 80 else code[:79] + '…'}`"
                if words not in found:
                    found.append(words)
                return
            frame = frame.f_back

    old_call = np.seterrcall(on_error)
    old = np.seterr(invalid="call")
    try:
        yield found
    finally:
        np.seterr(**old)
        np.seterrcall(old_call)
