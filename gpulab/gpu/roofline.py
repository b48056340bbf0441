"""Roofline maths, the model of one GPU + dtype, the learner's points, and the
summary beside a plot (gpulab.gpu.roofline_plot draws).

A kernel doing `F` FLOPs while moving `B` bytes has arithmetic intensity
`I = F / B`. No kernel beats `min(peak_flops, I * bandwidth)`: left of the
ridge point `peak_flops / bandwidth` it is memory-bound, right of it
compute-bound. Everything here is plain Python.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeGuard

from gpulab.gpu import hardware
from gpulab.gpu.hardware import GPU
from gpulab.gpu.hardware_model import MeasuredCeilings, read_ceilings
from gpulab.wire.result import CheckResult, TimingRow

MEMORY_BOUND, COMPUTE_BOUND = "memory-bound", "compute-bound"


def attainable(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """The roof at this intensity: min(compute peak, intensity × bandwidth), FLOP/s."""
    return min(peak_flops, intensity * bandwidth)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """FLOP per byte where the memory slope meets the compute roof."""
    return peak_flops / bandwidth


def classify(intensity: float, peak_flops: float, bandwidth: float) -> str:
    return MEMORY_BOUND if intensity < ridge_point(peak_flops, bandwidth) else COMPUTE_BOUND


class UnknownGPU(ValueError):
    """A GPU name that the hardware table does not know."""


@dataclass(frozen=True)
class Roof:
    """A compute roof: one dtype's peak, datasheet or measured."""

    dtype: str
    flops: float  # FLOP/s
    measured: bool = False
    flag: str = ""


@dataclass(frozen=True)
class Point:
    """One timed case of a graded run, placed on the roofline."""

    exercise: str
    case: str
    dtype: str
    intensity: float  # FLOP/byte
    flops_per_s: float
    ms: float
    bound: str = ""
    fraction: float | None = None  # of the datasheet roof at this intensity
    # What a plot writes beside the point when there is room (its exercise
    # name where there is not, or when this is empty).
    label: str = ""


class RoofDict(TypedDict):
    dtype: str
    tflops: float
    flag: NotRequired[str]  # the datasheet's roofs only


class MeasuredDict(TypedDict):
    label: str
    bandwidth_tbs: float | None
    ridge_flop_per_byte: float | None
    roofs: list[RoofDict]


class PointDict(TypedDict):
    """A Point's fields, in their order."""

    exercise: str
    case: str
    dtype: str
    intensity: float
    flops_per_s: float
    ms: float
    bound: str
    fraction: float | None
    label: str


class ModelDict(TypedDict):
    """`gpulab roofline --json` (less the reason the GPU was chosen)."""

    gpu: str
    name: str
    dtype: str
    bandwidth_tbs: float
    ridge_flop_per_byte: float
    roofs: list[RoofDict]
    measured: MeasuredDict | None
    points: list[PointDict]
    estimates: list[PointDict]
    notes: list[str]


def _point_dict(p: Point) -> PointDict:
    return {
        "exercise": p.exercise,
        "case": p.case,
        "dtype": p.dtype,
        "intensity": p.intensity,
        "flops_per_s": p.flops_per_s,
        "ms": p.ms,
        "bound": p.bound,
        "fraction": p.fraction,
        "label": p.label,
    }


@dataclass
class Model:
    gpu: GPU
    dtype: str
    bandwidth: float  # bytes/s, datasheet
    roofs: list[Roof]  # datasheet, one per dtype the GPU lists
    measured_bandwidth: float | None = None
    measured_roofs: list[Roof] = field(default_factory=list)
    measured_label: str = ""
    points: list[Point] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # CPU checks' estimates (gpulab.gpu.costmodel): where the kernel could be
    # at best, from the interpreter's counts. A model, never a measurement.
    estimates: list[Point] = field(default_factory=list)

    def roof(self, dtype: str | None = None, measured: bool = False) -> Roof | None:
        pool = self.measured_roofs if measured else self.roofs
        return next((r for r in pool if r.dtype == (dtype or self.dtype)), None)

    @property
    def ridge(self) -> float:
        roof = self.roof()
        return ridge_point(roof.flops, self.bandwidth) if roof else math.nan

    @property
    def measured_ridge(self) -> float | None:
        roof = self.roof(measured=True)
        if roof and self.measured_bandwidth:
            return ridge_point(roof.flops, self.measured_bandwidth)
        return None

    def attainable(
        self, intensity: float, dtype: str | None = None, measured: bool = False
    ) -> float | None:
        roof = self.roof(dtype, measured)
        bw = self.measured_bandwidth if measured else self.bandwidth
        return attainable(intensity, roof.flops, bw) if roof and bw else None

    def classify(self, intensity: float, dtype: str | None = None) -> str:
        roof = self.roof(dtype) or self.roof()
        return classify(intensity, roof.flops, self.bandwidth) if roof else ""

    def as_dict(self) -> ModelDict:
        return {
            "gpu": self.gpu.key,
            "name": self.gpu.name,
            "dtype": self.dtype,
            "bandwidth_tbs": self.bandwidth / 1e12,
            "ridge_flop_per_byte": self.ridge,
            "roofs": [
                {"dtype": r.dtype, "tflops": r.flops / 1e12, "flag": r.flag} for r in self.roofs
            ],
            "measured": {
                "label": self.measured_label,
                "bandwidth_tbs": (self.measured_bandwidth or 0) / 1e12 or None,
                "ridge_flop_per_byte": self.measured_ridge,
                "roofs": [
                    {"dtype": r.dtype, "tflops": r.flops / 1e12} for r in self.measured_roofs
                ],
            }
            if self.measured_label
            else None,
            "points": [_point_dict(p) for p in self.points],
            "estimates": [_point_dict(p) for p in self.estimates],
            "notes": self.notes,
        }


