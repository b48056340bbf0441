"""The Serving pane: lesson 09's roofline-of-serving calculator, interactive.

Pick a model preset, a batch, a prompt and a context length, the weight and
KV-cache dtypes and a GPU; the pane prints what gpulab.gpu.serving.calculate says
(the same numbers as `gpulab serving` and the exercise's grader) and puts the
prefill and decode steps on that GPU's roofline. Everything recomputes on
every keystroke: it is a few dozen multiplications, so no worker is needed.
The form is mounted the first time the pane is shown, keeping start-up light.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.validation import ValidationResult, Validator
from textual.widgets import Input, Label, Select, Static

from gpulab.gpu import hardware, serving, serving_models, units
from gpulab.gpu.serving_view import BOUND_STYLE, steps_table
from gpulab.tui.lazy_pane import LazyPane, unavailable

# Far beyond any real serving setup, and small enough that the arithmetic
# stays in floating-point range (prompt**2 appears in the prefill FLOPs).
MAX_COUNT = 10_000_000
COUNT_FIELDS = ("batch", "prompt", "context")
CHOICE_FIELDS = ("model", "gpu", "weights", "kv")
DEFAULTS = {"batch": 1, "prompt": 2048, "context": 4096}
DETECT_POLLS = 40  # x 0.5 s: how long to wait for NVML's answer before giving up


@dataclass(frozen=True, slots=True)
class Inputs:
    """The calculator's arguments (gpulab.gpu.serving.calculate), from the form."""

    model: str
    gpu: str
    weights: str
    kv: str
    batch: int
    prompt: int
    context: int


def parse_count(text: str, name: str) -> int:
    """A whole number from 1 to MAX_COUNT ("4,096" and "4_096" allowed), else ValueError."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    if not cleaned:
        raise ValueError(f"{name}: empty; type a whole number such as {DEFAULTS[name]}")
    if not cleaned.lstrip("+-").isdigit():
        raise ValueError(f"{name}: {text.strip()!r} is not a whole number")
    value = int(cleaned)
    if value < 1:
        raise ValueError(f"{name}: must be at least 1, got {value}")
    if value > MAX_COUNT:
        raise ValueError(f"{name}: at most {MAX_COUNT:,}, got {value:,}")
    return value


class _Count(Validator):
    """Marks the field invalid (red) as soon as its text is not a usable count."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def validate(self, value: str) -> ValidationResult:
        try:
            parse_count(value, self.name)
        except ValueError as exc:
            return self.failure(str(exc))
        return self.success()


def usable_gpus() -> dict[str, hardware.GPU]:
    """GPUs from the hardware table that have a bandwidth and a 16-bit peak."""
    return {key: gpu for key, gpu in hardware.GPUS.items() if serving.usable(gpu)}


def default_gpu(gpu_names: tuple[str, ...], setting: Any) -> tuple[str, str]:
    """(key, why), in the Roofline pane's order: this machine, the setting, the default."""
    gpus = usable_gpus()

    def key_of(name: Any) -> str | None:
        gpu = hardware.match_gpu(name) if isinstance(name, str) and name else None
        return gpu.key if gpu is not None and gpu.key in gpus else None

    if gpu_names and (key := key_of(gpu_names[0])):
        return key, "detected"
    if key := key_of(setting):
        return key, "setting"
    return (
        hardware.DEFAULT_GPU,
        f"default; no datasheet for {gpu_names[0]}" if gpu_names else "default",
    )


def results_renderable(d: serving.Serving, why: str, width: int = 76) -> Group:
    """The numbers in `width` columns: model, GPU, both steps, memory, the ridge batch."""
    head = Text.assemble(
        (d["model"], "bold"),
        f" {d['total_params'] / 1e9:.2f} B params · weights ",
        # W8A8 or weight-only says which roof the weights' format gives (the
        # CLI prints the whole sentence; the pane has no line to spare at 80x24).
        (
            f"{d['weights'].removesuffix('-a16')} {d['precision_tag']}"
            if d.get("precision_tag")
            else d["weights"]
        ),
        f" · KV {d['kv']} {d['kv_bytes_per_token'] / 1024:g} KiB/token\n",
        (d["gpu"], "bold"),
        f" ({why}): {d['bandwidth_tbs']:.3g} TB/s · {d['peak_tflops']:,.0f} "
        f"TFLOP/s {d['compute_dtype']} · ridge {d['ridge']:.0f} FLOP/B",
    )
    table = steps_table(d, width)
    need, have = d["memory_needed_gb"], d.get("memory_capacity_gb") or 0
    memory = Text(
        f"memory: {need:,.1f} GB of {have:,.1f} GB: "
        if need < 100
        else f"memory: {need:,.0f} GB of {have:,.0f} GB: "
    )
    if need <= have:
        memory.append("fits", "green")
    else:
        gpus = f"about {math.ceil(need / have):,}" if have else "more"
        memory.append(f"does not fit on one GPU ({gpus} needed)", "red")
    b = d["decode_batch_to_ridge"]
    if b is None:
        ridge = Text(
            f"decode stays memory-bound at every batch at context {d['context']} "
            f"(≤ {d['decode_intensity_limit']:.3g} FLOP/B)"
        )
    else:
        ridge = Text(
            f"decode turns compute-bound from a batch of about {b:,.0f} at context {d['context']}"
        )
    return Group(head, table, memory, ridge)


