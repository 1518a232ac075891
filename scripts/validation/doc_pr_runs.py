"""Held-out speed rows of round thirteen (runs13, 2026-12-07; issue 28): three sources no speed row had used.

1. **Megatron-LM ``docs/discussions/deepseek-v3-gb200-optimization``** (PR #2059, 7fec52c213 / 402bc50b1c of
   2025-10-30, on the ``26.04-alpha`` and ``core_dev_r0.16.0`` branches; https://github.com/NVIDIA/Megatron-LM/tree/
   26.04-alpha/docs/discussions/deepseek-v3-gb200-optimization): DeepSeek-V3 (no MTP) in MXFP8 on 256 GB200 NVL72,
   TP 1, PP 8 with the layout ``Et|(tt|)*30L`` (32 chunks: VPP 4), EP 32, MBS 1, GBS 2048, sequence 4096.
   ``deepseek-v3-gb200-optimization.md`` section 3's table gives TFLOP/s per GPU after each optimisation;
   ``deepseek-v3-gb200-reproduce-guide.md`` gives the command of the last row (970.01 TFLOP/s: HybridEP 32 SMs,
   TE-scoped CUDA graphs of attn / moe_router / moe_preprocess, selective recompute of ``moe_act`` and ``mlp``,
   router / permute / cross-entropy fusions, BF16 Adam moments, MXFP8 parameter gather).  The baseline row (494.46:
   NCCL all-to-all dispatcher, recompute of ``mlp`` and the MLA up projection, no CUDA graphs, no router fusion) is
   described in the article's section 1 prose; its flags are the guide's with those differences.  The rows between
   are kernel-level steps (fused scaling-factor allocation, CPU-side work, PDL, cuDNN norm fusion) that no plan field
   distinguishes: not rows.  tokens/s/GPU = TFLOP/s / Megatron-LM's own ``num_floating_point_operations`` per token
   of the command's model (no MTP: 249.812 GFLOP at 4,096; ``current_runs_flops.flops_per_token``).
2. **pytorch/torchtitan squash-merged PR descriptions with a logged ``tps``** (``git log main -E --grep='tps: *[0-9]'``
   in the torchtitan mirror: 47 commits; the ones with a preset, the run's flags, a device and a non-debug model
   taken): PR #2107 (36a4b6942, 'Integrate DeepEP to torchtitan'): DeepSeek-V3 671B on 512 H100 80GB, FSDP 64, PP 8
   Interleaved1F1B, EP 32, local batch 16, seq 4096, full AC, compile of model and loss, forced balanced routing --
   DeepEP 579 tps, the standard all-to-all 346; PR #1690 (d66b72a6a, '[Qwen3] Add 32b training configs'): Qwen3 32B
   on 8-64 H100 96GB with ``qwen3_32b.toml`` at different FSDP / TP degrees and local batches (8 rows that ran).  The
   job tables are the memory cases' (``build_memory_cases._DSV3_671`` / ``_Q32``, rounds 36 and 14: those rounds
   judged these runs' logged memory peaks, never their speed), so each row carries ``memory_not_judged`` naming its
   memory case.  Read and not taken: #3659 (the device's logged total, 276.6 GiB, is no GPU of the hardware DB; a
   'wp' wrapper and the PR's own kernels), #1610 / #1672 (DeepSeek-V3 16B, 10-step runs on a real router, logged
   during warm-up), #1902 / #2564 / #3558 / #3935 / #3934 / #3177 / #3007 (debug models, 1-3 GPUs), #2679 (HF
   modelling backend), #833 / #812 (Llama 3 8B float8: 5- and 10-step runs, logged in warm-up), #2389 (an unnamed
   MoE config on 8 B200).  Also taken: PR #808 (069bae286) and #820 (88247277c): Llama 3 8B on 8 H100 96GB,
   ``llama3_8b.toml`` of 2025-01 (local batch 1, seq 8192, FSDP 8, per-op SAC, model compiled) -- BF16 5,760 tps,
   float8 rowwise 6,468, float8 tensorwise with FP8 all-gather 7,186, float8 tensorwise 6,871 (memory cases
   ``titan_pr808_*`` / ``titan_pr820_*``, round 11).
3. **Megatron-Bridge's skills and model verification card** (``bridge_skill_rows``): Qwen3-30B-A3B BF16 on 16 H100,
   EP 16, HybridEP, TE graphs of moe_router / moe_preprocess -- the comm-overlap skill's controlled pair (7ded17dae,
   PR #5094: EP overlap off 24.714 s, on 20.992 s per 1024 x 4096-token step) and the qwen3-30b-a3b card's tuned run
   (d398aaca2, run at 3a9559f01: + permute fusion into HybridEP, 64-token combine chunks, 20.147 s).
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from build_memory_cases import _DSV3_671, _PR808_JOB, _Q32, _titan  # noqa: E402  (the same runs' job tables)
from current_runs_flops import DSV3, flops_per_token  # noqa: E402

MLM_DOC = ("NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md "
           "(PR #2059, 7fec52c213 / 402bc50b1c, 2025-10-30; branch 26.04-alpha), section 3 table row '{row}'")
MLM_GUIDE = ("NVIDIA/Megatron-LM docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-reproduce-guide.md "
             "(same PR): launch script, environment variables, Megatron-LM dev @effebd81f4, TE 2.9-based hxbai "
             "@7dd3914726, cuDNN 9.14, DeepEP hybrid-ep @3f601f7ac1, nvcr.io/nvidia/pytorch:25.09-py3")
CONV_MLM_DOC = ("Megatron-LM dev megatron/training/training.py num_floating_point_operations (the 'TFLOP/s/GPU' "
                "Megatron logs with --log-throughput): model FLOPs, fwd+bwd = 3x fwd, no recompute, causal attention, "
                "top-k active routed experts + shared expert, MLA term by term, logits with the padded vocab; the "
                "command has no MTP")

DSV3_ARCH = dict(num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, num_query_groups=None,
                 vocab_size=129280, seq_length=4096, num_experts=256, moe_topk=8, moe_ffn_hidden_size=2048,
                 moe_shared_expert_intermediate_size=2048, moe_first_dense_layers=3, moe_router_num_groups=8,
                 moe_router_group_topk=4, multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512,
                 qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128, mtp_num_layers=None)
GB200_HW = dict(gpu="GB200 NVL72 (DGX-GB200)", num_gpus=256, gpus_per_node=4,
                interconnect="GB200 NVL72: 4 GPUs per compute tray, 72 GPUs in one NVLink domain; the guide schedules "
                             "every 32 GPUs (8 trays) in one rack ('--segment 8'), so each EP 32 group is inside one "
                             "NVLink domain", gpu_family="blackwell", plan_gpu=None)

# The guide's launch script (deepseek-v3-gb200-reproduce-guide.md, 'Launch script'), minus I/O, logging, LR-schedule,
# checkpoint and tokenizer / data arguments (no effect on step time), plus --vocab-size (the tokenizer unsloth/DeepSeek-V3
# padded by --make-vocab-size-divisible-by 3232: 129,280, the model's vocab_size) and --mock-data for the data path.
_GUIDE_MODEL = [
    "--num-layers 61", "--hidden-size 7168", "--ffn-hidden-size 18432", "--num-attention-heads 128", "--kv-channels 128",
    "--max-position-embeddings 4096", "--position-embedding-type rope", "--rotary-base 10000",
    "--make-vocab-size-divisible-by 3232", "--normalization RMSNorm", "--norm-epsilon 1e-6", "--swiglu",
    "--untie-embeddings-and-output-weights", "--multi-latent-attention", "--attention-dropout 0.0",
    "--hidden-dropout 0.0", "--qk-layernorm", "--num-experts 256", "--moe-layer-freq ([0]*3+[1]*58)",
    "--moe-ffn-hidden-size 2048", "--moe-shared-expert-intermediate-size 2048",
    "--moe-router-load-balancing-type seq_aux_loss", "--moe-router-topk 8", "--moe-grouped-gemm",
    "--moe-aux-loss-coeff 1e-4", "--moe-router-group-topk 4", "--moe-router-num-groups 8", "--moe-router-pre-softmax",
    "--moe-router-padding-for-quantization", "--moe-router-topk-scaling-factor 2.5", "--moe-router-score-function sigmoid",
    "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate 1e-3", "--moe-router-dtype fp32",
    "--moe-permute-fusion", "--q-lora-rank 1536", "--kv-lora-rank 512", "--qk-head-dim 128", "--qk-pos-emb-head-dim 64",
    "--v-head-dim 128", "--rotary-scaling-factor 40", "--mscale 1.0", "--mscale-all-dim 1.0", "--vocab-size 129280",
    "--mock-data",
]
_GUIDE_RUN = [
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 8", "--expert-model-parallel-size 32",
    "--context-parallel-size 1", "--expert-tensor-parallel-size 1", "--use-distributed-optimizer",
    "--overlap-grad-reduce", "--overlap-param-gather", "--use-mcore-models", "--sequence-parallel", "--use-flash-attn",
    "--disable-bias-linear", "--micro-batch-size 1", "--global-batch-size 2048", "--no-check-for-nan-in-loss-and-grad",
    "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te", "--manual-gc", "--manual-gc-interval 10",
    "--enable-experimental", "--transformer-impl transformer_engine", "--seq-length 4096",
    "--no-create-attention-mask-in-dataloader", "--bf16", "--pipeline-model-parallel-layout Et|(tt|)*30L",
    "--moe-router-force-load-balancing", "--fp8-recipe mxfp8", "--fp8-format e4m3", "--fp8-param-gather",
    "--reuse-grad-buf-for-mxfp8-param-ag", "--use-precision-aware-optimizer", "--main-grads-dtype fp32",
    "--main-params-dtype fp32", "--exp-avg-dtype bf16", "--exp-avg-sq-dtype bf16",
]
_GUIDE_FINAL = [
    "--moe-router-fusion", "--recompute-granularity selective", "--recompute-modules moe_act mlp",
    "--cuda-graph-impl transformer_engine", "--cuda-graph-scope attn moe_router moe_preprocess", "--te-rng-tracker",
    "--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend hybridep", "--moe-hybridep-num-sms 32",
]
# Section 1: 'TP1/PP8/VPP4/EP32/MBS1/GBS2048 ... recomputation of the MLP part of the dense layers ... and the MLA up
# projection (--recompute-modules mlp up_proj) ... layout Et|(tt|)*30L ... AlltoAll token dispatcher (NCCL backend)
# ... BF16 optimizer states'; router fusion and CUDA graphs came later (section 3's table).
_BASELINE = [
    "--recompute-granularity selective", "--recompute-modules mlp mla_up_proj", "--moe-token-dispatcher-type alltoall",
]
_GUIDE_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NVTE_FWD_LAYERNORM_SM_MARGIN": "0", "NVTE_BWD_LAYERNORM_SM_MARGIN": "0",
              "NVLINK_DOMAIN_SIZE": "72", "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "1",
              "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "NCCL_NVLS_ENABLE": "0", "NVTE_FUSED_ATTN": "1",
              "NVTE_NORM_FWD_USE_CUDNN": "1", "NVTE_NORM_BWD_USE_CUDNN": "1", "NCCL_GRAPH_REGISTER": "0"}


def mlm_dsv3_gb200_doc_rows() -> list[dict]:
    """The DeepSeek-V3 GB200 optimisation article's first and last rows (its command and its baseline)."""
    fpt = flops_per_token(s=4096, **DSV3)
    rows = []
    for key, row, tflops, extra, conf, disp, graph, rec in [
        ("final", "HybridEP | Fuse quantization to normalization (cuDNN 9.14)", 970.01, _GUIDE_FINAL, "high",
         "flex/hybridep", "transformer_engine scope=['attn', 'moe_router', 'moe_preprocess']",
         "selective (modules: moe_act, mlp)"),
        ("baseline", "AlltoAll | Baseline", 494.46, _BASELINE, "low", "alltoall", "none",
         "selective (modules: mlp, mla_up_proj)"),
    ]:
        tok = tflops * 1e12 / fpt
        unknown = [
            "tokens/s/GPU is derived from the published TFLOP/s/GPU with Megatron-LM's own FLOP formula (derived_fields); "
            "the statistic (median / mean, iterations) is not stated",
            "routing forced balanced (--moe-router-force-load-balancing): the throughput of uniform expert load",
            "Megatron-LM commit of the measurement not stated: the guide names dev @effebd81f4 (after PR 1917)",
            "bindpcie NUMA binding and CPU boost clocks (the article: +70.6 TFLOP/s from binding): environment, no plan "
            "field",
            "HybridEP's combine chunk: the guide's DeepEP hybrid-ep @3f601f7ac1 (2025-10) predates DeepEP a0d27f1 "
            "(default 128 tokens before it); the reader takes the current default (64) for a pin it does not list",
        ]
        if key == "baseline":
            unknown += [
                "the baseline's flags are the article's prose (section 1), not a command: the guide's command with the "
                "NCCL all-to-all dispatcher, recompute of mlp + the MLA up projection ('up_proj' read as mla_up_proj), "
                "no CUDA graphs and no router fusion; kernel-level differences of its software (unfused scaling-factor "
                "allocation and swizzle, no PDL, CPU-side overheads the article removed later: +476 TFLOP/s in all, "
                "part of it plan-visible) are not plan fields",
            ]
        rows.append(dict(
            id=f"mlmdoc_dsv3_gb200_mxfp8_256gpu_pp8ep32_{key}",
            source=MLM_DOC.format(row=row) + "; " + MLM_GUIDE,
            model_name="DeepSeek-V3 671B (no MTP)",
            architecture=dict(DSV3_ARCH),
            hardware=dict(GB200_HW),
            parallelism=dict(tp=1, pp=8, vpp=4, cp=1, ep=32, etp=1, dp=32, fsdp=None, sequence_parallel=False,
                             zero_stage=None, distributed_optimizer=True, pipeline_layout="Et|(tt|)*30L"),
            training=dict(global_batch_size=2048, micro_batch_size=1, precision="fp8 e4m3 mxfp8 (Transformer Engine)",
                          fp8_recipe="mxfp8", recompute=rec, moe_dispatcher=disp, cuda_graph=graph, ep_overlap=False,
                          mtp_num_layers=None),
            measured=dict(tokens_per_sec_per_gpu=None, tflops_per_gpu=tflops, mfu=None, iteration_time_s=None,
                          peak_memory_gb=None, tflops_statistic="as the article's table states it"),
            flops_convention=CONV_MLM_DOC,
            derived_fields=[f"measured.tokens_per_sec_per_gpu_derived = {tok:.1f} (= TFLOP/s x 1e12 / {fpt / 1e9:.3f} "
                            "GFLOP per token, Megatron-LM formula at seq 4096, no MTP)",
                            "parallelism.vpp = 32 layout chunks / PP 8", "parallelism.dp = 256 / PP 8"],
            source_reliability=("primary (NVIDIA's own article in the Megatron-LM repository with its reproduce guide)"
                                if key == "final" else
                                "primary figure, configuration from the article's prose (low: software of an earlier "
                                "date than the command)"),
            notes=("Guide environment: " + ", ".join(f"{k}={v}" for k, v in _GUIDE_ENV.items())
                   + ".  Every 32 GB200 (8 trays) in one NVL72 rack (sbatch --segment 8)."),
            megatron_flags=_GUIDE_MODEL + _GUIDE_RUN + extra,
            flags_source=("deepseek-v3-gb200-reproduce-guide.md launch script (PR #2059)" if key == "final" else
                          "the guide's launch script with the article's section-1 baseline settings"),
            flags_unknown=unknown,
            flags_notes=("Dropped from the guide's command (no effect on step time): --distributed-timeout-minutes, "
                         "--train-samples, --exit-duration-in-mins, --no-save-optim, --data-cache-path, --tokenizer-type, "
                         "--tokenizer-model, --data-path, --split, --no-mmap-bin-files, --num-workers, --clip-grad, "
                         "--weight-decay, --lr*, --min-lr, --adam-beta*, --eval-*, --no-load-*, --auto-detect-ckpt-format, "
                         "--load, --save*, --dist-ckpt-strictness, --init-method-std, --log-*, --logging-level, "
                         "--tensorboard-dir, --wandb-*; the repeated --enable-experimental kept once"),
            launch_env=dict(_GUIDE_ENV), deepep_commit="3f601f7ac1c062c46502646ff04c535013bfca00",
            judge_only=True, confidence=conf,
            measured_tokens_per_sec_per_gpu_for_judging=round(tok, 1),
        ))
    return rows


