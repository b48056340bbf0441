"""The fused RMSNorm + RoPE grader (lesson 05), end to end on the CPU (Triton
interpreter): the reference and a solved starter pass, the starter fails, and
each wrong or cheating variant fails for the stated reason. GPU tests (timing
against eager and torch.compile, the backward's guards in autograd's device
threads) are marked `gpu`.

The reference, the starter and two cheats go through the real runner (a child
process each). The other variants are graded one after another in ONE child
process by the same grader code (`grade_request`), because a child's fixed
cost (importing torch, triton and torch._dynamo: ~5 s) dwarfs the grading
itself (~1-3 s a variant in the interpreter).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import (
    REPO,
    gpulab_env,
    reference_source,
    shared_check,
    starter_source,
)

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("rope_rmsnorm")

REF = reference_source("rope_rmsnorm")
EX = "rope_rmsnorm"


def variant(*edits: tuple[str, str], src: str = REF) -> str:
    """Apply (old, new) edits, each to the FIRST occurrence (the forward kernel
    comes before the backward one in the reference)."""
    for old, new in edits:
        assert old in src, f"variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


def failing_text(r: dict) -> str:
    return (
        r["summary"]
        + " "
        + " ".join(
            c.get("name", "") + " " + c.get("detail", "") for c in r["cases"] if not c["passed"]
        )
    )


@pytest.fixture(scope="module")
def reference_result(tmp_path_factory):
    return shared_check(tmp_path_factory, EX, REF)


BATCH_CHILD = r"""
import json, sys
from gpulab.judge.main import judge
from gpulab.judge.remote import harden_judge

harden_judge()  # a judge adopts its sandboxes' keepers, as `python -m gpulab.judge.main` does
from gpulab.judge import prepared

prepared.KEEP_FORKS = True  # one fork server for the whole batch (tests/judge_pool.py)

class Quiet:
    def send(self, event): pass
    def stage(self, kind, text, *progress): pass

# One judge process grades every variant, each in a sandbox of its own.
files, out_path, content = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
results = {}
for name, path in files.items():
    request = {"exercise": "rope_rmsnorm", "function": "rmsnorm_rope", "file": path,
               "timing": False, "device": "cpu", "timeout": 120, "content_root": content}
    results[name] = judge(request, Quiet()).to_json()
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
prepared.close_kept_forks()
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """name -> result for every variant below, graded by one judge process."""
    tmp = tmp_path_factory.mktemp("rope_batch")
    sources = {
        "solved starter": solved_starter(),
        **{n: src for n, (src, _) in WRONG.items()},
        **{n: src for n, (src, _) in CHEATS.items() if n not in RUNNER_CHEATS},
    }
    files = {}
    for i, (name, src) in enumerate(sources.items()):
        files[name] = str(tmp / f"variant_{i}.py")
        (tmp / f"variant_{i}.py").write_text(src)
    out = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", BATCH_CHILD, json.dumps(files), str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        env=gpulab_env(tmp / "home"),
        cwd=REPO,
    )
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_reference_passes(reference_result):
    r = reference_result
    assert r["passed"], r
    assert r["mode"] == "interpreter" and r["timing"] is None
    names = [c["name"] for c in r["cases"]]
    backward = [n for n in names if n.startswith("backward")]
    assert len(names) - len(backward) >= 14 and len(backward) >= 8
    assert {c["dtype"] for c in r["cases"]} == {"fp32", "fp16", "bf16"}
    # Every D from 16 to 256, S = 1, strided views, large magnitudes, eps.
    for needle in (
        "×16 ",
        "×32 ",
        "×64 ",
        "×128 ",
        "×256 ",
        "S=1",
        "qkv view",
        "bhsd view",
        "large magnitudes",
        "eps",
        "y.backward(dy)",
        "fp32 weight",
    ):
        assert any(needle in n for n in names), needle
    assert any("interpreter" in n for n in r["notes"])
    assert r["duration_s"] < 60  # about 8 s alone on 2 cores; CI boxes are shared


