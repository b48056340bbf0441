"""Lesson 08, step 2 of 3 — what the collectives cost, as numbers.

Write three functions that price the lesson's MLP, y = relu(x @ w1 + b1) @ w2 + b2,
on n devices: what one ring collective moves, what a forward pass or a
training step of each split communicates and computes per device, and how
long each takes on a given link and device; then the idle fraction of a
pipeline.

What you are given
  mlp: the MLP and its batch, with attributes (integers)
      mlp.batch   B, the tokens of the whole batch (all devices together)
      mlp.d       input features: x is B×d, w1 is d×h
      mlp.h       hidden units: w2 is h×d_out
      mlp.d_out   output features: y is B×d_out (not always d)
      mlp.elt     bytes per element of activations, weights and gradients (2 bf16, 4 fp32)
  link: one device and its link, with attributes
      link.gbs     bytes per second each way per device, in GB/s (1 GB = 10**9 bytes)
      link.tflops  the device's peak, in TFLOP/s (10**12 FLOP/s)
  n: devices on the mesh, n >= 2

The accounting conventions (the grader holds you to exactly these)
  * A ring collective over a tensor of S bytes in all moves, per device (bytes
    sent, which equal the bytes received): all-gather and reduce-scatter
    (n - 1)/n * S each, all-reduce twice that.
  * Weights are w1 and w2: S_w = (d*h + h*d_out) * elt bytes, and their
    gradients are the same size. Leave the biases out.
  * FLOPs: 2 per multiply-add. A forward pass is 2*B*(d*h + h*d_out) FLOPs in
    all, a training step (forward and backward) 3 times that; every split
    below gives each device 1/n of them.
  * The splits, and what each communicates per device:
      "data"    batch split, weights replicated. Forward: nothing. Training:
                one all-reduce of the gradients (S_w).
      "tensor"  Megatron's split of h: w1 by columns, w2 by rows. Forward: one
                all-reduce of y (B*d_out*elt). Training: that, and in the
                backward one all-reduce of the gradient of x (B*d*elt).
      "zero12"  ZeRO-1/2: weights replicated, optimizer state (and gradients)
                sharded. Forward: nothing. Training: a reduce-scatter of the
                gradients and an all-gather of the updated weights (S_w each).
      "fsdp"    ZeRO-3 / FSDP: weights sharded too. Forward: one all-gather of
                the weights. Training: an all-gather before the forward, another
                before the backward, and a reduce-scatter of the gradients.
  * Times, in milliseconds: compute_ms = FLOPs / peak, comm_ms = bytes / link,
    with no overlap. The step is "communication"-bound when comm_ms is the
    larger, otherwise "compute"-bound. intensity = FLOPs / bytes per device
    (FLOP per communicated byte), or None when nothing is communicated.
  * Pipeline: p stages, m micro-batches, v stages on each device
    (interleaving; v = 1 is GPipe): the idle fraction is
    (p - 1) / (v*m + p - 1).

`step_cost` returns a dict with the keys
  "bytes", "flops", "comm_ms", "compute_ms", "intensity" and "bound".

Grade: pass or fail, no letter.

Run `gpulab check comm_cost`; the lesson's worked example (d = h/4 = 8192,
B = 8192, bf16, 8 GPUs on NVLink) is one of the cases.
"""

RING = ("all_gather", "reduce_scatter", "all_reduce")
STRATEGIES = ("data", "tensor", "zero12", "fsdp")


def ring_bytes(collective: str, nbytes: float, n: int) -> float:
    """Bytes each of n devices sends for one ring `collective` over a tensor
    of `nbytes` bytes in all."""
    # TODO: the lesson's table of collectives.
    return nbytes


def step_cost(mlp, n: int, strategy: str, training: bool, link) -> dict:
    """One forward pass (training=False) or training step of the MLP under
    `strategy`, per device."""
    # TODO: the weights' bytes, the collectives the strategy needs (ring_bytes),
    #       the FLOPs per device, then the two times, intensity and bound.
    flops = 2 * mlp.batch * (mlp.d * mlp.h + mlp.h * mlp.d_out)
    return {
        "bytes": 0.0,
        "flops": flops,
        "comm_ms": 0.0,
        "compute_ms": 0.0,
        "intensity": None,
        "bound": "compute",
    }


def bubble(p: int, m: int, v: int = 1) -> float:
    """The fraction of a pipeline step each device idles."""
    # TODO
    return 0.0
