"""`--explain`'s Nsight Compute step, the judge's side: after a passing check
on a GPU, where ncu is available and permitted, one call of the learner's
function in a fresh sandbox started under ncu, for the case that matters
most; its DRAM bytes against the exercise's minimum and its stall reasons.

Advisory: every failure (ncu missing, refused, slower than the budget, a
crash) becomes a line in `result["explain"]["nsight"]` and the basis, never
a failed check. The whole step is bounded by BUDGET_S (coreutils `timeout`
kills ncu's process group past it).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpulab.explain import nsight
from gpulab.explain.facts import CaseDescription, NsightInfo, ResultView, TimedRow
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.explain import Profiled, ProfileRequest
from gpulab.wire.replies import Broken, Raised
from gpulab.wire.sandbox_start import Exit, Loaded, LoadRequest

if TYPE_CHECKING:
    from gpulab.explain.judge.cases import Graders

BUDGET_S = 60.0


def why_not(request: CheckRequest, device: str) -> tuple[str | None, str]:
    """(ncu's path, "") when the step runs, else (None, the basis line)."""
    if device != "cuda" and not request.explain_nsight_without_gpu:
        return None, (
            "Nsight Compute: not run (no GPU here): the estimate rests on the compiled "
            "code and the launch"
        )
    if not request.explain:
        return None, (
            "Nsight Compute: not run without --explain (it takes up to a minute): "
            f"{nsight.NOT_MEASURED}"
        )
    return nsight.availability()


def _case(
    request: CheckRequest, device: str, timed: dict[str | None, TimedRow], graders: Graders
) -> CaseDescription:
    from gpulab.explain.judge.case_facts import case_facts, entry_of, ordered
    from gpulab.explain.judge.cases import cache_file, described_cases

    cases = described_cases(request.exercise, device, cache_file(request.workspace), graders)
    if device != "cuda":  # the CPU test: the Triton interpreter, so the least work
        return min(cases, key=lambda c: case_facts(request, entry_of(c), {})["work"])
    return ordered(cases, request, timed)[0]


def _run(
    request: CheckRequest,
    device: str,
    fresh: Any,
    ncu: str,
    case: CaseDescription,
    out: Path,
    arch: str,
) -> tuple[Profiled | Raised | Broken, float]:
    """Start the profiled sandbox, ask for the call, let ncu finish; returns
    (the sandbox's reply, seconds)."""
    log = out / "ncu.csv"
    timeout = shutil.which("timeout")
    if not timeout:
        raise RuntimeError("coreutils `timeout` is not on PATH, so ncu could not be bounded")
    # timeout (not --foreground) signals its whole process group: ncu and
    # the sandbox it started; the judge's read then ends at once.
    prefix = [timeout, "-s", "KILL", str(int(BUDGET_S)), *nsight.command(ncu, log, arch)]
    start = time.monotonic()
    sandbox = None
    try:
        sandbox = fresh(prefix=prefix, profiler=nsight.profiler_policy(ncu))
        loaded = sandbox.ask(LoadRequest((request.function,)), Loaded)
        if not isinstance(loaded, Loaded):
            raise RuntimeError(f"the profiled sandbox could not load your file: {loaded.summary}")
        profile = ProfileRequest(
            function=request.function,
            case={"name": case.get("name"), "args": case.get("args"), "kwargs": case.get("kwargs")},
            warmup=1 if device == "cuda" else 0,
            seed=0,
        )
        reply = sandbox.ask(profile, Profiled)
        # ncu writes its CSV once the profiled process has exited.
        sandbox.send(Exit())
        with contextlib.suppress(Exception):
            sandbox.proc.wait(timeout=max(1.0, BUDGET_S - (time.monotonic() - start)))
    except Exception as exc:
        took = time.monotonic() - start
        if took >= BUDGET_S - 1:
            raise RuntimeError(f"stopped after {BUDGET_S:.0f} s (the budget for ncu)") from None
        raise RuntimeError(_failure(exc, log, sandbox)) from None
    finally:
        if sandbox is not None:
            sandbox.close()
    return reply, time.monotonic() - start


def _failure(exc: BaseException, log: Path, sandbox: Any) -> str:
    """Why the run failed, from ncu's own ==ERROR== lines where it wrote any."""
    errors = ""
    with contextlib.suppress(OSError):
        errors = "; ".join(
            ln.strip() for ln in log.read_text(errors="replace").splitlines() if "==ERROR==" in ln
        )
    if not errors and sandbox is not None:
        with contextlib.suppress(Exception):
            out = sandbox.output.text()  # ncu's messages, or the sandbox's last words
            found = [ln.strip() for ln in out.splitlines() if "==ERROR==" in ln]
            errors = "; ".join(found) or (
                f"{type(exc).__name__}: {out.strip()[-240:]}" if out.strip() else ""
            )
    return (errors or f"{type(exc).__name__}: {exc}")[:300]


def measure(
    request: CheckRequest, result: ResultView, device: str, fresh: Any, graders: Graders
) -> NsightInfo:
    """Run the step; returns result["explain"]["nsight"] (and updates the
    diagnosis and basis in `result`)."""
    ex = result.setdefault("explain", {})
    ncu, why = why_not(request, device)
    if ncu is None or fresh is None:
        return {"measured": False, "why": why or "no sandbox to profile in"}
    start = time.monotonic()
    out = Path(tempfile.mkdtemp(prefix="gpulab-ncu-"))  # the judge's: no sandbox writes here
    info: NsightInfo = {"measured": False}
    try:
        timed = {r.get("name"): r for r in ((result.get("timing") or {}).get("cases") or [])}
        case = _case(request, device, timed, graders)
        info["case"] = case.get("name", "?")
        reply, _ = _run(request, device, fresh, ncu, case, out, str(ex.get("arch") or ""))
        info["launched"] = list(reply.kernels) if isinstance(reply, Profiled) else []
        if not isinstance(reply, Profiled) or reply.error:
            why = reply.error if isinstance(reply, Profiled) else reply.summary
            raise RuntimeError(f"your function failed under ncu: {why}")
        text = (out / "ncu.csv").read_text(errors="replace") if (out / "ncu.csv").exists() else ""
        info["csv"] = text[-20000:]  # the raw evidence, for --json and the GPU validation
        kernels, problem = nsight.parse(text)
        if not kernels:
            raise RuntimeError(problem or "ncu wrote no table")
        facts = nsight.summary(kernels)
        facts_seen = ex.get("facts")
        gpu = facts_seen.get("gpu") if facts_seen else None
        from gpulab.explain.judge.case_facts import case_facts, entry_of
        from gpulab.explain.kinds import declared, sections_of

        lesson, course = declared(request.exercise, request.content_root)
        cf = case_facts(request, entry_of(case), timed, lesson.exps if lesson else "")
        finding, ratio = nsight.measured_extra_bytes(
            facts, cf, gpu, sections_of(lesson, course), request.kind or ""
        )
        result["diagnosis"] = nsight.merge(result.get("diagnosis") or [], finding, ratio)
        info["kernels"] = facts["kernels"]
        info["dram_bytes"] = facts["dram_bytes"]
        info["gpu_seconds"] = facts["gpu_seconds"]
        info.update({"measured": True, "minimum_bytes": cf.get("bytes"), "ratio": ratio})
        if problem:
            info["problem"] = problem
    except Exception as exc:  # noqa: BLE001 - advice only
        info["problem"] = str(exc)[:300] or type(exc).__name__
    finally:
        shutil.rmtree(out, ignore_errors=True)
    info["seconds"] = round(time.monotonic() - start, 2)
    return info


UNDER_MINIMUM = 0.9


def basis_line(info: NsightInfo) -> str:
    if info.get("measured"):
        ratio = info.get("ratio")
        moved = f": DRAM bytes {ratio:.2f}× the minimum" if ratio else ""
        if ratio and ratio < UNDER_MINIMUM:
            # Measured on an H200: the reference softmax's 8192×1024 case,
            # 32 MiB in all, read 0.51× its minimum: its output was still in
            # the 50 MB L2 when the kernel ended, and DRAM counters miss it.
            moved += (
                ", less than the data itself: what it wrote was still in L2 when it "
                "ended, so the DRAM counters miss it"
            )
        return (
            f"bytes moved and stall reasons: measured by Nsight Compute (case "
            f"{info.get('case', '?')}{moved})"
        )
    if info.get("problem"):
        return f"Nsight Compute could not measure ({info['problem']}): {nsight.NOT_MEASURED}"
    return info.get("why") or f"Nsight Compute: not run: {nsight.NOT_MEASURED}"


def attach(
    request: CheckRequest, result: ResultView, device: str, fresh: Any, graders: Graders
) -> None:
    """judge_side.attach's hook, after the diagnosis: add explain.nsight and
    its basis line (replacing the availability line); never raises."""
    ex = result.get("explain")
    if not isinstance(ex, dict) or "basis" not in ex:
        return  # the explanation itself failed: nothing to add to
    try:
        info = measure(request, result, device, fresh, graders)
    except Exception as exc:  # noqa: BLE001 - advice must not break a check
        info = {"measured": False, "problem": f"{type(exc).__name__}: {exc}"[:300]}
    ex["nsight"] = info
    ex["basis"] = [b for b in ex["basis"] if "Nsight Compute" not in b] + [basis_line(info)]
    if "seconds" in info:
        ex.setdefault("steps", {})["nsight"] = info["seconds"]


__all__ = ["BUDGET_S", "attach", "basis_line", "measure", "why_not"]
