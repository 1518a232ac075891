"""The dry-run cost model's evidence-based parts.

- :mod:`.evidence`: the public kernel-level measurements (``projection/data/kernel_evidence.json``);
- :mod:`.kernels`: closed-form kernel time models (GEMM, grouped GEMM, fused attention, streaming);
- :mod:`.fitted`: their constants, fitted to the evidence by ``scripts/fit_kernels.py`` (generated);
- :mod:`.fp8`: FP8 / FP4 recipes (GEMM format, quantisation traffic);
- :mod:`.framework`: the framework profile (fusions, attention kernel, host launch time, CUDA graphs);
- :mod:`.flags`: plan settings not (fully) modelled, returned as warnings;
- :mod:`.explain`: the term-by-term explanation of a projection.
"""
