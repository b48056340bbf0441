"""The judge's part of `--explain`: gather the facts, ask the sandbox for the
launch and compile facts, diagnose, attach to the result.

Advisory only: nothing here changes a status or a grade, and any failure
becomes a line in `result["explain"]["error"]`, never a failed check.

The judge's main calls the hooks (`start`, `attach`) and passes what the
plug-in needs of its graders (`graders`: gpulab.judge.plugin_host), so
nothing here imports the judge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from gpulab.explain.facts import (
    CaseEntry,
    CompileFacts,
    CompileFailure,
    Explanation,
    Facts,
    GpuFacts,
    ResultView,
    TimedRow,
)
from gpulab.explain.judge.case_facts import case_facts, ordered
from gpulab.explain.kinds import declared, explained, sections_of
from gpulab.explain.rules import diagnose
from gpulab.wire.check_request import CheckRequest
from gpulab.wire.explain import (
    ExplainCompile,
    ExplainCompiled,
    Explained,
    ExplainPrepare,
    ExplainRequest,
)
from gpulab.wire.status import Status

if TYPE_CHECKING:
    from gpulab.explain.judge.cases import Graders


@dataclass(frozen=True, slots=True)
class Asked:
    """The sandbox's answer to `explain`, with the GPU it was asked for and
    where the time went (`steps`, filled in as the explanation goes on)."""

    gpu: GpuFacts
    reply: Explained
    steps: dict[str, float]


def reply_facts(reply: Explained) -> tuple[list[CaseEntry], dict[str, CompileFacts]]:
    """The sandbox's cases and compile facts, as the JSON they are meant to
    be (the frame checks only that they are objects). Not checked further:
    the rules read each value with a default, and a value that breaks one
    becomes the explanation's error, never the check's."""
    return (
        cast("list[CaseEntry]", reply.cases),
        cast("dict[str, CompileFacts]", reply.compiled),
    )


def wanted(request: CheckRequest, result: ResultView) -> bool:
    """After every passing timed check (a GPU's), and with --explain after
    any passing check. A check without timing and without --explain (the
    CPU's usual one) pays nothing."""
    if (
        request.exercise not in explained(request.content_root)
        or result.get("status") != Status.PASSED
    ):
        return False
    return bool(request.explain or (result.get("timing") or {}).get("cases"))


def gpu_facts(device: str, request: CheckRequest) -> GpuFacts:
    from gpulab.gpu import ceilings, hardware, roofline
    from gpulab.measure.compile_info import ARCHS, parse_arch

    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name(0)
        props = torch.cuda.get_device_properties(0)
        cc = props.major * 10 + props.minor
        gpu = hardware.match_gpu(name)
        bw, _ = ceilings.ceiling("memory", "fp16", name, request.workspace)
        flops = {
            d: ceilings.ceiling("compute", d, name, request.workspace)[0]
            for d in ("fp32", "fp16", "bf16", "tf32")
        }
        return {
            "name": name,
            "sms": props.multi_processor_count,
            "bandwidth": bw,
            "flops": {k: v for k, v in flops.items() if v},
            "l2_mb": getattr(gpu, "l2_mb", None),
            "arch": f"sm_{max([a for a in ARCHS if a <= cc] or [75])}",
            "source": "this machine's GPU",
        }
    gpu, why = roofline.choose_gpu(request.explain_gpu, request.gpu_setting, detect=False)
    return {
        "name": gpu.name,
        "sms": gpu.sms,
        "bandwidth": gpu.bandwidth_tbs * 1e12,
        "flops": {k: v * 1e12 for k, v in gpu.tflops.items()},
        "l2_mb": gpu.l2_mb,
        "arch": f"sm_{parse_arch(gpu.cc or '9.0')}",
        "source": f"the {gpu.name} datasheet ({why})",
    }


def nsight_status() -> str:
    """Whether Nsight Compute could measure DRAM bytes and stalls here (the
    basis line until gpulab.explain.judge.nsight_step replaces it)."""
    from gpulab.explain.nsight import availability

    ncu, why = availability()
    return why if ncu is None else "Nsight Compute is available (it runs with --explain on a GPU)"


def ask(
    request: CheckRequest,
    device: str,
    sandbox: Any,
    timed: dict[str | None, TimedRow],
    graders: Graders,
    compile_later: bool = False,
) -> Asked:
    """The sandbox's launch and compile facts for the exercise's timing cases.
    `compile_later`: kernels the sandbox has not compiled before come back
    as "pending" keys, for `explain_compile` requests (see Early)."""
    from gpulab.explain.judge.cases import cache_file, described_cases

    t0 = time.monotonic()
    gpu = gpu_facts(device, request)
    cases = described_cases(request.exercise, device, cache_file(request.workspace), graders)
    t1 = time.monotonic()
    default_budget = 1.5 if device == "cpu" else (60 if request.explain else 5)
    ask = ExplainRequest(
        function=request.function,
        arch=gpu["arch"],
        budget_s=float(
            request.explain_budget_s if request.explain_budget_s is not None else default_budget
        ),
        cases=[
            {k: c[k] for k in ("name", "sizes", "dtype", "elt", "args", "kwargs")}
            for c in ordered(cases, request, timed)
        ],
        compile="later" if compile_later else None,
    )
    reply = sandbox.ask(ask, Explained)
    if not isinstance(reply, Explained):
        raise RuntimeError(f"the sandbox could not explain: {reply.summary}")
    steps = {"cases": round(t1 - t0, 2), "sandbox": round(time.monotonic() - t1, 2)}
    steps.update({f"sandbox_{k}": v for k, v in reply.steps.items()})
    return Asked(gpu, reply, steps)


def conclude(
    request: CheckRequest, asked: Asked, timed: dict[str | None, TimedRow], seconds: float
) -> Explanation:
    """Facts -> the result's "diagnosis" and "explain"."""
    from gpulab.explain.candidates import resolve

    exercise, gpu = request.exercise, asked.gpu
    reply = asked.reply
    cases, compiled = reply_facts(reply)
    lesson, course = declared(exercise, request.content_root)
    exps = lesson.exps if lesson else ""
    facts = [case_facts(request, resolve(c, compiled), timed, exps) for c in cases]
    all_facts: Facts = {
        "exercise": exercise,
        "kind": request.kind,
        "gpu": gpu,
        "measured": bool(timed),
        "cases": facts,
        "compiled": compiled,
    }
    found = diagnose(all_facts, sections_of(lesson, course))
    failures = compile_failures(compiled)
    basis = [
        f"hardware: {gpu['source']}",
        "timing: measured on this GPU"
        if timed
        else "timing: none (no GPU): compile-time facts and the datasheet only",
        nsight_status(),
    ]
    return {
        "diagnosis": found,
        "explain": {
            "basis": basis,
            "arch": gpu["arch"],
            "gpu": gpu["name"],
            "error": reply.error,
            "not_compiled": reply.not_compiled,
            # Kernels the GPU's compiler refused, though the interpreter ran
            # them (an `if` on a block, say): lesson 01 promises --explain says so.
            "compile_errors": failures,
            "sandbox_seconds": reply.seconds,
            "seconds": round(seconds, 2),
            # Where the time went: the GPU facts and case descriptions, the
            # sandbox's request (imports, tracing, compiling), its start.
            "steps": asked.steps,
            "advisory": "a diagnosis is advice: it never changes the grade",
            "facts": all_facts,
        },
    }


def compile_failures(compiled: dict[str, CompileFacts]) -> list[CompileFailure]:
    """{kernel, arch, error} for each traced kernel the compiler refused, one
    a kernel and error (autotune candidates and cases repeat them)."""
    out: list[CompileFailure] = []
    seen: set[tuple[str, str]] = set()
    for info in compiled.values():
        if not isinstance(info, dict) or info.get("ok") or info.get("skipped"):
            continue
        row: CompileFailure = {
            "kernel": str(info.get("label") or info.get("name") or "?"),
            "arch": str(info.get("arch") or ""),
            "error": str(info.get("error") or "no reason given"),
        }
        if (row["kernel"], row["error"]) not in seen:
            seen.add((row["kernel"], row["error"]))
            out.append(row)
    return out


def timed_rows(result: ResultView) -> dict[str | None, TimedRow]:
    """The result's timing rows by case name."""
    return {r.get("name"): r for r in ((result.get("timing") or {}).get("cases") or [])}


def explain(
    request: CheckRequest, result: ResultView, device: str, sandbox: Any, *, graders: Graders
) -> Explanation:
    start = time.monotonic()
    timed = timed_rows(result)
    asked = ask(request, device, sandbox, timed, graders)
    return conclude(request, asked, timed, time.monotonic() - start)


# How long --explain may go on compiling once the check it runs beside has
# ended (issue 21: it should add under 2 s to a CPU check). A compile that
# started before this runs to its end (~1-3 s for a tl.dot kernel).
GRACE_S = 0.2
# A run's first new compile gets this much more, so that a check a little
# shorter than the imports and one compile still fills the cache a kernel a
# run (the flash_attention reference: ~3 s a compile on 2 loaded cores).
FIRST_GRACE_S = 1.0
# And at most this long in all, whatever the check does.
EARLY_LIMIT_S = 120.0


class Early:
    """`--explain` on the CPU, started beside the check: a sandbox of its own
    (the check's runs the Triton interpreter, which leaves triton.language
    patched so that nothing compiles in that process after it), asked in a
    thread while the check runs. Without timing nothing it needs waits for
    the check's result; a failed check cancels it.

    It traces first, then compiles one kernel a request, most important
    first, for as long as the check lasts (plus GRACE_S): a check of ten
    seconds leaves time for every kernel and every autotune candidate, and
    the explanation costs the check almost nothing (`steps.after_check`)."""

    def __init__(
        self, request: CheckRequest, device: str, make_sandbox: Any, graders: Graders
    ) -> None:
        self.request, self.device, self.make = request, device, make_sandbox
        self.graders = graders
        self.sandbox: Any = None
        self.asked: Asked | None = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.check_done: float | None = None  # set by wait()
        self.stopped = False  # wait() killed a compile in flight
        self.compiling = False  # this run's first compile is in flight
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="gpulab-explain", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # This thread, and the sandbox it starts, take only what the check
        # leaves: Linux schedules threads one by one.
        from gpulab.explain.idle import idle

        idle(0)
        try:
            self.sandbox = self.make()
            made = time.monotonic()
            if not self.cancelled:
                # Its imports run while this thread describes the cases.
                self.sandbox.send(ExplainPrepare())
                self.sandbox.pending = True
                asked = ask(
                    self.request, self.device, self.sandbox, {}, self.graders, compile_later=True
                )
                asked.steps["sandbox_start"] = round(made - self.started, 2)
                self.asked = asked  # wait() reads it while the compiles go on
                self.asked = self._compile(asked)
        except BaseException as exc:  # noqa: BLE001 - reported in the result, never raised
            self.error = exc

    def _more_time(self, compiled_one: bool) -> bool:
        if self.cancelled:
            return False
        now = time.monotonic()
        if not compiled_one:
            # One kernel each run is started whatever the check's length (and
            # gets FIRST_GRACE_S to finish): the first run gets the most
            # important one, and a short check still fills the cache.
            return True
        if now - self.started > EARLY_LIMIT_S:
            return False
        return self.check_done is None or now - self.check_done < GRACE_S

    def _compile(self, asked: Asked) -> Asked:
        """`asked` with the kernels compiled for as long as the check lasts."""
        reply = asked.reply
        # The judge's own copy (Explained.parse), filled here.
        cases, compiled = reply_facts(reply)
        from gpulab.explain.candidates import still_needed

        pending = reply.pending
        t0, left, new = time.monotonic(), 0, 0
        for key in pending:
            if not still_needed(key, cases, compiled):
                continue  # an earlier autotune config of its kernel compiled clean
            self.compiling = new == 0  # wait() lets this run's first compile finish
            if not self._more_time(new > 0):
                left += 1
                continue
            try:
                answer = self.sandbox.ask(ExplainCompile(key), ExplainCompiled)
            except Exception:
                if not self.stopped:
                    raise
                left += 1  # wait() stopped the compile in flight: the check is over
                continue
            finally:
                self.compiling = False
            if isinstance(answer, ExplainCompiled):
                compiled.update(answer.compiled)
            new += 1
        asked.steps["sandbox_compile"] = round(time.monotonic() - t0, 2)
        return dataclasses.replace(asked, reply=dataclasses.replace(reply, not_compiled=left))

    def wait(self) -> Explanation:
        self.check_done = time.monotonic()
        self.thread.join(GRACE_S)
        if self.thread.is_alive() and self.asked and self.compiling:
            self.thread.join(FIRST_GRACE_S)  # this run's first compile: a little longer
        if self.thread.is_alive() and self.asked:
            # Compiling a kernel the explanation can do without: stop it.
            self.stopped = self.cancelled = True
            self.sandbox.kill()
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.asked is not None
        self.asked.steps["after_check"] = round(time.monotonic() - self.check_done, 2)
        return conclude(self.request, self.asked, {}, time.monotonic() - self.started)

    def close(self) -> None:
        """Stop it (a failed check) or release its sandbox (done). Once: a
        closed sandbox's socket number may belong to another by then."""
        self.cancelled = True
        if self.sandbox is None:  # still starting (until "ready", a moment)
            self.thread.join()
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            with contextlib.suppress(Exception):
                sandbox.close()  # a request in flight ends with SandboxDied
        self.thread.join()


def start(
    request: CheckRequest, device: str, make_sandbox: Any, *, graders: Graders
) -> Early | None:
    """The judge's hook before the check: on the CPU, with --explain, start
    the explanation now. None where it must wait for the check (a GPU's
    timing orders it, and it must not run during the timing)."""
    if device != "cpu" or not request.explain:
        return None
    if request.exercise not in explained(request.content_root):
        return None
    _fake_mode_ready()
    return Early(request, device, make_sandbox, graders)


def _fake_mode_ready() -> None:
    """FakeTensorMode (the cases, built in Early's thread) registers a no-op
    CUDA device guard when it enters on a machine without a GPU. Registered
    first from a thread that then ends, the next entry segfaults (torch 2.11's
    CUDA build, no GPU: the oldest supported stack, measured here); from the
    judge's main thread it holds."""
    import torch

    ensure = getattr(torch._C, "_ensureCUDADeviceGuardSet", None)
    if ensure is not None and not torch.cuda.is_available():
        ensure()


def _add(result: ResultView, found: Explanation) -> None:
    result["diagnosis"] = found["diagnosis"]
    result["explain"] = found["explain"]


def attach(
    request: CheckRequest,
    result: ResultView,
    device: str,
    sandbox: Any,
    fresh: Any = None,
    early: Early | None = None,
    *,
    graders: Graders,
) -> None:
    """The judge's hook after the verdict: add "diagnosis" and "explain" to a
    result, never fail it. `early`: what `start` began, else on the CPU a
    `fresh()` sandbox (see Early for why). `graders`: what the judge offers
    of its graders (gpulab.judge.plugin_host)."""
    own = None
    try:
        if not wanted(request, result):
            return
        if early is not None:
            _add(result, early.wait())
        else:
            if device == "cpu" and fresh is not None:
                sandbox = own = fresh()
            _add(result, explain(request, result, device, sandbox, graders=graders))
    except Exception as exc:  # noqa: BLE001 - advice must not break a check
        result["diagnosis"] = []
        result["explain"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    finally:
        if own is not None:
            own.close()
        if early is not None:
            early.close()
    # After the explanation's sandboxes are gone: Nsight Compute's own
    # sandbox (a GPU, --explain, ncu permitted), or the line saying why not.
    from gpulab.explain.judge import nsight_step

    nsight_step.attach(request, result, device, fresh, graders)


__all__ = [
    "Asked",
    "Early",
    "ResultView",
    "attach",
    "explain",
    "reply_facts",
    "start",
    "timed_rows",
    "wanted",
]
