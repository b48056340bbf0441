"""The serving calculator's step table, for the CLI (`gpulab serving`) and
the Serving pane alike: one builder, so the two cannot drift (they did,
when each had its own). Rich only, no Textual."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpulab.gpu import units

if TYPE_CHECKING:
    from gpulab.gpu.serving import Serving

BOUND_STYLE = {"memory": "cyan", "compute": "magenta"}


STEP_COLUMNS = ("batch×tokens", "FLOP", "bytes", "FLOP/B", "bound", "time", "tokens/s")


def step_cells(d: Serving) -> dict[str, list[Any]]:
    """Each step's row of figures, in STEP_COLUMNS order."""
    cells = {}
    for kind, shape, s in (
        ("prefill", f"{d['batch']}×{d['prompt']}", d["prefill"]),
        ("decode", f"{d['batch']}×1 @{d['context']}", d["decode"]),
    ):
        cells[kind] = [
            shape,
            units.si(s["flops"], ""),
            units.si(s["bytes"], "B"),
            units.intensity(s["intensity"]),
            Text(s["bound"], style=BOUND_STYLE.get(s["bound"], "")),
            units.duration(s["seconds"]),
            units.tokens(s["tokens_per_s"]),
        ]
    return cells


def steps_table(d: Serving, width: int) -> Table:
    """A step a row where that fits `width` (76 columns do); else a step a
    column, which fits 40: at 60 columns the row table cut every figure."""
    cells = step_cells(d)
    wide = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold")
    for col in ("step", *STEP_COLUMNS):
        wide.add_column(col, justify="left" if col in ("step", "bound") else "right", no_wrap=True)
    for kind, row in cells.items():
        wide.add_row(kind, *row)
    if Console(width=1000).measure(wide).maximum <= width:
        return wide
    tall = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), header_style="bold")
    tall.add_column("")
    for kind in cells:
        tall.add_column(kind, justify="right", no_wrap=True)
    for i, name in enumerate(STEP_COLUMNS):
        tall.add_row(name, *(row[i] for row in cells.values()))
    return tall
