"""Microbenchmarks: refuse cleanly without a GPU, plan sensibly, cache where
gpulab.gpu.ceilings reads, render; their Triton kernels compute the right thing
(interpreter). On a GPU (marked): a quick run gives sane numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from gpulab.gpu import ceilings, hardware
from gpulab.lab.microbench_runner import results_renderable, run_microbench, save
from gpulab.measure import microbench
from tests.conftest import REPO, cuda_available, gpulab_env

GiB, MiB = 2**30, 2**20
no_gpu = pytest.mark.skipif(
    cuda_available(), reason="checks the refusal on a machine without a GPU"
)


@no_gpu
def test_child_refuses_without_gpu(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "gpulab.measure.microbench", "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        env=gpulab_env(tmp_path),
        cwd=REPO,
    )
    assert r.returncode == 2
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["type"] == "error"
    assert len(r.stderr.strip().splitlines()) == 1 and "no CUDA GPU" in r.stderr


@no_gpu
def test_probe_bench_refuses_without_gpu(run_gpulab, tmp_path):
    r = run_gpulab("probe", "--bench", "--quick")
    assert r.returncode == 2
    err = [ln for ln in r.stderr.strip().splitlines() if "created your workspace" not in ln]
    assert len(err) == 1 and err[0].startswith("gpulab: microbenchmarks:"), r.stderr
    assert "no CUDA GPU" in err[0] and "Traceback" not in r.stderr
    assert not list((tmp_path / "workspace").rglob("ceilings/*.json"))


def test_buffer_sizes():
    l2 = 60 * MiB
    assert microbench.buffer_bytes(l2, 100 * GiB, quick=False) == 2 * GiB
    assert microbench.buffer_bytes(l2, 100 * GiB, quick=True) == 1 * GiB
    assert microbench.buffer_bytes(256 * MiB, 100 * GiB, quick=True) == 2 * GiB  # 8x L2 wins
    assert microbench.buffer_bytes(l2, 4 * GiB, quick=False) == 1 * GiB  # a quarter of free
    sizes = microbench.sweep_sizes(quick=False, limit=100 * GiB)
    assert sizes[0] == MiB and sizes[-1] == 4 * GiB and len(sizes) == 13
    assert microbench.sweep_sizes(quick=True, limit=300 * MiB)[-1] == 256 * MiB


def test_matmul_plan_follows_compute_capability():
    fake_torch = SimpleNamespace(float8_e4m3fn=object(), _scaled_mm=object())
    plan, skipped = microbench.matmul_plan(fake_torch, (7, 5), quick=True)
    assert {p[0] for p in plan} == {"fp32", "fp16"}
    assert set(skipped) == {"tf32", "bf16", "fp8"}
    plan, skipped = microbench.matmul_plan(fake_torch, (9, 0), quick=False)
    assert {p[0] for p in plan} == {"fp32", "fp16", "tf32", "bf16", "fp8"} and not skipped
    assert max(p[1] for p in plan if p[0] == "bf16") == 16384
    assert max(p[1] for p in plan if p[0] == "fp32") == 8192


RESULT = {
    "device": "NVIDIA H200",
    "date": "2026-11-30T08:00:00",
    "driver": "580.65",
    "torch": "2.11",
    "triton": "3.6",
    "buffer_bytes": 2 * GiB,
    "copy_tbs": 4.25,
    "read_tbs": 4.38,
    "write_tbs": 4.66,
    "tflops": {"bf16": 723.0, "fp16": 686.0},
    "skipped": {"fp8": "needs torch._scaled_mm"},
    "bandwidth": [
        {
            "name": "copy",
            "method": "torch: dst.copy_(src)",
            "counted": "read + write",
            "ms": 1.01,
            "tbs": 4.25,
            "clocks": {"logged": True, "sm_mhz_median": 1980, "throttled": False},
        }
    ],
    "sweep": [
        {"name": "copy", "size_bytes": MiB, "tbs": 2.1, "fits_l2": True},
        {"name": "read", "size_bytes": MiB, "tbs": 1.5, "fits_l2": True},
    ],
    "matmul": [
        {
            "name": "bf16",
            "method": "torch.mm (cuBLAS)",
            "shape": "4096x4096x4096",
            "ms": 0.19,
            "tflops": 723.0,
            "clocks": {"logged": False},
        }
    ],
    "fma": [],
    "throttled": True,
    "throttle_reasons": ["hw_thermal"],
}


def test_cache_feeds_the_ceilings(tmp_path):
    path = save(tmp_path, RESULT)
    assert path == ceilings.cache_path(tmp_path, "NVIDIA H200")
    bw, label = ceilings.ceiling("memory", "fp32", "NVIDIA H200", tmp_path)
    assert bw == pytest.approx(4.25e12) and label.startswith("measured")
    fl, label = ceilings.ceiling("compute", "bf16", "NVIDIA H200", tmp_path)
    assert fl == pytest.approx(723e12) and "measured" in label


def test_a_cached_field_of_the_wrong_type_is_left_out(tmp_path):
    # Anyone may have written the cache: a figure that is no number is not
    # a ceiling (it was multiplied, and raised), and the datasheet stands in.
    save(tmp_path, {**RESULT, "copy_tbs": "4.25", "tflops": {"bf16": [723.0], "fp16": 650.0}})
    bw, label = ceilings.ceiling("memory", "fp32", "NVIDIA H200", tmp_path)
    assert bw == pytest.approx(4.8e12) and "datasheet" in label
    fl, label = ceilings.ceiling("compute", "bf16", "NVIDIA H200", tmp_path)
    assert "datasheet" in label
    fl, label = ceilings.ceiling("compute", "fp16", "NVIDIA H200", tmp_path)
    assert fl == pytest.approx(650e12) and "measured" in label
    assert ceilings.measured_copy(tmp_path, "NVIDIA H200") is None


def test_results_render_and_flag_throttling():
    from rich.console import Console

    con = Console(width=120, record=True, file=open(os.devnull, "w"))
    con.print(results_renderable(RESULT))
    text = con.export_text()
    assert "read + write" in text and "4.25" in text and "723" in text
    assert "throttling seen" in text and "hw_thermal" in text
    assert "fp8: skipped" in text and "1 MiB" in text


def test_runner_reports_a_dead_child(tmp_path, monkeypatch):
    # A child that dies without a result: the runner says so, never raises.
    monkeypatch.setattr(sys, "executable", "/bin/false")
    out = run_microbench(tmp_path, quick=True, timeout=30)
    assert out["ok"] is False and "exited with code 1" in out["error"]


@pytest.mark.gpu
def test_quick_bench_on_gpu(tmp_path):
    events = []
    out = run_microbench(tmp_path, quick=True, on_event=events.append, timeout=900)
    assert out["ok"], out
    res = out["result"]
    print(
        json.dumps(
            {k: v for k, v in res.items() if k not in ("sweep", "bandwidth", "matmul")}, indent=1
        )
    )
    progress = [e for e in events if e["type"] == "progress"]
    assert progress and progress[-1]["done"] == progress[-1]["total"]
    gpu = hardware.match_gpu(res["device"])
    assert gpu is not None, res["device"]
    ds = gpu.bandwidth_tbs
    assert 0.5 * ds < res["copy_tbs"] <= 1.0 * ds, res["copy_tbs"]
    assert 0.5 * ds < res["read_tbs"] <= 1.0 * ds, res["read_tbs"]
    assert 0.5 * ds < res["write_tbs"] <= 1.0 * ds, res["write_tbs"]
    for dt, tf in res["tflops"].items():
        if gpu.tflops.get(dt):
            assert 0.3 * gpu.tflops[dt] < tf <= 1.0 * gpu.tflops[dt], (dt, tf)
    if gpu.tflops.get("fp32"):
        assert 0.3 * gpu.tflops["fp32"] < res["fma_tflops"] <= 1.05 * gpu.tflops["fp32"]
    sweep = {(r["name"], r["size_bytes"]): round(r["tbs"], 2) for r in res["sweep"]}
    print("sweep TB/s:", sweep)
    # The sweep's largest copy sits on the HBM plateau the big-buffer copy measured.
    top = max(s for k, s in sweep if k == "copy")
    assert 0.7 * res["copy_tbs"] < sweep[("copy", top)] < 1.3 * res["copy_tbs"], sweep
    assert json.loads(open(out["cache"]).read())["copy_tbs"] == res["copy_tbs"]


DRY_RUN = r"""
# The whole benchmark pipeline on the CPU: CUDA's calls are faked (this machine
# has none), Triton runs in its interpreter, sizes are tiny, and `measure` just
# calls twice. What is tested is the plumbing: events, rows, checks, result keys.
import time, types, torch
from gpulab.measure import microbench as mb
from gpulab.measure import microbench_measure as mm
from gpulab.measure import timing

