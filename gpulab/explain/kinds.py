"""The stable kinds of a diagnosis, and the lesson section each points back to.

A kind's name is an API (in `--json`, in tests, in docs/diagnosis.md): add
kinds, never rename one. An exercise whose own lesson teaches a kind better
says so in its manifest entry (explain_sections), read here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.explain.facts import Where

if TYPE_CHECKING:
    from gpulab.course.content import Course, Lesson


def explained(content_root: str = "") -> frozenset[str]:
    """The exercises whose checks are explained: the timed Triton kernels, as
    the manifest declares them (`tools = ["explain", ...]`)."""
    from gpulab.course.content import ContentError, load_course

    try:
        course = load_course(Path(content_root) if content_root else None)
    except ContentError:
        return frozenset()
    return frozenset(course.covered_by("explain"))


def explain_unavailable(lesson: Any) -> str:
    """Why `--explain` (the lab's X) adds nothing to this exercise's check,
    or "" where it explains. Said to the learner instead of nothing."""
    if "explain" in getattr(lesson, "tools", ()):
        return ""
    if getattr(lesson, "folder", None) is not None:  # gpulab.course.exercise_folder
        return f"--explain is off for {lesson.exercise}: its exercise.toml says `tools = []`."
    root = getattr(lesson, "root", None)
    kernels = ", ".join(sorted(explained(str(root) if root else "")))
    what = (
        "a step, graded on correctness only"
        if lesson.is_step
        else "not a Triton kernel whose speed is graded"
    )
    return (
        f"--explain says why a timed Triton kernel runs at the speed it does ({kernels}); "
        f"{lesson.exercise} is {what}, so there is nothing for it to explain."
    )


@dataclass(frozen=True)
class Kind:
    name: str
    title: str  # what it means, for people


# Which lesson teaches each kind is the course's to say (the manifest's
# explain_sections), not gpulab's code.
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("no_tensor_cores", "the matrix products run on the FP32 lanes, not the tensor cores"),
        Kind("too_few_programs", "fewer programs than SMs: part of the GPU sits idle"),
        Kind("register_spills", "registers spill to local memory (slow, through L1/L2)"),
        Kind("extra_bytes", "the kernel moves more bytes than the exercise needs"),
        Kind(
            "serialised_reduction",
            "a reduction done one step at a time (one program, or atomics on one address)",
        ),
        Kind("low_occupancy", "too few warps resident per SM to hide memory latency"),
        Kind("tail_wave", "the last wave of programs leaves SMs idle"),
        Kind("launch_bound", "the work is so small that launching kernels costs as much"),
        Kind("wrong_roof", "the kernel hits a lower roof than the one it is graded against"),
    )
}

# A rule's finer cause that an exercise's manifest may point at on its own
# (explain_sections), and the kind its findings are of: a tl.dot loop that
# reuses too little of what it loads is a wrong_roof finding.
CAUSES = {"tile_reuse": "wrong_roof"}

# Where an exercise's findings point: {kind or cause: (lesson id, heading)}.
Sections = Mapping[str, tuple[str, str]]


def declared(exercise: str, content_root: str = "") -> tuple[Lesson | None, Course | None]:
    """The manifest's entry of `exercise` (None where the course has none),
    and the course (None where it cannot be read)."""
    from gpulab.course.content import ContentError, load_course

    try:
        course = load_course(Path(content_root) if content_root else None)
    except ContentError:
        return None, None
    found = course.find(exercise)
    return (found if found is not None and found.exercise == exercise else None), course


def sections_of(lesson: Lesson | None, course: Course | None = None) -> dict[str, tuple[str, str]]:
    """Where the manifest points --explain's findings on this exercise, by
    kind or cause: the course's explain_sections, then the exercise's own
    (headings of its own lesson), which win."""
    out = {
        kind: (lid, heading) for kind, lid, heading in (course.explain_sections if course else ())
    }
    if lesson is not None:
        out.update({key: (lesson.id, heading) for key, heading in lesson.explain_sections})
    return out


def where(kind: str, sections: Sections | None = None, cause: str = "") -> Where:
    """{"lesson", "section"} that teaches `kind` best: the exercise's own
    section for the cause or the kind, else the course's for the kind
    (`sections`: sections_of); empty where the course points it nowhere."""
    assert kind in KINDS, kind
    mine = sections or {}
    lesson, section = mine.get(cause) or mine.get(kind) or ("", "")
    return {"lesson": lesson, "section": section}


__all__ = [
    "CAUSES",
    "KINDS",
    "Kind",
    "Sections",
    "declared",
    "explain_unavailable",
    "explained",
    "sections_of",
    "where",
]
