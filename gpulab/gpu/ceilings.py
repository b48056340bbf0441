"""Which ceilings a run is measured against, always saying which.

A graded kernel's letter is measured against one fixed roof, the
datasheet's (`grading_roof`): the same kernel gets the same letter whether
or not `gpulab probe --bench` has run. On the H200 and the H100 the
memory-bound code reaches a near-constant share of the datasheet (the copy,
4.25 of 4.8 TB/s on the H200, 88.5%; the triad and torch.add alike 89% of
the H100's 3.35: BENCHMARKS.md), so a band against the datasheet is a band
against the copy ceiling times about 0.89, without the probe's spread;
and the measured compute "ceiling" is cuBLAS's own figure, which the
course's matmul reference beats (1.08x), a roof a kernel passes is no roof.
Where the probe measured the copy, the result says where a kernel stands
against that too (`measured_copy`), beside the letter and apart from it.

`ceiling` is the measured one when we have it, else the datasheet's: what
--explain reasons with (what limits a kernel on this GPU as it is).

Measured ceilings are cached per device by the probe's microbenchmarks in
`<workspace>/.gpulab/ceilings/<device>.json`:

    {"device": "NVIDIA H200", "date": "...", "driver": "...", "torch": "...",
     "triton": "...", "copy_tbs": 4.25, "read_tbs": 4.38, "write_tbs": 4.6,
     "tflops": {"bf16": 723.0, ...}}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpulab.gpu import hardware
from gpulab.gpu.hardware_model import read_ceilings

if TYPE_CHECKING:
    from gpulab.wire.protocol import JsonObject


def slug(device_name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", device_name.lower()).strip("-") or "unknown"


def cache_path(workspace_root: str | Path, device_name: str) -> Path:
    return Path(workspace_root) / ".gpulab" / "ceilings" / f"{slug(device_name)}.json"


def load_measured(workspace_root: str | Path | None, device_name: str) -> JsonObject | None:
    """The probe's cached file for this device, as it is (`gpulab probe`
    shows all of it); `read_ceilings` takes the ceilings out of it."""
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
    measured = read_ceilings(load_measured(workspace_root, device_name))
    if kind == "memory":
        if measured.get("copy_tbs"):
            return measured["copy_tbs"] * 1e12, "measured copy bandwidth"
        gpu = hardware.match_gpu(device_name)
        if gpu:
            return gpu.bandwidth_tbs * 1e12, f"{gpu.name} datasheet bandwidth"
        return None, "unknown device"
    if measured.get("tflops", {}).get(dtype):
        return measured["tflops"][dtype] * 1e12, f"measured {dtype} matmul peak"
    gpu = hardware.match_gpu(device_name)
    if gpu and gpu.tflops.get(dtype):
        return gpu.tflops[dtype] * 1e12, f"{gpu.name} datasheet {dtype}"
    if gpu:  # a known card without the dtype (a T4 has no bf16)
        return None, f"no {dtype} figure on the {gpu.name} datasheet"
    return None, "unknown device"


@dataclass(frozen=True, slots=True)
class Roof:
    """What a graded kernel's roofline fraction is taken against: bytes/s
    for kind "memory", FLOP/s for "compute" (None where there is none),
    named as a learner reads it ("the H200 datasheet's 4.8 TB/s"), and where
    it comes from ("datasheet", "measured" or "none")."""

    value: float | None
    label: str
    source: str


def grading_roof(
    kind: str, dtype: str, device_name: str, workspace_root: str | Path | None = None
) -> Roof:
    """The datasheet's roof of a GPU the hardware table knows. A GPU it does
    not know has no datasheet: its measured ceiling then, where the probe
    cached one (said so), else none."""
    gpu = hardware.match_gpu(device_name)
    if kind == "memory" and gpu:
        return Roof(
            gpu.bandwidth_tbs * 1e12,
            f"the {gpu.name} datasheet's {gpu.bandwidth_tbs:g} TB/s",
            "datasheet",
        )
    if kind != "memory" and gpu and gpu.tflops.get(dtype):
        peak = gpu.tflops[dtype]
        return Roof(
            peak * 1e12, f"the {gpu.name} datasheet's {peak:g} {dtype} TFLOP/s", "datasheet"
        )
    if gpu:  # a known card without the dtype (a T4 has no bf16)
        return Roof(None, f"no {dtype} figure on the {gpu.name} datasheet", "none")
    measured = read_ceilings(load_measured(workspace_root, device_name))
    if kind == "memory" and measured.get("copy_tbs"):
        tbs = float(measured["copy_tbs"])
        return Roof(tbs * 1e12, f"the copy ceiling this GPU measured, {tbs:.3g} TB/s", "measured")
    tflops = measured.get("tflops", {}).get(dtype)
    if kind != "memory" and tflops:
        return Roof(
            float(tflops) * 1e12,
            f"the {dtype} matmul rate this GPU measured, {float(tflops):.4g} TFLOP/s",
            "measured",
        )
    return Roof(None, f"no datasheet for {device_name or 'this GPU'}", "none")


def measured_copy(workspace_root: str | Path | None, device_name: str) -> float | None:
    """The copy bandwidth `gpulab probe --bench` measured here (bytes/s), or None."""
    tbs = read_ceilings(load_measured(workspace_root, device_name)).get("copy_tbs")
    return float(tbs) * 1e12 if isinstance(tbs, (int, float)) and tbs > 0 else None


def floor_peaks(device_name: str) -> tuple[float | None, dict[str, float]]:
    """Datasheet peaks (bytes/s, FLOP/s per dtype) for the implausibility floor.

    Datasheet, not measured: nothing honest beats the datasheet."""
    gpu = hardware.match_gpu(device_name)
    if not gpu:
        return None, {}
    return gpu.bandwidth_tbs * 1e12, {k: v * 1e12 for k, v in gpu.tflops.items()}
