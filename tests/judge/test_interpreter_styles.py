"""Honest kernels that the Triton interpreter's gaps used to fail on the CPU,
and the wrong kernels the new cases catch, through the real check (one
judge process grades them all, each in sandboxes of its own).

Issue 44: an fp64 softmax stored as bf16 was "640 of 640 elements wrong"
(the interpreter cast fp64 to bf16 as integers), a softmax through tl.reduce
ran 224 s, an autotuned kernel was refused ("autotuning needs a GPU"), a
matmul returning zeros for bf16 passed (bf16 was skipped on the CPU), and a
softmax that skipped the max for bf16 alone passed (no bf16 case of large
values).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, gpulab_env, reference_source

# Nine checks in one judge process: 4-8 s each on a quiet 2-core box, up to
# a minute each when the box is shared.
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("interpreter_styles")]


def variant(src: str, old: str, new: str) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


SOFTMAX = reference_source("softmax")
STABLE = "    x = x - tl.max(x, axis=0)  # the stable form: the largest exponent is exp(0) = 1"

# The maths in fp64, stored as the output's dtype (fp64 -> bf16 in bf16 cases).
FP64 = variant(SOFTMAX, "    x = x.to(tl.float32)\n", "    x = x.to(tl.float64)\n")

# The row's max and sum through tl.reduce with combine functions of its own.
REDUCE = variant(
    variant(
        SOFTMAX,
        STABLE,
        "    x = x - tl.reduce(x, 0, _max_combine)",
    ),
    "    y = num / tl.sum(num, axis=0)\n    tl.store(y_ptr + row * y_row_stride",
    "    y = num / tl.reduce(num, 0, _add_combine)\n    tl.store(y_ptr + row * y_row_stride",
).replace(
    "@triton.jit\ndef softmax_kernel(",
    "@triton.jit\ndef _max_combine(a, b):\n    return tl.maximum(a, b)\n\n\n"
    "@triton.jit\ndef _add_combine(a, b):\n    return a + b\n\n\n"
    "@triton.jit\ndef softmax_kernel(",
    1,
)

# @triton.autotune over two configs, as on a GPU, with no do_bench of its own.
AUTOTUNED_SOFTMAX = variant(
    SOFTMAX,
    "@triton.jit\ndef softmax_kernel(",
    "@triton.autotune(\n    configs=[triton.Config({}, num_warps=2), "
    "triton.Config({}, num_warps=8, num_stages=2)],\n    key=['n_cols'],\n)\n"
    "@triton.jit\ndef softmax_kernel(",
).replace(
    "                              BLOCK=block, num_warps=_num_warps(block))",
    "                              BLOCK=block)",
    1,
)

MATMUL = """
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BM": 32, "BN": 32, "BK": 32}, num_warps=4),
        triton.Config({"BM": 64, "BN": 64, "BK": 32}, num_warps=8, num_stages=3),
        triton.Config({"BM": 16, "BN": 64, "BK": 64}, num_warps=4),
    ],
    key=["M", "N", "K"],
)
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    RESULT
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BM"]), triton.cdiv(N, meta["BN"]))
    matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1))
    return c
"""
AUTOTUNED_MATMUL = MATMUL.replace("RESULT", "pass")
# Zeros for bf16 alone, written by the kernel (every element stored).
BF16_ZEROS = MATMUL.replace(
    "RESULT", "if c_ptr.dtype.element_ty == tl.bfloat16:\n        acc = acc * 0.0"
)

SKIP_MAX = {
    # No max subtracted for one dtype alone: every other case still passes.
    "softmax": variant(
        SOFTMAX,
        STABLE,
        "    if y_ptr.dtype.element_ty != tl.bfloat16:\n        x = x - tl.max(x, axis=0)",
    ),
    "softmax_row": variant(
        reference_source("softmax_row"),
        "    x = x - tl.max(x, axis=0)",
        "    if y_ptr.dtype.element_ty != tl.float16:\n        x = x - tl.max(x, axis=0)",
    ),
    "softmax_wide": variant(
        reference_source("softmax_wide"),
        "        m_new = tl.maximum(m, tl.max(x, axis=0))",
        "        m_new = tl.maximum(m, tl.max(x, axis=0))\n"
        "        if y_ptr.dtype.element_ty == tl.float16:\n"
        "            m_new = tl.zeros_like(m_new)",
    ),
    "flash_attention": variant(
        reference_source("flash_attention"),
        "        m_new = tl.maximum(m_i, tl.max(s, 1))",
        "        m_new = tl.maximum(m_i, tl.max(s, 1))\n"
        "        if v.dtype == tl.bfloat16:\n"
        "            m_new = tl.zeros_like(m_new)",
    ),
}

FUNCTIONS = {"softmax_row": "softmax", "softmax_wide": "softmax"}
HONEST = {
    "fp64 softmax stored as bf16": ("softmax", FP64),
    "softmax through tl.reduce": ("softmax", REDUCE),
    "autotuned softmax": ("softmax", AUTOTUNED_SOFTMAX),
    "autotuned matmul": ("matmul", AUTOTUNED_MATMUL),
}
WRONG = {
    "matmul zeros for bf16": ("matmul", BF16_ZEROS, "bf16"),
    **{f"{ex} skips the max for one dtype": (ex, src, "large") for ex, src in SKIP_MAX.items()},
}

BATCH_CHILD = r"""
import json, sys, time
from gpulab.judge.main import judge
from gpulab.judge.remote import harden_judge

