"""What limits a learner's kernel, with evidence: `gpulab check EX --explain`.

Pure core, no heavy imports: `kinds` (the documented, stable kinds),
`rules.diagnose(facts)` (facts -> findings, most important first). The
facts are gathered elsewhere: launches and compile facts in the sandbox
(`gpulab.diagnosis.sandbox_side`, the only part that touches the learner's
code), timing and hardware in the judge (`gpulab.diagnosis.judge_side`).
A diagnosis is advice: it never changes a grade. See docs/diagnosis.md.
"""

from __future__ import annotations

from gpulab.diagnosis.kinds import KINDS, Kind
from gpulab.diagnosis.rules import diagnose

__all__ = ["KINDS", "Kind", "diagnose"]