# ------------------------------------------------------------------------------------- torchtitan PR descriptions
CONV_TT_PR = "tokens/s per GPU as torchtitan logs it ('tps', rank 0) at the step the PR description quotes"
_PR2107 = ("pytorch/torchtitan PR #2107 ('Integrate DeepEP to torchtitan', squash-merged as 36a4b6942 on 2025-12-17; "
           "https://github.com/pytorch/torchtitan/pull/2107), 'Perf: DeepSeek-V3 671B on 64 nodes x H100 (512 GPUs "
           "total)', {which}")
_PR1690 = ("pytorch/torchtitan PR #1690 ('[Qwen3] Add 32b training configs', squash-merged as d66b72a6a on 2025-09-17; "
           "https://github.com/pytorch/torchtitan/pull/1690), the description's {which}")
_Q32_ARCH = dict(num_layers=64, hidden_size=5120, ffn_hidden_size=25600, num_attention_heads=64, num_query_groups=8,
                 vocab_size=151936, seq_length=4096, num_experts=None)
_DS671_ARCH = dict(DSV3_ARCH, vocab_size=129280)


def _titan_row(rid, source, model, arch, hw, par, lbs, gbs, tok, recompute, disp, case, flags_unknown, conf, cfg,
               statistic, precision="bf16", fp8_recipe=None):
    return dict(
        id=rid, source=source, model_name=model, architecture=arch, hardware=hw, parallelism=par,
        training=dict(global_batch_size=gbs, micro_batch_size=lbs, precision=precision, fp8_recipe=fp8_recipe,
                      recompute=recompute, moe_dispatcher=disp, cuda_graph="none", ep_overlap=False, mtp_num_layers=None),
        measured=dict(tokens_per_sec_per_gpu=tok, tflops_per_gpu=None, mfu=None, iteration_time_s=None,
                      peak_memory_gb=None, tokens_statistic=statistic),
        flops_convention=CONV_TT_PR,
        derived_fields=["global_batch_size = local batch x data-parallel degree (no gradient accumulation)"],
        source_reliability="primary (the PR author's logged run; one logged step, not a median)",
        notes="Job table: the preset TOML at the PR's commit with the description's flags (torchtitan_config).",
        torchtitan_config=cfg, flags_source="the PR description's command / table + the preset TOML at its commit",
        flags_unknown=flags_unknown,
        memory_not_judged=f"judged once, as the memory case {case} of memory_cases.json (the same run)",
        judge_only=True, confidence=conf, measured_tokens_per_sec_per_gpu_for_judging=tok,
    )


