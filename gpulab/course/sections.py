"""A lesson's core path and its deep dives.

A lesson is written for a learner who knows Python and numpy but not GPUs:
the core path is what they need to pass its steps. Material for the curious
expert (where a benchmark figure comes from, clock states, Hopper-only
internals) sits in deep-dive sections, marked by a heading that starts with
"Deep dive:":

    ## Deep dive: why measured is below datasheet

A deep dive runs from its heading to the next heading of the same or a
higher level (fewer #), or to the end of the text; headings inside code
fences do not count. The Lesson pane shows each one folded, and
`gpulab lesson` prints a one-line note in its place unless asked to expand.

Pure text processing: no Markdown library, no UI (a core module).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEEP_MARK = "deep dive:"
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t#]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Section:
    """A run of the lesson: core text, or one deep dive (heading included)."""

    text: str
    title: str = ""  # a deep dive's title, after "Deep dive:"; "" for core text
    level: int = 0  # a deep dive's heading level (2 for ##)

    @property
    def deep(self) -> bool:
        return bool(self.level)

    @property
    def body(self) -> str:
        """A deep dive's text without its heading line (the fold shows the title)."""
        if not self.deep:
            return self.text
        return self.text.split("\n", 1)[1].lstrip("\n") if "\n" in self.text else ""


def _heading(line: str) -> tuple[int, str] | None:
    m = _HEADING.match(line)
    return (len(m.group(1)), m.group(2)) if m else None


def deep_title(title: str) -> str | None:
    """The deep dive's own title for a heading text, None for a core heading."""
    if title.lower().startswith(DEEP_MARK):
        return title[len(DEEP_MARK) :].strip()
    return None


def split_sections(text: str) -> list[Section]:
    """The text cut into core runs and deep dives, in order. Joined, they
    give back the text, less any blank run between two deep dives."""
    out: list[Section] = []
    lines = text.splitlines(keepends=True)
    start, title, level = 0, "", 0  # the run being built
    fence = ""

    def close(end: int) -> None:
        chunk = "".join(lines[start:end])
        if chunk.strip() or level:
            out.append(Section(chunk, title, level))

    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            if not fence:
                fence = mark
            elif mark[0] == fence[0] and len(mark) >= len(fence) and not line.strip()[len(mark) :]:
                fence = ""
            continue
        head = None if fence else _heading(line.rstrip("\n"))
        if head is None:
            continue
        depth, words = head
        deep = deep_title(words)
        if level and depth <= level:  # the deep dive ends here
            close(i)
            start, title, level = i, "", 0
        if deep is not None and not level:
            close(i)
            start, title, level = i, deep, depth
    close(len(lines))
    return out


def core_text(text: str) -> str:
    """The lesson without its deep dives."""
    return "".join(s.text for s in split_sections(text) if not s.deep)


def folded_text(text: str, note: str = "") -> str:
    """The lesson with each deep dive replaced by one quoted line naming it;
    `note` is appended to that line (how to unfold it)."""
    parts = []
    for s in split_sections(text):
        if s.deep:
            parts.append(f"> ▶ **Deep dive: {s.title}** (folded{note})\n\n")
        else:
            parts.append(s.text)
    return "".join(parts)


__all__ = ["DEEP_MARK", "Section", "core_text", "deep_title", "folded_text", "split_sections"]
