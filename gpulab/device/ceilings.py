"""Which ceilings a run is measured against: measured when we have them,
datasheet otherwise, and always saying which.

Measured ceilings are cached per device by the probe's microbenchmarks in
`<workspace>/.gpulab/ceilings/<device>.json`:

    {"device": "NVIDIA H200", "date": "...", "driver": "...", "torch": "...",
     "triton": "...", "copy_tbs": 4.25, "read_tbs": 4.38, "write_tbs": 4.6,
     "tflops": {"bf16": 723.0, ...}}
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gpulab.perf import hardware


def slug(device_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


def cache_path(workspace_root: str | Path, device_name: str) -> Path:
    return Path(workspace_root) / ".gpulab" / "ceilings" / f"{slug(device_name)}.json"


def load_measured(workspace_root: str | Path | None, device_name: str) -> dict[str, Any] | None:
    if not workspace_root:
        return None
    try:
        data = json.loads(cache_path(workspace_root, device_name).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def ceiling(
    kind: str, dtype: str, device_name: str, workspace_root: str | Path | None = None
) -> tuple[float | None, str]:
    """(ceiling, label): bytes/s for kind "memory", FLOP/s for "compute"."""
    measured = load_measured(workspace_root, device_name)
    if kind == "memory":
        if measured and measured.get("copy_tbs"):
            return measured["copy_tbs"] * 1e12, "measured copy bandwidth"
        gpu = hardware.match_gpu(device_name)
        if gpu:
            return gpu.bandwidth_tbs * 1e12, f"{gpu.name} datasheet bandwidth"
        return None, "unknown device"
    if measured and (measured.get("tflops") or {}).get(dtype):
        return measured["tflops"][dtype] * 1e12, f"measured {dtype} matmul peak"
    gpu = hardware.match_gpu(device_name)
    if gpu and gpu.tflops.get(dtype):
        return gpu.tflops[dtype] * 1e12, f"{gpu.name} datasheet {dtype}"
    if gpu:  # a known card without the dtype (a T4 has no bf16)
        return None, f"no {dtype} figure on the {gpu.name} datasheet"
    return None, "unknown device"


def floor_peaks(device_name: str) -> tuple[float | None, dict[str, float]]:
    """Datasheet peaks (bytes/s, FLOP/s per dtype) for the implausibility floor.

    Datasheet, not measured: nothing honest beats the datasheet."""
    gpu = hardware.match_gpu(device_name)
    if not gpu:
        return None, {}
    return gpu.bandwidth_tbs * 1e12, {k: v * 1e12 for k, v in gpu.tflops.items()}
