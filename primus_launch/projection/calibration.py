"""Constants of the dry-run cost model that no kernel measurement pins down, with their provenance.

Kernel efficiencies, bandwidths and host launch costs are NOT here: they are curves fitted to public
kernel-level measurements (``projection/cost/fitted.py``, written by ``scripts/fit_kernels.py`` from
``projection/data/kernel_evidence.json``).  What remains:

1. FIXED constants, stated and never fitted:

- ``INTRA_NODE_BW_EFFICIENCY`` = 0.80, ``INTER_NODE_BW_EFFICIENCY`` = 0.90, ``HBM_BW_EFFICIENCY`` =
  0.85: link and HBM fractions for GPUs WITHOUT an architecture (user GPU files, the measured local
  spec of ``projection/measure/localhw.py``); GPUs of the database use their architecture's fitted
  curves.  nccl-tests busbw inside a DGX reaches ~80% of NVLink, 400 Gb/s NICs ~90%, STREAM ~85%.
- ``KERNEL_LAUNCH_S`` = 4 us: kernel gap of the alpha-beta defaults (user GPUs) and tests.
- ``GRAD_BUCKET_PARAMS`` = 40M: Megatron DDP default bucket size ``max(40M, 1M * dp)`` params
  (``megatron/core/distributed/distributed_data_parallel_config.py``).
- ``ADAM_BYTES_PER_PARAM`` = 34: the Adam step streams, per (sharded) parameter, fp32 grad 4,
  fp32 master 4+4, exp_avg 4+4, exp_avg_sq 4+4, bf16 model copy 2 (write), and the grad-norm read 4
  (``iteration.optimizer_bytes_per_param`` for precision-aware state dtypes).
- ``CPU_ADAM_BYTES_S`` = 100 GB/s: the host CPU's streaming rate for the offloaded share of the Adam
  step (``--optimizer-cpu-offload``); a stated guess (a two-socket DDR5 server or a Grace CPU streams
  200-500 GB/s at peak; CPU Adam kernels reach a fraction of it).  No public figure to fit.

2. CALIBRATED framework constants, written by ``scripts/calibrate.py`` (do not edit by hand):
fitted on the calibration rows listed in ``CALIBRATION_ROWS`` (every third row, in file order, of
the published runs of ``scripts/validation/runs.json`` that are not NeMo / current-production rows)
minimising the root-mean-square log error of projected vs measured tokens/s/GPU.  Every other row
judges; rows found elsewhere (``scripts/validation/current_runs.json``) never tune anything.

- ``SUSTAINED_CLOCK``: the clock fraction a power-capped SKU sustains under dense GEMMs (the 96 GB /
  500 W H100 of TorchTitan's benchmarks; no kernel figure exists for that SKU);
- ``ASYNC_TP_OVERLAP``: fraction of the GEMM time behind which TorchTitan's async TP hides its
  all-gather / reduce-scatter (``iteration._tp_exposed``); the calibration rows hold TorchTitan's
  vanilla vs async-TP pairs.
"""

from __future__ import annotations

# ----- fixed -----
INTRA_NODE_BW_EFFICIENCY = 0.80
INTER_NODE_BW_EFFICIENCY = 0.90
HBM_BW_EFFICIENCY = 0.85
KERNEL_LAUNCH_S = 4e-6
GRAD_BUCKET_PARAMS = 40_000_000
ADAM_BYTES_PER_PARAM = 34
CPU_ADAM_BYTES_S = 100e9

# ----- calibrated (scripts/calibrate.py writes the block below) -----
# BEGIN CALIBRATED
SUSTAINED_CLOCK = {"h100-sxm-96gb-500w": 0.85}
ASYNC_TP_OVERLAP = 0.6
CALIBRATION_ROWS: list[str] = []
CALIBRATION_SCORE = 0.0  # rms of log(projected/measured) on CALIBRATION_ROWS
# END CALIBRATED


def sustained_clock(gpu: str, spec_value: float) -> float:
    """A user-set ``GPUSpec.sustained_clock_fraction`` (< 1) wins; else the calibrated value."""
    return spec_value if spec_value < 1.0 else SUSTAINED_CLOCK.get(gpu, 1.0)
