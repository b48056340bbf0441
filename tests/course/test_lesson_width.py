"""Code blocks in the lessons fit the lesson pane of an 80x24 terminal.

Textual's Markdown does not wrap code blocks: a line wider than the pane is
cut off at its edge. Both kinds of block count, ```-fenced and indented (the
lessons' formulas): both render as the same PlainFence (gpulab/tui/markdown.py).
The hints in lessons/manifest.toml are checked the same way: the third one is
mostly code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from rich.cells import cell_len

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # as gpulab/fsutil.py

REPO = Path(__file__).resolve().parents[2]
LESSON_FILES = sorted((REPO / "lessons").glob("*/lesson.md"))
MANIFEST = REPO / "lessons" / "manifest.toml"

# Columns of a code line that show whole in the lesson pane at 80x24. Below
# 118 columns (NARROW) the sidebar steps aside for the Lesson tab (app.py, _fit_sidebar),
# so: 80 - 2 LessonPane padding (0 1) - 2 scrollbar - 4 Markdown padding (0 2)
# = 72 for the block, less the block's own left padding of 2 = 70.
# Measured with tmux capture-pane too. With the sidebar shown (b) it is 44;
# from 118 columns the 38-column sidebar stays, leaving width - 48 (70 at 118).
# test_code_width_is_the_lesson_panes keeps the number in step with the CSS.
CODE_WIDTH = 70

# Columns of a hint's code line that show whole at 80x24. The revealed hints are
# a second LabMarkdown (#hints) in the same LessonPane, below the lesson text
# (gpulab/tui/lesson_pane.py); its CSS (app.tcss, #hints) adds only a margin and
# a border on top, nothing at the sides, and hints_markdown puts each hint at the
# top level of that Markdown, after its bold title: so a hint's fence gets
# CODE_WIDTH too. Measured with tmux capture-pane: lesson 04, h three times, cut
# its third hint's 76-column tl.store line after 70 (before the hints were
# rewrapped). test_hint_code_width_is_the_lesson_panes keeps the number in step
# with the app.
HINT_CODE_WIDTH = CODE_WIDTH


# What a block nested in a list or quote loses to its left: a bullet ("• "), a
# right-aligned number (" 1. ", from Textual's MarkdownOrderedList), or a
# quote's border and padding (MarkdownBlockQuote: border-left, padding 0 1).
BULLET_INDENT = 2
QUOTE_INDENT = 3


def _indents(tokens) -> list[int]:
    """For each token, the columns its enclosing lists and quotes take."""
    out, stack = [], []
    for i, tok in enumerate(tokens):
        if tok.type == "bullet_list_open":
            stack.append(BULLET_INDENT)
        elif tok.type == "ordered_list_open":
            items = sum(
                1
                for t in tokens[i + 1 :]
                if t.type == "list_item_open" and t.level == tok.level + 1 and t.map[0] < tok.map[1]
            )
            last = int(tok.attrGet("start") or 1) + max(items, 1) - 1
            stack.append(len(f"{last}. ") + 1)
        elif tok.type == "blockquote_open":
            stack.append(QUOTE_INDENT)
        elif tok.type in ("bullet_list_close", "ordered_list_close", "blockquote_close"):
            stack.pop()
        out.append(sum(stack))
    return out


def wide_code_lines(text: str, width: int) -> list[tuple[int, int, int, str]]:
    """(0-based line in text, columns, columns that fit, line) for each code line cut off."""
    tokens = MarkdownIt("gfm-like").parse(text)  # as Textual does
    found = []
    for tok, indent in zip(tokens, _indents(tokens), strict=True):
        if tok.type not in ("fence", "code_block") or tok.map is None:
            continue
        first = tok.map[0] + (tok.type == "fence")  # 0-based line of the first code line
        fits = width - indent
        for i, line in enumerate(tok.content.rstrip("\n").split("\n")):
            cells = cell_len(line.expandtabs(8))
            if cells > fits:
                found.append((first + i, cells, fits, line))
    return found


def too_wide(path: Path, width: int = CODE_WIDTH) -> list[str]:
    """'file:line: N columns (M fit): text' for each code line that is cut off."""
    name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return [
        f"{name}:{i + 1}: {cells} columns ({fits} fit): {line}"
        for i, cells, fits, line in wide_code_lines(path.read_text(encoding="utf-8"), width)
    ]


def hints_too_wide(path: Path = MANIFEST, width: int = HINT_CODE_WIDTH) -> list[str]:
    """'lesson hint H, line L: N columns (M fit): text' for each hint code line cut off.

    L is the line within the hint's text (the manifest's own line numbers drift
    with each backslash-continued prose line before it).
    """
    manifest = tomllib.loads(path.read_text(encoding="utf-8"))
    found = []
    for lesson in manifest.get("lesson", []):
        for h, hint in enumerate(lesson.get("hints", []), 1):
            for i, cells, fits, line in wide_code_lines(hint, width):
                found.append(
                    f"{lesson.get('id')} hint {h}, line {i + 1}: "
                    f"{cells} columns ({fits} fit): {line}"
                )
    return found


def test_every_lesson_is_checked():
    assert len(LESSON_FILES) >= 9


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.parent.name)
def test_code_lines_fit_the_lesson_pane(path):
    wide = too_wide(path)
    assert not wide, (
        f"{len(wide)} code line(s) wider than {CODE_WIDTH} columns, "
        "cut off in the lesson pane at 80x24:\n" + "\n".join(wide)
    )


def test_hint_code_lines_fit_the_lesson_pane():
    assert tomllib.loads(MANIFEST.read_text(encoding="utf-8"))["lesson"], "no lessons"
    wide = hints_too_wide()
    assert not wide, (
        f"{len(wide)} hint code line(s) wider than {HINT_CODE_WIDTH} columns, "
        "cut off in the lesson pane at 80x24:\n" + "\n".join(wide)
    )


def test_hints_too_wide_names_lesson_hint_and_line(tmp_path):
    toml = tmp_path / "manifest.toml"
    wide, fit = "x" * (HINT_CODE_WIDTH + 1), "y" * HINT_CODE_WIDTH
    toml.write_text(
        f'''[[lesson]]
id = "01_a"
hints = ["`{wide}` is inline code, prose wraps", """Prose.

