"""A reader that stops early (`gpulab list --json | head -1`) gets what it
read, and gpulab says nothing about the pipe: it printed a BrokenPipeError
traceback (issue 48's review)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import gpulab_env


def test_a_pipe_closed_early_leaves_no_traceback(tmp_path):
    # `true` reads nothing and is gone before gpulab writes: every write of
    # gpulab's meets a closed pipe.
    code = (
        f"{sys.executable} -m gpulab list --json | true; {sys.executable} -m gpulab glossary | true"
    )
    r = subprocess.run(
        ["bash", "-c", code],
        env=gpulab_env(tmp_path / "ws"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in r.stderr and "BrokenPipe" not in r.stderr, r.stderr[-2000:]
