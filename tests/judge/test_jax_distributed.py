"""Lesson 08's "Beyond one host" path, run as the lesson says (issue 31):
two processes, `jax.distributed.initialize` in each before anything else,
a mesh over `jax.devices()` that spans both, the batch fed per process with
`jax.make_array_from_process_local_data`, and the lesson's reference
shardings (data parallel, tensor parallel, shard_map) giving the same y as
numpy on both processes.

On the CPU each process has 4 simulated devices and JAX's CPU collectives
(gloo) carry the all-reduces between them; with two GPUs (the GPU test)
each process gets one. Real processes and a real coordinator on localhost."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

WORKER = """
import contextlib, json, os, sys
import jax

rank, port = int(sys.argv[1]), sys.argv[2]
with contextlib.suppress(Exception):  # JAX's CPU collectives across processes
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator_address=f"localhost:{port}",
                           num_processes=2, process_id=rank)

import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec as P

sys.path.insert(0, os.path.join(sys.argv[3], "kernels"))
import sharded_mlp as ref

B, D, H = 16, 8, 32
rng = np.random.default_rng(0)  # the same numbers in both processes
x = rng.standard_normal((B, D)).astype(np.float32)
params = {"w1": rng.standard_normal((D, H)).astype(np.float32),
          "b1": rng.standard_normal(H).astype(np.float32),
          "w2": rng.standard_normal((H, D)).astype(np.float32),
          "b2": rng.standard_normal(D).astype(np.float32)}
want = np.maximum(x @ params["w1"] + params["b1"], 0) @ params["w2"] + params["b2"]

mesh = ref.make_mesh()
rows = NamedSharding(mesh, P(ref.AXIS, None))
replicated = NamedSharding(mesh, P())
local = B // jax.process_count()
# Each process feeds only its own part of the batch, as the lesson says.
gx_rows = jax.make_array_from_process_local_data(rows, x[rank * local:(rank + 1) * local])


def placed(value, sharding):
    return jax.make_array_from_callback(value.shape, sharding, lambda i: value[i])


# Each step's arrays placed as its in_shardings say: jit refuses a committed
# array laid out otherwise (in one process or two, JAX 0.6.1 and 0.10.2).
whole = {k: placed(v, replicated) for k, v in params.items()}
(tp_params, _), _ = ref._tensor_parallel_shardings(mesh)
split = {k: placed(v, tp_params[k]) for k, v in params.items()}
gx = placed(x, replicated)
errors = {}
for name, step, pp, px in [("data parallel", ref.data_parallel, whole, gx_rows),
                           ("tensor parallel", ref.tensor_parallel, split, gx),
                           ("shard_map", ref.tensor_parallel_shard_map, split, gx)]:
    y = multihost_utils.process_allgather(step(mesh)(pp, px), tiled=True)
    errors[name] = float(np.abs(np.asarray(y) - want).max())

grid = jax.make_mesh((2, len(jax.devices()) // 2), ("data", "model"))
rows_of = [sorted({d.process_index for d in row}) for row in grid.devices]
print(json.dumps({"rank": rank, "devices": len(jax.devices()),
                  "local": len(jax.local_devices()), "processes": jax.process_count(),
                  "errors": errors, "data_rows_processes": rows_of}))
jax.distributed.shutdown()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def two_processes(tmp_path: Path, per_process_env: list[dict[str, str]]) -> list[dict]:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(WORKER))
    port = str(free_port())
    procs = []
    for rank, extra in enumerate(per_process_env):
        env = {**os.environ, **extra}
        procs.append(
            subprocess.Popen(
                [sys.executable, str(script), str(rank), port, str(REPO)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-3000:]
            outs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


@pytest.mark.slow
def test_two_processes_on_one_host_run_the_lessons_shardings(tmp_path):
    cpu = {
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
    }
    outs = two_processes(tmp_path, [cpu, cpu])
    for rank, got in enumerate(outs):
        assert got["rank"] == rank and got["processes"] == 2, got
        # jax.devices() lists both processes' devices, local_devices() its own.
        assert got["devices"] == 8 and got["local"] == 4, got
        assert all(e < 1e-4 for e in got["errors"].values()), got
        # The lesson's 2-D mesh: each "data" row is one process's devices, so
        # sharding the batch over "data" splits it across hosts.
        assert got["data_rows_processes"] == [[0], [1]], got


@pytest.mark.gpu
def test_gpu_two_processes_one_gpu_each(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    envs = [{"CUDA_VISIBLE_DEVICES": str(i), "JAX_PLATFORMS": "cuda"} for i in (0, 1)]
    outs = two_processes(tmp_path, envs)
    for got in outs:
        assert got["devices"] == 2 and got["local"] == 1, got
        assert all(e < 1e-3 for e in got["errors"].values()), got
