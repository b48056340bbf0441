"""Roofline maths, the model, learner points, the text plot, SVG/PNG export, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from gpulab.gpu import roofline, roofline_plot
from gpulab.gpu.hardware import GPUS
from gpulab.gpu.roofline import COMPUTE_BOUND, MEMORY_BOUND

H200 = GPUS["h200"]


def write_result(root, exercise, device, rows):
    folder = root / ".gpulab" / "results"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{exercise}.json").write_text(
        json.dumps(
            {
                "exercise": exercise,
                "passed": True,
                "device": device,
                "timing": {"device": device, "cases": rows},
            }
        )
    )


def softmax_row(M, N, dtype, elt, ms, sizes_only=False):
    row = {"name": f"{M}x{N} {dtype}", "shape": f"{M}x{N}", "dtype": dtype, "ms": ms}
    if sizes_only:
        row["sizes"] = {"M": M, "N": N}
    else:
        row.update(flops=5 * M * N, bytes=2 * M * N * elt, intensity=5 / (2 * elt))
    return row


def test_attainable_ridge_classify():
    peak, bw = 989e12, 4.8e12
    assert roofline.ridge_point(peak, bw) == pytest.approx(206.04, abs=0.01)
    assert roofline.attainable(1.0, peak, bw) == pytest.approx(4.8e12)
    assert roofline.attainable(1e4, peak, bw) == peak
    assert roofline.classify(1.25, peak, bw) == MEMORY_BOUND
    assert roofline.classify(500, peak, bw) == COMPUTE_BOUND
    h100 = GPUS["h100-sxm"]
    assert roofline.ridge_point(
        h100.tflops["bf16"] * 1e12, h100.bandwidth_tbs * 1e12
    ) == pytest.approx(295.2, abs=0.1)


def test_model_datasheet(tmp_path):
    m = roofline.build_model(H200, workspace_root=tmp_path)
    assert m.dtype == "bf16" and round(m.ridge) == 206
    assert m.attainable(1.0) == pytest.approx(4.8e12)
    assert m.classify(2048 / 3) == COMPUTE_BOUND and m.classify(1.25) == MEMORY_BOUND
    assert {r.dtype for r in m.roofs} == set(H200.tflops)
    assert m.points == [] and m.measured_label == ""
    with pytest.raises(ValueError, match="no fp4 figure"):
        roofline.build_model(H200, "fp4")
    assert roofline.build_model(GPUS["t4"]).dtype == "fp16"
    assert roofline.build_model(GPUS["rubin"]).notes  # flagged bandwidth and fp4 are said


def test_model_measured_from_cache_and_reference(tmp_path):
    cache = tmp_path / ".gpulab" / "ceilings"
    cache.mkdir(parents=True)
    (cache / "broken.json").write_text("{not json")
    (cache / "odd.json").write_text(
        json.dumps(
            {"device": "NVIDIA H100 80GB HBM3", "date": "1", "copy_tbs": "fast", "tflops": []}
        )
    )
    (cache / "nvidia-h100-80gb-hbm3.json").write_text(
        json.dumps(
            {
                "device": "NVIDIA H100 80GB HBM3",
                "date": "2026-12-01",
                "copy_tbs": 3.0,
                "tflops": {"bf16": 700.0, "fp32": 50.0},
            }
        )
    )
    m = roofline.build_model(GPUS["h100-sxm"], workspace_root=tmp_path, measured=True)
    assert m.measured_ridge == pytest.approx(700 / 3.0)
    assert "NVIDIA H100 80GB HBM3" in m.measured_label
    # No cache for an H200: gpulab's own reference run, labelled as not this machine.
    m = roofline.build_model(H200, workspace_root=tmp_path, measured=True)
    assert "not this machine" in m.measured_label
    assert m.measured_ridge == pytest.approx(684 / 4.25)
    m = roofline.build_model(GPUS["l4"], workspace_root=tmp_path, measured=True)
    assert m.measured_bandwidth is None and any("gpulab probe --bench" in n for n in m.notes)


def test_points_from_results(tmp_path):
    write_result(
        tmp_path,
        "softmax",
        "NVIDIA H200",
        [
            softmax_row(4096, 1024, "fp16", 2, 0.01),
            softmax_row(2048, 4096, "fp32", 4, 0.02, sizes_only=True),  # manifest formulas
            {"name": "broken", "ms": 0.1},
            {"name": "garbage", "ms": -1, "flops": "many", "bytes": 1e9, "intensity": "x"},
            {"name": "bad sizes", "ms": 0.1, "sizes": {"M": "4096", "N": 1024}},
            "not a row",
        ],
    )
    write_result(
        tmp_path,
        "matmul",
        "NVIDIA A100-SXM4-80GB",
        [{"name": "x", "dtype": "bf16", "ms": 1.0, "flops": 1e12, "bytes": 1e9}],
    )
    (tmp_path / ".gpulab" / "results" / "junk.json").write_text("[")
    m = roofline.build_model(H200, workspace_root=tmp_path)
    assert [p.dtype for p in m.points] == ["fp16", "fp32"]
    fp16, fp32 = m.points
    assert fp16.intensity == pytest.approx(1.25) and fp32.intensity == pytest.approx(0.625)
    assert fp16.flops_per_s == pytest.approx(5 * 4096 * 1024 / 1e-5)
    assert fp16.bound == MEMORY_BOUND
    assert fp16.fraction == pytest.approx(fp16.flops_per_s / (1.25 * 4.8e12))
    notes = " ".join(m.notes)
    assert "A100" in notes and "junk.json" in notes and "broken" in notes
    assert "garbage" in notes and "bad sizes" in notes


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    write_result(root, "softmax", "NVIDIA H200", [softmax_row(4096, 1024, "fp16", 2, 0.01)])
    model = roofline.build_model(H200, workspace_root=root, measured=True)
    return model


def test_text_plot_at_80x24(plotted):
    pytest.importorskip("plotext")
    text = roofline_plot.render_text(plotted, 80, 24)
    lines = text.splitlines()
    assert len(lines) <= 24 and max(len(line) for line in lines) <= 80
    for label in (
        "ridge 206 FLOP/B",
        "softmax",
        "fp8 1,979",
        "arithmetic intensity",
        "TFLOP/s",
        "fp16/bf16 datasheet",
        "bf16 measured",
    ):
        assert label in text, label
    # Decade ticks on both axes.
    xticks = lines[next(i for i, line in enumerate(lines) if "└" in line) + 1].split()
    assert xticks == ["0.1", "1", "10", "100", "1k", "10k"]
    assert any(line.lstrip().startswith("1k┤") for line in lines)
    assert "\x1b[" not in text and "\x1b[" in roofline_plot.render_text(plotted, 80, 24, color=True)


def test_draw_onto_textual_plotext(plotted):
    pytest.importorskip("textual_plotext")
    from textual_plotext.plot import Plot

    plt = Plot()
    plt.plotsize(100, 30)
    roofline_plot.draw(plt, plotted)
    assert "ridge 206" in Plot.uncolorize(plt.build())


def test_svg_export(plotted, tmp_path):
    path = tmp_path / "roof.svg"
    roofline_plot.export(plotted, path)
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    ns = {"s": "http://www.w3.org/2000/svg"}
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    for label in (
        "ridge 206 FLOP/B",
        "softmax",
        "fp16/bf16 datasheet",
        "bf16 measured",
        "arithmetic intensity (FLOP/byte)",
        "1k",
        "0.1",
    ):
        assert label in texts, label
    assert len(root.findall(".//s:polyline", ns)) >= 3
    with pytest.raises(ValueError, match=r"\.svg or \.png"):
        roofline_plot.export(plotted, tmp_path / "roof.txt")


def test_png_export(plotted, tmp_path):
    path = tmp_path / "roof.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        with pytest.raises(roofline_plot.PlotUnavailable, match=r"gpulab\[plot\]"):
            roofline_plot.export(plotted, path)
        return
    roofline_plot.export(plotted, path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_choose_gpu():
    assert roofline.choose_gpu("H200")[0] is H200
    with pytest.raises(roofline.UnknownGPU, match="known: t4"):
        roofline.choose_gpu("rtx9090")
    gpu, why = roofline.choose_gpu(None, "t4", detect=False)
    assert gpu.key == "t4" and "setting" in why
    gpu, why = roofline.choose_gpu(None, "nonsense", detect=False)
    assert gpu.key == "h100-sxm" and "nonsense" in why
    assert roofline.choose_gpu(None, None, detect=False)[0].key == "h100-sxm"


def test_light_imports():
    code = (
        "import sys, gpulab.gpu.roofline, gpulab.gpu.hardware, gpulab.gpu.roadmap, gpulab.course.glossary;"
        "print(sorted(m for m in ('torch','triton','textual','plotext','matplotlib','rich',"
        "'jax') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_roofline(run_gpulab, tmp_path):
    ws = tmp_path / "workspace"
    write_result(ws, "softmax", "NVIDIA H200", [softmax_row(4096, 1024, "fp16", 2, 0.01)])
    r = run_gpulab("roofline", "--gpu", "h200", "--width", "80", "--height", "24")
    assert r.returncode == 0, r.stderr
    assert "ridge 206 FLOP/B" in r.stdout and "softmax" in r.stdout and "memory-bound" in r.stdout
    assert max(len(line) for line in r.stdout.splitlines()) <= 80
    r = run_gpulab("roofline", "--gpu", "h200", "--export", str(tmp_path / "r.svg"))
    assert r.returncode == 0, r.stderr
    ET.parse(tmp_path / "r.svg")
    r = run_gpulab("roofline", "--gpu", "t4", "--remember", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["gpu"] == "t4"
    state = json.loads((ws / ".gpulab" / "state.json").read_text())
    assert state["settings"]["gpu"] == "t4"


def test_cli_roofline_errors(run_gpulab, tmp_path):
    r = run_gpulab("roofline", "--gpu", "rtx9090")
    assert r.returncode == 2 and "known:" in r.stderr and "h200" in r.stderr
    r = run_gpulab("roofline", "--gpu", "h200", "--dtype", "fp4")
    assert r.returncode == 2 and "no fp4 figure" in r.stderr
    r = run_gpulab("roofline", "--gpu", "h200", "--export", str(tmp_path / "r.txt"))
    assert r.returncode == 2 and ".svg" in r.stderr


def test_workspace_model_and_summary(ws):
    import io

    from rich.console import Console

    ws.set_setting("gpu", "a100-80gb")
    write_result(
        ws.root, "softmax", "NVIDIA A100-SXM4-80GB", [softmax_row(4096, 1024, "fp16", 2, 0.02)]
    )
    model, why = roofline.workspace_model(ws, detect=False)
    assert model.gpu.key == "a100-80gb" and "setting" in why and len(model.points) == 1
    model, why = roofline.workspace_model(ws, "h200", "fp8", measured=False)
    assert (model.gpu.key, model.dtype, why) == ("h200", "fp8", "chosen with --gpu")
    con = Console(width=80, record=True, file=io.StringIO())
    con.print(roofline.summary_renderable(model, why))
    text = con.export_text()
    assert "ridge 412" in text and "A100-SXM4-80GB are not shown" in text


@pytest.mark.gpu
def test_detects_this_gpu():
    """On a GPU box NVML names the device and rooflines default to it."""
    from gpulab.gpu.hardware import match_gpu

    name = roofline.detected_gpu_name()
    assert name, "NVML gave no device name on a CUDA machine"
    gpu, why = roofline.choose_gpu(None, "t4")
    if match_gpu(name) is not None:
        assert gpu is match_gpu(name) and "this machine" in why
    else:
        assert gpu.key == "t4"  # unknown device: the workspace setting
