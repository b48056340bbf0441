"""Datasheet figures of GPUs, each with its source (no UI, no heavy imports).

Every figure is a `Figure`: a value, where it came from (keys of `SOURCES`),
whether a throughput is dense or sparse, and a flag with the reason when the
figure is doubtful or conflicting (⚑ in HARDWARE.md). Flags are kept, never
smoothed away: a tutor that hides a doubtful number teaches it as fact.

The rest of gpulab relies on `GPUS`, `match_gpu(name)`, `DEFAULT_GPU` and the
`GPU` fields `bandwidth_tbs`, `tflops` (dense TFLOP/s per dtype) and `ridge`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Dtypes in the order tables show them; "fp16" and "bf16" share a column.
DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "fp4")
FIELDS = ("memory", "bandwidth", *DTYPES, "sms", "l2", "cc")
UNITS = {"memory": "GB", "bandwidth": "TB/s", "sms": "", "l2": "MB", "cc": "",
         **{d: "TFLOP/s" for d in DTYPES}}

SOURCES: dict[str, str] = {
    "vendor": "vendor datasheets (NVIDIA, AMD) as collected in stas00/ml-engineering "
              "compute/accelerator/README.md; dense = 'without sparsity'",
    "whitepaper": "NVIDIA architecture whitepapers (Volta, Ampere, Hopper): SM counts, L2",
    "cuda-gpus": "developer.nvidia.com/cuda-gpus: compute capability",
    "kernelagent": "meta-pytorch/KernelAgent gpu_specs_database.py: SM counts, L2 "
                   "(beware: it lists H100 FP16 1979 'without sparsity', the sparse figure)",
    "derived": "derived here: CUDA cores ÷ cores per SM (64 on Turing, 128 on GA10x)",
    "third-party": "third-party die listings; no vendor figure found",
    "announced": "NVIDIA keynotes and press releases, not a datasheet",
    "measured": "measured by gpulab on an H200, 2026-11-30 (torch 2.11, Triton 3.6), "
                "see HARDWARE.md",
}


@dataclass(frozen=True)
class Figure:
    """One datasheet figure: value (None if unknown), sources, basis, flag."""

    value: float | str | None
    sources: tuple[str, ...] = ("vendor",)
    basis: str = ""  # "dense" or "sparse" for TFLOP/s figures
    flag: str = ""  # why the figure is doubtful; empty when it is not
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "sources": list(self.sources), "basis": self.basis,
                "flag": self.flag, "note": self.note}


@dataclass(frozen=True)
class GPU:
    key: str
    name: str
    bandwidth_tbs: float  # HBM/GDDR bandwidth, TB/s (10^12 bytes/s)
    tflops: dict[str, float] = field(default_factory=dict)  # dense TFLOP/s per dtype
    memory_gb: float = 0.0
    sms: int | None = None
    l2_mb: float | None = None
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
    measured: dict[str, Any] = field(default_factory=dict)  # reference measurements
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

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key, "name": self.name, "arch": self.arch, "year": self.year,
            "announced": self.announced, "memory_type": self.memory_type,
            "aliases": list(self.aliases),
            "figures": {k: f.as_dict() for k, f in self.figures.items()},
            "sparse_tflops": {k: f.as_dict() for k, f in self.sparse.items()},
            "claims": {k: f.as_dict() for k, f in self.claims.items()},
            "ridge_flop_per_byte": {d: round(r, 1) for d, r in self.ridges().items()},
            "flags": dict(self.flags), "sources": list(self.sources),
            "measured_reference": self.measured or None,
        }


F = Figure


def _dense(value: float | None, *sources: str, flag: str = "", note: str = "") -> Figure:
    return Figure(value, sources or ("vendor",), "dense", flag, note)


def _sparse(value: float, *sources: str, note: str = "") -> Figure:
    return Figure(value, sources or ("vendor",), "sparse", "", note)


def _make(key: str, name: str, arch: str, year: str, memory_type: str,
          figures: dict[str, Figure], aliases: tuple[str, ...] = (),
          sparse: dict[str, Figure] | None = None, measured: dict[str, Any] | None = None,
          claims: dict[str, Figure] | None = None, announced: bool = False) -> GPU:
    """Build a GPU whose convenience fields all come from its figures."""

    def val(k: str) -> Any:
        f = figures.get(k)
        return f.value if f else None

    tflops = {d: float(val(d)) for d in DTYPES
              if isinstance(val(d), (int, float)) and figures[d].basis == "dense"}
    srcs = sorted({s for f in figures.values() for s in f.sources})
    return GPU(
        key=key, name=name, bandwidth_tbs=float(val("bandwidth") or 0.0), tflops=tflops,
        memory_gb=float(val("memory") or 0.0),
        sms=int(val("sms")) if isinstance(val("sms"), (int, float)) else None,
        l2_mb=float(val("l2")) if isinstance(val("l2"), (int, float)) else None,
        cc=str(val("cc") or ""), aliases=aliases,
        flags={k: f.flag for k, f in figures.items() if f.flag}, sources=tuple(srcs),
        arch=arch, year=year, memory_type=memory_type, figures=dict(figures),
        sparse=dict(sparse or {}), measured=dict(measured or {}), claims=dict(claims or {}),
        announced=announced,
    )


_NO_BF16 = "no bf16 tensor cores before Ampere"
_UNPUBLISHED = "not published by NVIDIA"
_L2_B = "not on NVIDIA's B200/GB200 sheets; third-party listings only"

GPUS: dict[str, GPU] = {g.key: g for g in [
    _make("t4", "T4", "Turing", "2018", "GDDR6", {
        "memory": F(16), "bandwidth": F(0.32), "fp32": _dense(8.1),
        "fp16": _dense(65, note="FP16 tensor cores; " + _NO_BF16), "sms": F(40, ("derived",)),
        "l2": F(4, ("third-party",), flag="not on the T4 datasheet; third-party die listings only"),
        "cc": F("7.5", ("cuda-gpus",))}, aliases=("tesla t4",)),
    _make("v100", "V100 SXM2", "Volta", "2017", "HBM2", {
        "memory": F(32, note="16 or 32 GB (two SKUs)"), "bandwidth": F(0.90),
        "fp32": _dense(15.7), "fp16": _dense(125, note="FP16 tensor cores; " + _NO_BF16),
        "sms": F(80, ("whitepaper",)), "l2": F(6, ("whitepaper",)), "cc": F("7.0", ("cuda-gpus",))},
        aliases=("tesla v100", "v100-sxm2-16gb", "v100-sxm2-32gb", "tesla v100-sxm2-32gb")),
    _make("a10", "A10", "Ampere", "2021", "GDDR6", {
        "memory": F(24), "bandwidth": F(0.60), "fp32": _dense(31.2), "tf32": _dense(62.5),
        "fp16": _dense(125), "bf16": _dense(125), "sms": F(72, ("derived",)),
        "l2": F(6, ("third-party",), flag="not on the A10 datasheet; third-party listings only"),
        "cc": F("8.6", ("cuda-gpus",))}),
    _make("l4", "L4", "Ada Lovelace", "2023", "GDDR6", {
        "memory": F(24), "bandwidth": F(0.30), "fp32": _dense(30.3), "tf32": _dense(60),
        "fp16": _dense(121), "bf16": _dense(121), "fp8": _dense(242),
        "sms": F(58, ("third-party",), flag="not on the L4 datasheet; third-party listings only"),
        "l2": F(48, ("third-party",), flag="not on the L4 datasheet; third-party listings only"),
        "cc": F("8.9", ("cuda-gpus",))},
        sparse={"bf16": _sparse(242), "fp8": _sparse(485)}),
    _make("a100-40gb", "A100 40GB SXM", "Ampere", "2020", "HBM2", {
        "memory": F(40), "bandwidth": F(1.555), "fp32": _dense(19.5), "tf32": _dense(156),
        "fp16": _dense(312), "bf16": _dense(312), "sms": F(108, ("whitepaper", "kernelagent")),
        "l2": F(40, ("whitepaper", "kernelagent")), "cc": F("8.0", ("cuda-gpus",))},
        aliases=("a100-sxm4-40gb", "a100 40gb", "a100-pcie-40gb"),
        sparse={"bf16": _sparse(624)}),
    _make("a100-80gb", "A100 80GB SXM", "Ampere", "2020", "HBM2e", {
        "memory": F(80), "bandwidth": F(2.039), "fp32": _dense(19.5), "tf32": _dense(156),
        "fp16": _dense(312), "bf16": _dense(312), "sms": F(108, ("whitepaper", "kernelagent")),
        "l2": F(40, ("whitepaper", "kernelagent")), "cc": F("8.0", ("cuda-gpus",))},
        aliases=("a100-sxm4-80gb", "a100 80gb", "a100"), sparse={"bf16": _sparse(624)}),
    _make("h100-sxm", "H100 SXM", "Hopper", "2022", "HBM3", {
        "memory": F(80), "bandwidth": F(3.35), "fp32": _dense(67), "tf32": _dense(494.5),
        "fp16": _dense(989), "bf16": _dense(989), "fp8": _dense(1979),
        "sms": F(132, ("whitepaper", "kernelagent")), "l2": F(50, ("whitepaper", "kernelagent")),
        "cc": F("9.0", ("cuda-gpus",))},
        aliases=("h100 80gb hbm3", "h100-sxm5-80gb", "h100 sxm5", "h100"),
        sparse={"bf16": _sparse(1979, note="the figure some tables list as dense"),
                "fp8": _sparse(3958)}),
    _make("h100-pcie", "H100 PCIe", "Hopper", "2022", "HBM2e", {
        "memory": F(80), "bandwidth": F(2.0), "fp32": _dense(51), "tf32": _dense(378),
        "fp16": _dense(756), "bf16": _dense(756), "fp8": _dense(1513),
        "sms": F(114, ("whitepaper", "kernelagent")), "l2": F(50, ("whitepaper", "kernelagent")),
        "cc": F("9.0", ("cuda-gpus",))}, aliases=("h100 pcie", "h100-pcie-80gb")),
    _make("h200", "H200", "Hopper", "2024", "HBM3e", {
        "memory": F(141), "bandwidth": F(4.8), "fp32": _dense(67), "tf32": _dense(494.5),
        "fp16": _dense(989), "bf16": _dense(989), "fp8": _dense(1979),
        "sms": F(132, ("measured",), note="reported by the device"),
        "l2": F(50, ("vendor",), note="60 MiB reported by the device (measured)"),
        "cc": F("9.0", ("cuda-gpus",))},
        aliases=("nvidia h200", "h200 sxm", "h200 nvl"),
        sparse={"bf16": _sparse(1979), "fp8": _sparse(3958)},
        # The project's own run (HARDWARE.md): a reference for learners without one.
        measured={"device": "NVIDIA H200", "date": "2026-11-30", "copy_tbs": 4.25,
                  "read_tbs": 4.38, "write_tbs": 4.66,
                  "tflops": {"bf16": 723.0, "fp16": 686.0, "tf32": 360.0, "fp32": 51.0},
                  "source": "measured"}),
    _make("b200", "B200 (HGX)", "Blackwell", "2025", "HBM3e", {
        "memory": F(180, flag="180 GB usable on HGX/DGX B200 sheets; 192 GB in earlier "
                    "announcements"),
        "bandwidth": F(8.0), "fp32": _dense(80),
        "tf32": _dense(1125, flag="single source; unconfirmed dense figure"),
        "fp16": _dense(2250), "bf16": _dense(2250), "fp8": _dense(4500), "fp4": _dense(9000),
        "sms": F(None, note=_UNPUBLISHED), "l2": F(126, ("third-party",), flag=_L2_B),
        "cc": F("10.0", ("cuda-gpus",))},
        aliases=("b200", "nvidia b200", "hgx b200", "dgx b200"),
        sparse={"fp8": _sparse(9000), "fp4": _sparse(18000)}),
    _make("gb200", "GB200 (per GPU)", "Blackwell", "2025", "HBM3e", {
        "memory": F(186), "bandwidth": F(8.0),
        "fp32": _dense(80, flag="NVIDIA quotes GB200 per superchip (2 GPUs); the per-GPU FP32 "
                       "split is unconfirmed"),
        "tf32": _dense(1250), "fp16": _dense(2500), "bf16": _dense(2500), "fp8": _dense(5000),
        "fp4": _dense(10000), "sms": F(None, note=_UNPUBLISHED),
        "l2": F(126, ("third-party",), flag=_L2_B), "cc": F("10.0", ("cuda-gpus",))},
        aliases=("gb200", "gb200 nvl72"),
        sparse={"fp8": _sparse(10000), "fp4": _sparse(20000)}),
    _make("mi300x", "MI300X", "CDNA 3", "2023", "HBM3", {
        "memory": F(192), "bandwidth": F(5.3),
        "fp32": _dense(163.4, note="matrix FP32; vector FP32 is half"),
        "tf32": _dense(653.7), "fp16": _dense(1307, note="AMD lists 1307.4"),
        "bf16": _dense(1307, note="AMD lists 1307.4"), "fp8": _dense(2610, note="AMD lists 2614.9"),
        "sms": F(304, ("vendor", "kernelagent"), note="compute units (CUs), not SMs"),
        "l2": F(256, ("vendor", "kernelagent"), note="Infinity Cache (last level), not an L2"),
        "cc": F("gfx942", ("vendor",), note="AMD ISA target, not a CUDA compute capability")},
        aliases=("amd instinct mi300x", "instinct mi300x")),
    _make("rubin", "Rubin (announced)", "Vera Rubin", "2026", "HBM4", {
        "memory": F(288, ("announced",)),
        "bandwidth": F(22, ("announced",), flag="announced, not shipped; NVIDIA's figure rose "
                       "between announcements (about 13 TB/s earlier, 22 TB/s later)"),
        "fp4": _dense(35000, "announced", flag="announced NVFP4 (35 PF training; 50 PF "
                      "'inference' claimed); dense/sparse basis not stated", note="NVFP4"),
        "sms": F(None, ("announced",), note=_UNPUBLISHED),
        "l2": F(None, ("announced",), note=_UNPUBLISHED),
        "cc": F(None, ("announced",), note=_UNPUBLISHED)},
        aliases=("vera rubin", "rubin gpu", "nvidia rubin"),
        claims={"fp4": Figure(50000, ("announced",), "inference", "claimed for 'inference'; "
                              "basis not stated", "50 PF NVFP4")},
        announced=True),
]}

DEFAULT_GPU = "h100-sxm"


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("nvidia", "").replace("_", " ").split())


def _compact(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", _norm(s))


def match_gpu(name: str) -> GPU | None:
    """Find a GPU by key, name, alias, or a device name as torch/NVML report it."""
    n = _norm(name)
    if not n:
        return None
    c = _compact(name)
    for g in GPUS.values():
        if c in (_compact(g.key), _compact(g.name), *(_compact(a) for a in g.aliases)):
            return g
    # Device names like "NVIDIA H100 80GB HBM3": the longest name contained as
    # whole words wins (so "a10" never matches inside "a100-pcie").
    best = None
    for g in GPUS.values():
        for cand in (_norm(g.name), *(_norm(a) for a in g.aliases)):
            if cand and re.search(rf"(?<![a-z0-9]){re.escape(cand)}(?![a-z0-9])", n):
                if best is None or len(cand) > best[0]:
                    best = (len(cand), g)
    return best[1] if best else None


def known_names() -> str:
    """The names `match_gpu` knows, for error messages."""
    return ", ".join(f"{g.key} ({g.name})" for g in GPUS.values())


def format_value(gpu: GPU, name: str, *, flag_mark: bool = True) -> str:
    """A figure as a short string: "989", "50 ⚑", "–" when absent, "?" when unknown."""
    f = gpu.figures.get(name)
    if f is None:
        return "–"
    if f.value is None:
        text = "?"
    elif isinstance(f.value, float) and not f.value.is_integer():
        text = f"{f.value:g}"
    elif isinstance(f.value, (int, float)):
        text = f"{int(f.value):,}"
    else:
        text = str(f.value)
    return f"{text} ⚑" if f.flag and flag_mark else text
