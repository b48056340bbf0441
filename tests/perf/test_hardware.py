"""The hardware database, its ridge arithmetic, the roadmap, and `gpulab hardware`."""

from __future__ import annotations

import dataclasses
import json

import pytest

from gpulab.gpu import hardware, roadmap
from gpulab.gpu.hardware import DTYPES, GPUS, SOURCES, match_gpu

# The GPUs the issue names, by key.
ISSUE_GPUS = (
    "t4",
    "v100",
    "a10",
    "l4",
    "a100-40gb",
    "a100-80gb",
    "a100-pcie-40gb",
    "a100-pcie-80gb",
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "h200-nvl",
    "b200",
    "gb200",
    "b300",
    "gb300",
    "mi300x",
    "rubin",
)

# Figures that must carry a ⚑: (GPU, field). B200's FP32, TF32 and bandwidth
# differ between NVIDIA's 2024 and current sheets (issue 18); B300's memory,
# bandwidth, TF32 and FP4 differ between its per-GPU datasheet and NVIDIA's
# system tables or blog.
HARDWARE_MD_FLAGS = {
    ("t4", "l2"),
    ("a10", "l2"),
    ("l4", "sms"),
    ("l4", "l2"),
    ("b200", "memory"),
    ("b200", "tf32"),
    ("b200", "fp32"),
    ("b200", "bandwidth"),
    ("b200", "l2"),
    ("gb200", "l2"),
    ("b300", "memory"),
    ("b300", "bandwidth"),
    ("b300", "tf32"),
    ("b300", "fp4"),
    ("rubin", "bandwidth"),
    ("rubin", "fp4"),
}


def test_ridge_arithmetic():
    assert GPUS["h100-sxm"].ridge("bf16") == pytest.approx(989 / 3.35)
    assert round(GPUS["h100-sxm"].ridge("bf16")) == 295
    assert round(GPUS["h200"].ridge("bf16")) == 206
    assert round(GPUS["h200"].ridge("fp8")) == 412
    assert GPUS["b200"].ridge("fp4") == pytest.approx(9000 / 7.7)
    assert GPUS["t4"].ridge("bf16") is None  # Turing has no bf16
    assert set(GPUS["h200"].ridges()) == {"fp32", "tf32", "fp16", "bf16", "fp8"}


def test_every_issue_gpu_is_there_with_bandwidth_and_sources():
    for key in ISSUE_GPUS:
        g = GPUS[key]
        assert g.bandwidth_tbs > 0, key
        assert g.sources and set(g.sources) <= set(SOURCES), key
        for name, f in g.figures.items():
            assert f.sources and set(f.sources) <= set(SOURCES), (key, name)
            if name in DTYPES:
                assert f.basis == "dense", (key, name)
        for d, f in g.sparse.items():
            assert f.basis == "sparse" and f.value >= g.tflops.get(d, 0), (key, d)
        # The convenience fields come from the figures, not a second copy.
        assert g.tflops == {
            d: float(g.figures[d].value)
            for d in DTYPES
            if d in g.figures and isinstance(g.figures[d].value, (int, float))
        }


def test_flags_kept_where_hardware_md_flags():
    flagged = {(g.key, f) for g in GPUS.values() for f in g.flags}
    assert HARDWARE_MD_FLAGS <= flagged
    for g in GPUS.values():
        for f, why in g.flags.items():
            assert len(why) > 15, (g.key, f)  # a reason, not just a mark
    assert GPUS["rubin"].announced


