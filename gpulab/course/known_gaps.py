"""Known gaps of the supported stacks, and what a learner should do instead.

A learner's kernel can be right and still fail on one release of a tool.
Most of the Triton interpreter's (the CPU path) are fixed by gpulab before
any learner code runs (gpulab.sandbox.interpreter_fixes, applied where a
probe shows the bug, whatever the version; run on Triton 3.6, 3.8 and
3.9):

- bf16 kept as raw bits and cast, added, compared and multiplied as
  integers (Triton 3.6-3.9): fp64 -> bf16 gave 0, a bf16 `tl.dot` garbage,
  fp32 -> bf16 truncated; fixed, computed in fp32 and rounded once to bf16;
- bf16 constants (`tl.full(..., tl.bfloat16)`), which Triton 3.6-3.8's
  interpreter cannot make (`'InterpreterBuilder' object has no attribute
  'get_bf16'`); fixed;
- `tl.reduce` / `tl.associative_scan` with a combine function of the
  kernel's own, run one Python call an element (a softmax: 224 s); fixed
  (gpulab.sandbox.interpreter_reduce: in a tree, log2(n) calls);
- `@triton.autotune` with several configs, which asks for a GPU to time
  them; fixed (gpulab.sandbox.interpreter_autotune: the first config kept).

What is left is below: `hint_for` maps such an error text (and the versions
it happened on) to one line that says what to do, so the grader can show it
instead of leaving a learner to debug Triton. BF16_CONSTANT stays for a
Triton the fix does not reach (its probe failed there). Where a gap gives
wrong numbers rather than an error, the judge finds it with a probe kernel
of its own (gpulab.judge.graders.matmul.interpreter_dot_ok) and skips or
loosens those cases, saying so.

Pure string work: no torch, triton or jax import here (the grader calls it
after the learner's code failed, and tests call it with any version).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


def _version(text: str | None) -> tuple[int, ...] | None:
    """ "3.8.0" / "3.9.0+git1234" -> (3, 8); None if unreadable."""
    m = re.match(r"\s*(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def triton_version() -> str | None:
    """The installed Triton's version, read from its metadata (no import)."""
    from importlib import metadata

    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Gap:
    """One known gap: the error it raises, where it applies, what to do."""

    pattern: re.Pattern[str]
    applies: Callable[[tuple[int, ...] | None, bool], bool]  # (triton version, interpreter)
    hint: str  # may use {triton}


# Triton < 3.9's InterpreterBuilder has get_bf16_ty but no get_bf16 (checked
# in the 3.6, 3.8 and 3.9 wheels): any bf16 *constant* made inside a kernel
# fails in the interpreter, while loading and storing bf16 tensors works.
# gpulab.sandbox.interpreter_fixes adds get_bf16 (run on 3.6 and 3.8): this
# hint is for a Triton where that fix could not be applied.
BF16_CONSTANT = Gap(
    re.compile(r"InterpreterBuilder'? object has no attribute '?get_bf16'?"),
    lambda v, interp: interp and (v is None or v < (3, 9)),
    "Triton {triton}'s interpreter cannot make bf16 constants (fixed in Triton 3.9): "
    "do the arithmetic in fp32 (tl.full/tl.zeros with tl.float32, .to(tl.float32) after "
    "tl.load) and convert once when you store, or upgrade: pip install -U 'triton>=3.9'.",
)

# Triton 3.6's interpreter converts one-element arrays to Python scalars,
# which NumPy 2.4 refuses (every kernel with a scalar argument fails there);
# Triton 3.8 works with NumPy 2.4 (both checked; 3.7 not).
NUMPY_SCALARS = Gap(
    re.compile(r"only 0-dimensional arrays can be converted to Python scalars"),
    lambda v, interp: interp and v is not None and v < (3, 8),
    "Triton {triton}'s interpreter does not work with NumPy 2.4 or later: "
    "pip install 'numpy<2.4', or upgrade Triton (3.8 and later work).",
)

# Any other builder method the interpreter lacks: the op has no CPU
# implementation in this release, whatever the learner's code does.
INTERPRETER_MISSING_OP = Gap(
    re.compile(r"InterpreterBuilder'? object has no attribute '?(\w+)'?"),
    lambda v, interp: interp,
    "Triton {triton}'s interpreter has no CPU version of an operation your kernel uses "
    "({name}): check it on a GPU, or express it with tl.load/tl.store and fp32 arithmetic; "
    "a newer Triton's interpreter may have it (pip install -U triton).",
)

GAPS = (BF16_CONSTANT, NUMPY_SCALARS, INTERPRETER_MISSING_OP)


def hint_for(error: str, triton: str | None = None, *, interpreter: bool = True) -> str | None:
    """One line saying what to do instead, when a known gap explains `error`.

    `error` is the exception's text as the learner would see it (type and
    message; a traceback works too). `triton` is the Triton version the code
    ran under (default: the installed one); `interpreter` whether it ran in
    the Triton interpreter (TRITON_INTERPRET=1, the CPU path). Returns None
    when no known gap matches: the error is then the learner's to fix.
    """
    if triton is None:
        triton = triton_version()
    version = _version(triton)
    for gap in GAPS:
        m = gap.pattern.search(error or "")
        if m and gap.applies(version, interpreter):
            name = m.group(1) if m.groups() else ""
            return gap.hint.format(triton=triton or "(unknown)", name=name)
    return None


def is_known_gap(error: str, triton: str | None = None, *, interpreter: bool = True) -> bool:
    """Whether `error` is a gap of the tool, not of the learner's code: a grader
    can then skip that case (saying so) instead of failing the learner."""
    return hint_for(error, triton, interpreter=interpreter) is not None


__all__ = ["GAPS", "Gap", "hint_for", "is_known_gap", "triton_version"]
