"""The measured figures the course quotes, pinned to the raw files they come from.

Each figure is recomputed here from the committed JSON in benchmarks/ and
looked for, as the lessons print it, in the files that quote it. A rerun that
changes a raw file, or an edit that changes a quoted number, fails here until
both agree again. A second test keeps figures the repo's own measurements
replaced from coming back.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from gpulab.gpu.hardware import GPUS

REPO = Path(__file__).resolve().parents[2]
RAW = REPO / "benchmarks"
DAY = RAW / "h200-2026-11-30"

L01, L02, L03, L04, L05, L06, L07, L08, L09 = (
    f"lessons/{d}/lesson.md"
    for d in (
        "01_gpu_architecture_tour",
        "02_triton_101_softmax",
        "03_triton_tiled_matmul",
        "04_triton_flashattention",
        "05_fused_rope_rmsnorm",
        "06_torch_compile_deep_dive",
        "07_nsight_profiling",
        "08_jax_sharding_pipeline",
        "09_roofline_analysis_serving",
    )
)
GLOSSARY, DOC = "lessons/glossary.toml", "docs/hardware.md"


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def text(rel: str) -> str:
    # Lines are rewrapped freely: compare with whitespace (and TOML's
    # backslash line continuations) collapsed.
    raw = (REPO / rel).read_text(encoding="utf-8").replace("\\\n", " ")
    return " ".join(raw.split())


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def bench_rows(kernel: str, baseline: str = "") -> list[dict]:
    return [
        r
        for r in load(RAW / "h200.json")["results"]
        if r["kernel"] == kernel and baseline in r["baseline"]
    ]


def attention_tflops(shape: str, ms: float) -> float:
    B, H, Sq, Sk, D = map(int, re.findall(r"\d+", shape)[:5])
    return 4 * B * H * Sq * Sk * D / (2 if "causal" in shape else 1) / (ms * 1e-3) / 1e12


def figures() -> list[tuple[str, str, list[str]]]:
    """(what, the figure as quoted, files that quote it)."""
    out = []
    probe = load(DAY / "microbench-quick.json")
    out += [
        ("copy TB/s", f"{probe['copy_tbs']:.2f} TB/s", [L01, DOC]),
        ("read TB/s", f"{probe['read_tbs']:.2f} TB/s", [L01, DOC]),
        ("write TB/s", f"{probe['write_tbs']:.2f} TB/s", [L01, DOC]),
        ("cuBLAS bf16 best", f"{probe['tflops']['bf16']:.0f} TFLOP/s", [L01, "BENCHMARKS.md"]),
        ("FMA", f"{probe['fma_tflops']:.1f} TFLOP/s", [L01, DOC, "BENCHMARKS.md"]),
        ("tf32", f"{probe['tflops']['tf32']:.0f}", [L01, DOC, GLOSSARY, "BENCHMARKS.md"]),
        ("fp8", f"{probe['tflops']['fp8']:.0f} TFLOP/s", [DOC, "BENCHMARKS.md"]),
    ]
    sweep = {(s["name"], s["size_bytes"] >> 20): s["tbs"] for s in probe["sweep"]}
    out += [
        ("16 MiB copy from L2", f"{sweep['copy', 16]:.1f} TB/s", [L01, DOC, GLOSSARY]),
        ("256 MiB copy", f"{sweep['copy', 256]:.2f}", [L01, DOC]),
        ("64 MiB read", f"{sweep['read', 64]:.2f} TB/s", [L01]),
    ]

    cublas = {
        r["shape"].split(" @")[0]: r["baseline_ms"]
        for r in bench_rows("matmul", "cuBLAS")
        if r["dtype"] == "bf16"
    }
    t4096 = 2 * 4096**3 / (cublas["4096×4096"] * 1e-3) / 1e12
    t8192 = 2 * 8192**3 / (cublas["8192×8192"] * 1e-3) / 1e12
    out += [
        ("cuBLAS 4096³ µs", f"{cublas['4096×4096'] * 1e3:.1f} µs", [L03, DOC]),
        ("cuBLAS 4096³", f"{t4096:.0f} TFLOP/s", [L03, DOC]),
        ("cuBLAS 8192³", f"{t8192:.0f} TFLOP/s", [DOC]),
        (
            "cuBLAS range",
            f"{probe['tflops']['bf16']:.0f}–{t4096:.0f}",
            [L01, L08, L09, DOC, GLOSSARY],
        ),
    ]

    rope = {r["baseline"]: r for r in bench_rows("rope_rmsnorm") if r["shape"].startswith("1×")}
    eager, compiled = rope["eager chain"]["baseline_ms"], rope["torch.compile"]["baseline_ms"]
    ours = rope["torch.compile"]["ms"]
    out += [
        ("eager rope", f"{eager:.2f} ms", [L05, L06, GLOSSARY]),
        ("compiled rope", f"{compiled * 1e3:.1f} µs", [L05, L06, DOC, GLOSSARY]),
        ("our rope", f"{ours * 1e3:.1f} µs", [L05, L06, DOC]),
        ("rope vs compile", f"{compiled / ours:.2f}×", [L05, L06]),
        ("compile vs eager", f"{round(eager / compiled)}×", [L06, GLOSSARY]),
        ("rope vs eager", f"{round(eager / ours)}×", [L05, L07]),
    ]

    flash = [
        attention_tflops(r["shape"], r["baseline_ms"])
        for r in bench_rows("flash_attention", "flash")
    ]
    cudnn = [
        attention_tflops(r["shape"], r["baseline_ms"])
        for r in bench_rows("flash_attention", "cuDNN")
    ]
    out += [
        ("SDPA flash", f"{min(flash):.0f} – {max(flash):.0f}", [L04]),
        ("SDPA cuDNN", f"{min(cudnn):.0f} – {max(cudnn):.0f}", [L04]),
        ("SDPA cuDNN range", f"{min(cudnn):.0f}–{max(cudnn):.0f}", [DOC, GLOSSARY]),
    ]
    fa3 = {r["baseline"]: r["speedup"] for r in bench_rows("flash_attention")}
    vs = {
        b: geomean([r["speedup"] for r in bench_rows("flash_attention", b)])
        for b in ("flash", "cuDNN")
    }
    out.append(("FA3 vs cuDNN", f"{vs['cuDNN']:.2f}× cuDNN", [L04]))
    assert fa3

    sweep_rows = load(DAY / "attention-sweep-full.json")["rows"]
    best: dict[str, dict] = {}
    for r in sweep_rows:
        if r.get("family") == "fa2" and r.get("ok"):
            if r["case"] not in best or r["tflops"] > best[r["case"]]["tflops"]:
                best[r["case"]] = r
    fa2 = [r["tflops"] for r in best.values()]
    xf = [r["x_flash"] for r in best.values()]
    xc = [r["x_cudnn"] for r in best.values()]
    out += [
        ("plain FA2", f"{min(fa2):.0f} – {max(fa2):.0f}", [L04]),
        ("plain FA2 vs flash", f"{min(xf):.2f}–{max(xf):.2f}×", [L04, DOC]),
        ("plain FA2 vs cuDNN", f"{min(xc):.2f}–{max(xc):.2f}×", [L04, DOC]),
    ]

    grouped = [
        r
        for r in load(DAY / "matmul-sweep-full.json")["rows"]
        if r.get("variant", "").startswith("grouped")
    ]
    gx = [r["x_cublas"] for r in grouped]
    gt = [r["tflops"] for r in grouped]
    out += [
        ("grouped matmul vs cuBLAS", f"{min(gx):.2f}–{max(gx):.2f}×", [L03, GLOSSARY]),
        ("grouped matmul TFLOP/s", f"{min(gt):.0f}–{max(gt):.0f}", [L03]),
    ]

    rows: dict[tuple, float] = {}
    for r in load(DAY / "softmax-sweep.json"):
        if r["variant"].startswith("row "):
            key = (tuple(r["shape"]), r["dtype"])
            rows[key] = max(rows.get(key, 0.0), r["tbs"])
    one_row = geomean([v / probe["copy_tbs"] for v in rows.values()])
    out.append(("one-row softmax", f"about {one_row * 100:.0f}%", [L02, "exercises/softmax.py"]))

    warm = next(
        r
        for r in load(DAY / "timing-validation-first-warmup.json")["rows"]
        if "matmul" in r["kernel"]
    )
    out += [
        ("clock under the cap", f"{warm['clocks']['sm_mhz_median']:.0f} MHz", [L01, DOC, GLOSSARY]),
        ("warm-up disagreement", f"{warm['run_to_run'] * 100:.1f}%", [L01, DOC]),
    ]
    fixed = next(
        c
        for c in load(DAY / "check_graph_breaks.json")["timing"]["cases"]
        if c["name"] == "your step (eager)" and c["shape"].startswith("8×256×256")
    )
    out += [
        ("fixed step kernels", f"{fixed['kernels']} kernels", [L06]),
        ("fixed step µs", f"{fixed['ms'] * 1e3:.0f} µs", [L06]),
    ]
    triad = bench_rows("bandwidth")[0]
    out.append(("triad µs", f"{triad['ms'] * 1e3:.1f} µs", [L01]))
    out += more_figures(probe, rows)
    return out


def more_figures(probe: dict, one_row: dict) -> list[tuple[str, str, list[str]]]:
    """Figures issue 29 found drifting or unchecked in the course's prose."""
    out = [
        (
            "read and write prose",
            f"pure reads reach {probe['read_tbs']:.2f} and pure writes {probe['write_tbs']:.2f}",
            [L01],
        )
    ]
    # The clock of cuBLAS bf16 in the probe run, under the power cap at both sizes.
    bf16 = {r["shape"]: r["clocks"] for r in probe["matmul"] if r["name"] == "bf16"}
    small, large = bf16["4096x4096x4096"], bf16["8192x8192x8192"]
    assert (
        "sw_power_cap" in small["throttle_reasons"] and "sw_power_cap" in large["throttle_reasons"]
    )
    line = 0.8 * small["sm_mhz_max_supported"]  # gpulab.measure.timing's throttle line
    assert large["sm_mhz_median"] < line <= small["sm_mhz_median"]
    out += [
        ("4096³ clock", f"4096³ bf16 ran at {small['sm_mhz_median']:.0f} MHz", [L01, DOC]),
        ("4096³ clock, glossary", f"4096³ bf16 at {small['sm_mhz_median']:.0f} MHz", [GLOSSARY]),
        ("8192³ clock", f"8192³ at {large['sm_mhz_median']:.0f} MHz", [L01, DOC]),
        ("throttle line", f"({line:.0f} MHz)", [L01]),
    ]

    # Softmax on both roofs: the lesson kernel and the graded reference.
    datasheet = GPUS["h200"].bandwidth_tbs
    lesson = geomean([v / datasheet for v in one_row.values()])
    graded = load(DAY / "check_softmax.json")["timing"]
    on_copy = geomean([c["throughput"] / 1e3 / probe["copy_tbs"] for c in graded["cases"]])
    out += [
        ("one-row softmax, datasheet", f"about {lesson * 100:.0f}% of the datasheet", [L02]),
        (
            "one-row softmax, datasheet (starter)",
            f"about {lesson * 100:.0f}%",
            ["exercises/softmax.py"],
        ),
        ("reference softmax, copy", f"about {on_copy * 100:.0f}% of the measured copy", [L02]),
        ("reference softmax, copy (docs)", f"{on_copy * 100:.0f}% of the 4.25 TB/s copy", [DOC]),
        (
            "reference softmax, datasheet",
            f"{graded['roofline_fraction'] * 100:.0f}% of the",
            [L02, DOC],
        ),
    ]

    # Lesson 05's 16 heads a program against 32, each tile fixed.
    tiles = load(DAY / "rope-probe-tiles.json")["rows"]
    t16 = [r["t2048w4"] for r in tiles]
    t32 = [r["t4096w4"] for r in tiles]
    assert "BLOCK_H: 16" in t16[0]["config"] and "BLOCK_H: 32" in t32[0]["config"]
    out += [
        ("16 heads, 1×", f"took {t16[0]['us']:.1f} µs", [L05]),
        ("32 heads, 1×", f"against {t32[0]['us']:.1f} µs with all 32 heads", [L05]),
        ("16 against 32, 4×", f"({t16[1]['us']:.1f} against {t32[1]['us']:.1f} µs", [L05]),
        (
            "16 heads graded, datasheet",
            f"reached {geomean([t['tbs'] / datasheet for t in t16]) * 100:.0f}% of the",
            [L05],
        ),
        (
            "16 heads graded, copy",
            f"and {geomean([t['tbs'] / probe['copy_tbs'] for t in t16]) * 100:.0f}% of the 4.25",
            [L05],
        ),
        (
            "32 heads graded",
            f"{geomean([t['tbs'] / datasheet for t in t32]) * 100:.0f}% of the datasheet, "
            f"{geomean([t['tbs'] / probe['copy_tbs'] for t in t32]) * 100:.0f}% of the copy",
            [L05],
        ),
    ]

    # Lesson 06: the compile modes at 8×256×256.
    modes = {
        c["name"]: c
        for c in load(DAY / "check_graph_breaks.json")["timing"]["cases"]
        if c["shape"].startswith("8×256×256")
    }
    graphed = modes["torch.compile reduce-overhead"]["ms"] * 1e3
    compiled = modes["torch.compile default"]["ms"] * 1e3
    # ...and a profile of the same step under reduce-overhead (raw text).
    prof06 = (RAW / "h200-2026-12-03-pm" / "compile-modes-profile.txt").read_text("utf-8")
    ro = re.search(
        r"== reduce-overhead: step ([\d.]+) us .*?kernel device time ([\d.]+) us/step\n"
        r"((?:  .*\n)+)",
        prof06,
    )
    assert ro, "no reduce-overhead block"
    top = [
        (float(m[1]), m[2]) for m in re.finditer(r"^\s+([\d.]+) us\s+[\d.]+x (.*)$", ro[3], re.M)
    ]
    topk = sum(us for us, n in top if "mbtopk" in n or "radix_sort" in n)
    mm = sum(us for us, n in top if "sgemm" in n or "gemm_f32" in n)
    copies = sum(us for us, n in top if "Memcpy" in n)
    assert 120 <= topk <= 130 and 125 <= mm <= 135, (topk, mm)
    out += [
        ("profiled reduce-overhead step", f"{float(ro[1]):.0f} µs a step", [L06]),
        ("profiled reduce-overhead kernels", f"busy for {float(ro[2]):.0f} µs", [L06]),
        ("profiled graph input copies", f"buffers add {copies:.0f} µs", [L06]),
        ("profiled fp32 matmuls vs floor", f"{mm / 56:.1f} times the 56 µs floor", [L06]),
    ]
    out += [
        ("reduce-overhead µs", f"still took {graphed:.0f} µs", [L06]),
        ("compile → graphs", f"{compiled:.0f} → {graphed:.0f} µs at 8×256×256", [L06]),
    ]

    # Lesson 07: the profiled step, not steady state.
    prof = load(DAY / "check_nvtx_profile.json")["timing"]["profile"]
    ranges = {r["name"]: r["ms"] for r in prof["ranges"]}
    buffers = next(o for o in prof["top_ops"] if o["name"] == "Activity Buffer Request")

    # The recorded kernel list, from before the sandbox left ranges out
    # (tests/perf/test_profile_kernels.py), also holds a record_function range as
    # the GPU saw it (torch.profiler's gpu_user_annotation):
    # `Optimizer.step#SGD.step` is a span of the optimizer's kernels, gaps
    # included, not a kernel.
    def is_range(k: dict) -> bool:  # "Optimizer.step#SGD.step", not "...{lambda()#1}(...)"
        return "#" in k["name"] and "(" not in k["name"]

    annotation = next(k for k in prof["top_kernels"] if is_range(k))
    kernels = sum(k["device_ms"] for k in prof["top_kernels"] if not is_range(k))
    assert len(prof["top_kernels"]) == 10
    out += [
        ("profiled step", f"took {ranges['train_step']:.2f} ms", [L07]),
        ("profiled optimizer", f"`optimizer_step` {ranges['optimizer_step']:.2f} ms", [L07]),
        ("profiler buffers", f"took {buffers['self_cpu_ms']:.1f} ms of CPU", [L07]),
        ("profiled kernels", f"nine busiest kernels add up to {kernels:.2f} ms", [L07]),
        (
            "profiled optimizer range",
            f"`{annotation['name']}` at {annotation['device_ms']:.2f} ms, is no kernel",
            [L07],
        ),
    ]
    return out + expert_figures(probe, one_row, prof)


