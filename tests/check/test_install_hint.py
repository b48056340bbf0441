"""A missing package gets one install command, from the CLI and the TUI alike,
and it follows pyproject: a default dependency means "reinstall gpulab"."""

from __future__ import annotations

import pytest

from gpulab.course.install_hint import install_hint, missing_message

AS_EXTRA = ["rich>=13", "jax>=0.4.30; extra == 'jax'", "jax>=0.4.30; extra == 'test'"]
AS_DEPENDENCY = ["rich>=13", "jax>=0.6", 'pytest>=8; extra == "test"']


def test_the_advice_follows_where_pyproject_lists_the_package():
    assert install_hint("jax", AS_EXTRA) == "`pip install 'gpulab[jax]'`"
    assert install_hint("jaxlib", AS_EXTRA) == "`pip install 'gpulab[jax]'`"  # comes with jax
    dep = install_hint("jax", AS_DEPENDENCY)
    assert "reinstall gpulab" in dep and "pip install ." in dep and "[jax]" not in dep
    # Only a test extra lists it: a learner is told the plain package, not gpulab[test].
    assert install_hint("pytest", AS_DEPENDENCY) == "`pip install pytest`"
    assert install_hint("nosuchmodule", AS_EXTRA) == "`pip install nosuchmodule`"


def test_a_source_checkout_is_told_to_install_gpulab(monkeypatch):
    import gpulab.course.install_hint as mod

    monkeypatch.setattr(mod, "gpulab_requirements", lambda: None)
    assert "`pip install .`" in install_hint("jax")


def test_the_cli_and_the_tui_say_the_same(monkeypatch, course):
    """`gpulab check sharded_mlp` and the TUI's c, with jax missing."""
    pytest.importorskip("textual")
    from gpulab.cli.commands.common import UsageError, find_lesson
    from gpulab.course.content import Lesson

    real = Lesson.missing_requirements
    monkeypatch.setattr(
        Lesson,
        "missing_requirements",
        lambda self: ["jax"] if self.exercise == "sharded_mlp" else real(self),
    )
    with pytest.raises(UsageError) as exc:
        find_lesson(course, "sharded_mlp")
    cli = str(exc.value)
    assert cli == missing_message("sharded_mlp", ["jax"])
    assert "`pip install" in cli or "reinstall gpulab" in cli

    import asyncio
    import sys
    from pathlib import Path

    # tests/tui's helpers, as its own files import them (pytest puts that
    # folder on the path only once it has collected a file there).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tui"))
    from test_tui import make_app

    from gpulab.lab.workspace import Workspace

    async def press_c(root) -> list[str]:
        app = make_app(Workspace.open(root))
        async with app.run_test(size=(80, 24)) as pilot:
            app.action_open_lesson("sharded_mlp")
            await pilot.pause()
            await pilot.press("c")
            await pilot.pause()
            assert not app.checking
            return app.notes  # type: ignore[attr-defined]

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        notes = asyncio.run(press_c(tmp))
    assert cli in notes, notes
