"""The find_bottleneck grader (lesson 07): name the operator that dominates
a slow block, and fix the block.

The starter and the cheat that forges the profile go through real child
processes (the judge and the sandbox). The other variants run the same
grader and the same sandbox handler in this process (tests/inprocess.py),
so each costs its block's calls, not two interpreters. (`gpulab dev check`,
tests/cli/test_cli.py, also grades the reference through the real path.)
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import gpulab_env, reference_source, starter_source

REF = reference_source("find_bottleneck")
STARTER = starter_source("find_bottleneck")

# The reference's prefix mean, signature to return: the honest variants
# replace this block.
REF_MEAN = REF[REF.index("def prefix_mean(h):") : REF.index("\n\n\ndef block(")]


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


def cases(r: dict) -> dict[str, dict]:
    return {c["name"].split(" (")[0]: c for c in r["cases"]}


@pytest.fixture
def grade_here(tmp_path):
    """Grade source text with the real grader, the sandbox's handler in-process."""
    import torch

    import gpulab.sandbox.bottleneck as side
    from tests.inprocess import grade_here as _in_process

    threads, op_rows = torch.get_num_threads(), side.op_rows

    def _grade(src: str) -> dict:
        path = tmp_path / f"find_bottleneck_{abs(hash(src)) % 10**8}.py"
        path.write_text(src)
        return _in_process("find_bottleneck", "block", path)

    yield _grade
    side.op_rows = op_rows  # a cheat below rewrites it
    torch.set_num_threads(threads)


# --- through the real check path -------------------------------------------------------------


def test_starter_fails_on_the_name_the_speed_and_the_share(grade):
    r = grade("find_bottleneck", STARTER, shared=True)
    assert r["status"] == "failed", r["summary"]
    c = cases(r)
    assert not c["names the bottleneck"]["passed"]
    assert "BOTTLENECK is empty" in c["names the bottleneck"]["detail"]
    # The outputs are right (the starter is the original); the profile and the clock fail it.
    assert c["outputs match the original on 44 fresh inputs"]["passed"]
    speed = c["at least 2× faster than the original"]
    # The top row by CPU time is aten::mean on a quiet machine; on a loaded
    # one the per-position aten::slice (255 a call) has come first. Either is
    # the advice the starter needs: one small operation per position.
    assert not speed["passed"], speed
    assert re.search(r"top row, aten::(mean|slice), runs 25[56] times", speed["detail"]), speed
    share = c["aten::mean under 20% of the step's CPU time"]
    assert not share["passed"] and "(256 calls a step)" in share["detail"], share
    top = r["timing"]["profile"]["top_ops"][:3]
    assert {"name": "aten::mean", "calls": 256} in [
        {"name": t["name"], "calls": t["calls"]} for t in top
    ], top
    assert r["timing"]["profile"]["trace"].endswith("traces/find_bottleneck.json")


FORGED_PROFILE = variant(
    'BOTTLENECK = ""',
    'BOTTLENECK = "aten::mean"\n\n'
    "import torch.profiler as _tp\n\n"
    "_real = _tp.profile.key_averages\n\n\n"
    "def _hide_mean(self, *a, **k):\n"
    "    rows = _real(self, *a, **k)\n"
    "    for r in [r for r in rows if r.key == 'aten::mean']:\n"
    "        rows.remove(r)\n"
    "    return rows\n\n\n"
    "_tp.profile.key_averages = _hide_mean",
    STARTER,
)


def test_a_forged_profile_still_needs_the_judges_clock(grade):
    # The starter's loop, with aten::mean removed from the profile's table:
    # the share passes on the forged rows, the judge's clock does not.
    r = grade("find_bottleneck", FORGED_PROFILE)
    assert r["status"] == "failed", r["summary"]
    c = cases(r)
    assert c["names the bottleneck"]["passed"]
    assert c["aten::mean under 20% of the step's CPU time"]["passed"]
    assert not c["at least 2× faster than the original"]["passed"], r["cases"]


# --- the same grader, the sandbox's handler in this process ------------------------------------


def test_reference_passes_and_writes_its_trace(grade_here):
    r = grade_here(REF)
    assert r["status"] == "passed", (r["summary"], r.get("message", "")[-2000:])
    c = cases(r)
    assert "(not called)" in c["aten::mean under 20% of the step's CPU time"]["detail"]
    assert r["timing"]["profile"]["top_ops"], r["timing"]
    assert any("find_bottleneck.json" in n for n in r["notes"]), r["notes"]


