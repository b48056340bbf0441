"""Issue 21: an autotuned kernel explained on the CPU, and --explain's
compiles in the shadow of the check.

Without a GPU nothing can time an autotuner's configs, so the tracer records
every config it would try and the judge explains the first that compiles
without spilling; the spill finding stands only when all of them spill. The
compiles run one request at a time beside the check and stop soon after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from gpulab.explain import diagnose
from gpulab.explain.candidates import SPILL_MIN, pick, resolve, still_needed
from tests.diagnosis.test_diagnosis import _facts, _info

ROOT = Path(__file__).resolve().parents[2]


def _cand(i: int, n: int, group: int = 0, **kw) -> dict:
    return {
        "kernel": "matmul_kernel",
        "key": f"K{group}.{i}",
        "group": group,
        "candidate": i,
        "of": n,
        "programs": 4096,
        "num_warps": 8,
        "constexprs": {"BLOCK_M": 128},
        **kw,
    }


def _spilling(n: int) -> dict:
    return _info(spill_stores=n // 2, spill_loads=n - n // 2, registers=255)


def test_the_first_config_that_does_not_spill_is_explained() -> None:
    members = [_cand(i, 3) for i in range(3)]
    compiled = {"K0.0": _spilling(804), "K0.1": _spilling(8), "K0.2": _info()}
    chosen = pick(members, compiled)
    assert chosen["key"] == "K0.1"  # 8 bytes is noise, and it comes before K0.2
    assert chosen["autotune"] == {
        "configs": 3,
        "compiled": 3,
        "spilling": 1,
        "chosen": 1,
        "why": "the first config that compiles without spilling",
    }
    # All spill: the least; none compiled: the first.
    worst = {"K0.0": _spilling(804), "K0.1": _spilling(400), "K0.2": _spilling(600)}
    assert pick(members, worst)["key"] == "K0.1"
    assert pick(members, {})["key"] == "K0.0"


def test_a_case_keeps_one_launch_per_autotuned_kernel_in_place() -> None:
    plain = {"kernel": "prep", "key": "P", "programs": 8}
    case = {"name": "c", "launches": [plain, *(_cand(i, 3) for i in range(3)), dict(plain)]}
    out = resolve(case, {"K0.2": _info()})
    assert [la["key"] for la in out["launches"]] == ["P", "K0.2", "P"]
    assert resolve({"name": "c", "launches": [plain]}, {})["launches"] == [plain]


def test_spills_are_a_finding_only_when_the_autotuner_has_no_way_out() -> None:
    def top(compiled: dict, n: int = 3) -> list[dict]:
        launches = [_cand(i, n) for i in range(n)]
        facts = _facts(kind="compute", exercise="matmul", launches=launches, compiled=compiled)
        facts["cases"] = [resolve(c, compiled) for c in facts["cases"]]
        return [f for f in diagnose(facts) if f["kind"] == "register_spills"]

    assert not top({"K0.0": _spilling(804), "K0.1": _info()})
    every = top({f"K0.{i}": _spilling(804) for i in range(3)})
    assert "all 3 configs its autotuner tries spill" in every[0]["evidence"]
    partly = top({"K0.0": _spilling(804)})
    assert "2 not compiled in time" in partly[0]["evidence"]
    assert partly[0]["severity"] < every[0]["severity"]  # the autotuner may still avoid it
    # A register or two parked in L1 is not what limits a kernel.
    small = _facts(launches=[{"kernel": "k", "key": "K", "programs": 8192}])
    small["compiled"] = {"K": _spilling(SPILL_MIN - 8)}
    assert "register_spills" not in {f["kind"] for f in diagnose(small)}
    small["compiled"] = {"K": _spilling(SPILL_MIN * 4)}
    assert "register_spills" in {f["kind"] for f in diagnose(small)}


def test_later_configs_are_compiled_only_while_no_earlier_one_is_clean() -> None:
    cases = [{"launches": [_cand(i, 3) for i in range(3)]}, {"launches": [{"key": "P"}]}]
    assert still_needed("K0.1", cases, {"K0.0": _spilling(804)})
    assert not still_needed("K0.1", cases, {"K0.0": _info()})
    assert not still_needed("K0.2", cases, {"K0.0": _spilling(804), "K0.1": _info()})
    assert still_needed("P", cases, {"K0.0": _info()})  # not autotuned: always


def test_the_tracer_records_every_config_the_autotuner_would_try() -> None:
    """kernels/matmul.py traced dry (no GPU): its six GPU configs for a big
    product, its own pruning's single config for a small one."""
    script = f"""
import json, sys, torch
sys.path.insert(0, {str(ROOT)!r})
from gpulab.explain.sandbox.plugin import _compiled_mode
from gpulab.explain.sandbox.trace import LaunchTracer
from gpulab.sandbox.learner import load_module
with _compiled_mode():
    mod = load_module({str(ROOT / "kernels" / "matmul.py")!r}, "ref")
out = {{}}
for n in (4096, 256):
    a = torch.empty(n, n, dtype=torch.float16)
    with LaunchTracer(True) as t:
        mod.matmul(a, a)
    out[n] = [(la["group"], la["candidate"], la["of"], la["constexprs"]["BLOCK_M"]) for la in t.launches]
print(json.dumps(out))
"""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    big, small = out["4096"], out["256"]
    assert [c[1] for c in big] == list(range(6)) and {c[2] for c in big} == {6}
    assert [c[3] for c in big][:3] == [128, 128, 256]  # the kernel's own GPU_CONFIGS order
    assert len(small) == 1 and small[0][2] == 1  # SMALL_CONFIG, from its early_config_prune


