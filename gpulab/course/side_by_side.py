"""Two source files in two columns: the learner's beside the reference
(`gpulab compare`, the lab's "solution: beside yours")."""

from __future__ import annotations

from typing import Any


def side_by_side(mine: str, reference: str, width: int = 80) -> Any:
    """A rich Table, yours on the left. Each line wraps within its half
    (Syntax with word_wrap); line numbers only where there is room for them."""
    from rich.syntax import Syntax
    from rich.table import Table

    t = Table(expand=True, show_lines=False, padding=(0, 1), pad_edge=False)
    t.add_column("yours", ratio=1, overflow="fold")
    t.add_column("the reference", ratio=1, overflow="fold")
    numbers = width >= 120
    t.add_row(
        Syntax(mine, "python", line_numbers=numbers, word_wrap=True),
        Syntax(reference, "python", line_numbers=numbers, word_wrap=True),
    )
    return t
