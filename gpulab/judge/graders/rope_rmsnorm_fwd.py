"""Grader for lesson 05, step 3: the fused forward.

Contract: `rmsnorm_rope(x, weight, cos, sin, eps=1e-6)` as in the lesson's
exercise (gpulab.judge.graders.rope_rmsnorm), forward only: no gradient is asked
for. The cases, the float64 reference, the tolerances, the banned ops and
the eager-op guard are the exercise's forward checks, unchanged; the
exercise adds the backward and the timing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulab.judge.graders.rope import guarded
from gpulab.judge.graders.rope_rmsnorm import FORWARD, FORWARD_GPU, SPEC, _cases
from gpulab.judge.kernel_spec import Case
from gpulab.judge.standard import grade_kernel
from gpulab.measure import compile_specs as cs

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext


def grade(ctx: GradeContext) -> None:
    def cases() -> list[Case]:
        specs = FORWARD + ([] if ctx.interpreter else FORWARD_GPU)
        return [case for case, _, _ in _cases(ctx, specs)]

    grade_kernel(ctx, SPEC, "rmsnorm_rope", cases, None, check=guarded)


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
COMPILE_SPECS = (
    cs.Spec(
        "rmsnorm_rope_fwd_kernel",
        "bf16 D=128 BLOCK_H=16",
        cs.simple(
            "bf16",
            {"D": 128, "HALF": 64, "BLOCK_H": 16},
            4,
            floats=("eps",),
            fp32_ptrs=("cos_ptr", "sin_ptr"),
        ),
        starter="rmsnorm_rope_fwd_kernel",
    ),
)
