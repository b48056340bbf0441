"""gpulab.textsafe: control characters from learner code become visible text."""

from __future__ import annotations

from gpulab.textsafe import visible, visible_tree


def test_escapes_and_controls_are_made_visible_newlines_and_tabs_kept():
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("line\r\nnext") == "line\nnext"  # Windows line ends read as lines
    assert visible("\x1b[2K\x1b[32m PASS") == "␛[2K␛[32m PASS"
    assert visible("\x1b]52;c;aGk=\x07") == "␛]52;c;aGk=␇"  # OSC 52: the clipboard
    assert visible("50%\r100%") == "50%␍100%"
    assert visible("\x00\x7f") == "␀␡"
    assert visible("\x9b31m") == "\\x9b31m"  # a C1 CSI
    assert visible("abc\u202edef") == "abc\\u202edef"  # Trojan Source reordering
    assert visible("µs ≤ 3 — ✔ 🙂") == "µs ≤ 3 — ✔ 🙂"  # ordinary Unicode untouched
    assert visible(3) == "3"


def test_a_whole_result_keys_included():
    result = {
        "summary": "\x1b[1A",
        "cases": [{"name": "\x1b[2J", "max_abs": 1.5}],
        "\x1bkey": None,
        "passed": False,
    }
    assert visible_tree(result) == {
        "summary": "␛[1A",
        "cases": [{"name": "␛[2J", "max_abs": 1.5}],
        "␛key": None,
        "passed": False,
    }


def test_lone_surrogates_are_made_visible():
    assert visible("a\ud800b\udfff") == "a\\ud800b\\udfff"
    visible("x\udc80").encode("utf-8")  # a terminal can write it
