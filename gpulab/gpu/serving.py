"""The roofline of LLM serving: analytic prefill and decode steps (lesson 09).

Pure arithmetic, no heavy imports: the `gpulab serving` calculator, the TUI
and the lesson 09 grader all take their numbers from here (the models they
run it on come from gpulab.gpu.serving_models).

Accounting conventions (the exercise's starter states the same ones; the
grader holds learners to exactly these):

* Weights a step multiplies through (`weight_params`): per layer the
  attention projections W_q (hidden x heads*head_dim), W_k and W_v
  (hidden x kv_heads*head_dim each), W_o (heads*head_dim x hidden) and a
  gated MLP (3 x hidden x intermediate); plus the output projection
  (hidden x vocab). The embedding lookup reads only a few rows and is left
  out; norms and biases are left out.
* FLOPs: 2 per weight per token (one multiply, one add), plus attention:
  a query attending to n positions costs 4*heads*head_dim*n per layer
  (2 for Q.K^T and 2 for P.V per element).
* A prefill of S prompt tokens is causal: token i (0-based) attends to
  i + 1 positions, S(S+1)/2 query-key pairs in all. A decode step at
  context C attends to C positions per sequence.
* Bytes: each step reads every weight once (shared by the whole batch).
  Prefill also writes the prompt's KV cache; decode reads C tokens of KV
  cache per sequence. Activations, and the new token's KV write, are left out.
* KV bytes per token = 2 (K and V) * layers * kv_heads * head_dim * kv_bytes.
* Memory: what fits is weights (embedding included) plus the batch's KV
  cache against the GPU's memory, read from the datasheet as GiB
  (`MEMORY_UNIT`); every byte count is shown in GB (10^9).
* Time = max(FLOPs / peak, bytes / bandwidth), the ideal roofline. The step is
  memory-bound when the memory time is the larger, else compute-bound (a tie
  counts as compute-bound). TB/s and TFLOP/s are 10^12, never 2^40.
* Tokens per second: prefill B*S / time (prompt tokens); decode B / time.

Inputs that contradict each other are refused (`InputError`, naming the
field): a prompt longer than the decode context that holds it, or a context
beyond the model's window (its config.json's max_position_embeddings).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from gpulab.gpu.hardware_model import GPU

# Bytes per stored element. int4 ignores its group scales (about +3% for
# 16-bit scales per group of 128 weights); the lesson says so.
DTYPE_BYTES = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "fp8-a16": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
# How the weights are stored, and so what the matmuls run in (compute_dtype):
# "fp8" is W8A8, fp8 weights and fp8 activations on the fp8 tensor cores;
# "fp8-a16" is weight-only fp8 (W8A16): the weights are dequantised to bf16
# inside the matmul, so the step reads half the bytes under the bf16 roof;
# "int4" is W4A16, the same with a quarter of the bytes.
WEIGHT_DTYPES = ("bf16", "fp8", "fp8-a16", "int4")
KV_DTYPES = ("bf16", "fp8")
# A GPU's memory as its datasheet prints it ("80 GB", "141 GB") is binary:
# an H200 reports 140.4 GiB usable (benchmarks/h200-2026-11-30/probe.json),
# 150.7e9 bytes. Bandwidths and FLOP/s stay decimal.
MEMORY_UNIT = 2**30


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shapes, and how its weights and KV are stored."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    vocab: int
    intermediate: int
    head_dim: int = 0  # 0: hidden // heads
    tied: bool = False  # embedding and output projection share one matrix
    weight_bytes: float = 2.0
    kv_bytes: float = 2.0
    source: str = ""
    max_context: int = 0  # tokens the model attends over (max_position_embeddings); 0: unknown

    def __post_init__(self) -> None:
        if not self.head_dim:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)

    def with_dtypes(self, weights: str = "bf16", kv: str = "bf16") -> ModelConfig:
        return replace(self, weight_bytes=DTYPE_BYTES[weights], kv_bytes=DTYPE_BYTES[kv])

    def total_params(self) -> int:
        """Every parameter a checkpoint stores, embedding included (norms left out)."""
        return int(weight_params(self) + (0 if self.tied else self.vocab * self.hidden))


@dataclass(frozen=True)
class Roof:
    """The two roofs a step runs under: memory bandwidth and peak compute."""

    name: str
    bandwidth_tbs: float  # TB/s, 10^12 bytes/s
    peak_tflops: float  # TFLOP/s of the dtype the matmuls run in

    @property
    def ridge(self) -> float:
        """FLOP per byte where the two roofs meet."""
        return self.peak_tflops / self.bandwidth_tbs


def compute_dtype(weights: str, gpu: GPU) -> str:
    """The dtype the matmuls run in for weights stored as `weights`.

    "fp8" (W8A8) uses the fp8 tensor cores where the GPU has them;
    "fp8-a16" and "int4" weights are dequantised to bf16 inside the matmul
    (W8A16, W4A16), so they compute at bf16 whatever the GPU has.
    """
    if weights == "fp8" and gpu.tflops.get("fp8"):
        return "fp8"
    for dt in ("bf16", "fp16"):
        if gpu.tflops.get(dt):
            return dt
    return "fp32"


def precision_tag(weights: str, compute: str) -> str:
    """The quantisation scheme in one word ("W8A8", "W8A16", "W4A16"); ""
    for 16-bit weights. The Serving pane prints it beside the roof's dtype."""
    if weights == "fp8":
        return "W8A8" if compute == "fp8" else "W8A16"
    return {"fp8-a16": "W8A16", "int4": "W4A16"}.get(weights, "")


