"""The steps of lessons 02 and 03 graded on the CPU (Triton interpreter):
honest solutions in several styles pass, wrong-but-plausible ones fail for
the stated reason. (Each starter fails and each reference passes in
`gpulab dev check`, tests/cli/test_cli.py, which covers every exercise.)

Every variant is graded by ONE judge process, each in a sandbox of its own
(as tests/judge/test_rope_rmsnorm.py does): a child's fixed cost, importing torch
and triton, dwarfs grading a step in the interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO, gpulab_env, reference_source

# The batch below grades 13 variants in one judge: about 3 minutes on two
# cores at a load of 3 (measured), past pytest's default 300 s on a busier box.
pytestmark = [pytest.mark.timeout(900), pytest.mark.xdist_group("steps_grading")]


def edit(exercise: str, *edits: tuple[str, str]) -> str:
    """The reference of `exercise` with (old, new) edits, each applied once."""
    src = reference_source(exercise)
    for old, new in edits:
        assert old in src, f"{exercise}: variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


def replace_kernel(exercise: str, body: str) -> str:
    """The reference of `exercise` with everything from its first @triton.jit
    on replaced by `body` (a kernel and the wrapper, in another style)."""
    src = reference_source(exercise)
    return src[: src.index("@triton.jit")] + body


# --- softmax_row: honest styles ----------------------------------------------

ROW_WHERE_EXP2 = replace_kernel(
    "softmax_row",
    """
LOG2E = 1.4426950408889634


@triton.jit
def _row_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    # Loads zeros, then sets the padding aside with tl.where; exp2 and a
    # reciprocal instead of exp and a division.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    inside = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=inside, other=0.0).to(tl.float32)
    x = tl.where(inside, x, -float("inf"))
    p = tl.exp2((x - tl.max(x, 0)) * LOG2E)
    inv = 1.0 / tl.sum(p, 0)
    tl.store(y_ptr + row * n_cols + cols, p * inv, mask=inside)


