"""Grades a learner can read (issue 47): the letter is measured against one
fixed roof, the datasheet's, so a kernel's letter does not change with
whether `gpulab probe --bench` has run; the bands are set per exercise so
that the design a lesson teaches reaches an A on an H100 and an H200 while a
naive one cannot; the summary and the result's JSON say what the letter was
measured against.

Graded from recorded timings (benchmarks/, BENCHMARKS.md), no GPU: each
case's time as the judge measured it, placed and summarised by the judge's
own code (gpulab.judge.speed.place and its summary)."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import REPO

BENCH = REPO / "benchmarks"
H200, H100 = "NVIDIA H200", "NVIDIA H100 80GB HBM3"
ELT = {"fp32": 4, "fp16": 2, "bf16": 2}


def _softmax_rows(shapes_ms: list[tuple[str, str, float]]) -> list[tuple[str, str, float, float]]:
    """(name, dtype, seconds, bytes) of softmax rows: 2·M·N·elt bytes."""
    out = []
    for shape, dtype, ms in shapes_ms:
        m, n = (int(v) for v in shape.split("×"))
        out.append((f"{shape} {dtype}", dtype, ms * 1e-3, 2 * m * n * ELT[dtype]))
    return out


def _check_rows(path: str) -> list[tuple[str, str, float, float]]:
    """A recorded check's timed rows (name, dtype, seconds, bytes)."""
    timing = json.loads((BENCH / path).read_text())["timing"]
    return [(c["name"], c["dtype"], c["ms"] * 1e-3, c["bytes"]) for c in timing["cases"]]


def _learner_softmax_h200() -> list[tuple[str, str, float, float]]:
    """lesson 02's design as a learner writes it (scripts/tools/learner/softmax.py),
    checked on the H200 on 2026-12-04: its timed rows as the feedback bench kept them."""
    rows = json.loads((BENCH / "h200-2026-12-04/feedback_h200_learner.json").read_text())["rows"]
    timed = next(r for r in rows if r["exercise"] == "softmax" and r["kind"] == "cold")["timed"]
    return _softmax_rows([(*name.split(" "), ms) for name, ms, _ in timed])


def _summary(exercise: str, device: str, rows, workspace=None):
    import torch  # noqa: F401 - the judge's modules import it

    from gpulab.judge import speed
    from gpulab.judge.graders import bandwidth, softmax
    from gpulab.judge.timed_rows import KernelRow, RemoteTiming

    spec = {"softmax": softmax.SPEC, "bandwidth": bandwidth.spec(native=True)}[exercise]
    placed = []
    for name, dtype, sec, nbytes in rows:
        row = KernelRow(
            name=name,
            shape=name,
            dtype=dtype,
            timed=RemoteTiming({"ms": sec * 1e3}, {}, 1, 0.0, 0.0, []),
            flops=None,
            bytes=nbytes,
            kind="memory",
            sizes={},
            intensity=None,
        )
        speed.place(row, "memory", sec, device, workspace)
        placed.append(row)
    return speed._summary(spec, placed, device, None, workspace)


RECORDED = {
    # (exercise, device, rows, the letter): the design each lesson teaches
    # gets an A on both GPUs; a naive one cannot.
    "softmax, lesson 02's design, H200": ("softmax", H200, _learner_softmax_h200, "A"),
    "softmax, the reference, H200": (
        "softmax",
        H200,
        lambda: _check_rows("h200-2026-12-05/check_softmax.json"),
        "A",
    ),
    "softmax, the reference, H100": (
        "softmax",
        H100,
        lambda: _check_rows("h100-2026-12-05-replay/run1_check_softmax.json"),
        "A",
    ),
    "softmax, three passes over each row, H200": (
        "softmax",
        H200,
        lambda: _check_rows("h200-2026-12-02-boundary/explain_three_pass_nsight.json"),
        "C",
    ),
    "bandwidth, the plain masked triad, H200": (
        "bandwidth",
        H200,
        lambda: _check_rows("h200-2026-12-05/check_bandwidth.json"),
        "A",
    ),
    "bandwidth, the plain masked triad, H100": (
        "bandwidth",
        H100,
        lambda: _check_rows("h100-2026-12-05-replay/run1_replay_hopper_bandwidth.json"),
        "A",
    ),
    # The same triad in two kernels (alpha * x stored, read back, added to
    # y): 5 elements moved for 3 at the triad's own pace.
    "bandwidth, in two kernels, H200": (
        "bandwidth",
        H200,
        lambda: [
            (n, dt, sec * 5 / 3, nbytes)
            for n, dt, sec, nbytes in _check_rows("h200-2026-12-05/check_bandwidth.json")
        ],
        "C",
    ),
}