```python
{fit}
{wide}
```""", """- a list

  ```
  {fit}
  ```
"""]

[[lesson]]
id = "02_b"
hints = ["    {wide}"]
''',
        encoding="utf-8",
    )
    assert hints_too_wide(toml) == [
        f"01_a hint 2, line 5: {HINT_CODE_WIDTH + 1} columns ({HINT_CODE_WIDTH} fit): {wide}",
        f"01_a hint 3, line 4: {HINT_CODE_WIDTH} columns ({HINT_CODE_WIDTH - 2} fit): {fit}",
        f"02_b hint 1, line 1: {HINT_CODE_WIDTH + 1} columns ({HINT_CODE_WIDTH} fit): {wide}",
    ]


def test_too_wide_names_file_and_line(tmp_path):
    md = tmp_path / "lesson.md"
    wide, fit = "x" * (CODE_WIDTH + 1), "y" * CODE_WIDTH
    md.write_text(
        f"# T\n\n```python\nok\n{wide}\n```\n\n    {fit}\n    Σₖ{fit[1:]}\n\n"
        f"- item\n\n  ```\n  {fit[2:]}\n  {fit[1:]}\n  ```\n",
        encoding="utf-8",
    )
    assert too_wide(md) == [
        f"{md}:5: {CODE_WIDTH + 1} columns ({CODE_WIDTH} fit): {wide}",
        f"{md}:9: {CODE_WIDTH + 1} columns ({CODE_WIDTH} fit): Σₖ{fit[1:]}",
        f"{md}:15: {CODE_WIDTH - 1} columns ({CODE_WIDTH - 2} fit): {fit[1:]}",
    ]


def shown_width(fence) -> int:
    """Columns of code a PlainFence shows: its right edge less the code's start."""
    label = fence.children[0]
    return fence.region.right - label.region.x - label.styles.padding.left


async def settled_fence_width(app, pilot, scope) -> int | None:
    """The shown width of the first code block under `scope`, once the lesson
    pane has its scrollbar (it comes late) and five polls agree."""
    from gpulab.tui.markdown import PlainFence

    widths: list[int] = []
    for _ in range(200):
        await pilot.pause(0.05)
        fences = scope.query(PlainFence)
        if (
            fences
            and fences.first().children
            and app.query_one("#lesson-pane").show_vertical_scrollbar
        ):
            widths.append(shown_width(fences.first()))
            if len(widths) >= 5 and len(set(widths[-5:])) == 1:
                break
    return widths[-1] if widths else None