def test_dense_not_sparse():
    # KernelAgent's table lists H100 fp16 1979 "without sparsity": the sparse figure.
    assert GPUS["h100-sxm"].tflops["bf16"] == 989
    assert GPUS["h100-sxm"].sparse["bf16"].value == 1979
    assert GPUS["b200"].tflops["fp4"] == 9000 and GPUS["b200"].sparse["fp4"].value == 18000


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("Tesla T4", "t4"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("h200 nvl", "h200-nvl"),
        ("NVIDIA B300", "b300"),
        ("NVIDIA GB300", "gb300"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("h100 sxm", "h100-sxm"),
        ("H100-SXM", "h100-sxm"),
        ("vera rubin", "rubin"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA L4", "l4"),
    ],
)
def test_match_gpu(name, key):
    assert match_gpu(name).key == key


def test_match_gpu_unknown():
    assert match_gpu("NVIDIA Quadro P4000") is None
    assert match_gpu("") is None
    # A laptop part is another chip under a desktop card's name.
    assert match_gpu("NVIDIA GeForce RTX 4090 Laptop GPU") is None
    assert "h200 (H200)" in hardware.known_names()


# Cards learners have (issue 47), by the names NVML and torch report for them.
LEARNER_CARDS = {
    "NVIDIA GeForce RTX 4090": "rtx-4090",
    "NVIDIA GeForce RTX 5090": "rtx-5090",
    "NVIDIA GeForce RTX 3090": "rtx-3090",
    "NVIDIA L40S": "l40s",
    "NVIDIA L40": "l40",
    "NVIDIA A10G": "a10g",
    "NVIDIA L4": "l4",
    "NVIDIA A10": "a10",
    "Tesla T4": "t4",
    "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
    "NVIDIA A100 80GB PCIe": "a100-pcie-80gb",
}


@pytest.mark.parametrize("name,key", LEARNER_CARDS.items())
def test_a_learners_card_has_ceilings(name, key):
    """`ceiling()` names the datasheet of every common card, never "unknown
    device"; every new row's figures have sources, flagged where unconfirmed."""
    from gpulab.gpu.ceilings import ceiling

    g = match_gpu(name)
    assert g is not None and g.key == key, name
    bw, label = ceiling("memory", "fp16", name)
    assert bw == g.bandwidth_tbs * 1e12 and label == f"{g.name} datasheet bandwidth"
    _, label = ceiling("compute", "fp16", name)
    assert "unknown device" not in label and g.name in label
    assert g.memory_gb and g.cc and g.tflops.get("fp32")
    for f in g.figures.values():
        assert f.sources and set(f.sources) <= set(SOURCES), (key, f)


def test_ceiling_of_a_known_card_without_the_dtype():
    from gpulab.gpu.ceilings import ceiling

    assert ceiling("compute", "bf16", "Tesla T4") == (None, "no bf16 figure on the T4 datasheet")
    assert ceiling("compute", "bf16", "NVIDIA Quadro P4000") == (None, "unknown device")


def test_roadmap_ratios_come_from_the_table():
    rows = {(r["from"], r["to"]): r for r in roadmap.ratios()}
    t4_a100 = rows[("T4", "A100 80GB SXM")]
    assert t4_a100["bandwidth"] == pytest.approx(2.039 / 0.32)
    assert t4_a100["tflops_16bit"] == pytest.approx(312 / 65)
    assert rows[("H100 SXM", "H200")]["tflops_16bit"] == pytest.approx(1.0)
    assert rows[("B200 (HGX)", "Rubin (announced)")]["flags"]  # flagged figures say so


def test_roadmap_notes_disagreements():
    claims = {c.text: c for c in roadmap.claims()}
    rubin = claims["Rubin: 50 PFLOPS FP4 (2.5× B200)"]
    assert rubin.verdict == "disagrees"
    assert "5.6×" in rubin.note and "2.5×" in rubin.note and "sparse" in rubin.note
    vera = claims["Vera CPU: 72 ARM Grace cores"]
    assert vera.verdict == "disagrees" and "Grace" in vera.note
    assert claims["B200: FP4 at 9000 TFLOPS"].verdict == "agrees"


def test_roadmap_recomputes_when_the_table_changes(monkeypatch):
    b200 = GPUS["b200"]
    changed = dataclasses.replace(b200, tflops={**b200.tflops, "fp4": 10000.0})
    monkeypatch.setitem(GPUS, "b200", changed)
    rubin = next(c for c in roadmap.claims() if c.text.startswith("Rubin: 50"))
    assert "50,000 / 10,000 (B200 dense FP4) = 5.0×" in rubin.note
    assert next(c for c in roadmap.claims() if "9000" in c.text).verdict == "disagrees"


def test_roadmap_renderable_fits_80_columns():
    import io

    from rich.console import Console

    con = Console(width=80, record=True, file=io.StringIO())
    con.print(roadmap.roadmap_renderable())
    text = con.export_text()
    assert "Vera Rubin" in text and "disagrees" in text and "5.6×" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_cli_hardware(run_gpulab):
    r = run_gpulab("hardware")
    assert r.returncode == 0, r.stderr
    assert "H200" in r.stdout and "295" in r.stdout and "206" in r.stdout and "⚑" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    r = run_gpulab("hardware", "h200", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["key"] == "h200" and round(data["ridge_flop_per_byte"]["bf16"]) == 206
    assert data["figures"]["bf16"]["basis"] == "dense"


def test_cli_hardware_unknown_gpu_and_roadmap(run_gpulab):
    r = run_gpulab("hardware", "rtx9090")
    assert r.returncode == 2
    assert "unknown GPU" in r.stderr and "h100-sxm" in r.stderr and "mi300x" in r.stderr
    r = run_gpulab("hardware", "--roadmap")
    assert r.returncode == 0, r.stderr
    assert "2.5×" in r.stdout and "Turing" in r.stdout and "Vera Rubin" in r.stdout
    r = run_gpulab("hardware", "--roadmap", "--json")
    verdicts = {c["claim"]: c["verdict"] for c in json.loads(r.stdout)["claims"]}
    assert verdicts["Rubin: 50 PFLOPS FP4 (2.5× B200)"] == "disagrees"


def test_nvl_cards_and_pcie_cards_are_not_the_sxm_boards():
    nvl, sxm = GPUS["h200-nvl"], GPUS["h200"]
    assert nvl.tdp_w == 600 and sxm.tdp_w == 700
    assert nvl.tflops["bf16"] == 835 and nvl.tflops["fp32"] == 60
    assert nvl.bandwidth_tbs == sxm.bandwidth_tbs == 4.8
    assert GPUS["h100-nvl"].tflops["bf16"] == 835 and GPUS["h100-nvl"].bandwidth_tbs == 3.9
    assert GPUS["a100-pcie-80gb"].bandwidth_tbs == 1.935


def test_tdp_and_nvlink_are_columns():
    assert {"tdp", "nvlink"} <= set(hardware.FIELDS)
    assert GPUS["h100-sxm"].nvlink_gbs == 900 and GPUS["b200"].nvlink_gbs == 1800
    assert GPUS["b200"].tdp_w == 1000 and GPUS["gb300"].tdp_w == 1400
    assert GPUS["t4"].nvlink_gbs is None and GPUS["t4"].tdp_w == 70


def test_h200_l2_is_the_measured_one_not_the_h100_datasheets():
    l2 = GPUS["h200"].figures["l2"]
    assert l2.value == 60 and l2.sources == ("measured",)
    assert "give no L2" in l2.note and "50 MB" in l2.note


def test_mi300x_as_amd_lists_it():
    g = GPUS["mi300x"]
    assert g.tflops["fp32"] == 163.4 and g.tflops["fp8"] == 2614.9
    assert "FP64 vector" in g.figures["fp32"].note and "half" in g.figures["fp32"].note


def test_docs_hardware_md_table_is_the_table():
    from pathlib import Path

    from gpulab.gpu.hardware_doc import generated_block, render_table

    doc = (Path(__file__).resolve().parents[2] / "docs" / "hardware.md").read_text("utf-8")
    assert generated_block(doc) == render_table(), (
        "docs/hardware.md's table differs from gpulab.gpu.hardware: run "
        "`python -m gpulab.gpu.hardware_doc docs/hardware.md`"
    )


def test_hardware_doc_rewrites_and_refuses_a_document_without_markers(tmp_path):
    from gpulab.gpu.hardware_doc import END, START, main, rewrite

    doc = tmp_path / "hw.md"
    doc.write_text(f"# T\n\n{START}\nold\n{END}\n\ntail\n", encoding="utf-8")
    assert rewrite(doc) and "| H200 NVL |" in doc.read_text("utf-8")
    assert doc.read_text("utf-8").endswith("tail\n") and not rewrite(doc)
    (tmp_path / "bare.md").write_text("# no markers\n", encoding="utf-8")
    assert main([str(tmp_path / "bare.md")]) == 1


def test_roadmap_says_what_its_ridges_show():
    text = roadmap.ridge_trend()
    assert "moved right" not in text
    # The table's 16-bit ridges: T4 203, A100 153, H100 295, H200 206, B200 292.
    assert "fell at T4 → A100 and H100 → H200" in text
    assert "rose at A100 → H100 and H200 → B200" in text
    assert "between 153 and 295" in text
    rows = {r["key"]: r["ridges"] for r in roadmap.ridge_table()}
    assert round(rows["t4"]["16-bit"]) == 203 and round(rows["h200"]["FP32"]) == 14
    assert round(rows["b200"]["FP4"]) == 1169


def test_roadmap_trend_is_computed(monkeypatch):
    # Give every step more compute than bandwidth: the sentence must follow.
    for key, bf16 in (("a100-80gb", 500.0), ("h200", 1500.0), ("b200", 3000.0)):
        g = GPUS[key]
        monkeypatch.setitem(
            GPUS, key, dataclasses.replace(g, tflops={**g.tflops, "bf16": bf16, "fp16": bf16})
        )
    assert roadmap.ridge_trend().startswith("The 16-bit ridge rose at every step")


def test_roadmap_checks_the_books_vera_rubin_claims():
    claims = {c.text: c for c in roadmap.claims()}
    assert claims["5× Blackwell inference throughput"].verdict == "agrees"
    assert "5.0×" in claims["5× Blackwell inference throughput"].note
    assert "2.5× B200" in claims["5× Blackwell inference throughput"].note
    vera = claims["Vera CPU: 72 ARM Grace cores"]
    assert vera.verdict == "disagrees" and "88" in vera.note
    assert "NVLink-C2C" in claims["Vera CPU paired with the GPU over NVLink 6"].note
    assert "GTC 2025" in claims["Vera Rubin: announced GTC 2026"].note


def test_lesson_01_ridge_table_is_the_roadmaps():
    """Lesson 01's per-dtype ridges are the roadmap's, row by row."""
    from pathlib import Path

    lesson = (
        Path(__file__).resolve().parents[2] / "lessons" / "01_gpu_architecture_tour" / "lesson.md"
    ).read_text("utf-8")
    shown = {}
    for line in lesson.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in {r["name"] for r in roadmap.ridge_table()}:
            shown[cells[0]] = [c.replace(" ⚑", "") for c in cells[1:]]
    for row in roadmap.ridge_table():
        want = [f"{v:.0f}" if v is not None else "–" for v in row["ridges"].values()]
        assert shown.get(row["name"]) == want, (row["name"], shown.get(row["name"]), want)


# NVIDIA's per-GPU rows, as its datasheets print them (checked 2026-12-01;
# docs/hardware.md quotes each). Tensor Core rows are printed sparse only, so
# the dense figure is half; the FP4 rows print "sparse | dense".
BLACKWELL_DATASHEETS = {
    # NVIDIA Blackwell Datasheet, "Individual Blackwell GPU Specifications"
    "b200": {
        "memory": 180,
        "bandwidth": 7.7,
        "fp32": 75,
        "tf32": 2200 / 2,
        "bf16": 4500 / 2,
        "fp8": 9000 / 2,
        "fp4": 9000,
        "tdp": 1000,
        "nvlink": 1800,
    },
    "gb200": {
        "memory": 186,
        "bandwidth": 8,
        "fp32": 80,
        "tf32": 2500 / 2,
        "bf16": 5000 / 2,
        "fp8": 10000 / 2,
        "fp4": 10000,
        "tdp": 1200,
        "nvlink": 1800,
    },
    # NVIDIA Blackwell Ultra Datasheet, p. 5 "Technical Specifications"
    "b300": {
        "memory": 270,
        "bandwidth": 7.7,
        "fp32": 75,
        "tf32": 2200 / 2,
        "bf16": 4500 / 2,
        "fp8": 9000 / 2,
        "fp4": 14000,
        "tdp": 1100,
        "nvlink": 1800,
    },
    "gb300": {
        "memory": 279,
        "bandwidth": 8,
        "fp32": 80,
        "tf32": 2500 / 2,
        "bf16": 5000 / 2,
        "fp8": 10000 / 2,
        "fp4": 15000,
        "tdp": 1400,
        "nvlink": 1800,
    },
}


@pytest.mark.parametrize("key", sorted(BLACKWELL_DATASHEETS))
def test_blackwell_rows_are_nvidias_per_gpu_datasheet_rows(key):
    g = GPUS[key]
    for field, want in BLACKWELL_DATASHEETS[key].items():
        assert g.figures[field].value == pytest.approx(want), (key, field)
        src = set(g.figures[field].sources)
        assert src & {"blackwell-datasheet", "ultra-datasheet"}, (key, field, src)
    sparse_fp4 = {"b200": 18000, "gb200": 20000, "b300": 18000, "gb300": 20000}[key]
    assert g.sparse["fp4"].value == sparse_fp4


def test_blackwell_figures_name_vendor_documents_not_listings():
    # The old keys said "announcement" and "listings"; every Blackwell figure now
    # names the NVIDIA document it was checked against, or says it is third-party.
    assert not {"vendor-2025", "blackwell-ultra"} & set(SOURCES)
    for key in ("b200", "gb200", "b300", "gb300"):
        for name, f in GPUS[key].figures.items():
            if name == "cc":
                continue
            assert set(f.sources) & {
                "blackwell-datasheet",
                "ultra-datasheet",
                "ultra-blog",
                "third-party",
            }, (key, name)
            assert "listings" not in f.flag or "third-party" in f.sources, (key, name)
