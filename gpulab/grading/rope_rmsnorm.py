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
checks are here. Both run under an extra guard, `EagerGuard`, that allows only
the eager aten ops a legitimate wrapper needs (see ALLOWED_ATEN): anything
else on the graded path means the maths ran outside the Triton kernels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from gpulab.grading import learner
from gpulab.grading.compare import bit_equal, compare, describe_mismatch, dtype_name
from gpulab.grading.guards import LaunchRecorder, _poison, op_guard
from gpulab.grading.kernel import Case, KernelSpec, check_cases, output_problem, time_cases

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Dtypes the Triton interpreter does not compute faithfully here. This kernel
# uses no tl.dot; fp16/bf16 are only loaded, upcast to fp32 and stored, which
# the interpreter does exactly as the GPU does, so nothing is skipped.
INTERPRETER_SKIPS: dict[str, str] = {}

# (atol, rtol) against float64. The outputs are normalised (|y| is about
# |weight|), so an fp32 atol of 1e-5 is 1e-5 of the output's scale; fp16/bf16
# are bounded by the final rounding (2**-11, 2**-8 relative).
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-5, 2e-3),
             torch.bfloat16: (1e-4, 1.6e-2)}

# --- the eager ops a legitimate wrapper needs ---------------------------------
# Allocation (outputs, dweight partials; zeros/zero_/fill_ for an atomics
# buffer and for the grader's own NaN poisoning), views and strides
# (reshape, slicing a QKV tensor), copies and dtype casts (a .contiguous()
# fallback, weight.float()), and `detach` (autograd's AccumulateGrad).
ALLOWED_ATEN = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided",
    "zeros", "zeros_like", "new_zeros", "zero_", "fill_", "full", "full_like",
    "view", "_unsafe_view", "reshape", "as_strided", "expand", "t", "transpose", "permute",
    "unsqueeze", "squeeze", "slice", "select", "split", "split_with_sizes", "unbind",
    "narrow", "alias", "detach", "clone", "copy_", "_to_copy", "contiguous", "lift_fresh",
})
# And one reduction: `sum` whose result has exactly D elements, i.e. adding up
# per-program dweight partials of shape (P, D). A per-row reduction (the
# sum of squares of RMSNorm) has B*S*H elements, never D in these cases.


# op_guard poisons torch.empty* through a TorchFunctionMode, and function modes
# are not active inside an autograd.Function's backward; dispatch modes are.
# So EagerGuard poisons fresh buffers itself, forward and backward alike.
POISONED = frozenset({"empty", "empty_like", "empty_strided", "new_empty",
                      "new_empty_strided"})


class EagerGuard(TorchDispatchMode):
    """Records aten ops outside ALLOWED_ATEN run by the learner's code, and
    fills every buffer it allocates with NaN.

    Ignored: ops inside the Triton interpreter's launch (it copies arguments
    to and from the host with aten ops) and, on a GPU, ops that touch only
    CPU tensors (Triton's autotuner summarises its timings with torch on the
    CPU). A copy from the GPU to the CPU is recorded instead, since maths
    done there would escape this guard. Pure-Python or numpy maths on the
    CPU cannot be seen by any op guard; on a GPU it needs that copy.
    """

    def __init__(self, device: str, D: int) -> None:
        super().__init__()
        self.device, self.D = device, D
        self.ops: list[str] = []
        self._depth = 0
        self._patched: Any = None

    def __enter__(self) -> EagerGuard:
        try:
            from triton.runtime.interpreter import InterpretedFunction
        except ImportError:  # pragma: no cover
            InterpretedFunction = None
        if InterpretedFunction is not None:
            original, guard = InterpretedFunction.run, self

            def run(self_fn, *args, **kwargs):
                guard._depth += 1
                try:
                    return original(self_fn, *args, **kwargs)
                finally:
                    guard._depth -= 1

            InterpretedFunction.run = run
            self._patched = (InterpretedFunction, original)
        return super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        if self._patched:
            cls, original = self._patched
            cls.run = original
            self._patched = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self._depth == 0:
            name = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
            if name in POISONED:
                _poison(out)
            problem = self._problem(name, args, kwargs, out)
            if problem:
                self.ops.append(problem)
        return out

    def _problem(self, name: str, args, kwargs, out) -> str | None:
        ins = [a for a in list(args) + list(kwargs.values()) if isinstance(a, torch.Tensor)]
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                if isinstance(o, torch.Tensor)]
        if self.device == "cuda":
            if not any(t.is_cuda for t in ins + outs):
                return None
            if name in ("_to_copy", "copy_", "_local_scalar_dense") and \
                    any(t.is_cuda for t in ins) and any(not t.is_cuda for t in outs):
                return f"aten.{name} (a copy to the CPU)"
            if name == "_local_scalar_dense":
                return f"aten.{name} (a copy to the CPU)"
        if name in ALLOWED_ATEN:
            return None
        if name == "sum" and outs and outs[0].numel() == self.D:
            return None
        return f"aten.{name}"


