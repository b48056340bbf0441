"""Reference for lesson 08's exercise: the shardings chosen for two goals
on a 2-D mesh ("data", "model").

data_and_model: step 1's two splits, one an axis. The batch over "data"
(data parallel), the hidden dimension over "model" (tensor parallel: w1 by
columns, b1 with them, w2 by rows). Each device then holds its rows of x
and its hidden units' weights, and its partial sum of y is all-reduced over
"model" only: y is (batch/data, d_out) on each device, the same across a
"model" group.

data_everywhere: the batch dimension split over both axes at once,
P(("data", "model"), None): every device its own 1/n of the rows, the
weights whole, and nothing to communicate.
"""

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

DATA, MODEL = "data", "model"


def mlp(params, x):
    """The unsharded model. Leave it as it is."""
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def data_and_model(mesh):
    def s(*spec):
        return NamedSharding(mesh, P(*spec))

    params = {"w1": s(None, MODEL), "b1": s(MODEL), "w2": s(MODEL, None), "b2": s()}
    return jax.jit(mlp, in_shardings=(params, s(DATA, None)), out_shardings=s(DATA, None))


def data_everywhere(mesh):
    rows = NamedSharding(mesh, P((DATA, MODEL), None))
    return jax.jit(mlp, in_shardings=(NamedSharding(mesh, P()), rows), out_shardings=rows)
