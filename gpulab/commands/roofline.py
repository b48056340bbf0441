"""`gpulab roofline [--gpu NAME] [--dtype DTYPE] [--measured] [--export PATH]`."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from gpulab import roofline
from gpulab.commands.common import UsageError, console, guarded, open_workspace


@guarded
def run(args: Any) -> int:
    ws = open_workspace(args)
    setting = ws.get_setting("gpu")
    try:
        gpu, why = roofline.choose_gpu(args.gpu, setting)
    except roofline.UnknownGPU as exc:
        raise UsageError(str(exc)) from None
    if args.remember:
        if not args.gpu:
            raise UsageError("--remember needs --gpu NAME")
        ws.set_setting("gpu", gpu.key)
    dtype = args.dtype.lower() if args.dtype else None
    try:
        model = roofline.build_model(gpu, dtype, ws.root, measured=args.measured)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps({**model.as_dict(), "chosen_because": why}, indent=2, default=str))
        return 0
    if args.export:
        path = Path(args.export).expanduser()
        try:
            from gpulab.roofline_svg import PlotUnavailable

            roofline.export(model, path)
        except PlotUnavailable as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None
        print(f"wrote {path}")
        return 0
    cols, lines = shutil.get_terminal_size((80, 24))
    width = args.width or cols
    height = args.height or max(16, min(lines - 2, 32))
    color = sys.stdout.isatty()
    text = roofline.render_text(model, width, height, color=color)
    if color:
        from rich.text import Text

        console().print(Text.from_ansi(text), soft_wrap=True)
    else:
        print(text)
    con = console()
    for part in summary(model, why):
        con.print(part)
    return 0


def summary(model: roofline.Model, why: str) -> list[Any]:
    """The numbers behind the plot, then the learner's points as a table."""
    from rich.table import Table
    from rich.text import Text

    g, roof = model.gpu, model.roof()
    out: list[Any] = [Text(
        f"{g.name} ({why}): datasheet {model.dtype} {roof.flops / 1e12:,.0f} TFLOP/s, "
        f"{model.bandwidth / 1e12:g} TB/s → ridge {model.ridge:.0f} FLOP/byte")]
    if model.measured_label:
        mroof = model.roof(measured=True)
        line = f"measured ({model.measured_label}): {model.measured_bandwidth / 1e12:g} TB/s copy"
        if mroof:
            line += (f", {model.dtype} {mroof.flops / 1e12:,.0f} TFLOP/s → ridge "
                     f"{model.measured_ridge:.0f} FLOP/byte")
        out.append(Text(line, style="dim"))
    if model.points:
        t = Table(title="Your graded runs", title_justify="left")
        for col in ("exercise", "case", "dtype", "FLOP/B", "TFLOP/s", "bound", "of roof"):
            t.add_column(col, justify="right" if col in ("FLOP/B", "TFLOP/s", "of roof")
                         else "left")
        for p in model.points:
            t.add_row(p.exercise, p.case, p.dtype, f"{p.intensity:.3g}",
                      f"{p.flops_per_s / 1e12:.3g}", p.bound,
                      f"{p.fraction:.0%}" if p.fraction is not None else "")
        out.append(t)
    else:
        out.append(Text("No graded runs on this GPU yet: `gpulab check EXERCISE` on a GPU "
                        "places your kernel here.", style="dim"))
    for note in model.notes:
        out.append(Text(f"note: {note}", style="yellow"))
    return out
