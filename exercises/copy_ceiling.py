"""Lesson 01 — measure a ceiling yourself: the copy bandwidth of a GPU.

Before you grade a kernel against a ceiling, measure the ceiling. Write the
benchmark `gpulab probe --bench` runs for copy bandwidth, following the
lesson's rules ("Measuring the ceilings"):

  buffer_bytes(l2, free) -> int
      How many bytes to copy, given the L2's size and the free device memory
      (both in bytes): far more than the L2 holds (at least 8× the L2 and
      1 GiB), and small enough that two buffers and the L2 flush fit (at
      most a quarter of `free`, which wins when the rules conflict).

  copy_bandwidth(gpu, nbytes) -> float
      Copy `nbytes` bytes from one device buffer to another and return the
      bandwidth in bytes per second, counting the bytes read AND written.
      `gpu` has torch.cuda's names:
          gpu.buffer(nbytes)          a device buffer of random bytes (torch uint8)
          dst.copy_(src)              one copy, queued on the device's stream
          gpu.Event(enable_timing=True), e.record(), start.elapsed_time(end) (ms)
          gpu.synchronize()           wait for everything queued
          gpu.flush_l2()              evict the L2 (device work, like a copy)
      The check calls it at three sizes: your buffer_bytes, 256 MiB and
      16 MiB, which the L2 holds unless you flush it. Time through `gpu`
      only: on a CPU it is a model, which torch.cuda and
      triton.testing.do_bench know nothing of.

How it is graded
  * On a GPU, `gpu` is the real one, and gpulab times the same copies itself
    (L2 flushed, warm-up, CUDA events, median): your figures must agree with
    its own within 15%.
  * On a CPU, `gpu` is a model of one, drawn fresh each run around a
    datasheet GPU: its stream is asynchronous (an event's time exists only
    after a synchronize), its L2 serves small buffers copied twice, its first
    copies are slow. Your figures must agree with its ceiling within 4%.
  * buffer_bytes is checked on GPUs from the datasheet table.

Grade: pass or fail, no letter.
"""

import time


def buffer_bytes(l2, free):
    # TODO: big enough that HBM, not the L2, is measured; small enough to fit.
    return 64 << 20


def copy_bandwidth(gpu, nbytes):
    src, dst = gpu.buffer(nbytes), gpu.buffer(nbytes)
    # TODO: this times the host's clock around work the host only queues,
    #       once, cold, and counts each byte once. Use events, warm up,
    #       flush the L2 before each timed copy, repeat, count reads and writes.
    t0 = time.perf_counter()
    dst.copy_(src)
    seconds = time.perf_counter() - t0
    return nbytes / seconds
