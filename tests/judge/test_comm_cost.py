"""The comm_cost grader (lesson 08): the bytes each split of the MLP moves.

The reference and the starter go through the real check path; the variants
run the same grader with the sandbox's handlers in this process
(tests/inprocess.py), a few milliseconds each."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, reference_source, starter_source

REF = reference_source("comm_cost")
STARTER = starter_source("comm_cost")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


@pytest.fixture
def grade_here(tmp_path):
    from tests.inprocess import grade_here as _in_process

    def _grade(src: str) -> dict:
        path = tmp_path / f"comm_cost_{abs(hash(src)) % 10**8}.py"
        path.write_text(src)
        return _in_process("comm_cost", "step_cost", path)

    return _grade


def test_reference_passes(grade):
    r = grade("comm_cost", REF, shared=True)
    assert r["passed"], (r["summary"], [c for c in r["cases"] if not c["passed"]][:3])
    names = [c["name"] for c in r["cases"]]
    # The lesson's example, every split forward and training, and unseen MLPs.
    for split in ("data", "tensor", "zero12", "fsdp"):
        assert f"the lesson's example: {split} training step" in names
    assert sum(n.startswith("unseen MLP") for n in names) >= 5 * 12


def test_starter_fails(grade):
    r = grade("comm_cost", STARTER, shared=True)
    assert r["status"] == "failed"
    lesson = [c for c in r["cases"] if c["name"].startswith("the lesson's example: ring_bytes")]
    assert len(lesson) == 3 and not any(c["passed"] for c in lesson), lesson


def test_the_lessons_worked_numbers():
    """The figures lesson 08 quotes are the grader's answers."""
    from gpulab.judge.graders.comm_cost import LESSON, cost

    _, mlp, n, link = LESSON
    tp = cost(mlp, n, "tensor", False, link)
    assert round(tp["bytes"] / 1e6) == 235 and round(tp["comm_ms"], 2) == 0.52
    assert round(tp["compute_ms"], 2) == 1.11 and round(tp["intensity"]) == 4681
    dp = cost(mlp, n, "data", True, link)
    assert round(dp["bytes"] / 1e9, 2) == 1.88 and round(dp["comm_ms"], 1) == 4.2
    assert round(dp["compute_ms"], 1) == 3.3 and dp["bound"] == "communication"
    fsdp = cost(mlp, n, "fsdp", True, link)
    assert round(fsdp["bytes"] / 1e9, 1) == 2.8 and fsdp["bytes"] == 1.5 * dp["bytes"]
    assert cost(mlp, n, "zero12", True, link)["bytes"] == dp["bytes"]
    from gpulab.judge.graders.comm_cost import idle

    assert idle(4, 16, 1) == 3 / 19 and round(idle(4, 64, 1), 3) == 0.045


