"""`gpulab roofline [--gpu NAME] [--dtype DTYPE] [--measured] [--export PATH]`."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded, open_workspace
from gpulab.gpu import roofline


@guarded
def run(args: Any) -> int:
    ws = open_workspace(args)
    if args.remember and not args.gpu:
        raise UsageError("--remember needs --gpu NAME")
    dtype = args.dtype.lower() if args.dtype else None
    try:
        model, why = roofline.workspace_model(ws, args.gpu, dtype, measured=args.measured)
    except ValueError as exc:  # an unknown GPU or a dtype it lacks
        raise UsageError(str(exc)) from None
    if args.remember:
        ws.set_setting("gpu", model.gpu.key)
    if args.json:
        print(json.dumps({**model.as_dict(), "chosen_because": why}, indent=2, default=str))
        return 0
    if args.export:
        path = Path(args.export).expanduser()
        try:
            from gpulab.gpu import roofline_plot

            roofline_plot.export(model, path)
        except roofline_plot.PlotUnavailable as exc:
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
    try:
        from gpulab.gpu.roofline_plot import render_text

        text = render_text(model, width, height, color=color)
    except ImportError:  # a headless GPU box may lack plotext; the numbers still help
        print(
            "gpulab: the text plot needs plotext (pip install 'plotext<6'); "
            "--export PATH.svg needs nothing",
            file=sys.stderr,
        )
        text = ""
    if text and color:
        from rich.text import Text

        console().print(Text.from_ansi(text), soft_wrap=True)
    elif text:
        print(text)
    console().print(roofline.summary_renderable(model, why))
    return 0
