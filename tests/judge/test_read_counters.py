"""Lesson 07's read_counters step: the recordings read (gpulab.gpu.counters),
`gpulab counters`, and the grader on honest and wrong diagnoses.

The grader is plain data in and out: every variant runs the real grader and
the sandbox's handler in this process (tests/inprocess.py), a fraction of a
second each. The reference and the starter go through real child processes
in `gpulab dev check` (tests/cli)."""

from __future__ import annotations

import pytest

from gpulab.gpu import counters
from tests.conftest import reference_source

# Its module fixtures grade or compile a batch: one worker runs the module
# (pyproject's --dist loadgroup), where a second would build it again.
pytestmark = pytest.mark.xdist_group("read_counters")

REF = reference_source("read_counters")


def variant(old: str, new: str, src: str = REF) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new, 1)


# --- the recordings ----------------------------------------------------------------


def test_every_recording_reads_with_the_counters_its_answer_cites():
    for name in counters.RECORDINGS:
        kernel, rows = counters.counters(name)
        assert kernel and len(rows) > 40, (name, kernel, len(rows))
    _, rows = counters.counters("softmax_32k")
    (occ,) = counters.find(rows, "achieved occupancy")  # case and spacing aside
    assert occ == ("Occupancy", "Achieved Occupancy", "%", "23.73")
    # A name in two sections gives both; a section picks one.
    assert len(counters.find(rows, "Memory Throughput")) == 2
    (sol,) = counters.find(rows, "GPU Speed Of Light Throughput: Memory Throughput")
    assert sol[2] == "%" and counters.matches(sol, "58.64 %") and not counters.matches(sol, 60)
    _, raw = counters.counters("softmax_three_pass")
    (read,) = counters.find(raw, "dram__bytes_read.sum")
    assert counters.number(read[3]) == 402_675_968
    assert not counters.find(raw, "device__attribute_display_name")  # the machine, not the kernel


def test_a_missing_recording_names_its_file(tmp_path):
    with pytest.raises(counters.CountersError, match="ncu-1.csv"):
        counters.counters("rope_fwd", root=tmp_path)
    (tmp_path / "benchmarks" / "h200-2026-11-30").mkdir(parents=True)
    (tmp_path / "benchmarks" / "h200-2026-11-30" / "ncu-1.csv").write_text("### other\n")
    with pytest.raises(counters.CountersError, match="no counters for case 'rope_1x'"):
        counters.counters("rope_fwd", root=tmp_path)


def test_every_live_recording_is_built_by_one_grader():
    """`gpulab counters NAME --ncu` runs gpulab.targets.counter_cases, which
    finds NAME among the COUNTER_CASES of the graders the manifest's tools
    name "counters": each recording it can take again, exactly once."""
    from gpulab.course.content import load_course
    from gpulab.judge.loader import load

    course = load_course()
    built = [
        name
        for exercise in course.covered_by("counters")
        for name in getattr(load(exercise, course=course), "COUNTER_CASES", {})
    ]
    assert sorted(built) == sorted(counters.LIVE)


def test_gpulab_counters_lists_shows_and_names_what_it_cannot(run_gpulab):
    listed = run_gpulab("counters")
    assert listed.returncode == 0 and all(n in listed.stdout for n in counters.RECORDINGS)
    assert max(map(len, listed.stdout.splitlines())) <= 80
    shown = run_gpulab("counters", "softmax_32k")
    assert shown.returncode == 0
    assert "  Occupancy" in shown.stdout and "Registers Per Thread" in shown.stdout
    assert run_gpulab("counters", "nope").returncode == 2
    gone = run_gpulab("counters", "softmax_three_pass", "--ncu")
    assert gone.returncode == 2 and "cannot be profiled again" in gone.stderr


# --- the grader ----------------------------------------------------------------------

HONEST = {
    # Other words for a limit, names with their section, values as printed.
    "other spellings": variant(
        '"limit": "dram",\n        "evidence": {"DRAM Throughput": 78.89',
        '"limit": "DRAM bandwidth",\n        "evidence": {"GPU Speed Of Light Throughput: '
        'DRAM Throughput": "78.89 %"',
    ),
    # The rope's DRAM rate worked out from its bytes and duration instead.
    "bytes and time": variant(
        '"evidence": {"DRAM Throughput": 78.89, "Compute (SM) Throughput": 37.09}',
        '"evidence": {"dram__bytes_read.sum": 142628608, "dram__bytes_write.sum": 110732032, '
        '"Duration": 66752}',
    ),
}

# name -> (source, the kernel whose case fails, words its detail shows)
WRONG = {
    # Low occupancy, but the SMs are at their peak: occupancy is no limit then.
    "matmul read as latency": (
        variant(
            '"limit": "compute",\n        "evidence": {"Compute (SM) Throughput": 91.85',
            '"limit": "latency",\n        "evidence": {"Compute (SM) Throughput": 91.85',
        ),
        "matmul_8k",
        "not latency",
    ),
    # The occupancy alone: nothing shows that neither roof is reached.
    "latency without the roofs": (
        variant(
            '            "DRAM Throughput": 58.64,\n            "Compute (SM) Throughput": 34.14,\n',
            "",
        ),
        "softmax_32k",
        "both roofs far off",
    ),
    # A value the recording does not hold.
    "a misread value": (
        variant('"DRAM Throughput": 42.21', '"DRAM Throughput": 72.73'),
        "torch_softmax_32k",
        "DRAM Throughput is 42.21 %",
    ),
    # A counter the recording does not have (a section's name, not a metric's).
    "a counter that is not there": (
        variant('"Achieved Occupancy": 23.73', '"Occupancy": 23.73'),
        "softmax_32k",
        "has no counter 'Occupancy'",
    ),
    "not a limit": (
        variant(
            '"limit": "dram",\n        "evidence": {"dram__bytes',
            '"limit": "bytes",\n        "evidence": {"dram__bytes',
        ),
        "softmax_three_pass",
        "is not one of dram, l2, compute, latency",
    ),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from tests.inprocess import grade_here

    tmp = tmp_path_factory.mktemp("read_counters")
    out = {}
    sources = {"reference": REF, **HONEST, **{n: s for n, (s, _, _) in WRONG.items()}}
    for i, (name, src) in enumerate(sources.items()):
        path = tmp / f"variant_{i}.py"
        path.write_text(src)
        out[name] = grade_here("read_counters", "diagnose", path)
    return out


@pytest.mark.parametrize("name", ["reference", *HONEST])
def test_honest_diagnoses_pass(graded, name):
    r = graded[name]
    assert r["status"] == "passed", (name, [(c["name"], c.get("detail")) for c in r["cases"]])
    assert len(r["cases"]) == len(counters.RECORDINGS)


@pytest.mark.parametrize("name", list(WRONG))
def test_wrong_diagnoses_fail_naming_the_kernel_and_why(graded, name):
    _, kernel, words = WRONG[name]
    r = graded[name]
    assert r["status"] == "failed", (name, r["summary"])
    bad = {c["name"]: c.get("detail", "") for c in r["cases"] if not c["passed"]}
    assert list(bad) == [f"{kernel}: what limits it"], (name, bad)
    assert words in bad[f"{kernel}: what limits it"], (name, bad)
