"""`gpulab serving`: the roofline of LLM serving, as a calculator (lesson 09).

For a model (a preset or a Hugging Face config.json), a batch, a prompt and
a context length, weight and KV dtypes, and a GPU from the hardware table:
FLOPs, bytes, intensity, bound and ideal tokens/s of a prefill and a decode
step, whether it all fits in memory, and how decode moves with the batch.
The arithmetic is gpulab.gpu.serving's (the same conventions the exercise uses).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from gpulab.cli.commands.common import UsageError, console, guarded
from gpulab.gpu import hardware, serving, serving_models, units


def _gpu(args: Any):
    gpu = hardware.match_gpu(args.gpu) if args.gpu else hardware.GPUS[hardware.DEFAULT_GPU]
    if gpu is None:
        raise UsageError(f"unknown GPU '{args.gpu}'. Known: {', '.join(hardware.GPUS)}")
    return gpu


DEFAULT_PROMPT = 2048


def report(args: Any) -> serving.Serving:
    """Everything the calculator shows, as plain data (also the --json output).

    Unusable or inconsistent input (serving.check_inputs) is a UsageError: one
    line naming the field, exit 2.
    """
    prompt = args.prompt
    if prompt is None:
        # `--context 128` alone means a short conversation, not an error
        # about a 2048-token prompt nobody asked for.
        prompt = min(DEFAULT_PROMPT, args.context) if args.context >= 1 else DEFAULT_PROMPT
    try:
        model = serving_models.find_model(args.model)
        if model.name != args.model.strip().lower() and model.name in serving_models.PRESETS:
            print(f"gpulab: taking '{args.model}' as {model.name}", file=sys.stderr)
        return serving.calculate(
            model,
            _gpu(args),
            batch=args.batch,
            prompt=prompt,
            context=args.context,
            weights=args.weights,
            kv=args.kv,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


@guarded
def run(args: Any) -> int:
    if args.models:
        return _list_models()
    data = report(args)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    _print(data)
    if args.plot:
        _plot(args, data)
    return 0


def _list_models() -> int:
    from rich import box
    from rich.table import Table

    t = Table(
        title="Model presets (`--model NAME`, or the path of a config.json)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    for col in (
        "name",
        "layers",
        "hidden",
        "heads",
        "kv",
        "hd",
        "vocab",
        "inter",
        "params",
        "KV/tok",
    ):
        t.add_column(col, no_wrap=True)
    for m in serving_models.PRESETS.values():
        t.add_row(
            m.name,
            str(m.layers),
            str(m.hidden),
            str(m.heads),
            str(m.kv_heads),
            str(m.head_dim),
            str(m.vocab),
            str(m.intermediate),
            f"{m.total_params() / 1e9:.2f}B",
            f"{serving.kv_bytes_per_token(m) / 1024:g}K",
        )
    con = console()
    con.print(t)
    con.print(
        "[dim]kv: KV heads; hd: head dim; inter: MLP intermediate size; KV/tok: KiB of bf16 KV cache per token.[/]"
    )
    for m in serving_models.PRESETS.values():
        con.print(f"[dim]{m.name}: {m.source}[/]")
    return 0


def _print(d: serving.Serving) -> None:
    from rich import box
    from rich.table import Table

    con = console()
    con.print(
        f"[bold]{d['model']}[/]: {d['total_params'] / 1e9:.2f} B parameters, "
        f"{d['weight_params'] / 1e9:.2f} B multiplied per token; weights {d['weights']}, "
        f"KV cache {d['kv']} = {d['kv_bytes_per_token'] / 1024:g} KiB per token"
        + (f"; context window {d['max_context']:,} tokens" if d.get("max_context") else "")
    )
    con.print(
        f"[bold]{d['gpu']}[/]: {d['bandwidth_tbs']:g} TB/s, {d['peak_tflops']:g} TFLOP/s "
        f"{d['compute_dtype']} → ridge {d['ridge']:.0f} FLOP/byte"
    )
    con.print(f"[dim]{d['precision']}.[/]")
    from gpulab.gpu.serving_view import steps_table

    # The Serving pane's own table (gpulab.gpu.serving_view): a step a row where
    # the terminal is wide enough, a step a column where it is not.
    t = steps_table(d, con.width)
    con.print(t)
    con.print("[dim]Ideal (roofline) times and tokens/s; decode at context C is batch×1 @C.[/]")
    fits = d["memory_needed_gb"] <= d["memory_capacity_gb"]
    con.print(
        f"memory: {d['memory_needed_gb']:.1f} GB of {d['memory_capacity_gb']:.1f} GB "
        f"({d['memory_gb']:g} GiB) "
        + ("[green](fits)[/]" if fits else "[red](does not fit on one GPU)[/]")
    )
    s = Table(
        title=f"decode at context {d['context']}, by batch",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
    )
    for col in ("batch", "FLOP/byte", "bound", "tokens/s", "fits"):
        s.add_column(col, justify="right")
    for r in d["decode_sweep"]:
        s.add_row(
            str(r["batch"]),
            units.intensity(r["intensity"]),
            r["bound"],
            units.tokens(r["tokens_per_s"]),
            "yes" if r["fits"] else "[red]no[/]",
        )
    con.print(s)
    b = d["decode_batch_to_ridge"]
    if b is None:
        con.print(
            f"At context {d['context']} decode never turns compute-bound: each sequence "
            f"brings its own KV cache, so intensity levels off at "
            f"{d['decode_intensity_limit']:.3g} FLOP/byte, below the ridge "
            f"({d['ridge']:.0f})."
        )
    else:
        con.print(
            f"Decode turns compute-bound from a batch of about {b:,.0f} at context "
            f"{d['context']} (it levels off at {d['decode_intensity_limit']:.3g} FLOP/byte)."
        )
    con.print(
        "[dim]Ideal: the roofline with no overheads. Measured on an H200, copies reach "
        "about 88-91% of the datasheet bandwidth and cuBLAS bf16 69-74% of peak "
        "(docs/hardware.md).[/]"
    )


def _plot(args: Any, d: serving.Serving) -> None:
    """Draw both steps on the GPU's roofline, if gpulab.gpu.roofline can draw."""
    try:
        from gpulab.gpu.roofline_plot import render_text

        model = serving.roofline_model(d, _gpu(args))
        text = render_text(model, width=min(console().width, 100), height=24)
    except Exception as exc:  # noqa: BLE001 - the numbers above stand without a plot
        console(stderr=True).print(f"[yellow]no plot: {type(exc).__name__}: {exc}[/]")
        return
    print(text)
