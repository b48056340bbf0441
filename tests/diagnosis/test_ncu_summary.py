"""scripts/tools/ncu_summary.py: the figures BENCHMARKS.md quotes from Nsight
Compute's CSV. The input here has the shape of `ncu --csv --page details`
(the lines ncu itself prints, ==PROF== and ==WARNING==, interleaved), the
way scripts/tools/gpu_session.sh's `ncu:` step concatenates one run per case."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "tools" / "ncu_summary.py"

HEAD = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value"'
)


def row(kid: str, kernel: str, section: str, name: str, unit: str, value: str) -> str:
    return (
        f'"{kid}","42","python3","h","{kernel}","1","7","(1024, 1, 1)","(4096, 1, 1)",'
        f'"0","9.0","{section}","{name}","{unit}","{value}"'
    )


def load():
    spec = importlib.util.spec_from_file_location("ncu_summary", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
TEXT = "\n".join(
    [
        "### softmax_16k",
        "==PROF== Connected to process 42",
        HEAD,
        row(
            "0",
            "softmax_grouped_kernel",
            "GPU Speed Of Light Throughput",
            "DRAM Throughput",
            "%",
            "77.39",
        ),
        row(
            "0",
            "softmax_grouped_kernel",
            "GPU Speed Of Light Throughput",
            "Duration",
            "ns",
            "65,760",
        ),
        row(
            "0",
            "softmax_grouped_kernel",
            "Command line profiler metrics",
            "dram__bytes_read.sum",
            "byte",
            "134,231,040",
        ),
        *[
            row(
                "0",
                "softmax_grouped_kernel",
                "Command line profiler metrics",
                STALL.format(n),
                "",
                v,
            )
            for n, v in (
                ("long_scoreboard", "6.8"),
                ("barrier", "1.89"),
                ("wait", "1.28"),
                ("mio_throttle", "2.42"),
                ("not_selected", "4.26"),
                ("short_scoreboard", "1.62"),
                ("drain", "0.1"),
                ("sleeping", "n/a"),
            )
        ],
        "### copy_134mb",
        "==WARNING== No kernels were profiled.",
        "### two_kernels",
        HEAD,
        row("3", "first", "Launch Statistics", "Registers Per Thread", "register/thread", "32"),
        row("4", "second", "Launch Statistics", "Registers Per Thread", "register/thread", "96"),
    ]
)


def test_parse_keeps_each_case_and_kernel_apart():
    cases = load().parse(TEXT)
    assert list(cases) == ["softmax_16k", "copy_134mb", "two_kernels"]
    (k,) = cases["softmax_16k"]
    assert k["kernel"] == "softmax_grouped_kernel"
    assert k["dram_pct"] == "77.39 %" and k["duration"] == "65,760 ns"
    assert k["dram_read"] == "134,231,040 byte"
    # The six largest stall reasons, largest first; a non-number is skipped.
    assert list(k["stalls"]) == [
        "long_scoreboard",
        "not_selected",
        "mio_throttle",
        "barrier",
        "short_scoreboard",
        "wait",
    ]
    assert cases["copy_134mb"] == []  # ncu profiled nothing: said, not invented
    assert [(k["kernel"], k["regs"]) for k in cases["two_kernels"]] == [
        ("first", "32 register/thread"),
        ("second", "96 register/thread"),
    ]


def test_cli_writes_json(tmp_path):
    src = tmp_path / "ncu.csv"
    src.write_text(TEXT)
    out = tmp_path / "summary.json"
    r = subprocess.run(
        [sys.executable, str(SCRIPT), str(src), str(out)], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert "== copy_134mb: 0 kernel(s) profiled" in r.stdout
    assert json.loads(out.read_text())["softmax_16k"][0]["stalls"]["long_scoreboard"] == 6.8
