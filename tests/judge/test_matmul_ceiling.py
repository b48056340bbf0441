"""The matmul_ceiling grader (lesson 01): a TFLOP/s benchmark the learner writes.

The variants run the grader with the sandbox's handlers in this process
(tests/inprocess.py); on the CPU the benchmark runs on the model GPU of
gpulab.sandbox.flops. The reference and the starter go through the real
check path in `gpulab dev check`; the GPU tests run both on the real one,
beside the judge's own timing."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source

REF = reference_source("matmul_ceiling")

TIMED = """        s.record()
        a @ b
        e.record()
        gpu.synchronize()
"""


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


@pytest.fixture
def grade_here(tmp_path):
    from tests.inprocess import grade_here as _in_process

    def _grade(src: str) -> dict:
        path = tmp_path / f"matmul_ceiling_{abs(hash(src)) % 10**8}.py"
        path.write_text(src)
        return _in_process("matmul_ceiling", "matmul_tflops", path)

    return _grade


HONEST = {
    # Warm-up by the host's clock (the model's products cost the host little,
    # so a host second is many device seconds), every product of a batch
    # queued between two events, the mean of the batches.
    "host-clock warm-up, batches of ten": """
import time


def matmul_tflops(gpu, m, n, k):
    a = gpu.randn(m, k)
    b = gpu.randn(k, n)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.2:
        c = a @ b
    gpu.synchronize()
    per_product = []
    for _ in range(5):
        gpu.flush_l2()
        s = gpu.Event(enable_timing=True)
        e = gpu.Event(enable_timing=True)
        s.record()
        for _ in range(10):
            c = a @ b
        e.record()
        e.synchronize()
        per_product.append(s.elapsed_time(e) / 10)
    seconds = sum(per_product) / len(per_product) / 1000
    return (2.0 * m * n * k) / seconds * 1e-12
""",
    # The best time instead of the median, a longer warm-up by device time.
    "best of 30": variant("WARMUP_MS, REPS = 500.0, 20", "WARMUP_MS, REPS = 1000.0, 30").replace(
        "statistics.median(times_ms)", "min(times_ms)"
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade_here, name):
    r = grade_here(HONEST[name])
    assert r["status"] == "passed", (name, [c for c in r["cases"] if not c["passed"]])


WRONG = {
    "the starter": (None, "read no event's time"),
    "M·N·K counted once": (variant("return 2 * m * n * k /", "return m * n * k /"), "2·M·N·K"),
    "FLOP/s": (variant(") / 1e12\n", ")\n"), "you returned FLOP/s"),
    "three products of warm-up": (
        variant(
            "    while elapsed < WARMUP_MS:",
            "    for _ in range(3):\n        a @ b\n    while False:",
        ),
        "warm up by time",
    ),
    "the first product timed": (
        variant("    while elapsed < WARMUP_MS:", "    while elapsed < 0:").replace(
            "REPS = 500.0, 20", "REPS = 500.0, 1"
        ),
        "the library's one-off setup",
    ),
    "the flush timed": (
        variant(
            TIMED,
            TIMED.replace("        s.record()\n", "        s.record()\n        gpu.flush_l2()\n"),
        ),
        "you timed the L2 flush too",
    ),
    "milliseconds as seconds": (
        variant("(statistics.median(times_ms) * 1e-3)", "statistics.median(times_ms)"),
        "milliseconds",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail_naming_the_mistake(grade_here, name):
    from tests.conftest import starter_source

    src, expected = WRONG[name]
    r = grade_here(src or starter_source("matmul_ceiling"))
    assert r["status"] == "failed", (name, r["summary"])
    text = r["summary"] + " " + " ".join(c.get("detail", "") for c in r["cases"] if not c["passed"])
    assert expected in text, (name, text[:2000])


def test_the_model_behaves_like_a_gpu_under_a_matmul():
    """What each rule protects against, on the model itself: the first
    product is slow, the clock falls under a sustained load."""
    from gpulab.sandbox.flops import ModelMatmulGPU

    gpu = ModelMatmulGPU(7e14, 5e-6, 0.25, 0.15, 0.03, 4e12, 50 << 20, seed=1)
    a, b = gpu.randn(8192, 8192), gpu.randn(8192, 8192)

    def timed() -> float:
        s, e = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        gpu.synchronize()
        return s.elapsed_time(e)

    first, early = timed(), timed()
    for _ in range(700):  # about a second of products
        a @ b
    settled = timed()
    assert first > 10 * settled and early < 0.85 * settled, (first, early, settled)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ gpu.randn(4096, 8)


@pytest.mark.gpu
def test_gpu_figures_agree_with_gpulabs_own(grade):
    r = grade("matmul_ceiling", REF, device="cuda", timeout=600)
    assert r["passed"], (r["summary"], r["cases"])


@pytest.mark.gpu
def test_gpu_a_figure_of_mnk_flops_fails(grade):
    r = grade("matmul_ceiling", WRONG["M·N·K counted once"][0], device="cuda", timeout=600)
    assert not r["passed"] and all(not c["passed"] for c in r["cases"]), r["cases"]
