"""What a GPU is and can do, on the lab's side: datasheet figures (hardware),
the roofline and its plot, the hardware roadmap, the serving calculator, the
cost model and load map, units; the probe (NVML), the measured ceilings and
the GPU lock. No heavy imports: what runs torch or triton is gpulab.measure.
"""
