"""Lesson 08, step 1 of 3 — JAX sharding: one MLP, split two ways over a mesh.

The model is `mlp(params, x) = relu(x @ w1 + b1) @ w2 + b2` with
x (batch, d_in), w1 (d_in, hidden), b1 (hidden,), w2 (hidden, d_out),
b2 (d_out,), all float32. You don't change `mlp`; you say where its arrays
live and let `jax.jit` split the work.

Write three functions:

  make_mesh()          a 1-D `Mesh` over every device `jax.devices()` lists,
                       with the one axis named AXIS ("devices").

  data_parallel(mesh)  return `jax.jit(mlp, in_shardings=..., out_shardings=...)`:
                       x split along the batch,  P(AXIS, None)
                       w1, b1, w2, b2 replicated, P()
                       y split along the batch,  P(AXIS, None)

  tensor_parallel(mesh)  the same, split along the hidden dimension:
                       x replicated P(); w1 by columns P(None, AXIS);
                       b1 P(AXIS); w2 by rows P(AXIS, None); b2 replicated;
                       y replicated P()

The grader calls your steps as `step(params, x)` with params a dict
{"w1", "b1", "w2", "b2"} of NumPy arrays, on fresh random inputs whose batch
and hidden sizes divide evenly by the number of devices. It checks the
values against a float64 reference, the shardings the compiled step takes
and returns, and that each device really does only its share of the work.
On a CPU it simulates 8 devices; on a GPU machine it uses every GPU.

Optional: define `tensor_parallel_shard_map(mesh)`, the tensor-parallel step
written with `jax.shard_map` and an explicit `jax.lax.psum`; it is graded too.

Grade: pass or fail, no letter.

Run `gpulab check sharded_mlp`.
"""

import jax
import numpy as np  # noqa: F401 - you will want np.array(jax.devices())
from jax.sharding import Mesh, NamedSharding  # noqa: F401
from jax.sharding import PartitionSpec as P  # noqa: F401

AXIS = "devices"


def mlp(params, x):
    """The unsharded model. Leave it as it is."""
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def make_mesh() -> Mesh:
    devices = jax.devices()  # noqa: F841 - yours to use
    # TODO: a Mesh over `devices` laid out in one row, with axis name AXIS.
    return None


def data_parallel(mesh: Mesh):
    # TODO: a NamedSharding for x and y (batch split over AXIS) and one for
    #       the parameters (replicated: a single sharding can stand for the
    #       whole params dict).
    # TODO: pass them to jax.jit as in_shardings=(params, x) and out_shardings.
    return jax.jit(mlp)


def tensor_parallel(mesh: Mesh):
    # TODO: shard w1 by columns, b1 to match, w2 by rows; x, b2 and y replicated.
    #       in_shardings takes a dict for params: {"w1": ..., "b1": ..., ...}.
    return jax.jit(mlp)
