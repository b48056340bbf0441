"""The softmax grader, end to end through real child processes on the CPU
(Triton interpreter): the reference passes, the starter fails, and each wrong
or cheating variant fails for the stated reason."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

REF = reference_source("softmax")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def test_reference_passes(grade):
    r = grade("softmax", REF, shared=True)
    assert r["passed"], r
    assert r["status"] == "passed"
    assert len(r["cases"]) >= 12
    assert all(c["passed"] for c in r["cases"])
    assert {c["dtype"] for c in r["cases"]} == {"fp32", "fp16", "bf16"}
    assert r["mode"] == "interpreter" and r["timing"] is None
    assert any("interpreter" in n for n in r["notes"])


def test_starter_fails(grade):
    r = grade("softmax", starter_source("softmax"), shared=True)
    assert not r["passed"]
    assert r["status"] == "failed"


WRONG = {
    # No max subtraction: exp overflows on the large-magnitude rows.
    "unstable": (variant("    x = x - tl.max(x, axis=0)", "    x = x"), "large magnitudes"),
    # Assumes rows are n_cols apart: padded rows read the wrong elements.
    "ignores row stride": (
        variant("tl.load(x_ptr + row * x_row_stride + offs", "tl.load(x_ptr + row * n_cols + offs"),
        "row stride",
    ),
    # Padding lanes load as 0 instead of -inf: they add exp(0 - max) to the sum.
    "bad padding value": (variant('other=-float("inf"))', "other=0.0)"), "wrong"),
    # Only the first half of the rows is computed: the rest stays poisoned (NaN).
    "partial output": (
        variant("softmax_kernel[(n_rows,)]", "softmax_kernel[((n_rows + 1) // 2,)]"),
        "NaN",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, why = WRONG[name]
    r = grade("softmax", src)
    assert not r["passed"], name
    assert r["status"] == "failed"
    assert why in (
        r["summary"]
        + " ".join(c.get("detail", "") + c.get("name", "") for c in r["cases"] if not c["passed"])
    ), r["summary"]


CHEATS = {
    "torch.softmax": ("return torch.softmax(x, dim=-1)", "torch.softmax"),
    "Tensor.softmax": ("return x.softmax(-1)", "softmax"),
    "F.softmax": ("return torch.nn.functional.softmax(x, dim=1)", "softmax"),
    "log_softmax().exp()": (
        "return torch.log_softmax(x.float(), -1).exp().to(x.dtype)",
        "log_softmax",
    ),
    # Launch a kernel for show, compute with torch ops.
    "torch maths": (
        "y = torch.empty_like(x)\n    softmax_kernel[(1,)](y, x, x.stride(0), "
        "y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))\n"
        "    e = (x.float() - x.float().amax(-1, keepdim=True)).exp()\n"
        "    return (e / e.sum(-1, keepdim=True)).to(x.dtype)",
        ("during your call torch ran", "not written by your Triton kernel"),
    ),
    "no kernel": (
        "e = (x.double() - x.double().amax(-1, keepdim=True)).exp()\n"
        "    return (e / e.sum(-1, keepdim=True)).to(x.dtype)",
        "no Triton kernel was launched",
    ),
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_are_rejected(grade, name):
    body, why = CHEATS[name]
    src = REF.split("def softmax(x: torch.Tensor)")[0] + (
        f"def softmax(x: torch.Tensor) -> torch.Tensor:\n    {body}\n"
    )
    r = grade("softmax", src)
    assert not r["passed"]
    why = (why,) if isinstance(why, str) else why
    assert any(w in r["summary"] for w in why), r["summary"]


def test_writing_into_the_input_is_rejected(grade):
    src = variant("y = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)", "y = x", REF)
    r = grade("softmax", src)
    assert not r["passed"]
    assert "wrote into its inputs" in r["summary"]


def test_cached_output_fails_the_second_draw(grade):
    src = REF + (
        "\n_cache = {}\n_real = softmax\n\n"
        "def softmax(x):\n"
        "    key = (tuple(x.shape), x.stride(0), x.dtype)\n"
        "    if key not in _cache:\n"
        "        _cache[key] = _real(x)\n"
        "    y = torch.empty_like(_cache[key])\n"
        "    softmax_kernel[(1,)](y, _cache[key], y.stride(0), y.stride(0), 1, BLOCK=1)\n"
        "    return _cache[key]\n"
    )
    r = grade("softmax", src)
    assert not r["passed"]


def test_wrong_dtype_is_named(grade):
    src = variant("dtype=x.dtype, device=x.device)", "dtype=torch.float32, device=x.device)")
    r = grade("softmax", src)
    assert not r["passed"]
    assert "dtype" in r["summary"]


def test_patching_torch_reference_fools_nothing(grade):
    # Make torch.softmax agree with a wrong kernel: it would fool a reference
    # computed in the learner's process; the judge's is computed elsewhere.
    src = variant("    x = x - tl.max(x, axis=0)", "    x = x * 0.5") + (
        "\ntorch.softmax = lambda x, dim=-1, dtype=None: softmax(x.to(torch.float32)).double()\n"
    )
    r = grade("softmax", src)
    assert not r["passed"]
    assert "wrong" in r["summary"]


# --- On a GPU: the cheats that only show up when timing --------------------


@pytest.mark.gpu
def test_gpu_reference_is_timed_and_graded(grade):
    r = grade("softmax", REF, device="cuda", timeout=600)
    assert r["passed"], r["summary"]
    t = r["timing"]
    assert t and t["grade"] in "ABCD" and len(t["cases"]) == 8
    for row in t["cases"]:
        assert row["ms"] > 0 and row["p20_ms"] <= row["ms"] <= row["p80_ms"]
        assert 0.2 < row["roofline_fraction"] < 1.05
        assert row["baseline"] == "torch.softmax" and row["speedup"] > 0
        assert row["clocks"]["logged"]


@pytest.mark.gpu
def test_gpu_side_stream_is_rejected(grade):
    src = variant(
        "    softmax_kernel[(n_rows,)]",
        "    s = torch.cuda.Stream()\n    with torch.cuda.stream(s):\n"
        "        softmax_kernel[(n_rows,)]",
    )
    src = src.replace(
        "                              BLOCK=block, num_warps=_num_warps(block))",
        "                                  BLOCK=block, num_warps=_num_warps(block))",
    )
    r = grade("softmax", src, device="cuda", timeout=600)
    assert not r["passed"] and "side stream" in r["summary"]


@pytest.mark.gpu
def test_gpu_patched_timer_changes_nothing(grade):
    # The sandbox took Event.elapsed_time before the learner's file loaded.
    src = REF + "\ntorch.cuda.Event.elapsed_time = lambda self, end: 0.001\n"
    r = grade("softmax", src, device="cuda", timeout=600)
    assert r["passed"], r["summary"]
    assert all(
        row["ms"] > 0.005 and row["roofline_fraction"] < 1.05 for row in r["timing"]["cases"]
    )


@pytest.mark.gpu
def test_gpu_cached_output_is_implausibly_fast(grade):
    # Right answers, but repeated calls on the same input return a cached
    # tensor without launching anything: faster than the memory system allows.
    src = REF + (
        "\n_cache = {}\n_real = softmax\n\n"
        "def softmax(x):\n"
        "    key = (x.data_ptr(), tuple(x.shape), x.dtype)\n"
        "    if key not in _cache:\n"
        "        _cache[key] = _real(x)\n"
        "    return _cache[key]\n"
    )
    r = grade("softmax", src, device="cuda", timeout=600)
    assert not r["passed"]
    assert "wrong" in r["summary"] or "implausible" in r["summary"], r["summary"]
