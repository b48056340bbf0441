"""Grader for lesson 09: the roofline of LLM serving.

The learner's `weight_params`, `kv_bytes_per_token`, `prefill_step` and
`decode_step` are compared with gpulab.gpu.serving on Llama-3 8B (the lesson's
worked example) and on model configurations drawn from this run's secret
seed, so answers can't be memorised. A wrong number is checked against the
usual mistakes (KV reads left out, 1 FLOP per weight, TiB for TB, decode
taken as compute-bound, ...) so the learner hears which one it looks like.

Pure arithmetic: no torch, no GPU; the same on every machine.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from gpulab.gpu import serving, serving_models
from gpulab.gpu.hardware import GPUS, match_gpu
from gpulab.judge.case_row import case_row
from gpulab.judge.plain import fmt as _fmt
from gpulab.judge.plain import try_call as _try

if TYPE_CHECKING:
    from gpulab.judge.context import CaseContext, GradeContext
    from gpulab.judge.remote import Remote

RTOL = 1e-6
N_RANDOM = 6
Field = Literal["flops", "bytes", "intensity", "bound", "tokens_per_s"]
FIELDS: tuple[Field, ...] = ("flops", "bytes", "intensity", "bound", "tokens_per_s")


class StepAnswer(TypedDict):
    """What prefill_step and decode_step return (FIELDS), worked out by the judge."""

    flops: float
    bytes: float
    intensity: float
    bound: str
    tokens_per_s: float


def _answer(step: serving.Step) -> StepAnswer:
    return StepAnswer(
        flops=step.flops,
        bytes=step.bytes,
        intensity=step.intensity,
        bound=step.bound,
        tokens_per_s=step.tokens_per_s,
    )


class Variant(TypedDict, total=False):
    """A usual mistake, made on purpose to name the learner's (_variant's keywords)."""

    flop_per_weight: float
    attention: bool
    kv: bool
    pairs: str
    weights_per_seq: bool
    unit: float
    force_bound: str


# A scenario: (model, GPU, batch, prompt length, context).
Scenario = tuple[serving.ModelConfig, serving.Roof, int, int, int]


def _close(got: Any, want: float) -> bool:
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False
    return math.isfinite(got) and abs(got - want) <= RTOL * abs(want)


# --- configurations -------------------------------------------------------------


def _random_config(rng: random.Random, odd_head_dim: bool = False) -> serving.ModelConfig:
    heads = rng.choice([8, 12, 16, 24, 28, 32, 40, 48, 64, 96, 128])
    kv_heads = rng.choice([d for d in range(1, 17) if heads % d == 0])
    head_dim = rng.choice([64, 80, 96, 128, 128, 256])
    hidden = heads * head_dim
    # Some models' head_dim is not hidden // heads (Gemma, Qwen3); one config always.
    while (odd_head_dim or rng.random() < 0.3) and hidden // heads == head_dim:
        hidden = rng.randrange(512, 16385, 128)
    return serving.ModelConfig(
        name="random",
        layers=rng.randint(2, 128),
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=rng.randint(32000, 262144),
        intermediate=rng.randrange(1024, 4 * hidden + 1024, 256),
        weight_bytes=rng.choice([2.0, 1.0, 0.5]),
        kv_bytes=rng.choice([2.0, 1.0]),
    )


def _random_roof(rng: random.Random, cfg: serving.ModelConfig) -> serving.Roof:
    gpus = [g for g in GPUS.values() if serving.usable(g) and not getattr(g, "announced", False)]
    gpu = rng.choice(sorted(gpus, key=lambda g: g.key))
    weights = {2.0: "bf16", 1.0: "fp8", 0.5: "int4"}[cfg.weight_bytes]
    return serving.roof_for(gpu, weights)


def _near_tie(step: serving.Step, roof: serving.Roof) -> bool:
    t_c = step.flops / (roof.peak_tflops * 1e12)
    t_m = step.bytes / (roof.bandwidth_tbs * 1e12)
    return abs(t_c / t_m - 1) < 1e-3


def _draw(rng: random.Random, want: tuple[str, str] | None, odd_head_dim: bool = False) -> Scenario:
    """A (cfg, roof, batch, prompt_len, context) whose steps avoid near-ties,
    and, if `want` = (step, bound), whose `step` has that bound."""
    for _ in range(2000):
        cfg = _random_config(rng, odd_head_dim)
        roof = _random_roof(rng, cfg)
        batch = rng.choice([1, 1, 2, 3, 8, 17, 64, 100, 256, 512, 2048])
        prompt = rng.choice([1, 7, 128, 1000, 2048, 8192, 32768]) + rng.randint(0, 63)
        context = rng.choice([1, 16, 500, 4096, 32768, 131072]) + rng.randint(0, 63)
        if want == ("decode", "compute"):
            context, batch = rng.randint(1, 64), rng.choice([1024, 2048, 4096])
        if want == ("prefill", "memory"):
            prompt, batch = rng.randint(1, 8), 1
        pre = serving.prefill_step(cfg, roof, batch, prompt)
        dec = serving.decode_step(cfg, roof, batch, context)
        if _near_tie(pre, roof) or _near_tie(dec, roof):
            continue
        if want and {"prefill": pre, "decode": dec}[want[0]].bound != want[1]:
            continue
        return cfg, roof, batch, prompt, context
    raise RuntimeError("could not draw a configuration (a gpulab bug)")


def scenarios(ctx: CaseContext) -> list[tuple[str, Scenario]]:
    llama = serving_models.PRESETS["llama-3-8b"]
    gpu = match_gpu("h200")
    assert gpu is not None  # in the shipped table (gpulab/data/gpus.toml)
    h200 = serving.roof_for(gpu, "bf16")
    out: list[tuple[str, Scenario]] = [("Llama-3 8B bf16 on H200", (llama, h200, 1, 2048, 4096))]
    wants: list[tuple[str, str] | None] = [None] * (N_RANDOM - 2)
    wants += [("decode", "compute"), ("prefill", "memory")]
    for i, want in enumerate(wants):
        rng = random.Random(ctx.seed(900 + i))
        out.append((f"unseen config {i + 1}", _draw(rng, want, odd_head_dim=i == 0)))
    return out


# --- diagnosis of wrong answers ---------------------------------------------------


def _variant(
    kind: str,
    cfg: serving.ModelConfig,
    roof: serving.Roof,
    batch: int,
    n: int,
    *,
    flop_per_weight: float = 2,
    attention: bool = True,
    kv: bool = True,
    pairs: str = "causal",
    weights_per_seq: bool = False,
    unit: float = 1e12,
    force_bound: str = "",
) -> StepAnswer:
    p = serving.weight_params(cfg)
    kvpt = serving.kv_bytes_per_token(cfg) if kv else 0.0
    wbytes = p * cfg.weight_bytes * (batch if weights_per_seq else 1)

    def att(q: float) -> float:
        return serving.attention_flops(cfg, q) if attention else 0.0

    if kind == "prefill":
        q = {"causal": n * (n + 1) / 2, "half": n * n / 2, "full": n * n}[pairs]
        flops = batch * (flop_per_weight * p * n + att(q))
        nbytes, tokens = wbytes + batch * n * kvpt, batch * n
    else:
        flops = batch * (flop_per_weight * p + att(n))
        nbytes, tokens = wbytes + batch * n * kvpt, batch
    t_c, t_m = flops / (roof.peak_tflops * unit), nbytes / (roof.bandwidth_tbs * unit)
    bound = force_bound or ("memory" if t_m > t_c else "compute")
    t = {"memory": t_m, "compute": t_c}[bound] if force_bound else max(t_c, t_m)
    return StepAnswer(
        flops=flops,
        bytes=nbytes,
        intensity=flops / nbytes,
        bound=bound,
        tokens_per_s=tokens / t,
    )


def _mistakes(kind: str, cfg: serving.ModelConfig) -> Iterator[tuple[str, Variant | str]]:
    """The usual mistakes: a label and _variant's keywords, or "head_dim"."""
    kv_word = "KV-cache writes" if kind == "prefill" else "KV-cache reads"
    yield f"you left out the {kv_word}", dict(kv=False)
    yield "you counted 1 FLOP per weight; a multiply-add is 2", dict(flop_per_weight=1)
    yield "you left out the attention FLOPs", dict(attention=False)
    yield (
        "you read the weights once per sequence; they are read once per step",
        dict(weights_per_seq=True),
    )
    yield "you used 2**40 for tera (TiB/s); TB/s and TFLOP/s are 10**12", dict(unit=2.0**40)
    other = "compute" if kind == "decode" else "memory"
    yield (
        f"you took this {kind} step as {other}-bound; compare the two times",
        dict(force_bound=other),
    )
    if kind == "prefill":
        yield (
            "you counted S*S/2 query-key pairs; causal attention has S*(S+1)/2",
            dict(pairs="half"),
        )
        yield "you counted S*S query-key pairs; causal attention has S*(S+1)/2", dict(pairs="full")
    if cfg.hidden // cfg.heads != cfg.head_dim:
        yield "you used hidden // heads; use cfg.head_dim", "head_dim"