mm.DEVICE = "cpu"
mm.FMA_ITERS, mm.FMA_PROGRAMS_PER_SM = 16, 2
c = torch.cuda
c.is_available = lambda: True
c.get_device_properties = lambda i=0: types.SimpleNamespace(
    major=9, minor=0, multi_processor_count=1, L2_cache_size=1 << 20, name="Fake GPU")
c.get_device_name = lambda i=0: "Fake GPU"
c.mem_get_info = lambda: (8 << 20, 16 << 20)
c.synchronize = c.empty_cache = lambda: None
def no_graphs(*a, **k):
    raise RuntimeError("no CUDA graphs here")
c.Stream = no_graphs
timing.L2Flusher = lambda: (lambda: None)
timing.l2_bytes = lambda device=0: 1 << 20
def measure(fn, **kw):
    t0 = time.perf_counter(); fn(); fn(); ms = (time.perf_counter() - t0) * 500
    return {"ms": ms, "min_ms": ms, "p20_ms": ms, "p80_ms": ms, "reps": 2,
            "clocks": {"logged": True, "sm_mhz_median": 1000.0, "throttled": True,
                       "throttle_reasons": ["hw_thermal"]}}
timing.measure = measure
plan = mb.matmul_plan
mb.matmul_plan = lambda *a, **k: ([(p[0], 64, 48, 32) for p in plan(*a, **k)[0]], plan(*a, **k)[1])
raise SystemExit(mb.run(quick=True))
"""

# First the kernels' own results against torch (the FMA kernel's against the
# same recurrence in float64), then the pipeline.
DRY_RUN = (
    r"""
