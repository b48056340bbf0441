"""What `gpulab dev new-exercise NAME` writes: a folder exercise that works
as it stands (an elementwise GELU: its reference passes, its starter fails)
with comments telling the instructor what to change (docs/new-exercise.md).

Kept as text with `__NAME__` for the exercise's name, so the scaffold is
five files written, nothing run.
"""

from __future__ import annotations

from pathlib import Path

EXERCISE_TOML = '''\
# The exercise's fields (docs/new-exercise.md): change them for yours.
exercise = "__NAME__"  # its id: `gpulab check __NAME__`; the learner's file is named after it
title = "GELU, one element a lane"  # shown in the sidebar and `gpulab list`
kind = "kernel"  # a Triton kernel, graded against spec.py
function = "__NAME__"  # the function the learner's file defines
status = "ready"  # "coming": listed, not yet gradable
bound = "memory"  # the roof that bounds it on a GPU: "memory" or "compute"
# The least work and traffic of one case, over the sizes of spec.py's cases
# (here N) and `elt`, the element's size in bytes: each input read once, each
# output written once. They place a run on the roofline and give the cost
# model its minimum bytes.
flops = "8*N"
bytes = "2*N*elt"
# Three levels: a nudge, the approach, a near-solution.
hints = [
    """One program a block of BLOCK consecutive elements, enough programs to cover all n, \\
and a mask for the lanes of the last block that run past the end.""",
    """offs = pid * BLOCK + tl.arange(0, BLOCK); mask = offs < n. Load x as fp32, compute \\
x * sigmoid(1.5957691 * (x + 0.044715 * x³)) and store it, masked, in the output's dtype.""",
    """```python
x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
```
Launch `__NAME___kernel[(triton.cdiv(n, 1024),)](out, x, n, BLOCK=1024)`.""",
]
'''

LESSON_MD = """\
# GELU, one element a lane

<!-- The lesson the learner reads (Markdown). Change it for your exercise. -->

GELU is the activation of most transformers' MLPs. Its tanh form,

    gelu(x) = 0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))
            = x · sigmoid(1.5957691 · (x + 0.044715 · x³))

is computed element by element: each output needs its own input alone. A
kernel reads every input once and writes every output once,

    bytes = 2 · N · elt

and does a few FLOPs an element, so it is memory-bound: on a GPU it is
graded on the fraction of the datasheet's bandwidth it reaches.

## Your task

Write `__NAME__(x)` in your file (`gpulab where __NAME__` names it): for
a 1-D contiguous `x` (fp32, fp16 or bf16, any length), a new tensor of x's
shape and dtype holding GELU of each element, computed by your Triton
kernel in fp32. torch's own GELU is off the graded path.
"""

STARTER_PY = '''\
"""GELU, one element a lane: write `__NAME__(x)` in a Triton kernel.

    __NAME__(x) = x * sigmoid(1.5957691216 * (x + 0.044715 * x**3))

Contract (the grader checks all of it):
  * x is 1-D and contiguous, of any length N >= 1: fp32, fp16 or bf16.
  * Return a NEW tensor of x's shape and dtype; don't write into x.
  * Compute in fp32 inside the kernel, then store in the output's dtype.
  * The work happens in your Triton kernel: torch's GELU is off limits.

Run `gpulab check __NAME__` (or press `c` in the lab) to grade it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def __NAME___kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    # TODO: this program's BLOCK offsets, and a mask for the lanes past n.
    # TODO: load x (masked) as fp32, compute GELU, store it (masked) into out.
    pass


def __NAME__(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    # TODO: launch __NAME___kernel on enough programs to cover all n elements.
    return out
'''