class _SlowCompiles:
    """An explain sandbox whose compiles take until it is killed (a compile
    in flight when the check ends); the first answers at once."""

    def __init__(self, first_s: float = 0.0) -> None:
        self.killed = threading.Event()
        self.compiles: list[str] = []
        self.closed = 0
        self.sent: list[dict] = []
        self.pending = False
        self.first_s = first_s

    def send(self, msg: Any) -> None:
        self.sent.append(msg.to_json())

    def ask(self, message: Any, kind: Any) -> Any:
        """As gpulab.judge.remote.Sandbox.ask: the reply read as a `kind`."""
        from gpulab.wire.replies import read_reply

        return read_reply(self.request(message), kind)

    def request(self, msg: Any) -> dict:
        msg = msg.to_json()  # a typed request, as the judge sends it
        if msg["type"] == "explain":
            launches = [{**_cand(i, 3), "signature": {}, "problem": ""} for i in range(3)]
            return {
                "type": "explained",
                "cases": [{"name": "c", "sizes": {}, "dtype": "fp16", "launches": launches}],
                "compiled": {},
                "pending": ["K0.0", "K0.1", "K0.2"],
            }
        self.compiles.append(msg["key"])
        if len(self.compiles) == 1:
            self.killed.wait(self.first_s)
        elif not self.killed.wait(30):
            raise AssertionError("never stopped")
        if self.killed.is_set():
            raise OSError("the sandbox died")
        return {"type": "compiled", "compiled": {msg["key"]: _spilling(804)}}

    def kill(self) -> None:
        self.killed.set()

    def close(self) -> None:
        self.closed += 1


def _request():
    from gpulab.wire.check_request import CheckRequest

    return CheckRequest(
        exercise="matmul",
        function="matmul",
        file="matmul.py",
        kind="compute",
        bytes="0",
        flops="1",
        explain=True,
    )


def test_explain_compiles_while_the_check_runs_and_stops_soon_after() -> None:
    from gpulab.explain.judge.plugin import GRACE_S, attach, start
    from gpulab.judge import plugin_host

    req = _request()
    box = _SlowCompiles()
    early = start(req, "cpu", lambda: box, graders=plugin_host)
    deadline = time.monotonic() + 60
    while len(box.compiles) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the check runs; the second compile is in flight
    t0 = time.monotonic()
    result = {"status": "passed"}
    attach(req, result, "cpu", None, early=early, graders=plugin_host)
    assert time.monotonic() - t0 < GRACE_S + 5
    assert box.killed.is_set() and box.closed == 1
    explain = result["explain"]
    assert explain["not_compiled"] == 2, explain  # the one stopped and the one never sent
    assert explain["steps"]["after_check"] < GRACE_S + 5
    spills = [f for f in result["diagnosis"] if f["kind"] == "register_spills"]
    assert "2 not compiled in time" in spills[0]["evidence"]


def test_each_run_compiles_at_least_one_kernel_even_after_the_check() -> None:
    """A check shorter than the imports and one compile: the run's first
    compile still finishes (else a short check would never fill the cache),
    and nothing after it starts."""
    from gpulab.explain.judge.plugin import FIRST_GRACE_S, GRACE_S, attach, start
    from gpulab.judge import plugin_host

    assert FIRST_GRACE_S > 0.5
    req = _request()
    box = _SlowCompiles(first_s=GRACE_S + 0.5)
    early = start(req, "cpu", lambda: box, graders=plugin_host)
    result = {"status": "passed"}
    attach(req, result, "cpu", None, early=early, graders=plugin_host)  # the check is already over
    assert box.sent[0]["type"] == "explain_prepare"  # imports begin before the cases are built
    assert box.compiles == ["K0.0"] and not box.killed.is_set()  # nothing after it started
    assert result["explain"]["facts"]["compiled"]["K0.0"]["ok"]
    assert result["explain"]["not_compiled"] == 2