HONEST = {
    # Exact arithmetic: Fractions come back as numbers.
    "fractions": variant(
        """def ring_bytes(collective: str, nbytes: float, n: int) -> float:
    # A ring passes n - 1 of the n chunks through every device; an all-reduce
    # is a reduce-scatter followed by an all-gather.
    share = (n - 1) / n * nbytes""",
        """from fractions import Fraction


def ring_bytes(collective: str, nbytes: float, n: int) -> float:
    share = Fraction(n - 1, n) * Fraction(nbytes)""",
    ),
    # A table of (collective, tensor) counts per split, times in seconds first.
    "table and seconds": """
import math

COUNTS = {  # (strategy, training) -> {tensor: {collective: times}}
    ("data", False): {},
    ("data", True): {"w": {"all_reduce": 1}},
    ("tensor", False): {"y": {"all_reduce": 1}},
    ("tensor", True): {"y": {"all_reduce": 1}, "dx": {"all_reduce": 1}},
    ("zero12", False): {},
    ("zero12", True): {"w": {"reduce_scatter": 1, "all_gather": 1}},
    ("fsdp", False): {"w": {"all_gather": 1}},
    ("fsdp", True): {"w": {"all_gather": 2, "reduce_scatter": 1}},
}
FACTOR = {"all_gather": 1, "reduce_scatter": 1, "all_reduce": 2}


def ring_bytes(collective, nbytes, n):
    return FACTOR[collective] * nbytes * (1 - 1 / n)


def step_cost(mlp, n, strategy, training, link):
    sizes = {
        "w": mlp.elt * mlp.h * (mlp.d + mlp.d_out),
        "y": mlp.elt * mlp.batch * mlp.d_out,
        "dx": mlp.elt * mlp.batch * mlp.d,
    }
    sent = math.fsum(
        times * ring_bytes(c, sizes[t], n)
        for t, colls in COUNTS[(strategy, training)].items()
        for c, times in colls.items()
    )
    work = 2 * mlp.batch * mlp.h * (mlp.d + mlp.d_out) * (3 if training else 1) / n
    t_comm = sent / (link.gbs * 10**9)
    t_math = work / (link.tflops * 10**12)
    return dict(
        bytes=sent,
        flops=work,
        comm_ms=1000 * t_comm,
        compute_ms=1000 * t_math,
        intensity=(work / sent) if sent > 0 else None,
        bound="communication" if t_comm > t_math else "compute",
    )


def bubble(p, m, v=1):
    bubble_slots = (p - 1) / v
    return bubble_slots / (m + bubble_slots)
""",
    # NumPy scalars throughout.
    "numpy": variant(
        "    nbytes = sum(ring_bytes(c, s, n) for c, s in _collectives(mlp, strategy, training))\n",
        "    import numpy as np\n\n"
        "    nbytes = np.float64(0.0)\n"
        "    for c, s in _collectives(mlp, strategy, training):\n"
        "        nbytes += np.float64(ring_bytes(c, s, n))\n",
    ),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_variants_pass(grade_here, name):
    r = grade_here(HONEST[name])
    assert r["status"] == "passed", (name, [c for c in r["cases"] if not c["passed"]][:2])


WRONG = {
    "all-reduce counted once": (
        variant('"all_reduce": 2 * share', '"all_reduce": share'),
        "you counted an all-reduce once",
    ),
    "(n-1) times the tensor": (
        variant("share = (n - 1) / n * nbytes", "share = (n - 1) * nbytes"),
        "to each of the n-1 others",
    ),
    "tensor parallel's backward left out": (
        variant("return [y, dx] if training else [y]", "return [y]"),
        "backward all-reduce of the gradient of x",
    ),
    "FSDP gathers once": (
        variant(
            'return [gather, gather, ("reduce_scatter", weights)] if training else [gather]',
            'return [gather, ("reduce_scatter", weights)] if training else [gather]',
        ),
        "gathered FSDP's weights once",
    ),
    "elements, not bytes": (
        variant(
            "weights = (mlp.d * mlp.h + mlp.h * mlp.d_out) * mlp.elt",
            "weights = mlp.d * mlp.h + mlp.h * mlp.d_out",
        ),
        "elements, not bytes",
    ),
    "biases counted": (
        variant(
            "weights = (mlp.d * mlp.h + mlp.h * mlp.d_out) * mlp.elt",
            "weights = (mlp.d * mlp.h + mlp.h * mlp.d_out + mlp.h + mlp.d_out) * mlp.elt",
        ),
        "counted the biases",
    ),
    "GiB": (
        variant(
            "comm_ms = nbytes / (link.gbs * 1e9) * 1e3",
            "comm_ms = nbytes / (link.gbs * 2**30) * 1e3",
        ),
        "2**30 for giga",
    ),
    "training as 2x": (
        variant("flops = (3 if training else 1)", "flops = (2 if training else 1)"),
        "2× the forward",
    ),
    "bound by the larger FLOPs": (
        variant(
            '"bound": "communication" if comm_ms > compute_ms else "compute"', '"bound": "compute"'
        ),
        "bound: got 'compute', expected 'communication'",
    ),
    "zero intensity": (
        variant(
            '"intensity": flops / nbytes if nbytes else None',
            '"intensity": flops / nbytes if nbytes else 0.0',
        ),
        "intensity: got 0, expected None",
    ),
    "GPipe bubble for interleaving": (
        variant("return (p - 1) / (v * m + p - 1)", "return (p - 1) / (m + p - 1)"),
        "GPipe's bubble",
    ),
    "returns a tuple": (
        variant(
            '    return {\n        "bytes": nbytes,',
            '    return nbytes, flops\n    return {\n        "bytes": nbytes,',
        ),
        "expected a dict",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_variants_fail(grade_here, name):
    src, expected = WRONG[name]
    r = grade_here(src)
    assert r["status"] == "failed", (name, r["summary"])
    details = " ".join(c.get("detail", "") for c in r["cases"] if not c["passed"])
    assert expected in details, (name, details[:2000])


def test_a_raising_function_fails_its_cases_only(grade_here):
    src = variant(
        "def bubble(p: int, m: int, v: int = 1) -> float:\n",
        "def bubble(p, m, v=1):\n    raise ValueError('no pipelines')\n",
    )
    r = grade_here(src)
    assert r["status"] == "failed"
    bad = [c for c in r["cases"] if not c["passed"]]
    assert bad and all("bubble" in c["name"] and "no pipelines" in c["detail"] for c in bad), bad[
        :2
    ]


def test_the_lesson_quotes_the_graders_numbers():
    """Lesson 08's worked figures, as it prints them, are the answers graded."""
    text = (REPO / "lessons" / "08_jax_sharding_pipeline" / "lesson.md").read_text()
    for figure in (
        "**235 MB**",
        "**0.52 ms**",
        "4,681 FLOP per byte",
        "**1.11 ms**",
        "1.88 GB, **4.2 ms**",
        "3.3 ms",
        "2.8 GB a step",
        "3/19 = 16%",
    ):
        assert figure in text, figure


def test_the_answer_key_cannot_be_read_or_imported(grade):
    # The answers are gpulab.judge.graders.comm_cost's: refused as an import
    # always, and as a file wherever the sandbox is confined.
    from gpulab.sandbox.isolation import landlock_abi

    path = REPO / "gpulab" / "judge" / "graders" / "comm_cost.py"
    src = (
        REF
        + f"\ntry:\n    open({str(path)!r}).read()\n    READ = True\nexcept OSError:\n    READ = False\n"
    )
    src += "\n_real = bubble\n\ndef bubble(p, m, v=1):\n    return _real(p, m, v) if not READ else -1.0\n"
    r = grade("comm_cost", src)
    if landlock_abi() > 0:
        assert r["passed"], r["summary"]  # the file could not be read
    r = grade("comm_cost", "import gpulab.judge.graders.comm_cost\n" + REF)
    assert not r["passed"]
