"""`gpulab hardware [NAME] [--json] [--roadmap]`: the datasheet table and the roadmap."""

from __future__ import annotations

import json
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded
from gpulab.gpu import hardware
from gpulab.gpu.hardware import DTYPES, GPU, GPUS, SOURCES, format_value


@guarded
def run(args: Any) -> int:
    if args.roadmap:
        from gpulab.gpu import roadmap

        if args.json:
            print(json.dumps(roadmap.roadmap_data(), indent=2, ensure_ascii=False))
        else:
            console().print(roadmap.roadmap_renderable())
        return 0
    gpus = list(GPUS.values())
    if args.name:
        gpu = hardware.match_gpu(args.name)
        if gpu is None:
            raise UsageError(f"unknown GPU {args.name!r}; known: {hardware.known_names()}")
        gpus = [gpu]
    if args.json:
        # One GPU's figures with the sources, or every GPU's and the default.
        doc = (
            {**gpus[0].as_dict(), "sources": dict(SOURCES)}
            if args.name
            else {
                "gpus": [g.as_dict() for g in gpus],
                "sources": dict(SOURCES),
                "default": hardware.DEFAULT_GPU,
            }
        )
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    con = console()
    if args.name:
        con.print(detail(gpus[0]))
    else:
        for part in overview(gpus):
            con.print(part)
    return 0


def _sixteen(g: GPU) -> str:
    if "bf16" in g.figures:
        return format_value(g, "bf16")
    if "fp16" in g.figures:
        return format_value(g, "fp16") + " ᶠ"
    return "–"


def overview(gpus: list[GPU]) -> list[Any]:
    """Three narrow tables (fit 80 columns), then the flags and the sources."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    def table(title: str, cols: list[str]) -> Table:
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        for i, c in enumerate(cols):
            t.add_column(c, justify="left" if i == 0 else "right", no_wrap=i == 0)
        return t

    ceil = table(
        "Datasheet ceilings (TB/s; dense TFLOP/s)",
        ["GPU", "TB/s", "FP32", "TF32", "FP16/BF16", "FP8", "FP4"],
    )
    ridge = table(
        "Ridge point (FLOP/byte) = dense TFLOP/s ÷ TB/s",
        ["GPU", "FP32", "TF32", "FP16/BF16", "FP8", "FP4"],
    )
    chip = table(
        "Memory, chip and board", ["GPU", "memory GB", "SMs", "L2 MB", "TDP W", "NVLink GB/s", "CC"]
    )
    for g in gpus:
        ceil.add_row(
            g.name,
            format_value(g, "bandwidth"),
            format_value(g, "fp32"),
            format_value(g, "tf32"),
            _sixteen(g),
            format_value(g, "fp8"),
            format_value(g, "fp4"),
        )
        r = g.ridges()
        cells = [f"{r[d]:.0f}" if d in r else "–" for d in ("fp32", "tf32")]
        cells.append(
            f"{r['bf16']:.0f}" if "bf16" in r else f"{r['fp16']:.0f}" if "fp16" in r else "–"
        )
        cells += [f"{r[d]:.0f}" if d in r else "–" for d in ("fp8", "fp4")]
        ridge.add_row(g.name, *cells)
        chip.add_row(
            g.name,
            f"{format_value(g, 'memory')} {g.memory_type}",
            format_value(g, "sms"),
            format_value(g, "l2"),
            format_value(g, "tdp"),
            format_value(g, "nvlink"),
            format_value(g, "cc"),
        )
    flags = Table.grid(padding=(0, 1))
    flags.add_column(no_wrap=True, style="yellow")
    flags.add_column(style="yellow")
    for g in gpus:
        for f, why in g.flags.items():
            flags.add_row(f" ⚑ {g.name} {f}", why)
    sources = Table.grid(padding=(0, 1))
    sources.add_column(no_wrap=True, style="dim")
    sources.add_column(style="dim")
    for key, text in SOURCES.items():
        sources.add_row(f" {key}", text)
    return [
        ceil,
        ridge,
        chip,
        Text("– none; ? not published; ᶠ FP16 only (no bf16); ⚑ flagged:", style="dim"),
        flags,
        Text("Sources (`gpulab hardware NAME` shows each figure's):", style="dim"),
        sources,
    ]


def detail(g: GPU) -> Any:
    """Every figure of one GPU with its unit, basis, sources and flag."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    t = Table(
        title=f"{g.name} ({g.arch}, {g.year}{', announced' if g.announced else ''})",
        title_justify="left",
    )
    for c in ("figure", "value", "basis", "source", "flag / note"):
        t.add_column(c, overflow="fold")
    for name in hardware.FIELDS:
        f = g.figures.get(name)
        if f is None:
            continue
        unit = hardware.UNITS.get(name, "")
        note = "; ".join(x for x in (f"⚑ {f.flag}" if f.flag else "", f.note) if x)
        t.add_row(
            name,
            f"{format_value(g, name, flag_mark=False)} {unit}".strip(),
            f.basis,
            ", ".join(f.sources),
            note,
        )
    for label, extra in (("sparse", g.sparse), ("claimed", g.claims)):
        for d, f in extra.items():
            t.add_row(
                f"{d} ({label})",
                f"{f.value:,.0f} TFLOP/s",
                f.basis,
                ", ".join(f.sources),
                "; ".join(x for x in (f"⚑ {f.flag}" if f.flag else "", f.note) if x),
            )
    parts: list[Any] = [t]
    ridges = g.ridges()
    if ridges:
        parts.append(
            Text(
                "Ridge point (dense): "
                + ", ".join(f"{d} {r:,.0f} FLOP/B" for d, r in ridges.items() if d in DTYPES)
            )
        )
    if g.measured:
        m = g.measured
        tf = ", ".join(f"{d} {v:g}" for d, v in m.get("tflops", {}).items())
        parts.append(
            Text(
                f"Measured by gpulab on an {m['device']} ({m['date']}): copy "
                f"{m['copy_tbs']} TB/s, read {m['read_tbs']} TB/s; matmul TFLOP/s "
                f"{tf}",
                style="dim",
            )
        )
    if g.aliases:
        parts.append(Text(f"Also matches: {', '.join(g.aliases)}", style="dim"))
    return Group(*parts)
