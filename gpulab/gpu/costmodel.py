"""What a kernel would cost on a GPU, from what Triton's interpreter counted
on the CPU: a model, not a measurement.

gpulab.sandbox.costcount counts, per launch and per tensor, the bytes a
kernel's loads and stores move (32-byte sectors, masked lanes moving
nothing), its FLOPs and its programs. `estimate` sets those against the
exercise's minimum (the lesson's bytes and FLOPs formulas, the ones the
grader's roofline uses) on a datasheet GPU:

- `ratio`: bytes moved / minimum bytes, counting every access as if no
  cache held anything between accesses (an upper bound on DRAM traffic:
  on a real GPU the L2 serves some re-reads, so DRAM moves less);
- `footprint_ratio`: each sector once / minimum (a lower bound: what even
  a perfect cache must move);
- `coalescing`: sectors touched / the fewest the same lanes could touch;
- `best_fraction`: the grader's roof time (max of minimum bytes over
  bandwidth and FLOPs over the peak) over the model's time (bytes moved
  over bandwidth, dot FLOPs at the dtype's peak and the rest at FP32's,
  special functions at a sixteenth of it, and a launch of fewer programs
  than SMs slowed by the SMs it leaves idle). The kernel cannot do better
  than this fraction of the roof unless the L2 serves its re-reads.

Everything here is plain Python: the judge makes the estimate, the lab
reads it back from a result (`read`, checking every field) and shows it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from gpulab.gpu.units import value_text

if TYPE_CHECKING:
    from gpulab.gpu.hardware_model import GPU
    from gpulab.wire.protocol import JsonObject

MODEL_NOTE = (
    "a model, not a measurement: counted by Triton's interpreter on the CPU, "
    "as if no cache served a re-read"
)
# An SFU runs 16 special functions a clock an SM against 128 FP32 lanes'
# 2 FLOPs (the same 1/16 gpulab.explain's wrong_roof rule uses).
SFU_SHARE = 1 / 16
REFERENCE_PATH = Path(__file__).resolve().parents[1] / "data" / "cost_reference.json"


class TensorCost(TypedDict):
    """One tensor's sector bytes in an estimate."""

    name: str
    loads: float
    stores: float
    footprint: float


class KernelCost(TypedDict):
    """One launch in an estimate."""

    kernel: str
    programs: int
    bytes: float
    dot_flops: float


class ReferenceCost(TypedDict):
    """The reference solution's own estimate of a case (`reference_for`)."""

    ratio: float | None
    best_fraction: float | None


class CostEstimate(TypedDict):
    """A result's `cost`, as the judge writes it (`estimate`), keys in the
    order they are written."""

    model: str
    case: str
    dtype: str
    gpu: str
    gpu_key: str
    bytes: float
    requested_bytes: float
    footprint_bytes: float
    minimum_bytes: float
    ratio: float
    footprint_ratio: float
    coalescing: float
    flops: float
    dot_flops: float
    minimum_flops: float | None
    launches: int
    programs: int
    sms: int
    fixed_grid: bool
    best_fraction: float
    bound: str
    intensity: float
    best_flops_per_s: float
    tensors: list[TensorCost]
    kernels: list[KernelCost]
    reference: NotRequired[ReferenceCost]


class TensorMoved(TypedDict):
    """A tensor's bytes read and written, as the lab shows them."""

    name: str
    loads: float
    stores: float


class CostView(TypedDict):
    """A result's `cost` as the lab reads it back (`read`): every field
    checked, the ones it shows."""

    ratio: float
    footprint_ratio: float
    coalescing: float
    best_fraction: float
    minimum_bytes: float
    bytes: float | None
    intensity: float | None
    best_flops_per_s: float | None
    flops: float | None
    programs: float | None
    sms: float | None
    fixed_grid: bool
    case: str
    gpu: str
    gpu_key: str
    dtype: str
    bound: str
    reference: ReferenceCost | None
    tensors: list[TensorMoved]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) and v >= 0 else None


