"""Markdown without language guessing.

Textual highlights a code block with no language by asking Pygments to guess
it, which loads every lexer and every plugin lexer: about a second on a
2-core machine for one lesson (measured with cProfile: guess_lexer 0.94 s of
a 1.8 s start). The lessons' indented blocks are formulas and numbers, so an
unnamed block is plain text here; a ```python fence is still highlighted.
"""

from __future__ import annotations

import mdurl
from textual.content import Content
from textual.widgets import Markdown
from textual.widgets._markdown import MarkdownFence

# Textual parses Markdown in a thread pool, and mdurl builds its percent-encoding
# tables lazily: it puts an empty table in its cache, then fills it. Two widgets
# parsing at once can read the empty table (IndexError in mdurl.encode, seen
# crashing the lab on a 2-core machine). Built here, on the importing thread,
# the tables are whole before any parse starts.
mdurl.encode("")
mdurl.decode("", mdurl.DECODE_DEFAULT_CHARS + "%")


class PlainFence(MarkdownFence):
    @classmethod
    def highlight(cls, code: str, language: str, ansi: bool = False, dark: bool = False) -> Content:
        return super().highlight(code, language or "text", ansi=ansi, dark=dark)


class LabMarkdown(Markdown):
    BLOCKS = {**Markdown.BLOCKS, "fence": PlainFence, "code_block": PlainFence}