def eager_fail(ctx: Any, ops: list[str], where: str) -> None:
    names = ", ".join(sorted(set(ops))[:6])
    ctx.fail(f"cheat: {where} computed eagerly with {names} instead of in Triton",
             "Only allocations, views, copies and the final (P, D) -> (D,) sum of dweight "
             "partials may run outside your kernels; the maths belongs in them.")


# --- inputs and the float64 reference -----------------------------------------
def rope_tables(S: int, D: int, start: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin (S, D//2) fp32 for positions start..start+S-1, base 10000."""
    inv = 10000.0 ** (-torch.arange(0, D // 2, dtype=torch.float64) * 2 / D)
    ang = torch.arange(start, start + S, dtype=torch.float64)[:, None] * inv[None, :]
    return (ang.cos().float().to(device), ang.sin().float().to(device))


def make_inputs(B: int, S: int, H: int, D: int, dtype: torch.dtype, seed: int, device: str, *,
                scale: float = 1.0, layout: str = "contiguous", w_dtype: torch.dtype | None = None
                ) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    if layout == "qkv":         # k from a fused (B, S, 3H, D) projection: stride_h = D, stride_s = 3HD
        base = torch.randn(B, S, 3 * H, D, generator=g) * scale
        x = base.to(dtype).to(device)[:, :, H:2 * H]
    elif layout == "bhsd":      # a (B, H, S, D) tensor seen as (B, S, H, D)
        x = (torch.randn(B, H, S, D, generator=g) * scale).to(dtype).to(device).transpose(1, 2)
    else:
        x = (torch.randn(B, S, H, D, generator=g) * scale).to(dtype).to(device)
    w = (1.0 + 0.5 * torch.randn(D, generator=g)).to(w_dtype or dtype).to(device)
    start = int(torch.randint(0, 4096, (1,), generator=g))
    cos, sin = rope_tables(S, D, start, device)
    dy = torch.randn(B, S, H, D, generator=g).to(dtype).to(device)
    return x, w, cos, sin, dy


def unfused(x, weight, cos, sin, eps: float = 1e-6, dtype: torch.dtype | None = None):
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


def out_check(case: Case, out) -> str | None:
    x = case.args[0]
    return output_problem(out, x.shape, x, "x")


# --- cases ----------------------------------------------------------------------
# (B, S, H, D, dtype, public seed, extras)
FORWARD = [
    (1, 1, 1, 16, "fp32", 1, {"label": "S=1"}),
    (2, 3, 5, 32, "fp32", 2, {}),                        # B*S*H = 30
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
FORWARD_GPU = [
    (2, 1000, 7, 128, "bf16", 20, {}),
    (1, 777, 32, 64, "fp16", 21, {"layout": "qkv"}),
    (3, 129, 5, 256, "fp32", 22, {}),
    (4, 333, 9, 16, "bf16", 23, {"layout": "bhsd"}),
]
# The backward: (..., extras); "grad_api": "backward" uses y.backward(dy) and
# reads .grad; "dy": "strided" hands the backward a non-contiguous dy.
BACKWARD = [
    (2, 3, 5, 16, "fp32", 31, {}),
    (1, 3, 2, 128, "bf16", 32, {}),
    (1, 2, 3, 256, "fp16", 33, {}),
    (2, 2, 3, 64, "fp32", 34, {"layout": "bhsd", "dy": "strided"}),
    (1, 2, 3, 32, "bf16", 35, {"w_dtype": "fp32", "label": "fp32 weight"}),
    (3, 1, 5, 64, "fp32", 36, {"label": "S=1"}),
    (2, 4, 6, 32, "fp32", 37, {"grad_api": "backward", "label": "y.backward(dy)"}),
    (1, 3, 3, 64, "fp32", 38, {"scale": 1e-3, "eps": 0.01, "label": "small, eps=0.01"}),
]
BACKWARD_GPU = [
    (2, 500, 7, 128, "bf16", 40, {"layout": "qkv"}),
    (1, 1024, 32, 64, "fp16", 41, {}),
]


def make_case(ctx: Any, spec: tuple) -> tuple[Case, torch.Tensor, dict]:
    B, S, H, D, dt, seed, kw = spec
    kw = dict(kw)
    label = kw.pop("label", "")
    w_dtype = DTYPES[kw.pop("w_dtype")] if "w_dtype" in kw else None
    eps = kw.pop("eps", None)
    x, w, cos, sin, dy = make_inputs(B, S, H, D, DTYPES[dt], ctx.seed(seed), ctx.device,
                                     scale=kw.pop("scale", 1.0), w_dtype=w_dtype,
                                     layout=kw.get("layout", "contiguous"))
    if kw.get("dy") == "strided":     # every other head slot of a wider buffer
        wide = torch.zeros(B, S, 2 * H, D, dtype=dy.dtype, device=dy.device)
        wide[:, :, ::2] = dy
        dy = wide[:, :, ::2]
    shape = f"{B}×{S}×{H}×{D}" + (f" ({kw['layout']} view)" if "layout" in kw else "")
    name = f"{shape} {dt}" + (f" {label}" if label else "")
    case = Case(name=name, args=(x, w, cos, sin), dtype=x.dtype, shape=shape,
                kwargs={"eps": eps} if eps is not None else {},
                sizes={"B": B, "S": S, "H": H, "D": D})
    return case, dy, kw


def _cases(ctx: Any, specs: list) -> list:
    return [make_case(ctx, s) for s in specs
            if not (ctx.interpreter and s[4] in INTERPRETER_SKIPS)]


# --- the graded calls -------------------------------------------------------------
SPEC = KernelSpec(
    reference=reference,
    banned=(F.rms_norm, torch.rms_norm, torch.nn.RMSNorm.forward),
    banned_aten=("rms_norm", "_fused_rms_norm", "_fused_rms_norm_backward"),
    banned_label="torch's RMSNorm (F.rms_norm, torch.rms_norm, nn.RMSNorm)",
    tolerance=lambda dt: TOLERANCE[dt],
    out_check=out_check,
    baseline=lambda case: (lambda a=case.args, k=case.kwargs: unfused(*a, **k)),
    baseline_name="eager chain",
)


def _guarded_forward(ctx: Any, fn: Any, ops: list[str]) -> Any:
    """The learner's function under EagerGuard, for check_cases (which adds the rest)."""

    def call(x, weight, cos, sin, **kw):
        with EagerGuard(ctx.device, x.shape[-1]) as guard:
            try:
                return fn(x, weight, cos, sin, **kw)
            finally:
                ops.extend(guard.ops)

    return call


def _scaled_tol(ref: torch.Tensor, dtype: torch.dtype) -> tuple[float, float]:
    # Gradients are not normalised: scale the absolute part by the largest one.
    atol, rtol = TOLERANCE[dtype]
    scale = float(ref.abs().max()) if ref.numel() else 1.0
    return atol * max(scale, 1e-30), rtol


def check_backward(ctx: Any, fn: Any, cases: list, total: int) -> None:
    for case, dy, kw in cases:
        name = f"backward {case.name}"
        ctx.stage(f"checking {name}")
        x0, w0, cos, sin = case.args
        x = x0.detach().requires_grad_()
        w = w0.detach().clone().requires_grad_()
        watched = [x0._base if x0._base is not None else x0, w, cos, sin,
                   dy._base if dy._base is not None else dy]
        snaps = [t.detach().clone() for t in watched]
        D = x.shape[-1]
        with LaunchRecorder(), op_guard(SPEC.banned, SPEC.banned_aten) as v, \
                EagerGuard(ctx.device, D) as eg:
            y = learner.call(fn, ctx.file, x, w, cos, sin, **case.kwargs)
        if v.banned or eg.ops:
            eager_fail(ctx, [*v.banned, *eg.ops], "your forward")
        if not isinstance(y, torch.Tensor) or y.grad_fn is None:
            ctx.fail(f"{name}: the output carries no gradient",
                     "Wrap your kernels in a torch.autograd.Function (forward launches the "
                     "forward kernel, backward the backward kernel) and return "
                     "YourFunction.apply(x, weight, cos, sin, eps).")
        with LaunchRecorder() as launches, op_guard(SPEC.banned, SPEC.banned_aten) as v, \
                EagerGuard(ctx.device, D) as eg:
            if kw.get("grad_api") == "backward":
                learner.call(y.backward, ctx.file, dy)
                dx, dw = x.grad, w.grad
            else:
                dx, dw = learner.call(torch.autograd.grad, ctx.file, y, (x, w), dy,
                                      allow_unused=True)
        if v.banned or eg.ops:
            eager_fail(ctx, [*v.banned, *eg.ops], "your backward")
        for t, s in zip(watched, snaps, strict=True):
            if not bit_equal(t.detach(), s):
                ctx.fail(f"{name}: your code wrote into its inputs",
                         "x, weight, cos, sin and dy must be left as they were.")
        if not launches.launches:
            ctx.fail(f"{name}: the backward launched no Triton kernel",
                     "Compute dx and dweight in a Triton kernel called from your "
                     "autograd.Function's backward.")
        if launches.side_streams():
            ctx.fail(f"{name}: a kernel was launched on a side stream")
        for label, g in (("x", dx), ("weight", dw)):
            if g is None:
                ctx.fail(f"{name}: no gradient for {label}",
                         "backward must return (dx, dweight, None, None, None).")
        if kw.get("grad_api") != "backward" and not launches.wrote(dx):
            ctx.fail(f"{name}: dx was not written by your Triton kernel",
                     "Return the buffer your backward kernel wrote, in x's dtype and shape "
                     "(autograd converts anything else into a new tensor).")
        gx, gw = reference_grads(case, dy)
        record: dict[str, Any] = {"name": name, "shape": case.shape,
                                  "dtype": dtype_name(case.dtype), "passed": True}
        details = []
        # y again: the forward that autograd records must be the graded one.
        rep = compare(y, reference(case), *TOLERANCE[case.dtype])
        if rep["mismatches"]:
            record["passed"] = False
            details.append(f"y (computed with requires_grad=True): {describe_mismatch(rep)}")
        for label, got, ref, dt in (("dx", dx, gx, x.dtype), ("dweight", dw, gw, w.dtype)):
            if got.shape != ref.shape:
                record["passed"] = False
                details.append(f"{label} has shape {tuple(got.shape)}, expected "
                               f"{tuple(ref.shape)}")
                continue
            rep = compare(got, ref, *_scaled_tol(ref, dt))
            record[f"{label}_max_abs"] = rep["max_abs"]
            record["max_abs"] = max(record.get("max_abs", 0.0), rep["max_abs"])
            record["max_rel"] = max(record.get("max_rel", 0.0), rep["max_rel"])
            record["mismatches"] = record.get("mismatches", 0) + rep["mismatches"]
            if rep["mismatches"]:
                record["passed"] = False
                details.append(f"{label}: {describe_mismatch(rep)}")
        if details:
            record["detail"] = "; ".join(details)
        ctx.add_case(record, total)


def grade(ctx: Any) -> None:
    fn = ctx.function("rmsnorm_rope")
    if ctx.interpreter:
        ctx.notes.append("Ran in the Triton interpreter on the CPU at reduced sizes: "
                         "correctness is graded, speed is not.")
        ctx.skipped.extend(f"{dt}: {why}" for dt, why in INTERPRETER_SKIPS.items())
    fwd = _cases(ctx, FORWARD + ([] if ctx.interpreter else FORWARD_GPU))
    bwd = _cases(ctx, BACKWARD + ([] if ctx.interpreter else BACKWARD_GPU))
    ops: list[str] = []
    check_cases(ctx, SPEC, _guarded_forward(ctx, fn, ops), [c for c, _, _ in fwd])
    if ops:
        eager_fail(ctx, ops, "your forward")
    if any(not c["passed"] for c in ctx.cases):
        ctx.notes.append("The backward is checked once every forward case passes.")
        return
    check_backward(ctx, fn, bwd, len(fwd) + len(bwd))
    if any(not c["passed"] for c in ctx.cases):
        return
    if ctx.want_timing:
        timed = timing_cases(ctx)
        time_cases(ctx, SPEC, fn, [c for c, _, _ in timed])
        time_compile_and_backward(ctx, fn, timed)


# --- timing on a GPU ----------------------------------------------------------------
# The forward against the eager chain comes from kernel.time_cases; this adds
# torch.compile of the same chain (forward) and the backward beside
# torch.compile's backward, all measured in the same run.
TIMING_SHAPES = [(1, 16384, 32, 128), (4, 16384, 32, 128)]


def timing_cases(ctx: Any) -> list:
    return [make_case(ctx, (B, S, H, D, "bf16", 100 + i, {}))
            for i, (B, S, H, D) in enumerate(TIMING_SHAPES)]


def bench_cases(ctx: Any) -> list:
    """For `gpulab bench`: the forward timing cases beside both baselines."""
    compiled = torch.compile(unfused, dynamic=False)
    out = []
    for case, _, _ in timing_cases(ctx):
        compiled(*case.args)        # compile now, not inside anyone's timing
        out.append((case, {"eager chain": lambda a=case.args: unfused(*a),
                           "torch.compile": lambda a=case.args: compiled(*a)}))
    return out


def backward_bytes(case: Case) -> float:
    """Minimal traffic of the backward: x and dy read, dx written, cos/sin read,
    weight read and dweight written."""
    x, w = case.args[0], case.args[1]
    B, S, H, D = x.shape
    return 3 * B * S * H * D * x.element_size() + 2 * S * (D // 2) * 4 + 2 * D * w.element_size()


def time_compile_and_backward(ctx: Any, fn: Any, timed: list) -> None:
    from gpulab import ceilings
    from gpulab.gpulock import gpu_timing_lock
    from gpulab.grading.timing import L2Flusher, measure

    device_name = torch.cuda.get_device_name(0)
    peak_bw, _ = ceilings.floor_peaks(device_name)
    compiled = torch.compile(unfused, dynamic=False)
    # Compile and autotune everything before taking the GPU's timing lock.
    prepared = []
    for case, dy, _ in timed:
        x, w, cos, sin = case.args
        ctx.stage(f"preparing {case.name}: torch.compile and the backward")
        compiled(x, w, cos, sin)                       # the inference graph
        xg, wg = x.detach().requires_grad_(), w.detach().clone().requires_grad_()
        y = learner.call(fn, ctx.file, xg, wg, cos, sin)
        learner.call(torch.autograd.grad, ctx.file, y, (xg, wg), dy, retain_graph=True)
        yc = compiled(xg, wg, cos, sin)                # the training graph
        torch.autograd.grad(yc, (xg, wg), dy, retain_graph=True)
        prepared.append((case, dy, xg, wg, y, yc))
    flusher = L2Flusher()
    rows, bwd_rows = ctx.timing["cases"], []
    with gpu_timing_lock("checking rope_rmsnorm", gpu=torch.cuda.current_device(),
                         on_wait=ctx.stage):
        for (case, dy, xg, wg, y, yc), row in zip(prepared, list(rows), strict=True):
            x, w, cos, sin = case.args
            ctx.stage(f"timing {case.name}: torch.compile forward, both backwards")
            c = measure(lambda a=case.args: compiled(*a), flusher=flusher, log_clocks=False)
            row["compile_ms"], row["speedup_compile"] = c["ms"], c["ms"] / row["ms"]
            last: dict[str, Any] = {}

            def ours(y=y, xg=xg, wg=wg, dy=dy, last=last) -> None:
                last["g"] = torch.autograd.grad(y, (xg, wg), dy, retain_graph=True)

            try:
                t = measure(ours, flusher=flusher)
            except Exception as exc:  # noqa: BLE001 - the learner's backward failed
                raise learner.LearnerError(
                    f"timing the backward of {case.name} failed: {exc}",
                    learner.format_learner_traceback(exc, ctx.file)) from None
            b = measure(lambda yc=yc, i=(xg, wg), dy=dy: torch.autograd.grad(yc, i, dy,
                                                                   retain_graph=True),
                        flusher=flusher, log_clocks=False)
            bwd_rows.append(_backward_row(ctx, case, t, b, device_name, peak_bw))
            # Work deferred past the timed region shows up as a wrong timed result.
            gx, gw = reference_grads(case, dy)
            for label, got, ref, dt in (("dx", last["g"][0], gx, x.dtype),
                                        ("dweight", last["g"][1], gw, w.dtype)):
                rep = compare(got, ref, *_scaled_tol(ref, dt))
                if rep["mismatches"]:
                    ctx.fail(f"timing {case.name}: the timed backward's {label} is wrong",
                             describe_mismatch(rep))
    rows.extend(bwd_rows)
    fwd_compile = _geomean([r["speedup_compile"] for r in rows if r.get("speedup_compile")])
    bwd_compile = _geomean([r["speedup"] for r in bwd_rows])
    ctx.timing.update(speedup_compile=fwd_compile, backward_speedup_compile=bwd_compile,
                      baselines=["eager chain", "torch.compile"])
    ctx.timing["summary"] += (f", {fwd_compile:.2f}x torch.compile; backward "
                              f"{bwd_compile:.2f}x torch.compile's")
    for r in rows:
        if r.get("compile_ms"):
            ctx.notes.append(f"forward {r['shape']} {r['dtype']}: {r['ms'] * 1e3:.1f} µs, eager "
                             f"chain {r['baseline_ms'] * 1e3:.1f} µs, torch.compile "
                             f"{r['compile_ms'] * 1e3:.1f} µs ({r['speedup_compile']:.2f}x)")
    for r in bwd_rows:
        ctx.notes.append(f"backward {r['shape']}: {r['ms'] * 1e3:.1f} µs "
                         f"({r['throughput']:.0f} GB/s), torch.compile "
                         f"{r['baseline_ms'] * 1e3:.1f} µs ({r['speedup']:.2f}x)")


def _backward_row(ctx: Any, case: Case, t: dict, b: dict, device_name: str,
                  peak_bw: float | None) -> dict[str, Any]:
    from gpulab import ceilings

    nbytes, sec = backward_bytes(case), t["ms"] * 1e-3
    cap, label = ceilings.ceiling("memory", dtype_name(case.dtype), device_name,
                                  ctx.request.get("workspace"))
    row = {"name": f"{case.name} backward", "shape": f"{case.shape} backward",
           "dtype": dtype_name(case.dtype), **t, "bytes": nbytes, "flops": None,
           "kind": "memory", "sizes": dict(case.sizes), "throughput": nbytes / sec / 1e9,
           "unit": "GB/s", "roofline_fraction": (nbytes / sec) / cap if cap else None,
           "ceiling": label, "baseline": "torch.compile backward", "baseline_ms": b["ms"],
           "speedup": b["ms"] / t["ms"], "graded": False}
    if peak_bw and sec < 0.9 * nbytes / peak_bw:
        ctx.timing["implausible"] = (f"{row['name']} took {t['ms'] * 1e3:.1f} µs, below the "
                                     f"{nbytes / peak_bw * 1e6:.1f} µs the datasheet allows")
    return row


def _geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0
