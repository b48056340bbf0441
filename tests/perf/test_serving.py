"""Lesson 09: gpulab.gpu.serving's arithmetic, the `gpulab serving` calculator, and
the serving_roofline grader end to end in real child processes (reference
passes, starter fails, each classic mistake fails and is named)."""

from __future__ import annotations

import importlib.util
import io
import json
import random

import pytest

from gpulab.gpu import serving, serving_models
from gpulab.gpu.hardware import match_gpu
from tests.conftest import REPO, reference_source, starter_source

REF = reference_source("serving_roofline")
LLAMA = serving_models.PRESETS["llama-3-8b"]


def h(name: str, weights: str = "bf16") -> serving.Roof:
    return serving.roof_for(match_gpu(name), weights)


# --- the arithmetic ------------------------------------------------------------------


def test_llama3_8b_shapes_and_sizes():
    assert serving.weight_params(LLAMA) == 7_504_658_432  # what a step multiplies through
    assert LLAMA.total_params() == 8_029_995_008  # + the 128256 x 4096 embedding table
    # GQA: 8 KV heads x 128 x 32 layers x (K and V) x 2 bytes = 128 KiB per token.
    assert serving.kv_bytes_per_token(LLAMA) == 128 * 1024
    assert serving.kv_bytes_per_token(LLAMA.with_dtypes("bf16", "fp8")) == 64 * 1024
    assert serving_models.PRESETS["llama-3-70b"].total_params() == pytest.approx(70.55e9, rel=1e-3)


def test_ridges_and_decode_on_h100_h200():
    assert h("h100").ridge == pytest.approx(295.2, abs=0.1)
    assert h("h200").ridge == pytest.approx(206.0, abs=0.1)
    step = serving.decode_step(LLAMA, h("h200"), 1, 4096)
    assert step.bound == "memory"
    # 15.01 GB of weights + 0.54 GB of KV at 4.8 TB/s: 3.24 ms a token.
    assert step.bytes == pytest.approx(15.546e9, rel=1e-3)
    assert step.tokens_per_s == pytest.approx(308.76, rel=1e-4)
    pre = serving.prefill_step(LLAMA, h("h200"), 1, 2048)
    assert pre.bound == "compute" and pre.intensity > 2000


def test_decode_intensity_is_about_the_batch_in_bf16():
    # Short context: KV traffic is negligible, so FLOP/byte ~ 2*P*B / (2*P) = B.
    for b in (1, 8, 64, 256):
        assert serving.decode_step(LLAMA, h("h200"), b, 1).intensity == pytest.approx(b, rel=0.02)
    # fp8 weights halve the bytes: intensity ~ 2B; int4: ~ 4B.
    assert serving.decode_step(
        LLAMA.with_dtypes("fp8"), h("h200", "fp8"), 8, 1
    ).intensity == pytest.approx(16, rel=0.02)
    assert serving.decode_step(
        LLAMA.with_dtypes("int4"), h("h200", "int4"), 8, 1
    ).intensity == pytest.approx(32, rel=0.02)


def test_long_context_decode_never_reaches_the_ridge():
    assert serving.decode_intensity_limit(LLAMA, 4096) == pytest.approx(31.96, rel=1e-3)
    assert serving.decode_batch_to_ridge(LLAMA, h("h200"), 4096) is None
    b = serving.decode_batch_to_ridge(LLAMA, h("h200"), 128)
    assert b is not None and 200 < b < 300
    assert serving.decode_step(LLAMA, h("h200"), int(b) + 1, 128).bound == "compute"
    assert serving.decode_step(LLAMA, h("h200"), int(b) - 1, 128).bound == "memory"


def test_compute_dtype_follows_the_weights_and_the_gpu():
    assert serving.compute_dtype("fp8", match_gpu("h200")) == "fp8"
    assert serving.compute_dtype("int4", match_gpu("h200")) == "bf16"  # W4A16
    assert serving.compute_dtype("fp8", match_gpu("a100-80gb")) == "bf16"  # no fp8 cores