@pytest.mark.anyio
async def test_code_width_is_the_lesson_panes(tmp_path):
    """CODE_WIDTH is what a code block shows in the app at 80x24."""
    pytest.importorskip("textual")
    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.tui.app import build_app

    app = build_app(tmp_path / "ws", device="cpu", welcome=False, gpu_info=GpuInfo())
    async with app.run_test(size=(80, 24)) as pilot:
        app.open_lesson(app.course.find("matmul"))  # long: the pane has its scrollbar
        assert await settled_fence_width(app, pilot, app) == CODE_WIDTH
        assert not app.query_one("#sidebar").display, "the sidebar steps aside"


@pytest.mark.anyio
async def test_hint_code_width_is_the_lesson_panes(tmp_path):
    """HINT_CODE_WIDTH is what a revealed hint's code block shows at 80x24."""
    pytest.importorskip("textual")
    from gpulab.gpu.devinfo import GpuInfo
    from gpulab.tui.app import build_app

    app = build_app(tmp_path / "ws", device="cpu", welcome=False, gpu_info=GpuInfo())
    async with app.run_test(size=(80, 24)) as pilot:
        lesson = app.course.find("flash_attention")
        for _ in range(len(lesson.hints)):
            app.workspace.reveal_hint(lesson)
        app.open_lesson(lesson)  # long: the pane has its scrollbar
        assert await settled_fence_width(app, pilot, app.query_one("#hints")) == HINT_CODE_WIDTH
        assert not app.query_one("#sidebar").display, "the sidebar steps aside"


@pytest.mark.anyio
async def test_nested_blocks_lose_what_too_wide_subtracts():
    """Lists and quotes take BULLET_INDENT, an ordered list's numbers, QUOTE_INDENT."""
    pytest.importorskip("textual")
    from textual.app import App

    from gpulab.tui.markdown import LabMarkdown, PlainFence

    text = (
        "```\ntop\n```\n\n"
        "- a\n\n  ```\n  b\n  ```\n\n"
        "1. a\n2. b\n\n   ```\n   c\n   ```\n\n"  # " 1. " and " 2. "
        "text\n\n"
        + "".join(f"{n}. x\n" for n in range(1, 11))  # "  9. " and " 10. "
        + "\n    ```\n    d\n    ```\n\n"
        "text\n\n> q\n>\n> ```\n> e\n> ```\n"
    )

    class Page(App):
        def compose(self):
            yield LabMarkdown(text)

    async with Page().run_test(size=(80, 40)) as pilot:
        for _ in range(200):
            await pilot.pause(0.05)
            fences = list(pilot.app.query(PlainFence))
            if len(fences) == 5 and all(f.children and f.region.width for f in fences):
                break
        tokens = MarkdownIt("gfm-like").parse(text)
        indents = [
            n for tok, n in zip(tokens, _indents(tokens), strict=True) if tok.type == "fence"
        ]
        assert [f.code.strip() for f in fences] == ["top", "b", "c", "d", "e"]
        top = shown_width(fences[0])
        assert [top - shown_width(f) for f in fences] == indents == [0, 2, 4, 5, 3]


@pytest.fixture
def anyio_backend():
    return "asyncio"


EMPTY_HEADER = re.compile(r"^\|(?:\s*\|)+\s*$")


@pytest.mark.parametrize("path", LESSON_FILES, ids=lambda p: p.parent.name)
def test_no_table_has_an_empty_header_row(path):
    """A `| | |` header draws as an empty row above the table (lesson 03 had one)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    empty = [
        f"{path.parent.name}/{path.name}:{i + 1}"
        for i, line in enumerate(lines[:-1])
        if EMPTY_HEADER.match(line) and re.match(r"^\|\s*:?-", lines[i + 1])
    ]
    assert not empty, f"tables with an empty header row: {empty}"


def test_starter_and_reference_lines_keep_the_projects_line_length():
    """The learner reads these files in the lab's editor: a 120-column
    docstring line (a starter had one) wraps into the next even at 120x40.
    The formatter leaves docstrings alone, so this holds them to its 100."""
    root = Path(__file__).resolve().parents[2]
    long = [
        f"{p.relative_to(root)}:{n}: {len(line)} columns"
        for folder in ("exercises", "kernels")
        for p in sorted((root / folder).glob("*.py"))  # the files the lab opens
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > 100
    ]
    assert not long, "\n".join(long)
