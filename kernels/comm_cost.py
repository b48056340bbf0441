"""Lesson 08 reference: the bytes each split of the MLP moves, and what they cost.

On the lesson's example (d = d_out = 8192, h = 32768, B = 8192, bf16, 8 GPUs,
450 GB/s each way, 989 TFLOP/s): tensor parallel's forward all-reduces y,
134 MB, so each GPU sends 2 * 7/8 * 134 MB = 235 MB, 0.52 ms against 1.11 ms
of compute (4,681 FLOP per byte); data parallel's training step all-reduces
1.07 GB of gradients, 1.88 GB a GPU, 4.2 ms against 3.3 ms; FSDP sends 1.5
times that.
"""

RING = ("all_gather", "reduce_scatter", "all_reduce")
STRATEGIES = ("data", "tensor", "zero12", "fsdp")


def ring_bytes(collective: str, nbytes: float, n: int) -> float:
    # A ring passes n - 1 of the n chunks through every device; an all-reduce
    # is a reduce-scatter followed by an all-gather.
    share = (n - 1) / n * nbytes
    return {"all_gather": share, "reduce_scatter": share, "all_reduce": 2 * share}[collective]


def _collectives(mlp, strategy: str, training: bool) -> list[tuple[str, float]]:
    """(collective, tensor bytes) that one pass of `strategy` runs."""
    weights = (mlp.d * mlp.h + mlp.h * mlp.d_out) * mlp.elt
    if strategy == "data":
        return [("all_reduce", weights)] if training else []
    if strategy == "tensor":
        y = ("all_reduce", mlp.batch * mlp.d_out * mlp.elt)
        dx = ("all_reduce", mlp.batch * mlp.d * mlp.elt)
        return [y, dx] if training else [y]
    if strategy == "zero12":
        return [("reduce_scatter", weights), ("all_gather", weights)] if training else []
    if strategy == "fsdp":
        gather = ("all_gather", weights)
        return [gather, gather, ("reduce_scatter", weights)] if training else [gather]
    raise ValueError(f"unknown strategy {strategy!r}")


def step_cost(mlp, n: int, strategy: str, training: bool, link) -> dict:
    nbytes = sum(ring_bytes(c, s, n) for c, s in _collectives(mlp, strategy, training))
    forward = 2 * mlp.batch * (mlp.d * mlp.h + mlp.h * mlp.d_out)
    flops = (3 if training else 1) * forward / n
    comm_ms = nbytes / (link.gbs * 1e9) * 1e3
    compute_ms = flops / (link.tflops * 1e12) * 1e3
    return {
        "bytes": nbytes,
        "flops": flops,
        "comm_ms": comm_ms,
        "compute_ms": compute_ms,
        "intensity": flops / nbytes if nbytes else None,
        "bound": "communication" if comm_ms > compute_ms else "compute",
    }


def bubble(p: int, m: int, v: int = 1) -> float:
    # GPipe idles p - 1 micro-batch slots out of m + p - 1; v stages a device
    # make each slot v times shorter.
    return (p - 1) / (v * m + p - 1)