def test_starter_fails(grade):
    r = grade(EX, starter_source(EX), shared=True)
    assert not r["passed"] and r["status"] == "failed"


# The starter's own skeleton, filled in the simplest way (a block of heads a
# program forward; a persistent backward whose (P, D) dweight partials are
# added up with `dw_part.sum(0)` in the wrapper): the eager sum the grader
# allows must not be taken for a cheat.
FWD_BODY = """\
    mask = (h < H)[:, None]
    row = x_ptr + b * stride_xb + s * stride_xs + h[:, None] * stride_xh
    x1 = tl.load(row + j[None, :], mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D + eps)[:, None]
    n1 = x1 * rstd * tl.load(w_ptr + j).to(tl.float32)[None, :]
    n2 = x2 * rstd * tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
    c = tl.load(cos_ptr + s * stride_cs + j)[None, :]
    sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]
    out = y_ptr + (pos * H + h[:, None]) * D
    tl.store(out + j[None, :], (n1 * c - n2 * sn).to(y_ptr.dtype.element_ty), mask=mask)
    tl.store(out + HALF + j[None, :], (n2 * c + n1 * sn).to(y_ptr.dtype.element_ty), mask=mask)
"""
BWD_INIT = """\
    dw1 = tl.zeros([HALF], dtype=tl.float32)
    dw2 = tl.zeros([HALF], dtype=tl.float32)
"""
BWD_BODY = """\
        mask = (h < H)[:, None]
        row = x_ptr + b * stride_xb + s * stride_xs + h[:, None] * stride_xh
        drow = dy_ptr + b * stride_db + s * stride_ds + h[:, None] * stride_dh
        x1 = tl.load(row + j[None, :], mask=mask, other=0.0).to(tl.float32)
        x2 = tl.load(row + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
        dy1 = tl.load(drow + j[None, :], mask=mask, other=0.0).to(tl.float32)
        dy2 = tl.load(drow + HALF + j[None, :], mask=mask, other=0.0).to(tl.float32)
        c = tl.load(cos_ptr + s * stride_cs + j)[None, :]
        sn = tl.load(sin_ptr + s * stride_cs + j)[None, :]
        rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / D + eps)[:, None]
        xh1, xh2 = x1 * rstd, x2 * rstd
        dn1 = dy1 * c + dy2 * sn
        dn2 = dy2 * c - dy1 * sn
        dw1 += tl.sum(dn1 * xh1, axis=0)
        dw2 += tl.sum(dn2 * xh2, axis=0)
        g1 = dn1 * tl.load(w_ptr + j).to(tl.float32)[None, :]
        g2 = dn2 * tl.load(w_ptr + HALF + j).to(tl.float32)[None, :]
        m = ((tl.sum(g1 * xh1, axis=1) + tl.sum(g2 * xh2, axis=1)) / D)[:, None]
        out = dx_ptr + (pos * H + h[:, None]) * D
        tl.store(out + j[None, :], (rstd * (g1 - xh1 * m)).to(dx_ptr.dtype.element_ty),
                 mask=mask)
        tl.store(out + HALF + j[None, :], (rstd * (g2 - xh2 * m)).to(dx_ptr.dtype.element_ty),
                 mask=mask)
"""
BWD_STORE = """\
    tl.store(dw_part_ptr + pid * D + j, dw1)
    tl.store(dw_part_ptr + pid * D + HALF + j, dw2)
"""
FWD_LAUNCH = """\
        rmsnorm_rope_fwd_kernel[(B * S, triton.cdiv(H, BLOCK_H))](
            x, weight, cos, sin, y, S, H, x.stride(0), x.stride(1), x.stride(2),
            cos.stride(0), eps, D=D, HALF=D // 2, BLOCK_H=BLOCK_H)
"""
BWD_LAUNCH = """\
        rmsnorm_rope_bwd_kernel[(P,)](x, weight, cos, sin, dy, dx, dw_part, B * S, S, H,
                                      x.stride(0), x.stride(1), x.stride(2),
                                      dy.stride(0), dy.stride(1), dy.stride(2),
                                      cos.stride(0), ctx.eps, D=D, HALF=D // 2,
                                      BLOCK_H=BLOCK_H)
        dw = dw_part.sum(0).to(weight.dtype)
"""


