"""Grading: runs inside the child process only (it imports torch and triton).

`harness` loads the learner's file and drives an exercise's grader module,
`gpulab.grading.<exercise>`, which defines `grade(ctx)`. Kernel exercises build
on `kernel` (cases, guards, comparison) and `timing` (the GPU timing harness).
"""
