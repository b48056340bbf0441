"""Grader for lesson 05: fused RMSNorm + RoPE, forward and backward, in Triton.

Contract: `rmsnorm_rope(x, weight, cos, sin, eps=1e-6)` for x of shape
(B, S, H, D), fp16/bf16/fp32, D a power of two from 16 to 256, unit stride
along D and any strides on B, S, H (q or k sliced out of a fused QKV
projection); weight (D,) in x's dtype or fp32; cos and sin (S, D//2) fp32.
Returns a new tensor y = RoPE(RMSNorm(x) * weight) in x's dtype (rotate-
half / NeoX convention), from a Triton kernel, and is differentiable: the
gradients for x and weight come from a Triton backward kernel through a
torch.autograd.Function. cos/sin get no gradient.

The forward goes through the generic kernel grader (kernel.py); the backward
checks are here. In the sandbox both run under an extra guard, `EagerGuard`
(gpulab.sandbox.guards), that allows only the eager aten ops a legitimate
wrapper needs: anything else on the graded path means the maths ran outside
the Triton kernels.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypedDict

import torch
import torch.nn.functional as F

from gpulab.judge import capability
from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch, dtype_name, worst
from gpulab.judge.kernel import INTERPRETER_NOTE, Refs, check_cases, remote_call, replay_verdict
from gpulab.judge.kernel_guards import guards_for
from gpulab.judge.kernel_spec import Case, Expect, KernelSpec
from gpulab.judge.replay import Result
from gpulab.judge.replay_again import OTHER_SCALES, draw_scale, scale_case, scale_tensor
from gpulab.measure import compile_specs as cs
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.wire.result import CaseRow

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Dtypes the Triton interpreter does not compute faithfully here. This kernel
# uses no tl.dot; fp16/bf16 are only loaded, upcast to fp32 and stored, which
# the interpreter does exactly as the GPU does, so nothing is skipped.
INTERPRETER_SKIPS: dict[str, str] = {}

# (atol, rtol) against float64. The outputs are normalised (|y| is about
# |weight|), so an fp32 atol of 1e-5 is 1e-5 of the output's scale; fp16/bf16
# are bounded by the final rounding (2**-11, 2**-8 relative).
TOLERANCE = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-5, 2e-3),
    torch.bfloat16: (1e-4, 1.6e-2),
}


def eager_fail(ctx: GradeContext, ops: list[str], where: str) -> None:
    names = ", ".join(sorted(set(ops))[:6])
    ctx.fail(
        f"cheat: {where} computed eagerly with {names} instead of in Triton",
        "Only allocations, views, copies and the final (P, D) -> (D,) sum of dweight "
        "partials may run outside your kernels; the maths belongs in them.",
    )


# --- inputs and the float64 reference -----------------------------------------
def rope_tables(S: int, D: int, start: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (S, D//2) fp32 for positions start..start+S-1, base 10000."""
    inv = 10000.0 ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = torch.arange(start, start + S, dtype=torch.float64)[:, None] * inv[None, :]
    return (ang.cos().float().to(device), ang.sin().float().to(device))


def make_inputs(
    B: int,
    S: int,
    H: int,
    D: int,
    dtype: torch.dtype,
    seed: int,
    device: str,
    *,
    scale: float = 1.0,
    layout: str = "contiguous",
    w_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, ...]:
    # Drawn where the case runs: 268 M normals drawn on the CPU took seconds
    # of every GPU check.
    g = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, device=device)

    if layout == "qkv":  # k from a fused (B, S, 3H, D) projection: stride_h = D, stride_s = 3HD
        x = (randn(B, S, 3 * H, D) * scale).to(dtype)[:, :, H : 2 * H]
    elif layout == "bhsd":  # a (B, H, S, D) tensor seen as (B, S, H, D)
        x = (randn(B, H, S, D) * scale).to(dtype).transpose(1, 2)
    else:
        x = (randn(B, S, H, D) * scale).to(dtype)
    w = (1.0 + 0.5 * randn(D)).to(w_dtype or dtype)
    start = int(torch.randint(0, 4096, (1,), generator=g, device=device))
    cos, sin = rope_tables(S, D, start, device)
    dy = randn(B, S, H, D).to(dtype)
    return x, w, cos, sin, dy


