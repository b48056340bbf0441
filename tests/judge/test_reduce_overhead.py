"""The reduce_overhead grader (lesson 06, step 2): CUDA graphs applied, and
the learner's timing method checked on simulated devices.

The variants run the real grader and the sandbox's handler in this process
(tests/inprocess.py), each a Dynamo trace with the eager backend and about
three seconds of simulated devices (sleeping, not computing). The
reference and the starter go through real child processes in `gpulab dev
check` (tests/cli); the GPU check, which times the step itself, is marked
gpu."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("reduce_overhead")

REF = reference_source("reduce_overhead")


def variant(*edits: tuple[str, str], src: str = REF) -> str:
    for old, new in edits:
        assert old in src, f"variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


REF_TIMING = REF[REF.index("def time_per_call(") : REF.index('\nif __name__ == "__main__":')]
REF_COMPILE = REF[REF.index("def compile_step(") : REF.index("def time_per_call(")]

HONEST = {
    # nn.Module.compile in place, and per-call times with a sync each, their median.
    "Module.compile, the median of synced calls": variant(
        (
            REF_COMPILE,
            "def compile_step(model):\n"
            '    model.compile(mode="reduce-overhead")\n'
            "    return model\n\n\n",
        ),
        (
            REF_TIMING,
            "def time_per_call(step, x, sync):\n"
            "    import statistics\n"
            "    for _ in range(4):\n"
            "        step(x)\n"
            "    times = []\n"
            "    for _ in range(40):\n"
            "        sync()\n"
            "        t0 = time.perf_counter()\n"
            "        step(x)\n"
            "        sync()\n"
            "        times.append(time.perf_counter() - t0)\n"
            "    return statistics.median(times) * 1e3\n",
        ),
    ),
    # Inductor's option itself, and a warm-up by time that still makes three calls.
    "the cudagraphs option, a warm-up by time": variant(
        (
            'torch.compile(model, mode="reduce-overhead")',
            'torch.compile(model, options={"triton.cudagraphs": True})',
        ),
        (
            "    for _ in range(warmup):\n        step(x)\n",
            "    n, t0 = 0, time.perf_counter()\n"
            "    while n < 3 or time.perf_counter() - t0 < 0.05:\n"
            "        step(x)\n"
            "        n += 1\n",
        ),
    ),
}

# name -> (source, the case that fails, words its detail shows)
WRONG = {
    # The clock read when the calls are queued, not done.
    "no sync before reading the clock": (
        variant(
            (
                "    for _ in range(calls):\n        step(x)\n    sync()\n",
                "    for _ in range(calls):\n        step(x)\n",
            )
        ),
        "busy device",
        "before the device finished",
    ),
    # Timed from the first call: the compile and the recording counted.
    "no warm-up": (
        variant(
            (
                "def time_per_call(step, x, sync, warmup=5, calls=100):",
                "def time_per_call(step, x, sync, warmup=0, calls=30):",
            )
        ),
        "launch-bound device",
        "first calls",
    ),
    # torch.compile's default mode: fusion, no CUDA graphs.
    "compiled without CUDA graphs": (
        variant(('torch.compile(model, mode="reduce-overhead")', "torch.compile(model)")),
        "asks torch.compile for CUDA graphs",
        "torch.compile was called with no mode",
    ),
    # A model of its own (fresh weights): compiled, but not the model given.
    "compiles another model": (
        variant(
            (
                'torch.compile(model, mode="reduce-overhead")',
                'torch.compile(Model(), mode="reduce-overhead")',
            )
        ),
        "the compiled step computes the model",
        "wrong",
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """name -> result for every variant, the grader and handler in this process."""
    import torch

    from tests.inprocess import grade_here

    tmp = tmp_path_factory.mktemp("reduce_overhead")
    threads = torch.get_num_threads()
    out = {}
    try:
        for i, (name, src) in enumerate(
            {**HONEST, **{n: s for n, (s, _, _) in WRONG.items()}}.items()
        ):
            path = tmp / f"variant_{i}.py"
            path.write_text(src)
            out[name] = grade_here("reduce_overhead", "compile_step", path)
            torch._dynamo.reset()
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_ways_pass(graded, name):
    r = graded[name]
    assert r["status"] == "passed", (name, [(c["name"], c.get("detail")) for c in r["cases"]])
    assert any("CUDA graphs need a GPU" in n for n in r["notes"]), r["notes"]


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_ways_fail_naming_the_mistake(graded, name):
    _, case, words = WRONG[name]
    r = graded[name]
    assert r["status"] == "failed", (name, r["summary"])
    bad = {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}
    hit = [d for n, d in bad.items() if case in n]
    assert hit and words in hit[0], (name, bad)


def test_the_simulated_device_overlaps_host_and_device():
    """A call costs max(launch, work) once warm, as the grader's truth says."""
    import time

    from gpulab.judge.graders.reduce_overhead import SCENARIOS, TRUTH
    from gpulab.sandbox.overhead import SimulatedDevice

    for scenario, truth in zip(SCENARIOS, TRUTH, strict=True):
        device = SimulatedDevice((scenario[0], scenario[1], 0, 0.0))
        start = time.perf_counter()
        for _ in range(20):
            device.step(None)
        device.sync()
        per_call = (time.perf_counter() - start) * 1e3 / 20
        assert truth * 0.95 <= per_call <= truth * 1.6, (scenario, per_call)


@pytest.mark.gpu
def test_gpu_reference_is_timed_by_the_judge(grade):
    r = grade("reduce_overhead", REF, device="cuda", timeout=600)
    assert r["status"] == "passed", (r["summary"], r["cases"])
    timed = next(c for c in r["cases"] if c["name"] == "your compiled step, timed by gpulab")
    assert "x (at least" in timed["detail"], timed
