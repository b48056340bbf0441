"""Lesson 01's Triton puzzles graded on the CPU (Triton interpreter): honest
solutions in several styles pass; each puzzle's classic mistakes fail with
the mistake named in the learner's words; torch doing the work is refused.
(Each starter fails and each reference passes in `gpulab dev check`.)

Every variant is graded in ONE child process with the sandbox's handlers
in it (tests/inprocess.py), as tests/judge/test_integrity_steps.py does: a
puzzle's check costs well under a second there.
"""

from __future__ import annotations

import pytest

from tests.conftest import reference_source, starter_source

pytestmark = [pytest.mark.timeout(600), pytest.mark.xdist_group("puzzles")]

FUNCTIONS = {
    "triton_mask": "copy",
    "triton_grid": "add",
    "triton_tile": "transpose",
    "triton_reduce": "row_max",
    "triton_launch": "row_center",
}


def edit(exercise: str, *edits: tuple[str, str]) -> str:
    """The reference of `exercise` with (old, new) edits, each applied once."""
    src = reference_source(exercise)
    for old, new in edits:
        assert old in src, f"{exercise}: variant anchor not found: {old!r}"
        src = src.replace(old, new, 1)
    return src


def replace_kernel(exercise: str, body: str) -> str:
    """The reference's imports, then `body` (a kernel and wrapper of another style)."""
    src = reference_source(exercise)
    return src[: src.index("@triton.jit")] + body


HONEST = {
    "mask: several programs of 256": (
        "triton_mask",
        edit(
            "triton_mask",
            ("offs = tl.arange(0, BLOCK)", "offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)"),
            (
                "copy_kernel[(1,)](out, x, x.numel(), BLOCK=BLOCK)",
                "copy_kernel[(triton.cdiv(x.numel(), 256),)](out, x, x.numel(), BLOCK=256)",
            ),
        ),
    ),
    "mask: the block sized to x, other= given": (
        "triton_mask",
        edit(
            "triton_mask",
            ("mask = offs < n", "mask = n > offs"),
            (
                "x = tl.load(x_ptr + offs, mask=mask)",
                "x = tl.load(x_ptr + offs, mask=mask, other=0.0)",
            ),
            ("BLOCK=BLOCK)", "BLOCK=triton.next_power_of_2(x.numel()), num_warps=2)"),
        ),
    ),
    "grid: four programs, each looping over blocks": (
        "triton_grid",
        replace_kernel(
            "triton_grid",
            """@triton.jit
def add_kernel(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    # A fixed grid: program p takes blocks p, p + PROGRAMS, p + 2 * PROGRAMS, ...
    for start in range(tl.program_id(0) * BLOCK, n, PROGRAMS * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        a = tl.load(x_ptr + offs, mask=mask, other=0.0)
        b = tl.load(y_ptr + offs, mask=mask, other=0.0)
        tl.store(out_ptr + offs, a + b, mask=mask)


def add(x, y):
    out = torch.empty_like(x)
    add_kernel[(4,)](out, x, y, x.numel(), BLOCK=512, PROGRAMS=4)
    return out
""",
        ),
    ),
    "grid: a grid from a lambda, 256-lane blocks": (
        "triton_grid",
        edit(
            "triton_grid",
            ("BLOCK = 1024", "BLOCK = 256"),
            (
                "grid = (triton.cdiv(n, BLOCK),)",
                "grid = lambda meta: (triton.cdiv(n, meta['BLOCK']),)",
            ),
        ),
    ),
    "tile: a 2-D grid of 16 x 16 tiles": (
        "triton_tile",
        replace_kernel(
            "triton_tile",
            """@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, TILE: tl.constexpr):
    i = tl.program_id(0) * TILE + tl.arange(0, TILE)[:, None]
    j = tl.program_id(1) * TILE + tl.arange(0, TILE)[None, :]
    inside = (i < M) & (j < N)
    tl.store(out_ptr + j * M + i, tl.load(x_ptr + i * N + j, mask=inside), mask=inside)


def transpose(x):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    transpose_kernel[(triton.cdiv(M, 16), triton.cdiv(N, 16))](out, x, M, N, TILE=16)
    return out
""",
        ),
    ),
    "tile: strides passed, the tile turned with tl.trans": (
        "triton_tile",
        replace_kernel(
            "triton_tile",
            """@triton.jit
def transpose_kernel(out_ptr, x_ptr, M, N, sxm, sxn, som, BLOCK: tl.constexpr):
    # Load x's tile, turn it in registers, store it row by row of out.
    r = tl.arange(0, BLOCK)
    c = tl.arange(0, BLOCK)
    tile = tl.load(
        x_ptr + r[:, None] * sxm + c[None, :] * sxn,
        mask=(r[:, None] < M) & (c[None, :] < N),
        other=0.0,
    )
    turned = tl.trans(tile)  # turned[j, i] = tile[i, j]
    tl.store(
        out_ptr + c[:, None] * som + r[None, :], turned, mask=(c[:, None] < N) & (r[None, :] < M)
    )


def transpose(x):
    M, N = x.shape
    out = torch.empty((N, M), dtype=x.dtype, device=x.device)
    transpose_kernel[(1,)](out, x, M, N, x.stride(0), x.stride(1), out.stride(0), BLOCK=64)
    return out
""",
        ),
    ),
    "reduce: one row a program, tl.max along axis 0": (
        "triton_reduce",
        replace_kernel(
            "triton_reduce",
            """@triton.jit
def row_max_kernel(out_ptr, x_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * N + cols, mask=cols < N, other=-float("inf"))
    tl.store(out_ptr + row, tl.max(v, axis=0))


def row_max(x):
    M, N = x.shape
    out = torch.empty(M, dtype=x.dtype, device=x.device)
    row_max_kernel[(M,)](out, x, N, BLOCK=64)
    return out
""",
        ),
    ),
    "reduce: 16 rows a program, the padding set aside with tl.where": (
        "triton_reduce",
        edit(
            "triton_reduce",
            ("ROWS, COLS = 64, 64", "ROWS, COLS = 16, 64"),
            (
                'mask=mask, other=-float("inf"))',
                'mask=mask, other=0.0)\n    tile = tl.where(mask, tile, -float("inf"))',
            ),
        ),
    ),
    "launch: the row walked in blocks of 1024, two passes": (
        "triton_launch",
        replace_kernel(
            "triton_launch",
            """@triton.jit
def center_kernel(out_ptr, x_ptr, n_cols, BLOCK: tl.constexpr):
    base = tl.program_id(0).to(tl.int64) * n_cols
    total = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        total += tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(total, axis=0) / n_cols
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + base + cols, mask=cols < n_cols)
        tl.store(out_ptr + base + cols, v - mean, mask=cols < n_cols)


def row_center(x):
    out = torch.empty_like(x)
    center_kernel[(x.shape[0],)](out, x, x.shape[1], BLOCK=1024, num_warps=8)
    return out
""",
        ),
    ),
    "launch: eight warps whatever the width": (
        "triton_launch",
        edit("triton_launch", ("num_warps=warps", "num_warps=8")),
    ),
}

