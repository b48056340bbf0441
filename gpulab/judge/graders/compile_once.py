"""Grader for lesson 06's compile-once exercise: one graph for a stream of
requests whose shapes and values change.

Contract: `compile_step(backend)` returns `run(x, lengths, temperature)`;
the check calls it on every request of a stream (x: B×S×32 float32 with B
and S changing, lengths: a Python list of B ints, temperature: a float) and

  1. compares each output with the original step (kept here, pristine, as
     `original_step`) on the judge's own inputs, and checks x is unchanged;
  2. counts the graphs compiled with its backend over the whole stream:
     exactly one, with no recompile and no graph break;
  3. counts the calls into that graph: exactly one per request (no request
     run eagerly, around the graph).

Where each part runs: the judge draws the stream and compares every output,
which the sandbox copies into slots the judge owns. Dynamo compiles where
the step is called, so the counts and Dynamo's reasons for each recompile
are the sandbox's report (gpulab.sandbox.recompiles); the judge applies the
rules to it. Dynamo's settings are its defaults: changes at import are
undone (and named in the notes), changes while the stream runs fail.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import torch

from gpulab.judge.case_row import CaseFields, case_row
from gpulab.judge.compare import compare, describe_mismatch
from gpulab.judge.graph_dynamo import args_nbytes, config_changed, sandbox_reply
from gpulab.wire.dynamo import Stream, StreamRequest, StreamStep
from gpulab.wire.status import StageKind

if TYPE_CHECKING:
    from gpulab.judge.context import GradeContext
    from gpulab.judge.remote import Arena
    from gpulab.judge.replay_plan import Refs
    from gpulab.wire.protocol import TensorRef
    from gpulab.wire.result import CaseRow

D = 32
SLOPE = 0.125
# (B, S) of each request, in order. Same shape twice first (only the values
# change), then B alone, S alone, both, the largest, the smallest, odd sizes.
# No size is 0 or 1 (Dynamo always specializes those) and the first request's
# B, S and D differ (equal sizes share one symbol when first traced).
STREAM = [(4, 16), (4, 16), (2, 16), (4, 40), (3, 7), (8, 64), (2, 2), (6, 33)]
# The CPU's backend is Dynamo's graph run as is (Inductor's C++ build takes
# ~15 s a graph here); a GPU compiles with Inductor.
BACKENDS = {"cpu": "eager", "cuda": "inductor"}
TOL = (1e-4, 1e-4)  # (atol, rtol): compiled code may reorder sums

# What each kind of failed guard means, matched on Dynamo's guard text.
_KINDS = (
    (
        r"size mismatch|stride mismatch",
        "x's sizes: the graph was traced for fixed sizes (dynamic=True, or "
        "torch._dynamo.mark_dynamic), or something pins a size to its value "
        "(a Python list of that length, a dict keyed by it, a branch on it)",
    ),
    (
        r"size\(\)\[\d+\] *(!=|==|<|>)",
        "a condition on a size that Dynamo took while tracing (a slice's end, a "
        "branch, a comparison): a size on its other side needs another graph",
    ),
    (r"^len\(", "the length of a Python list: a list is guarded on its length"),
    (r"^\w+\[\d+\]", "an item of a Python list: its values are guarded like constants"),
    (r"G\[|global|___check_obj_id|___dict", "a global the step reads or changes"),
    (r"^\w+ == -?[\d.]", "a Python number: guarded on its value"),
)


def original_step(x: torch.Tensor, lengths: list[int], temperature: float) -> torch.Tensor:
    """The starter's step (its bias cache aside): the meaning to keep."""
    B, S, D = x.shape
    pos = torch.arange(S, dtype=torch.float32)
    bias = (-SLOPE * (pos[None, :] - pos[:, None]).abs()).to(x.device)
    lens = torch.tensor(lengths, device=x.device)
    valid = torch.arange(S, device=x.device)[None, :] < lens[:, None]
    scores = x @ x.transpose(1, 2) / (temperature * math.sqrt(D)) + bias
    scores = scores.masked_fill(~valid[:, None, :], float("-inf"))
    return (torch.softmax(scores, dim=-1) @ x) * valid[..., None]


def make_request(b: int, s: int, seed: int, device: str) -> tuple[torch.Tensor, list[int], float]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(b, s, D, generator=g)
    lengths = torch.randint(1, s + 1, (b,), generator=g).tolist()
    lengths[-1] = s  # one full row in every batch
    temperature = round(0.5 + 1.5 * torch.rand((), generator=g).item(), 4)
    return x.to(device), lengths, temperature


def meaning(guard: str) -> str:
    return next((m for pat, m in _KINDS if re.search(pat, guard)), "")


