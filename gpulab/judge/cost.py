"""Advice after the verdict, never part of it: what the kernels would cost
on a GPU, what each program of a wrong case loaded and stored, and the
wrong cases saved for `gpulab debug`.

On the CPU the replay's sandbox runs every passing case's kernels again
(gpulab.judge.replay); it also counts what they move and compute there
(gpulab.sandbox.costcount), in the process that runs only the kernels
gpulab kept of the file, on the judge's own inputs. `advice_keys` turns the
counts of the passing case with the most minimum bytes into the result's
`cost` (gpulab.gpu.costmodel), once every case has passed.

For the first wrong case small enough to draw (and a later one, where the
first had fewer than SMALL elements), `on_wrong_case` replays its launches
once more with per-element maps: the result's `load_map`
(gpulab.gpu.loadmap draws it). Each wrong case's inputs and reference are
kept in memory, and `advice_keys` writes them, after the verdict, to the
folder the judge chose in the workspace (`.gpulab/debug/<exercise>/`),
never one the sandbox named.

Light to import: the judge's main imports the context, which imports this,
before torch.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.judge.advice import Advice, JudgeKeys, Saved, Traced

if TYPE_CHECKING:
    from gpulab.gpu.costmodel import CostEstimate
    from gpulab.judge.context import GradeContext
    from gpulab.wire.check_request import CheckRequest
    from gpulab.wire.protocol import JsonObject

MAX_SAVED = 4  # wrong cases kept for `gpulab debug`
MAX_SAVED_BYTES = 64 << 20  # their tensors, all together
MAP_ELEMENTS = 4096  # the largest input a load map is drawn for
SMALL = 64  # a map of fewer elements than this is replaced by a larger one's
DEBUG_DIR = ("debug",)  # under the workspace's .gpulab folder


def _elements(args: Any) -> int:
    """The largest tensor among a case's arguments, in elements."""
    import torch

    sizes = [a.numel() for a in args if isinstance(a, torch.Tensor)]
    return max(sizes, default=0)


def on_wrong_case(
    ctx: GradeContext,
    case: Any,
    number: int,
    ref: Any,
    detail: str,
    tolerance: tuple[float, float],
    keep: Any = None,
) -> None:
    """A case the judge found wrong: kept for `gpulab debug`, and, where it
    is small and its launches were recorded, replayed once for its load map.
    Advice: whatever goes wrong here is dropped, and the verdict stands."""
    try:
        _on_wrong_case(ctx, case, number, ref, detail, tolerance, keep)
    except Exception:  # noqa: BLE001, S110 - advice never decides a check
        pass


def _on_wrong_case(
    ctx: GradeContext,
    case: Any,
    number: int,
    ref: Any,
    detail: str,
    tolerance: tuple[float, float],
    keep: Any,
) -> None:
    import torch

    if callable(ref):  # the reference, worked out only here (after a learner's error)
        ref = ref()
    advice = ctx.advice
    nbytes = sum(
        a.numel() * a.element_size() for a in (*case.args, ref) if isinstance(a, torch.Tensor)
    )
    if len(advice.saved) < MAX_SAVED and advice.saved_bytes + nbytes <= MAX_SAVED_BYTES:
        advice.saved_bytes += nbytes
        advice.saved.append(
            Saved(
                number,
                case.name,
                tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in case.args),
                dict(case.kwargs),
                ref.detach().clone() if isinstance(ref, torch.Tensor) else ref,
                detail,
                tolerance,
            )
        )
    replayer = getattr(ctx, "replayer", None)
    if not ctx.interpreter or replayer is None or keep is None or keep.record is None:
        return
    size = _elements(case.args)
    if size > MAP_ELEMENTS or advice.maps_made >= 2:
        return
    if advice.load_map is not None and (advice.map_elements >= SMALL or size < SMALL):
        return
    found = trace_case(replayer, case, keep, ref, ctx.device)
    advice.maps_made += 1
    if found is not None:
        advice.load_map = {"case": case.name, "number": number, **found}
        advice.map_elements = size


