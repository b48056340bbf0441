"""The CLI as a learner and an instructor use it (real subprocesses)."""

from __future__ import annotations

import json

import pytest

from gpulab.wire.result import CheckResult
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


# `gpulab dev check`'s proof of the course is tests/course/test_every_exercise.py:
# one test an exercise, so the suite's workers share them.


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


# --- no input breaks the lab (issue 17) ---------------------------------------

EVIL = """print("\\x1b[2J\\x1b[H\\x1b[32m PASS \\x1b]52;c;aGk=\\x07 \\x9b31m \\u202e")


def softmax(x):
    raise RuntimeError("\\x1b[2K\\x1b[1A\\x1b[32m PASS [/] [link=http://x]y")
"""


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_learner_escape_sequences_are_shown_not_obeyed(run_gpulab, tmp_path):
    sub = tmp_path / "evil.py"
    sub.write_text(EVIL)
    r = run_gpulab("check", "softmax", "--file", str(sub), "--device", "cpu", "--no-timing")
    assert r.returncode == 1, r.stdout + r.stderr
    for stream in (r.stdout, r.stderr):
        assert "\x1b" not in stream and "\x9b" not in stream and "\u202e" not in stream
    assert "FAIL" in r.stdout and "␛[2K␛[1A␛[32m PASS [/] [link=http://x]y" in r.stdout
    assert "␛]52;c;aGk=␇" in r.stdout  # the output, visible
    j = run_gpulab(
        "check", "softmax", "--file", str(sub), "--device", "cpu", "--no-timing", "--json"
    )
    result = json.loads(j.stdout)
    assert result["passed"] is False
    assert not [s for s in _strings(result) if "\x1b" in s or "\x07" in s or "\x9b" in s]
    assert "␛[2J" in result["output"] and "␛[2K" in result["summary"]


def test_timeouts_that_are_not_numbers_are_refused_in_one_line(run_gpulab):
    for bad in ("nan", "inf", "-inf", "-1", "0", "1e9", "3601", "1e400", "abc"):
        for cmd in ("check", "watch"):
            r = run_gpulab(cmd, "softmax", f"--timeout={bad}", timeout=60)
            assert r.returncode == 2, (cmd, bad, r.stderr)
            assert r.stderr.count("\n") == 1 and "--timeout" in r.stderr, (cmd, bad, r.stderr)
            assert "Traceback" not in r.stderr
    j = run_gpulab("check", "softmax", "--timeout", "nan", "--json", timeout=60)
    assert j.returncode == 2 and json.loads(j.stdout)["status"] == "error"


def test_file_says_what_the_path_is(run_gpulab, tmp_path):
    import os

    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    for path, words in (
        (tmp_path, "is a directory"),
        (fifo, "is a named pipe"),
        ("/dev/null", "is a character device"),
        (tmp_path / "missing.py", "no such file"),
    ):
        r = run_gpulab("check", "softmax", "--file", str(path), timeout=60)
        assert r.returncode == 2 and words in r.stderr, (path, r.stderr)
        j = run_gpulab("check", "softmax", "--file", str(path), "--json", timeout=60)
        assert j.returncode == 2
        error = json.loads(j.stdout)
        assert error["status"] == "error" and words in error["summary"]


def test_json_usage_errors_are_json_too(run_gpulab):
    for args in (("check", "nope", "--json"), ("check", "--json"), ("list", "--json", "--bad")):
        r = run_gpulab(*args, timeout=60)
        assert r.returncode == 2
        error = json.loads(r.stdout)
        assert error["status"] == "error" and error["summary"], args


def test_encodings_python_accepts_are_accepted(run_gpulab, tmp_path):
    ref = reference_source("softmax")
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + ref.encode())
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + ref.encode())
    plain = tmp_path / "submission.txt"  # no .py suffix: still Python
    plain.write_text(ref)
    for sub in (bom, latin, plain):
        r = run_gpulab(
            "check", "softmax", "--file", str(sub), "--device", "cpu", "--no-timing", "--json"
        )
        assert r.returncode == 0, (sub.name, r.stdout + r.stderr)