def test_memory_capacity_is_read_as_gib():
    """Issue 47: a datasheet's "141 GB" is GiB (an H200 reports 140.4 GiB,
    benchmarks/h200-2026-11-30/probe.json); read as 10^9 bytes, 70B in bf16
    did not fit on an H200 and only 232 8B sequences of 4096 tokens did."""
    h200 = match_gpu("h200")
    big = serving.calculate(serving_models.PRESETS["llama-3-70b"], h200, batch=1, context=4096)
    assert big["memory_capacity_gb"] == pytest.approx(141 * 2**30 / 1e9)  # 151.4
    assert 142 < big["memory_needed_gb"] < 143 and big["decode_sweep"][0]["fits"]
    fits = [r["fits"] for r in serving.calculate(LLAMA, h200, context=4096)["decode_sweep"]]
    assert fits == [True, True, True, True, False, False]  # batch 64 fits, 256 does not
    cfg = LLAMA.with_dtypes()
    assert (
        serving.memory_needed(cfg, 250, 4096)
        <= 140.4 * 2**30
        < serving.memory_needed(cfg, 251, 4096)
    )


def test_fp8_weights_move_the_roof_only_with_fp8_activations():
    """W8A8 runs on the fp8 tensor cores; weight-only fp8 keeps the bf16 roof
    (same bytes, so decode is as fast; prefill is not), and the calculator says which."""
    h200, m = match_gpu("h200"), serving_models.PRESETS["llama-3-70b"]
    assert serving.compute_dtype("fp8-a16", h200) == "bf16"
    w8a8 = serving.calculate(m, h200, batch=1, prompt=2048, weights="fp8")
    w8a16 = serving.calculate(m, h200, batch=1, prompt=2048, weights="fp8-a16")
    assert (w8a8["peak_tflops"], w8a16["peak_tflops"]) == (1979, 989)
    assert w8a8["decode"]["tokens_per_s"] == w8a16["decode"]["tokens_per_s"]
    assert w8a8["prefill"]["tokens_per_s"] > 1.9 * w8a16["prefill"]["tokens_per_s"]
    assert "W8A8" in w8a8["precision"] and "W8A16" in w8a16["precision"]
    assert (w8a8["precision_tag"], w8a16["precision_tag"]) == ("W8A8", "W8A16")
    assert "bf16 roof" in w8a16["precision"]
    no_fp8 = serving.calculate(m, match_gpu("a100-80gb"), weights="fp8")
    assert no_fp8["compute_dtype"] == "bf16" and "no fp8 tensor cores" in no_fp8["precision"]


def test_hf_config_json(tmp_path):
    good = {
        "num_hidden_layers": 32,
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "intermediate_size": 14336,
        "tie_word_embeddings": False,
    }
    path = tmp_path / "llama" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(good))
    cfg = serving_models.find_model(str(path))
    assert serving.weight_params(cfg) == serving.weight_params(LLAMA)
    assert cfg.head_dim == 128 and cfg.name == "llama"
    for broken, why in (
        [{k: v for k, v in good.items() if k != "vocab_size"}, "'vocab_size' is missing"],
        [{**good, "hidden_size": -1}, "'hidden_size' must be a positive integer"],
        ["[1, 2]", "expected a JSON object"],
        ["{not json", "not valid JSON"],
    ):
        path.write_text(broken if isinstance(broken, str) else json.dumps(broken))
        with pytest.raises(ValueError, match=why) as exc:
            serving_models.find_model(str(path))
        assert str(path) in str(exc.value)
    with pytest.raises(ValueError, match="unknown model 'gpt-9'"):
        serving_models.find_model("gpt-9")


class _Ctx:
    def __init__(self, secret: int) -> None:
        self.secret = secret

    def seed(self, public: int) -> int:
        return (public * 1_000_003 + self.secret) % (2**31 - 1)