def trace_case(replayer: Any, case: Any, keep: Any, ref: Any, device: str) -> Traced | None:
    """Run a case's recorded launches once more in the replay's sandbox with
    per-element maps (nothing compared, nothing decided): the counts, or
    None where the record cannot be replayed or the replay stopped."""
    from gpulab.judge.remote import SandboxDied
    from gpulab.judge.replay import _placed
    from gpulab.wire.replay import Replayed, ReplayRequest

    if replayer.pending is not None or replayer.compiled:
        return None  # the caller collects the case in flight first
    plan, problem = replayer.plan(keep.record, keep.refs, [keep.expect])
    if plan is None:
        return None
    replayer.ensure_started()
    if replayer.sandbox is None:
        return None
    expect = keep.expect
    need = sum(plan.buffers[i].nbytes + 512 for i in plan.inputs)
    need += math.prod(expect.shape) * expect.like.dtype.itemsize + 512
    arena = replayer.arena(need)
    buffers = _placed(arena, plan, list(plan.buffers), 1.0)
    slot = arena.slot(tuple(expect.shape), expect.like.dtype)
    binaries = replayer.new_binaries(plan)
    message = ReplayRequest(
        **replayer._kernels(),
        buffers=tuple(buffers),
        launches=plan.launches,
        outs=plan.outs,
        slots=(slot,),
        binaries=binaries,
        count="map",
    )
    try:
        replayer.sandbox.send(message)
        replayed = replayer.sandbox.reply(Replayed)
    except SandboxDied:
        return None
    replayer.sent.update(b.ident for b in binaries)
    if not isinstance(replayed, Replayed) or replayed.counts is None:
        return None
    got = arena.view(slot).clone()
    return {"counts": replayed.counts, "wrong": _wrong_indices(got, ref)}


def _wrong_indices(got: Any, ref: Any, limit: int = 4096) -> list[list[int]]:
    """Where the replay's result differs from the reference (NaN-aware),
    as index lists; a load map marks them."""
    import torch

    try:
        diff = ~torch.isclose(got.double(), ref.double(), rtol=1e-2, atol=1e-3, equal_nan=True)
    except (RuntimeError, TypeError):
        return []
    return [list(map(int, ix)) for ix in diff.nonzero().tolist()[:limit]]


def advice_keys(ctx: GradeContext, passed: bool) -> JudgeKeys:
    """The result's advice keys (`cost` after a pass, `load_map` after a
    wrong case), after the verdict; writes the wrong cases for `gpulab
    debug` where the request names a workspace. Advice: whatever goes
    wrong here leaves the key out, and the verdict stands."""
    try:
        return _advice_keys(ctx, passed)
    except Exception:  # noqa: BLE001 - advice never decides a check
        return {}


def _advice_keys(ctx: GradeContext, passed: bool) -> JudgeKeys:
    out: JudgeKeys = {}
    request = ctx.request
    saved_to = save_cases(request, ctx.advice.saved, ctx.cases != [])
    if saved_to:
        out["debug"] = saved_to
    if ctx.advice.load_map is not None:
        out["load_map"] = ctx.advice.load_map
    replayer = getattr(ctx, "replayer", None)
    if passed and replayer is not None and replayer.counted:
        cost = cost_of(request, replayer.counted)
        if cost is not None:
            out["cost"] = cost
    return out