def test_bytes_python_refuses_are_placed(run_gpulab, tmp_path):
    lines = reference_source("softmax").splitlines(keepends=True)
    nul = tmp_path / "nul.py"
    nul.write_bytes("".join(lines[:3]).encode() + b"x = 1\x00\n" + "".join(lines[3:]).encode())
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"x = 1\ny = '\xe9'\n")
    for sub, where, words in ((nul, ":4:6:", "NUL byte"), (bad, ":2:6:", "0xe9")):
        r = run_gpulab("check", "softmax", "--file", str(sub), "--device", "cpu", "--json")
        result = json.loads(r.stdout)
        assert r.returncode == 1 and result["passed"] is False
        assert where in result["summary"] and words in result["summary"], result["summary"]
        assert ":None" not in result["summary"]


def test_check_records_the_attempt_when_the_state_was_odd(run_gpulab):
    root = run_gpulab("where").stdout.strip()
    with open(f"{root}/.gpulab/state.json", "w") as f:
        json.dump(
            {"exercises": {"softmax": {"attempts": "x", "status": "weird"}}, "settings": []}, f
        )
    r = run_gpulab("check", "softmax", "--device", "cpu", "--no-timing")
    assert r.returncode == 1, r.stderr
    assert "exercises.softmax.attempts" in r.stderr and "settings" in r.stderr
    for cmd in (
        ("list",),
        ("hint", "softmax"),
        ("roofline", "--gpu", "h200", "--remember", "--json"),
    ):
        assert run_gpulab(*cmd).returncode == 0, cmd
    row = next(
        r
        for r in json.loads(run_gpulab("list", "--json").stdout)["lessons"]
        if r["exercise"] == "softmax"
    )
    assert row["status"] == "failed" and row["attempts"] == 1


def test_probe_interval_that_is_not_a_number_is_refused(run_gpulab):
    for bad in ("nan", "inf", "0", "-1"):
        r = run_gpulab("probe", "--watch", f"--interval={bad}", timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--interval" in r.stderr, bad


def test_solution_is_never_cut_at_the_terminal_width(run_gpulab, tmp_path):
    """Piped: the reference byte for byte. On an 80-column terminal: wrapped,
    every word of every long line on screen (rich used to crop them)."""
    import io

    from rich.console import Console

    from gpulab.lab.workspace import Workspace

    ref = reference_source("flash_attention")
    long_lines = [line for line in ref.splitlines() if len(line) > 80]
    assert long_lines, "the test needs a reference with lines wider than 80 columns"
    Workspace.open(tmp_path / "workspace").record_result(
        "flash_attention",
        CheckResult.from_json({"passed": True, "status": "passed", "summary": "ok"}),
    )
    r = run_gpulab("solution", "flash_attention", env=None)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ref

    from gpulab.cli.commands.course import print_source

    out = io.StringIO()
    print_source(ref, Console(file=out, width=80, force_terminal=True, color_system=None))
    shown = out.getvalue()
    assert max(len(line) for line in shown.splitlines()) <= 80
    words = shown.split()
    for line in long_lines:
        tail = line.split()[-1]
        assert tail in words, f"{tail!r} of a long line is missing"


def test_a_mistyped_exercise_gets_a_did_you_mean(course):
    from gpulab.cli.commands.common import UsageError, find_lesson

    with pytest.raises(
        UsageError, match=r"unknown exercise 'softmx'\. Did you mean softmax( or softmax_row)?\?"
    ):
        find_lesson(course, "softmx")
    with pytest.raises(UsageError) as nothing_close:
        find_lesson(course, "xyzzy")
    assert "Did you mean" not in str(nothing_close.value)


def test_the_default_gpus_reason_reads_inside_parentheses():
    """It is shown as "H100 SXM (REASON)": "(the default (no GPU here))" read oddly."""
    from gpulab.gpu.roofline import choose_gpu

    for setting in (None, "no such gpu"):
        _gpu, why = choose_gpu(setting=setting, detect=False)
        assert why.startswith("the default") and "(" not in why and ")" not in why
