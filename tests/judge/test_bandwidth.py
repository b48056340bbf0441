"""Lesson 01's triad grader, end to end through real child processes on the
CPU (Triton interpreter): the reference passes, the starter fails, and each
wrong or cheating variant fails for the stated reason. GPU tests (marked) add
timing and the native-only guard."""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

REF = reference_source("bandwidth")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def _why(r: dict) -> str:
    return r["summary"] + " " + " ".join(c.get("detail", "") for c in r["cases"] if not c["passed"])


def test_reference_passes(grade):
    r = grade("bandwidth", REF, shared=True)
    assert r["passed"], r
    assert len(r["cases"]) >= 11 and all(c["passed"] for c in r["cases"])
    assert {c["dtype"] for c in r["cases"]} == {"fp32", "fp16", "bf16"}
    names = " ".join(c["name"] for c in r["cases"])
    for edge in ("N=1 ", "N=2 ", "N=3 ", "alpha=0", "alpha=-", "offset"):
        assert edge in names, edge
    assert r["mode"] == "interpreter" and r["timing"] is None


def test_starter_fails(grade):
    r = grade("bandwidth", starter_source("bandwidth"), shared=True)
    assert r["status"] == "failed"
    assert "no Triton kernel was launched" in r["summary"]


WRONG = {
    # Masks off the second half: those elements stay poisoned (NaN).
    "writes only part": (variant("    mask = offs < n\n", "    mask = offs < n // 2 + 1\n"), "NaN"),
    # Arithmetic in fp16/bf16: alpha*x is rounded before y is added.
    "low-precision math": (
        variant(
            "    out = alpha * x + y",
            "    lo = x_ptr.dtype.element_ty\n"
            "    out = tl.full([BLOCK], alpha, lo) * x.to(lo) + y.to(lo)",
        ),
        "wrong",
    ),
}

CHEATS = {
    # The arithmetic done by torch after a (correct) launch.
    "calls torch": (variant("    return out", "    return y + alpha * x"), "cheat"),
    "torch.add": (variant("    return out", "    return torch.add(y, x, alpha=alpha)"), "cheat"),
    # Stores the result into y and returns it.
    "writes into inputs": (
        variant("triad_kernel[grid](out, x, y,", "triad_kernel[grid](y, x, y,").replace(
            "    return out", "    return y"
        ),
        "wrote into its inputs",
    ),
    # No kernel at all: numpy does the work.
    "no Triton launch": (
        variant(
            "    triad_kernel[grid](out, x, y, alpha, n, BLOCK=BLOCK, num_warps=4)\n",
            "    out = torch.from_numpy(alpha * x.numpy().astype('float32')"
            " + y.numpy().astype('float32')).to(x.dtype)\n",
        ),
        "no Triton kernel",
    ),
}


# Triton before 3.9: the interpreter cannot make the bf16 constant of the
# low-precision variant (a known gap, gpulab.course.known_gaps), so its bf16 cases
# raise instead of computing the wrong answer. The grader skips a case a
# known gap explains and lets the fp32/fp16 cases judge.
@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, why = WRONG[name]
    r = grade("bandwidth", src)
    assert r["status"] == "failed", (name, r["summary"])
    assert why in _why(r), r["summary"]


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_fail(grade, name):
    src, why = CHEATS[name]
    r = grade("bandwidth", src)
    assert r["status"] == "failed", (name, r["summary"])
    assert why in r["summary"], r["summary"]


@pytest.mark.gpu
def test_reference_passes_and_is_timed_on_gpu(grade):
    r = grade("bandwidth", REF, device="cuda", timeout=600)
    assert r["passed"], r["summary"]
    t = r["timing"]
    assert t and t["unit"] == "GB/s" and t["baseline"].startswith("torch.add")
    # A plain masked kernel reaches most of the bandwidth: not under half,
    # never above the datasheet (the implausibility floor would fail it).
    assert 0.5 < t["roofline_fraction"] <= 1.1, t
    assert 0.7 < t["speedup"] < 1.5, t
    for row in t["cases"]:
        assert (
            row["bytes"] == 3 * row["flops"] / 2 * {"fp32": 4, "fp16": 2, "bf16": 2}[row["dtype"]]
        )


@pytest.mark.gpu
def test_copy_from_elsewhere_is_a_cheat_on_gpu(grade):
    # A launch that writes `out`, then the answer computed by numpy on the
    # CPU and copied in: only the native-only copy guard sees it.
    src = variant(
        "    return out",
        "    import numpy as np\n"
        "    a = alpha * x.cpu().float().numpy() + y.cpu().float().numpy()\n"
        "    out.copy_(torch.from_numpy(a.astype(np.float32)))\n"
        "    return out",
    )
    r = grade("bandwidth", src, device="cuda", timing=False)
    assert r["status"] == "failed" and "cheat" in r["summary"], r["summary"]
