"""Lesson 01 — measure a ceiling yourself: the tensor cores' TFLOP/s.

The copy told you the memory's ceiling; a large bf16 matrix product tells
you the compute's. Write the benchmark behind the figure, following the
lesson's rules ("Measuring the ceilings"):

  matmul_tflops(gpu, m, n, k) -> float
      Multiply a random bf16 m×k matrix by a random k×n one on the device and
      return the rate in TFLOP/s (10¹² floating-point operations a second).
      Each of the m·n outputs takes k multiply-adds, and a multiply-add is
      two FLOPs: 2·m·n·k FLOPs a product.
      `gpu` has torch.cuda's names and two of torch's:
          gpu.randn(rows, cols)   a bf16 matrix of random values on the device
          a @ b                   one product, queued on the device's stream
          gpu.Event(enable_timing=True), e.record(), start.elapsed_time(end) (ms)
          gpu.synchronize()       wait for everything queued
          gpu.flush_l2()          evict the L2 (device work, like a product)
      The check calls it at 8192³, 4096³ and m, n, k = 8192, 2048, 4096.
      Time through `gpu` only: on a CPU it is a model, which torch.cuda and
      triton.testing.do_bench know nothing of.

How it is graded
  * On a GPU, `gpu` is the real one, and gpulab times the same products
    itself (random data, warm-up until the clock settles, CUDA events,
    median): your figures must agree with its own within 15%, and none may
    pass the datasheet's dense bf16 roof.
  * On a CPU, `gpu` is a model of one, drawn fresh each run around a
    datasheet GPU: its stream is asynchronous, its first product is slow,
    and its clock starts high and falls under a sustained load, as a real
    GPU's does when it reaches its power limit. Your figures must agree
    with its sustained rate within 4%.

Grade: pass or fail, no letter.
"""

import time


def matmul_tflops(gpu, m, n, k):
    a, b = gpu.randn(m, k), gpu.randn(k, n)
    # TODO: this times the host's clock around a product the host only
    #       queues, once, cold, and counts each multiply-add as one FLOP.
    #       Warm up by time, time with events read after a synchronize,
    #       repeat and take the median, count 2·m·n·k.
    t0 = time.perf_counter()
    a @ b
    seconds = time.perf_counter() - t0
    return m * n * k / seconds / 1e12
