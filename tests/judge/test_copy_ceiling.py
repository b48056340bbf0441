"""The copy_ceiling grader (lesson 01): a copy benchmark the learner writes.

The reference and the starter go through the real check path; the variants
run the same grader with the sandbox's handlers in this process
(tests/inprocess.py). On the CPU the benchmark runs on the model GPU of
gpulab.sandbox.ceiling; the GPU tests run it on the real one, beside the
judge's own timing."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

REF = reference_source("copy_ceiling")
STARTER = starter_source("copy_ceiling")

TIMED = """        gpu.flush_l2()
        start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        gpu.synchronize()
"""


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


@pytest.fixture
def grade_here(tmp_path):
    from tests.inprocess import grade_here as _in_process

    def _grade(src: str) -> dict:
        path = tmp_path / f"copy_ceiling_{abs(hash(src)) % 10**8}.py"
        path.write_text(src)
        return _in_process("copy_ceiling", "copy_bandwidth", path)

    return _grade


def test_reference_passes(grade):
    r = grade("copy_ceiling", REF, shared=True)
    assert r["passed"], (r["summary"], [c for c in r["cases"] if not c["passed"]])
    names = [c["name"] for c in r["cases"]]
    assert sum(n.startswith("buffer_bytes for") for n in names) == 7
    assert [n for n in names if n.startswith("copy_bandwidth")][-2:] == [
        "copy_bandwidth, 256 MiB",
        "copy_bandwidth, 16 MiB",
    ]
    assert any("model of a GPU" in n for n in r["notes"])


def test_starter_fails_on_every_case(grade):
    r = grade("copy_ceiling", STARTER, shared=True)
    assert r["status"] == "failed"
    assert not any(c["passed"] for c in r["cases"]), r["cases"]
    big = next(c for c in r["cases"] if c["name"] == "copy_bandwidth, 256 MiB")
    assert "host's clock" in big["detail"], big


HONEST = {
    # Every copy of a batch queued, one synchronize, then the events read
    # (gpulab's own measure does this); the best time, not the median.
    "batched, best time": variant(
        "    times_ms = []\n    for _ in range(REPS):\n"
        + TIMED
        + "        times_ms.append(start.elapsed_time(end))\n"
        "    return 2 * nbytes / (statistics.median(times_ms) * 1e-3)\n",
        "    pairs = []\n    for _ in range(REPS):\n"
        + TIMED.replace("        gpu.synchronize()\n", "")
        + "        pairs.append((start, end))\n"
        "    gpu.synchronize()\n"
        "    best = min(s.elapsed_time(e) for s, e in pairs)\n"
        "    return 2.0 * nbytes / best * 1000\n",
    ),
    # Warm-up by the host's clock, the end event waited on, a mean after it,
    # repeats until the spread is small; the plan rounded to whole MiB.
    "adaptive": """
import statistics
import time


