"""`import gpulab` and `gpulab --help` stay light. Importing in a subprocess
and inspecting sys.modules is the only way to prove a deferral defers."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests import layers
from tests.conftest import REPO

HEAVY = ("torch", "triton", "jax", "textual", "numpy")

# Every module but those tests/layers.py names heavy (the grader, the sandbox,
# the timing harness and the microbenchmark kernels run only in child
# processes and import torch/triton): the list comes from tests/layers.py, so
# a new module is checked the day it lands.
CORE = layers.light()


def _loaded(code: str) -> list[str]:
    probe = (
        code + f"\nimport sys, json; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", CORE)
def test_core_modules_import_nothing_heavy(module):
    assert _loaded(f"import {module}") == []


def test_help_loads_nothing_heavy():
    code = (
        "import sys\nfrom gpulab.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
    )
    assert _loaded(code) == []


def test_import_linter_contract_holds():
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed")
    r = subprocess.run([exe], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
