"""The probe's conversation with its torch child: what
`python -m gpulab.measure.torch_probe` prints (one JSON object) and
gpulab.lab.probe reads. One shape for both sides, since the child and the
lab are different processes that must agree on it.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict


class TorchDevice(TypedDict):
    """One device as torch describes it (what NVML lacks: SMs, L2)."""

    index: int
    name: str
    compute_capability: str
    sms: int
    l2_bytes: int | None
    memory_bytes: int
    uuid: str | None


class TorchInfo(TypedDict):
    """torch's answer, or why there is none: the child prints its keys in
    this order (torch's only where it imported, `reason` where it sees no
    GPU); the lab adds `pending` while it still waits for the child."""

    triton: NotRequired[str | None]
    available: NotRequired[bool]
    pending: NotRequired[bool]
    torch: NotRequired[str]
    cuda_version: NotRequired[str | None]
    hip_version: NotRequired[str | None]
    devices: NotRequired[list[TorchDevice]]
    reason: NotRequired[str]


__all__ = ["TorchDevice", "TorchInfo"]
