"""The CLI as a learner and an instructor use it (real subprocesses)."""

from __future__ import annotations

import json

from tests.conftest import reference_source


def test_help_lists_the_commands(run_gpulab):
    r = run_gpulab("--help")
    assert r.returncode == 0
    for cmd in ("list", "check", "watch", "hint", "reset", "solution", "dev"):
        assert cmd in r.stdout


def test_check_exit_codes_and_json(run_gpulab, tmp_path):
    starter = run_gpulab("check", "softmax", "--json", "--device", "cpu")
    assert starter.returncode == 1, starter.stderr
    result = json.loads(starter.stdout)
    assert result["exercise"] == "softmax" and result["passed"] is False

    sub = tmp_path / "submission.py"
    sub.write_text(reference_source("softmax"))
    ok = run_gpulab("check", "softmax", "--file", str(sub), "--json", "--device", "cpu")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["passed"] is True
    # --file grades without touching the learner's progress (instructors).
    lst = json.loads(run_gpulab("list", "--json").stdout)
    row = next(r for r in lst["lessons"] if r["exercise"] == "softmax")
    assert row["status"] == "failed" and row["attempts"] == 1


def test_check_cannot_run_exits_2(run_gpulab, tmp_path):
    assert run_gpulab("check", "nope").returncode == 2
    r = run_gpulab("check", "softmax", "--file", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "no such file" in r.stderr
    assert run_gpulab("check", "softmax", "--timeout", "0").returncode == 2
    assert run_gpulab("check").returncode == 2  # argparse: missing argument


def test_human_output_shows_cases(run_gpulab):
    r = run_gpulab("check", "softmax", "--device", "cpu")
    assert r.returncode == 1
    assert "FAIL" in r.stdout


def test_reset_asks_or_takes_yes(run_gpulab, tmp_path):
    path = run_gpulab("where", "softmax").stdout.strip()
    with open(path, "w") as f:
        f.write("# my attempt\n")
    r = run_gpulab("reset", "softmax")  # no terminal to ask on
    assert r.returncode == 2 and "--yes" in r.stderr
    r = run_gpulab("reset", "softmax", "--yes")
    assert r.returncode == 0 and "backed up" not in r.stderr
    backup = r.stdout.strip().splitlines()[-1].split()[-1]
    assert open(backup).read() == "# my attempt\n"
    assert "TODO" in open(path).read()


def test_hint_then_solution_gate(run_gpulab, tmp_path):
    first = run_gpulab("hint", "softmax")
    assert first.returncode == 0 and "Hint 1 of 3" in first.stdout
    assert "Hint 2 of 3" in run_gpulab("hint", "softmax").stdout
    assert run_gpulab("solution", "softmax").returncode == 1
    path = run_gpulab("where", "softmax").stdout.strip()
    with open(path, "w") as f:
        f.write(reference_source("softmax"))
    assert run_gpulab("check", "softmax", "--device", "cpu").returncode == 0
    sol = run_gpulab("solution", "softmax")
    assert sol.returncode == 0 and "softmax_kernel" in sol.stdout


def test_list_and_lesson(run_gpulab):
    r = run_gpulab("list")
    assert r.returncode == 0 and "softmax" in r.stdout
    r = run_gpulab("lesson", "2")
    assert r.returncode == 0 and "memory-bound" in r.stdout


def test_dev_check_proves_the_course(run_gpulab):
    r = run_gpulab("dev", "check", "--device", "cpu", timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "02_triton_101_softmax: starter fails, reference passes" in r.stdout


def test_a_symlink_out_of_the_workspace_is_refused(run_gpulab, tmp_path):
    path = run_gpulab("where").stdout.strip()
    import os

    outside = tmp_path / "outside.py"
    outside.write_text("# not in the workspace\n")
    os.makedirs(os.path.join(path, "exercises"), exist_ok=True)
    os.symlink(outside, os.path.join(path, "exercises", "softmax.py"))
    r = run_gpulab("reset", "softmax", "--yes")
    assert r.returncode == 2 and "outside the workspace" in r.stderr
    assert outside.read_text() == "# not in the workspace\n"


def test_solution_is_never_cut_at_the_terminal_width(run_gpulab, tmp_path):
    """Piped: the reference byte for byte. On an 80-column terminal: wrapped,
    every word of every long line on screen (rich used to crop them)."""
    import io

    from rich.console import Console

    from gpulab.workspace import Workspace

    ref = reference_source("flash_attention")
    long_lines = [line for line in ref.splitlines() if len(line) > 80]
    assert long_lines, "the test needs a reference with lines wider than 80 columns"
    Workspace.open(tmp_path / "workspace").record_result(
        "flash_attention", {"passed": True, "status": "passed", "summary": "ok"})
    r = run_gpulab("solution", "flash_attention", env=None)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ref

    from gpulab.commands.course import print_source

    out = io.StringIO()
    print_source(ref, Console(file=out, width=80, force_terminal=True, color_system=None))
    shown = out.getvalue()
    assert max(len(line) for line in shown.splitlines()) <= 80
    words = shown.split()
    for line in long_lines:
        tail = line.split()[-1]
        assert tail in words, f"{tail!r} of a long line is missing"