# --- choosing the GPU and its ceilings ---------------------------------------


def detected_gpu_name() -> str | None:
    """The first GPU's name through NVML, or None (no driver, no GPU, any error)."""
    from gpulab.gpu import nvml

    try:
        with nvml.opened() as nv:
            if nv.nvmlDeviceGetCount() < 1:
                return None
            return nvml.text(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(0)))
    except Exception:  # noqa: BLE001 - no NVML is the common case on a laptop
        return None


def choose_gpu(
    name: str | None = None, setting: str | None = None, detect: bool = True
) -> tuple[GPU, str]:
    """(GPU, why): --gpu, else this machine's GPU, else the workspace setting, else default."""
    if name:
        gpu = hardware.match_gpu(name)
        if gpu is None:
            raise UnknownGPU(f"unknown GPU {name!r}; known: {hardware.known_names()}")
        return gpu, "chosen with --gpu"
    device = detected_gpu_name() if detect else None
    if device and (gpu := hardware.match_gpu(device)):
        return gpu, f"this machine's GPU ({device})"
    if isinstance(setting, str) and (gpu := hardware.match_gpu(setting)):
        return gpu, "the workspace setting 'gpu'"
    # Read inside parentheses ("H100 SXM (the default: ...)"): none of its own.
    why = "the default: " + (f"no datasheet for {device}" if device else "no GPU here")
    if setting:
        why += f"; the workspace setting 'gpu' = {setting!r} is not a known GPU"
    return hardware.GPUS[hardware.DEFAULT_GPU], why


def measured_ceilings(gpu: GPU, workspace_root: Path | None) -> tuple[MeasuredCeilings | None, str]:
    """Measured ceilings for this GPU: the probe's cache, else gpulab's reference run."""
    folder = Path(workspace_root) / ".gpulab" / "ceilings" if workspace_root else None
    found = []
    for f in sorted(folder.glob("*.json")) if folder and folder.is_dir() else []:
        try:
            data = read_ceilings(json.loads(f.read_text("utf-8")))
        except (OSError, ValueError):
            continue
        if hardware.match_gpu(data.get("device", "")) is gpu:
            found.append(data)
    if found:
        best = max(found, key=lambda d: d.get("date", ""))
        return best, f"measured on {best.get('device')} ({best.get('date', 'undated')})"
    if gpu.measured:
        m = gpu.measured
        return m, f"gpulab's reference run on an {m['device']} ({m['date']}), not this machine"
    return None, ""


def _roofs(gpu: GPU) -> list[Roof]:
    return [Roof(d, t * 1e12, flag=gpu.flags.get(d, "")) for d, t in gpu.tflops.items()]