def test_grader_draws_sound_unseen_configurations():
    from gpulab.judge.graders import serving_roofline as grader

    spec = importlib.util.spec_from_file_location(
        "ref_serving", REPO / "kernels" / "serving_roofline.py"
    )
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    seen = set()
    for secret in random.Random(0).sample(range(2**31), 25):
        plan = grader.scenarios(_Ctx(secret))
        assert plan[1][1][0].head_dim != plan[1][1][0].hidden // plan[1][1][0].heads
        _, (cfg, roof, batch, prompt, context) = plan[-2]
        assert serving.decode_step(cfg, roof, batch, context).bound == "compute"
        _, (cfg, roof, batch, prompt, context) = plan[-1]
        assert serving.prefill_step(cfg, roof, batch, prompt).bound == "memory"
        for _, (cfg, roof, batch, _prompt, context) in plan:
            want = serving.decode_step(cfg, roof, batch, context).as_dict()
            got = ref.decode_step(cfg, roof, batch, context)
            assert (
                all(
                    got[k] == pytest.approx(want[k], rel=1e-9)
                    for k in grader.FIELDS
                    if k != "bound"
                )
                and got["bound"] == want["bound"]
            )
            seen.add(cfg.layers)
    assert len(seen) > 20  # the secret seed really changes the configurations


# --- the calculator -----------------------------------------------------------------------


def test_serving_command_json(run_gpulab):
    r = run_gpulab("serving", "--gpu", "h200", "--batch", "8", "--context", "4096", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["decode"]["bound"] == "memory" and d["prefill"]["bound"] == "compute"
    assert d["decode"]["tokens_per_s"] == pytest.approx(
        serving.decode_step(LLAMA, h("h200"), 8, 4096).tokens_per_s
    )
    assert d["kv_bytes_per_token"] == 131072 and d["decode_batch_to_ridge"] is None


def test_serving_command_text_and_errors(run_gpulab, tmp_path):
    r = run_gpulab(
        "serving", "--model", "llama-3-70b", "--gpu", "h100", "--weights", "fp8", "--batch", "64"
    )
    assert r.returncode == 0, r.stderr
    assert "ridge" in r.stdout and "decode" in r.stdout and "tokens/s" in r.stdout
    assert "fp8" in r.stdout and "H100" in r.stdout
    r = run_gpulab("serving", "--gpu", "h200", "--plot")
    assert r.returncode == 0, r.stderr
    plot = r.stdout.split("H200 bf16 roofline", 1)
    assert len(plot) == 2, r.stdout + r.stderr  # gpulab.gpu.roofline drew it
    assert "prefill" in plot[1] and "decode" in plot[1]
    r = run_gpulab("serving", "--models")
    assert r.returncode == 0 and "llama-3.1-405b" in r.stdout
    r = run_gpulab("serving", "--model", "gpt-9")
    assert r.returncode == 2 and "unknown model 'gpt-9'" in r.stderr
    r = run_gpulab("serving", "--gpu", "nosuchgpu")
    assert r.returncode == 2 and "unknown GPU" in r.stderr
    r = run_gpulab("serving", "--batch", "0")
    assert r.returncode == 2 and "batch must be a whole number of at least 1" in r.stderr
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 10}')
    r = run_gpulab("serving", "--model", str(bad))
    assert r.returncode == 2 and str(bad) in r.stderr and "num_hidden_layers" in r.stderr


def test_the_cli_prints_the_panes_units(run_gpulab):
    """`gpulab serving` and the Serving pane format with gpulab.gpu.units: a prefill of
    hours reads "2.19 h" in both (the CLI's own copy printed "7.9e+03 s")."""
    from gpulab.gpu import units

    args = (
        "--model",
        "llama-3.1-405b",
        "--gpu",
        "h100",
        "--batch",
        "64",
        "--prompt",
        "100000",
        "--context",
        "100000",
    )
    d = json.loads(run_gpulab("serving", *args, "--json").stdout)
    r = run_gpulab("serving", *args)
    assert r.returncode == 0, r.stderr
    assert units.duration(d["prefill"]["seconds"]).endswith(" h")
    pytest.importorskip("textual")
    from rich.console import Console

    from gpulab.tui.serving_pane import results_renderable

    con = Console(width=100, record=True, file=io.StringIO())
    con.print(results_renderable(d, "default"))
    pane = con.export_text()
    for step in ("prefill", "decode"):
        s = d[step]
        for cell in (
            units.si(s["flops"], ""),
            units.si(s["bytes"], "B"),
            units.intensity(s["intensity"]),
            units.duration(s["seconds"]),
            units.tokens(s["tokens_per_s"]),
        ):
            assert cell in r.stdout and cell in pane, (step, cell)