def test_a_first_compile_longer_than_its_grace_is_stopped() -> None:
    from gpulab.explain.judge.plugin import FIRST_GRACE_S, GRACE_S, attach, start
    from gpulab.judge import plugin_host

    req = _request()
    box = _SlowCompiles(first_s=30)
    early = start(req, "cpu", lambda: box, graders=plugin_host)
    deadline = time.monotonic() + 60
    while not box.compiles and time.monotonic() < deadline:
        time.sleep(0.05)
    t0 = time.monotonic()
    result = {"status": "passed"}
    attach(req, result, "cpu", None, early=early, graders=plugin_host)
    took = time.monotonic() - t0
    assert GRACE_S + FIRST_GRACE_S - 0.1 < took < GRACE_S + FIRST_GRACE_S + 5
    assert box.killed.is_set() and result["explain"]["not_compiled"] == 3


def _run_file(tmp_path: Path, script: str, interpret: bool) -> dict:
    """Run `script` from a file (@triton.jit wants one), with or without the
    Triton interpreter; the JSON its last line prints."""
    (tmp_path / "script.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run(
        [sys.executable, str(tmp_path / "script.py")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kernels_are_compiled_as_triton_launches_them(tmp_path: Path) -> None:
    """A launch's 1s are constexprs to Triton and its multiples of 16 are
    known divisible: the compiled code differs (a flash-attention fixture
    needed 96 KiB of shared memory compiled without them, 320 KiB as launched
    on an H200). Here a strided copy: with stride 1 known, wide loads."""
    script = f"""
import json, sys, torch, triton, triton.language as tl
sys.path.insert(0, {str(ROOT)!r})
from gpulab.explain.sandbox.plugin import _compiled_mode, compile_launch
from gpulab.explain.sandbox.trace import LaunchTracer

@triton.jit
def copy(out_ptr, x_ptr, n, stride, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs * stride, tl.load(x_ptr + offs * stride, mask=offs < n), mask=offs < n)

x = torch.empty(4096)
out = {{}}
for stride in (1, 3):
    with _compiled_mode(), LaunchTracer(True) as t:
        copy[(4,)](x, x, 4096, stride, BLOCK=1024)
    la = t.launches[0]
    ptx = {{}}
    import gpulab.measure.compile_info as ci
    real = ci.compile_kernel
    ci.compile_kernel = lambda *a, **k: real(*a, **{{**k, "asm_hook": lambda asm: ptx.update(asm)}})
    compile_launch(la, "sm_90")
    ci.compile_kernel = real
    out[stride] = [la["signature"]["stride"], la["divisible"], la["ones"], "ld.global.v4" in ptx["ptx"]]
print(json.dumps(out))
"""
    out = _run_file(tmp_path, script, interpret=False)
    assert out["1"] == ["constexpr", ["n"], ["stride"], True]
    assert out["3"] == ["i32", ["n"], [], False]


def test_on_a_gpu_the_steady_state_call_is_traced(tmp_path: Path) -> None:
    """A wrapper that tries two kernels on a shape's first call and keeps one
    (the reference softmax does): on a GPU the explanation traces a second
    call, so the losing kernel's facts (its spills, on the H200) stay out.
    Run here in the interpreter, with the GPU's path taken."""
    script = f"""
import json, sys, torch, triton, triton.language as tl
sys.path.insert(0, {str(ROOT)!r})
from types import SimpleNamespace
from gpulab.explain.sandbox import plugin as sandbox_side

@triton.jit
def loser(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

@triton.jit
def winner(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

chosen = {{}}
def f(x):
    if "k" not in chosen:  # the first call of a shape tries both
        loser[(1,)](x, x.numel(), BLOCK=64)
        chosen["k"] = winner
    chosen["k"][(1,)](x, x.numel(), BLOCK=64)
    return x

torch.cuda.synchronize = lambda: None
case = {{"name": "c", "args": [{{"__tensor__": {{"dtype": "float32", "shape": [64], "stride": [1], "offset": 0}}}}], "kwargs": {{}}}}
out = {{}}
for device in ("cuda", "cpu"):
    chosen.clear()
    sandbox_side.build = lambda obj, dev, gen=None: [torch.zeros(64)] if isinstance(obj, list) else {{}}
    entry, launches = sandbox_side._trace_case(SimpleNamespace(device=device), f, case, "sm_90")
    out[device] = [la["kernel"] for la in launches]
print(json.dumps(out))
"""
    out = _run_file(tmp_path, script, interpret=True)
    assert out["cuda"] == ["winner"]
    assert out["cpu"] == ["loser", "winner"]  # the CPU's one call: nothing is timed there
