"""Roofline export for reports: SVG written by hand, PNG through matplotlib.

SVG needs no dependency, so every learner can put a roofline in a report;
matplotlib is an optional extra (`pip install 'gpulab[plot]'`) used only here.
"""

from __future__ import annotations

import math
from pathlib import Path
from xml.sax.saxutils import escape

from gpulab.roofline import Model, axes, decades, roof_groups, tick_label, title

BLUE, ORANGE, GRAY, RED = "#1f5fbf", "#e07b00", "#888888", "#c62828"


class PlotUnavailable(RuntimeError):
    """The requested export format needs a package that is not installed."""


def _lines(model: Model) -> list[tuple[list[float], list[float], str, str, bool]]:
    """(xs, ys in TFLOP/s, label, colour, dashed) for every roof and slope."""
    x0, x1, _, _ = axes(model)
    bw, out = model.bandwidth, []
    for name, roof in roof_groups(model.roofs):
        r, top = roof.flops / bw, roof.flops / 1e12
        if model.dtype in name.split("/"):
            out.append(([x0, r, x1], [x0 * bw / 1e12, top, top], f"{name} datasheet", BLUE, False))
        else:
            out.append(([r, x1], [top, top], f"{name} {top:,.0f}" + (" ⚑" if roof.flag else ""),
                        GRAY, False))
    if model.measured_bandwidth:
        mbw, mroof = model.measured_bandwidth, model.roof(measured=True)
        top = mroof.flops if mroof else max(r.flops for r in model.roofs)
        xs = [x0, top / mbw] + ([x1] if mroof else [])
        ys = [x * mbw / 1e12 for x in xs[:2]] + ([top / 1e12] if mroof else [])
        out.append((xs, ys, f"{model.dtype} measured" if mroof else "measured bandwidth",
                    ORANGE, True))
    return out


def to_svg(model: Model, width: int = 880, height: int = 560) -> str:
    """A standalone SVG document of the roofline, with decade grid and labels."""
    x0, x1, y0, y1 = axes(model)
    left, right, top, bottom = 70, 170, 50, 60
    pw, ph = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + pw * (math.log10(x) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))

    def py(y: float) -> float:
        return top + ph * (1 - (math.log10(y) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))

    def text(s: str, x: float, y: float, anchor: str = "start", color: str = "#222",
             size: int = 12, extra: str = "") -> str:
        return (f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" '
                f'font-size="{size}"{extra}>{escape(s)}</text>')

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
           f"<title>{escape(title(model))}</title>",
           f'<rect width="{width}" height="{height}" fill="white"/>']
    for t in decades(x0, x1):
        out.append(f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + ph}" '
                   'stroke="#e0e0e0"/>')
        out.append(text(tick_label(t), px(t), top + ph + 18, "middle"))
    for t in decades(y0, y1):
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" '
                   'stroke="#e0e0e0"/>')
        out.append(text(tick_label(t), left - 8, py(t) + 4, "end"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
               'stroke="#444"/>')
    out.append(text(title(model), width / 2, 28, "middle", size=15, extra=' font-weight="bold"'))
    out.append(text("arithmetic intensity (FLOP/byte)", left + pw / 2, height - 15, "middle"))
    out.append(text("TFLOP/s", 18, top + ph / 2, "middle",
                    extra=f' transform="rotate(-90 18 {top + ph / 2:.0f})"'))
    for xs, ys, label, color, dashed in _lines(model):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" '
                   f'stroke-width="2"{dash}/>')
        out.append(text(label, px(xs[-1]) + 6, py(ys[-1]) + 4, color=color))
    if model.roof():
        rx, ry = px(model.ridge), py(model.roof().flops / 1e12)
        out.append(f'<circle cx="{rx:.1f}" cy="{ry:.1f}" r="5" fill="{BLUE}"/>')
        out.append(text(f"ridge {model.ridge:.0f} FLOP/B", rx, ry + 20, "middle", BLUE))
    labelled: set[str] = set()
    for p in model.points:
        cx, cy = px(p.intensity), py(p.flops_per_s / 1e12)
        tip = (f"{p.exercise} {p.case} {p.dtype}: {p.intensity:.3g} FLOP/B, "
               f"{p.flops_per_s / 1e12:.3g} TFLOP/s, {p.bound}")
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{RED}">'
                   f"<title>{escape(tip)}</title></circle>")
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            out.append(text(p.exercise, cx, cy - 9, "middle", RED))
    if model.measured_label:
        out.append(text(f"measured: {model.measured_label}", left, height - 38, size=10,
                        color=ORANGE))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def save_png(model: Model, path: Path) -> None:
    """The same plot through matplotlib; PlotUnavailable when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as mpl
    except ImportError:
        raise PlotUnavailable(
            "PNG export needs matplotlib: pip install 'gpulab[plot]' "
            "(or export to .svg, which needs nothing)") from None
    x0, x1, y0, y1 = axes(model)
    fig, ax = mpl.subplots(figsize=(9, 5.6), dpi=120)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    for xs, ys, label, color, dashed in _lines(model):
        ax.plot(xs, ys, color=color, linestyle="--" if dashed else "-", label=label)
    if model.roof():
        ax.plot([model.ridge], [model.roof().flops / 1e12], "D", color=BLUE)
        ax.annotate(f"ridge {model.ridge:.0f} FLOP/B", (model.ridge, model.roof().flops / 1e12),
                    textcoords="offset points", xytext=(0, -16), ha="center", color=BLUE)
    labelled: set[str] = set()
    for p in model.points:
        ax.plot([p.intensity], [p.flops_per_s / 1e12], "o", color=RED)
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            ax.annotate(p.exercise, (p.intensity, p.flops_per_s / 1e12),
                        textcoords="offset points", xytext=(0, 7), ha="center", color=RED)
    ax.set_title(title(model))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="major", color="#e0e0e0")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    mpl.close(fig)