def _obj(v: Any) -> JsonObject:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _int(v: Any) -> int:
    n = _num(v)
    return int(n) if n is not None else 0


def tensor_totals(t: JsonObject) -> dict[str, float]:
    """A tensor's loads and stores added up (fields missing read as 0); `t`
    is a tensor of a launch as the sandbox counted it, unchecked."""
    out: dict[str, float] = {}
    for kind in ("loads", "stores"):
        acc = _obj(t.get(kind))
        keys = ("bytes", "sector_bytes", "warp_sector_bytes", "min_sector_bytes")
        for key in (*keys, "footprint_bytes"):
            out[key] = out.get(key, 0.0) + (_num(acc.get(key)) or 0.0)
        out[f"{kind}_sector_bytes"] = _num(acc.get("sector_bytes")) or 0.0
        out["out_of_range_lanes"] = out.get("out_of_range_lanes", 0.0) + _int(
            acc.get("out_of_range_lanes")
        )
    return out


def launches(counts: Any) -> list[JsonObject]:
    """The launches of a counts object (gpulab.sandbox.costcount, as the
    replay's sandbox sent it), each a dict whose fields are still unchecked."""
    found = counts.get("launches") if isinstance(counts, dict) else None
    return [la for la in found if isinstance(la, dict)] if isinstance(found, list) else []


def estimate(
    counts: JsonObject,
    *,
    case: str,
    dtype: str,
    minimum_bytes: float,
    minimum_flops: float | None,
    gpu: GPU,
    reference: ReferenceCost | None = None,
    fixed_grid: bool = False,
) -> CostEstimate | None:
    """The `cost` object of a result (see the module's docstring), or None
    where there is nothing to set against (no bytes counted, no minimum).
    `fixed_grid`: the launches kept their number of programs on smaller
    cases too, so fewer programs than SMs is the kernel's design, not the
    small size counted on the CPU (only then are idle SMs charged)."""
    if not (minimum_bytes and minimum_bytes > 0):
        return None
    bw = gpu.bandwidth_tbs * 1e12
    peak = (gpu.tflops.get(dtype) or gpu.tflops.get("fp32") or 0) * 1e12
    fp32 = (gpu.tflops.get("fp32") or 0) * 1e12
    sms = gpu.sms or 0
    moved = requested = footprint = sectors = least = dot = flops = special = 0.0
    t_model = 0.0
    tensors: dict[str, dict[str, float]] = {}
    rows: list[KernelCost] = []
    for la in launches(counts):
        la_moved = 0.0
        for t in _list(la.get("tensors")):
            if not isinstance(t, dict):
                continue
            tot = tensor_totals(t)
            la_moved += tot["sector_bytes"]
            requested += tot["bytes"]
            footprint += tot["footprint_bytes"]
            sectors += tot["warp_sector_bytes"]
            least += tot["min_sector_bytes"]
            name = str(t.get("name", "?"))[:40]
            mine = tensors.setdefault(name, {"loads": 0.0, "stores": 0.0, "footprint": 0.0})
            mine["loads"] += tot["loads_sector_bytes"]
            mine["stores"] += tot["stores_sector_bytes"]
            mine["footprint"] += tot["footprint_bytes"]
        la_dot, la_flops, la_special = (
            float(_int(la.get("dot_flops"))),
            float(_int(la.get("flops"))),
            float(_int(la.get("special"))),
        )
        programs = _int(la.get("programs"))
        t_mem = la_moved / bw if bw else 0.0
        t_comp = (la_dot / peak if peak else 0.0) + (
            (la_flops + la_special / SFU_SHARE) / fp32 if fp32 else 0.0
        )
        idle = sms / programs if fixed_grid and programs and sms and programs < sms else 1.0
        t_model += max(t_mem, t_comp) * idle
        moved += la_moved
        dot, flops, special = dot + la_dot, flops + la_flops, special + la_special
        rows.append(
            {
                "kernel": str(la.get("kernel", "?"))[:80],
                "programs": programs,
                "bytes": la_moved,
                "dot_flops": la_dot,
            }
        )
    if not rows:
        return None
    min_flops = minimum_flops if minimum_flops and minimum_flops > 0 else None
    t_ideal = max(minimum_bytes / bw if bw else 0.0, (min_flops or 0.0) / peak if peak else 0.0)
    best = min(1.0, t_ideal / t_model) if t_model > 0 else 1.0
    intensity = (min_flops or 0.0) / minimum_bytes
    roof = min(peak, intensity * bw) if peak and bw else 0.0
    bound = "compute" if roof and roof >= peak else "bandwidth"
    main = max(rows, key=lambda r: r["bytes"] + r["dot_flops"])
    out: CostEstimate = {
        "model": MODEL_NOTE,
        "case": case,
        "dtype": dtype,
        "gpu": gpu.name,
        "gpu_key": gpu.key,
        "bytes": moved,
        "requested_bytes": requested,
        "footprint_bytes": footprint,
        "minimum_bytes": float(minimum_bytes),
        "ratio": moved / minimum_bytes,
        "footprint_ratio": footprint / minimum_bytes,
        "coalescing": sectors / least if least else 1.0,
        "flops": dot + flops + special,
        "dot_flops": dot,
        "minimum_flops": min_flops,
        "launches": len(rows),
        "programs": main["programs"],
        "sms": sms,
        "fixed_grid": fixed_grid,
        "best_fraction": best,
        "bound": bound,
        "intensity": intensity,
        "best_flops_per_s": best * roof,
        "tensors": [
            {"name": k, "loads": t["loads"], "stores": t["stores"], "footprint": t["footprint"]}
            for k, t in list(tensors.items())[:12]
        ],
        "kernels": rows[:8],
    }
    if reference:
        out["reference"] = reference
    return out


