"""The test suite's own shape, which pytest does not check for us."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_one_conftest_only():
    # pytest imports a conftest.py outside a package as the module
    # "conftest", the last one collected replacing the one before; test
    # files that `from conftest import ...` then get the wrong one (CI
    # collected 17 files as errors when tests/gradebook had its own).
    found = sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob("conftest.py"))
    assert found == ["conftest.py"], (
        f"conftest files besides tests/conftest.py: {found}; put the fixtures "
        "in the test file that uses them, or in tests/conftest.py"
    )
