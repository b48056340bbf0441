"""The grading machinery: runs in the judge only (it imports torch and triton).

`harness` drives one check: `loader` loads the exercise's grader,
`gpulab.judge.graders.<exercise>` (never a module of this package: none of these
is an exercise), and calls its `grade(ctx)`; `interface` declares what a
grader provides, `context` what it is given. Kernel exercises build on
`kernel` (cases, guards, comparison), `standard` and `speed` (timing);
`remote` and `replay` are the judge's side of the sandboxes.
"""
