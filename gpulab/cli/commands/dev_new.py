"""`gpulab dev new-exercise NAME [--dir PATH]`: a new folder exercise to edit.

Writes PATH/NAME (gpulab.course.exercise_template: an elementwise GELU whose
reference passes and starter fails) and says how the course finds it: its
manifest's `exercise_folders` lists the folder, or the folder it is in
(docs/new-exercise.md). `gpulab dev check NAME` then proves it.
"""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import UsageError


def run(args: Any) -> int:
    name = args.name or ""
    if not name:
        raise UsageError("new-exercise needs a NAME: `gpulab dev new-exercise gelu`")
    if not name.isidentifier() or keyword.iskeyword(name):
        raise UsageError(
            f"the exercise's NAME must be a Python name (letters, digits, _), got {name!r}: "
            "it names the learner's function and file"
        )
    parent = Path(args.dir or ".").expanduser().resolve()
    folder = parent / name
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise UsageError(f"{folder} already exists: choose another NAME or --dir")
    from gpulab.course import exercise_template

    written = exercise_template.write(folder, name)
    # Plain print: paths and the line to paste are never wrapped.
    print(f"wrote {folder}: {', '.join(p.name for p in written)}")
    for line in next_steps(folder, name):
        print(line)
    return 0


def next_steps(folder: Path, name: str) -> list[str]:
    """What to do next: register the folder unless the course lists it
    already, then check it, then make it one's own."""
    from gpulab.course.content import ContentError, content_root, load_course

    root = content_root()
    manifest = root / "lessons" / "manifest.toml"
    try:
        course = load_course(root)
    except ContentError:
        course = None
    found = course.find(name) if course is not None else None
    lines, steps = [], []
    if found is not None and found.folder == folder:
        lines.append(f"the course ({manifest}) lists it already.")
    else:
        if found is not None:
            lines.append(f"warning: the course has an exercise '{name}' already ({found.id}).")
        steps.append(
            f"list it in your course's manifest ({manifest}), e.g.\n"
            f'     exercise_folders = ["{folder.parent}"]\n'
            "   (a folder of exercise folders lists each one in it; $GPULAB_CONTENT "
            "chooses the course)"
        )
    steps.append(f"gpulab dev check {name}   # proves it: the starter fails, the reference passes")
    steps.append("make it yours: each file says what to change (docs/new-exercise.md)")
    return lines + [f"{n}. {step}" for n, step in enumerate(steps, 1)]
