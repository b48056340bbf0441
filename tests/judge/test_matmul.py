"""The matmul grader (lesson 03), end to end through real child processes on
the CPU (Triton interpreter): the reference passes, the starter and the
third hint's code do what they should, and each wrong or cheating variant
fails for the stated reason. GPU-only tests (timing against cuBLAS) are
marked `gpu`."""

from __future__ import annotations

import re

import pytest

from tests.conftest import reference_source, shared_check, starter_source

REF = reference_source("matmul")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def failing(r: dict) -> set[str]:
    return {c["name"] for c in r["cases"] if not c["passed"]}


@pytest.fixture(scope="module")
def ref_result(tmp_path_factory):
    """One CPU check of the reference, shared by the tests that read it
    (and with tests/course/test_every_exercise.py: conftest's shared_check)."""
    return shared_check(tmp_path_factory, "matmul", REF)


def test_reference_passes(ref_result):
    r = ref_result
    assert r["passed"], (r["summary"], r.get("message"), r.get("output"))
    assert r["mode"] == "interpreter" and r["timing"] is None
    names = [c["name"] for c in r["cases"]]
    assert len(names) >= 12
    assert any("transposed" in n for n in names) and any("every other column" in n for n in names)
    assert any(n.startswith("33×65 @ 65×47") for n in names)  # K not a multiple of any block
    # bf16 is either checked or named as skipped, never silently dropped.
    dtypes = {c["dtype"] for c in r["cases"]}
    assert {"fp32", "fp16"} <= dtypes
    assert "bf16" in dtypes or any(s.startswith("bf16") for s in r["skipped"]), r["skipped"]


def test_starter_fails(grade):
    r = grade("matmul", starter_source("matmul"), shared=True)
    assert r["status"] == "failed"
    assert "no Triton kernel was launched" in r["summary"]


def test_third_hint_solves_it(grade, course):
    """The near-solution hint, pasted into the starter, passes."""
    hint = course.find("matmul").hints[2]
    code = re.search(r"```python\n(.*?)```", hint, re.S).group(1)
    body = "".join("    " + line + "\n" for line in code.splitlines())
    src = starter_source("matmul")
    start = src.index("    pid = tl.program_id(0)\n")
    end = src.index("    pass\n", start) + len("    pass\n")
    src = src[:start] + body + src[end:]
    src = variant(
        "    return c\n",
        "    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)\n"
        "    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1),\n"
        "                        b.stride(0), b.stride(1), c.stride(0), c.stride(1),\n"
        "                        BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,\n"
        "                        GROUP_M=GROUP_M)\n    return c\n",
        src,
    )
    r = grade("matmul", src)
    assert r["passed"], (r["summary"], r.get("message"))


