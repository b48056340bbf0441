"""The open lab keeping up with what changes outside it.

Two things change under a running lab:

- Progress. `gpulab check` or `gpulab watch` in another terminal records its
  result in the workspace (`.gpulab/state.json`, `.gpulab/results/`); the
  lab's sidebar and Results pane stayed at "No attempts yet" until it
  checked itself. The progress files are stamped once a second (a stat,
  nothing read) and a change that is not the lab's own is shown.
- gpulab itself. `pip install -e ".[test]"` over a `pip install .` removes
  the package folder the lab imported from, and the lab died at its next
  lazy import (`ModuleNotFoundError: gpulab.lab.report`). The package is
  stamped too: once it changed, the lab says so and offers a restart, and
  an ImportError from then on is that change, shown as such, not a crash
  (gpulab.tui.app).

No UI here beyond the stamps' bookkeeping: the app owns the timer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import gpulab

Stamp = tuple[int, int, int] | None  # inode, mtime_ns, size; None: missing

POLL_S = 1.0  # progress written by any gpulab process shows within about this


def _stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def package_files() -> tuple[Path, ...]:
    """What a reinstall or an update of gpulab replaces: the package's
    `__init__.py` (a reinstall writes a new one, or removes it) and its
    folder (files added, removed or renamed in over old ones)."""
    init = Path(gpulab.__file__ or "")
    return (init, init.parent)


@dataclass
class KeepUp:
    """Stamps of the workspace's progress and of gpulab's package."""

    state_files: tuple[Path, ...]
    package: tuple[Path, ...] = field(default_factory=package_files)
    _progress: tuple[Stamp, ...] = ()
    _package: tuple[Stamp, ...] = ()
    package_changed: bool = False

    def __post_init__(self) -> None:
        self._progress = self._stamps(self.state_files)
        self._package = self._stamps(self.package)

    @staticmethod
    def _stamps(paths: tuple[Path, ...]) -> tuple[Stamp, ...]:
        return tuple(_stamp(p) for p in paths)

    def seen(self) -> None:
        """The progress as it is now is the lab's own (it just wrote it)."""
        self._progress = self._stamps(self.state_files)

    def progress_changed(self) -> bool:
        """The progress files changed since last seen (by another process)."""
        now = self._stamps(self.state_files)
        changed, self._progress = now != self._progress, now
        return changed

    def package_newly_changed(self) -> bool:
        """True once, the first time gpulab's package differs from the one
        this lab started with."""
        if self.package_changed:
            return False
        self.package_changed = self._stamps(self.package) != self._package
        return self.package_changed
