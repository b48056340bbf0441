"""What a kernel exercise's grader declares: its cases (Case), what a call
must return (Expect) and the rest of its rules (KernelSpec), read by
gpulab.judge.kernel and gpulab.judge.speed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from gpulab.judge.compare import DEFAULT_TOLERANCE, dtype_name
from gpulab.wire.calls import Desc
from gpulab.wire.protocol import Kwargs


@dataclass
class Case:
    name: str
    args: tuple[Any, ...]  # the learner's function's arguments, as the grader draws them
    dtype: torch.dtype
    sizes: dict[str, float] = field(default_factory=dict)
    kwargs: Kwargs = field(default_factory=dict)  # and its keyword arguments
    shape: str = ""


@dataclass
class KernelSpec:
    reference: Callable[[Case], torch.Tensor]
    banned: tuple[Callable[..., Any], ...] = ()  # torch callables (dotted names them)
    banned_aten: tuple[str, ...] = ()
    # aten ops banned only when a tensor argument has >= 4096 elements: the
    # elementwise pieces the op could be rebuilt from (mul + sum for matmul).
    banned_large: tuple[str, ...] = ()
    banned_label: str = ""
    tolerance: Callable[[torch.dtype], tuple[float, float]] = lambda dt: DEFAULT_TOLERANCE[dt]
    expect: Callable[[Case], Expect] | None = None
    # The reference at some rows only: (case, sorted indices) -> the
    # reference's rows at those indices along `row_axis`. Where an exercise has
    # it, a timed output larger than `gpulab.judge.batches.SAMPLE_ROWS` rows is
    # checked at rows the judge draws after the output is in its slot (a
    # float64 attention of 16384 tokens took 0.2 s an output on the H200,
    # and every timed output is checked).
    reference_rows: Callable[[Case, torch.Tensor], torch.Tensor] | None = None
    row_axis: int = 0
    baseline: Callable[[Case], Callable[[], Any]] | None = None
    baseline_name: str = ""
    # Grade from the geometric mean of the roofline fraction (or the
    # speedup, when `grade_on` is "speedup"): (threshold, letter), best first.
    grade_on: str = "roofline"
    grades: tuple[tuple[float, str], ...] = ((0.85, "A"), (0.70, "B"), (0.50, "C"), (0.0, "D"))
    # (case, output, reference) -> the mistake a wrong output shows, in the
    # learner's words ("elements 1000-1023 were not written"), or "": said
    # before the comparison's numbers (gpulab.judge.named_mistakes).
    diagnose: Callable[[Case, torch.Tensor, torch.Tensor], str] | None = None
    # What a store past the end of a buffer says of this exercise's kernel
    # (the default names the 1-D mask).
    overrun: str = ""


@dataclass
class Expect:
    """What the contract says the result is: its shape, its dtype (that of
    `like`, named `like_name` in messages) and whether it must be contiguous."""

    shape: tuple[int, ...]
    like: torch.Tensor
    like_name: str
    contiguous: bool = False


def desc_problem(desc: Desc, expect: Expect) -> str | None:
    """What is wrong with the result the sandbox described, or None."""
    if desc.type != "Tensor":
        return f"returned {desc.type or 'something'}, expected a torch.Tensor"
    if desc.exact is not True:
        return "returned a subclass of torch.Tensor, not a plain torch.Tensor"
    shape = desc.shape or ()
    if shape != tuple(expect.shape):
        return f"returned shape {shape}, expected {tuple(expect.shape)}"
    want = str(expect.like.dtype).replace("torch.", "")
    if desc.dtype != want:
        got = getattr(torch, str(desc.dtype), None)
        got_name = dtype_name(got) if isinstance(got, torch.dtype) else (desc.dtype or "")
        return (
            f"returned dtype {got_name}, expected {dtype_name(expect.like.dtype)} "
            f"({expect.like_name}'s dtype)"
        )
    if desc.device != expect.like.device.type:
        return f"returned a tensor on {desc.device or ''}, expected {expect.like.device.type}"
    if expect.contiguous and desc.contiguous is not True:
        return "returned a non-contiguous tensor; allocate a new contiguous output"
    return None