def cost_of(request: CheckRequest, counted: list[tuple[Any, JsonObject]]) -> CostEstimate | None:
    """The estimate for the counted case with the most minimum bytes."""
    from gpulab.course.content import eval_formula
    from gpulab.gpu import costmodel
    from gpulab.gpu.roofline import choose_gpu

    if not request.bytes:
        return None
    best: tuple[float, Any, JsonObject, float | None] | None = None
    least: tuple[float, int] | None = None  # the smallest case's programs
    if any(counts.get("problem") for _, counts in counted):
        return None  # a count that stopped part way: no estimate rather than a wrong one
    for case, counts in counted:
        names = {k: v for k, v in (case.sizes or {}).items()}
        names["elt"] = case.dtype.itemsize
        try:
            nbytes = eval_formula(request.bytes, names)
            flops = eval_formula(request.flops, names) if request.flops else None
        except (ValueError, TypeError, ZeroDivisionError, OverflowError):
            continue
        if nbytes and nbytes > 0 and (best is None or nbytes > best[0]):
            best = (float(nbytes), case, counts, flops)
        if nbytes and nbytes > 0 and (least is None or nbytes < least[0]):
            least = (float(nbytes), _programs(counts))
    if best is None or least is None:
        return None
    nbytes, case, counts, flops = best
    # A grid that does not grow from the smallest case to the largest is the
    # kernel's own (one program, a fixed few): only then are idle SMs its cost.
    fixed = least[0] < nbytes and _programs(counts) <= least[1]
    try:
        gpu, _ = choose_gpu(request.explain_gpu, request.gpu_setting, detect=False)
    except ValueError:
        gpu, _ = choose_gpu(None, None, detect=False)
    dtype = _DTYPE.get(str(case.dtype), "fp32")
    return costmodel.estimate(
        counts,
        case=case.name,
        dtype=dtype,
        minimum_bytes=nbytes,
        minimum_flops=flops,
        gpu=gpu,
        reference=costmodel.reference_for(request.exercise, case.name),
        fixed_grid=fixed,
    )


def _programs(counts: JsonObject) -> int:
    """The most programs any one launch of a case ran."""
    from gpulab.gpu.costmodel import launches

    found = [la.get("programs") for la in launches(counts)]
    return max((p for p in found if isinstance(p, int) and not isinstance(p, bool)), default=0)


_DTYPE = {"torch.float32": "fp32", "torch.float16": "fp16", "torch.bfloat16": "bf16"}


def debug_dir(workspace: str | Path, exercise: str) -> Path:
    return Path(workspace, ".gpulab", *DEBUG_DIR, exercise)


def save_cases(request: CheckRequest, saved: list[Saved], ran: bool) -> str | None:
    """Write the wrong cases (inputs, reference, what was wrong) for `gpulab
    debug`, replacing the last check's; None where nothing was written."""
    if not request.workspace or not ran:
        return None
    import torch

    folder = debug_dir(request.workspace, request.exercise)
    try:
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        if not saved:
            return None
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        index = []
        for s in saved:
            file = f"case-{s.number}.pt"
            data = {
                "args": [a for a in s.args],
                "kwargs": s.kwargs,
                "expected": s.expected,
            }
            torch.save(data, folder / file)
            index.append(
                {
                    "number": s.number,
                    "name": s.name,
                    "file": file,
                    "detail": s.detail[:2000],
                    "tolerance": list(s.tolerance),
                    "args": [_describe(a) for a in s.args],
                }
            )
        meta = {
            "exercise": request.exercise,
            "function": request.function,
            "file": request.file,
            "device": "cpu" if all(_on_cpu(s.args) for s in saved) else "cuda",
            "cases": index,
        }
        (folder / "cases.json").write_text(json.dumps(meta, indent=1), "utf-8")
    except OSError:
        return None
    return str(folder)


def _on_cpu(args: tuple[Any, ...]) -> bool:
    return all(getattr(a, "device", None) is None or a.device.type == "cpu" for a in args)


def _describe(a: Any) -> str:
    shape = getattr(a, "shape", None)
    if shape is not None:
        dtype = str(getattr(a, "dtype", "")).replace("torch.", "")
        return f"tensor {tuple(shape)} {dtype}"
    return repr(a)[:80]


__all__ = ["Advice", "Saved", "advice_keys", "on_wrong_case"]