def softmax(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    rows, cols = x.shape
    _row_kernel[lambda meta: (rows,)](out, x, cols, BLOCK=triton.next_power_of_2(cols))
    return out
""",
)

ROW_SEVERAL_ROWS = replace_kernel(
    "softmax_row",
    """
@triton.jit
def rows_kernel(y_ptr, x_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    # ROWS rows a program, as a 2-D block.
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    ok = (r < n_rows) & (c < n_cols)
    x = tl.load(x_ptr + r * n_cols + c, mask=ok, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    y = e / tl.sum(e, axis=1)[:, None]
    tl.store(y_ptr + r * n_cols + c, y.to(y_ptr.dtype.element_ty), mask=ok)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rows_kernel[(triton.cdiv(n_rows, 4),)](y, x, n_rows, n_cols, ROWS=4, BLOCK=BLOCK)
    return y
""",
)

# --- softmax_wide: honest styles ---------------------------------------------

WIDE_THREE_PASSES = replace_kernel(
    "softmax_wide",
    """
@triton.jit
def three_pass_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    # The max, then the sum, then the output: three walks, no rescaling.
    base = tl.program_id(0).to(tl.int64) * n_cols
    m = -float("inf")
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf"))
        m = tl.maximum(m, tl.max(x.to(tl.float32), 0))
    total = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf"))
        total += tl.sum(tl.exp(x.to(tl.float32) - m), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf"))
        tl.store(y_ptr + base + cols, tl.exp(x.to(tl.float32) - m) / total, mask=cols < n_cols)


def softmax(x):
    y = torch.empty_like(x)
    three_pass_kernel[(x.shape[0],)](y, x, x.shape[1], BLOCK=8192)
    return y
""",
)

WIDE_PER_LANE = replace_kernel(
    "softmax_wide",
    """
@triton.jit
def lanes_kernel(y_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    # An online pass per lane (a running max and sum for each of the BLOCK
    # lanes), combined across lanes once at the end.
    row = tl.program_id(0).to(tl.int64)
    m = tl.full((BLOCK,), -float("inf"), tl.float32)
    s = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, x)
        live = m_new > -float("inf")
        s = tl.where(live, s * tl.exp(m - m_new) + tl.exp(x - m_new), 0.0)
        m = m_new
    row_max = tl.max(m, 0)
    total = tl.sum(tl.where(m > -float("inf"), s * tl.exp(m - row_max), 0.0), 0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - row_max) / total
        tl.store(y_ptr + row * n_cols + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    lanes_kernel[(n_rows,)](y, x, n_cols, BLOCK=16384, num_warps=16)
    return y
""",
)

# --- matmul_tile: honest styles ----------------------------------------------

TILE_BROADCAST = replace_kernel(
    "matmul_tile",
    """
@triton.jit
def product_kernel(a_ptr, b_ptr, c_ptr, M, N, K, B: tl.constexpr):
    # No tl.dot: a broadcast multiply and a sum over k, in fp32, with the
    # contiguous layout's row lengths (K and N) instead of strides.
    i = tl.arange(0, B)
    a = tl.load(a_ptr + i[:, None] * K + i[None, :],
                mask=(i[:, None] < M) & (i[None, :] < K), other=0.0).to(tl.float32)
    b = tl.load(b_ptr + i[:, None] * N + i[None, :],
                mask=(i[:, None] < K) & (i[None, :] < N), other=0.0).to(tl.float32)
    c = tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(c_ptr + i[:, None] * N + i[None, :], c, mask=(i[:, None] < M) & (i[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    product_kernel[(1,)](a, b, c, M, N, K, B=64)
    return c
""",
)

TILE_GRID_OF_SMALL_TILES = replace_kernel(
    "matmul_tile",
    """
@triton.jit
def small_tiles_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                       T: tl.constexpr, BK: tl.constexpr):
    # A 2-D grid of 16 x 16 tiles instead of one program: more than asked.
    rm = tl.program_id(0) * T + tl.arange(0, T)
    rn = tl.program_id(1) * T + tl.arange(0, T)
    rk = tl.arange(0, BK)
    a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak,
                mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
    b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn,
                mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
    acc = tl.dot(a, b, out_dtype=tl.float32)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    (M, K), N = a.shape, b.shape[1]
    c = a.new_empty((M, N))
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 16))
    small_tiles_kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                             T=16, BK=64)
    return c
""",
)

# --- matmul_kloop: honest styles ---------------------------------------------

KLOOP_2D_GRID = replace_kernel(
    "matmul_kloop",
    """
@triton.jit
def grid2d_kernel(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A 2-D grid, K offsets recomputed each step (no pointer increments),
    # and a loop over K itself rather than over step numbers.
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(a_ptr + rm[:, None] * sam + rk[None, :] * sak,
                    mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + rk[:, None] * sbk + rn[None, :] * sbn,
                    mask=(rk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), dtype=a.dtype, device=a.device)
    grid = (triton.cdiv(M, 64), triton.cdiv(N, 64))
    grid2d_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                        c.stride(0), c.stride(1), BM=64, BN=64, BK=16)
    return c
""",
)

KLOOP_WRAPPED_ROWS = edit(
    "matmul_kloop",
    # Rows and columns wrapped modulo M and N (lesson 03's "Edges"), so only
    # the K tail is masked on the loads; a column-major tile order.
    (
        "    pid_m = pid // num_pid_n\n    pid_n = pid % num_pid_n\n",
        "    num_pid_m = tl.cdiv(M, BLOCK_M)\n    pid_m = pid % num_pid_m\n"
        "    pid_n = pid // num_pid_m\n",
    ),
    (
        "offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M",
    ),
    (
        "offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N",
    ),
    (
        "mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)",
        "mask=offs_k[None, :] < k_left, other=0.0)",
    ),
    (
        "mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)",
        "mask=offs_k[:, None] < k_left, other=0.0)",
    ),
    (
        "    c_ptrs = c_ptr + offs_m[:, None] * stride_cm",
        "    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n"
        "    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)\n"
        "    c_ptrs = c_ptr + offs_m[:, None] * stride_cm",
    ),
)

HONEST = {
    "softmax_row reference with exp2 and tl.where": ("softmax_row", ROW_WHERE_EXP2),
    "softmax_row several rows a program": ("softmax_row", ROW_SEVERAL_ROWS),
    "softmax_wide three passes": ("softmax_wide", WIDE_THREE_PASSES),
    "softmax_wide online per lane": ("softmax_wide", WIDE_PER_LANE),
    "matmul_tile broadcast product": ("matmul_tile", TILE_BROADCAST),
    "matmul_tile grid of small tiles": ("matmul_tile", TILE_GRID_OF_SMALL_TILES),
    "matmul_kloop 2-D grid": ("matmul_kloop", KLOOP_2D_GRID),
    "matmul_kloop wrapped rows": ("matmul_kloop", KLOOP_WRAPPED_ROWS),
}

# name -> (exercise, source, words one of which the failure must show)
WRONG = {
    # Padding lanes load as 0: each adds exp(0 - max) to the sum.
    "softmax_row padding as 0": (
        "softmax_row",
        edit("softmax_row", ('mask=mask, other=-float("inf"))', "mask=mask, other=0.0)")),
        ("wrong",),
    ),
    # exp(x) without the max subtracted overflows on the large magnitudes.
    "softmax_row unstable": (
        "softmax_row",
        edit("softmax_row", ("    x = x - tl.max(x, axis=0)\n", "")),
        ("large magnitudes",),
    ),
    # An online pass without the -inf guard: exp(-inf - -inf) is NaN.
    "softmax_wide unguarded online pass": (
        "softmax_wide",
        edit("softmax_wide", ('tl.where(m_new == -float("inf"), 0.0, m_new)', "m_new")),
        ("-inf", "NaN"),
    ),
    # The K tail unmasked: the lanes past K read the next row of A.
    "matmul_tile no K mask": (
        "matmul_tile",
        edit(
            "matmul_tile",
            ("mask=(offs_m[:, None] < M) & (offs_k[None, :] < K)", "mask=offs_m[:, None] < M"),
            ("mask=(offs_k[:, None] < K) & (offs_n[None, :] < N)", "mask=offs_n[None, :] < N"),
        ),
        ("wrong",),
    ),
    "matmul_kloop no K tail mask": (
        "matmul_kloop",
        edit(
            "matmul_kloop",
            (
                "mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left)",
                "mask=offs_m[:, None] < M",
            ),
            (
                "mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N)",
                "mask=offs_n[None, :] < N",
            ),
        ),
        ("wrong",),
    ),
}

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
items, out_path, content = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
results = {}
for name, (exercise, function, path) in items.items():
    request = {"exercise": exercise, "function": function, "file": path,
               "timing": False, "device": "cpu", "timeout": 120, "content_root": content}
    results[name] = judge(request, Quiet()).to_json()
with open(out_path, "w") as f:
    json.dump(results, f, default=str)
prepared.close_kept_forks()
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory, course):
    """name -> result for every variant above, graded by one judge process."""
    tmp = tmp_path_factory.mktemp("steps_batch")
    sources = {n: (ex, src) for n, (ex, src) in HONEST.items()}
    sources.update({n: (ex, src) for n, (ex, src, _) in WRONG.items()})
    items = {}
    for i, (name, (exercise, src)) in enumerate(sources.items()):
        path = tmp / f"variant_{i}.py"
        path.write_text(src)
        items[name] = (exercise, course.find(exercise).function, str(path))
    out = tmp / "results.json"
    proc = subprocess.run(
        [sys.executable, "-c", BATCH_CHILD, json.dumps(items), str(out), str(REPO)],
        capture_output=True,
        text=True,
        timeout=900,
        env=gpulab_env(tmp / "home"),
        cwd=REPO,
    )
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def _failing(r: dict) -> str:
    return (
        r.get("summary", "")
        + " "
        + " ".join(c.get("name", "") + " " + c.get("detail", "") for c in r.get("cases", []))
    )


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(batch, name):
    r = batch[name]
    assert r["status"] == "passed", (name, r.get("summary"), r.get("message", "")[:2000])
    assert all(c["passed"] for c in r["cases"]) and len(r["cases"]) >= 8


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(batch, name):
    r = batch[name]
    _, _, why = WRONG[name]
    assert r["status"] == "failed", (name, r.get("status"), r.get("summary"))
    assert any(w in _failing(r) for w in why), (name, _failing(r)[:2000])


def test_steps_are_not_timed(batch):
    r = batch["softmax_row several rows a program"]
    assert r["timing"] is None
    assert any("A step is graded on correctness only" in n for n in r["notes"])
