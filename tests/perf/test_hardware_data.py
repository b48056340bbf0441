"""The hardware table as data: gpulab/data/gpus.toml is read once, on first
use, into the same rows the rest of gpulab relies on; a broken copy is
refused with the file, the GPU and the field named (tests/perf/test_hardware.py
checks the figures themselves and docs/hardware.md against them)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpulab.gpu import hardware
from gpulab.gpu.hardware import GPUS, HardwareDataError, load_table
from tests.conftest import REPO


def test_figures_load_with_their_sources_basis_and_types():
    b200 = GPUS["b200"]
    mem = b200.figures["memory"]
    assert mem.value == 180 and mem.sources == ("blackwell-datasheet", "dgx-b200-guide")
    assert mem.flag.startswith("180 GB on NVIDIA's Blackwell datasheet and the DGX B200 guide")
    assert mem.note == "'180 GB HBM3E | 7.7 TB/s' per HGX B200 GPU"
    assert b200.sparse["fp4"].value == 18000 and b200.sparse["fp4"].basis == "sparse"
    # A bare value is a vendor datasheet's: dense for a dtype, no basis otherwise;
    # ints stay ints and decimals floats, as the datasheets print them.
    t4 = GPUS["t4"]
    assert t4.figures["fp32"] == hardware.Figure(8.1, ("vendor",), "dense")
    assert t4.figures["memory"] == hardware.Figure(16, ("vendor",), "")
    assert type(t4.figures["memory"].value) is int and t4.bandwidth_tbs == 0.32
    assert t4.figures["cc"] == hardware.Figure("7.5", ("cuda-gpus",), "")
    # A figure no one publishes is a table without a value: "?" with its reason.
    sms = GPUS["h100-nvl"].figures["sms"]
    assert sms.value is None and sms.note == "not on the H100 NVL datasheet"
    assert hardware.format_value(GPUS["h100-nvl"], "sms") == "?"
    # Thousands are grouped for decimals as for whole numbers (MI300X read
    # "1307.4" beside the NVIDIA rows' "1,979").
    assert hardware.format_value(GPUS["mi300x"], "bf16") == "1,307.4"
    assert hardware.format_value(GPUS["h100-sxm"], "tf32") == "494.5"
    claim = GPUS["rubin"].claims["fp4"]
    assert (claim.value, claim.basis, claim.sources) == (50000, "inference", ("announced",))
    assert GPUS["h200"].measured["tflops"]["bf16"] == 684.0


def test_shared_notes_are_written_once_and_expanded():
    text = hardware.DATA_PATH.read_text(encoding="utf-8")
    assert text.count("no bf16 tensor cores before Ampere") == 1
    assert (
        GPUS["t4"].figures["fp16"].note == "FP16 tensor cores; no bf16 tensor cores before Ampere"
    )
    assert GPUS["b200"].figures["sms"].note == "not published by NVIDIA; a B200 reports 148"
    assert GPUS["gb200"].flags["l2"] == GPUS["b200"].flags["l2"]
    texts = [
        s
        for g in GPUS.values()
        for f in (*g.figures.values(), *g.sparse.values(), *g.claims.values())
        for s in (f.flag, f.note)
    ]
    assert not [s for s in texts if "{" in s or "}" in s]


def test_rows_keep_the_files_order_and_figures_the_fields_order(tmp_path):
    assert list(GPUS)[:3] == ["t4", "v100", "a10"] and list(GPUS)[-1] == "rubin"
    for g in GPUS.values():
        assert list(g.figures) == [f for f in hardware.FIELDS if f in g.figures], g.key
    # A GPU writing its figures in another order still lists them in FIELDS order.
    text = hardware.DATA_PATH.read_text(encoding="utf-8")
    swapped = text.replace("memory = 16\nbandwidth = 0.32\n", "bandwidth = 0.32\nmemory = 16\n")
    assert swapped != text
    path = tmp_path / "gpus.toml"
    path.write_text(swapped, encoding="utf-8")
    gpus, _ = load_table(path)
    assert gpus["t4"] == GPUS["t4"]


# Each edit to a copy of the shipped table, and what the error must say besides
# the file's path.
BROKEN = [
    ('name = "T4"\n', "", ["GPU 't4', field 'name'", "missing"]),
    ("bandwidth = 0.32\n", "bandwith = 0.32\n", ["GPU 't4', field 'bandwith'", "unknown field"]),
    ("memory = 16\n", 'memory = "sixteen"\n', ["GPU 't4', field 'memory'", "number"]),
    ("tdp = 70\n", "tdp = true\n", ["GPU 't4', field 'tdp'", "number"]),
    ("memory = 16\n", "memory = -16\n", ["GPU 't4', field 'memory'", "at least 0"]),
    ('sources = ["derived"] }', 'sources = ["derivd"] }', ["GPU 't4'", "'derivd'", "[sources]"]),
    ('"FP16 tensor cores; {no-bf16}"', '"{no-bf61}"', ["GPU 't4', field 'fp16'", "{no-bf61}"]),
    ("sparse = { bf16 = 242, fp8 = 485 }", "sparse = { bf16 = 242, fp9 = 485 }", ["'l4'", "fp9"]),
    ('cc = { value = "7.5"', "cc = { value = 7.5", ["GPU 't4', field 'cc'", "text"]),
    ("fp32 = 8.1\n", "fp32 = { valeu = 8.1 }\n", ["GPU 't4', field 'fp32'", "'valeu'"]),
    ('aliases = ["tesla t4"]', 'aliases = "tesla t4"', ["GPU 't4', field 'aliases'"]),
    ("[gpu.h100-sxm]", "[gpu.h100-sxm5]", ["default GPU 'h100-sxm'"]),
    ('name = "T4"\n', 'name = "T4\n', ["not valid TOML", "line"]),
    (
        "measured.copy_tbs = 4.25\n",
        'measured.copy_tbs = "4.25"\n',
        ["GPU 'h200', field 'measured'", "copy_tbs", "(TB/s)"],
    ),
]


@pytest.mark.parametrize("old,new,said", BROKEN, ids=[b[2][-1] for b in BROKEN])
def test_a_broken_table_names_the_file_gpu_and_field(tmp_path, old, new, said):
    text = hardware.DATA_PATH.read_text(encoding="utf-8")
    assert old in text  # the edit applies to today's file
    path = tmp_path / "gpus.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(HardwareDataError) as exc:
        load_table(path)
    message = str(exc.value)
    assert message.startswith(f"{path}: "), message
    for part in said:
        assert part in message, message


def test_a_missing_table_is_named(tmp_path):
    with pytest.raises(HardwareDataError, match="the hardware table is missing"):
        load_table(tmp_path / "gpus.toml")


def test_gpulab_hardware_says_what_is_broken_instead_of_crashing(tmp_path, monkeypatch, capsys):
    from gpulab.cli import main

    path = tmp_path / "gpus.toml"
    text = hardware.DATA_PATH.read_text(encoding="utf-8")
    path.write_text(text.replace("bandwidth = 0.32", "bandwidth = 'fast'"), encoding="utf-8")
    monkeypatch.setattr(hardware, "DATA_PATH", path)
    monkeypatch.setattr(hardware, "_loaded", None)
    assert main(["hardware", "--json"]) == 2
    out = capsys.readouterr()
    assert f"{path}: GPU 't4', field 'bandwidth'" in out.err
    assert json.loads(out.out)["status"] == "error"


def test_the_table_is_read_on_first_use_only():
    # Importing gpulab.gpu.hardware (as the CLI's commands and the panes do) and
    # `gpulab --help` parse nothing; the first lookup does, once.
    code = (
        "import sys\nfrom gpulab.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "import gpulab.gpu.hardware as h, gpulab.gpu.roofline, gpulab.gpu.roadmap, gpulab.cli.commands.common\n"
        "before = h._loaded is None\n"
        "first = h.GPUS['h200']\n"
        "table = h._loaded\n"
        "print(before, table is not None, h.GPUS['h200'] is first, h._loaded is table)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[-4:] == ["True", "True", "True", "True"], r.stdout


def test_the_lab_says_what_is_broken_instead_of_crashing(tmp_path, monkeypatch, capsys):
    """`gpulab` (the TUI) needs the table on its first screen: a broken one
    is named, and the lab exits 2 before Textual takes the terminal."""
    from gpulab.tui.app import run_app

    path = tmp_path / "gpus.toml"
    text = hardware.DATA_PATH.read_text(encoding="utf-8")
    path.write_text(text.replace("bandwidth = 0.32", "bandwidth = 'fast'"), encoding="utf-8")
    monkeypatch.setattr(hardware, "DATA_PATH", path)
    monkeypatch.setattr(hardware, "_loaded", None)
    assert run_app(workspace=tmp_path / "ws") == 2
    assert f"{path}: GPU 't4', field 'bandwidth'" in capsys.readouterr().err