def expert_figures(probe: dict, one_row: dict, prof: dict) -> list[tuple[str, str, list[str]]]:
    """Figures a second expert read of issue 29 found unpinned or on two roofs."""
    from gpulab.gpu.serving import Roof, decode_step, prefill_step
    from gpulab.gpu.serving_models import find_model

    # Lesson 02: the one-row kernel shape by shape, on the probe's copy.
    pct = {k: v / probe["copy_tbs"] * 100 for k, v in one_row.items()}
    edge = {((8192, 1024), "torch.float16"), ((2048, 32768), "torch.float16")}
    rest = [v for k, v in pct.items() if k not in edge]
    quoted = (
        f"{pct[(8192, 1024), 'torch.float16']:.0f}% on 8192×1024 fp16, "
        f"{pct[(2048, 32768), 'torch.float16']:.0f}% on 2048×32768 fp16, "
        f"{min(rest):.0f}–{max(rest):.0f}% on the other six"
    )
    out = [("one-row softmax per shape", quoted, [L02])]

    # Lesson 05: torch.compile and the reference on one roof, the bench's own copy.
    bench = load(RAW / "h200.json")
    copy = bench["ceilings"]["copy_tbs"]
    rope = {r["baseline"]: r for r in bench_rows("rope_rmsnorm") if r["shape"].startswith("1×")}
    nbytes = 2 * 16384 * 32 * 128 * 2 + 2 * 16384 * 64 * 4
    compiled = nbytes / (rope["torch.compile"]["baseline_ms"] * 1e-3) / 1e12
    ours = nbytes / (rope["torch.compile"]["ms"] * 1e-3) / 1e12
    out += [
        (
            "rope on the bench's copy",
            f"{compiled / copy * 100:.0f}% of the {copy:.2f} TB/s copy the bench",
            [L05],
        ),
        ("reference rope on the bench's copy", f"{ours / copy * 100:.0f}% of that copy", [L05]),
    ]

    # Lesson 04: the Gluon kernel against the CUDA FlashAttention-2.
    flash = geomean([r["speedup"] for r in bench_rows("flash_attention", "flash")])
    out.append(("FA3 vs flash", f"{flash:.2f}× the CUDA FlashAttention-2", [L04]))

    # Lesson 07: the lessons' matmul at 8192³, and the profiled addmm calls.
    mm = next(
        r
        for r in bench_rows("matmul")
        if r["shape"].startswith("8192×8192") and r["dtype"] == "bf16"
    )
    addmm = next(o for o in prof["top_ops"] if o["name"] == "aten::addmm")
    out += [
        (
            "reference matmul 8192³",
            f"a matmul at {2 * 8192**3 / (mm['ms'] * 1e-3) / 1e12:.0f}",
            [L07],
        ),
        ("profiled addmm", f"three `addmm` calls {addmm['cpu_total_ms']:.1f} ms", [L07]),
    ]

    # Lesson 09: the ideal serving figures at the measured ceilings.
    cfg = find_model("llama-3-8b")
    lo, hi = sorted(
        decode_step(cfg, Roof("h200", bw, 989.0), 1, 4096).tokens_per_s
        for bw in (probe["copy_tbs"], probe["read_tbs"])
    )
    cublas = [probe["tflops"]["bf16"]] + [
        2 * 4096**3 / (r["baseline_ms"] * 1e-3) / 1e12
        for r in bench_rows("matmul", "cuBLAS")
        if r["shape"].startswith("4096×4096") and r["dtype"] == "bf16"
    ]
    p_lo, p_hi = (
        prefill_step(cfg, Roof("h200", 4.8, t), 1, 2048).tokens_per_s
        for t in (min(cublas), max(cublas))
    )
    out += [
        ("decode at the measured copy", f"about {lo:.0f}–{hi:.0f} tokens/s", [L09]),
        (
            "prefill at the measured cuBLAS",
            f"about {round(p_lo, -3):,.0f}–{round(p_hi, -3):,.0f} prompt tokens/s",
            [L09],
        ),
    ]
    return out


