"""The judge's part of `--explain`: gather the facts, ask the sandbox for the
launch and compile facts, diagnose, attach to the result.

Advisory only: nothing here changes a status or a grade, and any failure
becomes a line in `result["explain"]["error"]`, never a failed check.
"""

from __future__ import annotations

import shutil
import time
from typing import Any

from gpulab.diagnosis.rules import diagnose

KERNEL_EXERCISES = frozenset({"softmax", "bandwidth", "matmul", "flash_attention", "rope_rmsnorm"})


def wanted(request: dict[str, Any], result: dict[str, Any]) -> bool:
    """With --explain, after any passing check. Not yet after every timed
    check: on a GPU its cost (a compile per kernel, the judge's imports) has
    not been measured, and the normal check must stay as fast as it is."""
    if request.get("exercise") not in KERNEL_EXERCISES or result.get("status") != "passed":
        return False
    return bool(request.get("explain"))


class _Ctx:
    """Enough of a GradeContext for a grader's `timing_cases`."""

    def __init__(self, device: str) -> None:
        self.device, self.interpreter = device, device == "cpu"

    def seed(self, public: int) -> int:
        return public


def timed_cases(exercise: str, device: str) -> list[Any]:
    """The grader's timing cases, built as fake tensors (shapes, no data)
    where that works, else for real."""
    import importlib

    from torch._subclasses.fake_tensor import FakeTensorMode

    grader = importlib.import_module(f"gpulab.grading.{exercise}")
    try:
        with FakeTensorMode():
            cases = grader.timing_cases(_Ctx(device))
    except Exception:  # noqa: BLE001 - data-dependent set-up (rope's random start)
        cases = grader.timing_cases(_Ctx(device))
    return [c[0] if isinstance(c, tuple) else c for c in cases]


