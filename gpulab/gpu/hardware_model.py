"""The shape of the hardware table: figures and GPUs (no UI, no heavy imports).

The rows are data (gpulab/data/gpus.toml, read by `gpulab.gpu.hardware`); this
module holds what a row is made of. Every figure is a `Figure`: a value, where
it came from (keys of the table's [sources], `gpulab.gpu.hardware.SOURCES`),
whether a throughput is dense or sparse, and a flag with the reason when the
figure is doubtful or conflicting (⚑ in docs/hardware.md). Flags are kept,
never smoothed away: a tutor that hides a doubtful number teaches it as fact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypedDict

# Dtypes in the order tables show them; "fp16" and "bf16" share a column.
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
FIELDS = ("memory", "bandwidth", *DTYPES, "sms", "l2", "tdp", "nvlink", "cc")
# L2 in NVIDIA's "MB", which the devices report as MiB (an H100 SXM: 50 MiB).
# TDP is the board's maximum power, the cap a sustained matmul runs into
# (lesson 01). NVLink is per GPU, both directions together, as NVIDIA quotes it.
UNITS = {
    "memory": "GB",
    "bandwidth": "TB/s",
    "sms": "",
    "l2": "MB",
    "tdp": "W",
    "nvlink": "GB/s",
    "cc": "",
    **{d: "TFLOP/s" for d in DTYPES},
}


class MeasuredCeilings(TypedDict, total=False):
    """Ceilings measured on a GPU, in TB/s and dense TFLOP/s per dtype: the
    table's reference run (`GPU.measured`), or the ceiling keys of what the
    probe's microbenchmarks cached (the record is
    gpulab.wire.microbench.Ceilings; `read_ceilings` keeps these keys of it,
    checked: a failed measurement's None is left out), with where they came
    from (`source`). The bench's roofs are these too (gpulab.targets.bench)."""

    device: str  # the name the device reported
    date: str
    copy_tbs: float
    read_tbs: float
    write_tbs: float
    tflops: dict[str, float]
    source: str


def read_ceilings(raw: Any) -> MeasuredCeilings:
    """The MeasuredCeilings keys of a measurement (a probe's cached file, the
    table's reference run), in the order it has them; a field of the wrong
    type is left out (a cached file may come from anywhere)."""
    out = MeasuredCeilings()
    for key, v in raw.items() if isinstance(raw, dict) else ():
        number = isinstance(v, (int, float)) and not isinstance(v, bool)
        if key == "device" and isinstance(v, str):
            out["device"] = v
        elif key == "date" and isinstance(v, str):
            out["date"] = v
        elif key == "source" and isinstance(v, str):
            out["source"] = v
        elif key == "copy_tbs" and number:
            out["copy_tbs"] = v
        elif key == "read_tbs" and number:
            out["read_tbs"] = v
        elif key == "write_tbs" and number:
            out["write_tbs"] = v
        elif key == "tflops" and isinstance(v, dict):
            out["tflops"] = {
                d: t
                for d, t in v.items()
                if isinstance(d, str) and isinstance(t, (int, float)) and not isinstance(t, bool)
            }
    return out


class FigureDict(TypedDict):
    value: float | str | None
    sources: list[str]
    basis: str
    flag: str
    note: str


class GpuDict(TypedDict):
    """A GPU as `gpulab hardware --json` writes it."""

    key: str
    name: str
    arch: str
    year: str
    announced: bool
    memory_type: str
    aliases: list[str]
    figures: dict[str, FigureDict]
    sparse_tflops: dict[str, FigureDict]
    claims: dict[str, FigureDict]
    ridge_flop_per_byte: dict[str, float]
    flags: dict[str, str]
    sources: list[str]
    measured_reference: MeasuredCeilings | None