REFERENCE_PY = '''\
"""Reference solution: GELU (tanh form), one element a lane.

A solution that passes, for `gpulab dev check` and `gpulab solution`; it
is hidden from the learner's checks. Change it with the exercise.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def __NAME___kernel(out_ptr, x_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y = x / (1.0 + tl.exp(-1.5957691216057308 * (x + 0.044715 * x * x * x)))
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


BLOCK = 1024


def __NAME__(x: torch.Tensor) -> torch.Tensor:
    n = x.numel()
    out = torch.empty_like(x)
    __NAME___kernel[(triton.cdiv(n, BLOCK),)](out, x, n, BLOCK=BLOCK)
    return out
'''

SPEC_PY = '''\
"""The judge's side of the __NAME__ exercise (docs/new-exercise.md).

Trusted Python: gpulab runs it in its judge, never in the learner's
sandbox, and hides this folder from the learner's code. Change the
reference, the inputs and the cases for your exercise; the names gpulab
reads are these (reference, make_inputs and CASES are needed, the rest
optional).
"""

import torch
import torch.nn.functional as F


def reference(x):
    """The right answer, from torch, in float64: the learner's result is
    compared with it within TOLERANCE. Called with a case's arguments."""
    return F.gelu(x.double(), approximate="tanh")


def make_inputs(N, dtype, generator, device):
    """One case's arguments to the learner's function (a tensor, or a tuple
    of them and numbers). Called with the case's sizes by name (here N), its
    dtype (a torch.dtype), a seeded generator to draw from and the device."""
    x = torch.randn(N, generator=generator, dtype=torch.float32, device=device) * 3
    return (x.to(dtype),)


# Correctness cases, on the CPU (the Triton interpreter: keep them small)
# and on a GPU: sizes by name (the names exercise.toml's formulas use), a
# "dtype" ("fp32", "fp16", "bf16" or "fp64") and an optional "label".
# gpulab adds the last one again, drawn afresh (a kept answer fails there).
CASES = [
    {"N": 1, "dtype": "fp32"},
    {"N": 3, "dtype": "fp16"},
    {"N": 1000, "dtype": "fp32"},
    {"N": 1025, "dtype": "bf16", "label": "a partial last block"},
    {"N": 4099, "dtype": "fp16", "label": "several blocks"},
]
# More correctness cases, on a GPU only.
GPU_CASES = [{"N": 10_000_019, "dtype": "fp32"}]
# Timed on a GPU (none: correctness only): hundreds of MB, so the time is
# the memory's, not the launch's.
TIMING_CASES = [
    {"N": 2**26, "dtype": "fp32"},
    {"N": 2**27, "dtype": "fp16"},
    {"N": 2**27, "dtype": "bf16"},
]

# (atol, rtol) by dtype; a dtype left out takes gpulab's default.
TOLERANCE = {"fp32": (1e-5, 1e-5)}

# torch's own op that the exercise replaces: calling it is a cheat.
BANNED = [F.gelu, torch.nn.GELU.forward]
BANNED_ATEN = ["gelu"]
BANNED_LABEL = "torch's GELU (F.gelu, nn.GELU)"


def baseline(x):
    """torch's own op, timed beside the learner's kernel on a GPU."""
    return F.gelu(x, approximate="tanh")


BASELINE_NAME = "F.gelu"

# The letter from the fraction of the datasheet's roof (bandwidth, for a
# "memory" bound exercise) over TIMING_CASES: (fraction, letter), best first.
GRADES = [(0.80, "A"), (0.65, "B"), (0.45, "C"), (0.0, "D")]
'''

FILES = {
    "exercise.toml": EXERCISE_TOML,
    "lesson.md": LESSON_MD,
    "starter.py": STARTER_PY,
    "reference.py": REFERENCE_PY,
    "spec.py": SPEC_PY,
}


def write(folder: Path, name: str) -> list[Path]:
    """The five files of a new folder exercise `name` in `folder` (made if
    need be); the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for file, text in FILES.items():
        path = folder / file
        path.write_text(text.replace("__NAME__", name), encoding="utf-8")
        written.append(path)
    return written
