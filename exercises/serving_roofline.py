"""Lesson 09 — the roofline of LLM serving.

Write four functions that say, for a transformer, a batch, a sequence length
and a GPU, how much work and traffic a prefill or a decode step costs, which
roof bounds it, and how many tokens per second it could reach at best.

What you are given
  cfg: the model, with attributes
      cfg.layers, cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim,
      cfg.vocab, cfg.intermediate   (integers)
      cfg.weight_bytes              bytes per stored weight (2 bf16, 1 fp8, 0.5 int4)
      cfg.kv_bytes                  bytes per KV-cache element (2 bf16, 1 fp8)
    Use cfg.head_dim as given: it is not always hidden // heads.
  gpu: the roofs, with attributes
      gpu.bandwidth_tbs   memory bandwidth in TB/s  (1 TB = 10**12 bytes)
      gpu.peak_tflops     peak FLOP/s of the matmul dtype, in 10**12 FLOP/s

The accounting conventions (the grader holds you to exactly these)
  * Weights a step multiplies through, per layer: W_q (hidden x heads*head_dim),
    W_k and W_v (hidden x kv_heads*head_dim each), W_o (heads*head_dim x hidden),
    and a gated MLP, 3 matrices of hidden x intermediate; then, once, the output
    projection (hidden x vocab). Leave out the embedding table (a lookup reads
    a few rows), norms and biases.
  * FLOPs: 2 per weight per token (a multiply and an add), plus attention:
    a query attending to n positions costs 4 * heads * head_dim * n FLOPs per
    layer (2 for Q.K^T and 2 for P.V).
  * Prefill of S prompt tokens is causal: token i (0-based) attends to i + 1
    positions, so S*(S+1)/2 query-key pairs per sequence. A decode step at
    context C: each sequence's new token attends to C positions.
  * Bytes: every step reads each weight once, shared by the whole batch.
    Prefill also writes the prompt's KV cache (S tokens per sequence); decode
    reads C tokens of KV cache per sequence. Leave out activations and the
    decode step's own KV write.
  * KV bytes per token = 2 (K and V) * layers * kv_heads * head_dim * kv_bytes.
  * Time = max(FLOPs / peak FLOP/s, bytes / bandwidth). The step is "memory"-
    bound when the memory time is the larger, otherwise "compute"-bound.
  * Tokens per second: prefill batch*S / time; decode batch / time.

The two step functions return a dict with the keys
  "flops", "bytes", "intensity" (FLOPs / bytes), "bound" ("memory" or
  "compute") and "tokens_per_s".

Grade: pass or fail, no letter.

Run `gpulab check serving_roofline`; `gpulab serving` is a calculator built on
the same conventions, for checking your intuition (not your code).
"""


def weight_params(cfg) -> float:
    """The number of weights one forward step multiplies through."""
    # TODO: attention (q, k, v, o) + gated MLP per layer, times layers, plus
    #       the output projection.
    return 0.0


def kv_bytes_per_token(cfg) -> float:
    """Bytes of KV cache one token occupies, all layers."""
    # TODO
    return 0.0


def _roofline(flops: float, nbytes: float, tokens: float, gpu) -> dict:
    """Fill in intensity, bound and tokens/s from a step's FLOPs and bytes."""
    # TODO: the compute time and the memory time (watch the units), the
    #       larger one is the step's time; which one it is names the bound.
    return {"flops": flops, "bytes": nbytes, "intensity": 0.0, "bound": "compute",
            "tokens_per_s": 0.0}


def prefill_step(cfg, gpu, batch: int, prompt_len: int) -> dict:
    """`batch` prompts of `prompt_len` tokens each, from an empty KV cache."""
    # TODO: FLOPs (weights and causal attention) and bytes (weights once,
    #       plus the KV cache written), then _roofline.
    flops = 0.0
    nbytes = 1.0
    return _roofline(flops, nbytes, batch * prompt_len, gpu)


def decode_step(cfg, gpu, batch: int, context: int) -> dict:
    """One new token for each of `batch` sequences at context length `context`."""
    # TODO: FLOPs (weights and attention over `context` positions) and bytes
    #       (weights once, plus every sequence's KV cache read).
    flops = 0.0
    nbytes = 1.0
    return _roofline(flops, nbytes, batch, gpu)