# name -> (exercise, source, words the summary or the first failed case must hold)
WRONG = {
    "mask: <= for <": (
        "triton_mask",
        edit("triton_mask", ("mask = offs < n", "mask = offs <= n")),
        ["wrote past the end of a buffer"],
    ),
    "mask: one short": (
        "triton_mask",
        edit("triton_mask", ("mask = offs < n", "mask = offs < n - 1")),
        ["element 999 was not written", "the mask stops short of n = 1000"],
    ),
    "grid: n // BLOCK programs": (
        "triton_grid",
        edit("triton_grid", ("grid = (triton.cdiv(n, BLOCK),)", "grid = (n // BLOCK,)")),
        ["elements 4096–4999 (904 of 5000) were not written", "the grid stops short"],
    ),
    "grid: no program id in the offsets": (
        "triton_grid",
        edit(
            "triton_grid",
            ("offs = pid * BLOCK + tl.arange(0, BLOCK)", "offs = tl.arange(0, BLOCK)"),
        ),
        ["only the first 1024 were, one block's worth", "tl.program_id(0) * BLOCK"],
    ),
    "tile: the starter's 1-D offsets": (
        "triton_tile",
        starter_source("triton_tile"),
        ["only the diagonal out[k, k] (k < 5) was written", "rm[:, None] and rn[None, :]"],
    ),
    "tile: stored in x's order": (
        "triton_tile",
        edit("triton_tile", ("tl.store(out_ptr + rn * M + rm", "tl.store(out_ptr + rm * N + rn")),
        ["a reshape, not a transpose"],
    ),
    "tile: a mask of one dimension": (
        "triton_tile",
        edit("triton_tile", ("mask = (rm < M) & (rn < N)", "mask = rm < M")),
        ["wrote past the end of a buffer", "joined with &"],
    ),
    "reduce: axis=0": (
        "triton_reduce",
        edit("triton_reduce", ("best = tl.max(tile, axis=1)", "best = tl.max(tile, axis=0)")),
        ["holds the max of column 0", "axis=0 reduces down each column"],
    ),
    "reduce: other=0.0": (
        "triton_reduce",
        edit("triton_reduce", ('other=-float("inf"))', "other=0.0)")),
        ["max came out 0, though every value in it is negative", "-inf"],
    ),
    "launch: the starter's fixed block": (
        "triton_launch",
        starter_source("triton_launch"),
        ["columns 256–999 of every row were not written", "triton.next_power_of_2(n_cols) = 1024"],
    ),
    "launch: a grid a row short": (
        "triton_launch",
        edit("triton_launch", ("center_kernel[(n_rows,)]", "center_kernel[(n_rows - 1,)]")),
        ["row 4 was not written", "one program per row"],
    ),
    "launch: the row's width as the block": (
        "triton_launch",
        edit("triton_launch", ("block = triton.next_power_of_2(n_cols)", "block = n_cols")),
        ["needs BLOCK to be a power of two", "triton.next_power_of_2(n)"],
    ),
}

