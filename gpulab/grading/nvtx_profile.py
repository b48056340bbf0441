"""Grader for lesson 07: named ranges around a training step, checked in a profile.

Contract: `train_step(model, batch, optimizer)` runs one training step of the
given model on batch = (x, y) (zero the grads, forward, cross-entropy loss,
backward, optimizer step) and returns the loss as a tensor. It must mark
its phases with `torch.profiler.record_function` ranges named exactly

    train_step            around the whole step, holding the four below:
      forward             the model's forward pass
      loss                the loss computation
      backward            loss.backward()
      optimizer_step      optimizer.step()

The grader runs four steps against a pristine copy of the step on an
identical model (the losses and the final weights must agree), profiles the
second one with torch.profiler (CPU activity, plus CUDA on a GPU), and checks
that each range exists once, that they nest and come in order without
overlapping, and that each holds the operations it should (matmuls in
forward, the loss op in loss, autograd's ...Backward nodes in backward, the
optimizer's update in optimizer_step) and none that belong to another.

The profile's trace goes to <workspace>/traces/nvtx_profile.json (open it in
ui.perfetto.dev or chrome://tracing); its path, the top operations and the
ranges' times are in the result's `timing["profile"]`.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from gpulab.grading import learner

STEP = "train_step"
PHASES = ("forward", "loss", "backward", "optimizer_step")
RANGES = (STEP, *PHASES)
STEPS = 4
PROFILED = 1  # index of the step that is profiled (the first one warms up)

MATMUL = {"aten::addmm", "aten::mm", "aten::matmul", "aten::linear", "aten::bmm"}
LOSS = {"aten::cross_entropy_loss", "aten::nll_loss", "aten::nll_loss_nd",
        "aten::nll_loss_forward", "aten::log_softmax", "aten::_log_softmax"}
OPTIM_OPS = {"aten::add_", "aten::mul_", "aten::addcmul_", "aten::addcdiv_", "aten::lerp_"}


def is_backward(name: str) -> bool:
    return name.startswith("autograd::engine::evaluate_function") or name.endswith("Backward0")


def is_optim(name: str) -> bool:
    return name.startswith(("Optimizer.step#", "aten::_foreach_", "aten::_fused_")) \
        or name in OPTIM_OPS


# Per phase: what marks its work (used to spot it in another range), what it
# must hold (any one of), and how to say so.
MARKS = {
    "forward": lambda n: n in MATMUL,
    "loss": lambda n: n in LOSS,
    "backward": is_backward,
    "optimizer_step": lambda n: n.startswith("Optimizer.step#"),
}
NEEDS = {
    "forward": (MARKS["forward"], "matmul (aten::addmm / aten::mm)"),
    "loss": (MARKS["loss"], "loss op (aten::cross_entropy_loss)"),
    "backward": (is_backward, "autograd backward node (…Backward0)"),
    "optimizer_step": (is_optim, "optimizer update (Optimizer.step#…, aten::add_, "
                       "aten::_foreach_*)"),
}
# The backward pass runs matmuls of its own: those are not forward's work.
FOREIGN = {p: [q for q in PHASES if q != p and not (p == "backward" and q == "forward")]
           for p in PHASES}


# --- the pristine step and its inputs ------------------------------------------

def make_model(seed: int, device: str) -> tuple[nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU(),
                          nn.Linear(64, 10)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def make_batch(seed: int, device: str, n: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    # Learnable labels (a fixed random linear rule) so the loss really falls.
    w = torch.randn(32, 10, generator=torch.Generator().manual_seed(1234))
    return x.to(device), (x @ w).argmax(-1).to(device)


def original_train_step(model, batch, optimizer) -> torch.Tensor:
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    return loss.detach()


# --- reading a profile ---------------------------------------------------------

def cpu_events(prof: Any) -> list[dict[str, Any]]:
    """The profile's host-side events as plain dicts (name, start, end in µs)."""
    out = []
    for e in prof.events():
        if e.device_type != torch.autograd.DeviceType.CPU:
            continue  # the GPU-side copies of ranges and the kernels
        # is_user_annotation marks record_function ranges (None on an older torch).
        out.append({"name": e.name, "start": e.time_range.start, "end": e.time_range.end,
                    "user": getattr(e, "is_user_annotation", None)})
    return out


