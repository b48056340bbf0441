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

from gpulab.hardware import GPUS

REPO = Path(__file__).resolve().parent.parent
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
    ],
)
def test_no_replaced_figure_comes_back(rel):
    body = text(rel)
    found = [f"{s!r} ({why})" for s, why in STALE.items() if s in body]
    assert not found, f"{rel}: " + "; ".join(found)