def solved_starter() -> str:
    # The starter as issue 47 made it: the kernels' bodies are steps 3 and 4
    # (rope_rmsnorm_fwd, rope_rmsnorm_bwd), the wrapper joins them.
    src = starter_source(EX)
    start = src.index("    # TODO: step 3's kernel body")
    end = src.index("    pass\n", start) + len("    pass\n")
    src = src[:start] + FWD_BODY + src[end:]
    start = src.index("    # TODO: step 4's kernel body")
    src = src[:start] + BWD_INIT + src[src.index("    for work in range(", start) :]
    tail = "        pass\n    pass\n"  # the loop's body, then the kernel's end
    assert tail in src, tail
    src = src.replace(tail, BWD_BODY + BWD_STORE, 1)
    return variant(
        (
            "        # TODO: launch rmsnorm_rope_fwd_kernel on a grid of\n"
            "        #       (B * S, triton.cdiv(H, BLOCK_H)) programs, with HALF = D // 2.\n",
            FWD_LAUNCH
            + "        ctx.save_for_backward(x, weight, cos, sin)\n        ctx.eps = eps\n",
        ),
        ("        x = weight = None\n", "        x, weight, cos, sin = ctx.saved_tensors\n"),
        ("        dw = torch.empty_like(weight)\n", BWD_LAUNCH),
        ("        return dx\n", "        return dx, dw, None, None, None\n"),
        src=src,
    )


def test_solved_starter_passes(batch):
    r = batch["solved starter"]
    assert r["status"] == "passed", (r["summary"], r.get("message"))


WRONG = {
    # RoPE pairs neighbours (2j, 2j+1) instead of (j, j + D/2).
    "interleaved RoPE": (
        variant(
            ("x_row + j[None, :]", "x_row + 2 * j[None, :]"),
            ("x_row + HALF + j[None, :]", "x_row + 2 * j[None, :] + 1"),
            ("tl.load(w_ptr + j)", "tl.load(w_ptr + 2 * j)"),
            ("tl.load(w_ptr + HALF + j)", "tl.load(w_ptr + 2 * j + 1)"),
            ("tl.store(y_row + j[None, :]", "tl.store(y_row + 2 * j[None, :]"),
            ("tl.store(y_row + HALF + j[None, :]", "tl.store(y_row + 2 * j[None, :] + 1"),
        ),
        "elements wrong",
    ),
    # rsqrt(ms) + eps: invisible at ordinary magnitudes, wrong where eps matters.
    "eps outside the rsqrt": (variant(("tl.rsqrt(ms + eps)", "(tl.rsqrt(ms) + eps)")), "eps"),
    # The sum of squares in x's dtype: x² overflows fp16 at |x| > 256.
    "normalising in fp16": (
        variant(
            ("mask=mask, other=0.0).to(tl.float32)", "mask=mask, other=0.0)"),
            ("mask=mask, other=0.0).to(tl.float32)", "mask=mask, other=0.0)"),
        ),
        "large magnitudes",
    ),
    # Rows assumed D apart: q/k sliced from QKV, or a transposed tensor, read wrong rows.
    "ignores the strides": (
        variant(
            (
                "x_row = x_ptr + b * stride_xb + s * stride_xs + h[:, None].to(tl.int64) * stride_xh",
                "x_row = x_ptr + (pos.to(tl.int64) * H + h[:, None]) * D",
            )
        ),
        "view",
    ),
    # dweight from the first program's partial only: no reduction across rows.
    "dweight not reduced across rows": (
        variant(("_sum_rows[(1,)](dw_part, dw, programs,", "_sum_rows[(1,)](dw_part, dw, 1,")),
        "dweight",
    ),
    # The backward skips its last work item: that dx stays poisoned. (The
    # first backward case is fp32, so NaN can only come from the poisoning,
    # which must reach inside autograd's backward.)
    "backward misses a block": (
        variant(
            (
                "range(pid, n_pos * n_hblk, tl.num_programs(0))",
                "range(pid, n_pos * n_hblk - 1, tl.num_programs(0))",
            )
        ),
        "NaN where the answer is a number (an element never written",
    ),
}
# Variants whose first failing case must already show the reason.
FIRST_CASE = {"backward misses a block", "dweight not reduced across rows", "eps outside the rsqrt"}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(batch, name):
    _, why = WRONG[name]
    r = batch[name]
    assert r["status"] == "failed", (name, r["summary"])
    assert why in failing_text(r), failing_text(r)
    if name in FIRST_CASE:
        assert why in r["summary"], r["summary"]


