"""Constants of the dry-run cost model that no kernel measurement pins down, with their provenance.

Kernel efficiencies, bandwidths and host launch costs are NOT here: they are curves fitted to public
kernel-level measurements (``projection/cost/fitted/``, written by ``scripts/fit_kernels.py`` from
``projection/data/kernel_evidence.json``).  What remains:

1. FIXED constants, stated and never fitted:

- ``INTRA_NODE_BW_EFFICIENCY`` = 0.80, ``INTER_NODE_BW_EFFICIENCY`` = 0.90, ``HBM_BW_EFFICIENCY`` =
  0.85: link and HBM fractions for GPUs WITHOUT an architecture (user GPU files, the measured local
  spec of ``scripts/validation/gloo_lab/localhw.py``); GPUs of the database use their architecture's fitted
  curves.  nccl-tests busbw inside a DGX reaches ~80% of NVLink, 400 Gb/s NICs ~90%, STREAM ~85%.
- ``KERNEL_LAUNCH_S`` = 4 us: kernel gap of the alpha-beta defaults (user GPUs) and tests.
- ``GRAD_BUCKET_PARAMS`` = 40M: Megatron DDP default bucket size ``max(40M, 1M * dp)`` params
  (``megatron/core/distributed/distributed_data_parallel_config.py``).
- ``ADAM_BYTES_PER_PARAM`` = 34: the Adam step streams, per (sharded) parameter, fp32 grad 4,
  fp32 master 4+4, exp_avg 4+4, exp_avg_sq 4+4, bf16 model copy 2 (write), and the grad-norm read 4
  (``cost/optimizer.py`` ``optimizer_bytes_per_param`` for precision-aware state dtypes, ``--clip-grad 0`` and
  Megatron's separate main-to-model copy: 38 without the precision-aware optimizer).
- ``POWER_CAP_EXPONENT`` = 0.94: tensor throughput of a GPU held below its rated power by a board
  power cap (``Cluster.power_limit_w`` / ``GPUSpec.power_limit_w``) scales as ``(cap / tdp) **
  0.94`` (:func:`power_cap_factor`): in the power-bound regime the clock falls until the power fits,
  and energy per FLOP changes little, so throughput is close to proportional to power.  Two public
  GEMM measurements at a known cap, both on the same library (cuBLAS), give the exponent: a GB300
  capped at 500 W of its rated 1400 W ran cuBLAS GEMMs at ~617 TF/s against ~1600-2174 at 1400 W
  (facebookexperimental/triton PR 2023; 617 / 1887 = 0.327 at 0.357 of the power: 1.09, range
  0.93-1.22; records triton-gb300-gemm-*), and FBGEMM's FP8 GEMMs ran ~2.0x H100 on a B200 at 750 W
  and ~2.8x on a GB200 at its rated 1200 W (pytorch/FBGEMM PR 4172): per datasheet peak (2.25 vs 2.5
  PF) 0.889 / 1.12 = 0.794 at 0.75 of the B200's 1000 W: 0.80 (records fbgemm-*).  0.94 is their
  mean.  The cap scales only compute-bound kernels (as ``SUSTAINED_CLOCK``), not HBM streaming:
  a power cap lowers the SM clock and leaves the memory clock.
- Power headroom (:func:`power_headroom`, no new constant): a power-limited GPU whose rated board
  power ``tdp_watts`` exceeds the power ``peak_power_w`` at which its datasheet dense BF16 / FP8 peaks are
  stated sustains ``min(1 / SUSTAINED_CLOCK, (tdp_watts / peak_power_w) ** POWER_CAP_EXPONENT)`` times
  the throughput of a GPU at ``peak_power_w`` in a power-bound training step: the same law as a cap
  below the rated power, read the other way (throughput ~ power in the power-bound regime), and never
  above the clock the kernel benchmarks ran at (the ceiling: ``SUSTAINED_CLOCK x headroom <= 1``).
  Blackwell Ultra keeps Blackwell's dense BF16 / FP8 peaks (B300 2.25 / 4.5 PF as B200 at 1,000 W,
  GB300 2.5 / 5 PF as GB200 at 1,200 W: NVIDIA DGX B300 / GB300 NVL72 datasheets; the 1.5x is NVFP4)
  but is rated 1,100 W (HGX B300) and 1,400 W (GB300): x 1.094 and x 1.156.  Short kernel benchmarks
  do not see it (MAMF BF16 B300 1769 vs B200 1745 TF/s: they run at the clock ceiling, not the power
  bound); a sustained GB300 cuBLAS GEMM at 1,400 W reached 1600-2174 TF/s (facebookexperimental/triton
  PR 2023, record triton-gb300-gemm-1400w) against GB200's best MAMF 1822 TF/s (mamf-bf16-gb200): 0.88 to
  1.19 x, and Megatron-Bridge 26.04 measures GB300 / GB200 ~1.2x on its dense FP8 pairs.
- ``CPU_ADAM_BYTES_S`` = 100 GB/s: the host CPU's streaming rate for the offloaded share of the Adam
  step (``--optimizer-cpu-offload``); a stated guess (a two-socket DDR5 server or a Grace CPU streams
  200-500 GB/s at peak; CPU Adam kernels reach a fraction of it).  No public figure to fit.

2. CALIBRATED framework constants, written by ``scripts/calibrate.py`` (do not edit by hand):
fitted on the calibration rows listed in ``CALIBRATION_ROWS`` (every third row, in file order, of
the published runs of ``scripts/validation/runs.json`` that are not NeMo / current-production rows)
minimising the root-mean-square log error of projected vs measured tokens/s/GPU.  Every other row
judges; rows found elsewhere (``scripts/validation/current_runs.json``) never tune anything.

- ``FRAMEWORK_EFF[framework]``: the fraction of the kernel benchmarks' throughput a framework's
  kernels reach inside a training step (``megatron``: Megatron-Core + TE; ``torchtitan``: PyTorch-
  native FSDP / TorchTitan): sustained clocks under a whole step's power draw, kernels chosen by
  library heuristics for the step's exact shapes, memory-allocator and stream synchronisation, NCCL
  kernels sharing the SMs with overlapped communication.  No kernel-level figure measures it: it is
  the framework's own overhead, divided into every GPU kernel time (``layer_ops.LayerOps``: ``slow = 1 / insitu``);
- ``SUSTAINED_CLOCK["power_limited"]``: the clock fraction a power-limited GPU sustains through whole
  training steps relative to the kernel benchmarks its curves stand on (a step draws power for HBM,
  NVLink and NIC traffic and its element-wise kernels next to the GEMMs, so the power manager holds
  the SM clock below the one an isolated benchmark kernel runs at).  ONE value for every GPU
  architecture whose dense tensor throughput is bounded by its power limit (``POWER_LIMITED_ARCHS``:
  Hopper, Blackwell, Blackwell Ultra, CDNA3, CDNA4): the kernel records show it there -- H100 square
  BF16 GEMMs fall from 798 to 720 TF/s between 8k and 10k (zzc-h100-*), B200 cuBLASLt from 1553 to
  1461 TF/s between 4k and 8k (hk-b200-bf16-*), MI300X runs its MAF GEMM at a median 1207 MHz of a
  2100 MHz boost (amd-maf-mi300x-bf16), and FBGEMM attributes GB200's FP8 GEMM lead over B200 to its
  1200 W limit (fbgemm-*).  A100 (Ampere) records show no such fall (Azure cuBLASLt after 10,000
  warm-up iterations: 254-257 TF/s at 8k-16k, azure-a100-*; MAMF 271): Ampere keeps 1.0.  Calibrated
  on the Hopper calibration rows (the only power-limited parts with calibration rows) and applied to
  every power-limited architecture, so Blackwell and CDNA parts, which have no calibration rows, run
  at the same fraction of their benchmarks instead of at 1.0.  A GPU file's
  ``sustained_clock_fraction`` below 1 (a user's power cap) replaces it;
- ``ASYNC_TP_OVERLAP``: fraction of the GEMM time behind which TorchTitan's async TP hides its
  all-gather / reduce-scatter (``cost/tp_comm.py`` ``tp_exposed``); the calibration rows hold TorchTitan's
  vanilla vs async-TP pairs.
- ``SOURCE_STEP_OVERHEAD_S[machine]``: seconds per iteration that a validation source's machine spent outside
  everything the model prices (not scaled by the clock: host stalls, data loading, synchronisation of that
  software stack), fitted in closed form on ONE stated row of the source (``POWER_LIMIT_ROWS[machine]``: that
  row is a calibration row, never judged; the source's other rows judge) as ``t x (projected / measured - 1)``
  (``t`` the projected iteration time).  ``scripts/validate.py`` adds it to the projected iteration time of
  every row of that source (``hardware.power_limit_machine``); user projections never see it.
  ``torchao_b200``: pytorch/ao's MX-formats README table of Llama-3-8B on 8 "power limited" B200s
  (torchtitan @6fc499f6), fitted on its BF16 row, at the cap ``SOURCE_POWER_LIMIT_W`` (fixed, below).
  A fitted power cap alone (463.7 W, the previous calibration) left the float8 / MXFP8 rows 12-28% fast:
  a cap scales the GEMMs FP8 shortens, so it keeps the model's FP8 gain (1.41x) where the machine measured
  1.04-1.25x; a per-step time the GEMMs do not shorten is what those ratios say (module tests in
  tests/test_power_cap.py).
- ``ROCM_LEGACY_GEMM_HOST_S``: host seconds per expert GEMM of Megatron's legacy ``GroupedMLP`` on ROCm (the
  ``grouped_gemm`` library, caaatch22/grouped_gemm branch ``rocm``, one ``hipblasGemmEx`` per local expert, 6 per
  expert, layer and micro-batch: ``cost/moe_host.py`` item 2), applied only where ``training.moe_expert_gemm ==
  "legacy"`` on CDNA4 (:func:`moe_host.expert_gemm_host_s`: the fitted row's architecture, where rocBLAS routes
  the call to hipBLASLt by default); every other per-expert loop keeps
  ``moe_host.TE_GEMM_HOST_S``.  No public measurement times this path (hipBLAS -> rocBLAS ``rocblas_gemm_ex`` ->
  Tensile or hipBLASLt, per call); the loop never waits on the GPU, so its cost is a host floor the GPU hides under
  at large micro-batches.  Fitted by bisection on ONE stated row, ``ROCM_LEGACY_GEMM_ROW`` (AMD's MoE-package blog,
  DeepSeek-V2-Lite on 8 MI355X at micro-batch 1: a calibration row, never judged); the other 14 MI355X rows of that
  blog (Lite micro-batch 2-14 and its ladder, the six DeepSeek-V2 bars) judge it
  (``scripts/validation/README.md``, Known gaps, AMD).
- ``MAMBA_SSD_TRAIN_FACTOR``: the time mamba_ssm's Triton SSD scan (``mamba_chunk_scan_combined``'s five forward and
  its backward kernels) takes in a Megatron training step over its price from the one public kernel record, the
  H100 inference forward of vLLM PR #27299 scaled by ``cost/mamba.py`` (head and state size, HBM bandwidth, the
  structural backward 3x).  What no public measurement pins down: the SSD at training shapes (chunk 128 where the
  record ran 256, 8 B/C groups where it ran 1, ``z`` / ``D`` in the scan) and its backward as a number (searched:
  scripts/validation/README.md, Known gaps, ssd14 / ssd15).  The decomposition behind it (``scripts/hybrid_probe.py
  --decompose``): on all 19 Nemotron 3 rows the missing time is GPU work (x86 B200 / B300 and Grace GB200 / GB300 rows
  of one table miss the same ns per Mamba token-head; the H100's is 2.0x the Blackwell one, about the HBM ratio) and
  it is the same per Mamba token-head on Nano (64 heads) and Super (128 heads): ~3.4 ns on GB300, 7.0-8.2 on H100,
  ~2.8-3.7x the SSD price.  Fitted by bisection (``scripts/calibrate.py --mamba-ssd-only``) on the two H100 rows of
  Megatron-Bridge's Nemotron 3 Nano table (``MAMBA_SSD_ROWS``, 26.04.01 and 26.06: the record's GPU, so the factor is
  not entangled with the HBM scaling to Blackwell), to a zero mean log error; calibration rows, never judged.  The
  other 17 hybrid rows (Nano and Super on B200 / GB200 / B300 / GB300, three table releases) judge it.

3. STATED source facts (fixed, not fitted):

- ``SOURCE_POWER_LIMIT_W[machine]``: the board power cap of a validation source's machines where the source
  says they were power limited but not to what, from the source organisation's stated convention
  (``cluster.power_limit_w`` of every row of that source, set by ``scripts/validation/build_runs.py``).
  ``torchao_b200``: 750 W, Meta's "rated power" for its B200s in its benchmark scripts (record
  ``meta-b200-power-limit-750w``: facebookexperimental/triton PR 2023 'B200 -> 750', FBGEMM PR 4172 '750 W
  reached on that B200 system', pytorch/ao PR 3566 '750W limited device').
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
POWER_CAP_EXPONENT = 0.94
# the one row of each power-limited validation machine its unstated per-step time is fitted on (module doc, item 2)
# and the machine's cap, stated by the source's organisation (module doc, item 3)
POWER_LIMIT_ROWS = {"torchao_b200": "torchao_b200_llama3_8b_8gpu_bf16"}
# the one row the ROCm legacy grouped_gemm per-GEMM host cost is fitted on (module doc, item 2)
ROCM_LEGACY_GEMM_ROW = "primus_moepkg_mi355x_deepseek_v2_lite_mbs1_baseline_8gpu"
# the rows the Mamba-2 SSD training factor is fitted on (module doc, item 2): the two H100 rows of Megatron-Bridge's
# Nemotron 3 Nano table (26.04.01, 26.06), the GPU of the SSD forward record; every other hybrid row judges it
MAMBA_SSD_ROWS = ("mbridge260401_h100_fp8_cs_nemotron3_nano_16gpu", "mbridge2606_h100_fp8_cs_nemotron3_nano_16gpu")
SOURCE_POWER_LIMIT_W: dict[str, float] = {"torchao_b200": 750.0}

# ----- calibrated (scripts/calibrate.py writes the block below) -----
# BEGIN CALIBRATED
FRAMEWORK_EFF = {"megatron": 0.9, "torchtitan": 0.8073}
SUSTAINED_CLOCK = {"power_limited": 0.8735}
ASYNC_TP_OVERLAP = 0.0502
CALIBRATION_ROWS: list[str] = ['narayanan2021_table1_3.6B', 'narayanan2021_table1_39.1B', 'narayanan2021_table1_310.1B', 'narayanan2021_table2_ptdp_174.6B_384gpu', 'narayanan2021_table2_ptdp_529.6B_560gpu', 'korthikanti2022_22B_sp_selective', 'korthikanti2022_175B_full_recompute', 'korthikanti2022_1T_sp_selective', 'torchtitan_h100_8b_8gpu_FSDP_torchcompile', 'torchtitan_h100_8b_128gpu_FSDP_torchcompile', 'torchtitan_h100_8b_8gpu_fsdp4_cp2_seq65536', 'torchtitan_h100_70b_256gpu_tp', 'torchtitan_h100_405b_512gpu_fsdp8_cp1_seq32768', 'torchtitan_h100_405b_512gpu_fsdp1_cp8_seq262144', 'torchtitan_asynctp_h100_70b_256gpu_float8_tensorwise_vanillatp', 'torchtitan_asynctp_h100_8b_64gpu_bf16_asynctp', 'torchtitan_a100_llama38b_64gpu_bs1_selectivelayer', 'torchtitan_a100_llama213b_64gpu_bs2_none', 'torchtitan_a100_llama270b_64gpu_bs1_selectiveop', 'torchtitan_h200_8b_64gpu_fsdp_float8', 'llmfoundry_h100_80gb_large_mpt70b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt30b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt13b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt7b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt3b_seq2048_128gpu', 'llmfoundry_h100_80gb_large_mpt1b_seq2048_128gpu', 'llmfoundry_h100_80gb_mpt13b_seq2048_64gpu', 'llmfoundry_h100_80gb_mpt13b_seq2048_8gpu', 'llmfoundry_h100_80gb_mpt7b_seq8192_8gpu', 'llmfoundry_h100_80gb_mpt7b_seq1024_8gpu', 'llmfoundry_a100_80gb_mpt30b_seq8192_8gpu', 'llmfoundry_a100_80gb_mpt30b_seq1024_8gpu']
CALIBRATION_SCORE = 0.08626  # rms of log(projected/measured) on CALIBRATION_ROWS
SOURCE_STEP_OVERHEAD_S: dict[str, float] = {'torchao_b200': 0.3346}
ROCM_LEGACY_GEMM_HOST_S = 0.0001487  # s per expert GEMM, fitted on ROCM_LEGACY_GEMM_ROW
MAMBA_SSD_TRAIN_FACTOR = 3.5534  # SSD training time / its H100-record price, fitted on MAMBA_SSD_ROWS
# END CALIBRATED


def framework_eff(framework: str) -> float:
    """``FRAMEWORK_EFF[framework]`` (module doc: the fraction of the kernel benchmarks' throughput the
    framework's kernels reach inside a training step; fitted: ``FRAMEWORK_EFF`` on
    :data:`CALIBRATION_ROWS` by ``scripts/calibrate.py``), 1.0 for a framework without one."""
    return FRAMEWORK_EFF.get(framework, 1.0)


# architectures whose dense tensor throughput is bounded by the power limit (module doc)
POWER_LIMITED_ARCHS = ("hopper", "blackwell", "blackwell_ultra", "cdna3", "cdna4")


def power_cap_factor(power_limit_w: float | None, tdp_watts: float | None) -> float:
    """Throughput factor of a board power cap below the rated power (module doc, ``POWER_CAP_EXPONENT``):
    ``min(1, (power_limit_w / tdp_watts) ** POWER_CAP_EXPONENT)``; 1 without a cap or a rated power."""
    if not power_limit_w or not tdp_watts or power_limit_w >= tdp_watts:
        return 1.0
    return (power_limit_w / tdp_watts) ** POWER_CAP_EXPONENT


def power_headroom(tdp_watts: float | None, peak_power_w: float | None, arch: str = "") -> float:
    """Throughput factor of a power-limited GPU rated above the power its datasheet peaks are stated at
    (module doc, "Power headroom"): ``(tdp_watts / peak_power_w) ** POWER_CAP_EXPONENT`` for
    ``POWER_LIMITED_ARCHS`` when ``tdp_watts > peak_power_w``; else 1.  The ceiling is applied by
    :func:`compute_clock`."""
    if arch not in POWER_LIMITED_ARCHS or not tdp_watts or not peak_power_w or tdp_watts <= peak_power_w:
        return 1.0
    return (tdp_watts / peak_power_w) ** POWER_CAP_EXPONENT


def compute_clock(spec_value: float, arch: str, tdp_watts: float | None, peak_power_w: float | None,
                  power_limit_w: float | None) -> float:
    """Fraction of the kernel benchmarks' throughput compute-bound kernels reach in a training step:
    ``min(1, sustained_clock x power_headroom x power_cap_factor)``: the cap scales the power the step
    runs at before the kernel benchmarks' ceiling, so a GB300 capped at the 1,200 W its peaks are stated
    at sustains what a GB200 does (headroom x cap = (cap / stated power) ** POWER_CAP_EXPONENT); a user-set
    ``sustained_clock_fraction`` < 1 is taken as it stands, without headroom, times the cap factor."""
    clk = sustained_clock("", spec_value, arch)
    cap = power_cap_factor(power_limit_w, tdp_watts)
    if spec_value >= 1.0:
        return min(1.0, clk * power_headroom(tdp_watts, peak_power_w, arch) * cap)
    return clk * cap


def sustained_clock(gpu: str, spec_value: float, arch: str = "") -> float:
    """Fraction of the kernel benchmarks' clock a GPU sustains through training steps (module doc):
    a user-set ``GPUSpec.sustained_clock_fraction`` (< 1) wins; else ``SUSTAINED_CLOCK["power_limited"]``
    for every architecture of ``POWER_LIMITED_ARCHS``; else 1 (Ampere, GPUs without an architecture)."""
    if spec_value < 1.0:
        return spec_value
    if arch in POWER_LIMITED_ARCHS:
        return SUSTAINED_CLOCK.get("power_limited", 1.0)
    return 1.0
