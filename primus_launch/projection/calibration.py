"""Constants of the dry-run cost model, with their provenance.

Two kinds:

1. FIXED constants, taken from public measurements and never fitted:

- ``INTRA_NODE_BW_EFFICIENCY`` = 0.80: nccl-tests ``all_reduce_perf`` bus bandwidth inside a DGX
  reaches ~360 GB/s of NVLink-4's 450 GB/s per direction (H100) and ~230 of 300 GB/s (A100):
  NVIDIA DGX H100/A100 NCCL performance figures; RCCL on an MI300X node reports a similar fraction.
- ``INTER_NODE_BW_EFFICIENCY`` = 0.90: 400 Gb/s (50 GB/s) NDR InfiniBand / RoCE NICs deliver
  ~45 GB/s busbw per NIC in multi-node nccl-tests.
- ``HBM_BW_EFFICIENCY`` = 0.85: achievable fraction of datasheet HBM bandwidth for streaming
  kernels (STREAM-like copy on A100/H100 reaches 85-90%).
- ``KERNEL_LAUNCH_S`` = 4 us: minimum duration / launch gap of a kernel in eager PyTorch.
- ``GEMM_K0`` = 32: K at which the main loop reaches half efficiency (two 16-wide k-steps of
  prologue/epilogue per tile), form from the CUTLASS/cuBLAS tile pipeline.
- ``ATTN_S0`` = 128: key length at which a flash-attention tile loop reaches half efficiency (one
  128-wide KV block of fixed per-row work: softmax rescaling, output write).
- ``ATTN_BWD_REL`` = 0.85: FlashAttention-2 backward runs at ~0.8-0.9 of its forward FLOP rate
  (Dao 2023, arXiv 2307.08691, Figs. 5-7).
- ``GRAD_BUCKET_PARAMS`` = 40M: Megatron DDP default bucket size ``max(40M, 1M * dp)`` params
  (``megatron/core/distributed/distributed_data_parallel_config.py``).
- ``ADAM_BYTES_PER_PARAM`` = 34: the Adam step streams, per (sharded) parameter, fp32 grad 4,
  fp32 master 4+4, exp_avg 4+4, exp_avg_sq 4+4, bf16 model copy 2 (write), and the grad-norm read 4.

2. CALIBRATED constants, written by ``scripts/calibrate.py`` (do not edit by hand): fitted on the
calibration rows listed in ``CALIBRATION_ROWS`` (every third row, in file order, of
``scripts/validation/runs.json``: a third of all rows, spread over all sources), minimising the root-mean-square
log error of projected vs measured tokens/s/GPU. All other rows judge.

- ``GEMM_EFF_MAX[arch]``: largest achievable fraction of the datasheet dense peak of a GEMM on
  that architecture (cuBLAS / hipBLASLt at large shapes).
- ``ATTN_EFF_MAX[arch]``: largest achievable fraction of the BF16 peak of the flash-attention
  forward kernel (FlashAttention-2 reaches ~70% on A100 but only ~35-40% on H100, where FA3 /
  cuDNN kernels do better: Shah et al. 2024, arXiv 2407.08608), so it is fitted per architecture.
- ``FP8_GEMM_REL``: FP8 GEMM efficiency relative to BF16 (scaling/cast overhead, lower tensor-core
  occupancy), applied to the FP8 peak.
- ``SUSTAINED_CLOCK``: GPUs whose power cap lowers the sustained clock (``GPUSpec``).
- ``TP_OVERLAP_HIDDEN``: fraction of TP all-gather / reduce-scatter time hidden by Megatron
  ``--tp-comm-overlap`` (TE userbuffers) / torchtitan async-TP (GEMM decomposition); the
  calibration rows include torchtitan's vanilla vs async-TP pairs.
"""

from __future__ import annotations

# ----- fixed -----
INTRA_NODE_BW_EFFICIENCY = 0.80
INTER_NODE_BW_EFFICIENCY = 0.90
HBM_BW_EFFICIENCY = 0.85
KERNEL_LAUNCH_S = 4e-6
GEMM_K0 = 32
ATTN_S0 = 128
ATTN_BWD_REL = 0.85
GRAD_BUCKET_PARAMS = 40_000_000
ADAM_BYTES_PER_PARAM = 34

