"""Drawing the roofline: on a plotext figure (terminal, TUI), as SVG, as PNG.

plotext is imported only to render text; SVG is written by hand so every
learner can put a roofline in a report; matplotlib is an optional extra
(`pip install 'gpulab[plot]'`) used only for PNG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast
from xml.sax.saxutils import escape

from gpulab.gpu.roofline import Model, Roof


def axes(model: Model) -> tuple[float, float, float, float]:
    """Decade-aligned (x_min, x_max, y_min, y_max): intensity, TFLOP/s."""
    bws = [model.bandwidth] + ([model.measured_bandwidth] if model.measured_bandwidth else [])
    ridges = [r.flops / model.bandwidth for r in model.roofs]
    shown = [*model.points, *model.estimates]
    xs = [model.ridge / 300, max(ridges) * 3] + [p.intensity for p in shown]
    x0, x1 = 10 ** math.floor(math.log10(min(xs))), 10 ** math.ceil(math.log10(max(xs)))
    tops = [r.flops for r in model.roofs + model.measured_roofs]
    ys = [x0 * min(bws), max(tops) * 1.5] + [p.flops_per_s for p in shown]
    y0 = 10 ** math.floor(math.log10(min(ys) / 1e12))
    y1 = 10 ** math.ceil(math.log10(max(ys) / 1e12))
    return x0, x1, y0, y1


def decades(lo: float, hi: float) -> list[float]:
    return [10.0**e for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1)]


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


def plot_cells(model: Model, width: int, height: int) -> tuple[int, int]:
    """The (columns, rows) plotext plots in, inside a `width` x `height` figure:
    less the y tick labels and the frame across, the title, the frame, the x
    ticks and the axis label down (to a cell or so: Labels leaves a gap)."""
    _, _, y0, y1 = axes(model)
    ticks = max(len(tick_label(t)) for t in decades(y0, y1))
    return max(10, width - ticks - 4), max(5, height - 5)


class Labels:
    """Text labels placed in the plot's character cells, none over another.

    plotext writes text where it is told, over anything: at 80 columns the
    ridge label ran into "tf32 494" and "prefill" into "fp8 1,979". Each label
    tries its places in turn (on its line, a row above, a row below) and is
    left out when none is free; the most important are placed first. Without
    a size (a caller that does not know it) every label goes where it asks.
    """

    def __init__(self, axes: tuple[float, float, float, float], cells: tuple[int, int] | None):
        self.x0, self.x1, self.y0, self.y1 = axes
        self.cells = cells
        self.taken: list[tuple[int, int, int]] = []  # (row, first col, last col)

    def _col(self, x: float) -> float:
        assert self.cells is not None
        return math.log(x / self.x0) / math.log(self.x1 / self.x0) * (self.cells[0] - 1)

    def _row(self, y: float) -> int:
        assert self.cells is not None
        return round(math.log(y / self.y0) / math.log(self.y1 / self.y0) * (self.cells[1] - 1))

    def row_y(self, y: float, rows: int) -> float:
        """The y `rows` character rows above `y` (below when negative)."""
        if self.cells is None:
            return y * 2.2**rows
        # float ** float is typed Any (a negative base gives a complex); here both are positive.
        scale: float = (self.y1 / self.y0) ** (rows / (self.cells[1] - 1))
        return y * scale

    def legend(self, names: list[str]) -> None:
        """plotext's legend, at the top left, a line per name after its
        marker: no label is written over it (a step's label with its value
        ran into "fp16/bf16 datasheet" at 50 columns)."""
        if self.cells is not None:
            top = self.cells[1] - 1
            for i, name in enumerate(names):
                self.taken.append((top - i, -1, len(name) + 3))

    def mark(self, x: float, y: float) -> None:
        """A point's marker: no label is written over it."""
        if self.cells is not None and x > 0 and y > 0:
            col = round(self._col(x))
            self.taken.append((self._row(y), col, col))

    def place(
        self, plt: Any, text: str, x: float, places: list[float], align: str, color: str
    ) -> bool:
        """Write `text` at the first of the y `places` where it is clear of the
        labels and markers already there; False when there is none."""
        for y in places:
            if self.cells is not None:
                if not (x > 0 and self.y0 <= y <= self.y1):
                    continue
                n, col = len(text), self._col(x)
                first = round(col - (n if align == "right" else n / 2 if align == "center" else 0))
                span = (self._row(y), max(0, first) - 1, min(self.cells[0], first + n))
                if any(r == span[0] and a <= span[2] and span[1] <= b for r, a, b in self.taken):
                    continue
                self.taken.append(span)
            plt.text(text, x, y, alignment=align, color=color)
            return True
        return False


