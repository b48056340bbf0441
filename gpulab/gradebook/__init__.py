"""`gpulab grade`: the instructor's side. A course folder (gradebook.toml,
a roster, the submissions), a batch of checks through the very judge
`gpulab check` uses, an SQLite gradebook that only `ingest` writes, regrade
of what is stale, exports for the LMS, similarity and the executors (local
worker processes, or Slurm through submitit).

Nothing here imports torch, triton, textual or the judge: a worker
(gpulab.gradebook.worker) grades through gpulab.lab.check.Lab, whose judge
runs in a child process of its own."""