def build_model(
    gpu: GPU,
    dtype: str | None = None,
    workspace_root: Path | None = None,
    measured: bool = False,
    points: bool = True,
) -> Model:
    """The roofline of `gpu` for `dtype`; raises ValueError for a dtype it lacks."""
    dtype = dtype or gpu.default_dtype()
    if dtype not in gpu.tflops:
        raise ValueError(f"{gpu.name} has no {dtype} figure; it has: {', '.join(gpu.tflops)}")
    model = Model(gpu, dtype, gpu.bandwidth_tbs * 1e12, _roofs(gpu))
    if gpu.flags.get("bandwidth"):
        model.notes.append(f"{gpu.name} bandwidth is flagged: {gpu.flags['bandwidth']}")
    if gpu.flags.get(dtype):
        model.notes.append(f"{gpu.name} {dtype} is flagged: {gpu.flags[dtype]}")
    if measured:
        data, label = measured_ceilings(gpu, workspace_root)
        bw = (data or {}).get("copy_tbs") or (data or {}).get("read_tbs")
        tf = (data or {}).get("tflops")
        tf = tf if isinstance(tf, dict) else {}
        if data and _positive(bw):
            model.measured_bandwidth = float(bw) * 1e12
            model.measured_roofs = [
                Roof(str(d), float(v) * 1e12, measured=True) for d, v in tf.items() if _positive(v)
            ]
            model.measured_label = label
            if not model.roof(measured=True):
                model.notes.append(
                    f"no measured {dtype} peak; only the measured bandwidth is drawn"
                )
        else:
            model.notes.append(
                f"no measured ceilings for {gpu.name}: run `gpulab probe --bench` on that GPU"
            )
    if points and workspace_root:
        model.points, notes = learner_points(Path(workspace_root), model)
        model.notes.extend(notes)
        model.estimates = estimate_points(Path(workspace_root), model)
    return model


def estimate_point(result: CheckResult, model: Model) -> Point | None:
    """A CPU check's estimate (its `cost`) as a point under this model's
    roof: the exercise's intensity, at the best fraction of the roof the
    counted bytes allow. None where the result has no estimate."""
    from gpulab.gpu.costmodel import read

    cost = read(result.rest)
    intensity = cost["intensity"] if cost else None
    if cost is None or not _positive(intensity):
        return None
    dtype = cost.get("dtype") or model.dtype
    roof = model.attainable(intensity, dtype if model.roof(dtype) else None)
    if not roof:
        return None
    return Point(
        result.exercise,
        f"{cost.get('case') or ''} (model)",
        dtype,
        intensity,
        cost["best_fraction"] * roof,
        0.0,
        model.classify(intensity, dtype),
        cost["best_fraction"],
    )


