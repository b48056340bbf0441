"""Text that came from learner code, made safe to show.

A submission's output, its exception text and whatever a grader quotes from
it reach a terminal (the CLI, the TUI), a browser (`gpulab serve`) and JSON
readers (`gpulab check --json | jq -r`). Raw control characters there are
commands, not text: `ESC [2K` erases the FAIL line, `ESC [32m PASS` draws a
green PASS over it, OSC 52 writes the clipboard, OSC 0 the window title, and
bidirectional overrides reorder what a reader sees. So every control character
is shown as a visible glyph, the way `cat -v` and less do, keeping only
newlines and tabs. A check's result is made visible once, where the lab reads
it (gpulab.lab.runner, from the judge's frames; Workspace.last_result, from a
results file), and is shown and serialised as it is from then on; other
learner text (the state's attempts, a trace) where it is shown.

Imports nothing: the CLI, the TUI and the JSON paths all use it.
"""

from __future__ import annotations

from typing import Any

# C0 controls (and DEL) as their Unicode "control pictures": ESC shows as ␛,
# so `ESC [31m` reads as `␛[31m` and is still recognisable as colour codes.
_TABLE: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_TABLE[0x7F] = "\u2421"  # ␡
# C1 controls have no pictures; 0x9B alone is a CSI on many terminals.
_TABLE.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
# Bidirectional controls (Trojan Source) and the Unicode line separators.
_TABLE.update(
    {
        c: f"\\u{c:04x}"
        for c in (
            0x061C,
            0x200E,
            0x200F,
            0x2028,
            0x2029,
            *range(0x202A, 0x202F),
            *range(0x2066, 0x206A),
        )
    }
)
# Lone surrogates: JSON's "\ud800" escape makes one in a Python string (an
# exception's text comes from the sandbox as JSON), and no terminal or file
# can encode it: the CLI died printing a result with one in it
# (UnicodeEncodeError), after the result was recorded.
_TABLE.update({c: f"\\u{c:04x}" for c in range(0xD800, 0xE000)})


def visible(text: Any) -> str:
    """`text` (or its str()) with every control character but newline and tab made visible.

    Windows line ends become plain newlines first, so CRLF output reads as lines.
    """
    s = text if isinstance(text, str) else str(text)
    return s.replace("\r\n", "\n").translate(_TABLE)


def visible_tree(value: Any) -> Any:
    """A copy of a JSON-like value with every string (and key) made visible.

    Used on whole check results: learner text can sit anywhere in them (output,
    summary, message, a case's name or detail, a profile's range names).
    """
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, dict):
        return {visible(k) if isinstance(k, str) else k: visible_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [visible_tree(v) for v in value]
    return value