def draw(plt: Any, model: Model, cells: tuple[int, int] | None = None) -> None:
    """Draw the roofline onto a plotext figure or module (or textual-plotext's `plt`).

    Uses only plotext 5 calls that textual-plotext's Plot also has; the caller
    owns the size, theme and clearing. `cells`, the plotting area's (columns,
    rows) where known, keeps the labels from running into each other.
    """
    x0, x1, y0, y1 = axes(model)
    labels = Labels((x0, x1, y0, y1), cells)
    bw = model.bandwidth
    plt.xscale("log")
    plt.yscale("log")
    # Invisible corners fix the decade-aligned ranges without xlim/ylim, whose
    # meaning on log axes differs between plotext versions.
    plt.scatter([x0, x1], [y0, y1], marker=" ")
    main = model.roof()
    side_roofs: list[tuple[str, float, float]] = []  # (label, x, y) after the rest
    legend: list[str] = []
    for name, roof in roof_groups(model.roofs):
        r = roof.flops / bw
        if roof is main or model.dtype in name.split("/"):
            legend.append(f"{name} datasheet")
            plt.plot(
                [x0, r, x1],
                [x0 * bw / 1e12, roof.flops / 1e12, roof.flops / 1e12],
                label=legend[-1],
                color="blue",
            )
        else:
            plt.plot([r, x1], [roof.flops / 1e12] * 2, color="gray")
            flag = " ⚑" if roof.flag else ""
            side_roofs.append(
                (f"{name} {roof.flops / 1e12:,.0f}{flag}", r * 1.3, roof.flops / 1e12)
            )
    mroof = model.roof(measured=True)
    if model.measured_bandwidth:
        mbw = model.measured_bandwidth
        top = mroof.flops if mroof else max(r.flops for r in model.roofs)
        xs = [x0, top / mbw] + ([x1] if mroof else [])
        legend.append(f"{model.dtype} measured" if mroof else "measured bandwidth")
        plt.plot(
            xs,
            [x * mbw / 1e12 for x in xs[:2]] + ([top / 1e12] if mroof else []),
            label=legend[-1],
            color="orange",
        )
    labels.legend(legend)
    labelled: set[str] = set()
    if main:
        # First: a point in the ridge's cell is drawn over it, not hidden
        # (a 405B model's decode at batch 256 sat under the diamond).
        plt.scatter([model.ridge], [main.flops / 1e12], marker="◆", color="blue")
        labels.mark(model.ridge, main.flops / 1e12)
    for p in model.points:
        plt.scatter([p.intensity], [p.flops_per_s / 1e12], marker="●", color="red")
        labels.mark(p.intensity, p.flops_per_s / 1e12)
    for p in model.estimates:  # a model, not a measurement: hollow, its own colour
        plt.scatter([p.intensity], [p.flops_per_s / 1e12], marker="○", color="magenta")
        labels.mark(p.intensity, p.flops_per_s / 1e12)
    for p in model.estimates:
        where = math.log(p.intensity / x0) / math.log(x1 / x0) if p.intensity > 0 else 0.5
        y = p.flops_per_s / 1e12
        labels.place(
            plt,
            f"{p.exercise} (model)",
            p.intensity,
            [labels.row_y(y, -1), labels.row_y(y, 1)],
            "right" if where > 0.75 else "left" if where < 0.25 else "center",
            "magenta",
        )
    for p in model.points:
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            # Centred labels near an edge get clipped ("prefi"): anchor them
            # on the side that has room.
            where = math.log(p.intensity / x0) / math.log(x1 / x0) if p.intensity > 0 else 0.5
            align = "right" if where > 0.75 else "left" if where < 0.25 else "center"
            y = p.flops_per_s / 1e12
            places = [labels.row_y(y, 1), labels.row_y(y, -1)]
            # Its label with its value where that fits, else its name alone.
            for text in [p.label, p.exercise] if p.label else [p.exercise]:
                if labels.place(plt, text, p.intensity, places, align, "red"):
                    break
    if main:
        # Left of the ridge, on the roof's row, is always empty: the slope is below.
        y = main.flops / 1e12
        labels.place(
            plt,
            f"ridge {model.ridge:.0f} FLOP/B ",
            model.ridge / 1.15,
            [y, labels.row_y(y, 1), labels.row_y(y, -1)],
            "right",
            "blue",
        )
    for text, x, y in side_roofs:
        # On its line or just above, never below: there it would name the next roof.
        labels.place(plt, text, x, [y, labels.row_y(y, 1)], "left", "gray")
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
    draw(fig, model, plot_cells(model, max(width, 40), max(height, 12)))
    text = fig.build()
    return text if color else cast(str, plotext.uncolorize(text))  # plotext ships no types