def _diagnose(
    kind: str,
    field: Field,
    got: Any,
    cfg: serving.ModelConfig,
    roof: serving.Roof,
    batch: int,
    n: int,
) -> str:
    for label, change in _mistakes(kind, cfg):
        if isinstance(change, str):  # "head_dim"
            alt_cfg = replace(cfg, head_dim=cfg.hidden // cfg.heads)
            alt = _variant(kind, alt_cfg, roof, batch, n)
        else:
            alt = _variant(kind, cfg, roof, batch, n, **change)
        if field == "bound" and "force_bound" not in change:
            continue
        other = alt[field]  # a str for "bound" only
        if (got == other) if isinstance(other, str) else _close(got, other):
            return f" — looks like {label}"
    return ""


# --- checks ------------------------------------------------------------------------


def _describe(cfg: serving.ModelConfig, roof: serving.Roof) -> str:
    return (
        f"layers={cfg.layers} hidden={cfg.hidden} heads={cfg.heads} "
        f"kv_heads={cfg.kv_heads} head_dim={cfg.head_dim} vocab={cfg.vocab} "
        f"intermediate={cfg.intermediate} weight_bytes={cfg.weight_bytes:g} "
        f"kv_bytes={cfg.kv_bytes:g}; GPU {roof.bandwidth_tbs:g} TB/s, "
        f"{roof.peak_tflops:g} TFLOP/s"
    )


def _check_scalar(
    ctx: GradeContext, label: str, fn: Remote, want: float, cfg: serving.ModelConfig, where: str
) -> None:
    got, err = _try(ctx, fn, cfg)
    ok = not err and _close(got, want)
    detail = err or ("" if ok else f"got {_fmt(got)}, expected {_fmt(want)} [{where}]")
    ctx.add_case(case_row(name=label, passed=ok, detail=detail))


def _check_step(
    ctx: GradeContext,
    label: str,
    kind: str,
    fn: Remote,
    args: tuple[serving.ModelConfig, serving.Roof, int, int],
    want: StepAnswer,
) -> None:
    cfg, roof, batch, n = args
    got, err = _try(ctx, fn, *args)
    detail = err
    if not err:
        if not isinstance(got, dict):
            detail = f"returned {type(got).__name__}; expected a dict with keys {', '.join(FIELDS)}"
        elif missing := [f for f in FIELDS if f not in got]:
            detail = f"the returned dict lacks {', '.join(repr(m) for m in missing)}"
        else:
            for f in FIELDS:
                w = want[f]  # a str for "bound" only
                ok = got[f] == w if isinstance(w, str) else _close(got[f], w)
                if not ok:
                    detail = (
                        f"{f}: got {_fmt(got[f])}, expected {_fmt(want[f])}"
                        f"{_diagnose(kind, f, got[f], cfg, roof, batch, n)}"
                    )
                    if f == "bound":
                        t_c = want["flops"] / (roof.peak_tflops * 1e12)
                        t_m = want["bytes"] / (roof.bandwidth_tbs * 1e12)
                        detail += f" (compute {t_c * 1e3:.4g} ms, memory {t_m * 1e3:.4g} ms)"
                    break
    ctx.add_case(
        case_row(
            name=label,
            passed=not detail,
            detail=detail + (f" [{_describe(cfg, roof)}]" if detail else ""),
        )
    )


@dataclass(frozen=True)
class Answers:
    """A scenario's answers, worked out before the learner's file is imported."""

    weight_params: float
    kv_bytes_per_token: float
    prefill: StepAnswer
    decode: StepAnswer


def grade(ctx: GradeContext) -> None:
    # Every expected answer is computed before the learner's file is imported,
    # so nothing it does to gpulab.gpu.serving can bend them.
    plan: list[tuple[str, Scenario, Answers]] = []
    for title, (cfg, roof, batch, prompt, context) in scenarios(ctx):
        want = Answers(
            weight_params=serving.weight_params(cfg),
            kv_bytes_per_token=serving.kv_bytes_per_token(cfg),
            prefill=_answer(serving.prefill_step(cfg, roof, batch, prompt)),
            decode=_answer(serving.decode_step(cfg, roof, batch, context)),
        )
        plan.append((title, (cfg, roof, batch, prompt, context), want))
    fns = {
        name: ctx.function(name)
        for name in ("weight_params", "kv_bytes_per_token", "prefill_step", "decode_step")
    }
    for title, (cfg, roof, batch, prompt, context), want in plan:
        where = _describe(cfg, roof)
        for name, value in (
            ("weight_params", want.weight_params),
            ("kv_bytes_per_token", want.kv_bytes_per_token),
        ):
            _check_scalar(ctx, f"{title}: {name}", fns[name], value, cfg, where)
        _check_step(
            ctx,
            f"{title}: prefill {batch}×{prompt}",
            "prefill",
            fns["prefill_step"],
            (cfg, roof, batch, prompt),
            want.prefill,
        )
        _check_step(
            ctx,
            f"{title}: decode {batch}×{context}",
            "decode",
            fns["decode_step"],
            (cfg, roof, batch, context),
            want.decode,
        )
    ctx.notes.append(
        "Checked against gpulab.gpu.serving on Llama-3 8B and on configurations "
        "drawn fresh for this run; pure arithmetic, the same on every machine."
    )
