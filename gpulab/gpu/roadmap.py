"""The hardware roadmap the book names, checked against the hardware table.

The book's Part I closes its hardware section with a roadmap from the Colab
T4 to Vera Rubin. Every ratio here is computed from `gpulab.gpu.hardware`, never
copied from the text, and each of the book's claims is set beside the table:
where they disagree, the roadmap says so and shows the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from gpulab.gpu.hardware import GPU, GPUS

# One step along CHAIN (`ratios`); "from" is no identifier, hence the call syntax.
Ratio = TypedDict(
    "Ratio",
    {
        "from": str,
        "to": str,
        "bandwidth": float,
        "tflops_16bit": float | None,
        "tflops_lowest": float | None,
        "lowest": str,  # "fp8 → fp4", or "" where a GPU has no narrow format
        "ridge_16bit": float | None,
        "flags": list[str],
    },
)


class RidgeRow(TypedDict):
    """A GPU's dense ridge point (FLOP/byte) per RIDGE_COLUMNS label."""

    key: str
    name: str
    ridges: dict[str, float | None]


class RoadmapGpu(TypedDict):
    key: str
    name: str
    year: str
    cc: str
    memory_gb: float
    bandwidth_tbs: float
    tflops: dict[str, float]
    flags: dict[str, str]


class RoadmapGeneration(TypedDict):
    arch: str
    book: list[str]
    gpus: list[RoadmapGpu]


class ClaimRow(TypedDict):
    claim: str
    verdict: str
    note: str


class Roadmap(TypedDict):
    """`gpulab hardware --roadmap --json`: the roadmap as data."""

    source: str
    generations: list[RoadmapGeneration]
    ratios: list[Ratio]
    ridges: list[RidgeRow]
    ridge_trend: str
    claims: list[ClaimRow]


@dataclass(frozen=True)
class Generation:
    arch: str
    gpu_keys: tuple[str, ...]
    book: tuple[str, ...]  # what the book says about this generation


@dataclass(frozen=True)
class Claim:
    """One of the book's claims, with what the table says about it."""

    text: str  # the book's words
    verdict: str  # "agrees", "disagrees", "unconfirmed" or "not checkable"
    note: str  # the arithmetic or the reason

    def as_dict(self) -> ClaimRow:
        return {"claim": self.text, "verdict": self.verdict, "note": self.note}


BOOK = "Part I, 'Hardware roadmap (mid-2026)'"

GENERATIONS: tuple[Generation, ...] = (
    Generation("Turing", ("t4",), ("Notebooks are validated on Colab T4 (Turing, cc 7.5)",)),
    Generation("Ampere", ("a100-80gb",), ("spot-checked on A100",)),
    Generation("Hopper", ("h100-sxm", "h200"), ("spot-checked on H100",)),
    Generation(
        "Blackwell",
        ("b200", "gb200"),
        (
            "the current generation in production (B200, cc 10.0)",
            "180 GB HBM3e, ~8 TB/s bandwidth",
            "native FP4 tensor cores at 9000 TFLOPS",
        ),
    ),
    # Not in the book: shipping since late 2025, between its two platforms.
    Generation("Blackwell Ultra", ("b300", "gb300"), ()),
    Generation(
        "Vera Rubin",
        ("rubin",),
        (
            "announced GTC 2026; partner clouds planned for H2 2026",
            "Rubin GPU with 288 GB HBM4, 50 PFLOPS FP4 (2.5× B200)",
            "paired with the Vera CPU (72 ARM Grace cores) over NVLink 6",
            "targeting 5× Blackwell inference throughput at 10× lower token cost",
        ),
    ),
)

# The chain of GPUs whose step-to-step ratios the roadmap shows.
CHAIN = ("t4", "a100-80gb", "h100-sxm", "h200", "b200", "rubin")

# Columns of the per-dtype ridge table: (label, dtypes tried in order).
RIDGE_COLUMNS = (
    ("FP32", ("fp32",)),
    ("TF32", ("tf32",)),
    ("16-bit", ("bf16", "fp16")),
    ("FP8", ("fp8",)),
    ("FP4", ("fp4",)),
)


def _peak_low_precision(g: GPU) -> tuple[str, float] | None:
    """The GPU's narrowest dense format and its TFLOP/s."""
    for d in ("fp4", "fp8", "bf16", "fp16"):
        if d in g.tflops:
            return d, g.tflops[d]
    return None