def buffer_bytes(l2, free):
    mib = 1 << 20
    return int(min(max(8 * l2, 1024 * mib), free // 4)) // mib * mib


def copy_bandwidth(gpu, nbytes):
    a = gpu.buffer(nbytes)
    b = a.clone()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.01:
        b.copy_(a)
        gpu.synchronize()
    ms = []
    while len(ms) < 5 or statistics.stdev(ms) / statistics.fmean(ms) > 0.02 / len(ms) ** 0.5:
        gpu.flush_l2()
        e0 = gpu.Event(enable_timing=True)
        e1 = gpu.Event(enable_timing=True)
        e0.record()
        b.copy_(a)
        e1.record()
        e1.synchronize()
        ms.append(e0.elapsed_time(e1))
        if len(ms) > 200:
            break
    return (nbytes + nbytes) / (statistics.fmean(ms) / 1e3)
""",
    # No warm-up at all, but the median of many copies is robust to the slow
    # first ones.
    "median without warm-up": variant("WARMUP, REPS = 3, 15", "WARMUP, REPS = 0, 21"),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade_here, name):
    r = grade_here(HONEST[name])
    assert r["status"] == "passed", (name, [c for c in r["cases"] if not c["passed"]])


WRONG = {
    "no flush": (variant("        gpu.flush_l2()\n", ""), "flush it before each timed copy"),
    "flush timed": (
        variant(
            "        gpu.flush_l2()\n        start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)\n"
            "        start.record()\n",
            "        start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)\n"
            "        start.record()\n        gpu.flush_l2()\n",
        ),
        "you timed the flush too",
    ),
    "one way": (variant("return 2 * nbytes /", "return nbytes /"), "you counted the bytes once"),
    "TB/s": (
        variant(
            "return 2 * nbytes / (statistics.median(times_ms) * 1e-3)",
            "return 2 * nbytes / (statistics.median(times_ms) * 1e-3) / 1e12",
        ),
        "you returned TB/s",
    ),
    "one cold copy": (variant("WARMUP, REPS = 3, 15", "WARMUP, REPS = 0, 1"), "warm up first"),
    "no synchronize": (variant("        gpu.synchronize()\n", ""), "device not ready"),
    "the datasheet": (
        variant(
            "def copy_bandwidth(gpu, nbytes):\n",
            "def copy_bandwidth(gpu, nbytes):\n    return 4.8e12\n",
        ),
        "the ceiling",
    ),
    "buffers in the L2": (variant("max(8 * l2, GiB)", "2 * l2"), "at least 8× the L2"),
    # The model's own parameters, no event read: right figures with no
    # timing at all (and, for a host-clock figure, right only by chance).
    "the model's parameters": (
        variant(
            "def copy_bandwidth(gpu, nbytes):\n",
            "def copy_bandwidth(gpu, nbytes):\n"
            "    return 2 * nbytes / (gpu.overhead + 2 * nbytes / gpu.hbm)\n",
        ),
        "read no event's time",
    ),
    "buffers too big": (variant("free // 4", "free // 2"), "a quarter of it"),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade_here, name):
    src, expected = WRONG[name]
    r = grade_here(src)
    assert r["status"] == "failed", (name, r["summary"])
    text = r["summary"] + " " + " ".join(c.get("detail", "") for c in r["cases"] if not c["passed"])
    assert expected in text, (name, text[:2000])


def test_the_model_behaves_like_a_gpu():
    """What each rule protects against, on the model itself."""
    from gpulab.sandbox.ceiling import ModelGPU

    gpu = ModelGPU(4e12, 60 << 20, 5e-6, seed=1)
    src, dst = gpu.buffer(16 << 20), gpu.buffer(16 << 20)
    start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
    start.record()
    dst.copy_(src)
    end.record()
    with pytest.raises(RuntimeError, match="device not ready"):
        start.elapsed_time(end)  # the host reads before the device got there
    gpu.synchronize()
    cold = start.elapsed_time(end)

    def timed(flush: bool) -> float:
        if flush:
            gpu.flush_l2()
        s, e = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        gpu.synchronize()
        return s.elapsed_time(e)

    for _ in range(3):
        timed(True)
    warm, cached = timed(True), timed(False)
    assert cold > 2.5 * warm and cached < 0.85 * warm, (cold, warm, cached)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["reference", "batched, best time"])
def test_gpu_figures_agree_with_gpulabs_own(grade, name):
    src = REF if name == "reference" else HONEST[name]
    r = grade("copy_ceiling", src, device="cuda", timeout=600)
    assert r["passed"], (name, r["summary"], r["cases"])


@pytest.mark.gpu
def test_gpu_an_unflushed_small_copy_reads_the_l2(grade):
    r = grade("copy_ceiling", WRONG["no flush"][0], device="cuda", timeout=600)
    small = next(c for c in r["cases"] if c["name"] == "copy_bandwidth, 16 MiB")
    assert not small["passed"], small
