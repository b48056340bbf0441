"""The Serving pane (lesson 09's calculator), driven with Pilot at 80x24 and 120x40.

Every figure on screen must be gpulab.gpu.serving.calculate's for the same inputs,
so the tests compute the expected dict themselves and look for its bound and
tokens/s on the screen. No GPU is needed: the calculator is arithmetic.
"""

from __future__ import annotations

import io
import re

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

from test_tui import make_app, shows  # noqa: E402

from gpulab.gpu import hardware, serving, serving_models  # noqa: E402
from gpulab.gpu.devinfo import GpuInfo  # noqa: E402
from gpulab.gpu.units import tokens  # noqa: E402
from gpulab.tui.screens import HelpScreen  # noqa: E402
from gpulab.tui.serving_pane import (  # noqa: E402
    ServingPane,
    default_gpu,
    parse_count,
    results_renderable,
    usable_gpus,
)

pytestmark = pytest.mark.anyio

KEY_NAMES = {"-": "minus", ",": "comma", "_": "underscore", " ": "space"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


def expected(model="llama-3-8b", gpu=hardware.DEFAULT_GPU, **kw) -> dict:
    return serving.calculate(serving_models.PRESETS[model], hardware.GPUS[gpu], **kw)


async def open_calculator(pilot) -> ServingPane:
    await pilot.press("7")
    pane = pilot.app.query_one(ServingPane)
    for _ in range(50):
        await pilot.pause(0.05)
        if pane.result is not None:
            break
    assert pilot.app.active_pane == "serving" and pane.result is not None
    return pane


async def type_into(pilot, field_id: str, text: str) -> None:
    pilot.app.query_one(f"#{field_id}").focus()
    await pilot.pause()
    await pilot.press("ctrl+a", "ctrl+k", *[KEY_NAMES.get(c, c) for c in text])
    await pilot.pause()


async def choose(pilot, downs: int) -> None:
    """With a Select focused: open its list, move `downs` rows, pick."""
    await pilot.press("enter")
    await pilot.pause()
    await pilot.press(*(["down"] * downs), "enter")
    await pilot.pause()


def same_numbers(got: dict, want: dict) -> bool:
    return all(
        got[k] == want[k]
        for k in (
            "model",
            "gpu",
            "weights",
            "kv",
            "batch",
            "prompt",
            "context",
            "prefill",
            "decode",
            "decode_batch_to_ridge",
            "memory_needed_gb",
        )
    )


def on_screen(app, data: dict, *more: str) -> bool:
    """The bound and the tokens/s of both steps are printed (and `more`): one screenshot."""
    return shows(
        app,
        *(f"{data[k]['bound']}" for k in ("prefill", "decode")),
        *(tokens(data[k]["tokens_per_s"]) for k in ("prefill", "decode")),
        *more,
    )


def test_parse_count():
    assert parse_count(" 4,096 ", "context") == 4096
    assert parse_count("1_024", "batch") == 1024
    for bad, why in (
        ("abc", "not a whole number"),
        ("-3", "at least 1"),
        ("0", "at least 1"),
        ("", "empty"),
        ("2.5", "not a whole number"),
        ("1e9", "not a whole"),
        (str(10**40), "at most"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_count(bad, "batch")


def test_default_gpu_order():
    assert default_gpu(("NVIDIA H200",), "a10") == ("h200", "detected")
    assert default_gpu(("Quadro X",), "a10") == ("a10", "setting")
    assert default_gpu((), "rubin") == (hardware.DEFAULT_GPU, "default")  # no serving figures
    assert default_gpu(("Quadro X",), None)[1] == "default; no datasheet for Quadro X"


def test_the_numbers_fit_80_columns_for_every_gpu_model_and_dtype():
    """No wrapped or cut line at 76 columns (80, less padding and scrollbar)."""
    from dataclasses import replace

    from rich.console import Console

    for gpu in usable_gpus().values():
        for preset in serving_models.PRESETS.values():
            # A window left unknown (a config.json without one) lets the
            # widest figures through: a million tokens of context.
            model = replace(preset, max_context=0)
            for weights in serving.WEIGHT_DTYPES:
                for batch, prompt, context in ((1, 2048, 4096), (1024, 131072, 1_000_000)):
                    d = serving.calculate(
                        model,
                        gpu,
                        batch=batch,
                        prompt=prompt,
                        context=context,
                        weights=weights,
                        kv="fp8",
                    )
                    con = Console(width=76, record=True, file=io.StringIO())
                    con.print(results_renderable(d, "setting"))
                    text = con.export_text()
                    assert len(text.splitlines()) == 7 and "…" not in text, text


def test_the_numbers_fit_60_columns_a_step_a_column():
    """At 60 columns (56 for the text) the steps turn into columns: nothing cut."""
    from rich.console import Console

    d = expected(batch=1024, prompt=8192, context=8192)
    con = Console(width=56, record=True, file=io.StringIO())
    con.print(results_renderable(d, "setting", 56))
    text = con.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 56, text
    assert re.search(r"FLOP/B +\S+ +\S+", text) and "prefill" in text and "decode" in text


@pytest.mark.slow
async def test_keyboard_only_every_field_matches_the_calculator(ws):
    app = make_app(ws)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_calculator(pilot)
        want = expected()
        assert same_numbers(pane.result, want) and on_screen(app, want, "H100 SXM (default)")
        assert not app.query_one("#sidebar").display  # the pane takes the whole width

        # Tab from the pane reaches the model list first; 70B is the next preset.
        await pilot.press("tab")
        assert app.focused.id == "serving-model"
        await choose(pilot, 1)
        want = expected("llama-3-70b")
        # 141 GB of bf16 weights on an 80 GB GPU
        assert same_numbers(pane.result, want) and on_screen(app, want, "does not fit on one")

        # gpu: H100 SXM -> H200, as many rows down as the table puts between
        # them (the H100 PCIe and NVL cards).
        await pilot.press("tab")
        assert app.focused.id == "serving-gpu"
        keys = list(usable_gpus())
        await choose(pilot, keys.index("h200") - keys.index("h100-sxm"))
        want = expected("llama-3-70b", "h200")
        assert same_numbers(pane.result, want) and on_screen(app, want, "H200 (chosen)")

        # batch, then prompt, then context, typed (the second row).
        await pilot.press("tab")
        assert app.focused.id == "serving-batch"
        await pilot.press(
            "ctrl+a",
            "ctrl+k",
            "6",
            "4",
            "tab",
            "ctrl+a",
            "ctrl+k",
            "5",
            "1",
            "2",
            "tab",
            "ctrl+a",
            "ctrl+k",
            "8",
            "1",
            "9",
            "2",
            "tab",
        )
        await pilot.pause()
        # weights: bf16 -> fp8 one row, then kv to fp8 (the third row).
        assert app.focused.id == "serving-weights"
        await choose(pilot, 1)
        want = expected("llama-3-70b", "h200", weights="fp8", batch=64, prompt=512, context=8192)
        assert pane.result["compute_dtype"] == "fp8" and same_numbers(pane.result, want)
        await pilot.press("tab")
        assert app.focused.id == "serving-kv"
        await choose(pilot, 1)
        want = expected(
            "llama-3-70b", "h200", weights="fp8", kv="fp8", batch=64, prompt=512, context=8192
        )  # Llama 3 70B's whole window
        b = want["decode_batch_to_ridge"]
        assert same_numbers(pane.result, want) and on_screen(
            app, want, f"from a batch of about {b:,.0f}" if b else "stays memory-bound at every"
        )

        # Escape leaves the field; ? then opens this pane's help.
        await pilot.press("escape", "question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.screen.topic == "serving"


async def test_a_bad_number_is_a_field_error_and_the_last_result_stays(ws):
    app = make_app(ws)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_calculator(pilot)
        await type_into(pilot, "serving-batch", "16")
        good = expected(batch=16)
        assert same_numbers(pane.result, good)
        batch, error = app.query_one("#serving-batch"), app.query_one("#serving-error")
        for bad, why in (
            ("-3", "batch: must be at least 1"),
            ("abc", "batch: 'abc' is not a whole number"),
            ("", "batch: empty"),
        ):
            await type_into(pilot, "serving-batch", bad)
            assert set(pane.errors) == {"batch"} and why in pane.errors["batch"]
            assert batch.has_class("-invalid") and error.display
            assert same_numbers(pane.result, good) and on_screen(app, good, why, "last valid")
        # A second bad field is reported too; fixing both clears the message.
        await type_into(pilot, "serving-context", "0")
        assert set(pane.errors) == {"batch", "context"}
        await type_into(pilot, "serving-context", "8,192")
        await type_into(pilot, "serving-batch", "4")
        assert pane.errors == {} and not error.display and not batch.has_class("-invalid")
        want = expected(batch=4, context=8192)
        assert same_numbers(pane.result, want) and on_screen(app, want)


async def test_inputs_that_contradict_each_other_are_field_errors(ws):
    """The CLI's rules: the prompt fits in the context, the context in the model."""
    app = make_app(ws)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_calculator(pilot)
        prompt, context = app.query_one("#serving-prompt"), app.query_one("#serving-context")
        await type_into(pilot, "serving-prompt", "6000")  # context is 4096
        assert set(pane.errors) == {"prompt"} and "longer than the context" in pane.errors["prompt"]
        assert prompt.has_class("-invalid") and not context.has_class("-invalid")
        # Typed a digit at a time: 600 was the last prompt that fitted.
        assert same_numbers(pane.result, expected(prompt=600)) and shows(app, "last valid")
        await type_into(pilot, "serving-context", "100000")  # beyond Llama 3 8B's 8192
        assert set(pane.errors) == {"context"} and "8,192-token" in pane.errors["context"]
        assert context.has_class("-invalid") and not prompt.has_class("-invalid")
        await type_into(pilot, "serving-context", "8192")
        assert pane.errors == {} and not context.has_class("-invalid")
        assert same_numbers(pane.result, expected(prompt=6000, context=8192))


async def test_the_plot_labels_both_steps_at_120x40(ws):
    app = make_app(ws)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")  # the palette's "serving: calculator" opens the pane
        await pilot.pause()
        await pilot.press(*"serving calc", "enter")
        pane = await open_calculator(pilot)  # 7 again is harmless
        plot = app.query_one("#serving-plot")
        await type_into(pilot, "serving-batch", "256")
        app.query_one("#serving-weights").value = "int4"  # multiplies in bf16 (W4A16)
        await pilot.pause(0.2)
        want = expected(batch=256, weights="int4")
        assert same_numbers(pane.result, want)
        points = {p.exercise: p for p in plot.model.points}
        assert set(points) == {"prefill", "decode"} and plot.model.dtype == "bf16"
        for kind in points:
            assert points[kind].intensity == pytest.approx(want[kind]["intensity"])
            assert points[kind].flops_per_s == pytest.approx(
                want[kind]["flops"] / want[kind]["seconds"]
            )
        drawn = plot.render().plain
        assert "prefill" in drawn and "decode" in drawn and "ridge" in drawn
        assert shows(app, "decode at context 4096, by batch")


async def test_the_gpu_starts_as_this_machines_else_the_setting(ws):
    ws.set_setting("gpu", "a100-80gb")
    # No answer from NVML yet: the pane asks, waits, and keeps the setting (no GPU here).
    app = make_app(ws, gpu_info=None)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_calculator(pilot)
        assert app.query_one("#serving-gpu").value == "a100-80gb"
        for _ in range(200):
            if app.gpu_info is not None:
                break
            await pilot.pause(0.05)
        await pilot.pause(0.6)  # the pane looks every 0.5 s
        if not app.gpu_info.found:  # this machine has no GPU: the setting stands
            assert pane.result["gpu"] == "A100 80GB SXM" and shows(app, "A100 80GB SXM (setting)")
    app = make_app(ws, gpu_info=GpuInfo(("NVIDIA H200",), "550.0", "nvml"))
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await open_calculator(pilot)
        assert same_numbers(pane.result, expected(gpu="h200"))
        assert shows(app, "H200 (detected)")


LABELS = re.compile(
    r"(?:prefill|decode)(?: [\d.,]+ FLOP/B)?|ridge \d+ FLOP/B"
    r"|(?:fp8|tf32|fp32|fp64|int8|fp4)[^│]*?\d[\d,]*"
)


@pytest.mark.parametrize("size", [(74, 14), (56, 14), (50, 14), (116, 16)], ids=str)
@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80gb", "mi300x"])
def test_plot_labels_never_run_into_each_other(size, gpu):
    """At 80x24 the plot is about 74x14: the ridge label ran into "tf32 494"
    ("ridge 295 FLOP/B 2 494") and prefill into "fp8 1,979" ("prefill79").
    Every label drawn is whole, with a blank or a line between it and the next;
    the two steps are always labelled, and none is written over the legend
    (50x14, the plot at 80 columns with the lesson list shown, put "prefill
    2,084 FLOP/B" over "fp16/bf16 datasheet")."""
    from gpulab.gpu import roofline_plot

    d = expected(gpu=gpu)
    text = roofline_plot.render_text(serving.roofline_model(d, hardware.GPUS[gpu]), *size)
    assert "prefill" in text and "decode" in text, text
    assert "fp16/bf16 datasheet" in text, "a label ran into the legend"
    for line in text.splitlines():
        for m in LABELS.finditer(line):
            after = line[m.end() : m.end() + 1]
            assert not after or not after.isalnum(), f"{m.group()!r} runs on: {line!r}"
            before = line[max(0, m.start() - 1) : m.start()]
            assert not before.isalnum(), f"{m.group()!r} is run into: {line!r}"


def marker_intensity(text: str, x_ticks: list[float]) -> float:
    """The FLOP/B a reader gets from the decode marker's column: the ● nearest
    the "decode" label, between the x ticks (┬) on their log scale."""
    lines = text.splitlines()
    ticks = [j for j, c in enumerate(next(ln for ln in lines if "┬" in ln)) if c == "┬"]
    label = next((i, ln.index("decode")) for i, ln in enumerate(lines) if "decode" in ln)
    dots = [(i, j) for i, ln in enumerate(lines) for j, c in enumerate(ln) if c == "●"]
    _, col = min(dots, key=lambda d: abs(d[0] - label[0]) * 4 + abs(d[1] - label[1]))
    k = max(n for n in range(len(ticks) - 1) if ticks[n] <= col)
    frac = (col - ticks[k]) / (ticks[k + 1] - ticks[k])
    return x_ticks[k] * (x_ticks[k + 1] / x_ticks[k]) ** frac


@pytest.mark.parametrize(
    "model, weights, batch",
    [
        ("llama-3-8b", "bf16", 1),  # issue 48: the table's 1.1
        ("llama-3-8b", "int4", 256),
        ("llama-3-70b", "fp8", 64),
        ("llama-3.1-405b", "int4", 256),  # decode at 290 FLOP/B, in the ridge's cell
    ],
)
def test_each_step_is_drawn_where_the_table_puts_it_and_says_its_flop_per_byte(
    model, weights, batch
):
    """Issue 48 reported the decode point near 0.6 FLOP/B at 80x24 where the
    table said 1.1. At 80x24 (the plot is 76x14 there) and with the sidebar
    (50x14), across models, dtypes and batches, the marker sits within the
    one character cell of the table's value (a cell is ~1/14 of a decade at
    80 columns); but the cell is coarse and at 80x24 the x ticks are below
    the pane's fold, so each step's label carries its value as the table
    prints it. A decode point at the ridge was hidden under the ridge's ◆."""
    from gpulab.gpu import roofline_plot
    from gpulab.gpu.units import intensity

    d = expected(model, weights=weights, batch=batch)
    m = serving.roofline_model(d, hardware.GPUS[hardware.DEFAULT_GPU])
    x0, x1, _, _ = roofline_plot.axes(m)
    for size in ((76, 14), (50, 14)):
        text = roofline_plot.render_text(m, *size)
        cols, _ = roofline_plot.plot_cells(m, *size)
        cell = (x1 / x0) ** (1 / (cols - 1))  # the factor one column spans
        got = marker_intensity(text, roofline_plot.decades(x0, x1))
        want = d["decode"]["intensity"]
        assert want / cell <= got <= want * cell, (size, got, want, text)
        assert f"decode {intensity(want)} FLOP/B" in text, text
