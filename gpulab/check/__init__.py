"""A check from the lab's side: what to run (plan), the judge started as a
child process (runner, child), the frames it sends (protocol, frames,
events), the result (result, status) and how it is shown (report); the
watcher re-checks a file when it changes. Nothing here imports torch,
triton or textual.
"""