CHEATS = {
    "mask: x cloned by torch, then copied": (
        "triton_mask",
        edit(
            "triton_mask",
            (
                "    out = torch.empty_like(x)\n",
                "    out = torch.empty_like(x)\n    x = x.clone()\n",
            ),
        ),
    ),
    "grid: torch adds, the kernel copies its sum": (
        "triton_grid",
        edit(
            "triton_grid",
            (
                "    out = torch.empty_like(x)\n",
                "    out = torch.empty_like(x)\n    x, y = x + y, torch.zeros_like(y)\n",
            ),
        ),
    ),
    "tile: torch transposes, the kernel copies": (
        "triton_tile",
        edit(
            "triton_tile",
            ("    M, N = x.shape\n", "    M, N = x.shape\n    t = x.t().contiguous()\n"),
            ("tl.store(out_ptr + rn * M + rm", "tl.store(out_ptr + rm * N + rn"),
            ("transpose_kernel[(1,)](out, x, M, N,", "transpose_kernel[(1,)](out, t, N, M,"),
        ),
    ),
    "tile: copy_ of the transposed view": (
        "triton_tile",
        edit(
            "triton_tile",
            (
                "    transpose_kernel[(1,)](out, x, M, N, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)\n",
                "    out.copy_(x.t())\n",
            ),
        ),
    ),
    "reduce: torch's amax, copied by the kernel": (
        "triton_reduce",
        edit("triton_reduce", ("    return out\n", "    return x.amax(dim=1)\n")),
    ),
    "launch: torch's mean": (
        "triton_launch",
        edit("triton_launch", ("    return out\n", "    return x - x.mean(dim=1, keepdim=True)\n")),
    ),
}


def _items(tmp) -> dict:
    sources = {n: v for n, v in HONEST.items()}
    sources.update({n: (ex, src) for n, (ex, src, _) in WRONG.items()})
    sources.update(CHEATS)
    items = {}
    for i, (name, (exercise, src)) in enumerate(sources.items()):
        path = tmp / f"puzzle_{i}.py"
        path.write_text(src)
        items[name] = (exercise, FUNCTIONS[exercise], str(path))
    return items


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """name -> result for every variant above, graded in one child process."""
    from tests.judge.test_steps45_grading import IN_PROCESS_CHILD, _once, _run

    return _once(tmp_path_factory, "puzzles", lambda tmp: _run(IN_PROCESS_CHILD, tmp, _items(tmp)))


def _first_words(r: dict) -> str:
    bad = [c for c in r["cases"] if not c["passed"]]
    return "\n".join(
        [r["summary"], r.get("message") or "", *(c.get("detail") or "" for c in bad[:1])]
    )


@pytest.mark.parametrize("name", list(HONEST))
def test_an_honest_solution_passes(graded, name):
    r = graded[name]
    assert r["status"] == "passed", (r["summary"], r.get("message", "")[-1500:])


@pytest.mark.parametrize("name", list(WRONG))
def test_a_classic_mistake_is_named(graded, name):
    r = graded[name]
    assert r["status"] == "failed", r["summary"]
    words = _first_words(r)
    for w in WRONG[name][2]:
        assert w in words, (w, words)


@pytest.mark.parametrize("name", list(CHEATS))
def test_torch_doing_the_work_is_refused(graded, name):
    r = graded[name]
    assert r["status"] == "failed" and r["summary"].startswith("cheat:"), r["summary"]


def test_the_launch_puzzle_shows_the_learners_launches(graded):
    """The launch with eight warps passed; its widest case's launch is shown."""
    notes = " ".join(graded["launch: eight warps whatever the width"]["notes"])
    assert "2×20000: center_kernel[(2,)](n_cols=20000, BLOCK=32768, num_warps=8)" in notes
    assert "128 values a thread" in notes and "num_warps=16 keeps it to 64" in notes


def test_the_case_to_draw_is_the_smallest_that_failed():
    """The load map's hook: which case a drawing of the programs should show."""
    import torch

    from gpulab.judge.graders import triton_grid
    from gpulab.judge.kernel_spec import Case
    from gpulab.wire.result import CaseRow

    def case(n: int, name: str) -> Case:
        return Case(name, (torch.zeros(n), torch.zeros(n)), torch.float32)

    cases = [case(5000, "n=5000"), case(1025, "n=1025"), case(20001, "n=20001")]
    rows = [
        CaseRow.from_json({"name": "n=5000", "passed": False}),
        CaseRow.from_json({"name": "n=1025, your kernels alone", "passed": False}),
        CaseRow.from_json({"name": "n=20001", "passed": True}),
    ]
    assert triton_grid.case_to_draw(cases, rows) is cases[1]
    assert triton_grid.case_to_draw(cases, rows[2:]) is None
