"""Performance models and measurements: GPU datasheet figures (hardware),
the roofline and its plot, the hardware roadmap, the serving calculator,
units; and the child-process programs that measure (bench, profiling,
compile_info) with the lab's side of profiles (traces).
"""