def titan_pr_rows() -> list[dict]:
    """PR #2107's two DeepSeek-V3 671B runs, PR #1690's eight Qwen3 32B runs that ran, PR #808's three Llama 3 8B
    runs (BF16, float8 rowwise, float8 tensorwise with FP8 all-gather) and #820's float8 tensorwise run."""
    rows = []
    hw512 = dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=512, gpus_per_node=8,
                 interconnect="64 nodes x 8 H100 (NVLink 4 in a node, InfiniBand between)", gpu_family="hopper")
    par = dict(tp=1, pp=8, vpp=2, cp=1, ep=32, etp=1, dp=64, fsdp=64, sequence_parallel=False, zero_stage=3,
               distributed_optimizer=None, pipeline_layout=None)
    common = ["one logged line (step not stated, 120-step run, log_freq 10), not a median",
              "routing forced balanced (debug.moe_force_load_balance): uniform expert load",
              "torchtitan / torch / DeepEP versions of the run not stated (torchtitan around 36a4b6942)"]
    for key, which, tok, cfg, disp in [
        ("deepep", "'After: memory: 56.75GiB(71.74%)  tps: 579  tflops: 162.82  mfu: 16.46%'", 579,
         _titan(_DSV3_671, parallelism={"expert_parallel_comm_backend": "deepep"}), "deepep"),
        ("standard", "'Before: memory: 60.18GiB(76.07%)  tps: 346  tflops: 97.24  mfu: 9.83%'", 346, _DSV3_671,
         "alltoall (torchtitan standard)"),
    ]:
        rows.append(_titan_row(
            f"titanpr_dsv3_671b_h100_512gpu_pp8_ep32_{key}", _PR2107.format(which=which), "DeepSeek-V3 671B (no MTP)",
            dict(_DS671_ARCH), dict(hw512), dict(par), 16, 1024, tok, "full AC", disp,
            f"titan_pr2107_dsv3_671b_h100_512gpu_pp8_ep32_{key}", list(common), "medium",
            json.loads(json.dumps(cfg)), "torchtitan 'tps' of one logged step"))
    hw96 = dict(gpu="H100 SXM 96GB", plan_gpu="h100-sxm-96gb-500w", gpus_per_node=8,
                interconnect="8 H100 per node (NVLink 4), nodes over the cluster network", gpu_family="hopper")
    q = [  # tag, lbs, fsdp, tp, tps, step, compile, quote
        ("fsdp8_lbs2_compile", 2, 8, 1, 1874, 50, True, "'local batch size=2, FSDP=8, full AC ... When torch.compile is "
         "enabled, FSDP=8 gives ... step: 50 ... tps: 1,874  tflops: 389.87  mfu: 39.42%'"),
        ("fsdp8_lbs1", 1, 8, 1, 1444, 50, False, "'1 (8) | 4096 | FSDP 8 | ... step: 50 ... tps: 1,444 tflops: 300.45'"),
        ("fsdp8_lbs2", 2, 8, 1, 1614, 50, False, "'2 (16) | 4096 | FSDP 8 | ... step: 50 ... tps: 1,614 tflops: 335.70'"),
        ("fsdp16_lbs4", 4, 16, 1, 1518, 80, False, "'4 (64) | 4096 | FSDP 16| ... step: 80 ... tps: 1,518  tflops: "
         "315.72'"),
        ("fsdp8_tp4_lbs16", 16, 8, 4, 1139, 90, False, "'16 | 4096 | fsdp=8, tp=4 | ... step: 90 ... tps: 1,139  "
         "tflops: 236.94'"),
        ("fsdp4_tp8_lbs16", 16, 4, 8, 876, 20, False, "'16 (64) | 4096 | fsdp 4, tp 8 | Full AC ... step: 20 ... tps: "
         "876  tflops: 182.14'"),
        ("fsdp4_tp8_lbs32", 32, 4, 8, 883, 10, False, "'32 (128) | 4096 | fsdp 4, tp 8 | Full AC, ... step: 10 ... "
         "tps: 883  tflops: 183.59'"),
        ("fsdp8_tp8_lbs32", 32, 8, 8, 873, 70, False, "'32 (256) | 4096 | Fsdp8, tp 8 | Full AC, ... step: 70 ... "
         "tps: 873  tflops: 181.63'"),
    ]
    for tag, lbs, fsdp, tp, tok, step, comp, quote in q:
        n = fsdp * tp
        cfg = _titan(_Q32, training={"local_batch_size": lbs}, parallelism={"tensor_parallel_degree": tp},
                     compile={"enable": comp})
        unknown = [f"one logged line (step {step}), not a median" + (" -- early in the run" if step <= 20 else ""),
                   "torch / torchtitan commit of the run not stated (the PR's branch, 2025-09-05 .. 11)",
                   "real router-free dense model; c4 data; the 96 GB H100's power limit not stated (the hardware DB's "
                   "h100-sxm-96gb-500w)"]
        if not comp:
            unknown.append("'no compile applied for following benchmarking' (the table's note)")
        rows.append(_titan_row(
            f"titanpr_qwen3_32b_h100_96gb_{n}gpu_{tag}", _PR1690.format(which=quote), "Qwen3 32B", dict(_Q32_ARCH),
            dict(hw96, num_gpus=n), dict(tp=tp, pp=1, vpp=None, cp=1, ep=None, etp=None, dp=fsdp, fsdp=fsdp,
                                         sequence_parallel=tp > 1, zero_stage=3, distributed_optimizer=None,
                                         pipeline_layout=None),
            lbs, lbs * fsdp, tok, "full AC", None, f"titan_pr1690_qwen3_32b_h100_96gb_{n}gpu_{tag}", unknown, "medium",
            cfg, "torchtitan 'tps' of one logged step"))
    # PR #808 (069bae286, 'add configuration for float8 with rowwise scaling, via recipe lookup', description
    # 2025-01-27) and #820 (88247277c, its thread's tensorwise run, 2025-02-04): Llama 3 8B on 8 H100 96GB, the
    # llama3_8b.toml of that date (local batch 1, seq 8192, FSDP 8, per-op SAC), model compiled
    hw8 = dict(hw96, num_gpus=8, interconnect="one node of 8 H100 (NVLink 4)")
    par8 = dict(tp=1, pp=1, vpp=None, cp=1, ep=None, etp=None, dp=8, fsdp=8, sequence_parallel=False, zero_stage=3,
                distributed_optimizer=None, pipeline_layout=None)
    l8 = dict(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
              vocab_size=128256, seq_length=8192, num_experts=None)
    src808 = ("pytorch/torchtitan PR #808 ('add configuration for float8 with rowwise scaling, via recipe lookup', "
              "squash-merged as 069bae286 on 2025-02-27; https://github.com/pytorch/torchtitan/pull/808), {which}")
    src820 = ("pytorch/torchtitan commit 88247277c (PR #820, 'Remove abs from save list for per op AC ...', 2025-02-06; "
              "https://github.com/pytorch/torchtitan/pull/820), {which}")
    for key, src, which, tok, cfg, prec, recipe in [
        ("bf16_compile", src808, "'// baseline (bf16 + compile) ... step: 20 ... tps: 5,760  mfu: 33.73%'", 5760,
         _PR808_JOB, "bf16", None),
        ("float8_rowwise_compile", src808, "'// experiment (rowwise float8 + compile) ... --float8.recipe_name rowwise "
         "... step: 30 ... tps: 6,468  mfu: 37.88%'", 6468,
         _titan(_PR808_JOB, model={"converters": ["float8"]}, float8={"recipe_name": "rowwise"}),
         "fp8 rowwise dynamic scaling (torchao float8)", "float8_rowwise"),
        ("float8_tensorwise_fsdp_fp8_ag", src808, "'tensorwise float8 with float8 all-gather (on main branch) ... step: "
         "20 ... tps: 7,186  mfu: 42.08%'", 7186,
         _titan(_PR808_JOB, model={"converters": ["float8"]},
                float8={"enable_fsdp_float8_all_gather": True, "precompute_float8_dynamic_scale_for_fsdp": True}),
         "fp8 tensorwise dynamic scaling (torchao float8), FP8 FSDP all-gather", "float8_tensorwise"),
    ] + [("float8_tensorwise_compile", src820, "'float8 tensorwise WITHOUT storing abs() output: ... step: 20 ... tps: "
          "6,871  mfu: 40.24%' (read as #808's float8 command with the tensorwise default)", 6871,
          _titan(_PR808_JOB, model={"converters": ["float8"]}), "fp8 tensorwise dynamic scaling (torchao float8)",
          "float8_tensorwise")]:
        case = ("titan_pr820_llama3_8b_h100_8gpu_float8_tensorwise_compile" if src is src820
                else f"titan_pr808_llama3_8b_h100_8gpu_{key}")
        rows.append(_titan_row(
            f"titanpr_llama3_8b_h100_96gb_8gpu_{key}", src.format(which=which), "Llama 3 8B (torchtitan llama3 8B flavor)",
            dict(l8), dict(hw8), dict(par8), 1, 8, tok, "selective per-op SAC (torchtitan 'op')", None, case,
            ["one logged line (step 20 / 30), not a median; 'with-proxy' runs on Meta's cluster",
             "torch / torchao nightly of 2025-01 / -02 not stated; the H100 96GB's power limit not stated (the hardware "
             "DB's h100-sxm-96gb-500w)", "torchtitan of that date compiles the model only (train.py leaves the loss "
             "compile commented out)"], "medium", json.loads(json.dumps(cfg)), "torchtitan 'tps' of one logged step",
            precision=prec, fp8_recipe=recipe))
    return rows