PRELUDE = REF.split("def rmsnorm_rope(")[0]
EAGER = """
def _eager(x, weight, cos, sin, eps):
    xf = x.float()
    n = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
    n1, n2 = n.chunk(2, dim=-1)
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((n1 * c - n2 * s, n2 * c + n1 * s), dim=-1).to(x.dtype)

"""
COPY_KERNEL = """
@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + o, tl.load(src + o, mask=o < n), mask=o < n)

"""
CHEATS = {
    "F.rms_norm": (
        PRELUDE
        + (
            "def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):\n"
            "    n = torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), weight.float(), eps)\n"
            "    n1, n2 = n.chunk(2, dim=-1)\n"
            "    c, s = cos[:, None, :], sin[:, None, :]\n"
            "    return torch.cat((n1 * c - n2 * s, n2 * c + n1 * s), dim=-1).to(x.dtype)\n"
        ),
        "rms_norm",
    ),
    "no Triton launch": (
        PRELUDE
        + EAGER
        + (
            "def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):\n"
            "    return _eager(x, weight, cos, sin, eps)\n"
        ),
        "no Triton kernel was launched",
    ),
    # Eager maths, then a Triton copy kernel so the output "was written by Triton".
    "eager forward behind a copy kernel": (
        PRELUDE
        + EAGER
        + COPY_KERNEL
        + (
            "def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):\n"
            "    ref = _eager(x, weight, cos, sin, eps).contiguous()\n"
            "    y = torch.empty_like(ref)\n"
            "    _copy[(triton.cdiv(y.numel(), 256),)](ref, y, y.numel(), BLOCK=256)\n"
            "    return y\n"
        ),
        "your forward computed eagerly",
    ),
    # A Triton forward, but the backward done by torch's autograd.
    "eager backward": (
        variant(
            (
                "        x, weight, cos, sin = ctx.saved_tensors\n        dy = _unit_last_stride(dy)\n",
                "        x, weight, cos, sin = ctx.saved_tensors\n"
                "        with torch.enable_grad():\n"
                "            xd = x.detach().requires_grad_()\n"
                "            wd = weight.detach().requires_grad_()\n"
                "            y = _eager(xd, wd, cos, sin, ctx.eps)\n"
                "            gx, gw = torch.autograd.grad(y, (xd, wd), dy)\n"
                "        return gx, gw, None, None, None\n",
            ),
            src=PRELUDE.replace("class _RMSNormRoPE", EAGER + "class _RMSNormRoPE")
            + REF[len(PRELUDE) :],
        ),
        "your backward computed eagerly",
    ),
    # A correct forward with no autograd wiring.
    "no autograd": (
        PRELUDE
        + (
            "def rmsnorm_rope(x, weight, cos, sin, eps=1e-6):\n"
            "    with torch.no_grad():\n"
            "        return _RMSNormRoPE.apply(x, weight, cos, sin, eps)\n"
        ),
        "carries no gradient",
    ),
    "writing into x": (
        variant(("y = torch.empty((B, S, H, D), dtype=x.dtype, device=x.device)", "y = x")),
        "wrote into its inputs",
    ),
}


