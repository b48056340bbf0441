"""The device probe: degrades without NVML or CUDA, renders NVML's refusals as
n/a with reasons, and `gpulab probe` works on this machine. Only pynvml's
calls are faked (every one of them, so no real NVML call ever sees a fake
handle); the real probe runs in the GPU-marked tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

pynvml = pytest.importorskip("pynvml")

from gpulab.gpu import nvml  # noqa: E402
from gpulab.lab import probe  # noqa: E402
from tests.conftest import gpulab_env, sigint_as_in_a_shell  # noqa: E402

TORCH_NONE = {
    "available": True,
    "torch": "2.x+cpu",
    "cuda_version": None,
    "devices": [],
    "reason": "this torch is a CPU-only build",
    "triton": "3.x",
}
TORCH_H200 = {
    "available": True,
    "torch": "2.x",
    "cuda_version": "13.0",
    "triton": "3.x",
    "devices": [
        {
            "index": 0,
            "name": "NVIDIA H200",
            "compute_capability": "9.0",
            "sms": 132,
            "l2_bytes": 60 * 2**20,
            "memory_bytes": 141 * 10**9,
            "uuid": None,
        }
    ],
}


def _err(code_name: str) -> Exception:
    return pynvml.NVMLError(getattr(pynvml, code_name))


def _raiser(code_name: str):
    def fn(*_a, **_k):
        raise _err(code_name)

    return fn


def fake_nvml(monkeypatch, overrides: dict[str, object], default: str = "NVML_ERROR_NOT_SUPPORTED"):
    """Replace every pynvml call; unlisted ones raise `default`."""
    for name in dir(pynvml):
        if (
            name.startswith("nvml")
            and callable(getattr(pynvml, name))
            and not name.startswith("nvmlClocks")
        ):
            monkeypatch.setattr(pynvml, name, _raiser(default))
    for name, value in overrides.items():
        monkeypatch.setattr(pynvml, name, value if callable(value) else (lambda *a, v=value: v))


def h200_nvml(monkeypatch, **extra):
    procs = [SimpleNamespace(pid=os.getpid(), usedGpuMemory=512 * 2**20)]
    base = {
        "nvmlInit": None,
        "nvmlShutdown": None,
        "nvmlSystemGetDriverVersion": b"580.65",
        "nvmlSystemGetCudaDriverVersion": 13000,
        "nvmlDeviceGetCount": 1,
        "nvmlDeviceGetHandleByIndex": "handle-0",
        "nvmlDeviceGetMigMode": (0, 0),
        "nvmlDeviceGetName": "NVIDIA H200",
        "nvmlDeviceGetUUID": "GPU-1234",
        "nvmlDeviceGetCudaComputeCapability": (9, 0),
        "nvmlDeviceGetMemoryInfo": SimpleNamespace(total=141 * 2**30, used=2**30),
        "nvmlDeviceGetMemoryBusWidth": 6016,
        "nvmlDeviceGetClockInfo": 1980,
        "nvmlDeviceGetMaxClockInfo": lambda h, c: 1980 if c == pynvml.NVML_CLOCK_SM else 3201,
        "nvmlDeviceGetPowerUsage": _raiser("NVML_ERROR_NO_PERMISSION"),
        "nvmlDeviceGetEnforcedPowerLimit": 700000,
        "nvmlDeviceGetTemperature": 41,
        "nvmlDeviceGetUtilizationRates": SimpleNamespace(gpu=97, memory=80),
        "nvmlDeviceGetCurrentClocksEventReasons": 0x4,
        "nvmlDeviceGetComputeRunningProcesses": procs,
        "nvmlDeviceGetGraphicsRunningProcesses": [],
        "nvmlSystemGetProcessName": _raiser("NVML_ERROR_NO_PERMISSION"),
    }
    base.update(extra)
    base = {k: (lambda *a: None) if v is None else v for k, v in base.items()}
    fake_nvml(monkeypatch, base)


def render(snap: dict, width: int = 100) -> str:
    from rich.console import Console

    con = Console(width=width, record=True, file=open(os.devnull, "w"))
    con.print(probe.snapshot_renderable(snap))
    return con.export_text()


def test_no_nvml_and_no_cuda(monkeypatch):
    fake_nvml(monkeypatch, {"nvmlInit": _raiser("NVML_ERROR_LIBRARY_NOT_FOUND")})
    snap = probe.snapshot(torch_info=TORCH_NONE)
    assert snap["has_gpu"] is False and snap["gpus"] == []
    assert "no NVML" in snap["nvml"]["reason"] and "CPU-only" in snap["no_gpu_reason"]
    assert snap["cpu"]["cores"] and snap["cpu"]["model"]
    assert snap["roofline_gpu"]["key"] == "h100-sxm"
    assert "default" in snap["roofline_gpu"]["source"]
    json.dumps(snap)  # JSON-ready as it stands
    text = render(snap)
    assert "No GPU here" in text and "CPU:" in text and "Rooflines use: H100 SXM" in text


def test_driver_not_loaded_and_no_pynvml(monkeypatch):
    fake_nvml(monkeypatch, {"nvmlInit": _raiser("NVML_ERROR_DRIVER_NOT_LOADED")})
    assert "driver is not loaded" in nvml.query()["reason"]
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert "nvidia-ml-py is not installed" in nvml.query()["reason"]


def test_refusals_render_as_na_with_reasons(monkeypatch):
    h200_nvml(monkeypatch)
    snap = probe.snapshot(torch_info=TORCH_H200)
    assert snap["has_gpu"]
    f = snap["gpus"][0]["fields"]
    assert f["name"]["value"] == "NVIDIA H200"
    assert f["power_draw"] == {"value": None, "reason": "no permission"}
    assert f["ecc_mode"] == {"value": None, "reason": "not supported"}
    assert f["fan"]["reason"] == "not supported"
    assert f["power_limit"] == {"value": 700.0, "unit": "W"}
    assert f["sms"]["value"] == 132 and f["l2"]["value"] == 60.0  # from torch
    assert f["bandwidth_theoretical"]["value"] == 4.81  # 6016 bits x 3201 MHz x 2
    assert f["clock_events"]["value"] == ["sw_power_cap"]
    assert f["mig_mode"]["value"] == "disabled"
    procs = f["processes"]["value"]
    assert procs[0]["pid"] == os.getpid() and procs[0]["used_mib"] == 512
    assert procs[0]["name"] != "?"  # NVML refused the name; /proc gave it
    assert snap["nvml"]["cuda_driver_version"]["value"] == "13.0"
    assert snap["roofline_gpu"]["key"] == "h200" and "detected" in snap["roofline_gpu"]["source"]
    text = render(snap)
    assert "n/a (no permission)" in text and "n/a (not supported)" in text
    assert "1980 / 1980 MHz" in text and "sw_power_cap" in text


def test_mig_mode_reason(monkeypatch):
    h200_nvml(monkeypatch, nvmlDeviceGetMigMode=(1, 1))
    f = probe.snapshot(torch_info=TORCH_H200)["gpus"][0]["fields"]
    assert f["mig_mode"]["value"] == "enabled"
    assert f["ecc_mode"]["reason"] == "not supported in MIG mode"


def test_every_call_failing_never_raises(monkeypatch):
    fake_nvml(
        monkeypatch,
        {
            "nvmlInit": lambda: None,
            "nvmlShutdown": lambda: None,
            "nvmlDeviceGetCount": lambda: 1,
            "nvmlDeviceGetHandleByIndex": lambda i: "h",
        },
        default="NVML_ERROR_UNKNOWN",
    )
    snap = probe.snapshot(torch_info={"available": False, "reason": "torch is not installed"})
    f = snap["gpus"][0]["fields"]
    assert all(v["value"] is None for k, v in f.items() if k not in ("sms", "l2")), f
    assert "torch" in f["sms"]["reason"]
    render(snap, width=80)


def test_nvml_missing_but_torch_sees_a_gpu(monkeypatch):
    fake_nvml(monkeypatch, {"nvmlInit": _raiser("NVML_ERROR_LIBRARY_NOT_FOUND")})
    snap = probe.snapshot(torch_info=TORCH_H200)
    f = snap["gpus"][0]["fields"]
    assert snap["has_gpu"] and f["name"]["value"] == "NVIDIA H200" and f["sms"]["value"] == 132
    assert "no NVML" in f["temperature"]["reason"]


def test_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert nvml._visible_indices(2) == [1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert nvml._visible_indices(2) == []


def test_workspace_gpu_setting(ws):
    ws.set_setting(probe.SETTING, "h200")
    assert probe.roofline_gpu([], ws)["key"] == "h200"
    got = probe.roofline_gpu(["NVIDIA A100-SXM4-80GB"], ws)
    assert got["key"] == "a100-80gb" and got["setting"] == "H200"
    got = probe.roofline_gpu(["Some Unknown GPU"], ws)
    assert got["key"] == "h200" and "not in the hardware table" in got["note"]


def test_cli_json_and_gpu_setting(run_gpulab):
    bad = run_gpulab("probe", "--gpu", "nosuchgpu")
    assert bad.returncode == 2 and "unknown GPU 'nosuchgpu'" in bad.stderr and "h200" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    r = run_gpulab("probe", "--gpu", "t4", "--json")
    assert r.returncode == 0, r.stderr
    snap = json.loads(r.stdout)
    assert snap["has_gpu"] == bool(snap["gpus"]) and snap["cpu"]["model"]
    if snap["has_gpu"]:
        assert snap["roofline_gpu"].get("setting") == "T4" or snap["roofline_gpu"]["key"] == "t4"
    else:
        assert snap["no_gpu_reason"] and snap["roofline_gpu"]["key"] == "t4"
    table = run_gpulab("probe")
    assert table.returncode == 0 and "CPU:" in table.stdout and "T4" in table.stdout


def test_watch_json_stops_cleanly_on_ctrl_c(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpulab", "probe", "--watch", "--json", "--interval", "0.2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gpulab_env(tmp_path / "workspace"),
        preexec_fn=sigint_as_in_a_shell,
    )
    try:
        first = proc.stdout.readline()
        second = proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads(first)["cpu"] and json.loads(second)["time"]
    assert proc.returncode == 0, err
    assert "Traceback" not in err


@pytest.mark.gpu
def test_real_nvml_on_gpu():
    snap = probe.snapshot()
    assert snap["has_gpu"] and snap["nvml"]["available"], snap
    f = snap["gpus"][0]["fields"]
    for key in (
        "name",
        "compute_capability",
        "sms",
        "l2",
        "memory_total",
        "sm_clock",
        "memory_clock",
        "temperature",
        "power_draw",
    ):
        assert f[key]["value"] is not None, (key, f[key])
    assert f["sms"]["value"] > 0 and f["memory_total"]["value"] > 1
    for key, field in f.items():  # every field answered or said why not
        assert field.get("value") is not None or field.get("reason"), key
    start = time.monotonic()
    nvml.query()
    assert time.monotonic() - start < 2.0  # fast enough to poll every second
    print(json.dumps(snap, indent=1, default=str)[:4000])


# --- the GPUs learners have: MIG slices, consumer cards, containers -------------------

TORCH_MIG = {
    "available": True,
    "torch": "2.x",
    "cuda_version": "12.8",
    "triton": "3.x",
    "devices": [
        {
            "index": 0,
            "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
            "compute_capability": "8.0",
            "sms": 14,
            "l2_bytes": 5 * 2**20,
            "memory_bytes": 4864 * 2**20,
            "uuid": "MIG-0bd5-44aa",
        }
    ],
}


def test_a_mig_slice_shows_the_slice_not_the_whole_gpu(monkeypatch):
    # NVML answers for the parent A100 (40 GiB, MIG on); CUDA_VISIBLE_DEVICES
    # names the slice by UUID, and torch sees 14 SMs and ~5 GB.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-0bd5-44aa")
    h200_nvml(
        monkeypatch,
        nvmlDeviceGetMigMode=(1, 1),
        nvmlDeviceGetName="NVIDIA A100-SXM4-40GB",
        nvmlDeviceGetMemoryInfo=SimpleNamespace(total=40 * 2**30, used=2**30),
        nvmlDeviceGetCudaComputeCapability=(8, 0),
        nvmlDeviceGetUtilizationRates=_raiser("NVML_ERROR_NOT_SUPPORTED"),
    )
    snap = probe.snapshot(torch_info=TORCH_MIG)
    f = snap["gpus"][0]["fields"]
    assert f["name"]["value"] == "NVIDIA A100-SXM4-40GB MIG 1g.5gb"
    assert f["sms"]["value"] == 14 and f["memory_total"]["value"] == 4.8  # the slice's
    assert f["mig_mode"]["value"] == "enabled"
    assert "14 SMs" in f["mig_slice"]["value"] and "whole GPU" in f["mig_slice"]["value"]
    assert f["utilization_gpu"]["reason"] == "not supported in MIG mode"
    assert snap["roofline_gpu"]["key"] == "a100-40gb"
    text = render(snap)
    assert "MIG 1g.5gb" in text and "n/a (not supported in MIG mode)" in text
    assert "MIG slice" in text and "14 SMs" in text


TORCH_4090 = {
    "available": True,
    "torch": "2.x",
    "cuda_version": "12.8",
    "triton": "3.x",
    "devices": [
        {
            "index": 0,
            # The laptop chip (AD103): the desktop card is in the table, this
            # one is not (gpulab.gpu.hardware.match_gpu).
            "name": "NVIDIA GeForce RTX 4090 Laptop GPU",
            "compute_capability": "8.9",
            "sms": 76,
            "l2_bytes": 64 * 2**20,
            "memory_bytes": 16 * 10**9,
            "uuid": "GPU-4090",
        }
    ],
}


def test_a_consumer_card_without_datacentre_fields(monkeypatch):
    # GeForce: no ECC, no per-process accounting, a fan; not in the datasheet
    # table, so rooflines fall back to the default and say why.
    h200_nvml(
        monkeypatch,
        nvmlDeviceGetName="NVIDIA GeForce RTX 4090 Laptop GPU",
        nvmlDeviceGetUUID="GPU-4090",
        nvmlDeviceGetCudaComputeCapability=(8, 9),
        nvmlDeviceGetMemoryBusWidth=384,
        nvmlDeviceGetFanSpeed=30,
        nvmlDeviceGetComputeRunningProcesses=_raiser("NVML_ERROR_NOT_SUPPORTED"),
        nvmlDeviceGetGraphicsRunningProcesses=_raiser("NVML_ERROR_NOT_SUPPORTED"),
        nvmlDeviceGetPowerUsage=450_000,
        nvmlDeviceGetEnforcedPowerLimit=450_000,
    )
    snap = probe.snapshot(torch_info=TORCH_4090)
    f = snap["gpus"][0]["fields"]
    assert f["name"]["value"] == "NVIDIA GeForce RTX 4090 Laptop GPU" and f["sms"]["value"] == 76
    assert f["ecc_mode"]["reason"] == "not supported" and f["fan"]["value"] == 30
    assert f["processes"]["value"] is None and "not supported" in f["processes"]["reason"]
    assert f["power_draw"]["value"] == 450.0
    rg = snap["roofline_gpu"]
    assert (
        "default" in rg["source"]
        and "RTX 4090 Laptop GPU is not in the hardware table" in rg["note"]
    )
    text = render(snap, width=80)
    assert "GeForce RTX 4090 Laptop GPU" in text and "not in the hardware table" in text


def test_a_container_without_nvml_permission(monkeypatch):
    # NVML refuses to start (no permission on the device nodes), yet CUDA
    # works: the GPU comes from torch, every NVML field says why it is n/a.
    fake_nvml(monkeypatch, {"nvmlInit": _raiser("NVML_ERROR_NO_PERMISSION")})
    snap = probe.snapshot(torch_info=TORCH_H200)
    assert snap["has_gpu"] and snap["nvml"]["reason"] == "no permission"
    f = snap["gpus"][0]["fields"]
    assert f["name"]["value"] == "NVIDIA H200" and f["memory_total"]["value"] == 131.3
    assert f["temperature"] == {"value": None, "reason": "no permission"}
    assert snap["roofline_gpu"]["key"] == "h200"
    assert "no permission" in render(snap)


def test_a_container_that_hides_other_processes(monkeypatch):
    # NVML runs, but the process list and names are refused: n/a, not a crash.
    h200_nvml(
        monkeypatch,
        nvmlDeviceGetComputeRunningProcesses=_raiser("NVML_ERROR_NO_PERMISSION"),
        nvmlDeviceGetGraphicsRunningProcesses=_raiser("NVML_ERROR_NO_PERMISSION"),
    )
    f = probe.snapshot(torch_info=TORCH_H200)["gpus"][0]["fields"]
    assert f["processes"] == {
        "value": None,
        "reason": "compute: no permission; graphics: no permission",
    }


def test_gpu_processes_follows_cuda_visible_devices_and_never_raises(monkeypatch):
    # The judge names other programs on its GPU when it refuses a timing
    # (gpulab.judge.neighbours): CUDA's index 0 is NVML's GPU 1 here.
    asked = []
    h200_nvml(
        monkeypatch,
        nvmlDeviceGetCount=2,
        nvmlDeviceGetHandleByIndex=lambda i: asked.append(i) or f"handle-{i}",
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    procs = nvml.gpu_processes(0)
    assert asked == [1] and [p["pid"] for p in procs] == [os.getpid()]
    assert nvml.gpu_processes(5) is None  # no such GPU
    fake_nvml(monkeypatch, {}, default="NVML_ERROR_DRIVER_NOT_LOADED")
    assert nvml.gpu_processes(0) is None


def test_a_cached_measurement_of_any_shape_is_shown_without_a_crash():
    """The probe's cache file may come from anywhere: values of the wrong
    type are left out of the words, and nothing in it reaches the terminal
    as a control sequence."""
    bad = {
        "date": "2026-12-08\x1b]52;c;aGk=\x07",
        "copy_tbs": "3.1",
        "read_tbs": None,
        "write_tbs": 2.5,
        "tflops": {"bf16": None, "fp16": 700.0, "fp8": "fast", "x": True},
    }
    text = probe._measured_text("H100", bad)  # type: ignore[arg-type]
    assert "write 2.50 TB/s" in text and "fp16 700 TFLOP/s" in text
    assert "copy" not in text and "bf16" not in text and "fp8" not in text
    assert "\x1b" not in text and "\x07" not in text
    assert probe._measured_text("H100", {"tflops": ["not", "a", "dict"]}).endswith(": ")  # type: ignore[typeddict-item]
