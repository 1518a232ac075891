"""Run the real frameworks (megatron-core, torchtitan) where they assume CUDA: CPU shims.

``mcore_cpu`` for megatron-core 0.16.1, ``titan_cpu`` for torchtitan 0.3.0.  Import the module you
need; importing this package imports neither framework.
"""
