"""Which GPU is here, decided without torch.

The lab's own process never imports torch (about 1.5 s and 300 MB); NVML
answers "which NVIDIA GPUs are there" in milliseconds. NVML first (the
nvidia-ml-py package provides `pynvml`), `nvidia-smi -L` second. Callers run
this in a worker thread: nvmlInit can take a few hundred ms on a busy box.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field


@dataclass(frozen=True)
class GpuInfo:
    """What the lab knows about the local GPUs."""

    names: tuple[str, ...] = ()
    driver: str = ""
    source: str = ""  # "nvml", "nvidia-smi", or "" when nothing answered
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def found(self) -> bool:
        return bool(self.names)

    def describe(self) -> str:
        """One line for people."""
        if not self.names:
            return "no NVIDIA GPU found"
        first = self.names[0]
        more = f" (+{len(self.names) - 1} more)" if len(self.names) > 1 else ""
        drv = f", driver {self.driver}" if self.driver else ""
        return f"{first}{more}{drv}"


def _from_nvml() -> GpuInfo:
    from gpulab.gpu import nvml

    with nvml.opened() as nv:
        names = [
            nvml.text(nv.nvmlDeviceGetName(nv.nvmlDeviceGetHandleByIndex(i)))
            for i in range(nv.nvmlDeviceGetCount())
        ]
        return GpuInfo(tuple(names), nvml.text(nv.nvmlSystemGetDriverVersion()), "nvml")


def _from_smi() -> GpuInfo:
    exe = shutil.which("nvidia-smi")
    if not exe:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=10)
    if out.returncode != 0:
        raise RuntimeError((out.stderr or out.stdout).strip() or f"exit {out.returncode}")
    # "GPU 0: NVIDIA H200 (UUID: GPU-...)"
    names = []
    for line in out.stdout.splitlines():
        if line.startswith("GPU ") and ":" in line:
            names.append(line.split(":", 1)[1].split("(UUID")[0].strip())
    return GpuInfo(tuple(names), "", "nvidia-smi")


def detect_gpus() -> GpuInfo:
    """Ask NVML, then nvidia-smi. Never raises; problems are kept for the Device pane."""
    problems = []
    for name, probe in (("NVML", _from_nvml), ("nvidia-smi", _from_smi)):
        try:
            info = probe()
        except Exception as exc:  # noqa: BLE001 - any failure means "not from here"
            problems.append(f"{name}: {exc}")
            continue
        if info.found:
            return info
        problems.append(f"{name}: no devices")
    return GpuInfo(problems=tuple(problems))
