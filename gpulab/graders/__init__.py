"""The graders: one module per exercise of the course, `gpulab.graders.<exercise>`.

Each provides what gpulab.grading.interface.Grader declares (a `grade(ctx)`;
kernel exercises also their `timing_cases(ctx)`), and builds on the
machinery in gpulab.grading (cases, guards, comparison, timing). Nothing but
graders lives here: gpulab.grading.loader loads a module from this package
only for a name the course manifest declares. Runs in the judge only; a
submission can neither import nor read these modules.
"""