# ------------------------------------------------------------- Megatron-Bridge skills / model verification card
_Q30_MODEL = [
    "--num-layers 48", "--hidden-size 2048", "--ffn-hidden-size 6144", "--num-attention-heads 32", "--group-query-attention",
    "--num-query-groups 4", "--kv-channels 128", "--qk-layernorm", "--normalization RMSNorm", "--norm-epsilon 1e-6",
    "--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--position-embedding-type rope",
    "--rotary-base 1000000", "--seq-length 4096", "--max-position-embeddings 40960", "--num-experts 128",
    "--moe-ffn-hidden-size 768", "--moe-router-topk 8", "--moe-router-load-balancing-type aux_loss",
    "--moe-aux-loss-coeff 1e-3", "--vocab-size 151936",
]
# recipes/qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config (over the 8-GPU config) and
# perf_recipes/qwen/h100/qwen3_moe.py + perf_recipes/_common.py (_perf_precision('bf16'), _benchmark_common) at 7ded17dae
_Q30_RUN = [
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--context-parallel-size 1",
    "--micro-batch-size 1", "--global-batch-size 1024", "--expert-model-parallel-size 16",
    "--expert-tensor-parallel-size 1", "--use-mcore-models", "--transformer-impl transformer_engine", "--bf16",
    "--mock-data", "--attention-dropout 0.0", "--hidden-dropout 0.0", "--use-distributed-optimizer",
    "--no-check-for-nan-in-loss-and-grad", "--grad-reduce-in-bf16", "--manual-gc", "--manual-gc-interval 100",
    "--overlap-grad-reduce", "--overlap-param-gather", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
    "--use-precision-aware-optimizer", "--main-grads-dtype fp32", "--main-params-dtype fp32", "--exp-avg-dtype fp32",
    "--exp-avg-sq-dtype fp32", "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-router-fusion",
    "--moe-router-force-load-balancing", "--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend hybridep",
    "--moe-hybridep-num-sms 32", "--cuda-graph-impl transformer_engine", "--cuda-graph-scope moe_router moe_preprocess",
    "--te-rng-tracker", "--ddp-average-in-collective",
]
_Q30_ENV = {"TORCH_NCCL_HIGH_PRIORITY": "1", "CUDA_DEVICE_MAX_CONNECTIONS": "32", "NCCL_GRAPH_REGISTER": "0",
            "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
            "NCCL_NVLS_ENABLE": "0", "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN": "8",
            "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API": "128", "NVLINK_DOMAIN_SIZE": "8", "USE_MNNVL": "0",
            "NVTE_BWD_LAYERNORM_SM_MARGIN": "20", "NVTE_FWD_LAYERNORM_SM_MARGIN": "20"}
