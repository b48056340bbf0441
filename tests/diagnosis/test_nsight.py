"""Issue 21: `--explain` measures DRAM bytes and stall reasons with Nsight
Compute where it is available and permitted, and says plainly when not.

No GPU and no ncu here: the parser is fed text shaped like ncu's real
output, availability gets a fake PATH and a fake driver parameters file,
the Landlock rules are applied in a child process, and the whole path
(judge -> ncu prefix -> sandbox -> CSV -> diagnosis) runs through the real
`gpulab check --explain --json` on the CPU with a stand-in `ncu`
(tests/fixtures/nsight/fake_ncu.py) under the judge's test-only switch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpulab.explain import nsight

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "nsight"
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
STALLS = ["long_scoreboard", "barrier", "wait", "not_selected", "selected", "mio_throttle"]


def raw_csv(rows: list[tuple[str, int, int, int, list[float]]], time_unit: str = "ns") -> str:
    """`ncu --csv --page raw --print-units base` text. Shape as seen in public
    repositories' fixtures of real runs: ==PROF== lines around it; a header
    of the launch columns ("ID" ... "CC"), device attributes whose values are
    text, then the metrics; a units row empty under the launch columns; one
    row per profiled kernel, numbers with thousands separators."""
    metrics = ["dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"]
    metrics += [STALL.format(s) for s in STALLS]
    launch = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context"]
    launch += ["Stream", "Block Size", "Grid Size", "Device", "CC"]
    attrs = ["device__attribute_confidential_computing_mode", "launch__func_cache_config"]
    head = launch + attrs + metrics
    units = [""] * (len(launch) + len(attrs)) + ["byte", "byte", time_unit] + ["inst"] * len(STALLS)

    def line(cells: list[str]) -> str:
        return ",".join(f'"{c}"' for c in cells)

    out = ["==PROF== Connected to process 4242 (/usr/bin/python3.12)", line(head), line(units)]
    for i, (name, read, write, t, stalls) in enumerate(rows):
        cells = [str(i), "4242", "python3.12", "127.0.0.1", name, "1", "7", "(128, 1, 1)"]
        cells += ["(8192, 1, 1)", "0", "9.0", "No-CC", "CachePreferNone"]
        cells += [f"{read:,}", f"{write:,}", f"{t:,}", *(f"{s:.2f}" for s in stalls)]
        out.append(line(cells))
    out.append("==PROF== Disconnected from process 4242")
    return "\n".join(out) + "\n"


SOFTMAX_CSV = raw_csv(
    [("softmax_kernel", 50_331_648, 16_777_216, 30_000, [6.0, 1.0, 1.0, 2.0, 1.0, 0.0])]
)


def test_parse_raw_page() -> None:
    text = raw_csv(
        [
            ("softmax_kernel", 50_331_648, 16_777_216, 30_000, [6.0, 1.0, 1.0, 2.0, 1.0, 0.0]),
            ("void at::native::fill_kernel<float>(...)", 4096, 8192, 2_500, [0, 0, 3, 0, 1, 1]),
        ]
    )
    kernels, problem = nsight.parse(text)
    assert problem == ""
    assert [k["name"] for k in kernels] == [
        "softmax_kernel",
        "void at::native::fill_kernel<float>(...)",
    ]
    facts = nsight.summary(kernels)
    k0 = facts["kernels"][0]
    assert k0["dram_bytes"] == 50_331_648 + 16_777_216
    assert k0["seconds"] == pytest.approx(30e-6)
    # top 3 of the stalls, "selected" (the issuing warp) left out, shares of the stalled
    assert [s["reason"] for s in k0["stalls"]] == ["long_scoreboard", "not_selected", "barrier"]
    assert k0["stalls"][0]["share"] == pytest.approx(6 / 10, abs=1e-3)
    assert "global memory" in k0["stalls"][0]["meaning"]
    assert facts["dram_bytes"] == 50_331_648 + 16_777_216 + 4096 + 8192
    assert facts["gpu_seconds"] == pytest.approx(32.5e-6)


def test_parse_scales_units_and_reads_the_details_page() -> None:
    text = raw_csv([("k", 1, 2, 3, [1, 0, 0, 0, 0, 0])], time_unit="usecond")
    text = text.replace('"byte","byte"', '"Mbyte","Kbyte"')
    k = nsight.summary(nsight.parse(text)[0])["kernels"][0]
    assert k["dram_read"] == 1e6 and k["dram_write"] == 2e3 and k["seconds"] == pytest.approx(3e-6)
    details = textwrap.dedent(
        """\
        "ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"
        "0","1","python","h","copy(float*)","1","7","Command line profiler metrics","dram__bytes_read.sum","Mbyte","2,000.00"
        "0","1","python","h","copy(float*)","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","10.5"
        """
    )
    kernels, problem = nsight.parse(details)
    assert problem == "" and kernels[0]["metrics"]["dram__bytes_read.sum"] == 2e9
    assert kernels[0]["metrics"]["gpu__time_duration.sum"] == pytest.approx(10.5e-6)


@pytest.mark.parametrize(
    "text, expect",
    [
        ("", "no table"),
        ('garbage\x00,,,"unterminated\n', "no table"),
        ("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n", "ERR_NVGPUCTRPERM"),
        (SOFTMAX_CSV.split("\n", 3)[1] + "\n", "no kernel"),  # header only
        (SOFTMAX_CSV.replace('"30,000"', '"30,000","extra"'), "wrong width"),
    ],
)
def test_parse_never_raises_on_odd_input(text: str, expect: str) -> None:
    kernels, problem = nsight.parse(text)
    assert expect in problem
    assert nsight.summary(kernels)["dram_bytes"] is None or kernels


def test_parse_keeps_what_it_can_read() -> None:
    text = SOFTMAX_CSV.replace('"50,331,648"', '"n/a"')
    k = nsight.summary(nsight.parse(text)[0])["kernels"][0]
    assert k["dram_read"] is None and k["dram_bytes"] == 16_777_216


def test_availability_says_why(tmp_path: Path) -> None:
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    ncu, why = nsight.availability(which=lambda _: None, params=str(params))
    assert ncu is None and "not on PATH" in why and "compiled code" in why
    ncu, why = nsight.availability(which=lambda _: "/x/ncu", params=str(params), euid=1000)
    assert ncu is None and "RmProfilingAdminOnly=1" in why
    assert nsight.availability(which=lambda _: "/x/ncu", params=str(params), euid=0) == (
        "/x/ncu",
        "",
    )
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert nsight.availability(which=lambda _: "/x/ncu", params=str(params), euid=1000)[0]
    missing = str(tmp_path / "no-driver")
    assert nsight.availability(which=lambda _: "/x/ncu", params=missing, euid=1000)[0]


def test_command_line(tmp_path: Path) -> None:
    cmd = nsight.command("/opt/ncu/ncu", tmp_path / "ncu.csv", "sm_90")
    joined = " ".join(cmd)
    assert "--profile-from-start off" in joined and "--csv --page raw" in joined
    assert f"--log-file {tmp_path / 'ncu.csv'}" in joined
    assert f"--port {nsight.PORT_BASE} --max-connections {nsight.PORT_COUNT}" in joined
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert metrics[:3] == [
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "gpu__time_duration.sum",
    ]
    assert STALL.format("long_scoreboard") in metrics and STALL.format("gmma") in metrics
    assert STALL.format("gmma") not in nsight.command("ncu", "x", "sm_80")  # Hopper only
    assert len(metrics) < 25  # few metrics, few replay passes


def test_install_root(tmp_path: Path) -> None:
    real = tmp_path / "nsight-compute-2025.3" / "ncu"
    real.parent.mkdir()
    real.write_text("")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "ncu").symlink_to(real)
    assert nsight.install_root(str(tmp_path / "bin" / "ncu")) == str(real.parent)
    assert nsight.install_root(str(real)) == str(real.parent)


GPU = {"name": "H200", "bandwidth": 4.8e12, "flops": {"fp16": 989e12, "fp32": 67e12}}


def test_measured_bytes_take_precedence_over_the_estimate() -> None:
    case = {
        "name": "8192×1024 fp16",
        "bytes": 32 * 2**20,
        "flops": 5 * 8192 * 1024,
        "dtype": "fp16",
    }
    estimate = {"kind": "extra_bytes", "severity": 0.4, "evidence": "estimated"}
    other = {"kind": "low_occupancy", "severity": 0.2}
    facts = nsight.summary(nsight.parse(SOFTMAX_CSV)[0])
    # Where the course points extra_bytes (the manifest's explain_sections).
    sections = {"extra_bytes": ("02_triton_101_softmax", "Why softmax is memory-bound")}
    finding, ratio = nsight.measured_extra_bytes(facts, case, GPU, sections, "memory")
    assert ratio == pytest.approx(2.0)
    assert finding["severity"] == pytest.approx(0.5) and "measured" in finding["evidence"]
    assert "2.0× the 32.0 MiB" in finding["evidence"]
    assert "(lesson 02, “Why softmax is memory-bound”)" in finding["advice"]
    assert finding["lesson"] == "02_triton_101_softmax"
    merged = nsight.merge([estimate, other], finding, ratio)
    assert [d["kind"] for d in merged] == ["extra_bytes", "low_occupancy"]
    assert merged[0] is finding
    # A one-pass kernel (the re-reads hit L2): the estimate goes, nothing replaces it.
    one_pass = {**facts, "dram_bytes": 31 * 2**20}
    finding, ratio = nsight.measured_extra_bytes(one_pass, case, GPU, {}, "memory")
    assert finding is None and ratio < 1
    assert nsight.merge([estimate, other], finding, ratio) == [other]
    # Compute-bound: 4× the minimum bytes, hidden behind the FLOPs.
    mm = {"name": "8192³ bf16", "bytes": 384e6, "flops": 2 * 8192**3, "dtype": "fp16"}
    finding, ratio = nsight.measured_extra_bytes(
        {"dram_bytes": 1.6e9, "kernels": []}, mm, GPU, {}, "compute"
    )
    assert finding is None and ratio == pytest.approx(4.17, abs=0.01)
    # Nothing measured: the estimate stays.
    assert nsight.merge([estimate], None, None) == [estimate]


_CONFINED = """
import errno, json, os, socket, sys
from gpulab.sandbox.isolation import Policy, apply
policy = Policy.parse(json.loads(sys.argv[1]))
in_force = apply(policy)
def bind(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return "ok"
    except OSError as e:
        return "denied" if e.errno in (errno.EACCES, errno.EPERM) else "other"
    finally:
        s.close()
def read(path):
    try:
        open(path).read()
        return "ok"
    except OSError:
        return "denied"
print(json.dumps({"in_force": in_force, "inside": bind(49152 + 17), "outside": bind(40000),
                  "tool": read(sys.argv[2])}))
"""


@pytest.mark.skipif(
    __import__("gpulab.sandbox.isolation", fromlist=["x"]).landlock_abi() < 4,
    reason="Landlock ABI 4 (TCP port rules) is not in this kernel",
)
@pytest.mark.parametrize("profiled", [False, True])
def test_profiler_policy_opens_ncus_folder_only(tmp_path: Path, profiled: bool) -> None:
    tool = tmp_path / "ncu-install" / "bin"
    tool.mkdir(parents=True)
    (tool / "ncu").write_text("#!/bin/sh\n")
    pkg = ROOT / "gpulab"
    policy = {
        "read": [sys.prefix, sys.base_prefix, "/usr", "/lib", "/lib64", "/etc", "/proc", str(pkg)],
        "write": [str(tmp_path / "w")],
        # A port range in the field opens nothing either: no rule reads it.
        "profiler": {
            **nsight.profiler_policy(str(tool / "ncu")).to_json(),
            "tcp_ports": [49152, 49215],
        }
        if profiled
        else None,
    }
    (tmp_path / "w").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", _CONFINED, json.dumps(policy), str(tool / "ncu")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["outside"] == "denied"
    # No TCP either way: only ncu's folder opens, read-only.
    assert seen["inside"] == "denied" and any("no TCP" in s for s in seen["in_force"])
    assert seen["tool"] == ("ok" if profiled else "denied")


def test_profile_request_calls_once_between_start_and_stop() -> None:
    """The sandbox's side on the CPU: random floats, zero ints, one warm-up,
    the traced call's kernels in the reply. In a process of its own: Triton
    decides at its first import whether its @jit library is interpreted, so
    a test process that imported it compiled cannot run the interpreter."""
    code = textwrap.dedent(
        f"""
        import json, sys, torch
        sys.path.insert(0, {str(ROOT)!r})
        from gpulab.explain.judge.cases import describe
        from gpulab.wire.explain import ProfileRequest
        from gpulab.explain.sandbox.profile import profile_request
        from gpulab.explain.sandbox.plugin import build
        from gpulab.sandbox.learner import load_module

        gen = torch.Generator().manual_seed(0)
        built = build(
            describe((torch.empty(4, 8), torch.empty(3, dtype=torch.int64))), "cpu", gen
        )
        assert built[0].std() > 0.5 and built[1].tolist() == [0, 0, 0]
        fixture = {str(FIXTURES / "softmax_tiles.py")!r}

        class Server:
            device, file = "cpu", fixture
            module = load_module(fixture, "nsight_fixture")

            def function(self, name):
                return getattr(self.module, name)

        msg = {{"function": "softmax", "case": {{"name": "c", "args": describe([torch.empty(64, 300)])}}}}
        ask = lambda m: profile_request(Server(), ProfileRequest.parse(m)).to_json()
        reply = ask({{**msg, "warmup": 1}})
        bad = ask({{**msg, "case": {{"args": [], "kwargs": {{}}}}}})
        print(json.dumps([reply, bad]))
        """
    )
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    reply, bad = json.loads(done.stdout.strip().splitlines()[-1])
    assert reply["type"] == "profiled" and reply["kernels"] == ["softmax_kernel"], reply
    assert "TypeError" in bad["error"]


def _check(tmp_path: Path, env: dict[str, str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpulab",
            "--workspace",
            str(tmp_path / "ws"),
            "check",
            "softmax",
            "--file",
            str(FIXTURES / "softmax_tiles.py"),
            "--explain",
            "--json",
            "--device",
            "cpu",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=ROOT,
    )
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(proc.stdout[-2000:] + proc.stderr[-2000:]) from None


def _check_with_stand_in(tmp_path: Path, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The real runner, judge and sandbox on the CPU, asked (a typed option,
    no switch in the environment) to run the Nsight step anyway: the
    stand-in ncu first on PATH."""
    from gpulab.course.content import load_course
    from gpulab.lab.runner import run_check
    from gpulab.wire.protocol import ExplainOptions

    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    return run_check(
        load_course().find("softmax"),
        FIXTURES / "softmax_tiles.py",
        device="cpu",
        timeout=600,
        workspace=str(ws),
        explain=ExplainOptions(nsight_without_gpu=True),
    ).to_json()


def _fake_ncu(tmp_path: Path, mode: str = "") -> Path:
    bin_dir = tmp_path / "ncu-install" / "bin"
    bin_dir.mkdir(parents=True)
    ncu = bin_dir / "ncu"
    ncu.write_text(f"#!{sys.executable}\n" + (FIXTURES / "fake_ncu.py").read_text())
    ncu.chmod(0o755)
    (bin_dir / "ncu.csv.txt").write_text(SOFTMAX_CSV)
    if mode:
        (bin_dir / "mode.txt").write_text(mode)
    return bin_dir


@pytest.mark.slow
def test_cpu_explain_says_nsight_did_not_run_and_why(tmp_path: Path) -> None:
    result = _check(tmp_path, {})
    assert result["status"] == "passed", result.get("summary")
    ex = result["explain"]
    assert ex["nsight"]["measured"] is False
    line = "Nsight Compute: not run (no GPU here): the estimate rests on the compiled code and the launch"
    assert ex["basis"][-1] == line and ex["nsight"]["why"] == line


@pytest.mark.slow
def test_through_the_judge_with_a_stand_in_ncu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real judge on the CPU, with the stand-in ncu first on PATH: the
    sandbox starts under the prefix, answers over the inherited socket,
    and the stand-in's CSV becomes the measured extra_bytes finding."""
    bin_dir = _fake_ncu(tmp_path)
    result = _check_with_stand_in(tmp_path, bin_dir, monkeypatch)
    assert result["status"] == "passed", result.get("summary")
    info = result["explain"]["nsight"]
    assert info["measured"] is True, info
    assert info["launched"] == ["softmax_kernel"]  # the sandbox's call, under the prefix
    assert info["ratio"] == pytest.approx(2.0)  # 64 MiB against 2·8192·1024·2 bytes
    assert info["kernels"][0]["stalls"][0]["reason"] == "long_scoreboard"
    assert "measured by Nsight Compute" in result["explain"]["basis"][-1]
    top = [d for d in result["diagnosis"] if d["kind"] == "extra_bytes"]
    assert top and "Nsight Compute measured 64.0 MiB" in top[0]["evidence"]
    seen = json.loads((bin_dir / "argv.json").read_text())
    assert seen["options"]["--profile-from-start"] == "off"
    assert seen["options"]["--page"] == "raw"
    assert seen["target"][0] == sys.executable and seen["target"][1:3] == ["-I", "-c"]
    log = Path(seen["options"]["--log-file"])
    assert log.name == "ncu.csv" and not log.parent.exists()  # the judge's folder, removed
    assert info["seconds"] < 60

    from rich.console import Console

    from gpulab.explain.render import explain_renderable

    console = Console(width=200, record=True)
    console.print(explain_renderable(result))
    text = console.export_text()
    assert "Nsight Compute, case" in text and "2.00× the minimum 32.0 MiB" in text
    assert "long scoreboard 60%" in text


@pytest.mark.slow
def test_a_refusing_ncu_is_an_advisory_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _fake_ncu(tmp_path, mode="refuse")
    result = _check_with_stand_in(tmp_path, bin_dir, monkeypatch)
    assert result["status"] == "passed", result.get("summary")
    info = result["explain"]["nsight"]
    assert info["measured"] is False and "ERR_NVGPUCTRPERM" in info["problem"], info
    assert result["explain"]["basis"][-1].startswith("Nsight Compute could not measure")


def test_bytes_under_the_minimum_are_explained() -> None:
    # The H200 run: the reference softmax's 8192×1024 fp16 case read 0.51×
    # its minimum (the output stayed in L2); the three-pass variant 2.00×.
    from gpulab.explain.judge.nsight_step import basis_line

    small = basis_line({"measured": True, "case": "8192×1024 fp16", "ratio": 0.51})
    assert "0.51× the minimum" in small and "still in L2" in small
    big = basis_line({"measured": True, "case": "4096×16384 fp16", "ratio": 2.0})
    assert big.endswith("DRAM bytes 2.00× the minimum)")
