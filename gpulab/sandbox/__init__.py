"""The sandbox: the only process that imports and runs the learner's code.

Started by the judge as `python -I -c ... gpulab.sandbox.main`; it confines
itself (gpulab.sandbox.isolation) before the learner's file is read, then
answers the judge's calls (gpulab.wire.protocol). Nothing it sends is a verdict:
the judge checks every output against its own reference.
"""