FIGURES = figures()


@pytest.mark.parametrize("what,quoted,files", FIGURES, ids=[f[0] for f in FIGURES])
def test_quoted_figure_matches_the_raw_file(what, quoted, files):
    missing = [f for f in files if quoted not in text(f)]
    assert not missing, f"{what}: the raw file gives {quoted!r}, not quoted in {missing}"


def test_h200_reference_ceilings_are_the_probe_run():
    probe = load(DAY / "microbench-quick.json")
    m = GPUS["h200"].measured
    for k in ("copy_tbs", "read_tbs", "write_tbs"):
        assert m[k] == pytest.approx(probe[k], abs=0.006), k
    for d, v in m["tflops"].items():
        assert v == pytest.approx(probe["tflops"][d], abs=0.06), d


# Figures the repo's own runs replaced: each was quoted somewhere before.
STALE = {
    "723": "cuBLAS bf16 from an older do_bench run: the repo measures 684–727",
    "86.5": "torch.compile of RMSNorm + RoPE: 112.8 µs in the bench",
    "19×": "compile vs eager: about 15× in the bench",
    "HARDWARE.md": "not shipped: cite docs/hardware.md",
    "Triton 3.9's": "the GPU measurements used Triton 3.6",
    "50 MB L2": "the H200's datasheet gives no L2; it reports 60 MiB",
    "779–798": "no raw file in the repo",
    "2.1 TB/s": "no source in the repo",
    "moved right": "the table's 16-bit ridges go both ways",
    "13.5–15 PF": "Blackwell Ultra dense FP4 per GPU is 14 (HGX B300) and 15 (GB300) PF on "
    "NVIDIA's datasheet",
    "memory to 288 GB": "288 GB is the package; an HGX B300 exposes 270 GB, a GB300 279 GB",
    "first shown at GTC 2025": "Rubin and Vera were announced at Computex, June 2024",
    "stay off the cap": "the probe ran 4096³ bf16 at 1605 MHz under sw_power_cap",
    "pure writes 4.66": "the probe measured 4.64",
    "Since JAX 0.6 it": "jax.shard_map is JAX 0.6.1's",
    "gets some dtypes wrong": "the interpreter does no bf16 arithmetic at all, tl.dot or not",
    "shrink the bubble further": "plain 1F1B keeps GPipe's bubble; interleaving shrinks it",
    "from launch overhead": "the size sweep runs under CUDA graphs",
    "K elements apart in the wrong direction": "b.t()'s rows are 1 element apart, columns K",
    "a quarter of what a Hopper": "a 32-row tile is half of wgmma's M = 64",
    "58% of the copy bandwidth": "torch.compile's rope is 57% of the bench's own copy, the roof "
    "of the reference's 89%",
    "275–280 tokens/s": "4.25 and 4.38 TB/s give 273–282",
    "the copy engine moves": "TMA is the SM's own unit, not the DMA copy engines",
    "doubled traffic": "two kernels with n in fp32 move three times the fused traffic in 16-bit",
    "memory, twice the traffic": "two kernels with n in fp32 move three times the fused traffic",
    "= **672 KiB**, 40% less": "1 - 672/1104 is 39%",
    "8 bits of mantissa": "bf16 stores 7 mantissa bits (8 significant)",
    # A third read (torch 2.11 and 2.13 run on the CPU, the raw profile):
    "After 8 recompiles": "8 graphs is the first compile and 7 recompiles",
    "gives up and runs the function eagerly": "past the limit a call that fits a graph runs it",
    "not G['_BIAS']": "both torch versions report not ___dict_contains(S, G['_BIAS'])",
    "one log line per break": "TORCH_LOGS=graph_breaks writes a block per break",
    "There are five breaks": "Dynamo logs seven breaks from five causes",
    "these figures shown at GTC 2025": "22 TB/s and 35 PF were first given at CES 2026",
    "0.21 ms of GPU time": "the list's top entry is the optimizer's range, not a kernel",
    "bf16 add gave NaN": "a bf16 add or multiply returns garbage, some elements NaN",
    "none of them measured here": "the reduce-overhead step was profiled on the H200",
    "does not break down": "the reduce-overhead step was profiled on the H200",
}


