"""Count each lesson's words: its core path, its deep dives, in prose and code.

    python scripts/tools/lesson_words.py [LESSONS_DIR] [--markdown]

LESSONS_DIR defaults to this checkout's lessons/. The core path is the text
outside the deep-dive sections (gpulab.course.sections); "prose" leaves out
code blocks, fenced or indented, and tables' separator rows. A lesson written
before deep dives existed is all core. Issue 47 asks for the core path of each
lesson before and after: run this on both trees.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpulab.course.sections import split_sections  # noqa: E402


def prose(text: str) -> str:
    """The text without code blocks (fenced or indented) and table rules."""
    out, fence = [], False
    for line in text.splitlines():
        if re.match(r" {0,3}(```|~~~)", line):
            fence = not fence
            continue
        if fence or line.startswith("    ") or re.fullmatch(r"\|[-:| ]+\|", line.strip()):
            continue
        out.append(line)
    return "\n".join(out)


def words(text: str) -> int:
    return len(text.split())


def count(path: Path) -> dict[str, int]:
    sections = split_sections(path.read_text(encoding="utf-8"))
    core = "".join(s.text for s in sections if not s.deep)
    deep = "".join(s.text for s in sections if s.deep)
    return {
        "core": words(core),
        "core_prose": words(prose(core)),
        "deep": words(deep),
        "dives": sum(s.deep for s in sections),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lessons", nargs="?", default=str(REPO / "lessons"))
    args = ap.parse_args()
    rows = {p.parent.name: count(p) for p in sorted(Path(args.lessons).glob("*/lesson.md"))}
    print("| lesson | core words | core prose | deep-dive words | deep dives |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name[:2]} | {r['core']} | {r['core_prose']} | {r['deep']} | {r['dives']} |")
    total = {k: sum(r[k] for r in rows.values()) for k in ("core", "core_prose", "deep", "dives")}
    print(f"| all | {total['core']} | {total['core_prose']} | {total['deep']} | {total['dives']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
