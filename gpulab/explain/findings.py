"""What every rule builds a finding from: the main launch, its label, the
finding itself (kind, evidence, advice with its lesson section, severity)."""

from __future__ import annotations

from typing import Any

from gpulab.explain.kinds import where


def _fmt_us(s: float) -> str:
    return f"{s * 1e6:.1f} µs" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def _launch_label(la: dict[str, Any], info: dict[str, Any] | None) -> str:
    bits = [f"{la.get('kernel', '?')}"]
    ce = la.get("constexprs") or {}
    shown = ", ".join(f"{k}={v}" for k, v in ce.items() if isinstance(v, (int, bool)))
    bits.append(f"({shown}{', ' if shown else ''}{la.get('num_warps', '?')} warps)")
    return " ".join(bits)


def _main_launch(case: dict[str, Any], compiled: dict[str, Any]) -> tuple[dict, dict | None]:
    """The launch that does most of the work: the most programs, then the first."""
    launches = case.get("launches") or []
    if not launches:
        return {}, None
    la = max(launches, key=lambda x: x.get("programs") or 0)
    return la, compiled.get(la.get("key", ""))


def _finding(
    kind: str,
    exercise: str,
    severity: float,
    evidence: str,
    advice: str,
    section: tuple[str, str] | None = None,
) -> dict:
    """`section`: (lesson, heading) when this cause has a better read than
    the kind's usual one for the exercise."""
    w = {"lesson": section[0], "section": section[1]} if section else where(kind, exercise)
    return {
        "kind": kind,
        "evidence": evidence,
        "advice": f"{advice} (lesson {w['lesson'][:2]}, “{w['section']}”)",
        "lesson": w["lesson"],
        "section": w["section"],
        "severity": round(max(0.0, min(1.0, severity)), 3),
    }


__all__ = ["_finding", "_fmt_us", "_launch_label", "_main_launch"]
