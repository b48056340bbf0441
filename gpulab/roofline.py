"""Roofline maths, the model of one GPU + dtype, the learner's points, and plots.

A kernel doing `F` FLOPs while moving `B` bytes has arithmetic intensity
`I = F / B`. No kernel beats `min(peak_flops, I * bandwidth)`: left of the
ridge point `peak_flops / bandwidth` it is memory-bound, right of it
compute-bound. Everything here is plain Python; plotext and matplotlib are
imported only inside the functions that draw.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpulab import hardware
from gpulab.hardware import GPU

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

    def attainable(self, intensity: float, dtype: str | None = None,
                   measured: bool = False) -> float | None:
        roof = self.roof(dtype, measured)
        bw = self.measured_bandwidth if measured else self.bandwidth
        return attainable(intensity, roof.flops, bw) if roof and bw else None

    def classify(self, intensity: float, dtype: str | None = None) -> str:
        roof = self.roof(dtype) or self.roof()
        return classify(intensity, roof.flops, self.bandwidth) if roof else ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu.key, "name": self.gpu.name, "dtype": self.dtype,
            "bandwidth_tbs": self.bandwidth / 1e12, "ridge_flop_per_byte": self.ridge,
            "roofs": [{"dtype": r.dtype, "tflops": r.flops / 1e12, "flag": r.flag}
                      for r in self.roofs],
            "measured": {"label": self.measured_label,
                         "bandwidth_tbs": (self.measured_bandwidth or 0) / 1e12 or None,
                         "ridge_flop_per_byte": self.measured_ridge,
                         "roofs": [{"dtype": r.dtype, "tflops": r.flops / 1e12}
                                   for r in self.measured_roofs]} if self.measured_label else None,
            "points": [p.__dict__ for p in self.points], "notes": self.notes,
        }


# --- choosing the GPU and its ceilings ---------------------------------------

def detected_gpu_name() -> str | None:
    """The first GPU's name through NVML, or None (no driver, no GPU, any error)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML is the common case on a laptop
        return None
    try:
        if pynvml.nvmlDeviceGetCount() < 1:
            return None
        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def choose_gpu(name: str | None = None, setting: str | None = None,
               detect: bool = True) -> tuple[GPU, str]:
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
    why = "the default" + (f" (no datasheet for {device})" if device else " (no GPU here)")
    if setting:
        why += f"; the workspace setting 'gpu' = {setting!r} is not a known GPU"
    return hardware.GPUS[hardware.DEFAULT_GPU], why