def estimate_points(workspace_root: Path, model: Model) -> list[Point]:
    """The estimates of the CPU checks in `.gpulab/results/`, one an exercise."""
    folder = workspace_root / ".gpulab" / "results"
    out = []
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            raw = json.loads(f.read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(raw, dict) and (p := estimate_point(CheckResult.from_json(raw), model)):
            out.append(p)
    return out


# --- the learner's graded runs -----------------------------------------------


def _row_flops_bytes(row: TimingRow, lesson: Any) -> tuple[float | None, float | None]:
    """FLOPs and bytes of a timed case: carried in the row, else from the manifest formulas."""
    flops, nbytes = row.flops, row.bytes
    if (not flops or not nbytes) and lesson is not None and row.sizes is not None:
        from gpulab.course.content import eval_formula

        names = {k: v for k, v in row.sizes.items() if _positive(v)}
        names["elt"] = _ELT.get(str(row.dtype), 4)
        try:
            flops = flops or (eval_formula(lesson.flops, names) if lesson.flops else None)
            nbytes = nbytes or (eval_formula(lesson.bytes, names) if lesson.bytes else None)
        except (ValueError, TypeError, ZeroDivisionError, OverflowError):
            pass
    if not flops and _positive(nbytes) and _positive(row.intensity):
        flops = row.intensity * nbytes
    return flops, nbytes


def _positive(v: Any) -> TypeGuard[float]:
    """A finite number above zero (results files are learner-side data: trust nothing)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < math.inf


_ELT = {
    "fp32": 4,
    "float32": 4,
    "fp16": 2,
    "float16": 2,
    "bf16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp64": 8,
    "float64": 8,
}


def learner_points(workspace_root: Path, model: Model) -> tuple[list[Point], list[str]]:
    """Points from `.gpulab/results/<exercise>.json` timed on the model's GPU."""
    folder = workspace_root / ".gpulab" / "results"
    if not folder.is_dir():
        return [], []
    try:
        from gpulab.course.content import load_course

        course = load_course()
    except Exception:  # noqa: BLE001 - points still come from rows that carry flops/bytes
        course = None
    points: list[Point] = []
    notes: list[str] = []
    elsewhere: dict[str, int] = {}
    for f in sorted(folder.glob("*.json")):
        try:
            raw = json.loads(f.read_text("utf-8"))
        except (OSError, ValueError, RecursionError):
            raw = None
        if not isinstance(raw, dict):
            notes.append(f"{f}: not a readable result, skipped")
            continue
        result = CheckResult.from_json(raw)  # checked field by field
        timing = result.timing
        rows = timing.cases if timing is not None else []
        if timing is None or not rows:
            continue
        device = timing.device or result.device or ""
        if hardware.match_gpu(device) is not model.gpu:
            elsewhere[device or "unknown device"] = elsewhere.get(device, 0) + 1
            continue
        exercise = result.exercise or f.stem
        lesson = course.find(exercise) if course else None
        for row in rows:
            flops, nbytes = _row_flops_bytes(row, lesson)
            ms = row.ms
            if not (_positive(flops) and _positive(nbytes) and _positive(ms)):
                notes.append(
                    f"{f.name}: case {row.name or None} has no usable FLOPs, bytes "
                    "and time; not placed"
                )
                continue
            intensity, rate = flops / nbytes, flops / (ms * 1e-3)
            dtype = str(row.dtype or model.dtype)
            roof = model.attainable(intensity, dtype if model.roof(dtype) else None)
            points.append(
                Point(
                    exercise,
                    row.label,
                    dtype,
                    intensity,
                    rate,
                    float(ms),
                    model.classify(intensity, dtype),
                    rate / roof if roof else None,
                )
            )
    for device, n in elsewhere.items():
        notes.append(
            f"{n} graded run(s) timed on {device} are not shown on the {model.gpu.name} "
            "roofline (use --gpu)"
        )
    return points, notes


# --- for the CLI and the TUI -------------------------------------------------


def workspace_model(
    workspace: Any = None,
    gpu: str | None = None,
    dtype: str | None = None,
    measured: bool = True,
    detect: bool = True,
) -> tuple[Model, str]:
    """(model, why this GPU) for a workspace: its setting 'gpu', results and ceilings."""
    setting = workspace.get_setting("gpu") if workspace is not None else None
    chosen, why = choose_gpu(gpu, setting, detect)
    root = getattr(workspace, "root", None)
    return build_model(chosen, dtype, root, measured=measured), why


def summary_renderable(model: Model, why: str = "") -> Any:
    """The numbers behind the plot and the learner's points (a rich Group)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    g, roof = model.gpu, model.roof()
    assert roof is not None, "build_model keeps the model's dtype among its roofs"
    out: list[Any] = [
        Text(
            f"{g.name}{f' ({why})' if why else ''}: datasheet {model.dtype} "
            f"{roof.flops / 1e12:,.0f} TFLOP/s, {model.bandwidth / 1e12:g} TB/s → ridge "
            f"{model.ridge:.0f} FLOP/byte"
        )
    ]
    if model.measured_label and model.measured_bandwidth:
        mroof = model.roof(measured=True)
        line = f"measured ({model.measured_label}): {model.measured_bandwidth / 1e12:g} TB/s copy"
        if mroof:
            line += (
                f", {model.dtype} {mroof.flops / 1e12:,.0f} TFLOP/s → ridge "
                f"{model.measured_ridge:.0f} FLOP/byte"
            )
        out.append(Text(line, style="dim"))
    if model.points:
        t = Table(title="Your graded runs", title_justify="left")
        for col in ("exercise", "case", "dtype", "FLOP/B", "TFLOP/s", "bound", "of roof"):
            t.add_column(
                col, justify="right" if col in ("FLOP/B", "TFLOP/s", "of roof") else "left"
            )
        for p in model.points:
            t.add_row(
                p.exercise,
                p.case,
                p.dtype,
                f"{p.intensity:.3g}",
                f"{p.flops_per_s / 1e12:.3g}",
                p.bound,
                f"{p.fraction:.0%}" if p.fraction is not None else "",
            )
        out.append(t)
    else:
        out.append(
            Text(
                "No graded runs on this GPU yet: `gpulab check EXERCISE` on a GPU "
                "places your kernel here.",
                style="dim",
            )
        )
    if model.estimates:
        t = Table(
            title="CPU estimates: a model, not a measurement (the interpreter's counts)",
            title_justify="left",
        )
        for col in ("exercise", "case", "FLOP/B", "at best", "of roof"):
            t.add_column(
                col, justify="right" if col in ("FLOP/B", "at best", "of roof") else "left"
            )
        for p in model.estimates:
            t.add_row(
                p.exercise,
                p.case,
                f"{p.intensity:.3g}",
                f"{p.flops_per_s / 1e12:.3g} TFLOP/s",
                f"{p.fraction:.0%}" if p.fraction is not None else "",
            )
        out.append(t)
    for note in model.notes:
        out.append(Text(f"note: {note}", style="yellow"))
    return Group(*out)