def describe(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.Tensor):
        return {
            "__tensor__": {
                "shape": list(obj.shape),
                "stride": list(obj.stride()),
                "offset": obj.storage_offset(),
                "dtype": str(obj.dtype).replace("torch.", ""),
            }
        }
    if isinstance(obj, tuple):
        return {"__tuple__": [describe(v) for v in obj]}
    if isinstance(obj, list):
        return [describe(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in obj.items()}
    return obj if obj is None or isinstance(obj, (bool, int, float, str)) else repr(obj)


def gpu_facts(device: str, request: dict[str, Any]) -> dict[str, Any]:
    from gpulab import hardware, roofline
    from gpulab.compile_info import ARCHS, parse_arch
    from gpulab.device import ceilings

    if device == "cuda":
        import torch

        name = torch.cuda.get_device_name(0)
        props = torch.cuda.get_device_properties(0)
        cc = props.major * 10 + props.minor
        gpu = hardware.match_gpu(name)
        bw, _ = ceilings.ceiling("memory", "fp16", name, request.get("workspace"))
        flops = {
            d: ceilings.ceiling("compute", d, name, request.get("workspace"))[0]
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
    gpu, why = roofline.choose_gpu(
        request.get("explain_gpu"), request.get("gpu_setting"), detect=False
    )
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
    """Whether Nsight Compute could measure DRAM bytes and stalls here."""
    if not shutil.which("ncu"):
        return (
            "Nsight Compute (ncu) is not on PATH: bytes moved and stall reasons are "
            "estimated from the compiled code, the launch and the timing, not measured"
        )
    try:
        with open("/proc/driver/nvidia/params") as f:
            admin_only = "RmProfilingAdminOnly: 1" in f.read()
    except OSError:
        admin_only = False
    import os

    if admin_only and os.geteuid() != 0:
        return (
            "Nsight Compute is installed but GPU counters are for administrators only "
            "(RmProfilingAdminOnly=1): the estimate rests on the compiled code and timing"
        )
    return (
        "Nsight Compute is available; `--explain` does not run it yet (profile with "
        "`gpulab profile`): the estimate rests on the compiled code and timing"
    )


def _exps(exercise: str, sizes: dict[str, float]) -> float:
    if exercise == "softmax":
        return sizes.get("M", 0) * sizes.get("N", 0)
    if exercise == "flash_attention":
        full = sizes.get("B", 0) * sizes.get("H", 0) * sizes.get("Sq", 0) * sizes.get("Sk", 0)
        return full / (2 if sizes.get("causal") else 1)
    return 0.0


def case_facts(
    exercise: str, request: dict[str, Any], case: Any, timed: dict[str, dict]
) -> dict[str, Any]:
    from gpulab.content import eval_formula
    from gpulab.grading.compare import dtype_name

    names = {**case.sizes, "elt": case.dtype.itemsize}
    nbytes = eval_formula(request["bytes"], names) if request.get("bytes") else None
    flops = eval_formula(request["flops"], names) if request.get("flops") else None
    row = timed.get(case.name, {})
    return {
        "name": case.name,
        "dtype": dtype_name(case.dtype),
        "sizes": dict(case.sizes),
        "elt": case.dtype.itemsize,
        "bytes": nbytes,
        "flops": flops,
        "work": max(nbytes or 0, flops or 0),
        "exps": _exps(exercise, case.sizes),
        "ms": row.get("ms"),
        "fraction": row.get("roofline_fraction"),
    }


def explain(
    request: dict[str, Any], result: dict[str, Any], device: str, sandbox: Any
) -> dict[str, Any]:
    start = time.monotonic()
    exercise = request["exercise"]
    gpu = gpu_facts(device, request)
    timed = {r.get("name"): r for r in ((result.get("timing") or {}).get("cases") or [])}
    cases = timed_cases(exercise, device)
    facts = [case_facts(exercise, request, c, timed) for c in cases]
    # The case that matters most first: where the grade is lost (lowest
    # fraction of the roof), else the most work; its kernels compile first.
    order = sorted(
        range(len(cases)),
        key=lambda i: (
            facts[i]["fraction"] if facts[i]["fraction"] is not None else 0,
            -facts[i]["work"],
        ),
    )
    cases, facts = [cases[i] for i in order], [facts[i] for i in order]
    reply = sandbox.request(
        {
            "type": "explain",
            "function": request["function"],
            "arch": gpu["arch"],
            "budget_s": float(request.get("explain_budget_s", 1.5 if device == "cpu" else 60)),
            "cases": [
                {"name": c.name, "args": describe(c.args), "kwargs": describe(c.kwargs)}
                for c in cases
            ],
        }
    )
    if reply.get("type") != "explained":
        raise RuntimeError(f"the sandbox could not explain: {reply.get('summary', reply)}")
    by_name = {c.get("name"): c for c in reply.get("cases", []) if isinstance(c, dict)}
    for f in facts:
        got = by_name.get(f["name"], {})
        f["launches"] = got.get("launches", [])
        if got.get("error"):
            f["error"] = str(got["error"])[:300]
    all_facts = {
        "exercise": exercise,
        "kind": request.get("kind"),
        "gpu": gpu,
        "measured": bool(timed),
        "cases": facts,
        "compiled": reply.get("compiled") or {},
    }
    found = diagnose(all_facts)
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
            "error": reply.get("error", ""),
            "not_compiled": reply.get("not_compiled", 0),
            "sandbox_seconds": reply.get("seconds"),
            "seconds": round(time.monotonic() - start, 2),
            "advisory": "a diagnosis is advice: it never changes the grade",
            "facts": all_facts,
        },
    }


def attach(
    request: dict[str, Any], result: dict[str, Any], device: str, sandbox: Any, fresh: Any = None
) -> None:
    """The judge's hook: add "diagnosis" and "explain" to a result, never fail it.

    On the CPU the explanation runs in a `fresh()` sandbox: the Triton
    interpreter (3.9) leaves triton.language patched after a kernel calls a
    @jit helper such as tl.max, and nothing compiles in that process after it.
    """
    if not wanted(request, result):
        return
    own = None
    try:
        if device == "cpu" and fresh is not None:
            sandbox = own = fresh()
        result.update(explain(request, result, device, sandbox))
    except Exception as exc:  # noqa: BLE001 - advice must not break a check
        result["diagnosis"] = []
        result["explain"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    finally:
        if own is not None:
            own.close()


__all__ = ["attach", "explain", "timed_cases", "wanted"]