def test_the_cli_and_the_pane_share_one_step_table(run_gpulab, tmp_path):
    """One builder (gpulab.gpu.serving_view) for both: at 60 columns the CLI's
    own copy cut its figures, as the pane's row table once did; now both
    turn to a step a column."""
    from tests.conftest import gpulab_env

    env = gpulab_env(tmp_path / "workspace", COLUMNS="60")
    r = run_gpulab("serving", "--gpu", "h200", "--batch", "8", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(line.split() == ["prefill", "decode"] for line in lines), r.stdout
    assert all(len(line) <= 60 for line in lines), r.stdout
    wide = run_gpulab("serving", "--gpu", "h200", "--batch", "8")
    assert any(line.split()[:2] == ["prefill", "8×2048"] for line in wide.stdout.splitlines())


# --- the grader, end to end -------------------------------------------------------------


def failures(r: dict) -> list[tuple[str, str]]:
    return [(c["name"], c.get("detail", "")) for c in r["cases"] if not c["passed"]]


def test_reference_passes(grade):
    r = grade("serving_roofline", REF, shared=True)
    assert r["passed"], (r["summary"], failures(r))
    assert len(r["cases"]) == 4 * 7


def test_starter_fails(grade):
    r = grade("serving_roofline", starter_source("serving_roofline"), shared=True)
    assert r["status"] == "failed"
    assert len(failures(r)) == len(r["cases"])


def variant(src: str, old: str, new: str) -> str:
    assert old in src, f"variant anchor not found: {old!r}"
    return src.replace(old, new)


DECODE_BYTES = "nbytes = p * cfg.weight_bytes + batch * context * kv_bytes_per_token(cfg)"
DECODE_FLOPS = "flops = batch * (2 * p + _attention_flops(cfg, context))"
PAIRS = "pairs = prompt_len * (prompt_len + 1) / 2"
# Each learner file makes one mistake in prefill and another in decode.
WRONG = {
    "no KV reads / S*S/2 pairs": (
        variant(
            variant(REF, DECODE_BYTES, "nbytes = p * cfg.weight_bytes"),
            PAIRS,
            "pairs = prompt_len * prompt_len / 2",
        ),
        "S*S/2 query-key pairs",
        "left out the KV-cache reads",
    ),
    "TiB / params as FLOPs": (
        variant(
            variant(REF, DECODE_FLOPS, "flops = batch * (p + _attention_flops(cfg, context))"),
            "def _roofline(flops: float, nbytes: float, tokens: float, gpu) -> dict:\n",
            "def _roofline(flops: float, nbytes: float, tokens: float, gpu) -> dict:\n"
            "    gpu = type('G', (), {'peak_tflops': gpu.peak_tflops * 2**40 / 1e12,\n"
            "                         'bandwidth_tbs': gpu.bandwidth_tbs * 2**40 / 1e12})\n",
        ),
        "2**40",
        "1 FLOP per weight",
    ),
    "weights per sequence / decode as compute-bound": (
        variant(
            variant(
                REF,
                "nbytes = p * cfg.weight_bytes + batch * prompt_len",
                "nbytes = batch * p * cfg.weight_bytes + batch * prompt_len",
            ),
            "    return _roofline(flops, nbytes, batch, gpu)",
            "    r = _roofline(flops, nbytes, batch, gpu)\n"
            "    r['bound'] = 'compute'\n"
            "    r['tokens_per_s'] = batch / (flops / (gpu.peak_tflops * 1e12))\n"
            "    return r",
        ),
        "once per sequence",
        "as compute-bound",
    ),
}


@pytest.mark.parametrize("name", list(WRONG))
def test_classic_mistakes_fail_and_are_named(grade, name):
    src, prefill_why, decode_why = WRONG[name]
    r = grade("serving_roofline", src)
    assert r["status"] == "failed"
    bad = failures(r)
    prefill = [d for n, d in bad if ": prefill" in n]
    decode = [d for n, d in bad if ": decode" in n]
    assert prefill and decode, bad
    assert any(prefill_why in d for d in prefill), prefill
    assert any(decode_why in d for d in decode), decode
    # Nothing else is blamed: the scalar functions are right in every variant.
    assert all(": prefill" in n or ": decode" in n for n, _ in bad)


def test_hidden_over_heads_instead_of_head_dim_fails(grade):
    src = REF.replace("cfg.head_dim", "(cfg.hidden // cfg.heads)")
    r = grade("serving_roofline", src)
    assert r["status"] == "failed"
    # Llama-3 8B has head_dim == hidden // heads; the first unseen config never does.
    bad = dict(failures(r))
    assert "unseen config 1: weight_params" in bad
    assert (
        "use cfg.head_dim" in bad[next(n for n in bad if n.startswith("unseen config 1: decode"))]
    )


def test_serving_refuses_inconsistent_inputs_naming_the_field(run_gpulab):
    """One line on stderr naming the field, exit 2; nothing computed at a
    context the prompt or the model cannot have."""
    for args, words in (
        (("--prompt", "4096", "--context", "2048"), ("prompt", "longer than the context")),
        (("--context", "32768"), ("context", "llama-3-8b's 8,192-token context window")),
        (
            ("--model", "llama-3-70b", "--prompt", "9000", "--context", "9000"),
            ("context", "8,192-token"),
        ),
        (("--model", "llama-3-7b"), ("did you mean", "llama-3-8b")),
    ):
        r = run_gpulab("serving", *args)
        assert r.returncode == 2, (args, r.stdout)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == "", (args, r.stderr)
        assert all(w in r.stderr for w in words), (args, r.stderr)
    # Spelling variants of a preset are that preset (said on stderr); --context
    # alone below the default prompt shortens the prompt instead of failing.
    r = run_gpulab("serving", "--model", "llama3-8b", "--context", "128", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == "llama-3-8b" and d["prompt"] == 128 and d["max_context"] == 8192
    assert "taking 'llama3-8b' as llama-3-8b" in r.stderr


def test_check_inputs_and_model_suggestions():
    with pytest.raises(serving.InputError) as exc:
        serving.check_inputs(LLAMA, batch=1, prompt=5000, context=4096)
    assert exc.value.field == "prompt"
    with pytest.raises(serving.InputError) as exc:
        serving.check_inputs(LLAMA, batch=1, prompt=10, context=8193)
    assert exc.value.field == "context"
    serving.check_inputs(LLAMA, batch=1, prompt=8192, context=8192)  # the whole window
    assert serving_models.model_suggestions("qwen-7b") == ["qwen2.5-7b"]
    assert serving_models.find_model("Llama 3 8B") is LLAMA
    assert all(m.max_context for m in serving_models.PRESETS.values())


def test_a_config_json_gives_its_context_window_and_consistent_heads(tmp_path):
    good = {
        "num_hidden_layers": 2,
        "hidden_size": 256,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "intermediate_size": 512,
        "max_position_embeddings": 2048,
    }
    path = tmp_path / "tiny" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(good))
    assert serving_models.find_model(str(path)).max_context == 2048
    for broken, why in (
        ({**good, "num_key_value_heads": 3}, "'num_key_value_heads' .3. must divide"),
        ({**good, "hidden_size": 250}, "'head_dim' is missing"),
        ({**good, "max_position_embeddings": 0}, "'max_position_embeddings'"),
    ):
        path.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=why):
            serving_models.find_model(str(path))
