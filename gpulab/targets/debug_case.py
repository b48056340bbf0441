"""The debug target: a wrong case of your last check, rerun in plain Python.

`gpulab debug EXERCISE` starts `python -i -m gpulab.targets.debug_case WORKSPACE
EXERCISE NUMBER` (and `--script` writes a file that calls `load`): your file
imported the ordinary way, outside gpulab's sandbox and its guards, so
print(), breakpoint() and pdb all work, with the case's own inputs and the
judge's reference, as the judge saved them after the verdict in
`<workspace>/.gpulab/debug/<exercise>/` (gpulab.judge.cost). Nothing here
grades: `gpulab check` does.

    case.run()        your function on the case's inputs (what the check called)
    case.check(out)   against the reference: how many elements are wrong, and where
    case.load_map()   which elements each program loaded and stored (the interpreter)

Like `gpulab profile`'s target, it runs in its own process, never the lab's;
it imports torch and triton only when it runs.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from gpulab.wire.protocol import JsonObject

if TYPE_CHECKING:
    from gpulab.gpu.loadmap import LoadMapJson

HELP = """\
gpulab debug: {exercise}, case {number} ({name}), as your last check ran it.
Your file runs here as plain Python (outside gpulab's sandbox): print(), breakpoint() work.

  out = case.run()      # {function}({args}) on the case's inputs
  case.check(out)       # against the reference: what is wrong, and where
  case.load_map()       # which elements each program loaded and stored
  case.args, case.expected, case.fn   # the inputs, the reference, your function

The check said: {detail}
"""


@dataclass(frozen=True, slots=True)
class SavedCase:
    """One wrong case in the judge's index."""

    number: int
    name: str
    file: str  # its inputs and reference (torch.save), beside the index
    detail: str
    tolerance: tuple[float, float]  # (atol, rtol)


@dataclass(frozen=True, slots=True)
class SavedCases:
    """The index the judge wrote after the last check (gpulab.judge.cost.save_cases)."""

    function: str
    file: str  # the learner's file
    device: str  # "cuda" where the inputs were on the GPU
    cases: tuple[SavedCase, ...]

    @classmethod
    def from_json(cls, meta: JsonObject) -> SavedCases:
        """Read field by field: a case without a number is left out, a value
        of another type reads as text or as the default tolerance."""
        raw = meta.get("cases")
        listed = raw if isinstance(raw, list) else []
        cases = [c for c in listed if isinstance(c, dict) and isinstance(c.get("number"), int)]
        device = meta.get("device")
        return cls(
            function=str(meta.get("function", "")),
            file=str(meta.get("file", "")),
            device=device if isinstance(device, str) else "",
            cases=tuple(
                SavedCase(
                    number=c["number"],
                    name=str(c.get("name", "")),
                    file=str(c.get("file", "")),
                    detail=str(c.get("detail", "")),
                    tolerance=_tolerance(c.get("tolerance")),
                )
                for c in cases
            ),
        )


def _tolerance(value: Any) -> tuple[float, float]:
    if isinstance(value, list) and len(value) == 2:
        try:
            return float(value[0]), float(value[1])
        except (TypeError, ValueError, OverflowError):
            pass  # not numbers: the default, as where there is none
    return 1e-5, 1e-5


@dataclass
class DebugCase:
    """One saved wrong case, with the learner's function."""

    exercise: str
    number: int
    name: str
    function: str
    file: str
    args: list[Any]
    kwargs: dict[str, Any]
    expected: Any
    detail: str = ""
    tolerance: tuple[float, float] = (1e-5, 1e-5)
    _module: Any = field(default=None, repr=False)

    @property
    def fn(self) -> Any:
        """The learner's function, from their file as it is now (imported once)."""
        if self._module is None:
            import importlib.util

            spec = importlib.util.spec_from_file_location(
                f"gpulab_debug_{self.exercise}", self.file
            )
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot import {self.file}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._module = module
        found = getattr(self._module, self.function, None)
        if found is None:
            raise AttributeError(f"{self.file} does not define `{self.function}`")
        return found

    def run(self) -> Any:
        """Your function on fresh copies of the case's inputs (as the check called it)."""
        return self.fn(*_fresh(self.args), **_fresh(self.kwargs))

    def check(self, out: Any = None) -> bool:
        """Compare `out` (else a fresh run's) with the reference; print what
        is wrong, and where. True when it matches."""
        import torch

        if out is None:
            out = self.run()
        expected = self.expected
        if not isinstance(out, torch.Tensor):
            print(f"your function returned {type(out).__name__}, not a tensor")
            return False
        if tuple(out.shape) != tuple(expected.shape):
            print(f"shape {tuple(out.shape)}, expected {tuple(expected.shape)}")
            return False
        from gpulab.judge.compare import compare, describe_mismatch

        atol, rtol = self.tolerance
        rep = compare(out.detach().cpu(), expected.cpu(), atol, rtol)
        if not rep.mismatches:
            print(f"case {self.number} ({self.name}): right, within atol {atol:g}, rtol {rtol:g}")
            return True
        print(f"case {self.number} ({self.name}): {describe_mismatch(rep)}")
        return False

    def load_map(self, width: int = 80) -> LoadMapJson | None:
        """Run your function once more in Triton's interpreter, counting what
        each program loaded and stored, and draw it (gpulab.gpu.loadmap)."""
        if os.environ.get("TRITON_INTERPRET") != "1":
            print("the load map needs Triton's interpreter: `gpulab debug` on the CPU")
            return None
        from rich.console import Console

        from gpulab.gpu import loadmap
        from gpulab.sandbox.counting import counting

        args, kwargs = _fresh(self.args), _fresh(self.kwargs)
        with counting(maps=True) as counts:
            out = self.fn(*args, **kwargs)
        data: LoadMapJson = {
            "case": self.name,
            "number": self.number,
            # Typed here (costcount.CountsJson); a load map holds it as plain
            # JSON, as the judge's replay sends it, and `read` checks it.
            "counts": cast("JsonObject", counts.to_json()),
            "wrong": _wrong(out, self.expected, self.tolerance),
        }
        drawn = loadmap.renderable({"load_map": data})
        if drawn is not None:
            Console(width=width).print(drawn)
        return data


def _fresh(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


def _wrong(out: Any, expected: Any, tolerance: tuple[float, float]) -> list[list[int]]:
    import torch

    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(expected.shape):
        return []
    atol, rtol = tolerance
    got, ref = out.detach().cpu().double(), expected.cpu().double()
    bad = ~(torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True))
    return [list(map(int, ix)) for ix in bad.nonzero().tolist()[:4096]]


def saved_cases(workspace: str | Path, exercise: str) -> SavedCases | None:
    """The index the judge wrote after the last check (plain JSON; checked)."""
    path = Path(workspace, ".gpulab", "debug", exercise, "cases.json")
    try:
        meta = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or not isinstance(meta.get("cases"), list):
        return None
    return SavedCases.from_json(meta)


def load(workspace: str | Path, exercise: str, number: int | None = None) -> DebugCase:
    """A saved wrong case (the first, or case `number` of the check's table)."""
    import torch

    meta = saved_cases(workspace, exercise)
    if meta is None:
        raise FileNotFoundError(
            f"no wrong case of {exercise} is saved: `gpulab check {exercise}` saves them"
        )
    chosen = next((c for c in meta.cases if number is None or c.number == number), None)
    if chosen is None:
        numbers = ", ".join(str(c.number) for c in meta.cases) or "none"
        raise LookupError(f"case {number} of {exercise} is not saved (saved: {numbers})")
    folder = Path(workspace, ".gpulab", "debug", exercise)
    file = folder / Path(chosen.file).name
    data = torch.load(file, weights_only=True, map_location=_device(meta))
    return DebugCase(
        exercise=exercise,
        number=chosen.number,
        name=chosen.name,
        function=meta.function,
        file=meta.file,
        args=list(data["args"]),
        kwargs=dict(data.get("kwargs") or {}),
        expected=data["expected"],
        detail=chosen.detail,
        tolerance=chosen.tolerance,
    )


def _device(meta: SavedCases) -> str:
    import torch

    return "cuda" if meta.device == "cuda" and torch.cuda.is_available() else "cpu"


def _describe(arg: Any) -> str:
    shape = getattr(arg, "shape", None)
    return "×".join(map(str, shape)) + " tensor" if shape is not None else repr(arg)[:20]


def main(argv: list[str]) -> DebugCase:
    workspace, exercise, number = argv[0], argv[1], int(argv[2])
    meta = saved_cases(workspace, exercise)
    if meta is None or meta.device != "cuda":
        os.environ.setdefault("TRITON_INTERPRET", "1")
    case = load(workspace, exercise, number)
    print(
        HELP.format(
            exercise=exercise,
            number=case.number,
            name=case.name,
            function=case.function,
            args=", ".join(_describe(a) for a in case.args),
            detail=case.detail[:600] or "(no detail)",
        )
    )
    return case


if __name__ == "__main__":
    case = main(sys.argv[1:])
