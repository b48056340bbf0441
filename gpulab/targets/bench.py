"""`gpulab bench`: time the reference kernels beside their baselines (GPU).

Runs as `python -m gpulab.targets.bench [KERNEL ...] [--json PATH]` in its own
process (the CLI starts it), so torch and triton never load in the lab.
With no GPU it exits 2 with a one-line explanation.

Each kernel exercise's grader module supplies the cases: `bench_cases(ctx)`
returning (case, {baseline name: zero-argument callable}) pairs if it has
one, else its `timing_cases(ctx)` with its KernelSpec's baseline and any
`bench_baselines(case)` it defines (gpulab.judge.interface.TimedGrader). Every number is a median from
gpulab.measure.timing.measure (CUDA events, L2 flushed, adaptive stopping),
the reference and its baselines timed in the same run.

A folder exercise (docs/new-exercise.md) whose exercise.toml says `tools =
[..., "bench"]` is benched the same way: the judge's loader gives its grader
(gpulab.judge.folder_grader), whose timing cases are spec.py's TIMING_CASES
and whose baseline is spec.py's `baseline`, named BASELINE_NAME; the kernel
timed is its folder's reference.py.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import operator
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

if TYPE_CHECKING:
    from gpulab.course.content import Course
    from gpulab.gpu.hardware_model import MeasuredCeilings
    from gpulab.judge.interface import TimedGrader
    from gpulab.judge.kernel_spec import Case
    from gpulab.measure.timing import Measured
    from gpulab.wire.status import StageKind

    # Here only as a type: gpulab.measure.timing imports torch.
    class SideTimed(Measured):
        """`side_by_side`'s answer per name: the first round's Measured, the
        median of the rounds' medians as `ms`, and the rounds' own."""

        rounds_ms: list[float]


# A case's baselines: each by its name, a zero-argument call that runs it.
Baselines = dict[str, Callable[[], Any]]


class _Rounds(TypedDict, total=False):
    """A row's rounds, where there were more than one."""

    rounds: int
    ms_rounds: list[float]
    baseline_ms_rounds: list[float]


class BenchRow(_Rounds):
    """One case of one kernel against one baseline (ms: medians)."""

    kernel: str
    shape: str
    dtype: str
    ms: float
    p20_ms: float
    p80_ms: float
    baseline: str
    baseline_ms: float
    speedup: float
    throughput: float | None
    unit: str
    roofline_fraction: float | None
    throttled: bool | None


class BenchReport(TypedDict):
    """`gpulab bench --json`'s file."""

    device: str
    date: str
    torch: str
    triton: str
    # The roofs (copy_tbs, tflops) and their source; from the probe's cache,
    # its whole file beside them (gpulab.wire.microbench.Ceilings).
    ceilings: MeasuredCeilings
    rounds: int
    results: list[BenchRow]


class NotBenchable(RuntimeError):
    """An exercise the bench cannot time as it stands; the message says why."""


def kernels() -> list[str]:
    """The exercises the bench times: the manifest's `tools = [..., "bench"]`."""
    from gpulab.course.content import load_course

    return load_course().covered_by("bench")


class BenchContext:
    """The slice of GradeContext that timing_cases(ctx) uses."""

    device = "cuda"
    interpreter = False
    want_timing = True

    def __init__(self, secret: int = 0) -> None:
        self.secret_seed = secret
        self.notes: list[str] = []

    def seed(self, public: int) -> int:
        return public

    def stage(
        self, kind: StageKind, text: str, done: int | None = None, total: int | None = None
    ) -> None:
        print(f"  … {text}", file=sys.stderr, flush=True)


def cases_for(kernel: str, ctx: BenchContext) -> list[tuple[Any, Baselines]]:
    from gpulab.judge.loader import load

    # The judge's one loader: a declared exercise's grader module, or a folder
    # exercise's grader made from its spec.py.
    mod: Any = load(kernel)
    if hasattr(mod, "bench_cases"):
        cases: list[tuple[Any, Baselines]] = mod.bench_cases(ctx)
        return cases
    timed: TimedGrader = cast("TimedGrader", mod)
    spec = timed.kernel_spec(ctx)  # the GPU's: a BenchContext is no interpreter
    out: list[tuple[Any, Baselines]] = []
    for case in timed.timing_cases(ctx):
        baselines: Baselines
        if hasattr(mod, "bench_baselines"):
            baselines = mod.bench_baselines(case)
        elif spec.baseline is not None:  # a case alone: only rope_rmsnorm pairs them
            baselines = {spec.baseline_name: spec.baseline(cast("Case", case))}
        else:
            raise NotBenchable(_no_baseline(mod))
        out.append((case, baselines))
    return out


def _no_baseline(grader: Any) -> str:
    """What a grader without a baseline lacks: a grader module's KernelSpec,
    or a folder exercise's spec.py, named by its path (its grader is an
    object, gpulab.judge.folder_grader.FolderGrader, not a module)."""
    spec = getattr(grader, "spec", None)
    path = getattr(spec, "path", None)
    if isinstance(path, Path):
        return f"{path}: `baseline` is missing (torch's own op, timed beside the reference)"
    return f"{grader.__name__}'s KernelSpec names no baseline"