HONEST = {
    # A lower-triangular averaging matrix: one matmul instead of 256 means.
    "averaging matrix": variant(
        REF_MEAN,
        "def prefix_mean(h):\n"
        "    S = h.shape[1]\n"
        "    m = torch.tril(torch.ones(S, S, device=h.device, dtype=h.dtype))\n"
        "    return (m / m.sum(dim=1, keepdim=True)) @ h",
    ),
    # In place, a reciprocal multiply, and the name written as torch spells it.
    "in place": variant(
        REF_MEAN,
        "def prefix_mean(h):\n"
        "    out = torch.cumsum(h, dim=1)\n"
        "    inv = torch.arange(1, h.shape[1] + 1, device=h.device).reciprocal()\n"
        "    return out.mul_(inv.to(h.dtype).unsqueeze(-1))",
        variant('BOTTLENECK = "aten::mean"', 'BOTTLENECK = "torch.mean"'),
    ),
    # Still a loop, over 8 chunks of 32 positions: a running sum within each
    # chunk, carried to the next. 8 iterations instead of 256.
    "chunked loop": variant(
        REF_MEAN,
        "def prefix_mean(h, chunk=32):\n"
        "    B, S, D = h.shape\n"
        "    carry = h.new_zeros(B, 1, D)\n"
        "    parts = []\n"
        "    for start in range(0, S, chunk):\n"
        "        part = h[:, start : start + chunk].cumsum(dim=1) + carry\n"
        "        carry = part[:, -1:]\n"
        "        parts.append(part)\n"
        "    n = torch.arange(1, S + 1, device=h.device, dtype=h.dtype)\n"
        "    return torch.cat(parts, dim=1) / n[:, None]",
    ),
    # Summed in float64, with a constant cached across calls per (S, device).
    "float64 sum, cached counts": variant(
        REF_MEAN,
        "_COUNTS = {}\n\n\n"
        "def prefix_mean(h):\n"
        "    key = (h.shape[1], h.device)\n"
        "    if key not in _COUNTS:\n"
        "        _COUNTS[key] = torch.arange(1, h.shape[1] + 1, device=h.device,\n"
        "                                    dtype=torch.float64).view(1, -1, 1)\n"
        "    return (h.double().cumsum(1) / _COUNTS[key]).to(h.dtype)",
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade_here, name):
    r = grade_here(HONEST[name])
    assert r["status"] == "passed", (name, r["summary"], r.get("message", "")[-2000:])


WRONG = {
    # mean's child on the CPU, on top when sorted by self time.
    "names a child": (
        variant('BOTTLENECK = "aten::mean"', 'BOTTLENECK = "aten::sum"'),
        "where mean's work lands on the CPU",
    ),
    "no string": (variant('BOTTLENECK = "aten::mean"', "BOTTLENECK = None"), "must be a string"),
    # The mixer dropped: fast, and wrong.
    "work removed": (
        variant(
            "    context = prefix_mean(h)\n",
            "    context = h.mean(dim=1, keepdim=True).expand_as(h)\n",
        ),
        "outputs differ from the original block",
    ),
    # The first answer kept and returned for every later call of that shape.
    "cached output": (
        variant(
            "def block(x, weights):\n",
            "_SEEN = {}\n\n\ndef block(x, weights):\n"
            "    if x.shape in _SEEN:\n"
            "        return _SEEN[x.shape]\n"
            "    _SEEN[x.shape] = _block(x, weights)\n"
            "    return _SEEN[x.shape]\n\n\ndef _block(x, weights):\n",
        ),
        "outputs differ from the original block",
    ),
    "returns the input": (
        variant("    return x + F.gelu(u)\n", "    return x\n"),
        "outputs differ from the original block",
    ),
    "float64 output": (
        variant("    return x + F.gelu(u)\n", "    return (x + F.gelu(u)).double()\n"),
        "did not return a 4×256×32 float32 tensor",
    ),
    # The right answer, then x overwritten.
    "writes into x": (
        variant(
            "    return x + F.gelu(u)\n",
            "    out = x + F.gelu(u)\n    x.zero_()\n    return out\n",
        ),
        "wrote into its inputs",
    ),
    # No aten::mean any more, but a running sum in a Python loop: still one
    # small operation per position, and not much faster.
    "running sum in a loop": (
        variant(
            REF_MEAN,
            "def prefix_mean(h):\n"
            "    total, outs = torch.zeros_like(h[:, 0]), []\n"
            "    for t in range(h.shape[1]):\n"
            "        total = total + h[:, t]\n"
            "        outs.append(total / (t + 1))\n"
            "    return torch.stack(outs, dim=1)",
        ),
        "faster than the original",
    ),
    # The profile's rows rewritten to claim more CPU time than the call took.
    "inflated profile": (
        variant(
            'BOTTLENECK = "aten::mean"',
            'BOTTLENECK = "aten::mean"\n\n'
            "import gpulab.sandbox.bottleneck as _side\n\n"
            "_side.op_rows = lambda prof: [_side.BlockOp('aten::addmm', 1, 9e9, 9e9, 0)]",
        ),
        "its figures are not a profile of that call",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade_here, name):
    src, expected = WRONG[name]
    r = grade_here(src)
    assert r["status"] == "failed", (name, r["summary"])
    bad = [c for c in r["cases"] if not c["passed"]]
    text = r["summary"] + " " + r.get("message", "") + " " + str(bad)
    assert expected in text, (name, text[:3000])


def test_gpulab_profile_shows_the_operator_on_top_by_total(run_gpulab, tmp_path):
    """`gpulab profile find_bottleneck` profiles the learner's block (a child
    process) and sorts by CPU total, the lesson's habit: the starter's
    prefix mean on top, the fixed block without it."""
    import re

    starter = tmp_path / "starter.py"
    starter.write_text(STARTER)
    # One intra-op thread: beside another test worker on a 2-core box, torch's
    # two threads once made the block's two addmm calls take 4.6 ms, above
    # the 512 means (a full run, 2026-12-03); the lesson's table is one
    # learner's process on a box of its own.
    env = gpulab_env(tmp_path / "workspace", OMP_NUM_THREADS="1")
    p = run_gpulab("profile", "find_bottleneck", "--file", str(starter), "--steps", "2", env=env)
    assert p.returncode == 0, p.stderr + p.stdout
    assert "Top operations (CPU total)" in p.stdout
    table = p.stdout[p.stdout.index("Top operations (CPU total)") :]
    # On top, or near it: under load one slow call of another op (a 4.3 ms
    # aten::cat, a full run on a 2-core box, 2026-12-04) can outrank the 512
    # means by total for one run.
    assert "aten::mean" in re.findall(r"aten::\w+", table)[:3], table
    assert (tmp_path / "workspace" / "traces" / "find_bottleneck.json").is_file()
    fixed = tmp_path / "fixed.py"
    fixed.write_text(REF)
    p = run_gpulab("profile", "find_bottleneck", "--file", str(fixed), "--steps", "2", env=env)
    assert p.returncode == 0 and "aten::mean " not in p.stdout, p.stdout


def test_names_are_normalized():
    from gpulab.judge.graders.find_bottleneck import normalized

    for name in ("aten::mean", "mean", "torch.mean", " `aten::mean.dim` ", "Tensor.mean()"):
        assert normalized(name) == "aten::mean", name
    assert normalized("aten::sum") == "aten::sum" and normalized("") == ""


def test_the_judges_reference_is_the_original_block():
    import torch

    from gpulab.judge.graders.find_bottleneck import make_weights, make_x, original_block, reference

    x, w = make_x(1, "cpu"), make_weights(2, "cpu")
    got = original_block(x, w).double()
    assert torch.allclose(got, reference(x, w), atol=1e-5, rtol=1e-5)


@pytest.mark.gpu
def test_gpu_reference_passes_and_starter_fails(grade):
    r = grade("find_bottleneck", REF, device="cuda", timeout=300)
    assert r["passed"], (r["summary"], r.get("message", "")[-3000:])
    assert r["timing"]["profile"]["top_kernels"], r["timing"]
    r = grade("find_bottleneck", STARTER, device="cuda", timeout=300)
    assert r["status"] == "failed", r["summary"]
    top = r["timing"]["profile"]["top_ops"][0]
    assert top["name"] == "aten::mean" and top["calls"] == 256, top
