"""A folder exercise's spec.py, loaded and checked (docs/new-exercise.md).

spec.py is the instructor's trusted Python: it runs here, in the judge,
never in the learner's sandbox. It is checked as it loads, name by name, so
that a missing or mistyped one is a SpecError whose message names spec.py
(and the line, for an error at import) rather than a traceback later in a
check. gpulab.judge.folder_grader turns what it defines into cases and a
KernelSpec.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gpulab.measure.compile_specs import Spec as CompileSpec
from gpulab.wire.protocol import Kwargs

DTYPES = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
    "fp64": torch.float64,
}
# Keys of a case's dict that are not sizes.
RESERVED = ("dtype", "label", "seed", "kwargs")
# Everything spec.py may define in capitals; a name close to one of these is
# taken for a misspelling of it.
CONSTANTS = (
    "CASES",
    "GPU_CASES",
    "TIMING_CASES",
    "TOLERANCE",
    "BANNED",
    "BANNED_ATEN",
    "BANNED_LABEL",
    "BASELINE_NAME",
    "GRADES",
    "COMPILE_SPECS",
)
FUNCTIONS = ("reference", "make_inputs", "baseline", "output_shape")


@dataclass(frozen=True, slots=True)
class FolderCase:
    """A case as spec.py lists it, checked: its dtype's name, a label, a
    seed (0: the list's own for its place), keyword arguments for the
    learner's function, and its sizes by name, in the order written."""

    dtype: str
    label: str = ""
    seed: int = 0
    kwargs: Kwargs = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)


class SpecError(Exception):
    """spec.py cannot be used; the message names the file and the name."""


@dataclass
class FolderSpec:
    """What spec.py defines, checked."""

    path: Path
    reference: Callable[..., Any]
    make_inputs: Callable[..., Any]
    cases: list[FolderCase]
    gpu_cases: list[FolderCase] = field(default_factory=list)
    timing_cases: list[FolderCase] = field(default_factory=list)
    tolerance: dict[torch.dtype, tuple[float, float]] = field(default_factory=dict)
    banned: tuple[Callable[..., Any], ...] = ()
    banned_aten: tuple[str, ...] = ()
    banned_label: str = ""
    baseline: Callable[..., Any] | None = None
    baseline_name: str = ""
    grades: tuple[tuple[float, str], ...] | None = None
    output_shape: Callable[..., Any] | None = None
    compile_specs: tuple[CompileSpec, ...] = ()


def load(path: Path) -> FolderSpec:
    """Import spec.py and check it. Raises SpecError naming the file and the
    name; ModuleNotFoundError where it imports a package that is missing
    (the judge says which, as for the course's own exercises)."""
    module = _import(path)
    names = vars(module)
    where = str(path)
    for name in names:
        if name.isupper() and name not in CONSTANTS:
            close = difflib.get_close_matches(name, CONSTANTS, n=1, cutoff=0.8)
            if close:
                raise SpecError(
                    f"{where}: `{name}` is no name gpulab reads: did you mean {close[0]}?"
                )
    for name in FUNCTIONS:
        if name in names and not callable(names[name]):
            raise SpecError(f"{where}: `{name}` must be a function")
    for name in ("reference", "make_inputs", "CASES"):
        if name not in names:
            raise SpecError(f"{where}: `{name}` is missing")
    cases = _cases(names, "CASES", where)
    if not cases:
        raise SpecError(f"{where}: CASES is empty: give at least one correctness case")
    return FolderSpec(
        path=path,
        reference=names["reference"],
        make_inputs=names["make_inputs"],
        cases=cases,
        gpu_cases=_cases(names, "GPU_CASES", where),
        timing_cases=_cases(names, "TIMING_CASES", where),
        tolerance=_tolerance(names.get("TOLERANCE", {}), where),
        banned=_banned(names.get("BANNED", ()), where),
        banned_aten=_strings(names.get("BANNED_ATEN", ()), "BANNED_ATEN", where),
        banned_label=_string(names, "BANNED_LABEL", where),
        baseline=names.get("baseline"),
        baseline_name=_string(names, "BASELINE_NAME", where) or "torch",
        grades=_grades(names["GRADES"], where) if "GRADES" in names else None,
        output_shape=names.get("output_shape"),
        compile_specs=_compile_specs(names.get("COMPILE_SPECS", ()), where),
    )