def precision_note(weights: str, compute: str) -> str:
    """One line saying what the weights' format does to bytes and to the roof."""
    if weights == "fp8" and compute == "fp8":
        return (
            "W8A8: fp8 weights and fp8 activations, so the matmuls run on the fp8 "
            "tensor cores (their roof); fp8 weights with bf16 activations are "
            "fp8-a16"
        )
    if weights == "fp8":
        return "fp8 weights, but this GPU has no fp8 tensor cores: the matmuls run at " + compute
    if weights == "fp8-a16":
        return (
            f"W8A16: fp8 weights dequantised to {compute} in the matmul, {compute} "
            f"activations: half the weight bytes, the {compute} roof"
        )
    if weights == "int4":
        return (
            f"W4A16: int4 weights dequantised to {compute} in the matmul: a quarter of "
            f"the weight bytes, the {compute} roof (group scales left out)"
        )
    return f"{weights} weights and activations: the {compute} roof"


def usable(gpu: GPU) -> bool:
    """Whether the GPU has the figures a serving roofline needs."""
    return bool(gpu.bandwidth_tbs) and any(gpu.tflops.get(d) for d in ("bf16", "fp16"))


def roof_for(gpu: GPU, weights: str = "bf16") -> Roof:
    """A Roof from a gpulab.gpu.hardware.GPU for weights stored as `weights`."""
    if not usable(gpu):
        raise ValueError(
            f"{gpu.name}: the hardware table lacks its bandwidth or its "
            "16-bit TFLOP/s, so it has no serving roofline"
        )
    dt = compute_dtype(weights, gpu)
    return Roof(f"{gpu.name} ({dt})", float(gpu.bandwidth_tbs), float(gpu.tflops[dt]))


class StepRow(TypedDict):
    """A Step as data (`Step.as_dict`)."""

    flops: float
    bytes: float
    intensity: float
    bound: str
    seconds: float
    tokens_per_s: float


class SweepRow(StepRow):
    """One batch of the decode sweep: its step, and whether it fits in memory."""

    batch: int
    fits: bool


class Serving(TypedDict):
    """Everything the serving calculator shows (`calculate`), keys in the
    order `gpulab serving --json` writes them."""

    model: str
    source: str
    weights: str
    kv: str
    max_context: int | None
    total_params: int
    weight_params: float
    kv_bytes_per_token: float
    gpu: str
    bandwidth_tbs: float
    peak_tflops: float
    compute_dtype: str
    precision: str
    precision_tag: str
    ridge: float
    batch: int
    prompt: int
    context: int
    prefill: StepRow
    decode: StepRow
    memory_needed_gb: float
    memory_gb: float
    memory_capacity_gb: float
    decode_sweep: list[SweepRow]
    decode_intensity_limit: float
    decode_batch_to_ridge: float | None


