"""Reference solution for lesson 08: one MLP, sharded two ways over a 1-D mesh.

The model is y = relu(x @ w1 + b1) @ w2 + b2 with x (batch, d_in),
w1 (d_in, hidden), w2 (hidden, d_out).

  * Data parallel: every device holds all the weights and 1/n of the batch.
    Rows of x never interact in a forward pass, so each device computes its
    rows of y alone: no communication at all. (Training adds one all-reduce
    of the gradients per step.)
  * Tensor parallel (Megatron's MLP split): w1 by columns and w2 by rows,
    so each device owns hidden/n units end to end. relu acts unit by unit,
    so it needs nothing from other devices; but y = sum over hidden units,
    so each device ends with a partial sum of y, and one all-reduce adds
    them. We never write that all-reduce: jit sees the shardings and XLA's
    SPMD partitioner inserts it. shard_map (below) writes it by hand.
"""

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "devices"


def mlp(params, x):
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def make_mesh() -> Mesh:
    # One row of every device JAX sees: 8 simulated CPUs, 1 GPU, 8 GPUs alike.
    return Mesh(np.array(jax.devices()), (AXIS,))


def data_parallel(mesh: Mesh):
    replicated = NamedSharding(mesh, P())  # a whole copy on every device
    rows = NamedSharding(mesh, P(AXIS, None))  # dim 0 (batch) split over the axis
    # A single sharding stands for the whole params dict (a pytree prefix).
    return jax.jit(mlp, in_shardings=(replicated, rows), out_shardings=rows)


def _tensor_parallel_shardings(mesh: Mesh):
    params = {
        "w1": NamedSharding(mesh, P(None, AXIS)),  # columns = hidden units
        "b1": NamedSharding(mesh, P(AXIS)),  # follows w1's columns
        "w2": NamedSharding(mesh, P(AXIS, None)),  # rows = the same hidden units
        "b2": NamedSharding(mesh, P()),  # added once, after the sum
    }
    replicated = NamedSharding(mesh, P())
    return (params, replicated), replicated


def tensor_parallel(mesh: Mesh):
    ins, out = _tensor_parallel_shardings(mesh)
    return jax.jit(mlp, in_shardings=ins, out_shardings=out)


def tensor_parallel_shard_map(mesh: Mesh):
    """The same split written per device: shapes are local, the collective explicit."""
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # JAX before 0.6.1
        from jax.experimental.shard_map import shard_map

    def local(params, x):
        # Here w1 is (d_in, hidden/n) and w2 (hidden/n, d_out): this device's units.
        h = jax.nn.relu(x @ params["w1"] + params["b1"])
        partial_y = h @ params["w2"]
        return jax.lax.psum(partial_y, AXIS) + params["b2"]  # the one all-reduce

    specs = {"w1": P(None, AXIS), "b1": P(AXIS), "w2": P(AXIS, None), "b2": P()}
    fn = shard_map(local, mesh=mesh, in_specs=(specs, P()), out_specs=P())
    ins, out = _tensor_parallel_shardings(mesh)
    return jax.jit(fn, in_shardings=ins, out_shardings=out)
