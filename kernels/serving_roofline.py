"""Reference solution for lesson 09: the roofline of LLM serving.

The conventions are the starter's (exercises/serving_roofline.py). The two
ideas that carry the lesson are visible in the formulas below:

  * The weights are read once per step whatever the batch, but multiplied
    by every token in it: FLOPs grow with batch*tokens, weight bytes don't.
    That is why prefill (many tokens a step) is compute-bound and decode (one
    token a sequence) is memory-bound unless the batch is large.
  * The KV cache is per sequence: its bytes grow with batch*context just as
    the FLOPs do, so no batch size amortises it. At long context the decode
    intensity levels off far below the ridge.
"""


def weight_params(cfg) -> float:
    q_o = 2 * cfg.hidden * cfg.heads * cfg.head_dim  # W_q and W_o
    k_v = 2 * cfg.hidden * cfg.kv_heads * cfg.head_dim  # W_k and W_v (GQA: fewer heads)
    mlp = 3 * cfg.hidden * cfg.intermediate  # gate, up, down
    return float(cfg.layers * (q_o + k_v + mlp) + cfg.hidden * cfg.vocab)


def kv_bytes_per_token(cfg) -> float:
    return float(2 * cfg.layers * cfg.kv_heads * cfg.head_dim * cfg.kv_bytes)


def _attention_flops(cfg, pairs: float) -> float:
    # Q.K^T and P.V: 2 FLOPs each per (query, key, head_dim element), every head and layer.
    return 4.0 * cfg.layers * cfg.heads * cfg.head_dim * pairs


def _roofline(flops: float, nbytes: float, tokens: float, gpu) -> dict:
    t_compute = flops / (gpu.peak_tflops * 1e12)  # TFLOP/s: 10**12, not 2**40
    t_memory = nbytes / (gpu.bandwidth_tbs * 1e12)  # TB/s: 10**12 bytes
    seconds = max(t_compute, t_memory)
    return {
        "flops": flops,
        "bytes": nbytes,
        "intensity": flops / nbytes,
        "bound": "memory" if t_memory > t_compute else "compute",
        "tokens_per_s": tokens / seconds,
    }


def prefill_step(cfg, gpu, batch: int, prompt_len: int) -> dict:
    p = weight_params(cfg)
    pairs = prompt_len * (prompt_len + 1) / 2  # causal: token i sees i + 1 positions
    flops = batch * (2 * p * prompt_len + _attention_flops(cfg, pairs))
    nbytes = p * cfg.weight_bytes + batch * prompt_len * kv_bytes_per_token(cfg)
    return _roofline(flops, nbytes, batch * prompt_len, gpu)


def decode_step(cfg, gpu, batch: int, context: int) -> dict:
    p = weight_params(cfg)
    flops = batch * (2 * p + _attention_flops(cfg, context))
    nbytes = p * cfg.weight_bytes + batch * context * kv_bytes_per_token(cfg)
    return _roofline(flops, nbytes, batch, gpu)