_SKILL = ("NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-moe-comm-overlap/card.yaml 'measured_result' and SKILL.md "
          "'HybridEP production-shape validation' (added by 7ded17dae, PR #5094, 2026-07-25; https://github.com/"
          "NVIDIA-NeMo/Megatron-Bridge/tree/main/skills/nemo-mbridge-perf-moe-comm-overlap), {which}")
_CARD = ("NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/qwen3-30b-a3b/card.yaml item "
         "pretrain_performance.H100 (d398aaca2, PR #5123, 2026-07-31; run at bridge_commit 3a9559f01, last_verified "
         "2026-07-27; https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/examples/model_verification_cards/"
         "qwen3-30b-a3b/card.yaml), {which}")
CONV_MB_SKILL = ("Megatron-Bridge 'model TFLOP/s/GPU' (flop_utils.transformer_flops: causal, top-k active experts, padded "
                 "vocab; 23.006 GFLOP/token for Qwen3-30B-A3B at 4096); tokens/s/GPU = GBS x seq / (step time x GPUs)")
_Q30_ARCH = dict(num_layers=48, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
                 vocab_size=151936, seq_length=4096, num_experts=128, moe_topk=8, moe_ffn_hidden_size=768)


def bridge_skill_rows() -> list[dict]:
    """Qwen3-30B-A3B BF16 on 16 H100 (EP 16, HybridEP, TE graphs of moe_router / moe_preprocess): the comm-overlap
    skill's controlled pair (EP overlap off / on) and the verification card's tuned run (+ permute fusion into
    HybridEP, 64-token combine chunks)."""
    rows = []
    runs = [
        ("ep_overlap_off", _SKILL.format(which="'baseline_step_time_ms: 24713.800, baseline_model_tflops_per_gpu: "
                                         "244.039' (iterations 5-20)"), 24.7138, 244.039, [], {}, None,
         "the recipe at 7ded17dae with comm_overlap.overlap_moe_expert_parallel_comm False (the skill: 'The only "
         "performance change was plain EP overlap')"),
        ("ep_overlap_on", _SKILL.format(which="'overlap_step_time_ms: 20992.030, overlap_model_tflops_per_gpu: 287.305' "
                                        "(independent validation, iterations 41-50)"), 20.99203, 287.305,
         ["--overlap-moe-expert-parallel-comm"], {},
         "judged once, as the memory case mbridge_qwen3_30b_h100_bf16_16gpu_ep16_hybridep_overlap_te_graphs of "
         "memory_cases.json (the same run: rank-0 peak 62.166 GiB)",
         "perf_recipes/qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config at 7ded17dae (plain EP "
         "overlap, delayed wgrad off)"),
        ("permute_fusion_chunk64", _CARD.format(which="'last_10_steps_step_time_ms_avg: 20147.290, "
                                                "last_10_steps_model_tflops_per_gpu_avg: 299.352' (steps 41-50)"),
         20.14729, 299.352, ["--overlap-moe-expert-parallel-comm", "--moe-permute-fusion-into-hybridep"],
         {"NUM_OF_TOKENS_PER_CHUNK_COMBINE_API": "64", "NVTE_BWD_LAYERNORM_SM_MARGIN": "10",
          "NVTE_FWD_LAYERNORM_SM_MARGIN": "10"}, None,
         "the same recipe at 3a9559f01 (PR #5123's branch, merged as d398aaca2): + moe_permute_fusion_into_hybridep, "
         "64-token combine chunks, LayerNorm SM margins 10"),
    ]
    for key, src, step, tflops, extra, env, mem, what in runs:
        tok = 1024 * 4096 / (step * 16)
        row = dict(
            id=f"mbskill_qwen3_30b_a3b_h100_bf16_16gpu_ep16_{key}", source=src, model_name="Qwen3-30B-A3B",
            architecture=dict(_Q30_ARCH),
            hardware=dict(gpu="H100-SXM-80GB", num_gpus=16, gpus_per_node=8, plan_gpu="h100-sxm",
                          interconnect="2 nodes x 8 H100 (NVLink 4 in a node, InfiniBand between)", gpu_family="hopper"),
            parallelism=dict(tp=1, pp=1, vpp=None, cp=1, ep=16, etp=1, dp=16, fsdp=None, sequence_parallel=False,
                             zero_stage=None, distributed_optimizer=True, pipeline_layout=None),
            training=dict(global_batch_size=1024, micro_batch_size=1, precision="bf16", fp8_recipe=None,
                          recompute="none", moe_dispatcher="flex/hybridep",
                          cuda_graph="transformer_engine scope=['moe_router', 'moe_preprocess']",
                          ep_overlap=bool(extra), mtp_num_layers=None),
            measured=dict(tokens_per_sec_per_gpu=None, tflops_per_gpu=tflops, mfu=None, iteration_time_s=step,
                          peak_memory_gb=None, tflops_statistic="mean over the stated steady window"),
            flops_convention=CONV_MB_SKILL,
            derived_fields=[f"measured.tokens_per_sec_per_gpu_derived = {tok:.1f} (= 1024 x 4096 / ({step} s x 16))",
                            f"TFLOP/s / tokens/s = {tflops * 1e12 / tok / 1e9:.3f} GFLOP/token (Bridge's count: 23.006)"],
            source_reliability="primary (NVIDIA's own controlled measurement with the recipe it names)",
            notes=f"Config: {what}.  Environment: " + ", ".join(f"{k}={v}" for k, v in {**_Q30_ENV, **env}.items()) + ".",
            megatron_flags=_Q30_MODEL + _Q30_RUN + extra,
            flags_source=("Megatron-Bridge recipes/qwen/h100/qwen3_moe.py + perf_recipes/qwen/h100/qwen3_moe.py + "
                          "perf_recipes/_common.py at the run's commit, transcribed"),
            flags_unknown=["container of the run not stated (the card's verification environment: nvcr.io/nvidia/nemo:26.06 "
                           "with the Bridge commit); Megatron-LM commit not stated",
                           "routing forced balanced (moe_router_force_load_balancing): uniform expert load",
                           "tp_comm_overlap=True in the recipe is inert at TP 1"]
            + (["moe_permute_fusion_into_hybridep: read, not priced (adapter note)"] if key.startswith("permute") else []),
            launch_env={**_Q30_ENV, **env}, judge_only=True, confidence="high" if key != "ep_overlap_off" else "medium",
            measured_tokens_per_sec_per_gpu_for_judging=round(tok, 1),
        )
        if key == "ep_overlap_off":
            row["flags_unknown"].append("the overlap-off run's recipe is the 7ded17dae one with the overlap switched off "
                                        "as the skill states; its commit is not named")
        if mem:
            row["memory_not_judged"] = mem
        rows.append(row)
    return rows


def doc_pr_rows() -> list[dict]:
    """Every round-thirteen row."""
    return mlm_dsv3_gb200_doc_rows() + titan_pr_rows() + bridge_skill_rows()