def load_reference(kernel: str, function: str, course: Course | None = None) -> Any:
    """`function` of `kernel`'s reference: kernels/<kernel>.py, or a folder
    exercise's reference.py (the lesson's reference_path either way).
    `course`: the manifest already read."""
    from gpulab.course.content import load_course
    from gpulab.sandbox.learner import load_module

    lesson = (course or load_course()).find(kernel)
    if lesson is None or lesson.exercise != kernel:
        raise ValueError(f"{kernel} is not an exercise of the course")
    mod = load_module(str(lesson.reference_path), f"reference_{kernel}")
    return getattr(mod, function)


def measured_ceilings() -> MeasuredCeilings:
    """Copy bandwidth and bf16/fp16 matmul peaks, measured now (a few seconds),
    unless the probe's microbenchmarks cached them for this device."""
    import torch

    from gpulab.fsutil import default_root
    from gpulab.gpu import ceilings
    from gpulab.gpu.hardware_model import read_ceilings
    from gpulab.measure.timing import measure

    name = torch.cuda.get_device_name(0)
    cached = ceilings.load_measured(default_root(), name)
    roofs = read_ceilings(cached)
    if cached and roofs.get("copy_tbs") and roofs.get("tflops"):
        # The probe's whole file, its roofs as read_ceilings checked them (a
        # dtype whose measurement failed, None in the file, left out).
        return cast("MeasuredCeilings", {**cached, **roofs, "source": "cached microbenchmarks"})

    def measure_copy() -> float:
        """In a frame of its own: its 4 GiB are freed before the matmuls."""
        src = torch.randn(512 * 1024 * 1024, device="cuda")  # 2 GiB
        dst = torch.empty_like(src)
        ms: float = measure(lambda: dst.copy_(src))["ms"]
        return ms

    copy_ms = measure_copy()
    tflops: dict[str, float] = {}
    for label, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        best = 0.0
        for n in (4096, 8192):
            a = torch.randn(n, n, device="cuda", dtype=dt)
            b = torch.randn(n, n, device="cuda", dtype=dt)
            ms = measure(functools.partial(operator.matmul, a, b), budget_s=1.5)["ms"]
            best = max(best, 2 * n**3 / ms / 1e9)
        tflops[label] = best
    return {
        "copy_tbs": 2 * 2 * 1024**3 / copy_ms / 1e9,
        "tflops": tflops,
        "source": "measured at the start of this bench",
    }


def side_by_side(
    fns: dict[str, Callable[[], Any]], measure_one: Callable[..., Measured], rounds: int = 1
) -> dict[str, SideTimed]:
    """Time each of `fns` `rounds` times, the order rotating every round
    (A B C, then B C A, ...), so that clocks drifting during the run (a GPU
    settling on its power cap, warming up) fall on every side alike rather
    than on whichever is timed last. Per name: the median of its rounds'
    medians, the rounds themselves, and the first round's other fields.
    One round is the plain order: the first function, then the rest."""
    names = list(fns)
    got: dict[str, list[Measured]] = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names) :] + names[: r % len(names)]:
            got[n].append(measure_one(fns[n], first=(n == names[0])))
    out: dict[str, SideTimed] = {}
    for n, ms in got.items():
        times = sorted(m["ms"] for m in ms)
        mid = len(times) // 2
        med = times[mid] if len(times) % 2 else (times[mid - 1] + times[mid]) / 2
        out[n] = {**ms[0], "ms": med, "rounds_ms": [m["ms"] for m in ms]}
    return out


