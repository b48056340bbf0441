"""The messages between gpulab's processes, as data: the status words, the
framing, the lab<->judge events and result, the judge<->sandbox frames, the
replay's compiled kernels. Standard library only: every process imports it."""