@pytest.mark.parametrize(
    "rel",
    [
        L01,
        L02,
        L03,
        L04,
        L05,
        L06,
        L07,
        L08,
        L09,
        GLOSSARY,
        "exercises/softmax.py",
        "exercises/matmul.py",
        "exercises/rope_rmsnorm_fwd.py",
        "exercises/graph_breaks.py",
    ],
)
def test_no_replaced_figure_comes_back(rel):
    body = text(rel)
    found = [f"{s!r} ({why})" for s, why in STALE.items() if s in body]
    assert not found, f"{rel}: " + "; ".join(found)


def test_bridges_are_two_way_but_the_h200_nvls():
    from gpulab.gpu.hardware import GPUS

    for key in ("a100-pcie-40gb", "a100-pcie-80gb", "h100-pcie", "h100-nvl"):
        note = GPUS[key].figure("nvlink").note
        assert "two cards" in note and "or four" not in note, (key, note)
    assert "four-way" in GPUS["h200-nvl"].figure("nvlink").note


def test_lesson_03_names_every_timed_matmul_shape():
    """The shapes the matmul grader times, read from its source (importing
    it needs torch), each named by lesson 03 with its dtypes."""
    import ast

    tree = ast.parse((REPO / "gpulab/judge/graders/matmul.py").read_text(encoding="utf-8"))
    fn = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "timing_cases"
    )
    shapes = next(
        ast.literal_eval(n.value)
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "shapes"
    )
    body = text(L03)
    words = {8: "eight", 6: "six", 4: "four"}
    assert f"{words[len(shapes)]} shapes" in body, len(shapes)
    dtypes = sorted({dt for dt, *_ in shapes})
    assert dtypes == ["bf16", "fp16"] and "each in bf16 and in fp16" in body
    by_dtype = {dt: sorted(tuple(mnk) for d, *mnk in shapes if d == dt) for dt in dtypes}
    assert by_dtype["bf16"] == by_dtype["fp16"]  # one set of shapes, both dtypes
    for M, N, K in by_dtype["bf16"]:
        named = f"{M}³" if M == N == K else f"{M} × {N} × {K}"
        assert named in body, named