def reference_for(exercise: str, case: str, path: Path = REFERENCE_PATH) -> ReferenceCost | None:
    """The reference solution's own estimate for this case (shipped data,
    made by counting gpulab's reference kernels on the same cases), or None."""
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    found = data.get(exercise, {}).get(case) if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return None
    ratio, fraction = _num(found.get("ratio")), _num(found.get("best_fraction"))
    if ratio is None:
        return None
    return {"ratio": ratio, "best_fraction": fraction}


def read(rest: Any) -> CostView | None:
    """A result's `cost`, checked field by field (a results file may come
    from anywhere): the numbers the lab shows, or None."""
    cost = rest.get("cost") if isinstance(rest, dict) else None
    if not isinstance(cost, dict):
        return None
    ratio, footprint_ratio, coalescing, best_fraction, minimum_bytes = (
        _num(cost.get(key))
        for key in ("ratio", "footprint_ratio", "coalescing", "best_fraction", "minimum_bytes")
    )
    if (
        ratio is None
        or footprint_ratio is None
        or coalescing is None
        or best_fraction is None
        or minimum_bytes is None
    ):
        return None
    ref = cost.get("reference")
    reference: ReferenceCost | None = None
    if isinstance(ref, dict) and _num(ref.get("ratio")) is not None:
        reference = {
            "ratio": _num(ref.get("ratio")),
            "best_fraction": _num(ref.get("best_fraction")),
        }
    return {
        "ratio": ratio,
        "footprint_ratio": footprint_ratio,
        "coalescing": coalescing,
        "best_fraction": best_fraction,
        "minimum_bytes": minimum_bytes,
        "bytes": _num(cost.get("bytes")),
        "intensity": _num(cost.get("intensity")),
        "best_flops_per_s": _num(cost.get("best_flops_per_s")),
        "flops": _num(cost.get("flops")),
        "programs": _num(cost.get("programs")),
        "sms": _num(cost.get("sms")),
        "fixed_grid": cost.get("fixed_grid") is True,
        "case": _text(cost.get("case")),
        "gpu": _text(cost.get("gpu")),
        "gpu_key": _text(cost.get("gpu_key")),
        "dtype": _text(cost.get("dtype")),
        "bound": _text(cost.get("bound")),
        "reference": reference,
        "tensors": [
            {
                "name": str(t.get("name", "?"))[:40],
                "loads": _num(t.get("loads")) or 0.0,
                "stores": _num(t.get("stores")) or 0.0,
            }
            for t in _list(cost.get("tensors"))[:12]
            if isinstance(t, dict)
        ],
    }