@dataclass(frozen=True)
class Figure:
    """One datasheet figure: value (None if unknown), sources, basis, flag."""

    value: float | str | None
    sources: tuple[str, ...] = ("vendor",)
    basis: str = ""  # "dense" or "sparse" for TFLOP/s figures
    flag: str = ""  # why the figure is doubtful; empty when it is not
    note: str = ""

    def as_dict(self) -> FigureDict:
        return {
            "value": self.value,
            "sources": list(self.sources),
            "basis": self.basis,
            "flag": self.flag,
            "note": self.note,
        }


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    bandwidth_tbs: float  # HBM/GDDR bandwidth, TB/s (10^12 bytes/s)
    tflops: dict[str, float] = field(default_factory=dict)  # dense TFLOP/s per dtype
    memory_gb: float = 0.0
    sms: int | None = None
    l2_mb: float | None = None
    tdp_w: float | None = None  # board power limit
    nvlink_gbs: float | None = None  # per GPU, both directions
    cc: str = ""
    aliases: tuple[str, ...] = ()
    flags: dict[str, str] = field(default_factory=dict)  # field -> why it is doubtful
    sources: tuple[str, ...] = ()
    arch: str = ""
    year: str = ""
    memory_type: str = ""
    figures: dict[str, Figure] = field(default_factory=dict)  # field -> Figure
    sparse: dict[str, Figure] = field(default_factory=dict)  # dtype -> sparse TFLOP/s
    claims: dict[str, Figure] = field(default_factory=dict)  # announced, other basis
    measured: MeasuredCeilings = field(default_factory=MeasuredCeilings)  # reference run
    announced: bool = False  # not shipped: figures are announcements

    def ridge(self, dtype: str) -> float | None:
        """FLOP per byte at which this GPU's compute roof meets its memory slope."""
        t = self.tflops.get(dtype)
        return (t * 1e12) / (self.bandwidth_tbs * 1e12) if t and self.bandwidth_tbs else None

    def ridges(self) -> dict[str, float]:
        """Ridge intensity (FLOP/byte) per dtype, dense figures."""
        return {d: r for d in DTYPES if (r := self.ridge(d)) is not None}

    def figure(self, name: str) -> Figure:
        return self.figures.get(name, Figure(None, ()))

    def default_dtype(self) -> str:
        """The dtype a roofline shows unless asked: 16-bit where the GPU has it."""
        for d in ("bf16", "fp16", "fp8", "fp4", "fp32"):
            if d in self.tflops:
                return d
        return "fp32"

    def as_dict(self) -> GpuDict:
        return {
            "key": self.key,
            "name": self.name,
            "arch": self.arch,
            "year": self.year,
            "announced": self.announced,
            "memory_type": self.memory_type,
            "aliases": list(self.aliases),
            "figures": {k: f.as_dict() for k, f in self.figures.items()},
            "sparse_tflops": {k: f.as_dict() for k, f in self.sparse.items()},
            "claims": {k: f.as_dict() for k, f in self.claims.items()},
            "ridge_flop_per_byte": {d: round(r, 1) for d, r in self.ridges().items()},
            "flags": dict(self.flags),
            "sources": list(self.sources),
            "measured_reference": self.measured or None,
        }


def make_gpu(
    key: str,
    name: str,
    arch: str,
    year: str,
    memory_type: str,
    figures: dict[str, Figure],
    aliases: tuple[str, ...] = (),
    sparse: dict[str, Figure] | None = None,
    measured: MeasuredCeilings | None = None,
    claims: dict[str, Figure] | None = None,
    announced: bool = False,
) -> GPU:
    """Build a GPU whose convenience fields all come from its figures."""

    def val(k: str) -> Any:
        f = figures.get(k)
        return f.value if f else None

    tflops = {
        d: float(val(d))
        for d in DTYPES
        if isinstance(val(d), (int, float)) and figures[d].basis == "dense"
    }
    srcs = sorted({s for f in figures.values() for s in f.sources})
    return GPU(
        key=key,
        name=name,
        bandwidth_tbs=float(val("bandwidth") or 0.0),
        tflops=tflops,
        memory_gb=float(val("memory") or 0.0),
        sms=int(val("sms")) if isinstance(val("sms"), (int, float)) else None,
        l2_mb=float(val("l2")) if isinstance(val("l2"), (int, float)) else None,
        tdp_w=float(val("tdp")) if isinstance(val("tdp"), (int, float)) else None,
        nvlink_gbs=float(val("nvlink")) if isinstance(val("nvlink"), (int, float)) else None,
        cc=str(val("cc") or ""),
        aliases=aliases,
        flags={k: f.flag for k, f in figures.items() if f.flag},
        sources=tuple(srcs),
        arch=arch,
        year=year,
        memory_type=memory_type,
        figures=dict(figures),
        sparse=dict(sparse or {}),
        measured=MeasuredCeilings(**(measured or {})),
        claims=dict(claims or {}),
        announced=announced,
    )