harden_judge()  # a judge adopts its sandboxes' keepers, as `python -m gpulab.judge.main` does
from gpulab.judge import prepared

prepared.KEEP_FORKS = True  # one fork server for the whole batch (tests/judge_pool.py)

class Quiet:
    def send(self, event): pass
    def stage(self, kind, text, *progress): pass

items, out_path, content = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
results = {}
for name, (exercise, function, path) in items.items():
    request = {"exercise": exercise, "function": function, "file": path,
               "timing": False, "device": "cpu", "timeout": 300, "content_root": content}
    start = time.monotonic()
    results[name] = judge(request, Quiet()).to_json()
    results[name]["took_s"] = round(time.monotonic() - start, 1)
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
prepared.close_kept_forks()
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("styles")
    items = {}
    for i, (name, (exercise, src, *_)) in enumerate({**HONEST, **WRONG}.items()):
        path = tmp / f"variant_{i}.py"
        path.write_text(src)
        items[name] = (exercise, FUNCTIONS.get(exercise, exercise), str(path))
    out = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", BATCH_CHILD, json.dumps(items), str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=gpulab_env(tmp / "home"),
        cwd=REPO,
    )
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", list(HONEST))
def test_an_honest_style_passes_on_the_cpu(batch, name):
    r = batch[name]
    bad = [c for c in r["cases"] if not c["passed"]]
    assert r["status"] == "passed", (r["summary"], r.get("message", "")[-1500:], bad[:3])
    # Every dtype graded: bf16 neither skipped nor "not graded here".
    assert not any("bf16" in s for s in r.get("skipped") or []), r["skipped"]
    assert "bf16" in {c.get("dtype") for c in r["cases"]}


def test_the_tl_reduce_softmax_runs_in_the_time_of_the_reference(batch):
    # 224 s before (one Python call an element); the reference's own check
    # took 41-64 s on the same busy 2-core box.
    assert batch["softmax through tl.reduce"]["took_s"] < 120, batch["softmax through tl.reduce"]


@pytest.mark.parametrize("name", list(WRONG))
def test_a_wrong_kernel_the_new_cases_catch_fails(batch, name):
    r = batch[name]
    why = WRONG[name][2]
    assert r["status"] == "failed", r["summary"]
    failing = " ".join(c["name"] for c in r["cases"] if not c["passed"])
    assert why in failing, (r["summary"], failing)


def test_where_the_bf16_dot_stays_wrong_bf16_is_held_to_a_loose_bound(monkeypatch):
    """A Triton the fixes do not reach: the judge's own probe finds the bf16
    tl.dot wrong, and bf16 cases are checked loosely, said not graded, never
    skipped; zeros still fail the bound."""
    torch = pytest.importorskip("torch")
    from gpulab.judge.compare import compare
    from gpulab.judge.graders import matmul

    class Ctx:
        skipped: list[str] = []

    monkeypatch.setattr(matmul, "interpreter_dot_ok", lambda dt: dt != torch.bfloat16)
    ctx = Ctx()
    loose = matmul.loose_dtypes(ctx)  # type: ignore[arg-type]
    assert loose == {"bf16"}
    assert ctx.skipped and ctx.skipped[0].startswith("bf16 not graded here:"), ctx.skipped
    spec = matmul.make_spec(True, frozenset(loose))
    assert spec.tolerance(torch.bfloat16) == matmul.LOOSE
    assert spec.tolerance(torch.float16) == matmul.TOL_CPU[torch.float16]
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(48, 72, generator=g) * 72**-0.25).to(torch.bfloat16)
    b = (torch.randn(72, 40, generator=g) * 72**-0.25).to(torch.bfloat16)
    ref = a.double() @ b.double()
    near = (ref * (1 + 0.05 * torch.randn(ref.shape, generator=g, dtype=torch.float64))).to(
        torch.bfloat16
    )
    assert compare(near, ref, *matmul.LOOSE).mismatches == 0
    assert compare(torch.zeros_like(near), ref, *matmul.LOOSE).mismatches > 0
    assert compare(near * 1e10, ref, *matmul.LOOSE).mismatches > 0