@dataclass(frozen=True)
class Step:
    """One forward step of a batch: its work, traffic and ideal speed."""

    flops: float
    bytes: float
    intensity: float
    bound: str  # "memory" or "compute"
    seconds: float
    tokens_per_s: float

    def as_dict(self) -> StepRow:
        return {
            "flops": self.flops,
            "bytes": self.bytes,
            "intensity": self.intensity,
            "bound": self.bound,
            "seconds": self.seconds,
            "tokens_per_s": self.tokens_per_s,
        }


def weight_params(cfg: ModelConfig) -> float:
    """Weights one forward step multiplies through (see the module docstring)."""
    attn = (
        cfg.hidden * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
        + cfg.heads * cfg.head_dim * cfg.hidden
    )
    mlp = 3 * cfg.hidden * cfg.intermediate
    return float(cfg.layers * (attn + mlp) + cfg.hidden * cfg.vocab)


def kv_bytes_per_token(cfg: ModelConfig) -> float:
    return float(2 * cfg.layers * cfg.kv_heads * cfg.head_dim * cfg.kv_bytes)


def attention_flops(cfg: ModelConfig, pairs: float) -> float:
    """FLOPs of attention over `pairs` query-key pairs, all layers."""
    return 4.0 * cfg.layers * cfg.heads * cfg.head_dim * pairs


def _step(flops: float, nbytes: float, tokens: float, roof: Roof) -> Step:
    t_compute = flops / (roof.peak_tflops * 1e12)
    t_memory = nbytes / (roof.bandwidth_tbs * 1e12)
    seconds = max(t_compute, t_memory)
    return Step(
        flops=flops,
        bytes=nbytes,
        intensity=flops / nbytes,
        bound="memory" if t_memory > t_compute else "compute",
        seconds=seconds,
        tokens_per_s=tokens / seconds,
    )


def prefill_step(cfg: ModelConfig, roof: Roof, batch: int, prompt_len: int) -> Step:
    """Process `batch` prompts of `prompt_len` tokens each, from an empty cache."""
    p = weight_params(cfg)
    pairs = prompt_len * (prompt_len + 1) / 2
    flops = batch * (2 * p * prompt_len + attention_flops(cfg, pairs))
    nbytes = p * cfg.weight_bytes + batch * prompt_len * kv_bytes_per_token(cfg)
    return _step(flops, nbytes, batch * prompt_len, roof)


def decode_step(cfg: ModelConfig, roof: Roof, batch: int, context: int) -> Step:
    """Generate one token for each of `batch` sequences holding `context` tokens."""
    p = weight_params(cfg)
    flops = batch * (2 * p + attention_flops(cfg, context))
    nbytes = p * cfg.weight_bytes + batch * context * kv_bytes_per_token(cfg)
    return _step(flops, nbytes, batch, roof)


def decode_intensity_limit(cfg: ModelConfig, context: int) -> float:
    """The intensity decode tends to as the batch grows without bound.

    Weights are shared by the batch but the KV cache is not: past some batch
    every extra sequence adds its own KV bytes, so intensity levels off here.
    """
    return (2 * weight_params(cfg) + attention_flops(cfg, context)) / (
        context * kv_bytes_per_token(cfg)
    )


def decode_batch_to_ridge(cfg: ModelConfig, roof: Roof, context: int) -> float | None:
    """The batch at which decode turns compute-bound, or None if it never does."""
    p = weight_params(cfg)
    per_seq_flops = 2 * p + attention_flops(cfg, context)
    per_seq_bytes = context * kv_bytes_per_token(cfg)
    denom = per_seq_flops - roof.ridge * per_seq_bytes
    if denom <= 0:
        return None
    return roof.ridge * p * cfg.weight_bytes / denom


def memory_needed(cfg: ModelConfig, batch: int, context: int) -> float:
    """Bytes of GPU memory for the weights (embedding included) and the KV cache."""
    return cfg.total_params() * cfg.weight_bytes + batch * context * kv_bytes_per_token(cfg)


SWEEP = (1, 4, 16, 64, 256, 1024)


