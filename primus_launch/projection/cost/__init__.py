"""The dry-run cost model's evidence-based parts.

- :mod:`.evidence`: the public kernel-level measurements (``projection/data/kernel_evidence.json``);
- :mod:`.kernels`: closed-form kernel time models (GEMM, grouped GEMM, fused attention, streaming);
- :mod:`.fitted`: their constants, fitted to the evidence by ``scripts/fit_kernels.py`` (generated);
- :mod:`.fp8`: FP8 / FP4 recipes (GEMM format, quantisation traffic);
- :mod:`.framework`: the framework profile (fusions, attention kernel, host launch time, CUDA graphs);
- :mod:`.collectives` (NCCL / RCCL times on the hardware's fabric), :mod:`.layer_collectives` (the calls of
  one layer), :mod:`.tp_comm`, :mod:`.cp_comm`, :mod:`.ep_comm` (+ :mod:`.ep_overlap`, :mod:`.moe_dispatch`),
  :mod:`.fsdp`, :mod:`.dp_comm`: each parallelism's communication, raw and left exposed;
- :mod:`.recompute`, :mod:`.offload`, :mod:`.optimizer`: the other per-iteration terms the projection's
  steps (:mod:`primus_launch.projection.steps`) add;
- :mod:`.flags`: plan settings not (fully) modelled, returned as warnings.

The term-by-term explanation of a projection, which reads these and the steps' results, is
:mod:`primus_launch.projection.explain` (a level up: cost models never import the steps built on them).
"""
