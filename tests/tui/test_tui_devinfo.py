"""GPU detection for the welcome screen and the Device pane: NVML, then
nvidia-smi, never torch. No textual here, so this file also runs on the GPU box."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from gpulab.gpu.devinfo import GpuInfo, detect_gpus


def test_no_driver_means_no_gpu_and_says_why(monkeypatch):
    import pynvml

    def missing():
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    monkeypatch.setenv("PATH", "/nonexistent")  # no nvidia-smi either
    info = detect_gpus()
    assert not info.found and info.describe() == "no NVIDIA GPU found"
    assert len(info.problems) == 2 and "nvidia-smi" in info.problems[1]


def test_describe():
    info = GpuInfo(("NVIDIA H200", "NVIDIA H200"), "570.86", "nvml")
    assert info.describe() == "NVIDIA H200 (+1 more), driver 570.86"


def test_detection_never_imports_torch():
    code = (
        "import sys; from gpulab.gpu.devinfo import detect_gpus; detect_gpus(); "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.gpu
def test_nvml_finds_the_gpu_that_nvidia_smi_lists():
    info = detect_gpus()
    assert info.found and info.source == "nvml" and info.driver
    smi = shutil.which("nvidia-smi")
    if smi:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
        assert info.names[0] in listed


def test_no_nvml_permission_in_a_container_says_so(monkeypatch):
    import pynvml

    def refused():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION)

    monkeypatch.setattr(pynvml, "nvmlInit", refused)
    monkeypatch.setenv("PATH", "/nonexistent")
    info = detect_gpus()
    assert not info.found and "NVML" in info.problems[0]
    assert "Permission" in info.problems[0] or "permission" in info.problems[0], info.problems


def test_a_mig_gpu_and_a_consumer_card_are_listed_by_nvml(monkeypatch):
    import pynvml

    names = {0: b"NVIDIA A100-SXM4-40GB", 1: "NVIDIA GeForce RTX 4090"}
    monkeypatch.setattr(pynvml, "nvmlInit", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: None)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", lambda: 2)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetHandleByIndex", lambda i: i)
    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", lambda h: names[h])
    monkeypatch.setattr(pynvml, "nvmlSystemGetDriverVersion", lambda: "570.86")
    info = detect_gpus()
    assert info.source == "nvml" and info.names == (
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA GeForce RTX 4090",
    )