class InputError(ValueError):
    """A calculator input that cannot be used; `field` names it (batch, prompt,
    context, weights, kv, model) for a red form field; the message names it too."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_inputs(
    model: ModelConfig,
    *,
    batch: int,
    prompt: int,
    context: int,
    weights: str = "bf16",
    kv: str = "bf16",
) -> None:
    """Raise InputError for the first input that is unusable or contradicts another."""
    if weights not in WEIGHT_DTYPES:
        raise InputError(
            "weights", f"weights: {weights!r} is not one of {', '.join(WEIGHT_DTYPES)}"
        )
    if kv not in KV_DTYPES:
        raise InputError("kv", f"kv: {kv!r} is not one of {', '.join(KV_DTYPES)}")
    for name, value in (("batch", batch), ("prompt", prompt), ("context", context)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(name, f"{name} must be a whole number of at least 1, got {value!r}")
    if model.max_context and context > model.max_context:
        raise InputError(
            "context",
            f"context: {context:,} tokens is beyond {model.name}'s "
            f"{model.max_context:,}-token context window",
        )
    if prompt > context:
        # Decode at context C reads the KV cache of every token so far,
        # prompt included: a context shorter than the prompt never happens.
        raise InputError(
            "prompt",
            f"prompt: {prompt:,} tokens is longer than the context "
            f"({context:,}) that holds it; make the context at least the prompt",
        )


def calculate(
    model: ModelConfig,
    gpu: GPU,
    batch: int = 1,
    prompt: int = 2048,
    context: int = 4096,
    weights: str = "bf16",
    kv: str = "bf16",
) -> Serving:
    """Everything the serving calculator shows, as plain data (CLI, --json, TUI).

    `gpu` is a gpulab.gpu.hardware.GPU. Raises InputError (a ValueError naming the
    field) for input that is unusable or inconsistent (see check_inputs).
    """
    check_inputs(model, batch=batch, prompt=prompt, context=context, weights=weights, kv=kv)
    cfg = model.with_dtypes(weights, kv)
    roof = roof_for(gpu, weights)
    pre = prefill_step(cfg, roof, batch, prompt)
    dec = decode_step(cfg, roof, batch, context)
    capacity = (gpu.memory_gb or 0) * MEMORY_UNIT
    sweep: list[SweepRow] = [
        {
            "batch": b,
            **decode_step(cfg, roof, b, context).as_dict(),
            "fits": memory_needed(cfg, b, context) <= capacity,
        }
        for b in SWEEP
    ]
    return {
        "model": cfg.name,
        "source": cfg.source,
        "weights": weights,
        "kv": kv,
        "max_context": cfg.max_context or None,
        "total_params": cfg.total_params(),
        "weight_params": weight_params(cfg),
        "kv_bytes_per_token": kv_bytes_per_token(cfg),
        "gpu": gpu.name,
        "bandwidth_tbs": roof.bandwidth_tbs,
        "peak_tflops": roof.peak_tflops,
        "compute_dtype": compute_dtype(weights, gpu),
        "precision": precision_note(weights, compute_dtype(weights, gpu)),
        "precision_tag": precision_tag(weights, compute_dtype(weights, gpu)),
        "ridge": roof.ridge,
        "batch": batch,
        "prompt": prompt,
        "context": context,
        "prefill": pre.as_dict(),
        "decode": dec.as_dict(),
        "memory_needed_gb": memory_needed(cfg, batch, context) / 1e9,
        "memory_gb": gpu.memory_gb,  # as the datasheet prints it (GiB in fact)
        "memory_capacity_gb": capacity / 1e9,  # the same in 10^9 bytes
        "decode_sweep": sweep,
        "decode_intensity_limit": decode_intensity_limit(cfg, context),
        "decode_batch_to_ridge": decode_batch_to_ridge(cfg, roof, context),
    }


def roofline_model(d: Serving, gpu: Any) -> Any:
    """The GPU's datasheet roofline in the matmuls' dtype, with the two steps as
    points, each labelled with its FLOP/B as the step table prints it: at 80
    columns a character cell of the log axis is ~1/14 of a decade (x1.18), and
    the Serving pane's x ticks are below the fold at 80x24."""
    from gpulab.gpu import roofline, units

    model = roofline.build_model(gpu, d["compute_dtype"], points=False)
    for kind, s in (("prefill", d["prefill"]), ("decode", d["decode"])):
        model.points.append(
            roofline.Point(
                exercise=kind,
                case=kind,
                dtype=d["compute_dtype"],
                intensity=s["intensity"],
                flops_per_s=s["flops"] / s["seconds"],
                ms=s["seconds"] * 1e3,
                bound=s["bound"],
                label=f"{kind} {units.intensity(s['intensity'])} FLOP/B",
            )
        )
    return model
