"""The "Explain" section of a result, for people (CLI and the TUI's Results pane)."""

from __future__ import annotations

from typing import Any


def explain_renderable(result: dict[str, Any]) -> Any | None:
    """None when the result carries no diagnosis."""
    if "diagnosis" not in result:
        return None
    from rich.console import Group
    from rich.text import Text

    ex = result.get("explain") or {}
    parts: list[Any] = [Text("Explain: what limits this kernel", style="bold")]
    found = result.get("diagnosis") or []
    for i, d in enumerate(found, 1):
        line = Text(f"{i}. ")
        line.append(str(d.get("kind", "")), style="bold yellow")
        line.append(f"  {d.get('evidence', '')}")
        parts.append(line)
        parts.append(Text(f"   → {d.get('advice', '')}", style="cyan"))
    if not found and not ex.get("error"):
        parts.append(
            Text(
                "Nothing stands out: no spills, tensor cores where they belong, "
                "enough programs and warps for this GPU.",
                style="green",
            )
        )
    if ex.get("error"):
        parts.append(Text(f"could not explain: {ex['error']}", style="yellow"))
    if ex.get("not_compiled"):
        parts.append(
            Text(
                f"{ex['not_compiled']} more kernel variant(s) not compiled within the "
                "time budget; the next --explain reads them from the cache",
                style="dim",
            )
        )
    for b in ex.get("basis") or []:
        parts.append(Text(f"· {b}", style="dim"))
    if ex.get("advisory"):
        parts.append(Text(f"· {ex['advisory']}", style="dim"))
    return Group(*parts)


__all__ = ["explain_renderable"]
