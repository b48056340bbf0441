"""Starting the lab in a terminal, and starting it again.

A lab quits with RESTART (ctrl+p, "Restart the lab") to be started again,
or ends because gpulab changed on disk under it (its package_changed_error,
set by GpulabApp._handle_exception): either way a new process, found as `python -m gpulab`
finds it, opens where the learner was, their edit saved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpulab.course.content import ContentError
from gpulab.lab.workspace import WorkspaceError

if TYPE_CHECKING:
    from textual.app import App

RESTART = 75  # the app's exit value that asks run_app to start gpulab again


def run(build: Callable[[], App[int]]) -> int:
    """Run the lab that `build()` makes; returns the exit code. A course,
    datasheet or workspace that cannot be read is said, with 2."""
    import sys

    from gpulab.gpu import hardware

    try:
        len(hardware.GPUS)  # the datasheet table, read and checked now: every pane uses it
        app = build()
    except (ContentError, hardware.HardwareDataError, WorkspaceError) as exc:
        print(f"gpulab: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"gpulab: cannot open the workspace: {exc}", file=sys.stderr)
        return 2
    code = app.run()
    changed = getattr(app, "package_changed_error", "")
    if code == RESTART or (changed and restart_wanted(changed)):
        # This process holds the old gpulab: a new one, found as `python -m
        # gpulab` finds it, opens where the learner was (their edit is saved).
        import os

        os.execv(sys.executable, [sys.executable, "-m", "gpulab", *sys.argv[1:]])
    return 1 if changed else int(code or 0)


def restart_wanted(error: str, ask: Any = input) -> bool:
    """After the lab ended because gpulab changed under it: say so, and ask
    (in a terminal) whether to start the new one."""
    import sys

    print(
        "gpulab changed on disk while the lab was open (a reinstall or an update), and "
        f"the lab could not load a part of it it had not loaded yet ({error}). Your work "
        "is saved.",
        file=sys.stderr,
    )
    if not sys.stdin.isatty():
        print("Start gpulab again to use the new version.", file=sys.stderr)
        return False
    try:
        answer = ask("Start the new gpulab now? [Y/n] ")
    except (EOFError, KeyboardInterrupt):
        return False
    return answer.strip().lower() in ("", "y", "yes")
