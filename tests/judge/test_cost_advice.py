"""Advice after the verdict (issue 48), through real checks on the CPU: a
pass carries the cost model's estimate, counted in the replay's sandbox; a
wrong case carries its load map, and is saved for `gpulab debug`, whose
script reruns it in plain Python and shows the same failure; `gpulab
restore` and `gpulab compare` work in place."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import gpulab_env, reference_source

ROOT = Path(__file__).resolve().parents[2]
OFF_BY_ONE = ROOT / "tests" / "fixtures" / "buggy" / "triad_off_by_one.py"


def test_a_wrong_case_is_mapped_and_rerun_by_gpulab_debug_then_a_pass_costed(
    grade, tmp_path: Path
) -> None:
    # One test, two checks (each real CPU check costs CI seconds): the wrong
    # case first, then the reference, whose pass clears the saved cases and
    # carries the estimate.
    result = grade("bandwidth", OFF_BY_ONE)
    assert not result["passed"]
    drawn = result["load_map"]
    # The first wrong case of 64 elements or more (N=1000), replayed with maps.
    assert drawn["case"].startswith("N=1000") and drawn["wrong"] == [[999]]
    (launch,) = drawn["counts"]["launches"]
    out = next(t for t in launch["tensors"] if t["name"] == "out_ptr")
    assert out["map"]["stored"][999] == -1 and out["map"]["masked"][999] == "s"
    folder = Path(result["debug"])
    meta = json.loads((folder / "cases.json").read_text())
    assert [c["number"] for c in meta["cases"]] == [1, 2, 3, 4]
    env = gpulab_env(tmp_path / "workspace")
    listed = subprocess.run(
        [sys.executable, "-m", "gpulab", "debug", "bandwidth", "--list"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "case 4: N=1000 fp32" in listed.stdout, listed.stderr
    wrote = subprocess.run(
        [sys.executable, "-m", "gpulab", "debug", "bandwidth", "--case", "4", "--script"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    script = folder / "debug_case_4.py"
    assert wrote.returncode == 0 and script.is_file(), wrote.stderr
    rerun = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )
    # The same failure as the check's, outside the sandbox, and its picture.
    assert "1 of 1000 elements wrong" in rerun.stdout and "at (999,)" in rerun.stdout
    assert "never stored, a masked lane pointed there: [999]" in rerun.stdout, rerun.stderr
    # A later pass clears the saved cases, and says what the kernel would cost.
    again = grade("bandwidth", reference_source("bandwidth"))
    assert again["passed"] and "debug" not in again and not folder.exists()
    cost = again["cost"]
    assert "a model, not a measurement" in cost["model"]
    # The reference triad moves each byte once (the largest case: 70001 fp32).
    assert cost["case"].startswith("N=70001")
    assert 1.0 <= cost["ratio"] < 1.01 and cost["footprint_ratio"] == pytest.approx(1, abs=1e-3)
    assert cost["coalescing"] < 1.1 and cost["gpu"]
    assert cost["best_fraction"] > 0.95  # its grid grows with N: no idle SMs charged
    # The shipped estimate of the reference (scripts/tools/cost_reference.py) is this one.
    assert cost["reference"]["ratio"] == pytest.approx(cost["ratio"], rel=1e-3)
    assert not any("cost" in line for line in again.get("notes") or [])


def test_restore_and_compare_in_place(run_gpulab, tmp_path: Path) -> None:
    env = gpulab_env(tmp_path / "workspace")
    assert run_gpulab("where", "bandwidth", env=env).returncode == 0
    path = Path(run_gpulab("where", "bandwidth", env=env).stdout.strip())
    path.write_text("# my triad, version 1\n")
    assert run_gpulab("reset", "bandwidth", "--yes", env=env).returncode == 0
    assert "version 1" not in path.read_text()
    listed = run_gpulab("restore", "bandwidth", "--list", env=env)
    assert listed.stdout.startswith("1. bandwidth-"), listed.stderr
    done = run_gpulab("restore", "bandwidth", "--yes", env=env)
    assert done.returncode == 0 and path.read_text() == "# my triad, version 1\n"
    assert "the file it replaced is kept at" in done.stdout  # the starter, backed up
    locked = run_gpulab("compare", "bandwidth", env=env)
    assert locked.returncode == 1 and "once your own passes" in locked.stderr


def test_gpulab_debug_reads_a_damaged_index_field_by_field(tmp_path: Path) -> None:
    """The saved cases' index is read field by field: an entry without a
    number is left out, a tolerance that is not numbers is the default."""
    import torch

    from gpulab.targets.debug_case import load

    folder = tmp_path / ".gpulab" / "debug" / "bandwidth"
    folder.mkdir(parents=True)
    torch.save({"args": [torch.ones(2)], "expected": torch.zeros(2)}, folder / "case-3.pt")
    cases = [{"name": "no number"}, {"number": 3, "file": "case-3.pt", "tolerance": ["x", None]}]
    (folder / "cases.json").write_text(json.dumps({"function": "triad", "cases": ["?", *cases]}))
    case = load(tmp_path, "bandwidth")
    assert (case.number, case.function, case.tolerance, case.kwargs) == (
        3,
        "triad",
        (1e-5, 1e-5),
        {},
    )
    with pytest.raises(LookupError, match=r"\(saved: 3\)"):
        load(tmp_path, "bandwidth", 1)