def sweep_renderable(d: serving.Serving) -> Table:
    t = Table(
        title=f"decode at context {d['context']}, by batch",
        title_justify="left",
        box=None,
        pad_edge=False,
        padding=(0, 2, 0, 0),
        header_style="bold",
    )
    for col in ("batch", "FLOP/B", "bound", "tokens/s", "fits"):
        t.add_column(col, justify="left" if col in ("bound", "fits") else "right")
    for r in d["decode_sweep"]:
        t.add_row(
            str(r["batch"]),
            units.intensity(r["intensity"]),
            Text(r["bound"], style=BOUND_STYLE.get(r["bound"], "")),
            units.tokens(r["tokens_per_s"]),
            "yes" if r["fits"] else Text("no", style="red"),
        )
    return t


class ServingPane(LazyPane):
    """Lesson 09's calculator: a model, a batch and a GPU in; bound and tokens/s out."""

    HELP_TOPIC = "serving"
    DEFAULT_CSS = """
    ServingPane { padding: 0 1; height: 1fr; }
    ServingPane .form-row { height: 1; width: 100%; }
    ServingPane .form-row Label { padding: 0 1 0 0; }
    ServingPane .form-row Label.gap { padding: 0 1 0 2; }
    ServingPane Input { width: 9; }
    ServingPane #serving-model { width: 20; }
    ServingPane #serving-gpu { width: 21; }
    ServingPane #serving-weights, ServingPane #serving-kv { width: 10; }
    ServingPane #serving-error { color: $text-error; display: none; }
    ServingPane #serving-error.-shown { display: block; }
    ServingPane #serving-results { margin-top: 1; }
    ServingPane #serving-plot { height: 1fr; min-height: 14; }
    ServingPane #serving-sweep { margin: 1 0; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.result: serving.Serving | None = None
        """The last good calculation (serving.calculate's dict); kept while a field is bad."""
        self.errors: dict[str, str] = {}
        """Field name -> what is wrong with it, for the fields that are wrong now."""
        self.auto_gpu = ("", "")
        """(key, why) of the GPU picked for the learner; another choice is "chosen"."""
        self._detect_timer: Any = None
        self._gpu: Any = None  # the GPU of the result shown

    def compose(self) -> ComposeResult:
        yield Static(Text("Building the calculator…", style="dim"), id="serving-loading")

    # --- building ---------------------------------------------------------------------
    def build(self) -> None:
        app: Any = self.app
        info = app.gpu_info
        if info is None:
            app.want_gpu_info()
        setting = app.workspace.get_setting("gpu")
        self.auto_gpu = default_gpu(info.names if info else (), setting)
        gpu_key = self.auto_gpu[0]
        gpus = usable_gpus()
        models = [(name, name) for name in serving_models.PRESETS]
        dtypes = [(d, d) for d in serving.WEIGHT_DTYPES]
        kv = [(d, d) for d in serving.KV_DTYPES]
        # Three short rows rather than two long ones: at 60 columns the
        # second half of each long row was off screen.
        row1 = Horizontal(
            Label("model"),
            self._select(models, serving_models.DEFAULT_MODEL, "serving-model"),
            Label("gpu", classes="gap"),
            self._select([(g.name, k) for k, g in gpus.items()], gpu_key, "serving-gpu"),
            classes="form-row",
        )
        row2 = Horizontal(
            *self._count("batch"),
            *self._count("prompt", gap=True),
            *self._count("context", gap=True),
            classes="form-row",
        )
        row3 = Horizontal(
            Label("weights"),
            self._select(dtypes, "bf16", "serving-weights"),
            Label("kv", classes="gap"),
            self._select(kv, "bf16", "serving-kv"),
            classes="form-row",
        )
        self.query_one("#serving-loading").remove()
        self.mount_all(
            [row1, row2, row3, Static("", id="serving-error"), Static("", id="serving-results")]
        )
        try:
            from gpulab.tui.plot import roofline_plot

            self.mount(roofline_plot("serving-plot"))
        except ImportError as exc:
            self.mount(Static(unavailable("The roofline plot", exc), id="serving-noplot"))
        self.mount(Static("", id="serving-sweep"))
        self.call_after_refresh(self.recompute)
        if info is None:
            self._detect_timer = self.set_interval(
                0.5, self._await_detection, repeat=DETECT_POLLS, name="serving-gpu"
            )

    @staticmethod
    def _select(options: list[tuple[str, str]], value: str, id: str) -> Select[str]:
        return Select(options, value=value, allow_blank=False, compact=True, id=id)

    @staticmethod
    def _count(name: str, gap: bool = False) -> tuple[Label, Input]:
        field = Input(
            str(DEFAULTS[name]),
            id=f"serving-{name}",
            compact=True,
            validators=[_Count(name)],
            validate_on=["changed"],
            tooltip=f"{name}: a whole number from 1 to {MAX_COUNT:,}",
        )
        return Label(name, classes="gap" if gap else ""), field

    def _await_detection(self) -> None:
        """NVML answers in a worker; once it has, start from this machine's GPU
        unless the learner has already picked one."""
        app: Any = self.app
        if app.gpu_info is None:
            return
        self._detect_timer.stop()
        select = self.query_one("#serving-gpu", Select)
        if select.value != self.auto_gpu[0]:
            return  # the learner chose: leave it
        self.auto_gpu = default_gpu(app.gpu_info.names, app.workspace.get_setting("gpu"))
        if select.value != self.auto_gpu[0]:
            select.value = self.auto_gpu[0]  # posts Select.Changed, which recomputes
        else:
            self.recompute()

    # --- recomputing --------------------------------------------------------------------
    @on(Input.Changed)
    def _input_changed(self, event: Input.Changed) -> None:
        if (event.input.id or "").startswith("serving-"):
            event.stop()
            self.recompute()

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self.recompute()

    def read_inputs(self) -> tuple[Inputs | None, dict[str, str]]:
        """(the calculator's arguments, field -> error) from the form as it is
        now; no arguments while a field is wrong."""
        counts: dict[str, int] = {}
        errors: dict[str, str] = {}
        for name in COUNT_FIELDS:
            try:
                counts[name] = parse_count(self.query_one(f"#serving-{name}", Input).value, name)
            except ValueError as exc:
                errors[name] = str(exc)
        if errors:
            return None, errors
        # Each Select holds one of its options (allow_blank=False): a str.
        model, gpu, weights, kv = (
            str(self.query_one(f"#serving-{name}", Select).value) for name in CHOICE_FIELDS
        )
        return Inputs(model, gpu, weights, kv, **counts), errors

    def recompute(self) -> None:
        if not self.query("#serving-model"):
            return  # not built yet
        inputs, self.errors = self.read_inputs()
        error = self.query_one("#serving-error", Static)
        if inputs is not None:
            gpu = hardware.GPUS.get(inputs.gpu)
            model = serving_models.PRESETS.get(inputs.model)
            try:
                if gpu is None or model is None:
                    raise ValueError(f"unknown choice: {inputs.model!r} on {inputs.gpu!r}")
                data = serving.calculate(
                    model,
                    gpu,
                    batch=inputs.batch,
                    prompt=inputs.prompt,
                    context=inputs.context,
                    weights=inputs.weights,
                    kv=inputs.kv,
                )
            except serving.InputError as exc:
                # The same rules as `gpulab serving` (a prompt longer than the
                # context, a context beyond the model's window): the field goes red.
                self.errors[exc.field] = str(exc)
            except (ValueError, ArithmeticError) as exc:
                self.errors["calculator"] = str(exc)
            else:
                self.result = data
                error.update("")
                error.remove_class("-shown")
                self._mark_fields()
                self._show(gpu)
                return
        self._mark_fields()
        kept = " Showing the last valid result." if self.result is not None else ""
        error.update(Text("; ".join(self.errors.values()) + "." + kept))
        error.add_class("-shown")

    def _mark_fields(self) -> None:
        """Red for each count field with an error now. (Each Input's own
        validator knows its text alone; rules across fields are set here.)"""
        for name in COUNT_FIELDS:
            field = self.query_one(f"#serving-{name}", Input)
            field.set_class(name in self.errors, "-invalid")
            field.set_class(name not in self.errors, "-valid")

    def _show(self, gpu: Any) -> None:
        d = self.result
        assert d is not None
        key, why = self.auto_gpu
        why = why if gpu.key == key else "chosen"
        self._gpu = gpu
        width = max(20, self.content_size.width - 2)  # less the scrollbar
        self.query_one("#serving-results", Static).update(results_renderable(d, why, width))
        self.query_one("#serving-sweep", Static).update(sweep_renderable(d))
        plots = self.query("#serving-plot")
        if plots:
            try:
                plot: Any = plots.first()  # a RooflinePlot (gpulab.tui.plot, made lazily)
                plot.show_model(serving.roofline_model(d, gpu))
            except ValueError as exc:  # a GPU the roofline model cannot draw
                self.query_one("#serving-sweep", Static).update(
                    Text(f"The roofline could not be drawn: {exc}", style="yellow")
                )

    def on_resize(self) -> None:
        if self.result is not None and self._gpu is not None:
            self._show(self._gpu)  # the table's shape follows the width

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and isinstance(self.app.focused, Input):
            event.stop()
            self.focus()  # leave the field; single-letter keys and 1-7 work again
