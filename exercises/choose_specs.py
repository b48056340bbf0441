"""Lesson 08 — choose the PartitionSpecs: two goals on a 2-D mesh.

The model is step 1's `mlp(params, x) = relu(x @ w1 + b1) @ w2 + b2`, x
(batch, d_in), w1 (d_in, hidden), b1 (hidden,), w2 (hidden, d_out), b2
(d_out,), all float32. This time the mesh has two axes, DATA and MODEL
(2 × 4 on the 8 simulated CPU devices), and no spec is given: each goal
says what every device may hold and what the program may communicate,
and you choose the shardings that get there.

Write two functions; each returns `jax.jit(mlp, in_shardings=...,
out_shardings=...)` for the mesh it is given:

  data_and_model(mesh)   each device holds 1/data of x's rows and
                         1/model of w1 and of w2 (the biases as you like);
                         y comes out split by rows over DATA and whole
                         across MODEL; the only communication is
                         all-reduces of y's per-device partial sums.

  data_everywhere(mesh)  each device holds 1/(data × model) of x's rows:
                         every device a different slice of the batch; y
                         comes out split the same way; no communication
                         at all.

The grader calls each as step 1's are called, on fresh random inputs whose
batch and hidden sizes divide by the number of devices: it checks the
values against float64, then reads from the compiled program what each
device holds of every input, how y comes out, which collectives it runs
(and their shapes) and each device's share of the FLOPs. Any shardings
that meet the goal pass.

Grade: pass or fail, no letter.

Run `gpulab check choose_specs`.
"""

import jax
from jax.sharding import NamedSharding  # noqa: F401
from jax.sharding import PartitionSpec as P  # noqa: F401

DATA, MODEL = "data", "model"


def mlp(params, x):
    """The unsharded model. Leave it as it is."""
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def data_and_model(mesh):
    # TODO: in_shardings for (params, x) and out_shardings for y that meet
    #       the goal: think of step 1's two splits, one on each axis.
    return jax.jit(mlp)


def data_everywhere(mesh):
    # TODO: one dimension split over both axes at once.
    return jax.jit(mlp)
