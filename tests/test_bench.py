"""`gpulab bench`: a clear refusal without a GPU; a real run on one."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cuda_available


def test_bench_without_gpu_exits_2_with_one_line(run_gpulab):
    if cuda_available():
        pytest.skip("this machine has a GPU")
    r = run_gpulab("bench", "softmax")
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "GPU" in r.stderr


def test_bench_rejects_unknown_kernels(run_gpulab):
    r = run_gpulab("bench", "nope")
    assert r.returncode == 2 and "unknown kernel" in r.stderr


@pytest.mark.gpu
def test_bench_softmax_on_a_gpu(run_gpulab, tmp_path):
    out = tmp_path / "bench.json"
    r = run_gpulab("bench", "softmax", "--json", str(out), timeout=600)
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert {"device", "date", "torch", "triton", "results"} <= set(report)
    row = report["results"][0]
    assert {"kernel", "shape", "dtype", "ms", "baseline", "baseline_ms", "speedup",
            "roofline_fraction"} <= set(row)
    assert row["kernel"] == "softmax"
    assert abs(row["speedup"] - row["baseline_ms"] / row["ms"]) < 1e-9
    assert 0 < row["roofline_fraction"] < 1.1