def unfused(
    x: torch.Tensor,
    weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    eps: float = 1e-6,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The eager chain: RMSNorm in `dtype` (fp32 default), then rotate-half RoPE."""
    dtype = dtype or torch.float32
    xf = x.to(dtype)
    n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.to(dtype)
    n1, n2 = n.chunk(2, dim=-1)
    c, s = cos.to(dtype)[:, None, :], sin.to(dtype)[:, None, :]
    return torch.cat((n1 * c - n2 * s, n2 * c + n1 * s), dim=-1).to(x.dtype)


def reference(case: Case) -> torch.Tensor:
    x, w, cos, sin = case.args
    return unfused(x.double(), w, cos, sin, case.kwargs.get("eps", 1e-6), torch.float64)


def reference_grads(case: Case, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x, w, cos, sin = case.args
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    y = unfused(xd, wd, cos, sin, case.kwargs.get("eps", 1e-6), torch.float64)
    gx, gw = torch.autograd.grad(y, (xd, wd), dy.double())
    return gx, gw


def expect(case: Case) -> Expect:
    x = case.args[0]
    return Expect(x.shape, x, "x")


# --- cases ----------------------------------------------------------------------


class Extras(TypedDict, total=False):
    """A case's settings beyond its sizes, dtype and seed."""

    label: str  # added to the case's name
    layout: str  # x a view: "qkv" (a slice of a wider tensor), "bhsd" (transposed)
    scale: float  # of x's values
    eps: float
    w_dtype: str  # the weight's, where it differs from x's
    dy: str  # "strided": the backward's dy a non-contiguous view
    grad_api: str  # "backward": y.backward(dy) and .grad, not autograd.grad


# (B, S, H, D, dtype, public seed, extras)
Spec = tuple[int, int, int, int, str, int, Extras]
# A case, the backward's dy, and the extras the case's maker left.
Drawn = tuple[Case, torch.Tensor, Extras]
FORWARD: list[Spec] = [
    (1, 1, 1, 16, "fp32", 1, {"label": "S=1"}),
    (2, 3, 5, 32, "fp32", 2, {}),  # B*S*H = 30
    (1, 4, 3, 64, "fp16", 3, {}),
    (1, 3, 2, 128, "bf16", 4, {}),
    (1, 2, 3, 256, "fp32", 5, {}),
    (2, 2, 7, 16, "bf16", 6, {}),
    (1, 3, 4, 64, "fp16", 7, {"layout": "qkv"}),
    (2, 3, 3, 32, "fp32", 8, {"layout": "bhsd"}),
    (1, 2, 3, 128, "fp16", 9, {"scale": 300.0, "label": "large magnitudes"}),
    (1, 2, 3, 64, "bf16", 10, {"scale": 1e4, "label": "large magnitudes"}),
    (1, 3, 3, 64, "fp32", 11, {"scale": 1e-3, "label": "small: eps matters"}),
    (1, 2, 5, 32, "fp32", 12, {"eps": 0.1, "label": "eps=0.1"}),
    (1, 2, 3, 128, "bf16", 13, {"w_dtype": "fp32", "label": "fp32 weight"}),
    (2, 3, 5, 32, "fp32", 14, {"label": "second draw"}),  # fresh data, same shape
]
FORWARD_GPU: list[Spec] = [
    (2, 1000, 7, 128, "bf16", 20, {}),
    (1, 777, 32, 64, "fp16", 21, {"layout": "qkv"}),
    (3, 129, 5, 256, "fp32", 22, {}),
    (4, 333, 9, 16, "bf16", 23, {"layout": "bhsd"}),
]
# The backward: (..., extras); "grad_api": "backward" uses y.backward(dy) and
# reads .grad; "dy": "strided" hands the backward a non-contiguous dy.
BACKWARD: list[Spec] = [
    (2, 3, 5, 16, "fp32", 31, {}),
    (1, 3, 2, 128, "bf16", 32, {}),
    (1, 2, 3, 256, "fp16", 33, {}),
    (2, 2, 3, 64, "fp32", 34, {"layout": "bhsd", "dy": "strided"}),
    (1, 2, 3, 32, "bf16", 35, {"w_dtype": "fp32", "label": "fp32 weight"}),
    (3, 1, 5, 64, "fp32", 36, {"label": "S=1"}),
    (2, 4, 6, 32, "fp32", 37, {"grad_api": "backward", "label": "y.backward(dy)"}),
    (1, 3, 3, 64, "fp32", 38, {"scale": 1e-3, "eps": 0.01, "label": "small, eps=0.01"}),
]
BACKWARD_GPU: list[Spec] = [
    (2, 500, 7, 128, "bf16", 40, {"layout": "qkv"}),
    (1, 1024, 32, 64, "fp16", 41, {}),
]


def make_case(ctx: CaseContext, spec: Spec) -> Drawn:
    B, S, H, D, dt, seed, kw = spec
    kw = kw.copy()
    label = kw.pop("label", "")
    w_dtype = DTYPES[kw.pop("w_dtype")] if "w_dtype" in kw else None
    eps = kw.pop("eps", None)
    x, w, cos, sin, dy = make_inputs(
        B,
        S,
        H,
        D,
        DTYPES[dt],
        ctx.seed(seed),
        ctx.device,
        scale=kw.pop("scale", 1.0),
        w_dtype=w_dtype,
        layout=kw.get("layout", "contiguous"),
    )
    if kw.get("dy") == "strided":  # every other head slot of a wider buffer
        wide = torch.zeros(B, S, 2 * H, D, dtype=dy.dtype, device=dy.device)
        wide[:, :, ::2] = dy
        dy = wide[:, :, ::2]
    shape = f"{B}×{S}×{H}×{D}" + (f" ({kw['layout']} view)" if "layout" in kw else "")
    name = f"{shape} {dt}" + (f" {label}" if label else "")
    case = Case(
        name=name,
        args=(x, w, cos, sin),
        dtype=x.dtype,
        shape=shape,
        kwargs={"eps": eps} if eps is not None else {},
        sizes={"B": B, "S": S, "H": H, "D": D},
    )
    return case, dy, kw


def _cases(ctx: GradeContext, specs: list[Spec]) -> list[Drawn]:
    device_skips = capability.skip_for_device(ctx)
    return [
        make_case(ctx, s)
        for s in specs
        if not (ctx.interpreter and s[4] in INTERPRETER_SKIPS) and s[4] not in device_skips
    ]


# --- the graded calls -------------------------------------------------------------
# The letter, from the forward's fraction of the datasheet's bandwidth (one
# fixed roof: gpulab.gpu.ceilings). The bands were 85/70/50% of the copy
# the probe measures, which is 88.5% of the datasheet on the H200: 75/62/44%
# of the datasheet, so a letter means what it meant. Measured on the H200
# (lesson 05, "Deep dive: sixteen heads a program, or thirty-two"): the
# reference (32 heads a program) 82% of the datasheet, the 16-head kernel
# the lesson discusses 76%: both an A.
GRADES = ((0.75, "A"), (0.62, "B"), (0.44, "C"), (0.0, "D"))

SPEC = KernelSpec(
    reference=reference,
    grades=GRADES,
    banned=(F.rms_norm, torch.rms_norm, torch.nn.RMSNorm.forward),
    banned_aten=("rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward"),
    banned_label="torch's RMSNorm (F.rms_norm, torch.rms_norm, nn.RMSNorm)",
    tolerance=lambda dt: TOLERANCE[dt],
    expect=expect,
    baseline=lambda case: partial(unfused, *case.args, **case.kwargs),
    baseline_name="eager chain",
)


def _scaled_tol(ref: torch.Tensor, dtype: torch.dtype) -> tuple[float, float]:
    # Gradients are not normalised: scale the absolute part by the largest one.
    atol, rtol = TOLERANCE[dtype]
    scale = float(ref.abs().max()) if ref.numel() else 1.0
    return atol * max(scale, 1e-30), rtol


def check_backward(ctx: GradeContext, fn: Any, cases: list[Drawn], total: int) -> None:
    # On the CPU each passing case is replayed apart from the learner's code,
    # forward and backward (gpulab.judge.replay): the guards below are the
    # sandbox's report on itself, and the file can switch them off.
    replayer = ctx.replayer  # its sandbox starts with the first passing case
    for case, dy, kw in cases:
        name = f"backward {case.name}"
        ctx.stage(StageKind.CORRECTNESS, f"checking {name}")
        x, w = case.args[0], case.args[1]
        guards = guards_for(SPEC, eager_width=x.shape[-1])
        if replayer is not None:
            guards = dataclasses.replace(guards, replay=True)
        assert SPEC.expect is not None
        expect_y = SPEC.expect(case)
        refs: Refs = {}
        reply, y, grads = remote_call(
            ctx,
            fn.name,
            case.args,
            case.kwargs,
            expect=expect_y,
            guards=guards,
            contiguous=False,
            grad_args=(0, 1),
            grad_output=dy,
            grad_api=kw.get("grad_api", "grad"),
            extra_tensors=[dy],
            slots=[Expect(x.shape, x, "x"), Expect(w.shape, w, "weight")],
            refs_out=refs,
        )
        report = reply.report
        fwd_ops = [*report.banned, *report.eager]
        if fwd_ops:
            eager_fail(ctx, fwd_ops, "your forward")
        back = reply.backward
        if back is None or back.no_grad_fn:
            ctx.fail(
                f"{name}: the output carries no gradient",
                "Wrap your kernels in a torch.autograd.Function (forward launches the "
                "forward kernel, backward the backward kernel) and return "
                "YourFunction.apply(x, weight, cos, sin, eps).",
            )
        brep = back.report
        ops = [*brep.banned, *brep.eager]
        if ops:
            eager_fail(ctx, ops, "your backward")
        if not brep.launches:
            ctx.fail(
                f"{name}: the backward launched no Triton kernel",
                "Compute dx and dweight in a Triton kernel called from your "
                "autograd.Function's backward.",
            )
        if brep.side_stream:
            ctx.fail(f"{name}: a kernel was launched on a side stream")
        missing, copied = back.missing, list(back.copied)
        for i, label in enumerate(("x", "weight")):
            if i >= len(missing) or missing[i] is not False:
                ctx.fail(
                    f"{name}: no gradient for {label}",
                    "backward must return (dx, dweight, None, None, None).",
                )
        # Reported only where autograd.grad gave dx (y.backward leaves no provenance).
        if kw.get("grad_api") != "backward" and brep.wrote_out is False:
            ctx.fail(
                f"{name}: dx was not written by your Triton kernel",
                "Return the buffer your backward kernel wrote, in x's dtype and shape "
                "(autograd converts anything else into a new tensor).",
            )
        row = _backward_record(case, dy, name, y, grads, copied)
        ctx.add_case(row, total)
        if replayer is not None and row.passed:
            replay_verdict(ctx, replayer.collect())  # the case before this one
            results = _results(case, dy)
            why = replayer.submit(
                case,
                back.report.replay,
                refs,
                results,
                _again(ctx, case, dy, name, results),
                sum_size=x.shape[-1],
                count=False,  # forward and backward: the cost model is the forward's
            )
            replay_verdict(ctx, (name, why) if why else None)
    if replayer is not None and replayer.pending is not None:
        ctx.stage(
            StageKind.REPLAY, "your kernels again, apart from your code: the last backward case"
        )
        replay_verdict(ctx, replayer.collect())


def _results(case: Case, dy: torch.Tensor) -> list[Result]:
    """y, dx and dweight as the replay must give them."""
    x, w = case.args[0], case.args[1]
    gx, gw = reference_grads(case, dy)
    return [
        Result(Expect(x.shape, x, "x"), reference(case), TOLERANCE[case.dtype], "y"),
        Result(Expect(x.shape, x, "x"), gx, _scaled_tol(gx, x.dtype), "dx"),
        Result(Expect(w.shape, w, "weight"), gw, _scaled_tol(gw, w.dtype), "dweight"),
    ]


def _again(
    ctx: GradeContext, case: Case, dy: torch.Tensor, name: str, first: list[Result]
) -> tuple[float, list[Result]] | None:
    """The replay's second run, on every input and dy times c
    (gpulab.judge.replay_again): c from the judge's secret seed, or another
    where that one leaves every result (`first`: x's) as it was (None: none
    changes them)."""
    drawn = draw_scale(ctx.secret_seed, name)
    for c in (drawn, *(s for s in OTHER_SCALES if s != drawn)):
        others = _results(scale_case(case, c), scale_tensor(dy, c))
        if any(
            compare(o.reference, f.reference, *f.tolerance).mismatches
            for o, f in zip(others, first, strict=True)
        ):
            return c, others
    return None


def _backward_record(
    case: Case,
    dy: torch.Tensor,
    name: str,
    y: torch.Tensor | None,
    grads: list[torch.Tensor],
    copied: list[bool],
) -> CaseRow:
    """The case: y and both gradients against the reference's."""
    x, w = case.args[0], case.args[1]
    gx, gw = reference_grads(case, dy)
    record: CaseFields = {
        "name": name,
        "shape": case.shape,
        "dtype": dtype_name(case.dtype),
        "passed": True,
    }
    details = []
    # y again: the forward that autograd records must be the graded one.
    if y is None:
        record["passed"] = False
        details.append("y (computed with requires_grad=True) has the wrong shape or dtype")
    else:
        rep = compare(y, reference(case), *TOLERANCE[case.dtype])
        if rep.mismatches:
            record["passed"] = False
            details.append(f"y (computed with requires_grad=True): {describe_mismatch(rep)}")
    for i, (label, got, ref, dt) in enumerate(
        (("dx", grads[0], gx, x.dtype), ("dweight", grads[1], gw, w.dtype))
    ):
        if i >= len(copied) or copied[i] is not True:
            record["passed"] = False
            details.append(
                f"{label} does not have shape {tuple(ref.shape)} and dtype {dtype_name(dt)}"
            )
            continue
        rep = compare(got, ref, *_scaled_tol(ref, dt))
        if label == "dx":
            record["dx_max_abs"] = rep.max_abs
        else:
            record["dweight_max_abs"] = rep.max_abs
        record["max_abs"] = worst(record.get("max_abs"), rep.max_abs)
        record["max_rel"] = worst(record.get("max_rel"), rep.max_rel)
        record["mismatches"] = record.get("mismatches", 0) + rep.mismatches
        if rep.mismatches:
            record["passed"] = False
            details.append(f"{label}: {describe_mismatch(rep)}")
    if details:
        record["detail"] = "; ".join(details)
    return case_row(**record)


def kernel_spec(ctx: CaseContext) -> KernelSpec:
    """The spec where `ctx` runs (the same everywhere)."""
    return SPEC


def grade(ctx: GradeContext) -> None:
    fn = ctx.function("rmsnorm_rope")
    if ctx.interpreter:
        ctx.notes.append(INTERPRETER_NOTE)
        ctx.skipped.extend(f"{dt}: {why}" for dt, why in INTERPRETER_SKIPS.items())
    fwd = _cases(ctx, FORWARD + ([] if ctx.interpreter else FORWARD_GPU))
    bwd = _cases(ctx, BACKWARD + ([] if ctx.interpreter else BACKWARD_GPU))
    fwd_cases = [c for c, _, _ in fwd]
    check_cases(
        ctx,
        SPEC,
        fn,
        fwd_cases,
        guards=lambda case: guards_for(SPEC, eager_width=case.args[0].shape[-1]),
    )
    if any(not c.passed for c in ctx.cases):
        ctx.notes.append("The backward is checked once every forward case passes.")
        return
    check_backward(ctx, fn, bwd, len(fwd) + len(bwd))
    if any(not c.passed for c in ctx.cases):
        return
    if ctx.want_timing:
        from gpulab.judge.rope_timing import time_compile_and_backward
        from gpulab.judge.speed import time_cases

        ctx.correct()
        timed = timing_cases(ctx)
        time_cases(ctx, SPEC, fn, [c for c, _, _ in timed])
        time_compile_and_backward(
            ctx,
            fn,
            timed,
            spec=SPEC,
            chain=unfused,
            reference=reference_grads,
            tolerance=_scaled_tol,
        )


# --- timing on a GPU ----------------------------------------------------------------
# The forward against the eager chain comes from speed.time_cases;
# gpulab.judge.rope_timing adds torch.compile of the same chain (forward)
# and the backward beside torch.compile's backward, all in the same run.
TIMING_SHAPES = [(1, 16384, 32, 128), (4, 16384, 32, 128)]


def timing_cases(ctx: CaseContext) -> list[Drawn]:
    dt = capability.timed_dtype(ctx, "bf16")
    return [
        make_case(ctx, (B, S, H, D, dt, 100 + i, {}))
        for i, (B, S, H, D) in enumerate(TIMING_SHAPES)
    ]


def bench_cases(ctx: CaseContext) -> list[tuple[Case, dict[str, Callable[..., torch.Tensor]]]]:
    """For `gpulab bench`: the forward timing cases beside both baselines."""
    compiled = torch.compile(unfused, dynamic=False)
    out = []
    for case, _, _ in timing_cases(ctx):
        compiled(*case.args)  # compile now, not inside anyone's timing
        out.append(
            (
                case,
                {
                    "eager chain": lambda a=case.args: unfused(*a),
                    "torch.compile": lambda a=case.args: compiled(*a),
                },
            )
        )
    return out


# --- `gpulab dev compile` (the manifest's tools: "compile") ---------------------
# The reference's kernels as it launches them, and the starter's with the same
# signature (gpulab.measure.compile_specs).
_ROPE = {"D": 128, "HALF": 64, "BLOCK_H": 16}

COMPILE_SPECS = (
    cs.Spec(
        "_rmsnorm_rope_fwd",
        "fp16 D=128 BLOCK_H=16",
        cs.simple("fp16", _ROPE, 4, floats=("eps",), fp32_ptrs=("w_ptr",)),
        starter="rmsnorm_rope_fwd_kernel",
    ),
    cs.Spec(
        "_rmsnorm_rope_bwd",
        "fp16 D=128 BLOCK_H=16",
        cs.simple("fp16", _ROPE, 4, floats=("eps",), fp32_ptrs=("w_ptr", "dw_part_ptr")),
        starter="rmsnorm_rope_bwd_kernel",
    ),
    cs.Spec(
        "_sum_rows",
        "fp32 D=128 BLOCK_P=32",
        cs.simple("fp32", {"D": 128, "BLOCK_P": 32}, 4),
    ),
)


# --- `gpulab counters --ncu` (the manifest's tools: "counters") ------------------
# The recordings of gpulab.gpu.counters taken of this exercise's reference,
# each built on the inputs it was recorded on (gpulab.targets.counter_cases
# hands in the reference module and counts one call of what comes back).


def _rope_fwd(reference: Any) -> Callable[[], object]:
    S, H, D = 16384, 32, 128
    x = torch.randn(1, S, H, D, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(D, device="cuda", dtype=torch.bfloat16)
    ang = torch.rand(S, D // 2, device="cuda")
    cos, sin = ang.cos(), ang.sin()
    fn = reference.rmsnorm_rope
    return lambda: fn(x, w, cos, sin)


COUNTER_CASES = {"rope_fwd": _rope_fwd}