def _inside(e: dict, r: dict) -> bool:
    return e["start"] >= r["start"] and e["end"] <= r["end"]


def user_ranges(events: list[dict]) -> list[str]:
    """Names of ranges the learner made (record_function), torch's own left out."""
    names = []
    for e in events:
        n = e["name"]
        if n.startswith(("aten::", "autograd::", "Optimizer.", "ProfilerStep", "cuda", "Memcpy")):
            continue
        if e["user"] or (e["user"] is None and "::" not in n and not n.endswith("Backward0")
                         and n != "detach"):
            if n not in names:
                names.append(n)
    return names


_RETURNING = frozenset({"detach", "alias", "view", "_local_scalar_dense", "item", "clone", "to",
                        "_to_copy", "copy_", "empty_strided", "empty_like", "lift_fresh"})


def check_ranges(events: list[dict]) -> list[dict[str, Any]]:
    """The range checks as result cases (name, passed, detail)."""
    cases: list[dict[str, Any]] = []
    found = {name: [e for e in events if e["name"] == name] for name in RANGES}
    missing = [n for n in RANGES if not found[n]]
    twice = [n for n in RANGES if len(found[n]) > 1]
    others = [n for n in user_ranges(events) if n not in RANGES]
    detail = ""
    if missing:
        detail = "missing: " + ", ".join(missing)
        if others:
            detail += "; ranges found with other names: " + ", ".join(others[:8]) + \
                " (names must match exactly)"
    elif twice:
        detail = ", ".join(f"{n} appears {len(found[n])} times" for n in twice) + \
            " in one step (each range once)"
    cases.append({"name": "ranges present", "passed": not detail,
                  "detail": detail or "train_step, forward, loss, backward, optimizer_step"})
    if detail:
        return cases
    r = {n: found[n][0] for n in RANGES}
    problems = [f"{n} is not inside {STEP}" for n in PHASES if not _inside(r[n], r[STEP])]
    for a, b in zip(PHASES, PHASES[1:], strict=False):
        if r[a]["start"] > r[b]["start"]:
            problems.append(f"{a} starts after {b} (expected order: {', '.join(PHASES)})")
        elif r[a]["end"] > r[b]["start"]:
            problems.append(f"{a} overlaps {b} (close one range before opening the next)")
    cases.append({"name": "ranges nest and come in order", "passed": not problems,
                  "detail": "; ".join(problems) or f"four phases inside {STEP}, in order"})
    ops = [e for e in events if e["name"] not in RANGES]
    for name in PHASES:
        inside = [e["name"] for e in ops if _inside(e, r[name])]
        need, label = NEEDS[name]
        problems = [] if any(need(n) for n in inside) else [f"holds no {label}"]
        for other in FOREIGN[name]:
            stray = [n for n in inside if MARKS[other](n)]
            if stray:
                problems.append(f"holds {other}'s work ({stray[0]})")
        ms = (r[name]["end"] - r[name]["start"]) / 1e3
        cases.append({"name": f"range {name}", "passed": not problems, "ops": len(inside),
                      "ms": ms, "detail": "; ".join(problems) or f"{len(inside)} ops, "
                      f"{ms:.3f} ms"})
    # Each phase's work must be inside its range, not (also) outside it.
    outside = []
    for name in PHASES:
        for e in ops:
            if not MARKS[name](e["name"]) or _inside(e, r[name]):
                continue
            if name == "forward" and _inside(e, r["backward"]):
                continue
            outside.append(f"{e['name']} ({name}'s work) runs outside the {name} range")
            break
    # And the step's own work (zero_grad included) inside train_step; handing
    # the loss back (detach, .item(), a copy) may follow it.
    for e in ops:
        if e["name"].startswith(("aten::", "Optimizer.", "autograd::")) \
                and e["name"][len("aten::"):] not in _RETURNING and not _inside(e, r[STEP]):
            outside.append(f"{e['name']} runs outside the {STEP} range (the whole step, "
                           "zero_grad included, belongs inside it)")
            break
    cases.append({"name": "all of each phase inside its range", "passed": not outside,
                  "detail": "; ".join(outside) or "nothing of a phase left outside it"})
    return cases