WRONG = {
    # No mask on the K loads: the tail reads whatever lies past each row.
    "no K tail mask": (
        variant(
            "        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)\n"
            "        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)\n",
            "        a = tl.load(a_ptrs)\n        b = tl.load(b_ptrs)\n",
        ),
        "33×65 @ 65×47 fp16",
        "64×64 @ 64×64 fp16",
    ),
    # Assumes contiguous inputs: transposed and strided views read the wrong elements.
    "ignores strides": (
        variant(
            "        a.stride(0), a.stride(1),\n        b.stride(0), b.stride(1),\n",
            "        K, 1,\n        N, 1,\n",
        ),
        "70×50 @ 50×90 fp32 (a is a transposed view)",
        "130×200 @ 200×70 fp16",
    ),
    # Only half of the tiles are launched: the rest of C stays poisoned (NaN).
    "partial output": (
        variant(
            'return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)',
            'return (max(1, triton.cdiv(M, meta["BLOCK_M"]) * '
            'triton.cdiv(N, meta["BLOCK_N"]) // 2),)',
        ),
        "130×200 @ 200×70 fp16",
        "1×1 @ 1×1 fp32",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, must_fail, may_pass = WRONG[name]
    r = grade("matmul", src)
    assert r["status"] == "failed", r["summary"]
    bad = failing(r)
    assert any(n.startswith(must_fail) for n in bad), (name, bad)
    assert not any(n.startswith(may_pass) for n in bad), (name, bad)  # the bug, not noise
    if name == "partial output":
        assert "NaN" in r["summary"] + " ".join(c.get("detail", "") for c in r["cases"])


# A Triton kernel that copies src into dst, for cheats that want to "launch
# something" so the launch guard sees a kernel writing the output.
COPY_KERNEL = """
@triton.jit
def _copy(dst, src, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(dst + o, tl.load(src + o, mask=o < n), mask=o < n)


def _launch_copy(dst, src):
    n = dst.numel()
    _copy[(triton.cdiv(n, 1024),)](dst, src.contiguous(), n, B=1024)
    return dst

"""


def cheat(body: str) -> str:
    return (
        REF.split("def matmul(")[0]
        + COPY_KERNEL
        + (
            "def matmul(a, b):\n"
            "    c = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)\n"
            f"    {body}\n"
        )
    )


CHEATS = {
    "torch.matmul": ("return _launch_copy(c, torch.matmul(a, b))", "cheat: your code called"),
    # No kernel at all: products and a sum in torch.
    "no kernel": (
        "return (a[:, :, None].double() * b[None].double()).sum(1).to(a.dtype)",
        "no Triton kernel was launched",
    ),
    # A kernel runs (into a scratch buffer), the answer comes from torch.
    "torch maths": (
        "_launch_copy(torch.empty_like(a), a)\n"
        "    return (a[:, :, None].double() * b[None].double()).sum(1).to(a.dtype)",
        ("during your call torch ran", "not written by your Triton kernel"),
    ),
    # Products and a sum in torch, copied into the output by a real kernel:
    # every launch guard is satisfied, the elementwise guard is not.
    "torch maths copied by a kernel": (
        "return _launch_copy(c, (a[:, :, None].float() * b[None].float()).sum(1).to(a.dtype))",
        ("on a large tensor", "during your call torch ran", "not written by your Triton kernel"),
    ),
    # Right answer, but a is reused as scratch space afterwards.
    "writes into a": ("launch(a, b, c)\n    a.zero_()\n    return c", "wrote into its inputs"),
    "wrong dtype": ("c = c.float()\n    launch(a, b, c)\n    return c", "dtype"),
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_are_rejected(grade, name):
    body, why = CHEATS[name]
    why = (why,) if isinstance(why, str) else why
    r = grade("matmul", cheat(body))
    assert r["status"] == "failed", r["summary"]
    assert any(w in r["summary"] for w in why), r["summary"]


def test_at_operator_is_named(grade):
    r = grade("matmul", cheat("return _launch_copy(c, a @ b)"))
    assert r["status"] == "failed" and "cheat" in r["summary"], r["summary"]
    assert "matmul" in r["summary"] or "mm" in r["summary"], r["summary"]


@pytest.mark.gpu
def test_reference_is_timed_against_cublas_on_gpu(grade):
    r = grade("matmul", REF, device="cuda", timeout=600)
    assert r["passed"], (r["summary"], r.get("message"))
    assert not r["skipped"]  # every dtype is checked natively
    t = r["timing"]
    assert t["unit"] == "TFLOP/s" and t["baseline"].startswith("cuBLAS")
    for row in t["cases"]:
        M, K, _, N = map(int, re.findall(r"\d+", row["shape"]))
        assert row["flops"] == 2 * M * N * K
        assert row["bytes"] == (M * K + K * N + M * N) * 2
        assert row["throughput"] > 50, row  # a tiled, tensor-core kernel, not a toy
    # The reference is meant to sit at or above the book's 70% line.
    assert t["speedup"] >= 0.7, t


@pytest.mark.gpu
def test_matmul_cheat_is_caught_natively(grade):
    r = grade(
        "matmul", cheat("return _launch_copy(c, torch.matmul(a, b))"), device="cuda", timing=False
    )
    assert r["status"] == "failed" and "cheat" in r["summary"], r["summary"]