def grade(ctx: GradeContext) -> None:
    from gpulab.judge.kernel import encode

    fn = ctx.function("compile_step")
    if ctx.device == "cpu":
        torch.set_num_threads(1)  # tiny tensors: threads cost more than the work
    stream = [make_request(b, s, ctx.seed(100 + i), ctx.device) for i, (b, s) in enumerate(STREAM)]
    names = [f"request {i} ({b}×{s})" for i, (b, s) in enumerate(STREAM)]
    nbytes = sum(args_nbytes((x,)) + x.numel() * 4 + 256 for x, _, _ in stream) + 4096
    arena = ctx.arena(nbytes)
    refs: Refs = {}
    requests = [encode(arena, [x, lengths, t], refs) for x, lengths, t in stream]
    slots = [arena.slot(tuple(x.shape), x.dtype) for x, _, _ in stream]
    ctx.stage(StageKind.RUNNING, f"running {len(stream)} requests through your compiled step")
    request = StreamRequest(fn.name, BACKENDS[ctx.device], requests, tuple(slots))
    reply = sandbox_reply(ctx.sandbox.ask(request, Stream))
    changed = reply.config_at_import
    if changed:
        ctx.notes.append(
            "Your file changed torch._dynamo.config (" + ", ".join(changed) + "); the check "
            "undid that and ran with Dynamo's defaults."
        )
    config_changed(ctx, reply.config_changed)
    per_request = list(reply.requests)
    per_request += [StreamStep()] * (len(stream) - len(per_request))

    # 1. Outputs, checked here against the original step.
    for i, ((x, lengths, t), slot, name) in enumerate(zip(stream, slots, names, strict=True)):
        ctx.add_case(_output_case(arena, refs, x, lengths, t, slot, name, per_request[i]))
    # 2 and 3. What was compiled, and what ran it.
    _compile_cases(ctx, reply, per_request, names)


def _output_case(
    arena: Arena,
    refs: Refs,
    x: torch.Tensor,
    lengths: list[int],
    t: float,
    slot: TensorRef,
    name: str,
    rep: StreamStep,
) -> CaseRow:
    case: CaseFields = {"name": name, "dtype": "fp32", "shape": name.split("(")[1][:-1]}
    if not rep.copied:
        case.update(
            {"passed": False, "detail": "did not return a B×S×D float32 tensor on x's device"}
        )
        return case_row(**case)
    if not torch.equal(arena.view(refs[id(x)][1]), x):
        case.update({"passed": False, "detail": "your step wrote into its inputs (x changed)"})
        return case_row(**case)
    got = compare(arena.view(slot).clone(), original_step(x.clone(), list(lengths), t), *TOL)
    case.update(
        {
            "passed": got.mismatches == 0,
            "max_abs": got.max_abs,
            "max_rel": got.max_rel,
            "mismatches": got.mismatches,
        }
    )
    if got.mismatches:
        case["detail"] = "output differs from the original step: " + describe_mismatch(got)
    return case_row(**case)


def _compile_cases(
    ctx: GradeContext, reply: Stream, per_request: list[StreamStep], names: list[str]
) -> None:
    graphs = reply.graphs
    calls = list(reply.calls)
    n = len(names)
    if not graphs:
        ctx.fail(
            "no graph was compiled with the check's backend",
            "compile_step(backend) must return torch.compile(..., backend=backend) or a "
            "function that calls it: the check counts graphs through that backend. (A step "
            "that Dynamo never traces, torch.compiler.disable or set_stance('force_eager'), "
            "compiles nothing either.)",
        )
    # One case per compile after the first, with Dynamo's reason.
    first = graphs[0].request
    for k, g in enumerate(graphs[1:], 1):
        i = g.request
        ctx.add_case(_recompile_case(k, i, names, per_request, first, reply))
    ctx.add_case(
        case_row(
            name="compiled once",
            passed=len(graphs) == 1,
            graphs=len(graphs),
            detail="one graph for the whole stream"
            if len(graphs) == 1
            else f"{len(graphs)} graphs for {n} requests",
        )
    )
    # Every request ran the graph, once.
    per = [calls.count(i) for i in range(n)]
    off = [(names[i], c) for i, c in enumerate(per) if c != 1]
    detail = "each request ran the compiled graph once"
    if off:
        name, c = off[0]
        detail = (
            f"{len(off)} of {n} requests did not run the compiled graph exactly once; "
            f"first: {name} ran it {c} time(s)"
            + (" (run eagerly, outside the graph)" if c == 0 else "")
        )
    ctx.add_case(case_row(name="every request ran the graph", passed=not off, detail=detail))


def _recompile_case(
    k: int, i: int, names: list[str], per_request: list[StreamStep], first: int, reply: Stream
) -> CaseRow:
    """The k-th extra graph, compiled during request i: a recompile (Dynamo
    says which guard failed) or a graph break (a second graph at once)."""
    label = names[i] if 0 <= i < len(names) else "compile_step"
    compiles = per_request[i].compiles if (0 <= i < len(per_request)) else ()
    reasons = [c.recompile for c in compiles if c.recompile is not None]
    name = f"recompile {k} at {label}"
    if reasons:
        r = reasons[0]
        guard, line = r.guard, r.line
        kind = meaning(guard)
        detail = (
            f"guard failed: `{guard}`"
            + (f" (line {line})" if line else "")
            + (f": {kind}" if kind else "")
        )
        return case_row(name=name, passed=False, detail=detail, line=line)
    breaks = reply.graph_breaks
    if i == first and breaks:
        line = breaks[0].line
        detail = "a second graph in the same call: " + (f"line {line}: " if line else "")
        detail += breaks[0].reason
        # The key order a graph break's row always had: line before detail.
        return case_row(name=f"graph break at {label}", passed=False, line=line, detail=detail)
    return case_row(
        name=name, passed=False, detail="a new graph was compiled (Dynamo gave no reason)"
    )