def range_times(events: list[dict]) -> list[dict[str, Any]]:
    """Each expected range found: its wall time and how many ops ran inside."""
    rows = []
    for name in RANGES:
        mine = [e for e in events if e["name"] == name]
        if mine:
            r = mine[0]
            ops = sum(1 for e in events if e["name"] not in RANGES and _inside(e, r))
            rows.append({"name": name, "ms": (r["end"] - r["start"]) / 1e3, "ops": ops})
    return rows


# --- grading ------------------------------------------------------------------

def _params(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def _loss_value(out: Any) -> float | None:
    if isinstance(out, torch.Tensor) and out.numel() == 1:
        return float(out.detach())
    return None


class NvtxLog:
    """Records torch.cuda.nvtx range names pushed while active (GPU only):
    nsys shows exactly these ranges, so the result can say what it will see."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def __enter__(self) -> NvtxLog:
        import torch.cuda.nvtx as nvtx

        self._nvtx, self._push = nvtx, nvtx.range_push

        def push(msg: str, *a: Any, **k: Any) -> Any:
            self.names.append(str(msg))
            return self._push(msg, *a, **k)

        nvtx.range_push = push
        return self

    def __exit__(self, *exc: object) -> None:
        self._nvtx.range_push = self._push


def trace_file(ctx: Any) -> Path:
    ws = ctx.request.get("workspace")
    folder = Path(ws) / "traces" if ws else Path(tempfile.gettempdir()) / "gpulab-traces"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "nvtx_profile.json"


def top_ops(prof: Any, device: str, n: int = 12) -> list[dict[str, Any]]:
    rows = []
    for a in prof.key_averages():
        if a.key in RANGES:
            continue
        self_dev = getattr(a, "self_device_time_total", None)
        if self_dev is None:
            self_dev = getattr(a, "self_cuda_time_total", 0)
        rows.append({"name": a.key, "calls": a.count,
                     "self_cpu_ms": a.self_cpu_time_total / 1e3,
                     "cpu_total_ms": a.cpu_time_total / 1e3,
                     "self_device_ms": (self_dev or 0) / 1e3})
    key = "self_device_ms" if device == "cuda" else "self_cpu_ms"
    rows.sort(key=lambda r: r[key], reverse=True)
    return rows[:n]


def top_kernels(prof: Any, n: int = 10) -> list[dict[str, Any]]:
    total: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.name not in RANGES:
            total.setdefault(e.name, []).append(e.time_range.elapsed_us())
    rows = [{"name": k, "calls": len(v), "device_ms": sum(v) / 1e3} for k, v in total.items()]
    rows.sort(key=lambda r: r["device_ms"], reverse=True)
    return rows[:n]


def grade(ctx: Any) -> None:
    from torch.profiler import ProfilerActivity, profile

    reference, check = original_train_step, check_ranges  # bound before your file runs
    fn = ctx.function("train_step")
    device = ctx.device
    if device == "cpu":
        # Tiny tensors: waking OpenMP threads costs more than the work (an op
        # took ~16 ms instead of ~30 µs on a busy 2-core machine).
        torch.set_num_threads(1)
    seed = ctx.seed(7)
    mine, mine_opt = make_model(seed, device)
    ref, ref_opt = make_model(seed, device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    losses, ref_losses = [], []
    prof = None
    nvtx = NvtxLog() if device == "cuda" else None
    # One batch, several steps: the loss must fall (a step that doesn't learn
    # shows up here even before the weights are compared).
    batch = make_batch(ctx.seed(100), device)
    for i in range(STEPS):
        ctx.stage(f"training step {i + 1} of {STEPS}" + (" (profiled)" if i == PROFILED else ""))
        if i == PROFILED:
            if device == "cuda":
                torch.cuda.synchronize()
            with profile(activities=activities) as prof:
                if nvtx is not None:
                    with nvtx:
                        out = learner.call(fn, ctx.file, mine, batch, mine_opt)
                else:
                    out = learner.call(fn, ctx.file, mine, batch, mine_opt)
                if device == "cuda":
                    torch.cuda.synchronize()
        else:
            out = learner.call(fn, ctx.file, mine, batch, mine_opt)
        value = _loss_value(out)
        if value is None:
            ctx.fail(f"train_step returned {type(out).__name__}, expected the loss as a "
                     "one-element tensor", "End the step with `return loss.detach()`.")
        losses.append(value)
        ref_losses.append(float(reference(ref, batch, ref_opt)))

    # 1. It still trains, exactly as the unannotated step does.
    same = all(math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-7) for a, b in zip(losses, ref_losses, strict=True))
    ctx.add_case({"name": f"losses match the original over {STEPS} steps", "passed": same,
                  "detail": "" if same else "losses " + ", ".join(f"{v:.5f}" for v in losses) +
                  " vs the original's " + ", ".join(f"{v:.5f}" for v in ref_losses)})
    worst = max((float((a - b).abs().max()) for a, b in zip(_params(mine), _params(ref), strict=True)),
                default=0.0)
    ok = worst <= 1e-6
    ctx.add_case({"name": "weights match the original after training", "passed": ok,
                  "max_abs": worst, "detail": "" if ok else
                  f"weights differ by up to {worst:.3g}: does the step still zero the grads, "
                  "step the optimizer once, and train on the batch it is given?"})
    falls = losses[-1] < losses[0]
    ctx.add_case({"name": "loss decreases", "passed": falls,
                  "detail": f"{losses[0]:.4f} → {losses[-1]:.4f}"})

    # 2. The ranges, read off the profile.
    assert prof is not None
    events = cpu_events(prof)
    for case in check(events):
        ctx.add_case(case)

    # 3. What the app shows: top operations, the trace, the ranges' times.
    path = trace_file(ctx)
    try:
        prof.export_chrome_trace(str(path))
        trace = str(path)
    except OSError as exc:
        trace = ""
        ctx.notes.append(f"could not write the trace to {path}: {exc}")
    ranges = range_times(events)
    profile_info: dict[str, Any] = {"trace": trace, "device": device,
                                    "top_ops": top_ops(prof, device), "ranges": ranges,
                                    "sort": "self_device_ms" if device == "cuda" else "self_cpu_ms"}
    if device == "cuda":
        profile_info["top_kernels"] = top_kernels(prof)
        profile_info["nvtx"] = sorted(set(nvtx.names)) if nvtx else []
        seen = set(profile_info["nvtx"])
        if not set(RANGES) <= seen:
            ctx.notes.append("Nsight Systems will not show your ranges: no torch.cuda.nvtx "
                             "range was pushed for " + ", ".join(n for n in RANGES if n not in seen)
                             + ". Push one beside each record_function (or profile under "
                             "torch.autograd.profiler.emit_nvtx()).")
    if trace:
        ctx.notes.append(f"Trace written to {trace}: open it in https://ui.perfetto.dev "
                         "(or chrome://tracing). `gpulab profile nvtx_profile` shows the top "
                         "operations.")
    parts = ", ".join(f"{r['name']} {r['ms']:.2f} ms" for r in ranges)
    ctx.timing = {"profile": profile_info, "cases": [],
                  "summary": f"profiled on the {'GPU' if device == 'cuda' else 'CPU'}: {parts}"}