def _import(path: Path) -> Any:
    # A name of its own per folder, so two exercises' specs never meet in sys.modules.
    name = "gpulab_exercise_spec_" + "".join(c if c.isalnum() else "_" for c in str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # as an import leaves it (a dataclass in it looks itself up)
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError:
        raise
    except SyntaxError as exc:
        raise SpecError(f"{path}:{exc.lineno}: not valid Python: {exc.msg}") from None
    except FileNotFoundError:
        raise SpecError(f"{path}: missing (the judge's side of the exercise)") from None
    except Exception as exc:  # noqa: BLE001 - the instructor's code: any error, said with its line
        raise SpecError(f"{at_line(path, exc)}: importing it raised {describe(exc)}") from None
    return module


def at_line(path: Path, exc: BaseException) -> str:
    """`path:line` of the innermost frame of `exc` in `path`, or `path`."""
    lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f"{path}:{lines[-1]}" if lines else str(path)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _cases(names: dict[str, Any], key: str, where: str) -> list[FolderCase]:
    raw = names.get(key, [])
    if not isinstance(raw, (list, tuple)):
        raise SpecError(f"{where}: {key} must be a list of cases (dicts), got {type(raw).__name__}")
    return [_case(c, f"{where}: {key}[{i}]") for i, c in enumerate(raw)]


def _case(raw: Any, at: str) -> FolderCase:
    if not isinstance(raw, dict):
        raise SpecError(f"{at}: a case must be a dict such as {{'N': 1000, 'dtype': 'fp32'}}")
    dtype = raw.get("dtype")
    if dtype not in DTYPES:
        missing = "is missing" if dtype is None else f"is {dtype!r}"
        raise SpecError(f"{at}: 'dtype' {missing}: it must be one of {', '.join(DTYPES)}")
    if not isinstance(raw.get("label", ""), str):
        raise SpecError(f"{at}: 'label' must be a string")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SpecError(f"{at}: 'seed' must be a whole number")
    kwargs = raw.get("kwargs", {})
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise SpecError(f"{at}: 'kwargs' must be a dict of keyword arguments")
    for key, value in raw.items():
        if key in RESERVED:
            continue
        if not isinstance(key, str) or not key.isidentifier():
            raise SpecError(f"{at}: size {key!r} must be a name (it is one in the formulas)")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(f"{at}: size '{key}' must be a whole number >= 0, got {value!r}")
    sizes = {k: v for k, v in raw.items() if k not in RESERVED}
    return FolderCase(dtype, raw.get("label", ""), seed, dict(kwargs), sizes)


def _tolerance(raw: Any, where: str) -> dict[torch.dtype, tuple[float, float]]:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: TOLERANCE must be a dict such as {{'fp16': (1e-3, 1e-3)}}")
    out = {}
    for name, pair in raw.items():
        if name not in DTYPES:
            raise SpecError(f"{where}: TOLERANCE[{name!r}]: a dtype is one of {', '.join(DTYPES)}")
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(_number(v) and v >= 0 for v in pair)
        ):
            raise SpecError(f"{where}: TOLERANCE[{name!r}] must be (atol, rtol), two numbers >= 0")
        out[DTYPES[name]] = (float(pair[0]), float(pair[1]))
    return out


def _banned(raw: Any, where: str) -> tuple[Callable[..., Any], ...]:
    if not isinstance(raw, (list, tuple)) or not all(callable(f) for f in raw):
        raise SpecError(f"{where}: BANNED must be a list of torch functions (torch.tanh, ...)")
    return tuple(raw)


def _strings(raw: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(raw, (list, tuple)) or not all(isinstance(s, str) for s in raw):
        raise SpecError(f"{where}: {key} must be a list of strings")
    return tuple(raw)


def _string(names: dict[str, Any], key: str, where: str) -> str:
    value = names.get(key, "")
    if not isinstance(value, str):
        raise SpecError(f"{where}: {key} must be a string")
    return value


def _grades(raw: Any, where: str) -> tuple[tuple[float, str], ...]:
    pairs = list(raw) if isinstance(raw, (list, tuple)) else None
    if not pairs or not all(
        isinstance(p, (tuple, list)) and len(p) == 2 and _number(p[0]) and isinstance(p[1], str)
        for p in pairs
    ):
        raise SpecError(f"{where}: GRADES must be a list of (fraction, letter), best first")
    out = tuple((float(t), str(letter)) for t, letter in pairs)
    if [t for t, _ in out] != sorted((t for t, _ in out), reverse=True) or out[-1][0] != 0:
        raise SpecError(f"{where}: GRADES must go from the best letter down to one at 0.0")
    return out


def _compile_specs(raw: Any, where: str) -> tuple[CompileSpec, ...]:
    """`gpulab dev compile`'s specs of the folder's kernels, as a course
    grader's COMPILE_SPECS; each compiles the folder's reference.py (and
    starter.py), so none names a file of kernels/."""
    if not isinstance(raw, (list, tuple)) or not all(isinstance(s, CompileSpec) for s in raw):
        raise SpecError(
            f"{where}: COMPILE_SPECS must be a list of gpulab.measure.compile_specs.Spec"
        )
    for i, spec in enumerate(raw):
        if spec.file:
            raise SpecError(
                f"{where}: COMPILE_SPECS[{i}]: `file` names a file of kernels/; a folder "
                "exercise's kernels are its reference.py's"
            )
    return tuple(raw)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
