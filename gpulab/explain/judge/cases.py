"""The timing cases `--explain` calls the learner's function on, as plain data.

Built in the judge (the sandbox may not import a grader) from the
exercise's `timing_cases` under torch's FakeTensorMode, so a 2 GiB input
costs nothing; but FakeTensorMode imports torch._dynamo, seconds of imports
(3–10 s on a loaded 2-core machine), more than the rest of `--explain` on
the CPU. The descriptions (shapes, strides, dtypes, sizes) depend only on
the grader's source and torch, so they are cached in the workspace keyed by
both: the second `--explain` skips the import. The CPU's descriptions also
ship with gpulab (gpulab/data/explain_cases.json, keyed by each grader's
source; `write_shipped` makes it and a test keeps it current), so even a
first `--explain` on the CPU builds nothing. On the CPU this runs in the
judge's explain thread (judge_side.Early); FakeTensorMode is per thread, so
the check's tensors beside it stay real.

The graders are the judge's: the judge's main passes what this needs of
them (`Graders`: gpulab.judge.plugin_host) to the plug-in's hooks, so the
plug-in imports nothing of the judge, which imports the plug-in.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gpulab.explain.facts import CaseDescription, Described

if TYPE_CHECKING:
    import torch

CACHE_NAME = "gpulab-explain-cases.json"
SHIPPED = Path(__file__).resolve().parents[2] / "data" / "explain_cases.json"


class _Ctx:
    """Enough of a GradeContext for a grader's `timing_cases`."""

    def __init__(self, device: str) -> None:
        self.device, self.interpreter = device, device == "cpu"

    def seed(self, public: int) -> int:
        return public


class TimedCase(Protocol):
    """What is read of a grader's timing case (gpulab.judge.kernel_spec.Case)."""

    @property
    def name(self) -> str: ...

    @property
    def sizes(self) -> Mapping[str, float]: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def args(self) -> tuple[Any, ...]: ...  # the learner's function's arguments: any values

    @property
    def kwargs(self) -> object: ...  # described as they are


class TimedGrader(Protocol):
    """A kernel exercise's grader, as far as its timing cases go."""

    def timing_cases(self, ctx: _Ctx) -> Sequence[TimedCase | tuple[Any, ...]]: ...


class Graders(Protocol):
    """What the judge offers --explain of its graders (gpulab.judge.plugin_host)."""

    def timed_grader(self, exercise: str) -> TimedGrader:
        """A kernel exercise's grader (the manifest's `tools = ["explain"]`),
        through the judge's one loader."""
        ...

    def grader_source(self, exercise: str) -> bytes:
        """The bytes of the exercise's grader (what its cases depend on)."""
        ...

    def dtype_name(self, dtype: torch.dtype) -> str:
        """The judge's name of a dtype ("fp16", ...), as the manifest's formulas and
        the datasheets' rates are keyed."""
        ...


def timed_cases(exercise: str, device: str, graders: Graders) -> list[TimedCase]:
    """The grader's timing cases, built as fake tensors (shapes, no data)
    where that works, else for real."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    grader = graders.timed_grader(exercise)
    try:
        with FakeTensorMode():
            cases = grader.timing_cases(_Ctx(device))
    except Exception:  # noqa: BLE001 - data-dependent set-up (rope's random start)
        cases = grader.timing_cases(_Ctx(device))
    return [c[0] if isinstance(c, tuple) else c for c in cases]


def describe(obj: Any) -> Described:
    """Tensors -> {"__tensor__": shape, stride, offset, dtype}; the rest as is."""
    import torch

    if isinstance(obj, torch.Tensor):
        return {
            "__tensor__": {
                "shape": list(obj.shape),
                "stride": list(obj.stride()),
                "offset": int(obj.storage_offset()),
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


def _grader_digest(exercise: str, graders: Graders) -> str:
    return hashlib.sha256(graders.grader_source(exercise)).hexdigest()[:16]


def _key(exercise: str, device: str, graders: Graders) -> str:
    import torch

    return f"{exercise}:{device}:{torch.__version__}:{_grader_digest(exercise, graders)}"


def _shipped(exercise: str, device: str, graders: Graders) -> list[CaseDescription] | None:
    """The shipped descriptions, when made from this very grader."""
    try:
        entry = json.loads(SHIPPED.read_text()).get(f"{exercise}:{device}")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(entry, dict) and entry.get("grader") == _grader_digest(exercise, graders):
        cases = entry.get("cases")
        return cases if isinstance(cases, list) else None
    return None


def build(exercise: str, device: str, graders: Graders) -> list[CaseDescription]:
    """The descriptions, built now (seconds: see the module's docstring)."""
    return [
        {
            "name": c.name,
            "sizes": dict(c.sizes),
            "dtype": graders.dtype_name(c.dtype),
            "elt": c.dtype.itemsize,
            "args": describe(c.args),
            "kwargs": describe(c.kwargs),
        }
        for c in timed_cases(exercise, device, graders)
    ]


def write_shipped(graders: Graders, path: Path = SHIPPED) -> None:
    """Rebuild gpulab/data/explain_cases.json (after a grader's timing cases change)."""
    from gpulab.explain.kinds import explained

    data = {
        f"{ex}:cpu": {"grader": _grader_digest(ex, graders), "cases": build(ex, "cpu", graders)}
        for ex in sorted(explained())
    }
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def cache_file(workspace: str | None) -> Path | None:
    """Where the descriptions are kept: the workspace's cache, beside the
    per-submission folders (written by the judge, not by a sandbox)."""
    return Path(workspace) / ".gpulab" / "cache" / CACHE_NAME if workspace else None


def described_cases(
    exercise: str, device: str, path: Path | None, graders: Graders
) -> list[CaseDescription]:
    """[{name, sizes, dtype, elt, args, kwargs}] for the exercise's timing
    cases: shipped with gpulab, else from the cache file `path` when the
    grader and torch are unchanged, else built (and cached)."""
    shipped = _shipped(exercise, device, graders)
    if shipped is not None:
        return shipped
    key = _key(exercise, device, graders)
    cache: dict[str, list[CaseDescription]] = {}
    if path is not None:
        with contextlib.suppress(OSError, ValueError):
            cache = json.loads(path.read_text())
        if isinstance(cache, dict) and isinstance(cache.get(key), list):
            return cache[key]
    out = build(exercise, device, graders)
    if path is not None:
        cache = cache if isinstance(cache, dict) else {}
        cache[key] = out
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cache))
    return out


__all__ = ["Graders", "build", "described_cases", "describe", "timed_cases", "write_shipped"]
