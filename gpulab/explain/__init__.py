"""What limits a learner's kernel, with evidence: `gpulab check EX --explain`.

Pure core, no heavy imports: `kinds` (the documented, stable kinds),
`rules.diagnose(facts)` (facts -> findings, most important first). The
facts are gathered elsewhere: launches and compile facts in the sandbox
(`gpulab.explain.sandbox.plugin`, the only part that touches the learner's
code), timing and hardware in the judge (`gpulab.explain.judge.plugin`).
A diagnosis is advice: it never changes a grade. See docs/diagnosis.md.
"""

from __future__ import annotations

from gpulab.explain.kinds import KINDS, Kind
from gpulab.explain.rules import diagnose

__all__ = ["KINDS", "Kind", "diagnose"]