def _sixteen(g: GPU) -> float | None:
    return g.tflops.get("bf16") or g.tflops.get("fp16")


def ratios() -> list[Ratio]:
    """Step-by-step ratios along CHAIN, from the table: bandwidth, 16-bit, lowest precision."""
    rows = []
    for a, b in zip(CHAIN, CHAIN[1:], strict=False):
        ga, gb = GPUS[a], GPUS[b]
        sa, sb = _sixteen(ga), _sixteen(gb)
        la, lb = _peak_low_precision(ga), _peak_low_precision(gb)
        row: Ratio = {
            "from": ga.name,
            "to": gb.name,
            "bandwidth": gb.bandwidth_tbs / ga.bandwidth_tbs,
            "tflops_16bit": sb / sa if sa and sb else None,
            "tflops_lowest": lb[1] / la[1] if la and lb else None,
            "lowest": f"{la[0]} → {lb[0]}" if la and lb else "",
            "ridge_16bit": gb.ridge("bf16") or gb.ridge("fp16"),
            "flags": sorted({k for k in ("bandwidth", "fp4") if k in ga.flags or k in gb.flags}),
        }
        rows.append(row)
    return rows


def ridge_table(keys: tuple[str, ...] = CHAIN) -> list[RidgeRow]:
    """Per GPU, the dense ridge point (FLOP/byte) of each dtype column; None where absent."""
    rows: list[RidgeRow] = []
    for k in keys:
        g = GPUS[k]
        cells: dict[str, float | None] = {}
        for label, dtypes in RIDGE_COLUMNS:
            cells[label] = next((r for d in dtypes if (r := g.ridge(d)) is not None), None)
        rows.append({"key": k, "name": g.name, "ridges": cells})
    return rows


def _short(name: str) -> str:
    return name.split()[0]  # "A100 80GB SXM" -> "A100", "Rubin (announced)" -> "Rubin"


def _trend(points: list[tuple[str, float]]) -> str:
    """'rose at every step', 'fell at every step', or where it rose and where it fell."""
    steps = list(zip(points, points[1:], strict=False))
    up = [f"{a[0]} → {b[0]}" for a, b in steps if b[1] > a[1]]
    down = [f"{a[0]} → {b[0]}" for a, b in steps if b[1] < a[1]]
    if up and not down:
        return "rose at every step"
    if down and not up:
        return "fell at every step"
    return f"fell at {' and '.join(down)} but rose at {' and '.join(up)}"


def ridge_trend() -> str:
    """What the table says about the ridge along CHAIN: computed, never asserted."""
    rows = ridge_table()
    sixteen = [(_short(r["name"]), v) for r in rows if (v := r["ridges"]["16-bit"]) is not None]
    lo, hi = min(v for _, v in sixteen), max(v for _, v in sixteen)
    narrow = [
        (_short(r["name"]), v, "FP4" if r["ridges"]["FP4"] else "FP8")
        for r in rows
        if (v := r["ridges"]["FP4"] or r["ridges"]["FP8"]) is not None
    ]
    top = max(narrow, key=lambda p: p[1])
    flagged = next(g for g in GPUS.values() if _short(g.name) == top[0]).flags.get(top[2].lower())
    return (
        f"The 16-bit ridge {_trend(sixteen)} "
        f"({' → '.join(f'{n} {v:.0f}' for n, v in sixteen)} FLOP/B): more bandwidth on the "
        f"same tensor cores moves it left, new tensor cores move it right. Every "
        f"generation sits between {lo:.0f} and {hi:.0f}, so a kernel below about "
        f"{lo:.0f} FLOP/B is memory-bound on all of them. Only the narrowest formats "
        f"climb: {top[2]} on {top[0]} needs {top[1]:.0f} FLOP/B, {top[1] / hi:.1f}× the "
        f"highest 16-bit ridge{' (an announced, flagged figure)' if flagged else ''}."
    )


def claims() -> list[Claim]:
    """The book's checkable claims beside the table."""
    return [*_shipping_claims(), *_rubin_claims()]


