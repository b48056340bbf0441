"""Editing code at 80x24 (issue 30, item 8): Enter keeps the indent, Home/End
and Up/Down move by lines of code even where a long line wraps, ctrl+f finds
and ctrl+g goes to a line. On 1cddca9 (Textual's plain TextArea keys) Enter
started at column 0, End stopped at the wrap, and neither bar existed.

Each test types into a real pane and reads the file on disk, so an edit that
only looked right on screen fails.
"""

from __future__ import annotations

import pytest

pytest.importorskip("textual")

from test_tui import make_app, softmax_path, wait_for  # noqa: E402

from gpulab.tui.code_text import indent_after, strip_comment  # noqa: E402
from gpulab.tui.editor import ExercisePane  # noqa: E402
from gpulab.tui.find_bar import find_in  # noqa: E402

SIZE = (80, 24)
pytestmark = pytest.mark.anyio

LONG = "    total = " + " + ".join(f"value_{i:02d}" for i in range(10)) + "  # the tail"
CODE = f"def f(x):\n    if x:\n{LONG}\n        return total\n    y = 1\n"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def test_indent_after_a_line():
    assert indent_after("def f(x):", 4) == "    "
    assert indent_after("    if x:  # a comment: here", 4) == "        "
    assert indent_after("    y = g(a,", 4) == "        "
    assert indent_after("        return x", 4) == "    "
    assert indent_after("    return_value = 3", 4) == "    "
    assert indent_after("    s = '#:'", 4) == "    "
    assert indent_after("", 4) == ""
    assert strip_comment("x = '#' # c") == "x = '#' "


def test_find_wraps_round_and_follows_case():
    text = "Block b\nblock"
    assert find_in(text, "block", 0) == 0  # no capitals: any case
    assert find_in(text, "Block", 1) == 0  # capitals: exact, wrapping round
    assert find_in(text, "block", 1) == 8
    assert find_in(text, "block", 8, backwards=True) == 0
    assert find_in(text, "zzz", 0) == -1


async def open_editing(app, pilot, ws, text: str) -> ExercisePane:
    app.action_open_lesson("softmax")
    await pilot.pause()
    softmax_path(ws).write_text(text, encoding="utf-8")
    pane = app.query_one(ExercisePane)
    await pilot.press("2")
    await wait_for(pilot, lambda: pane.editor.text == text, 10, "the reload")
    await pilot.press("e")
    await wait_for(pilot, lambda: pane.editing, 10, "EDIT mode")
    return pane


async def saved(pilot, pane, ws) -> str:
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: not pane.dirty, 10, "the save")
    return softmax_path(ws).read_text(encoding="utf-8")


async def test_enter_indents_and_backspace_dedents(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_editing(app, pilot, ws, "def f(x):\n")
        pane.editor.move_cursor((0, 9))
        await pilot.press("enter", *"if x:", "enter", *"y = 1", "enter")
        await pilot.press("backspace", *"z = 2")
        text = await saved(pilot, pane, ws)
    assert text == "def f(x):\n    if x:\n        y = 1\n    z = 2\n"


async def test_home_end_up_down_move_by_code_lines_where_lines_wrap(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_editing(app, pilot, ws, CODE)
        ed = pane.editor
        assert len(LONG) > ed.size.width  # it wraps at 80 columns
        ed.move_cursor((2, 8))
        await pilot.press("end")
        assert ed.cursor_location == (2, len(LONG))  # the end of the code line
        await pilot.press("home")
        assert ed.cursor_location == (2, 4)  # its first non-blank
        await pilot.press("home")
        assert ed.cursor_location == (2, 0)
        ed.move_cursor((2, 9))
        await pilot.press("down")
        assert ed.cursor_location == (3, 9)  # the next code line, not the wrapped row
        await pilot.press("up", "up")
        assert ed.cursor_location == (1, 9)
        await pilot.press("down", "end", "left", "X")
        text = await saved(pilot, pane, ws)
    lines = text.splitlines()
    assert lines[2] == LONG[:-1] + "X" + LONG[-1]  # End, Left: the line's last column
    assert lines[3] == "        return total"


async def test_ctrl_g_goes_to_a_line_and_ctrl_f_finds(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_editing(app, pilot, ws, CODE)
        ed = pane.editor
        await pilot.press("ctrl+g")
        assert pane.find_bar.is_open and app.focused is pane.find_bar.input
        await pilot.press("9", "9", "enter")  # no such line: said, bar stays
        assert pane.find_bar.is_open
        await pilot.press("backspace", "backspace", "4", "enter")
        assert not pane.find_bar.is_open and app.focused is ed
        assert ed.cursor_location == (3, 8) and pane.editing  # still in EDIT mode
        await pilot.press("ctrl+f", *"total", "enter")
        assert ed.selected_text == "total" and ed.selection.start == (3, 15)  # from the cursor
        await pilot.press("enter")
        assert ed.selection.start == (2, 4)  # wrapped round to the top
        await pilot.press("up")
        assert ed.selection.start == (3, 15)  # the one before, wrapping back
        await pilot.press("escape")
        assert app.focused is ed and pane.editing
        await pilot.press("escape")
        assert not pane.editing
        # In VIEW mode too, and typing q in the bar is text, not quit.
        await pilot.press("ctrl+f", "q")
        assert app.is_running and pane.find_bar.input.value == "q"
        await pilot.press("escape")
        assert not pane.editing and not pane.find_bar.is_open
    assert softmax_path(ws).read_text(encoding="utf-8") == CODE  # finding changes nothing


async def test_leaving_the_find_bar_for_another_pane_ends_edit_mode(ws):
    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        pane = await open_editing(app, pilot, ws, CODE)
        pane.editor.move_cursor((4, 9))
        await pilot.press("Z", "ctrl+f")
        app.action_show_pane("lesson")
        await wait_for(pilot, lambda: not pane.editing, 10, "VIEW mode")
        await wait_for(pilot, lambda: not pane.dirty, 10, "the save")
        assert not pane.find_bar.is_open
    assert softmax_path(ws).read_text(encoding="utf-8") == CODE.replace("y = 1", "y = 1Z")


@pytest.mark.parametrize("burst", ["2ezq", "2e\tzq"], ids=["letters", "with-tab"])
async def test_keys_typed_in_one_burst_all_land_in_the_file(ws, burst):
    """Issue 30, item 5: 2, e and the first letters typed at once (all queued
    before the first is handled) went to the pane focused before 2: the
    letters were lost and q quit. Posted without waiting, as a terminal does."""
    from textual import events

    app = make_app(ws)
    async with app.run_test(size=SIZE) as pilot:
        app.action_open_lesson("softmax")
        await pilot.pause()
        pane = app.query_one(ExercisePane)
        for ch in burst:
            key = "tab" if ch == "\t" else ch
            app.post_message(events.Key(key, None if ch == "\t" else ch))
        await wait_for(pilot, lambda: pane.editing and not app.key_queue.pending, 30, "the keys")
        await wait_for(pilot, lambda: "zq" in pane.editor.text, 30, "the text")
        assert app.is_running
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: not pane.dirty, 10, "the save")
    text = softmax_path(ws).read_text(encoding="utf-8")
    assert text.startswith("    zq" if "\t" in burst else "zq"), text[:20]