def bench(kernels: list[str], rounds: int = 1) -> BenchReport:
    import torch
    import triton

    from gpulab.course.content import eval_formula, load_course
    from gpulab.judge.compare import dtype_name
    from gpulab.measure.timing import L2Flusher, measure

    course = load_course()
    ceil = measured_ceilings()
    flusher = L2Flusher()
    rows: list[BenchRow] = []
    for kernel in kernels:
        lesson = course.find(kernel)
        assert lesson is not None, f"{kernel} is not an exercise of the course"
        print(f"{kernel}:", file=sys.stderr, flush=True)
        fn = load_reference(kernel, lesson.function, course)
        for case, baselines in cases_for(kernel, BenchContext()):
            print(f"  {case.name}", file=sys.stderr, flush=True)

            # Several rounds split the time one round would take.
            def own(case: Any = case, fn: Callable[..., Any] = fn) -> Any:
                return fn(*case.args, **case.kwargs)

            timed = side_by_side(
                {"": own, **baselines},
                lambda f, first: measure(
                    f, flusher=flusher, log_clocks=first, budget_s=3.0 / rounds
                ),
                rounds,
            )
            t = timed.pop("")
            names = {**case.sizes, "elt": case.dtype.itemsize}
            nbytes = eval_formula(lesson.bytes, names) if lesson.bytes else None
            flops = eval_formula(lesson.flops, names) if lesson.flops else None
            sec = t["ms"] * 1e-3
            tput: float | None
            if lesson.kind == "compute" and flops:
                peak = ceil["tflops"].get(dtype_name(case.dtype))
                frac = flops / sec / (peak * 1e12) if peak else None
                tput, unit = flops / sec / 1e12, "TFLOP/s"
            else:
                frac = nbytes / sec / (ceil["copy_tbs"] * 1e12) if nbytes else None
                tput, unit = (nbytes / sec / 1e9 if nbytes else None), "GB/s"
            for bname, b in timed.items():
                row: BenchRow = {
                    "kernel": kernel,
                    "shape": case.shape,
                    "dtype": dtype_name(case.dtype),
                    "ms": t["ms"],
                    "p20_ms": t["p20_ms"],
                    "p80_ms": t["p80_ms"],
                    "baseline": bname,
                    "baseline_ms": b["ms"],
                    "speedup": b["ms"] / t["ms"],
                    "throughput": tput,
                    "unit": unit,
                    "roofline_fraction": frac,
                    "throttled": t["clocks"].get("throttled"),
                }
                if rounds > 1:  # last in the row, as ever
                    row["rounds"] = rounds
                    row["ms_rounds"] = t["rounds_ms"]
                    row["baseline_ms_rounds"] = b["rounds_ms"]
                rows.append(row)
            torch.cuda.empty_cache()
    return {
        "device": torch.cuda.get_device_name(0),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "ceilings": ceil,
        "rounds": rounds,
        "results": rows,
    }


def print_table(report: BenchReport) -> None:
    from rich.console import Console
    from rich.table import Table

    c = report["ceilings"]
    t = Table(
        title=f"{report['device']} — torch {report['torch']}, Triton {report['triton']}, "
        f"{report['date'][:10]}; ceilings: copy {c['copy_tbs']:.2f} TB/s, "
        f"bf16 {c['tflops'].get('bf16', 0):.0f} TFLOP/s ({c['source']})"
    )
    for col in (
        "kernel",
        "shape",
        "dtype",
        "µs",
        "rate",
        "roofline",
        "baseline",
        "base µs",
        "speedup",
    ):
        t.add_column(col)
    for r in report["results"]:
        t.add_row(
            r["kernel"],
            r["shape"],
            r["dtype"],
            f"{r['ms'] * 1e3:.1f}",
            f"{r['throughput']:.0f} {r['unit']}" if r["throughput"] else "",
            f"{r['roofline_fraction']:.0%}" if r["roofline_fraction"] else "",
            r["baseline"],
            f"{r['baseline_ms'] * 1e3:.1f}",
            f"{r['speedup']:.2f}x",
        )
    Console(width=160).print(t)
    by: dict[tuple[str, str], list[float]] = {}
    for r in report["results"]:
        by.setdefault((r["kernel"], r["baseline"]), []).append(r["speedup"])
    for (k, b), xs in by.items():
        g = math.exp(sum(math.log(x) for x in xs) / len(xs))
        print(
            f"{k}: geometric-mean speedup {g:.2f}x over {b} (min {min(xs):.2f}x, {len(xs)} shapes)"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gpulab bench")
    p.add_argument("kernels", nargs="*", metavar="KERNEL")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--rounds", type=int, default=1, metavar="N")
    args = p.parse_args(argv)
    if args.rounds < 1:
        print("gpulab bench: --rounds must be 1 or more", file=sys.stderr)
        return 2
    known = kernels()
    unknown = [k for k in args.kernels if k not in known]
    if unknown:
        print(
            f"gpulab bench: unknown kernel {', '.join(unknown)}; known: {', '.join(known)}",
            file=sys.stderr,
        )
        return 2
    import torch

    if not torch.cuda.is_available():
        print(
            "gpulab bench: needs a CUDA GPU (none found); on the CPU, `gpulab check` grades "
            "correctness in the Triton interpreter",
            file=sys.stderr,
        )
        return 2
    from gpulab.gpu.gpulock import gpu_timing_lock
    from gpulab.judge.context import GradeFailed
    from gpulab.judge.loader import UnknownExercise

    with gpu_timing_lock(
        "gpulab bench",
        gpu=torch.cuda.current_device(),
        on_wait=lambda m: print(m, file=sys.stderr, flush=True),
    ):
        try:
            report = bench(list(args.kernels) or known, rounds=args.rounds)
        except (NotBenchable, UnknownExercise) as exc:
            # A folder exercise's spec.py that cannot be used, or lacks what
            # the bench needs: said, naming the file, not a traceback.
            print(f"gpulab bench: {exc}", file=sys.stderr)
            return 2
        except GradeFailed as exc:  # spec.py's own code raised as it drew a case
            print(f"gpulab bench: {exc.summary}\n{exc.message}", file=sys.stderr)
            return 2
    if args.json:
        from gpulab.fsutil import atomic_write_text

        # Atomic: a Ctrl-C never leaves half a results file.
        atomic_write_text(Path(args.json), json.dumps(report, indent=2) + "\n")
    print_table(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