def _shipping_claims() -> list[Claim]:
    """Claims about the table's own entries: T4, B200, Rubin's memory."""
    b200, rubin, t4 = GPUS["b200"], GPUS["rubin"], GPUS["t4"]
    return [
        Claim(
            "T4 is Turing, cc 7.5",
            "agrees" if t4.cc == "7.5" else "disagrees",
            f"table: T4 cc {t4.cc}",
        ),
        Claim(
            "B200 is cc 10.0",
            "agrees" if b200.cc == "10.0" else "disagrees",
            f"table: B200 cc {b200.cc}",
        ),
        Claim(
            "B200: 180 GB HBM3e",
            "agrees",
            f"table: {b200.memory_gb:g} GB usable; flagged: {b200.flags.get('memory', '')}",
        ),
        Claim(
            "B200: ~8 TB/s",
            "agrees" if abs(b200.bandwidth_tbs - 8) < 0.5 else "disagrees",
            f"table: {b200.bandwidth_tbs:g} TB/s; flagged: {b200.flags.get('bandwidth', '')}",
        ),
        Claim(
            "B200: FP4 at 9000 TFLOPS",
            "agrees" if b200.tflops.get("fp4") == 9000 else "disagrees",
            f"table: {b200.tflops.get('fp4'):,.0f} TFLOP/s dense FP4 "
            f"({b200.sparse['fp4'].value:,.0f} sparse)",
        ),
        Claim(
            "Rubin: 288 GB HBM4",
            "agrees" if rubin.memory_gb == 288 else "disagrees",
            f"table: {rubin.memory_gb:g} GB (announced)",
        ),
    ]


def _known(value: float | str | None) -> float:
    """A figure the table gives as a number (a TypeError otherwise, as the
    arithmetic on it would raise)."""
    if isinstance(value, str) or value is None:
        raise TypeError(f"not a number: {value!r}")
    return value


def _rubin_claims() -> list[Claim]:
    """Claims about Vera Rubin's announced figures, each put on one basis."""
    b200, gb200, rubin = GPUS["b200"], GPUS["gb200"], GPUS["rubin"]
    rubin_claim = _known(rubin.claims["fp4"].value)  # 50,000 TFLOPS, the book's "50 PFLOPS"
    dense = rubin_claim / b200.tflops["fp4"]
    vs_sparse_b = rubin_claim / _known(b200.sparse["fp4"].value)
    vs_sparse_gb = rubin_claim / _known(gb200.sparse["fp4"].value)
    train = rubin.tflops["fp4"] / b200.tflops["fp4"]
    vs_gb = rubin_claim / gb200.tflops["fp4"]
    bw = rubin.bandwidth_tbs / b200.bandwidth_tbs
    return [
        Claim(
            "Rubin: 50 PFLOPS FP4 (2.5× B200)",
            "disagrees",
            f"50,000 / {b200.tflops['fp4']:,.0f} (B200 dense FP4) = {dense:.1f}×, not 2.5×. "
            f"2.5× holds only against GB200's sparse FP4: 50,000 / "
            f"{gb200.sparse['fp4'].value:,.0f} = {vs_sparse_gb:.1f}× (B200 sparse: "
            f"{vs_sparse_b:.1f}×). Rubin's announced training figure "
            f"{rubin.tflops['fp4']:,.0f} gives {train:.1f}× B200 dense. Compare on one basis.",
        ),
        Claim(
            "Vera Rubin: announced GTC 2026",
            "disagrees",
            "NVIDIA first showed Vera Rubin's figures (288 GB HBM4, 50 PF NVFP4, the Vera "
            "CPU) at GTC 2025, a year earlier, for shipping in 2026.",
        ),
        Claim(
            "Vera CPU: 72 ARM Grace cores",
            "disagrees",
            "72 cores is Grace's count (the CPU of GB200). Vera was announced with 88 "
            "custom Arm cores.",
        ),
        Claim(
            "Vera CPU paired with the GPU over NVLink 6",
            "disagrees",
            f"NVLink 6 ({_known(rubin.nvlink_gbs) / 1000:g} TB/s a GPU, announced) links Rubin GPUs "
            "to one another; the Vera CPU reaches the GPUs over NVLink-C2C, as Grace does "
            "on GB200.",
        ),
        Claim(
            "5× Blackwell inference throughput",
            "agrees",
            f"checkable per GPU: 50,000 (Rubin's claimed NVFP4) / "
            f"{gb200.tflops['fp4']:,.0f} (GB200 dense FP4) = {vs_gb:.1f}×. But that is the "
            f"same 50 PF the book calls '2.5× B200': on one basis the two claims cannot both "
            f"hold. Decode is bandwidth-bound, and bandwidth grows {bw:.2f}× (flagged): the "
            "rest of a 5× in tokens must come from batching, lower precision and "
            "rack-scale NVLink.",
        ),
        Claim("10× lower token cost", "not checkable", "a price claim; the table has no prices."),
    ]


