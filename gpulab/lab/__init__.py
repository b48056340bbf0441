"""The lab's process: a check from the lab's side and the learner's workspace.

What to run (plan), the judge started as a child process (runner, child),
how a result is shown (report), the watcher that re-checks a file when it
changes, and the workspace with its state file. The messages themselves are
gpulab.wire's. Nothing here imports torch, triton or textual.
"""