@pytest.mark.parametrize("name", list(RECORDED))
def test_the_letter_of_a_recorded_run(name):
    exercise, device, rows, letter = RECORDED[name]
    t = _summary(exercise, device, rows())
    assert t.grade == letter, (name, t.summary)


def _probe_cache(tmp_path, device: str, copy_tbs: float):
    from gpulab.gpu import ceilings

    path = ceilings.cache_path(tmp_path, device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"device": device, "copy_tbs": copy_tbs, "tflops": {"bf16": 684.0}}))
    return str(tmp_path)


@pytest.mark.parametrize("name", list(RECORDED))
def test_the_same_run_gets_the_same_letter_after_the_probe(tmp_path, name):
    """Before this change a cached copy ceiling (4.25 TB/s on the H200)
    became the roof: the learner's softmax went from B to A and back with
    the probe's cache. Now the letter and its fraction do not move; the
    measured ceiling is said beside."""
    exercise, device, rows, _ = RECORDED[name]
    before = _summary(exercise, device, rows())
    ws = _probe_cache(tmp_path, device, 4.25 if device == H200 else 2.99)
    after = _summary(exercise, device, rows(), ws)
    assert (after.grade, after.roofline_fraction) == (before.grade, before.roofline_fraction)
    assert "copy ceiling this GPU measured" in after.summary
    assert "copy ceiling" not in before.summary


def test_the_summary_and_json_say_what_the_letter_was_measured_against():
    t = _summary("softmax", H200, _learner_softmax_h200())
    assert t.summary.startswith("grade A: 71% of the H200 datasheet's 4.8 TB/s"), t.summary
    out = t.to_json()
    basis = out["graded_on"]
    assert basis["basis"] == "roofline" and basis["against"] == "the H200 datasheet's 4.8 TB/s"
    assert basis["text"] == (
        "graded on the fraction of the H200 datasheet's 4.8 TB/s: A from 65%, B from 55%, "
        "C from 40%"
    )
    assert math.isclose(basis["score"], out["roofline_fraction"])
    assert {c["ceiling"] for c in out["cases"]} == {"the H200 datasheet's 4.8 TB/s"}


def test_the_results_pane_shows_the_letters_basis():
    from rich.console import Console

    from gpulab.lab.report import render
    from gpulab.wire.result import CheckResult

    t = _summary("softmax", H200, _learner_softmax_h200()).to_json()
    result = CheckResult.from_json(
        {"status": "passed", "exercise": "softmax", "summary": t["summary"], "timing": t}
    )
    con = Console(width=200, record=True, file=open("/dev/null", "w"))
    con.print(render(result))
    text = con.export_text()
    assert "The letter, A: graded on the fraction of the H200 datasheet's 4.8 TB/s" in text


def test_a_gpu_without_a_datasheet_is_graded_against_its_measured_ceiling_or_not_at_all(
    tmp_path,
):
    rows = _check_rows("h200-2026-12-05/check_bandwidth.json")
    none = _summary("bandwidth", "Mystery GPU 9000", rows)
    assert none.grade == "–" and none.summary.startswith("not graded: no datasheet"), none.summary
    ws = _probe_cache(tmp_path, "Mystery GPU 9000", 4.25)
    measured = _summary("bandwidth", "Mystery GPU 9000", rows, ws)
    assert measured.grade == "A", measured.summary
    assert "of the copy ceiling this GPU measured, 4.25 TB/s" in measured.summary
