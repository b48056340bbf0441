"""The "Explain" section of a result, for people (CLI and the TUI's Results pane)."""

from __future__ import annotations

from typing import Any, cast

from gpulab.explain.facts import ExplainInfo, Finding, NsightInfo
from gpulab.wire.protocol import JsonObject


def explain_renderable(result: JsonObject) -> Any | None:
    """None when the result carries no diagnosis. `result`: the judge's own
    keys of a result as the lab read them (CheckResult.rest, checked only to
    be JSON), whose `explain` and `diagnosis` the judge wrote as
    gpulab.explain.facts says. A result file read back from the workspace
    may have been edited or damaged, so every part is read by its type
    (`_dicts`, `_num`): a part of the wrong type is left out, never a crash."""
    if "diagnosis" not in result:
        return None
    from rich.console import Group
    from rich.text import Text

    ex = cast("ExplainInfo", _dict(result.get("explain")))
    parts: list[Any] = [Text("Explain: what limits this kernel", style="bold")]
    found = cast("list[Finding]", _dicts(result.get("diagnosis")))
    for i, d in enumerate(found, 1):
        line = Text(f"{i}. ")
        line.append(str(d.get("kind", "")), style="bold yellow")
        line.append(f"  {d.get('evidence', '')}")
        parts.append(line)
        parts.append(Text(f"   → {d.get('advice', '')}", style="cyan"))
    failures = _dicts(ex.get("compile_errors"))
    for f in failures:
        parts.append(
            Text(
                f"{f.get('kernel', '?')} does not compile for {f.get('arch', 'the GPU')} "
                f"({ex.get('gpu') or 'the GPU'}): {f.get('error', '')}",
                style="bold red",
            )
        )
    if failures:
        parts.append(
            Text(
                "   → the Triton interpreter ran it, a GPU will not: it accepts code the "
                "compiler refuses (lesson 01, 'Triton in one screen')",
                style="cyan",
            )
        )
    if not found and not ex.get("error") and not failures:
        parts.append(
            Text(
                "Nothing stands out: no spills, tensor cores where they belong, "
                "enough programs and warps for this GPU.",
                style="green",
            )
        )
    if ex.get("error"):
        parts.append(Text(f"could not explain: {ex['error']}", style="yellow"))
    parts += _nsight(cast("NsightInfo", _dict(ex.get("nsight"))))
    if ex.get("not_compiled"):
        parts.append(
            Text(
                f"{ex['not_compiled']} more kernel variant(s) not compiled within the "
                "time budget; the next --explain reads them from the cache",
                style="dim",
            )
        )
    basis = ex.get("basis")
    for b in basis if isinstance(basis, list) else []:
        parts.append(Text(f"· {b}", style="dim"))
    if ex.get("advisory"):
        parts.append(Text(f"· {ex['advisory']}", style="dim"))
    return Group(*parts)


def _dict(v: object) -> dict[str, object]:
    return v if isinstance(v, dict) else {}


def _dicts(v: object) -> list[Any]:
    """The objects of a list read back from disk; anything else left out."""
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mib(n: object) -> str:
    v = _num(n)
    return f"{v / 2**20:.1f} MiB" if v is not None else "? MiB"


def _us(s: object) -> str:
    v = _num(s)
    return f"{v * 1e6:.1f} µs" if v is not None else "? µs"


def _nsight(info: NsightInfo) -> list[Any]:
    """What Nsight Compute measured: DRAM bytes against the minimum, per
    kernel its time and its top stall reasons."""
    from rich.text import Text

    if not info.get("measured"):
        return []
    head = f"Nsight Compute, case {info.get('case', '?')}: {_mib(info.get('dram_bytes'))} DRAM"
    if ratio := _num(info.get("ratio")):
        head += f" ({ratio:.2f}× the minimum {_mib(info.get('minimum_bytes'))})"
    out = [Text(f"{head}, {_us(info.get('gpu_seconds'))} on the GPU")]
    for k in _dicts(info.get("kernels"))[:4]:
        stalls = ", ".join(
            f"{str(s.get('reason', '?')).replace('_', ' ')} {_num(s.get('share')) or 0:.0%}"
            for s in _dicts(k.get("stalls"))
        )
        line = f"   {str(k.get('name', '?'))[:60]}: {_mib(k.get('dram_bytes'))}, {_us(k.get('seconds'))}"
        out.append(Text(line + (f"; warps stalled on {stalls}" if stalls else ""), style="dim"))
    return out


__all__ = ["explain_renderable"]
