"""What the judge offers its plug-ins: `--explain`'s judge side
(gpulab.explain.judge) describes an exercise's timing cases, and those are
the grader's. The judge's main passes this module to the plug-in's hooks
(`start`, `attach`), so the plug-in needs no import of the judge: the judge
imports the plug-in, never the other way round. It satisfies
gpulab.explain.judge.cases.Graders (mypy checks it where main passes it).

Light to import: the loader and torch's dtypes are imported when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    import torch

    from gpulab.judge.interface import TimedGrader


def timed_grader(exercise: str) -> TimedGrader:
    """A kernel exercise's grader (the manifest's `tools = ["explain"]`),
    through the judge's one loader."""
    from gpulab.judge.loader import load

    return cast("TimedGrader", load(exercise))


def grader_source(exercise: str) -> bytes:
    """The bytes of the exercise's grader (what its cases depend on): its
    module, or a folder exercise's spec.py."""
    from gpulab.judge.loader import FOLDER, folder_of

    folder = folder_of(exercise)
    return (folder / "spec.py" if folder else FOLDER / f"{exercise}.py").read_bytes()


def dtype_name(dtype: torch.dtype) -> str:
    """The judge's name of a dtype ("fp16", ...)."""
    from gpulab.judge.compare import dtype_name as name

    return name(dtype)


__all__ = ["dtype_name", "grader_source", "timed_grader"]