def measured_ceilings(gpu: GPU, workspace_root: Path | None) -> tuple[dict | None, str]:
    """Measured ceilings for this GPU: the probe's cache, else gpulab's reference run."""
    folder = Path(workspace_root) / ".gpulab" / "ceilings" if workspace_root else None
    found = []
    for f in sorted(folder.glob("*.json")) if folder and folder.is_dir() else []:
        try:
            data = json.loads(f.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and hardware.match_gpu(str(data.get("device", ""))) is gpu:
            found.append(data)
    if found:
        data = max(found, key=lambda d: str(d.get("date", "")))
        return data, f"measured on {data.get('device')} ({data.get('date', 'undated')})"
    if gpu.measured:
        m = gpu.measured
        return m, f"gpulab's reference run on an {m['device']} ({m['date']}), not this machine"
    return None, ""


def _roofs(gpu: GPU) -> list[Roof]:
    return [Roof(d, t * 1e12, flag=gpu.flags.get(d, "")) for d, t in gpu.tflops.items()]


def build_model(gpu: GPU, dtype: str | None = None, workspace_root: Path | None = None,
                measured: bool = False, points: bool = True) -> Model:
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
        tf = (data or {}).get("tflops") or {}
        if data and bw:
            model.measured_bandwidth = float(bw) * 1e12
            model.measured_roofs = [Roof(d, float(v) * 1e12, measured=True)
                                    for d, v in tf.items() if isinstance(v, (int, float)) and v]
            model.measured_label = label
            if not model.roof(measured=True):
                model.notes.append(f"no measured {dtype} peak; only the measured bandwidth "
                                   "is drawn")
        else:
            model.notes.append(f"no measured ceilings for {gpu.name}: run `gpulab probe "
                               "--bench` on that GPU")
    if points and workspace_root:
        model.points, notes = learner_points(Path(workspace_root), model)
        model.notes.extend(notes)
    return model


# --- the learner's graded runs -----------------------------------------------

def _row_flops_bytes(row: dict, lesson: Any) -> tuple[float | None, float | None]:
    """FLOPs and bytes of a timed case: carried in the row, else from the manifest formulas."""
    flops, nbytes = row.get("flops"), row.get("bytes")
    if (not flops or not nbytes) and lesson is not None and isinstance(row.get("sizes"), dict):
        from gpulab.content import eval_formula

        names = {**row["sizes"], "elt": _ELT.get(str(row.get("dtype")), 4)}
        try:
            flops = flops or (eval_formula(lesson.flops, names) if lesson.flops else None)
            nbytes = nbytes or (eval_formula(lesson.bytes, names) if lesson.bytes else None)
        except (ValueError, TypeError, ZeroDivisionError):
            pass
    if not flops and nbytes and row.get("intensity"):
        flops = row["intensity"] * nbytes
    return flops, nbytes


_ELT = {"fp32": 4, "float32": 4, "fp16": 2, "float16": 2, "bf16": 2, "bfloat16": 2,
        "fp8": 1, "fp64": 8, "float64": 8}


def learner_points(workspace_root: Path, model: Model) -> tuple[list[Point], list[str]]:
    """Points from `.gpulab/results/<exercise>.json` timed on the model's GPU."""
    folder = workspace_root / ".gpulab" / "results"
    if not folder.is_dir():
        return [], []
    try:
        from gpulab.content import load_course

        course = load_course()
    except Exception:  # noqa: BLE001 - points still come from rows that carry flops/bytes
        course = None
    points, notes, elsewhere = [], [], {}
    for f in sorted(folder.glob("*.json")):
        try:
            result = json.loads(f.read_text("utf-8"))
            timing = result.get("timing") or {}
            rows = timing.get("cases") or []
        except (OSError, ValueError, AttributeError):
            notes.append(f"{f}: not a readable result, skipped")
            continue
        if not rows:
            continue
        device = str(timing.get("device") or result.get("device") or "")
        if hardware.match_gpu(device) is not model.gpu:
            elsewhere[device or "unknown device"] = elsewhere.get(device, 0) + 1
            continue
        exercise = str(result.get("exercise") or f.stem)
        lesson = course.find(exercise) if course else None
        for row in rows:
            if not isinstance(row, dict) or not row.get("ms"):
                continue
            flops, nbytes = _row_flops_bytes(row, lesson)
            if not flops or not nbytes:
                notes.append(f"{f.name}: case {row.get('name')} has no FLOPs/bytes, not placed")
                continue
            intensity, rate = flops / nbytes, flops / (row["ms"] * 1e-3)
            dtype = str(row.get("dtype") or model.dtype)
            roof = model.attainable(intensity, dtype if model.roof(dtype) else None)
            points.append(Point(exercise, str(row.get("name") or row.get("shape") or ""), dtype,
                                intensity, rate, float(row["ms"]), model.classify(intensity, dtype),
                                rate / roof if roof else None))
    for device, n in elsewhere.items():
        notes.append(f"{n} graded run(s) timed on {device} are not shown on the {model.gpu.name} "
                     "roofline (use --gpu)")
    return points, notes


# --- plotting ----------------------------------------------------------------

def axes(model: Model) -> tuple[float, float, float, float]:
    """Decade-aligned (x_min, x_max, y_min, y_max): intensity, TFLOP/s."""
    bws = [model.bandwidth] + ([model.measured_bandwidth] if model.measured_bandwidth else [])
    ridges = [r.flops / model.bandwidth for r in model.roofs]
    xs = [model.ridge / 300, max(ridges) * 3] + [p.intensity for p in model.points]
    x0, x1 = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    tops = [r.flops for r in model.roofs + model.measured_roofs]
    ys = [x0 * min(bws), max(tops) * 1.5] + [p.flops_per_s for p in model.points]
    y0 = 10 ** math.floor(math.log10(min(ys) / 1e12))
    y1 = 10 ** math.ceil(math.log10(max(ys) / 1e12))
    return x0, x1, y0, y1


def decades(lo: float, hi: float) -> list[float]:
    return [10.0 ** e for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]


def tick_label(v: float) -> str:
    for div, suffix in ((1e6, "M"), (1e3, "k")):
        if v >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def roof_groups(roofs: list[Roof]) -> list[tuple[str, Roof]]:
    """Roofs with equal peaks drawn once, named together ("fp16/bf16")."""
    groups: dict[float, list[Roof]] = {}
    for r in roofs:
        groups.setdefault(r.flops, []).append(r)
    return [("/".join(r.dtype for r in rs), rs[0]) for _, rs in sorted(groups.items())]


def title(model: Model) -> str:
    text = f"{model.gpu.name} {model.dtype} roofline · ridge {model.ridge:.0f} FLOP/B"
    if model.measured_ridge:
        text += f" (measured {model.measured_ridge:.0f})"
    return text


def draw(plt: Any, model: Model) -> None:
    """Draw the roofline onto a plotext figure or module (or textual-plotext's `plt`).

    Uses only plotext 5 calls that textual-plotext's Plot also has; the caller
    owns the size, theme and clearing.
    """
    x0, x1, y0, y1 = axes(model)
    bw = model.bandwidth
    plt.xscale("log")
    plt.yscale("log")
    # Invisible corners fix the decade-aligned ranges without xlim/ylim, whose
    # meaning on log axes differs between plotext versions.
    plt.scatter([x0, x1], [y0, y1], marker=" ")
    main = model.roof()
    for name, roof in roof_groups(model.roofs):
        r = roof.flops / bw
        if roof is main or model.dtype in name.split("/"):
            plt.plot([x0, r, x1], [x0 * bw / 1e12, roof.flops / 1e12, roof.flops / 1e12],
                     label=f"{name} datasheet", color="blue")
        else:
            plt.plot([r, x1], [roof.flops / 1e12] * 2, color="gray")
            plt.text(f"{name} {roof.flops / 1e12:,.0f}{' ⚑' if roof.flag else ''}",
                     r * 1.3, roof.flops / 1e12, alignment="left", color="gray")
    mroof = model.roof(measured=True)
    if model.measured_bandwidth:
        mbw = model.measured_bandwidth
        top = mroof.flops if mroof else max(r.flops for r in model.roofs)
        xs = [x0, top / mbw] + ([x1] if mroof else [])
        plt.plot(xs, [x * mbw / 1e12 for x in xs[:2]] + ([top / 1e12] if mroof else []),
                 label=f"{model.dtype} measured" if mroof else "measured bandwidth",
                 color="orange")
    if main:
        plt.scatter([model.ridge], [main.flops / 1e12], marker="◆", color="blue")
        # Left of the ridge, on the roof's row, is always empty: the slope is below.
        plt.text(f"ridge {model.ridge:.0f} FLOP/B ", model.ridge / 1.15, main.flops / 1e12,
                 alignment="right", color="blue")
    labelled: set[str] = set()
    for p in model.points:
        plt.scatter([p.intensity], [p.flops_per_s / 1e12], marker="●", color="red")
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            plt.text(p.exercise, p.intensity, p.flops_per_s / 1e12 * 2.2,
                     alignment="center", color="red")
    ticks = decades(x0, x1)
    plt.xticks(ticks, [tick_label(t) for t in ticks])
    ticks = decades(y0, y1)
    plt.yticks(ticks, [tick_label(t) for t in ticks])
    plt.title(title(model))
    plt.xlabel("arithmetic intensity (FLOP/byte)")
    plt.ylabel("TFLOP/s")


def render_text(model: Model, width: int = 80, height: int = 24, color: bool = False) -> str:
    """The plot as a string (ANSI colours only when asked)."""
    import plotext
    from plotext._figure import _figure_class

    fig = _figure_class()
    fig.plotsize(max(width, 40), max(height, 12))
    fig.theme("clear")
    draw(fig, model)
    text = fig.build()
    return text if color else plotext.uncolorize(text)


def export(model: Model, path: Path) -> None:
    """Write the plot as .svg (no dependency) or .png (needs matplotlib)."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        from gpulab.roofline_svg import to_svg

        path.write_text(to_svg(model), encoding="utf-8")
    elif suffix == ".png":
        from gpulab.roofline_svg import save_png

        save_png(model, path)
    else:
        raise ValueError(f"cannot export to {path.name}: use a .svg or .png file name")
