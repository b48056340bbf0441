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


# A module fixture that grades or compiles a batch in a child: without a
# group, pytest-xdist splits its module between workers and each worker
# builds the batch again (CI runs `-n auto`; pyproject's --dist loadgroup
# keeps a group on one worker). A fixture that reads `shared_check` needs
# none: its checks are kept on disk for every worker.
_BATCH_WORK = ("subprocess.run", "_once(", "grade_here", "run_check(", "judge(")


def _module_fixtures_that_build_a_batch(tree, source: str) -> list[str]:
    import ast

    found = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            scopes = [
                kw.value.value
                for kw in getattr(deco, "keywords", [])
                if kw.arg == "scope" and isinstance(kw.value, ast.Constant)
            ]
            body = ast.get_source_segment(source, node) or ""
            if (
                scopes
                and scopes[0] in ("module", "session")
                and any(w in body for w in _BATCH_WORK)
            ):
                found.append(node.name)
    return found


def test_a_module_whose_fixtures_build_a_batch_runs_on_one_worker():
    import ast

    ungrouped = []
    for path in sorted(TESTS.rglob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        fixtures = _module_fixtures_that_build_a_batch(ast.parse(source), source)
        if fixtures and "xdist_group(" not in source:
            ungrouped.append(f"{path.relative_to(TESTS)} ({', '.join(fixtures)})")
    assert not ungrouped, (
        "module fixtures that build a batch, in a module without "
        "`pytestmark = pytest.mark.xdist_group(NAME)`: " + "; ".join(ungrouped)
    )