ARCH_OF_GPU = {
    "a100-sxm-80gb": "ampere", "a100-sxm-40gb": "ampere",
    "h100-sxm": "hopper", "h100-sxm-96gb-500w": "hopper", "h200": "hopper",
    "b200": "blackwell", "mi300x": "cdna3", "mi325x": "cdna3", "mi355x": "cdna4",
}

# ----- calibrated (scripts/calibrate.py writes the block below) -----
# BEGIN CALIBRATED
GEMM_EFF_MAX = {"ampere": 0.7463, "hopper": 0.5918}
GEMM_EFF_DEFAULT = 0.669
ATTN_EFF_MAX = {"ampere": 0.2146, "hopper": 0.2562}
ATTN_EFF_DEFAULT = 0.2354
FP8_GEMM_REL = 1.0
SUSTAINED_CLOCK = {"h100-sxm-96gb-500w": 0.95}
TP_OVERLAP_HIDDEN = 0.1
CALIBRATION_ROWS: list[str] = ['narayanan2021_table1_3.6B', 'narayanan2021_table1_39.1B', 'narayanan2021_table1_310.1B', 'narayanan2021_table2_ptdp_174.6B_384gpu', 'narayanan2021_table2_ptdp_529.6B_560gpu', 'korthikanti2022_22B_sp_selective', 'korthikanti2022_175B_full_recompute', 'korthikanti2022_1T_sp_selective', 'torchtitan_h100_8b_8gpu_FSDP_torchcompile', 'torchtitan_h100_8b_128gpu_FSDP_torchcompile', 'torchtitan_h100_8b_8gpu_fsdp4_cp2_seq65536', 'torchtitan_h100_70b_256gpu_tp', 'torchtitan_h100_405b_512gpu_fsdp8_cp1_seq32768', 'torchtitan_h100_405b_512gpu_fsdp1_cp8_seq262144', 'torchtitan_asynctp_h100_70b_256gpu_float8_tensorwise_vanillatp', 'torchtitan_asynctp_h100_8b_64gpu_bf16_asynctp', 'torchtitan_a100_llama38b_64gpu_bs1_selectivelayer', 'torchtitan_a100_llama213b_64gpu_bs2_none', 'torchtitan_a100_llama270b_64gpu_bs1_selectiveop', 'torchtitan_h200_8b_64gpu_fsdp_float8', 'llmfoundry_h100_80gb_large_mpt70b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt30b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt13b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt7b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt3b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt1b_seq2048_128gpu', 'llmfoundry_h100_80gb_mpt13b_seq2048_64gpu', 'llmfoundry_h100_80gb_mpt13b_seq2048_8gpu', 'llmfoundry_h100_80gb_mpt7b_seq8192_8gpu', 'llmfoundry_h100_80gb_mpt7b_seq1024_8gpu', 'llmfoundry_a100_80gb_mpt30b_seq8192_8gpu', 'llmfoundry_a100_80gb_mpt30b_seq1024_8gpu']
CALIBRATION_SCORE = 0.10018  # rms of log(projected/measured) on CALIBRATION_ROWS
# END CALIBRATED


def gemm_efficiency(gpu: str) -> float:
    """``GEMM_EFF_MAX`` of the GPU's architecture; architectures without calibration data use
    ``GEMM_EFF_DEFAULT`` (the mean of the calibrated architectures)."""
    return GEMM_EFF_MAX.get(ARCH_OF_GPU.get(gpu, ""), GEMM_EFF_DEFAULT)


def attention_efficiency(gpu: str) -> float:
    return ATTN_EFF_MAX.get(ARCH_OF_GPU.get(gpu, ""), ATTN_EFF_DEFAULT)


def sustained_clock(gpu: str, spec_value: float) -> float:
    """A user-set ``GPUSpec.sustained_clock_fraction`` (< 1) wins; else the calibrated value."""
    return spec_value if spec_value < 1.0 else SUSTAINED_CLOCK.get(gpu, 1.0)
