"""Grader for lesson 06: take the graph breaks out of a model step.

Contract: `step(x, lengths, params)` computes one single-head pre-norm
transformer block (x: B×S×D float32, lengths: B int64 valid lengths,
params: a dict of float32 tensors) and must

  1. give the same output as the original step (kept here, pristine, as
     `original_step`) on fresh inputs: several shapes and seeds, with the
     data-dependent rescale both taken and not taken;
  2. be captured by Dynamo as ONE graph: no graph break on any of the inputs
     traced, proven with `fullgraph=True`; the graph must hold the real ops
     (not an opaque `allow_in_graph` or custom op), and the function must not
     be excluded from tracing (`torch.compiler.disable`);
  3. still match the original once compiled (aot_eager on the CPU, where
     Inductor's C++ build takes ~30 s cold; Inductor on a GPU).

On a GPU the result also times the original, your step eagerly, and your step
under torch.compile's default and reduce-overhead (CUDA graph) modes.

Dynamo's settings are its defaults: changes your file makes to
torch._dynamo.config are undone (and named in the notes).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch._dynamo
import torch._dynamo.config as dynamo_config
import torch.nn.functional as F
from torch._dynamo.utils import graph_break_reasons

from gpulab.grading import learner
from gpulab.grading.compare import bit_equal, compare, describe_mismatch

CAP = 4.0
# Your rewrite may reorder a float operation or two: 1e-5 relative is a few
# ulps in fp32, far below what any change of meaning produces.
EAGER_TOL = (1e-5, 1e-5)  # (atol, rtol)
# Compiled code fuses and reorders reductions (and may use FMA): looser.
COMPILED_TOL = (1e-4, 1e-4)
PARAM_NAMES = ("wq", "wk", "wv", "wo", "w1", "w2", "norm1", "norm2")

# (batch, seq, dim, public seed, input RMS, all rows full length, label)
CASES = [
    (2, 8, 16, 1, 1.0, False, "RMS 1: not rescaled"),
    (2, 8, 16, 2, 8.0, False, "RMS 8: rescaled"),
    (3, 5, 24, 3, 1.0, False, "RMS 1: not rescaled"),
    (3, 5, 24, 4, 6.0, False, "RMS 6: rescaled"),
    (1, 2, 8, 5, 1.0, False, "smallest"),
    (4, 16, 32, 6, 10.0, True, "no padding, rescaled"),
    (2, 8, 16, 7, 1.0, False, "second draw"),
]
# Traced by Dynamo: one input on each side of the data-dependent branch.
TRACE_CASES = (0, 3)
# Compiled and compared: one shape, the branch both ways.
COMPILED_CASES = (0, 1)
TIMING_SHAPES = [(2, 64, 128), (8, 256, 256)]


def rms_norm(x: torch.Tensor, g: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def original_step(x: torch.Tensor, lengths: torch.Tensor, p: dict) -> torch.Tensor:
    """The starter's step, minus its print: the meaning the learner must keep."""
    B, S, D = x.shape
    rms = x.pow(2).mean().sqrt()
    if rms > CAP:
        x = x * (CAP / rms)
    h = rms_norm(x, p["norm1"])
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    scores = q @ k.transpose(1, 2)
    temp = scores.std().item()
    scores = scores / max(temp, 1.0)
    mask = torch.zeros(B, S, dtype=torch.bool, device=x.device)
    for b, n in enumerate(lengths.tolist()):
        mask[b, n:] = True
    scores = scores.masked_fill(mask[:, None, :], float("-inf"))
    attn = torch.softmax(scores, dim=-1)
    x = x + (attn @ v) @ p["wo"]
    h = rms_norm(x, p["norm2"]) @ p["w1"]
    k = max(1, h.numel() // 100)
    hi = np.partition(h.detach().cpu().numpy().ravel(), -k)[-k]
    h = F.gelu(h.clamp(max=float(hi)))
    return x + h @ p["w2"]


def make_inputs(batch: int, seq: int, dim: int, seed: int, *, rms: float = 1.0,
                full: bool = False, device: str = "cpu") -> tuple:
    """x scaled to an exact RMS (so the branch side is known), lengths, params."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, seq, dim, generator=g)
    x = x * (rms / x.pow(2).mean().sqrt())
    if full:
        lengths = torch.full((batch,), seq, dtype=torch.int64)
    else:
        lengths = torch.randint(1, seq + 1, (batch,), generator=g)
    p = {}
    for name in ("wq", "wk", "wv", "wo"):
        p[name] = torch.randn(dim, dim, generator=g) / math.sqrt(dim)
    p["w1"] = torch.randn(dim, 4 * dim, generator=g) / math.sqrt(dim)
    p["w2"] = torch.randn(4 * dim, dim, generator=g) / math.sqrt(4 * dim)
    p["norm1"] = 1 + 0.1 * torch.randn(dim, generator=g)
    p["norm2"] = 1 + 0.1 * torch.randn(dim, generator=g)
    return x.to(device), lengths.to(device), {k: v.to(device) for k, v in p.items()}


def _clone(args: tuple) -> tuple:
    x, lengths, p = args
    return x.clone(), lengths.clone(), {k: v.clone() for k, v in p.items()}


def _same_inputs(a: tuple, b: tuple) -> bool:
    return (bit_equal(a[0], b[0]) and bit_equal(a[1], b[1]) and a[2].keys() == b[2].keys()
            and all(bit_equal(a[2][k], b[2][k]) for k in a[2]))


def _out_problem(out: Any, x: torch.Tensor) -> str | None:
    if not isinstance(out, torch.Tensor):
        return f"returned {type(out).__name__}, expected a torch.Tensor"
    if out.shape != x.shape:
        return f"returned shape {tuple(out.shape)}, expected {tuple(x.shape)}"
    if out.dtype != x.dtype:
        return f"returned dtype {out.dtype}, expected {x.dtype}"
    if out.device != x.device:
        return f"returned a tensor on {out.device}, expected {x.device}"
    return None


# --- Dynamo -------------------------------------------------------------------

# What each kind of break means, matched on Dynamo's reason text (which
# differs between torch versions, hence several spellings).
_KINDS = (
    (("`print`", "builtin print"), "I/O cannot go into a graph"),
    (("generic_jump", "data-dependent branching"),
     "a Python branch on a tensor's value, unknown while tracing"),
    (("tensor.item()",), "`.item()` copies a tensor value to Python"),
    (("_local_scalar_dense", "data dependent operator", "tolist"),
     "a tensor value turned into Python numbers (.tolist(), float(t), int(t))"),
    (("numpy",), "a NumPy function Dynamo cannot trace"),
    (("skip", "disable"), "a call Dynamo was told, or chose, not to trace"),
)


def _reason_text(reason: str) -> str:
    """First line of Dynamo's reason, with what that kind of break means.

    Dynamo's own hints mostly suggest config flags (capture_scalar_outputs),
    which this exercise does not allow, so they are left out.
    """
    lines = [ln.strip() for ln in str(reason).splitlines() if ln.strip()]
    text = lines[0] if lines else "graph break"
    low = str(reason).lower()
    kind = next((meaning for keys, meaning in _KINDS if any(k.lower() in low for k in keys)),
                "")
    return f"{text} ({kind})" if kind else text


def _learner_frame(stack: list, file: str) -> Any:
    mine = str(Path(file).resolve())
    frames = [f for f in stack or [] if str(Path(f.filename).resolve()) == mine]
    return frames[-1] if frames else (stack[-1] if stack else None)


def trace(fn: Any, args: tuple, file: str, *, fullgraph: bool = False) -> dict[str, Any]:
    """Run `fn` under Dynamo with a recording backend (no compiler).

    Returns the captured graphs and every graph break with its reason and the
    learner's line. `torch._dynamo.explain` reports graph_count - 1 as the
    break count, which misses a break that comes before the first op (an
    empty graph is never compiled); the global list of break reasons has them
    all, so that is what is read here.
    """
    torch._dynamo.reset()
    graphs: list[torch.fx.GraphModule] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    compiled = torch.compile(fn, backend=backend, fullgraph=fullgraph)
    error = None
    try:
        out = compiled(*_clone(args))
    except torch._dynamo.exc.Unsupported as exc:  # fullgraph=True met a break
        out, error = None, exc
    except Exception as exc:  # noqa: BLE001 - the learner's own error
        torch._dynamo.reset()
        tb = learner.format_learner_traceback(exc, file)
        raise learner.LearnerError(
            f"your step failed under torch.compile: {tb.splitlines()[-1] if tb else exc}",
            tb) from None
    breaks: dict[int, dict[str, Any]] = {}
    for r in list(graph_break_reasons):
        frame = _learner_frame(r.user_stack, file)
        line = frame.lineno if frame else 0
        entry = breaks.setdefault(line, {"line": line, "code": (frame.line or "").strip()
                                          if frame else "", "reasons": []})
        text = _reason_text(r.reason)
        if text not in entry["reasons"]:
            entry["reasons"].append(text)
    if error is not None:
        frame = _learner_frame(getattr(error, "real_stack", None) or [], file)
        text = _reason_text(str(error))
        line = frame.lineno if frame else 0
        if line not in breaks:
            breaks[line] = {"line": line, "code": (frame.line or "").strip() if frame else "",
                            "reasons": [text]}
    ops = [n for gm in graphs for n in gm.graph.nodes
           if n.op in ("call_function", "call_method", "call_module")]
    torch._dynamo.reset()
    return {"graphs": graphs, "breaks": sorted(breaks.values(), key=lambda b: b["line"]),
            "op_count": len(ops), "error": error, "out": out}


_PLAIN_MODULES = ("torch", "_operator", "operator", "math", "builtins", "numpy")


def _op_names() -> frozenset[str]:
    """`ns::name` of every operator registered so far."""
    return frozenset(n.split(".")[0] for n in torch._C._dispatch_get_all_op_names())


# Taken when this module is imported, before the learner's file is: an op the
# file defines in the aten namespace (torch.library lets it) is not torch's.
_TORCH_OPS = _op_names()


def _qualified(t: Any) -> str:
    """`aten::masked_fill` for an op packet (torch.ops.aten.masked_fill) and an
    overload (torch.ops.aten.masked_fill.Scalar) alike."""
    name = getattr(t, "_qualified_op_name", None) or t.name()
    return name.split(".")[0]


def opaque_targets(graphs: list) -> list[str]:
    """Graph nodes that hide computation from Dynamo: allow_in_graph'd Python
    functions and custom ops (anything outside torch's own namespaces)."""
    bad = set()
    for gm in graphs:
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            t = node.target
            if isinstance(t, torch._ops.HigherOrderOperator):
                continue  # torch.cond, torch.while_loop: their bodies are graphs too
            if isinstance(t, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
                name = _qualified(t)
                if name.split("::")[0] not in ("aten", "prims") or name not in _TORCH_OPS:
                    bad.add(str(t))
                continue
            module = getattr(t, "__module__", None) or ""
            if module.split(".")[0] not in _PLAIN_MODULES:
                bad.add(getattr(t, "__qualname__", None) or getattr(t, "__name__", str(t)))
    return sorted(bad)


def _break_detail(b: dict[str, Any]) -> str:
    return (f"`{b['code']}`: " if b["code"] else "") + " / ".join(b["reasons"])


def check_dynamo(ctx: Any, fn: Any, inputs: list[tuple[str, tuple]]) -> bool:
    """One case per input traced, one per remaining break. True when clean."""
    clean = True
    seen: set[int] = set()
    for label, args in inputs:
        ctx.stage(f"tracing with Dynamo ({label})")
        t = trace(fn, args, ctx.file)
        for b in t["breaks"]:
            if b["line"] in seen:
                continue  # already reported from an earlier input
            seen.add(b["line"])
            ctx.add_case({"name": f"graph break at line {b['line']}", "passed": False,
                          "line": b["line"], "reasons": b["reasons"],
                          "detail": _break_detail(b)})
        if t["breaks"]:
            clean = False
            ctx.add_case({"name": f"Dynamo ({label})", "passed": False,
                          "graphs": len(t["graphs"]), "graph_breaks": len(t["breaks"]),
                          "detail": f"{len(t['breaks'])} graph break(s), "
                                    f"{len(t['graphs'])} graph(s)"})
            continue
        if not t["graphs"] or t["op_count"] == 0:
            ctx.fail("Dynamo captured no operations from your step",
                     "Your step ran without being traced: is it wrapped in "
                     "torch.compiler.disable / torch._dynamo.disable, or does it hide its work "
                     "from Dynamo? The exercise is to make the real code traceable.")
        hidden = opaque_targets(t["graphs"])
        if hidden:
            ctx.fail("cheat: Dynamo sees opaque calls instead of your step's operations: "
                     + ", ".join(hidden),
                     "allow_in_graph and custom ops put a black box in the graph, which hides "
                     "the breaks instead of removing them. Write the step with torch ops.")
        # The authoritative check: fullgraph=True raises on any break at all.
        full = trace(fn, args, ctx.file, fullgraph=True)
        if full["error"] is not None or len(full["graphs"]) != 1:
            clean = False
            b = full["breaks"][0] if full["breaks"] else {"line": 0, "code": "",
                                                          "reasons": [str(full["error"])]}
            ctx.add_case({"name": f"Dynamo fullgraph=True ({label})", "passed": False,
                          "detail": _break_detail(b)})
            continue
        ctx.add_case({"name": f"Dynamo ({label})", "passed": True, "graphs": 1,
                      "graph_breaks": 0, "ops": t["op_count"],
                      "detail": f"one graph of {t['op_count']} ops, no break"})
    return clean


# --- grading ------------------------------------------------------------------

def _config_changes(before: dict[str, Any]) -> list[str]:
    now = dynamo_config.get_config_copy()
    changed = []
    for key, value in now.items():
        try:
            same = before.get(key) == value
        except Exception:  # noqa: BLE001 - odd config values
            same = repr(before.get(key)) == repr(value)
        if not same:
            changed.append(key)
            setattr(dynamo_config, key, before.get(key))
    return changed


def _no_config_change_in_step(ctx: Any, before: dict[str, Any]) -> None:
    """A step that sets Dynamo's config while it runs (capture_scalar_outputs
    lets .item() into the graph) changes the rules it is traced under."""
    changed = _config_changes(before)
    if changed:
        ctx.fail("your step changes torch._dynamo.config while it runs: " + ", ".join(changed),
                 "The check traces your step under Dynamo's defaults; remove the graph breaks "
                 "instead of changing what counts as one.")


def grade(ctx: Any) -> None:
    # Bind what the verdict depends on before the learner's module runs.
    original, compare_fn = original_step, compare
    before = dynamo_config.get_config_copy()
    fn = ctx.function("step")
    if getattr(fn, "_torchdynamo_disable", False) or hasattr(fn, "_torchdynamo_orig_callable"):
        ctx.fail("`step` is wrapped by torch.compiler.disable / torch._dynamo.disable / "
                 "torch.compile",
                 "The grader compiles your plain function itself: remove the decorator and "
                 "make the code traceable instead.")
    changed = _config_changes(before)
    if changed:
        ctx.notes.append("Your file changed torch._dynamo.config (" + ", ".join(changed) +
                         "); the check undid that and ran with Dynamo's defaults.")
    device = ctx.device
    if device == "cpu":
        # Tiny tensors: waking OpenMP threads costs more than the work (an op
        # took ~16 ms instead of ~30 µs on a busy 2-core machine).
        torch.set_num_threads(1)
    cases = [(label, make_inputs(b, s, d, ctx.seed(seed), rms=rms, full=full, device=device))
             for b, s, d, seed, rms, full, label in CASES]
    names = [f"{b}×{s}×{d} {label}" for b, s, d, _, _, _, label in CASES]

    # 1. Eager outputs against the original.
    for (_, args), name in zip(cases, names, strict=True):
        ctx.stage(f"comparing outputs: {name}")
        expected = original(*_clone(args))
        mine = _clone(args)
        out = learner.call(fn, ctx.file, *mine)
        record = {"name": name, "dtype": "fp32", "shape": name.split(" ")[0]}
        if not _same_inputs(mine, args):
            ctx.fail(f"case {name}: your step wrote into its inputs",
                     "x, lengths and params must come back unchanged.")
        problem = _out_problem(out, args[0])
        if problem:
            record.update(passed=False, detail=problem)
        else:
            rep = compare_fn(out, expected, *EAGER_TOL)
            record.update(passed=rep["mismatches"] == 0, max_abs=rep["max_abs"],
                          max_rel=rep["max_rel"], mismatches=rep["mismatches"])
            if rep["mismatches"]:
                record["detail"] = "output differs from the original step: " + \
                    describe_mismatch(rep)
        ctx.add_case(record, len(cases))
    _no_config_change_in_step(ctx, before)
    if any(not c["passed"] for c in ctx.cases):
        return

    # 2. Graph breaks.
    traced = [(names[i], cases[i][1]) for i in TRACE_CASES]
    clean = check_dynamo(ctx, fn, traced)
    _no_config_change_in_step(ctx, before)
    if not clean:
        return

    # 3. Compiled output, on one shape with the branch taken and not taken
    # (one compile: the shape is the same, only the data differs).
    backend = "inductor" if device == "cuda" else "aot_eager"
    ctx.stage(f"compiling with torch.compile(backend={backend!r})")
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for i in COMPILED_CASES:
        args = cases[i][1]
        try:
            out = compiled(*_clone(args))
        except Exception as exc:  # noqa: BLE001
            torch._dynamo.reset()
            tb = learner.format_learner_traceback(exc, ctx.file)
            raise learner.LearnerError(f"torch.compile({backend}) of your step failed: "
                                       f"{tb.splitlines()[-1] if tb else exc}", tb) from None
        rep = compare_fn(out, original(*_clone(args)), *COMPILED_TOL)
        ctx.add_case({"name": f"compiled ({backend}) {names[i]}", "dtype": "fp32",
                      "passed": rep["mismatches"] == 0, "max_abs": rep["max_abs"],
                      "max_rel": rep["max_rel"], "mismatches": rep["mismatches"],
                      **({"detail": describe_mismatch(rep)} if rep["mismatches"] else {})})
    torch._dynamo.reset()
    if device == "cpu":
        ctx.notes.append("On the CPU the compiled check uses backend='aot_eager' (Dynamo + "
                         "AOTAutograd, no code generation): Inductor's C++ build takes about "
                         "30 s here. A GPU check compiles with Inductor and times the modes.")
    if ctx.want_timing and all(c["passed"] for c in ctx.cases):
        time_modes(ctx, fn, original)


# --- timing (GPU) ---------------------------------------------------------------

def step_flops(b: int, s: int, d: int) -> float:
    """Matmul FLOPs of one step: four D×D projections, QK^T and PV, the MLP."""
    return 2 * b * s * d * d * 4 + 2 * 2 * b * s * s * d + 2 * 2 * b * s * d * 4 * d


def count_kernels(run: Any) -> int:
    """GPU kernels one call launches, counted with torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events()
               if e.device_type == torch.autograd.DeviceType.CUDA and "Memcpy" not in e.name
               and "Memset" not in e.name)


def _compiled(fn: Any, mode: str, args: tuple) -> tuple[Any, float]:
    """torch.compile(fn, mode=mode), compiled and warmed; its compile time."""
    torch._dynamo.reset()  # one mode's cache at a time
    compiled = torch.compile(fn, mode=mode)

    def call() -> Any:
        if mode == "reduce-overhead":
            # Each call is a new step: CUDA-graph outputs may be reused.
            torch.compiler.cudagraph_mark_step_begin()
        return compiled(*args)

    t0 = time.perf_counter()
    with torch.no_grad():
        call()
        call()  # reduce-overhead records its CUDA graph on a later call
    torch.cuda.synchronize()
    return call, time.perf_counter() - t0


def time_modes(ctx: Any, fn: Any, original: Any) -> None:
    """Original vs your step: eager, torch.compile default, reduce-overhead,
    holding the GPU's timing lock (compiles included: they are in the loop)."""
    from gpulab.gpulock import gpu_timing_lock

    with gpu_timing_lock("checking graph_breaks", gpu=torch.cuda.current_device(),
                         on_wait=ctx.stage):
        _time_modes(ctx, fn, original)


def _time_modes(ctx: Any, fn: Any, original: Any) -> None:
    from gpulab.grading.timing import L2Flusher, measure

    flusher = L2Flusher()
    rows: list[dict[str, Any]] = []
    for b, s, d in TIMING_SHAPES:
        shape = f"{b}×{s}×{d}"
        args = make_inputs(b, s, d, ctx.seed(500 + s), rms=1.0, device="cuda")
        expected = original(*_clone(args))
        variants = [("original step (eager)", lambda a=args: original(*a)),
                    ("your step (eager)", lambda a=args: fn(*a)),
                    ("torch.compile default", "default"),
                    ("torch.compile reduce-overhead", "reduce-overhead")]
        base_ms = None
        for name, run in variants:
            compile_s = None
            if isinstance(run, str):  # a compile mode: compile (and warm) it now
                run, compile_s = _compiled(fn, run, args)
            ctx.stage(f"timing {shape}: {name}")
            with torch.no_grad():
                t = measure(run, flusher=flusher)
                out = run().clone()
                kernels = count_kernels(run)
            rep = compare(out, expected, *COMPILED_TOL)
            if rep["mismatches"]:
                ctx.fail(f"timing {shape} {name}: the output is wrong", describe_mismatch(rep))
            flops = step_flops(b, s, d)
            row = {"name": name, "shape": f"{shape} {name}", "dtype": "fp32", **t,
                   "flops": flops, "throughput": flops / (t["ms"] * 1e-3) / 1e12,
                   "unit": "TFLOP/s", "kernels": kernels, "compile_s": compile_s}
            if name == "your step (eager)":
                base_ms = t["ms"]
            rows.append(row)
        for row in rows[-len(variants):]:
            row["baseline"], row["speedup"] = "your step (eager)", base_ms / row["ms"]
    torch._dynamo.reset()
    best = {r["shape"].split(" ")[0]: r for r in rows if r["name"].endswith("reduce-overhead")}
    parts = [f"{shape}: reduce-overhead {r['speedup']:.1f}x eager ({r['kernels']} kernels "
             f"vs {next(x['kernels'] for x in rows if x['shape'] == shape + ' your step (eager)')})"
             for shape, r in best.items()]
    ctx.timing = {
        "cases": rows,
        "summary": "; ".join(parts),
        "baseline": "your step (eager)",
        "unit": "TFLOP/s",
        "device": torch.cuda.get_device_name(0),
        "ms": rows[1]["ms"] if len(rows) > 1 else None,
    }
