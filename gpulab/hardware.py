"""Datasheet figures of GPUs (no UI, no heavy imports).

The full table, sources and flags are built out by the hardware-database
work; this module's interface is what the rest of gpulab relies on:
`GPUS`, `match_gpu(name)` and the `GPU` fields below.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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

    def ridge(self, dtype: str) -> float | None:
        """FLOP per byte at which this GPU's compute roof meets its memory slope."""
        t = self.tflops.get(dtype)
        return (t * 1e12) / (self.bandwidth_tbs * 1e12) if t else None


GPUS: dict[str, GPU] = {
    g.key: g
    for g in [
        GPU("t4", "T4", 0.32, {"fp32": 8.1, "fp16": 65}, 16, 40, 4, "7.5",
            aliases=("tesla t4",)),
        GPU("a100-80gb", "A100 80GB SXM", 2.039,
            {"fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312}, 80, 108, 40, "8.0",
            aliases=("a100-sxm4-80gb", "a100 80gb")),
        GPU("h100-sxm", "H100 SXM", 3.35,
            {"fp32": 67, "tf32": 494.5, "fp16": 989, "bf16": 989, "fp8": 1979}, 80, 132, 50,
            "9.0", aliases=("h100 80gb hbm3", "h100-sxm5-80gb", "h100")),
        GPU("h200", "H200", 4.8,
            {"fp32": 67, "tf32": 494.5, "fp16": 989, "bf16": 989, "fp8": 1979}, 141, 132, 50,
            "9.0", aliases=("nvidia h200", "h200 sxm")),
    ]
}

DEFAULT_GPU = "h100-sxm"


def _norm(s: str) -> str:
    return " ".join(s.lower().replace("nvidia", "").replace("_", " ").split())


def match_gpu(name: str) -> GPU | None:
    """Find a GPU by key, name, alias, or a device name as torch/NVML report it."""
    n = _norm(name)
    if not n:
        return None
    for g in GPUS.values():
        if n in (g.key, _norm(g.name), *(_norm(a) for a in g.aliases)):
            return g
    # Device names like "NVIDIA H100 80GB HBM3": the longest key contained wins.
    best = None
    for g in GPUS.values():
        for cand in (_norm(g.name), *(_norm(a) for a in g.aliases)):
            if cand and cand in n and (best is None or len(cand) > best[0]):
                best = (len(cand), g)
    return best[1] if best else None
