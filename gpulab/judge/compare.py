"""Comparing a learner's output with a float64 reference, GPU MODE style.

A failure names what a learner can act on: shape, dtype, max abs and rel
error, how many elements are off, and the first few bad indices with values.
NaN never passes unless the reference is NaN there; infinities must match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import torch

from gpulab.gpu.units import value_text
from gpulab.judge.case_row import BadElementJson

# (atol, rtol) against a float64 reference, per output dtype.
DEFAULT_TOLERANCE = {
    torch.float64: (1e-10, 1e-8),
    torch.float32: (1e-6, 1e-5),
    torch.float16: (1e-5, 2e-3),
    torch.bfloat16: (1e-4, 1.6e-2),
}

DTYPE_NAMES = {
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).replace("torch.", ""))


@dataclass(frozen=True, slots=True)
class BadElement:
    """One wrong element: where, what the learner's output held, what the
    reference did."""

    index: tuple[int, ...]
    got: float
    expected: float

    def to_json(self) -> BadElementJson:
        return {"index": list(self.index), "got": self.got, "expected": self.expected}


@dataclass(frozen=True, slots=True)
class Comparison:
    """An output against its reference: the largest errors (NaN or inf when
    the output has a NaN or an infinity the reference has not), how many
    elements are wrong of how many, how many are NaN where the reference is
    not, and the first few wrong ones."""

    max_abs: float
    max_rel: float
    mismatches: int
    numel: int
    nan: int = 0
    first_bad: tuple[BadElement, ...] = ()

    @property
    def ok(self) -> bool:
        return self.mismatches == 0

    def first_bad_json(self) -> list[BadElementJson]:
        """The wrong elements as a case row keeps them (`first_bad`)."""
        return [b.to_json() for b in self.first_bad]


def compare(
    out: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float, max_report: int = 5
) -> Comparison:
    """Elementwise check of `out` against `ref`."""
    o = out.detach().to("cpu", torch.float64)
    r = ref.detach().to("cpu", torch.float64)
    o_nan, r_nan = torch.isnan(o), torch.isnan(r)
    o_inf, r_inf = torch.isinf(o), torch.isinf(r)
    diff = (o - r).abs()
    finite = ~(o_nan | r_nan | o_inf | r_inf)
    ok = torch.zeros_like(o, dtype=torch.bool)
    ok[finite] = diff[finite] <= atol + rtol * r[finite].abs()
    ok |= o_nan & r_nan
    ok |= o_inf & r_inf & (torch.sign(o) == torch.sign(r))
    bad = ~ok
    n_bad = int(bad.sum())
    fin_diff = diff[finite]
    if out.dtype.is_floating_point:
        # An error smaller than the output dtype can hold is the reference
        # rounding to it (fp16 holds nothing below 6e-8), not the kernel's:
        # it read as "max abs err 3.07e-202" for an fp16 case. Shown as 0.
        tiny = torch.finfo(out.dtype).smallest_normal * torch.finfo(out.dtype).eps
        fin_diff = torch.where(fin_diff < tiny / 2, 0.0, fin_diff)
    max_abs = float(fin_diff.max()) if fin_diff.numel() else 0.0
    rel = fin_diff / r[finite].abs().clamp_min(atol if atol > 0 else 1e-30)
    max_rel = float(rel.max()) if rel.numel() else 0.0
    # A NaN or an infinity where the reference has none is an error of that
    # size: shown as NaN or inf, never as the 0 of the elements left over.
    if bool((bad & (o_nan | r_nan)).any()):
        max_abs = max_rel = float("nan")
    elif bool((bad & (o_inf | r_inf)).any()):
        max_abs = max_rel = float("inf")
    first: tuple[BadElement, ...] = ()
    if n_bad:
        idx = bad.nonzero()[:max_report].tolist()
        first = tuple(BadElement(tuple(i), float(o[tuple(i)]), float(r[tuple(i)])) for i in idx)
    return Comparison(
        max_abs=max_abs,
        max_rel=max_rel,
        mismatches=n_bad,
        numel=o.numel(),
        nan=int((o_nan & ~r_nan).sum()),
        first_bad=first,
    )


@overload
def worst(a: float | None, b: float) -> float: ...
@overload
def worst(a: float | None, b: float | None) -> float | None: ...
def worst(a: float | None, b: float | None) -> float | None:
    """The larger of two errors, NaN above everything (max() drops a NaN
    that comes first)."""
    if a is None or b is None:
        return b if a is None else a
    if a != a or b != b:
        return float("nan")
    return max(a, b)


def describe_mismatch(
    report: Comparison, inputs: Sequence[object] = (), nan_at: Sequence[str] = ()
) -> str:
    """A wrong output in words. `inputs`: the case's arguments (a NaN where
    the answer is a number, with -inf among them, is named as the online
    softmax's exp(-inf - (-inf))); `nan_at`: the kernel lines where the
    interpreter made a NaN from numbers (the sandbox's word, advice only)."""
    parts = [f"{report.mismatches} of {report.numel} elements wrong"]
    if report.nan:
        parts.append(nan_words(report.nan, _has_neg_inf(inputs), nan_at))
    parts.append(
        f"max abs err {value_text(report.max_abs)}, max rel err {value_text(report.max_rel)}"
    )
    for b in report.first_bad[:3]:
        parts.append(
            f"at {b.index}: got {value_text(b.got, '.6g')}, "
            f"expected {value_text(b.expected, '.6g')}"
        )
    return "; ".join(parts)


def nan_words(count: int, neg_inf: bool, nan_at: Sequence[str] = ()) -> str:
    """What a NaN where the answer is a number most likely is."""
    where = f", first made at {' and '.join(nan_at[:2])}" if nan_at else ""
    if neg_inf:
        return (
            f"{count} NaN where the answer is a number: your inputs hold -inf (masked "
            "positions), and exp(-inf - (-inf)) is NaN: a running max that is still -inf "
            f"(a row or tile all -inf so far) subtracted from -inf{where}"
        )
    return (
        f"{count} NaN where the answer is a number (an element never written, 0/0, "
        f"inf - inf, or an overflow){where}"
    )


def _has_neg_inf(inputs: Sequence[object]) -> bool:
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            if bool(torch.isneginf(t).any()):
                return True
    return False


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaN payloads included), to prove inputs untouched."""
    if a.shape != b.shape or a.dtype != b.dtype or a.stride() != b.stride():
        return False
    if a.is_floating_point():
        view = {8: torch.int64, 4: torch.int32, 2: torch.int16}[a.element_size()]
        return torch.equal(a.view(view), b.view(view))
    return torch.equal(a, b)