def roadmap_data() -> Roadmap:
    gens: list[RoadmapGeneration] = []
    for gen in GENERATIONS:
        gens.append(
            {
                "arch": gen.arch,
                "book": list(gen.book),
                "gpus": [
                    {
                        "key": k,
                        "name": GPUS[k].name,
                        "year": GPUS[k].year,
                        "cc": GPUS[k].cc,
                        "memory_gb": GPUS[k].memory_gb,
                        "bandwidth_tbs": GPUS[k].bandwidth_tbs,
                        "tflops": GPUS[k].tflops,
                        "flags": GPUS[k].flags,
                    }
                    for k in gen.gpu_keys
                ],
            }
        )
    return {
        "source": BOOK,
        "generations": gens,
        "ratios": ratios(),
        "ridges": ridge_table(),
        "ridge_trend": ridge_trend(),
        "claims": [c.as_dict() for c in claims()],
    }


def _ridge_renderable() -> Any:
    from rich.table import Table

    t = Table(title="Ridge point per dtype (dense FLOP/byte)", title_justify="left", expand=False)
    t.add_column("GPU")
    for label, _ in RIDGE_COLUMNS:
        t.add_column(label, justify="right")
    for r in ridge_table():
        t.add_row(r["name"], *(f"{v:.0f}" if v is not None else "–" for v in r["ridges"].values()))
    return t


def _x(v: float | None) -> str:
    return f"{v:.1f}×" if v else "–"


def roadmap_renderable() -> Any:
    """A rich Group: generations, step ratios, and the book's claims checked."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    gens = Table(title="Generations the book names", title_justify="left", expand=False)
    for col in ("arch", "GPU", "year", "cc", "mem GB", "TB/s", "16-bit", "lowest"):
        gens.add_column(col, justify="right" if col in ("mem GB", "TB/s", "16-bit") else "left")
    for gen in GENERATIONS:
        for i, k in enumerate(gen.gpu_keys):
            g = GPUS[k]
            low = _peak_low_precision(g)
            sixteen = _sixteen(g)
            gens.add_row(
                gen.arch if i == 0 else "",
                g.name,
                g.year,
                g.cc or "?",
                f"{g.memory_gb:g}{' ⚑' if 'memory' in g.flags else ''}",
                f"{g.bandwidth_tbs:g}{' ⚑' if 'bandwidth' in g.flags else ''}",
                f"{sixteen:,.0f}" if sixteen else "?",
                f"{low[0]} {low[1]:,.0f}{' ⚑' if low[0] in g.flags else ''}" if low else "?",
            )
    steps = Table(
        title="Each step, computed from the table (dense TFLOP/s)",
        title_justify="left",
        expand=False,
    )
    for col in ("from → to", "bandwidth", "16-bit", "lowest precision", "ridge 16-bit"):
        steps.add_column(col)
    for r in ratios():
        ridge = r["ridge_16bit"]
        steps.add_row(
            f"{r['from']} → {r['to']}",
            _x(r["bandwidth"]) + (" ⚑" if "bandwidth" in r["flags"] else ""),
            _x(r["tflops_16bit"]),
            f"{_x(r['tflops_lowest'])} ({r['lowest']})" + (" ⚑" if "fp4" in r["flags"] else "")
            if r["lowest"]
            else "–",
            f"{ridge:.0f} FLOP/B" if ridge else "–",
        )
    parts: list[Any] = [
        gens,
        Text(""),
        steps,
        Text(ridge_trend(), style="dim"),
        Text(""),
        _ridge_renderable(),
        Text("The formulas stay; only the peaks change (the book).", style="dim"),
        Text(""),
        Text(f"The book's claims ({BOOK}) against the table", style="bold"),
    ]
    styles = {
        "agrees": "green",
        "disagrees": "red",
        "unconfirmed": "yellow",
        "not checkable": "yellow",
    }
    for c in claims():
        line = Text("  ")
        line.append(f"{c.verdict:<13}", style=styles.get(c.verdict, ""))
        line.append(f" “{c.text}”")
        parts.append(line)
        if c.verdict != "agrees" or not c.note.startswith("table:"):
            parts.append(Padding(Text(c.note, style="dim"), (0, 0, 0, 16)))
    parts.append(
        Text(
            "⚑ = flagged in the table (conflicting or unconfirmed); "
            "`gpulab hardware NAME` gives the reason.",
            style="dim",
        )
    )
    return Group(*parts)