BLUE, ORANGE, GRAY, RED = "#1f5fbf", "#e07b00", "#888888", "#c62828"
MAGENTA = "#9c27b0"  # the CPU estimates (a model)


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
            out.append(
                (
                    [r, x1],
                    [top, top],
                    f"{name} {top:,.0f}" + (" ⚑" if roof.flag else ""),
                    GRAY,
                    False,
                )
            )
    if model.measured_bandwidth:
        mbw, mroof = model.measured_bandwidth, model.roof(measured=True)
        top = mroof.flops if mroof else max(r.flops for r in model.roofs)
        xs = [x0, top / mbw] + ([x1] if mroof else [])
        ys = [x * mbw / 1e12 for x in xs[:2]] + ([top / 1e12] if mroof else [])
        out.append(
            (xs, ys, f"{model.dtype} measured" if mroof else "measured bandwidth", ORANGE, True)
        )
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

    def text(
        s: str,
        x: float,
        y: float,
        anchor: str = "start",
        color: str = "#222",
        size: int = 12,
        extra: str = "",
    ) -> str:
        return (
            f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{color}" '
            f'font-size="{size}"{extra}>{escape(s)}</text>'
        )

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">',
        f"<title>{escape(title(model))}</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    for t in decades(x0, x1):
        out.append(
            f'<line x1="{px(t):.1f}" y1="{top}" x2="{px(t):.1f}" y2="{top + ph}" stroke="#e0e0e0"/>'
        )
        out.append(text(tick_label(t), px(t), top + ph + 18, "middle"))
    for t in decades(y0, y1):
        out.append(
            f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + pw}" y2="{py(t):.1f}" '
            'stroke="#e0e0e0"/>'
        )
        out.append(text(tick_label(t), left - 8, py(t) + 4, "end"))
    out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
    out.append(text(title(model), width / 2, 28, "middle", size=15, extra=' font-weight="bold"'))
    out.append(text("arithmetic intensity (FLOP/byte)", left + pw / 2, height - 15, "middle"))
    out.append(
        text(
            "TFLOP/s",
            18,
            top + ph / 2,
            "middle",
            extra=f' transform="rotate(-90 18 {top + ph / 2:.0f})"',
        )
    )
    for xs, ys, label, color, dashed in _lines(model):
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, ys, strict=True))
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        out.append(
            f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        out.append(text(label, px(xs[-1]) + 6, py(ys[-1]) + 4, color=color))
    if main := model.roof():
        rx, ry = px(model.ridge), py(main.flops / 1e12)
        out.append(f'<circle cx="{rx:.1f}" cy="{ry:.1f}" r="5" fill="{BLUE}"/>')
        out.append(text(f"ridge {model.ridge:.0f} FLOP/B", rx, ry + 20, "middle", BLUE))
    out += _svg_points(model, px, py, text)
    if model.measured_label:
        out.append(
            text(f"measured: {model.measured_label}", left, height - 38, size=10, color=ORANGE)
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _svg_points(
    model: Model,
    px: Callable[[float], float],
    py: Callable[[float], float],
    text: Callable[[str, float, float, str, str], str],
) -> list[str]:
    """The graded runs as dots with a tooltip each, one label per exercise."""
    out = []
    labelled: set[str] = set()
    for p in model.points:
        cx, cy = px(p.intensity), py(p.flops_per_s / 1e12)
        tip = (
            f"{p.exercise} {p.case} {p.dtype}: {p.intensity:.3g} FLOP/B, "
            f"{p.flops_per_s / 1e12:.3g} TFLOP/s, {p.bound}"
        )
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{RED}">'
            f"<title>{escape(tip)}</title></circle>"
        )
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            out.append(text(p.label or p.exercise, cx, cy - 9, "middle", RED))
    for p in model.estimates:  # a model, not a measurement: hollow
        cx, cy = px(p.intensity), py(p.flops_per_s / 1e12)
        tip = f"{p.exercise} {p.case}: at best {p.fraction or 0:.0%} of the roof (CPU model)"
        out.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="none" stroke="{MAGENTA}" '
            f'stroke-width="2"><title>{escape(tip)}</title></circle>'
        )
        out.append(text(f"{p.exercise} (model)", cx, cy + 16, "middle", MAGENTA))
    return out