def _text(value: Any) -> str:
    return value[:120] if isinstance(value, str) else ""


def headline(cost: CostView) -> str:
    """One sentence: how many bytes it moves and what that allows at best."""
    gpu = cost.get("gpu") or "the GPU"
    roof = "compute" if cost.get("bound") == "compute" else "bandwidth"
    text = (
        f"moves {cost['ratio']:.1f}x the minimum bytes: at best "
        f"{cost['best_fraction']:.0%} of the {gpu}'s {roof} roof"
    )
    ref = cost.get("reference")
    if ref:
        text += f"; the reference moves {ref['ratio']:.1f}x"
    return text


def details(cost: CostView) -> list[str]:
    """The lines under the headline: what was counted, and what it means."""
    lines = [
        f"counted on {cost.get('case') or 'one case'}: "
        f"{_bytes(cost.get('bytes'))} moved for {_bytes(cost.get('minimum_bytes'))} "
        f"needed (each byte once: {cost['footprint_ratio']:.1f}x)",
    ]
    coal = cost["coalescing"]
    # A stride between lanes costs 2x to 8x the sectors; a little over 1x is
    # the partial sectors at blocks' and rows' edges, which every kernel has
    # (a fresh learner's correct triad read 1.1x and was told "poorly").
    if coal > 1.25:
        lines.append(
            f"accesses coalesce poorly: {coal:.1f}x the 32-byte sectors contiguous lanes "
            "would touch (a stride between neighbouring lanes?)"
        )
    elif coal > 1.05:
        lines.append(
            f"accesses coalesce: {coal:.2f}x the 32-byte sectors contiguous lanes would "
            "touch, the partial sectors at the edges of blocks and rows"
        )
    else:
        lines.append("accesses coalesce: neighbouring lanes read neighbouring bytes")
    programs, sms = cost.get("programs"), cost.get("sms")
    if programs and sms and programs < sms and cost.get("fixed_grid"):
        lines.append(
            f"its main launch has {programs:.0f} programs for {sms:.0f} SMs, and as many on "
            f"smaller cases: {sms - programs:.0f} SMs would have nothing to do"
        )
    moved = [t for t in cost.get("tensors", []) if t["loads"] or t["stores"]]
    if moved:
        parts = []
        for t in moved[:6]:
            what = []
            if t["loads"]:
                what.append(f"read {_bytes(t['loads'])}")
            if t["stores"]:
                what.append(f"written {_bytes(t['stores'])}")
            parts.append(f"{t['name']} {' '.join(what)}")
        lines.append("per tensor: " + "; ".join(parts))
    lines.append(MODEL_NOTE + "; on a GPU, `gpulab check` times it.")
    return lines


def _bytes(n: Any) -> str:
    n = _num(n)
    if n is None:
        return "?"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{value_text(n / size, '.3g')} {unit}"
    return f"{n:.0f} B"


def cost_renderable(rest: Any) -> Any:
    """The Results pane's and the CLI's section for a result's `cost`, or None."""
    cost = read(rest)
    if cost is None:
        return None
    from rich.console import Group
    from rich.text import Text

    head = Text()
    head.append("What it would cost on a GPU (model) ", style="bold")
    head.append(headline(cost))
    return Group(head, *(Text("  " + line, style="dim") for line in details(cost)))
