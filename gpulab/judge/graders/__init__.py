"""The graders: one module per exercise of the course, `gpulab.judge.graders.<exercise>`.

Each provides what gpulab.judge.interface.Grader declares (a `grade(ctx)`;
kernel exercises also their `timing_cases(ctx)`), and builds on the
machinery in gpulab.judge (cases, guards, comparison, timing). Nothing but
graders lives here: gpulab.judge.loader loads a module from this package
only for a name the course manifest declares. Runs in the judge only; a
submission can neither import nor read these modules.
"""