import torch
from gpulab.measure import microbench_kernels as K
torch.manual_seed(0)
x = torch.rand(5000)
partial = torch.empty(8)
K.read(x, partial, 1024, 4)
n_blocks = -(-5000 // 1024)
assert abs(float(partial[:n_blocks].double().sum()) - float(x.double().sum())) < 1e-2
dst = torch.full_like(x, float("nan"))
K.copy(dst, x, 1024, 4)
assert torch.equal(dst, x)
K.fill(dst, 1.2345, 1024, 4)
assert bool((dst == torch.tensor(1.2345)).all())
xs = torch.rand(256)
out = torch.empty_like(xs)
K.fma(xs, out, 16, 128)
a = xs.double(); chains = [a, a + 1, a * 0.5, a - 1]
for _ in range(16):
    chains = [c * 0.9999 + 0.0001 for c in chains]
want = sum(chains)
assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-5), (out[:4], want[:4])
"""
    + DRY_RUN
)


def test_kernels_and_the_whole_pipeline_dry(tmp_path):
    env = gpulab_env(tmp_path, TRITON_INTERPRET="1")
    r = subprocess.run(
        [sys.executable, "-c", DRY_RUN],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    events = [json.loads(ln) for ln in r.stdout.splitlines()]
    progress = [e for e in events if e["type"] == "progress"]
    assert [e["done"] for e in progress] == list(range(len(progress)))
    assert progress[-1]["done"] == progress[-1]["total"] and progress[-1]["label"] == "done"
    res = events[-1]["result"]
    assert events[-1]["type"] == "result"
    assert res["device"] == "Fake GPU" and res["buffer_bytes"] == 2 * MiB
    for key in ("copy_tbs", "read_tbs", "write_tbs", "fma_tflops"):
        assert res[key] and res[key] > 0, key
    # Every method's result was checked (copy equal, sums close, fill exact) and kept.
    assert len(res["bandwidth"]) == 9  # 4 copies, 3 reads, 2 writes
    notes = [e["text"] for e in events if e["type"] == "note"]
    assert len(notes) == 1 and "may read low" in notes[0]  # 8 MiB free: small buffers, said so
    assert {r["counted"] for r in res["bandwidth"] if r["name"] == "copy"} == {"read + write"}
    assert {"fp32", "fp16", "tf32", "bf16"} <= set(res["tflops"])
    assert "fp8" in res["tflops"] or "fp8" in res["skipped"]
    assert res["sweep"] and not any(r["cuda_graph"] for r in res["sweep"])
    assert res["throttled"] and res["throttle_reasons"] == ["hw_thermal"]
    save(tmp_path, res)
    assert ceilings.ceiling("memory", "fp32", "Fake GPU", tmp_path)[1] == "measured copy bandwidth"