# Through the real runner as well: one cheat the generic guards catch, one
# only this grader's EagerGuard catches.
RUNNER_CHEATS = ("F.rms_norm", "eager forward behind a copy kernel")


@pytest.mark.parametrize("name", RUNNER_CHEATS)
def test_cheats_are_rejected_through_the_runner(grade, name):
    src, why = CHEATS[name]
    r = grade(EX, src)
    assert not r["passed"] and r["status"] == "failed", name
    assert why in r["summary"], r["summary"]


@pytest.mark.parametrize("name", [n for n in CHEATS if n not in RUNNER_CHEATS])
def test_cheats_are_rejected(batch, name):
    _, why = CHEATS[name]
    r = batch[name]
    assert r["status"] == "failed", (name, r["summary"])
    assert why in r["summary"], r["summary"]


# --- on a GPU (run by the lead on the H200) -----------------------------------------
@pytest.fixture(scope="module")
def gpu_result(tmp_path_factory):
    """One timed check of the reference on the GPU, shared by the tests below."""
    from gpulab.course.content import load_course
    from gpulab.lab.runner import run_check

    tmp = tmp_path_factory.mktemp("rope_gpu")
    path = tmp / "rope_rmsnorm_ref.py"
    path.write_text(REF)
    return run_check(
        load_course().find(EX),
        path,
        device="cuda",
        timeout=900,
        workspace=str(tmp / "workspace"),
    ).to_json()


@pytest.mark.gpu
def test_gpu_reference_times_against_eager_and_compile(gpu_result):
    r = gpu_result
    assert r["passed"], (r["summary"], r.get("message"))
    t = r["timing"]
    fwd = [row for row in t["cases"] if row.get("compile_ms")]
    bwd = [row for row in t["cases"] if row["shape"].endswith("backward")]
    assert len(fwd) == 2 and len(bwd) == 2, r["notes"]
    assert all(row["baseline"] == "eager chain" and row["speedup"] > 1 for row in fwd)
    assert all(row["baseline"] == "torch.compile backward" for row in bwd)
    assert t["speedup_compile"] and t["backward_speedup_compile"]
    assert "torch.compile" in r["summary"]
    print("\n".join(r["notes"]))


@pytest.mark.gpu
def test_gpu_reference_beats_torch_compile(gpu_result):
    # The performance targets (issue 6: forward >= 90% of the measured copy
    # bandwidth, >= 1.2x torch.compile) are benchmark goals, tracked by
    # `gpulab bench` in BENCHMARKS.md. Here only what no noise flips: the
    # fused kernel beats torch.compile's (1.46-1.68x measured), and a fresh
    # workspace places it on the datasheet roof, saying so.
    r = gpu_result
    assert r["passed"], r["summary"]
    fwd = [row for row in r["timing"]["cases"] if row.get("compile_ms")]
    for row in fwd:
        assert row["speedup_compile"] > 1.0, (row["shape"], row["speedup_compile"])
        assert "datasheet" in row["ceiling"] and 0 < row["roofline_fraction"] < 1, row


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["backward misses a block", "dweight not reduced across rows"])
def test_gpu_backward_variants_fail(grade, name):
    # Poisoning must reach the backward in autograd's device thread.
    src, why = WRONG[name]
    r = grade(EX, src, device="cuda", timing=False)
    assert not r["passed"] and why in failing_text(r), failing_text(r)


@pytest.mark.gpu
def test_gpu_eager_backward_is_caught(grade):
    # The op guard must see the backward in autograd's device thread too.
    src, why = CHEATS["eager backward"]
    r = grade(EX, src, device="cuda", timing=False)
    assert not r["passed"] and why in r["summary"], r["summary"]
