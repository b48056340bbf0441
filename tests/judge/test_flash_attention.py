"""The FlashAttention grader (lesson 04), end to end through real child
processes on the CPU (Triton interpreter): the reference passes, the starter
fails, the third hint's code passes, and each wrong or cheating variant fails
for the stated reason. GPU-only tests (timing against SDPA) are marked `gpu`."""

from __future__ import annotations

import re

import pytest

from tests.conftest import reference_source, shared_check, starter_source

REF = reference_source("flash_attention")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


def failing(r: dict) -> set[str]:
    return {c["name"] for c in r["cases"] if not c["passed"]}


@pytest.fixture(scope="module")
def ref_result(tmp_path_factory):
    """One CPU check of the reference, shared by the tests that read it
    (and with tests/course/test_every_exercise.py: conftest's shared_check)."""
    return shared_check(tmp_path_factory, "flash_attention", REF)


def test_reference_passes(ref_result):
    r = ref_result
    assert r["passed"], (r["summary"], r.get("message"), r.get("output"))
    assert r["mode"] == "interpreter" and r["timing"] is None
    names = [c["name"] for c in r["cases"]]
    assert len(names) >= 12
    assert sum("causal" in n for n in names) >= 4
    assert any("large scores" in n for n in names)
    assert any("(B, S, H, D) memory" in n for n in names)
    assert {f"D{d}" for d in (16, 32, 64, 128)} <= {n.split()[4] for n in names}
    dtypes = {c["dtype"] for c in r["cases"]}
    assert {"fp32", "fp16"} <= dtypes
    assert "bf16" in dtypes or any(s.startswith("bf16") for s in r["skipped"]), r["skipped"]


def test_starter_fails(grade):
    r = grade("flash_attention", starter_source("flash_attention"), shared=True)
    assert r["status"] == "failed"
    assert "NaN" in r["summary"]  # launched, wrote nothing: the poison shows


def test_third_hint_solves_it(grade, course):
    """The near-solution hint, pasted into the starter, passes."""
    hint = course.find("flash_attention").hints[2]
    code = re.search(r"```python\n(.*?)```", hint, re.S).group(1)
    body = "".join("    " + line + "\n" for line in code.splitlines())
    src = starter_source("flash_attention")
    start = src.index("    # TODO: base pointers")
    end = src.index("    pass\n", start) + len("    pass\n")
    src = (
        src[:start]
        + body.replace(
            "# likewise k_base, v_base, o_base",
            "\n    k_base = K + b * stride_kb + h * stride_kh\n"
            "    v_base = V + b * stride_vb + h * stride_vh\n"
            "    o_base = O + b * stride_ob + h * stride_oh",
        )
        + src[end:]
    )
    r = grade("flash_attention", src)
    assert r["passed"], (r["summary"], r.get("message"))


WRONG = {
    # Future keys inside the diagonal tile leak in.
    "no causal mask": (
        variant(
            "                keep = keep & (offs_m[:, None] >= offs_n[None, :])\n",
            "                keep = keep\n",
        ),
        "B1 H2 Sq130 Sk130 D64 causal fp16",
        "B2 H3 Sq100 Sk77 D32 fp32",
    ),
    # The running max grows but the old sums are not rescaled.
    "no rescale": (
        variant(
            "        l_i = l_i * alpha + tl.sum(p, 1)\n        acc = acc * alpha[:, None]\n",
            "        l_i = l_i + tl.sum(p, 1)\n",
        ),
        "B2 H1 Sq40 Sk300 D64 fp16",
        "B1 H1 Sq1 Sk1 D16 fp32",
    ),
    # exp of raw scores: right on tame data, inf/inf = NaN once scores are large.
    "no max subtraction": (
        variant(
            "        m_new = tl.maximum(m_i, tl.max(s, 1))\n",
            "        m_new = tl.zeros_like(m_i)\n",
        ),
        "B1 H2 Sq64 Sk100 D64 fp32 (large scores)",
        "B2 H3 Sq100 Sk77 D32 fp32",
    ),
    # Strides computed from the shape: only contiguous inputs come out right.
    "assumes contiguous": (
        variant(
            "        *q.stride(), *k.stride(), *v.stride(), *o.stride(),\n",
            "        *_packed(q), *_packed(k), *_packed(v), *o.stride(),\n",
        )
        + "\n\ndef _packed(t):\n    B, H, S, D = t.shape\n    return (H * S * D, S * D, D, 1)\n",
        "B1 H2 Sq80 Sk80 D32 causal fp32 ((B, S, H, D) memory)",
        "B1 H1 Sq150 Sk150 D128",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade, name):
    src, must_fail, may_pass = WRONG[name]
    r = grade("flash_attention", src)
    assert r["status"] == "failed", r["summary"]
    bad = failing(r)
    assert any(n.startswith(must_fail) for n in bad), (name, bad)
    assert not any(n.startswith(may_pass) for n in bad), (name, bad)  # the bug, not noise


# A Triton copy kernel, so a cheat can make "its kernel" write the output.
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
        REF.split("def attention(")[0]
        + COPY_KERNEL
        + (
            "def attention(q, k, v, causal=False, sm_scale=None):\n"
            "    sm_scale = sm_scale or 1.0 / math.sqrt(q.shape[-1])\n"
            "    o = torch.empty_like(q, memory_format=torch.contiguous_format)\n"
            f"    {body}\n"
        )
    )


