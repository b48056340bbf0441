"""Failure output that teaches: a NaN or inf error is shown as such (not as
0), and a kernel that reads or writes out of bounds is named so, whichever
signal ends it. In process and fast: no child, no kernel."""

from __future__ import annotations

import signal

import pytest

from gpulab.wire.sandbox_start import Policy


def test_nan_and_inf_outputs_are_errors_of_that_size():
    import torch

    from gpulab.judge.compare import compare, describe_mismatch

    ref = torch.ones(8, dtype=torch.float64)
    out = ref.clone().float()
    out[3] = float("nan")  # an unwritten element, poisoned with NaN
    rep = compare(out, ref, 1e-6, 1e-5)
    assert rep.mismatches == 1
    assert rep.max_abs != rep.max_abs and rep.max_rel != rep.max_rel  # NaN
    assert "max abs err NaN, max rel err NaN" in describe_mismatch(rep)
    assert "got NaN, expected 1" in describe_mismatch(rep)

    out = ref.clone().float()
    out[0] = float("inf")  # an overflow
    rep = compare(out, ref, 1e-6, 1e-5)
    assert rep.max_abs == float("inf")
    assert "max abs err inf" in describe_mismatch(rep)

    # NaN where the reference is NaN, and matching infinities, are no errors.
    ref[1], ref[2] = float("nan"), float("-inf")
    rep = compare(ref.float(), ref, 1e-6, 1e-5)
    assert rep.mismatches == 0 and rep.max_abs == 0.0


def test_the_error_columns_show_nan_and_inf():
    from rich.console import Console

    from gpulab.lab.report import cases_table
    from gpulab.wire.result import case_rows

    table = cases_table(
        case_rows(
            [
                {"name": "a", "dtype": "fp16", "max_abs": float("nan"), "max_rel": float("nan")},
                {"name": "b", "dtype": "fp16", "max_abs": float("inf"), "max_rel": 0.5},
            ]
        )
    )
    console = Console(width=100, record=True)
    console.print(table)
    text = console.export_text()
    assert text.count("NaN") == 2 and "inf" in text and "nan" not in text


def test_columns_no_case_fills_are_left_out():
    """copy_ceiling's cases are numbers, not tensors: no dtype, no errors.
    At 60 columns those empty columns folded every case name in two."""
    from rich.console import Console

    from gpulab.lab.report import cases_table
    from gpulab.wire.result import case_rows

    table = cases_table(
        case_rows([{"name": "buffer_bytes for T4", "passed": False, "detail": "too few"}])
    )
    console = Console(width=60, record=True)
    console.print(table)
    text = console.export_text()
    assert "buffer_bytes for T4" in text and "FAIL" in text
    assert "dtype" not in text and "max abs" not in text and "bad" not in text
    # With numbers, every column is back.
    full = cases_table(case_rows([{"name": "a", "dtype": "fp16", "max_abs": 0.1, "mismatches": 0}]))
    console = Console(width=100, record=True)
    console.print(full)
    text = console.export_text()
    assert "dtype" in text and "max abs err" in text and "bad" in text


def test_worst_keeps_a_nan():
    from gpulab.judge.compare import worst

    nan = float("nan")
    assert worst(0.0, nan) != worst(0.0, nan)
    assert worst(nan, 1.0) != worst(nan, 1.0)
    assert worst(None, 2.0) == 2.0 and worst(1.0, 3.0) == 3.0


POLICY = Policy(cpu_seconds=150, file_bytes=256 << 20)


@pytest.mark.parametrize(
    "sig, output",
    [
        (signal.SIGSEGV, ""),
        # What lesson 01's triad without masks printed on the CPU, run to run.
        (signal.SIGABRT, "free(): invalid pointer\n"),
        (signal.SIGABRT, "corrupted double-linked list\n"),
        (signal.SIGABRT, ""),
    ],
)
def test_out_of_bounds_is_named_for_either_signal(sig, output):
    from gpulab.wire.crashes import crash_summary

    summary, hint = crash_summary(-sig, "", POLICY, output)
    assert "out of bounds: a missing mask?" in summary
    assert sig.name in summary and "mask=" in hint


def test_other_endings_keep_their_words():
    from gpulab.wire.crashes import crash_summary

    assert crash_summary(None, "", POLICY) == ("your code stopped answering", "")
    assert "code 3" in crash_summary(3, "", POLICY)[0]
    assert "150 s of CPU" in crash_summary(-signal.SIGXCPU, "", POLICY)[0]
    assert "SIGKILL" in crash_summary(-signal.SIGKILL, "", POLICY)[0]
    assert crash_summary(-signal.SIGSEGV, "stopped by gpulab", POLICY)[0] == "stopped by gpulab"
    # A plain abort is not said to be memory overwritten.
    assert "memory was overwritten" not in crash_summary(-signal.SIGABRT, "", POLICY, "")[0]