def save_png(model: Model, path: Path) -> None:
    """The same plot through matplotlib; PlotUnavailable when it is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as mpl
    except ImportError:
        raise PlotUnavailable(
            "PNG export needs matplotlib: pip install 'gpulab[plot]' "
            "(or export to .svg, which needs nothing)"
        ) from None
    x0, x1, y0, y1 = axes(model)
    fig, ax = mpl.subplots(figsize=(9, 5.6), dpi=120)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    for xs, ys, label, color, dashed in _lines(model):
        ax.plot(xs, ys, color=color, linestyle="--" if dashed else "-", label=label)
    if main := model.roof():
        ax.plot([model.ridge], [main.flops / 1e12], "D", color=BLUE)
        ax.annotate(
            f"ridge {model.ridge:.0f} FLOP/B",
            (model.ridge, main.flops / 1e12),
            textcoords="offset points",
            xytext=(0, -16),
            ha="center",
            color=BLUE,
        )
    labelled: set[str] = set()
    for p in model.points:
        ax.plot([p.intensity], [p.flops_per_s / 1e12], "o", color=RED)
        if p.exercise not in labelled:
            labelled.add(p.exercise)
            ax.annotate(
                p.label or p.exercise,
                (p.intensity, p.flops_per_s / 1e12),
                textcoords="offset points",
                xytext=(0, 7),
                ha="center",
                color=RED,
            )
    ax.set_title(title(model))
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="major", color="#e0e0e0")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path)
    mpl.close(fig)


def export(model: Model, path: Path) -> None:
    """Write the plot as .svg (no dependency) or .png (needs matplotlib)."""
    suffix = Path(path).suffix.lower()
    if suffix == ".svg":
        Path(path).write_text(to_svg(model), encoding="utf-8")
    elif suffix == ".png":
        save_png(model, Path(path))
    else:
        raise ValueError(f"cannot export to {Path(path).name}: use a .svg or .png file name")
