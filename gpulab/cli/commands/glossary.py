"""`gpulab glossary [TERM]`: every term, or the best match for one.

Exit codes: 0 found (or listed), 1 no term matches, 2 the glossary is unusable.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded
from gpulab.course.glossary import Glossary, GlossaryError, default_glossary, term_renderable


@guarded
def run(args: Any) -> int:
    try:
        gloss = default_glossary()
    except GlossaryError as exc:
        raise UsageError(str(exc)) from None
    for err in gloss.errors:
        print(f"warning: {err}", file=sys.stderr)
    query = " ".join(args.term).strip()
    if not query:
        if args.json:
            print(json.dumps([t.as_dict() for t in gloss.search("")], indent=2, ensure_ascii=False))
        else:
            console().print(listing(gloss))
        return 0
    term, suggestions = gloss.lookup(query)
    if term is None:
        if args.json:
            print(
                json.dumps(
                    {"query": query, "found": None, "suggestions": suggestions}, ensure_ascii=False
                )
            )
        else:
            hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
            print(
                f"No glossary entry for {query!r}.{hint} `gpulab glossary` lists them all.",
                file=sys.stderr,
            )
        return 1
    if args.json:
        print(json.dumps(term.as_dict(), indent=2, ensure_ascii=False))
    else:
        console().print(term_renderable(term))
    return 0


def listing(gloss: Glossary) -> Any:
    from rich import box
    from rich.table import Table

    t = Table(
        title=f"Glossary ({len(gloss.terms)} terms; `gpulab glossary TERM` for one)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    width = max((len(term.name) for term in gloss.terms), default=10)
    t.add_column("term", no_wrap=True, style="bold", min_width=width)
    t.add_column("meaning", overflow="ellipsis", no_wrap=True)
    for term in gloss.search(""):
        t.add_row(term.name, term.definition.split(". ")[0].rstrip("."))
    return t