NAIVE = """s = (q.float() @ k.float().transpose(-1, -2)) * sm_scale
    if causal:
        s = s.masked_fill(torch.ones_like(s, dtype=torch.bool).triu(1), float("-inf"))
    return _launch_copy(o, ({softmax}) @ v.float())"""

CHEATS = {
    "SDPA": (
        "return _launch_copy(o, torch.nn.functional.scaled_dot_product_attention("
        "q, k, v, is_causal=causal, scale=sm_scale))",
        "scaled_dot_product_attention",
    ),
    # The S×S matrix materialised with torch ops: matmuls and softmax.
    "naive torch.softmax": (NAIVE.format(softmax="torch.softmax(s, -1)"), "cheat"),
    # ... and with the softmax spelled out, so only the matmuls give it away.
    "naive hand softmax": (
        NAIVE.format(
            softmax="(s - s.amax(-1, keepdim=True)).exp() / "
            "(s - s.amax(-1, keepdim=True)).exp()"
            ".sum(-1, keepdim=True)"
        ),
        "matmul",
    ),
    # Right answer, but q is pre-scaled in place to save a multiply.
    "scales q in place": (
        "q.mul_(sm_scale)\n    launch(q, k, v, o, causal, 1.0)\n    return o",
        "wrote into its inputs",
    ),
    "wrong shape": ("launch(q, k, v, o, causal, sm_scale)\n    return o.transpose(1, 2)", "shape"),
}


@pytest.mark.parametrize("name", list(CHEATS))
def test_cheats_are_rejected(grade, name):
    body, why = CHEATS[name]
    r = grade("flash_attention", cheat(body))
    assert r["status"] == "failed", r["summary"]
    assert why in r["summary"], r["summary"]


@pytest.mark.gpu
def test_reference_is_timed_against_sdpa_on_gpu(grade):
    r = grade("flash_attention", REF, device="cuda", timeout=600)
    assert r["passed"], (r["summary"], r.get("message"))
    assert not r["skipped"]
    t = r["timing"]
    assert t["unit"] == "TFLOP/s" and t["baseline"].startswith("SDPA")
    for row in t["cases"]:
        sizes = dict(re.findall(r"([A-Za-z]+)(\d+)", row["shape"]))
        B, H, S, D = (int(sizes[x]) for x in ("B", "H", "Sq", "D"))
        causal = "causal" in row["name"]
        assert row["flops"] == 4 * B * H * S * S * D / (2 if causal else 1)
        assert row["throughput"] > 50, row
    assert t["speedup"] >= 0.7, t


@pytest.mark.gpu
def test_sdpa_cheat_is_caught_natively(grade):
    r = grade("flash_attention", cheat(CHEATS["SDPA"][0]), device="cuda", timing=False)
    assert r["status"] == "failed" and "cheat" in r["summary"], r["summary"]
