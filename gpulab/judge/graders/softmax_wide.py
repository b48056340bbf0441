"""Grader for lesson 02, step 2: rows longer than a block.

Contract: `softmax(x)` for a contiguous 2-D fp32/fp16 tensor of any width;
returns a new contiguous tensor of the same shape and dtype, computed by a
Triton kernel. Correctness only (a step is not timed); the guards are the
lesson's exercise's (gpulab.judge.graders.softmax).

Rows longer than any block: Triton allows at most 2**20 elements in a block
(TRITON_MAX_TENSOR_NUMEL), so the widest case, 2**20 + 1000 columns, cannot
be one block at all. The run of -inf longer than a block catches an online
pass that rescales by exp(-inf - -inf) = NaN.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from gpulab.judge.graders.softmax import DTYPES, SPEC, Spec, _case
from gpulab.judge.kernel_spec import Case
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext

LONGEST = (1 << 20) + 1000  # past the largest block Triton allows


def _leading_inf(ctx: CaseContext, rows: int, cols: int, dt: str, seed: int, run: int) -> Case:
    """Rows whose first `run` columns are -inf (a masked prefix, as attention
    makes it): an online pass meets whole blocks of -inf first."""
    g = torch.Generator(device="cpu").manual_seed(ctx.seed(seed))
    x = torch.randn(rows, cols, generator=g)
    x[:, :run] = float("-inf")
    x = x.to(DTYPES[dt]).to(ctx.device)
    shape = f"{rows}×{cols}"
    return Case(
        name=f"{shape} {dt} first {run} columns -inf",
        args=(x,),
        dtype=x.dtype,
        sizes={"M": rows, "N": cols},
        shape=shape,
    )


def correctness_cases(ctx: CaseContext) -> list[Case]:
    specs: list[Spec] = [
        # (rows, cols, dtype, public seed, extras)
        (1, 1, "fp32", 1, {}),
        (3, 7, "fp32", 2, {}),
        (4, 1000, "fp16", 3, {}),
        (3, 5000, "fp32", 4, {}),  # several blocks and a partial last one
        (2, 40_000, "fp16", 5, {}),
        (4, 2500, "fp32", 6, {"scale": 1e4, "label": "large magnitudes"}),
        # The contract's other dtype (bf16 comes with the lesson's exercise).
        (2, 2500, "fp16", 11, {"scale": 8e3, "label": "large magnitudes"}),
        (3, 3000, "fp32", 7, {"neg_inf": True, "label": "with -inf"}),
        (3, 5000, "fp32", 8, {"label": "second draw"}),
    ]
    cases = [_case(ctx, r, c, dt, seed, **kw) for r, c, dt, seed, kw in specs]
    cases.append(_leading_inf(ctx, 2, 40_000, "fp32", 9, run=30_000))
    cases.append(
        _case(ctx, 1, LONGEST, "fp32", 10, label="(longer than any Triton block: 2^20 + 1000)")
    )
    if ctx.device == "cuda":
        cases += [
            _case(ctx, 1823, 781, "fp16", 20),
            _case(ctx, 64, 300_000, "fp16", 21, label="(vocabulary-sized rows)"),
            _case(ctx, 4, 3 * LONGEST, "fp32", 22, label="(three million columns)"),
        ]
    return cases


def grade(ctx: GradeContext) -> None:
    grade_kernel(ctx, SPEC, "softmax", lambda: correctness_cases(ctx), None)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = tuple(
    cs.Spec(
        "softmax_wide_kernel",
        f"{dt} BLOCK=4096 w8",
        cs.simple(dt, {"BLOCK": 4096}, 8),
        starter="softmax_wide_kernel",
    )
    for dt in ("fp16", "fp32")
)
