"""One call of a recorded kernel on this GPU, for Nsight Compute to count
(`gpulab counters NAME --ncu`, gpulab.gpu.counters.ncu_argv):

    ncu --profile-from-start off ... python -m gpulab.targets.counter_cases NAME

The case builds the inputs the recording was taken on (gpulab.gpu.counters.
RECORDINGS; the grader of the exercise whose reference it counts builds
them), calls the kernel a few times (compiling and autotuning are over
then), and brackets exactly one call with cudaProfilerStart/Stop, so that
ncu counts that call's kernels and nothing else: the same procedure as the
recordings (scripts/tools/ncu_cases.py, BENCHMARKS.md "Counters").
The course's kernels are the references under the content's kernels/.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpulab.gpu.counters import LIVE

if TYPE_CHECKING:
    from gpulab.judge.interface import CounterCases


def _reference(name: str) -> Any:
    from gpulab.course.content import content_root

    path = content_root() / "kernels" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"gpulab_reference_{name}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def case(name: str) -> Callable[[], Any]:
    """The recording `name`'s call, built by the grader of the exercise whose
    reference it counts (the manifest's `tools = [..., "counters"]`, the
    grader's COUNTER_CASES), through the judge's one loader."""
    from gpulab.course.content import load_course
    from gpulab.judge.loader import load

    course = load_course()
    for exercise in course.covered_by("counters"):
        built: CounterCases = getattr(load(exercise, course=course), "COUNTER_CASES", {})
        if name in built:
            return built[name](_reference(exercise))
    raise SystemExit(f"no case {name!r} here; these can run again: {', '.join(LIVE)}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    import torch

    fn = case(argv[0])
    for _ in range(5):  # compile, autotune; then warm calls
        fn()
    torch.cuda.synchronize()
    cudart: Any = torch.cuda.cudart()  # type: ignore[no-untyped-call]  # (untyped in torch)
    cudart.cudaProfilerStart()
    fn()
    torch.cuda.synchronize()
    cudart.cudaProfilerStop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
