"""What torch says about the GPUs: `python -m gpulab.measure.torch_probe`.

NVML has no SM count or L2 size, and the lab's own process must never import
torch (seconds of import, a CUDA context that then lives as long as the TUI).
So gpulab.lab.probe (`ask_torch()`, the parent side) runs this module in a
short child process, which prints one JSON object and exits.
"""

from __future__ import annotations

import json

from gpulab.wire.probe import TorchDevice, TorchInfo


def _version(dist: str) -> str | None:
    # Read from metadata: importing triton only to print its version costs seconds.
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001
        return None


def collect() -> TorchInfo:
    """Runs in the child."""
    out: TorchInfo = {"triton": _version("triton") or _version("pytorch-triton")}
    try:
        import torch
    except ImportError as exc:
        return {**out, "available": False, "reason": f"torch is not installed ({exc})"}
    devices: list[TorchDevice] = []
    out["available"] = True
    out["torch"] = torch.__version__
    out["cuda_version"] = torch.version.cuda
    out["hip_version"] = getattr(torch.version, "hip", None)
    out["devices"] = devices
    try:
        if not torch.cuda.is_available():
            out["reason"] = (
                "torch sees no CUDA device"
                if torch.version.cuda or torch.version.hip
                else "this torch is a CPU-only build"
            )
            return out
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "index": i,
                    "name": p.name,
                    "compute_capability": f"{p.major}.{p.minor}",
                    "sms": int(p.multi_processor_count),
                    "l2_bytes": int(getattr(p, "L2_cache_size", 0) or 0) or None,
                    "memory_bytes": int(p.total_memory),
                    "uuid": str(getattr(p, "uuid", "") or "") or None,
                }
            )
    except Exception as exc:  # noqa: BLE001 - a broken driver install, say what it said
        out["reason"] = f"torch.cuda failed: {type(exc).__name__}: {exc}"
    return out


if __name__ == "__main__":
    print(json.dumps(collect()))
