"""Weak-scaling rows of NVIDIA's DGX Cloud benchmarking recipes (issue 28, "scale"), for ``current_runs.json``.

Source: NVIDIA/dgxc-benchmarking at tag-commit 35a9aec ("v24.11.1", 2025-05-21): each recipe's README table gives
the measured training step time ("the last training step timing", step 50 of a 50-step run) for one model at
128 .. 2,048 H100 GPUs (DGX H100, 8 GPUs per node), BF16 and FP8, with the global batch scaled with the GPU
count (constant work per GPU); the recipe's NeMo-Launcher hydra YAML plus its launch / configure script give
every setting of the run (parallelism, micro batch, VP, precision, recompute, optimizer, overlaps, environment).
tokens/s/GPU = sequence x global batch / step time / GPUs (the README's own throughput formula), no FLOP
convention involved.

Rows (held out, judge only):
- ``dgxc2411_h100_{bf16,fp8}_gpt3_175b_{128..2048}gpu``: ``nemo_megatron/README_175b.md`` tables "NeMo Megatron 24.11
  BF16 / FP8 (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)", ``nemo_megatron/gpt3_175b_hydra.yaml`` and ``launch.sh`` (image
  nvidia/nemo:24.05, GBS = 16 x nodes);
- ``dgxc2411_h100_{bf16,fp8}_nemotron4_340b_{128..2048}gpu``: ``nemotron/README_340b.md`` tables "Nemotron4 340b 24.11
  BF16 / FP8 (TP=8, PP=8, MBS=1, GA=16, VP=12)", ``nemotron/nemotron4-340b-synth.yaml`` and ``configure.sh`` (image
  nvidia/nemo:24.09, GBS = 2 x nodes, ``model.overlap_p2p_comm=True model.batch_p2p_comm=False``,
  ``model.ub_tp_comm_overlap=True``, ``+model.fp8_params`` = the FP8 switch).

- ``dgxc2411_h100_{bf16,fp8}_llama31_405b_{576,1152,2304}gpu``: ``llama3.1/README_405b.md`` tables "Llama 3.1 405b 24.09
  BF16 / FP8 (TP=8, PP=9, CP=2, VP=7, MBS=1, GA=63)", ``llama3.1/llama3.1_405b.yaml`` and ``configure.sh`` (image
  nvidia/nemo:24.09, GBS = 252 x GPUs / 576).  The recipe runs 16 query groups and the GPT-2 BPE tokenizer (50,257),
  not Llama 3.1's 8 / 128,256: the rows keep what ran.

Left out: the same table's 32 / 96 / 192-GPU columns (proxy configurations with 7 / 21 / 42 layers, not at scale);
the later releases (25.x) run NeMo 2.0 recipes whose settings live in the NeMo container, not in the repository.
"""

from __future__ import annotations

DGXC_COMMIT = "35a9aec"   # NVIDIA/dgxc-benchmarking "v24.11.1" (2025-05-21)
SRC = ("NVIDIA/dgxc-benchmarking @{c} (v24.11.1, 2025-05-21) {readme}, table '{table}', column '{gpus}x H100 GPUs': "
       "training step time {t} s (last step of a 50-step run)")
HW = dict(gpu="H100-SXM-80GB (DGX-H100)", gpus_per_node=8, plan_gpu="h100-sxm", gpu_family="hopper",
          interconnect="DGX-H100 (DGX Cloud): NVLink 4 / NVSwitch in node (8 GPUs); 8x 400 Gb/s InfiniBand per node")
FP8_FLAGS = ["--fp8-format hybrid", "--fp8-recipe delayed", "--fp8-margin 0", "--fp8-interval 1",
             "--fp8-amax-history-len 1024", "--fp8-amax-compute-algo max", "--fp8-param-gather"]
COMMON = ["--use-mcore-models", "--transformer-impl transformer_engine", "--bf16", "--mock-data",
          "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather", "--grad-reduce-in-bf16",
          "--tp-comm-overlap", "--sequence-parallel", "--micro-batch-size 1"]
UNKNOWN = [
    "the run itself is not published: only the README table (step time of the last of 50 steps) and the recipe's "
    "configuration at the commit; that the measurement used exactly this configuration is assumed",
    "optimizer was Apex distributed_fused_adam (NeMo 1 launcher; overlap_grad_sync / overlap_param_sync true, "
    "grad_sync_dtype bf16): mapped to Megatron-Core's distributed optimizer with --overlap-grad-reduce / "
    "--overlap-param-gather / --grad-reduce-in-bf16; its bucket_cap_mb (GPT-3 220, Nemotron 50) has no Megatron-LM "
    "flag here: the plan keeps Megatron DDP's bucket rule",
    "optimizer state: Apex DistributedFusedAdam keeps its shard of exp_avg / exp_avg_sq in `dtype` and a master copy "
    "only when store_params (apex/contrib/optimizers/distributed_fused_adam.py: params_shard in `dtype`, or int16 "
    "param_remainders_shard with store_param_remainders); NeMo chooses them (NeMo v2.0.0 megatron_base_model.py "
    "setup_optimization, the code of the 24.05 / 24.09 containers not read): fp8_params -> store_params; optimizer "
    "dtype == model dtype -> no master copy; fp32 optimizer with a bf16 model -> store_param_remainders.  Mapped to "
    "--use-precision-aware-optimizer with the state dtypes (OPTIMIZER_FLAGS in dgxc_runs.py)",
    "environment NVTE_FUSED_ATTN=0 (GPT-3, Nemotron-4: TE's FlashAttention backend, --attention-backend flash) or "
    "NVTE_FUSED_ATTN=1 / NVTE_FLASH_ATTN=0 (Llama 3.1: cuDNN, --attention-backend fused), NCCL_NVLS_ENABLE=0, "
    "NVTE_{FWD,BWD}_LAYERNORM_SM_MARGIN from the launcher's conditional_cfgs (not read), CUDA_DEVICE_MAX_CONNECTIONS=1",
]

# model -> (readme, table name, yaml, image, measured step times per precision, seq, GBS per node)
MODELS = {
    "gpt3_175b": dict(
        readme="nemo_megatron/README_175b.md", yaml="nemo_megatron/gpt3_175b_hydra.yaml + launch.sh",
        table="NeMo Megatron 24.11 {P} (TP=4,PP=8, MBS=1, VP=12, SEQ=2048)", image="nvidia/nemo:24.05",
        steps={"bf16": (8.91, 8.95, 9.09, 9.01, 9.02), "fp8": (5.92, 5.96, 6.44, 6.72, 6.24)},
        seq=2048, gpus=(128, 256, 512, 1024, 2048), gbs=(16, 8), name="GPT-3 175B",
        arch=dict(num_layers=96, hidden_size=12288, ffn_hidden_size=49152, num_attention_heads=96,
                  num_query_groups=None, vocab_size=50257, seq_length=2048, num_experts=None, moe_topk=None,
                  moe_ffn_hidden_size=None),
        flags=["--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 8",
               "--num-virtual-stages-per-pipeline-rank 12", "--num-layers 96", "--hidden-size 12288",
               "--ffn-hidden-size 49152", "--num-attention-heads 96", "--seq-length 2048",
               "--max-position-embeddings 2048", "--vocab-size 50257", "--hidden-dropout 0.1",
               "--attention-dropout 0.1", "--manual-gc", "--manual-gc-interval 100"],
        tp=4, pp=8, vp=12, recompute="none",
        notes=("TP communication overlap with the YAML's ub_tp_comm_overlap_cfg, transcribed as "
               "userbuffers_dgxc2411_gpt3_175b_h100_tp4 (scripts/validation/ub_cfgs). GPT-3 defaults of NeMo's "
               "megatron_gpt_config (LayerNorm, GELU, biases, learned absolute positions, tied embeddings) are "
               "Megatron-LM's defaults. Vocabulary: GPT2BPETokenizer (50,257). BF16 rows: the YAML's fp8_params "
               "true has no effect with fp8 false."),
        unknown=["overlap_p2p_comm True, batch_p2p_comm False (the YAML; Megatron-LM's defaults with VP > 1)"]),
    "nemotron4_340b": dict(
        readme="nemotron/README_340b.md", yaml="nemotron/nemotron4-340b-synth.yaml + configure.sh + launch.sh",
        table="Nemotron4 340b 24.11 {P} (TP=8, PP=8, MBS=1, GA=16, VP=12)", image="nvidia/nemo:24.09",
        steps={"bf16": (4.61, 4.67, 4.70, 4.73, 4.84), "fp8": (3.16, 3.21, 3.26, 3.34, 3.49)},
        seq=4096, gpus=(128, 256, 512, 1024, 2048), gbs=(2, 8), name="Nemotron-4 340B",
        arch=dict(num_layers=96, hidden_size=18432, ffn_hidden_size=73728, num_attention_heads=96,
                  num_query_groups=8, vocab_size=256000, seq_length=4096, num_experts=None, moe_topk=None,
                  moe_ffn_hidden_size=None),
        flags=["--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 8",
               "--num-virtual-stages-per-pipeline-rank 12", "--num-layers 96", "--hidden-size 18432",
               "--ffn-hidden-size 73728", "--num-attention-heads 96", "--group-query-attention",
               "--num-query-groups 8", "--seq-length 4096", "--max-position-embeddings 4096", "--squared-relu",
               "--normalization LayerNorm", "--apply-layernorm-1p", "--disable-bias-linear",
               "--position-embedding-type rope", "--rotary-percent 0.5", "--untie-embeddings-and-output-weights",
               "--vocab-size 256000", "--hidden-dropout 0.0", "--attention-dropout 0.0",
               "--recompute-granularity selective", "--manual-gc", "--manual-gc-interval 12",
               "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit 22", "--cross-entropy-loss-fusion",
               "--no-bias-gelu-fusion"],
        tp=8, pp=8, vp=12, recompute="selective (core attention)",
        notes=("TP communication overlap (model.ub_tp_comm_overlap=True, no ub cfg in the YAML: TE's defaults). "
               "Vocabulary: the recipe's nemotron_2_256k.model SentencePiece (256,000). apply_rope_fusion true, "
               "bias_activation_fusion False (no biases)."),
        unknown=["overlap_p2p_comm True / batch_p2p_comm False from configure.sh (Megatron-LM's defaults with VP > 1)"]),
    "llama31_405b": dict(
        readme="llama3.1/README_405b.md", yaml="llama3.1/llama3.1_405b.yaml + configure.sh + launch.sh",
        table="Llama 3.1 405b 24.09 {P} (TP=8, PP=9, CP=2, VP=7, MBS=1, GA=63)", image="nvidia/nemo:24.09",
        steps={"bf16": (17.20, 17.52, 17.62), "fp8": (11.24, 11.31, 12.35)},
        seq=8192, gpus=(576, 1152, 2304), gbs=(252, 576), name="Llama 3.1 405B (recipe: 16 query groups, GPT-2 vocab)",
        arch=dict(num_layers=126, hidden_size=16384, ffn_hidden_size=53248, num_attention_heads=128,
                  num_query_groups=16, vocab_size=50257, seq_length=8192, num_experts=None, moe_topk=None,
                  moe_ffn_hidden_size=None),
        flags=["--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 9", "--context-parallel-size 2",
               "--num-virtual-stages-per-pipeline-rank 7", "--num-layers 126", "--hidden-size 16384",
               "--ffn-hidden-size 53248", "--num-attention-heads 128", "--group-query-attention",
               "--num-query-groups 16", "--kv-channels 128", "--seq-length 8192", "--max-position-embeddings 8192",
               "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5", "--disable-bias-linear",
               "--position-embedding-type rope", "--use-rope-scaling", "--untie-embeddings-and-output-weights",
               "--vocab-size 50257", "--hidden-dropout 0.0", "--attention-dropout 0.0", "--manual-gc",
               "--manual-gc-interval 5", "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit 50",
               "--cross-entropy-loss-fusion"],
        tp=8, pp=9, vp=7, cp=2, recompute="none", attention="--attention-backend fused",
        notes=("TP communication overlap with the YAML's ub_tp_comm_overlap_cfg, transcribed as "
               "userbuffers_dgxc2411_llama31_405b_h100_tp8_cp2 (scripts/validation/ub_cfgs; configure.sh sets "
               "proj_fprop / fc2_fprop fp8_buf to the FP8 switch). Attention: NVTE_FUSED_ATTN=1, NVTE_FLASH_ATTN=0 "
               "(cuDNN fused attention). apply_rope_fusion true, scale_positional_embedding true (Llama 3.1 RoPE "
               "scaling)."),
        unknown=["overlap_p2p_comm True / batch_p2p_comm False (the YAML; Megatron-LM's defaults with VP > 1)",
                 "context parallelism's communication type not set (NeMo 24.09 default: p2p ring)",
                 "NCCL_P2P_NET_CHUNKSIZE=262144 (configure.sh) not modelled"]),
}


# Megatron-LM spelling of each recipe's optimizer state (UNKNOWN above), per precision:
# - GPT-3, Llama 3.1 (optim dtype fp32 by default): BF16 -> store_param_remainders (a 2-byte master: TE FusedAdam's remainders
#   on Megatron's precision-aware path, memory/mcore.py master_param_bytes); FP8 with fp8_params -> fp32 master (4 B);
# - Nemotron-4 (optim dtype bf16 in the YAML): bf16 moments; BF16 -> no master copy (Megatron cannot say 0 bytes:
#   --main-params-dtype bf16 counts 2, over by 2 bytes per parameter / DP); FP8 with fp8_params -> bf16 master.
OPTIMIZER_FLAGS = {
    "gpt3_175b": {"bf16": ["--use-precision-aware-optimizer"], "fp8": ["--use-precision-aware-optimizer"]},
    "nemotron4_340b": {p: ["--use-precision-aware-optimizer", "--main-params-dtype bf16", "--exp-avg-dtype bf16",
                           "--exp-avg-sq-dtype bf16"] for p in ("bf16", "fp8")},
    "llama31_405b": {"bf16": ["--use-precision-aware-optimizer"], "fp8": ["--use-precision-aware-optimizer"]},
}


def dgxc_rows() -> list[dict]:
    """The dgxc-benchmarking weak-scaling rows (module doc), in the current_runs.json row format."""
    rows = []
    for mk, m in MODELS.items():
        for prec in ("bf16", "fp8"):
            for gpus, t in zip(m["gpus"], m["steps"][prec]):
                gbs = m["gbs"][0] * gpus // m["gbs"][1]
                tok = m["seq"] * gbs / t / gpus
                cp = m.get("cp", 1)
                dp = gpus // (m["tp"] * m["pp"] * cp)
                flags = (m["flags"] + COMMON + [m.get("attention", "--attention-backend flash")]
                         + OPTIMIZER_FLAGS[mk][prec] + [f"--global-batch-size {gbs}"]
                         + (FP8_FLAGS if prec == "fp8" else []))
                table = m["table"].format(P=prec.upper())
                rows.append(dict(
                    id=f"dgxc2411_h100_{prec}_{mk}_{gpus}gpu",
                    source=SRC.format(c=DGXC_COMMIT, readme=m["readme"], table=table, gpus=gpus, t=t),
                    model_name=m["name"], architecture=dict(m["arch"]),
                    hardware=dict(HW, num_gpus=gpus),
                    parallelism=dict(tp=m["tp"], pp=m["pp"], vpp=m["vp"], cp=cp, ep=None, etp=None, dp=dp, fsdp=None,
                                     sequence_parallel=True, zero_stage=None, distributed_optimizer=True,
                                     pipeline_layout=None),
                    training=dict(global_batch_size=gbs, micro_batch_size=1,
                                  precision="bf16" if prec == "bf16" else
                                  "fp8 hybrid delayed scaling (TE; amax history 1024, max), fp8 params",
                                  fp8_recipe=None if prec == "bf16" else "delayed", recompute=m["recompute"],
                                  moe_dispatcher=None, cuda_graph="none", ep_overlap=False, mtp_num_layers=None),
                    measured=dict(tokens_per_sec_per_gpu=round(tok, 2), tflops_per_gpu=None, mfu=None,
                                  iteration_time_s=t, peak_memory_gb=None),
                    flops_convention=("tokens/s/GPU = seq x GBS / step time / GPUs (the README's throughput formula "
                                      "per GPU); no FLOP figure used"),
                    derived_fields=[f"global batch = {m['gbs'][0]} x GPUs / {m['gbs'][1]} (the recipe's launch script)",
                                    "parallelism.dp (= gpus/(tp*pp*cp))",
                                    f"tokens/s/GPU = {m['seq']} x {gbs} / {t} / {gpus}"],
                    source_reliability=("primary (NVIDIA's benchmarking repository: README table + the recipe that "
                                        "produced it, same commit)"),
                    notes=m["notes"] + f" Container {m['image']}; recipe {m['yaml']} @{DGXC_COMMIT}.",
                    megatron_flags=flags,
                    flags_source=f"NVIDIA/dgxc-benchmarking @{DGXC_COMMIT}: {m['yaml']} (NeMo-Launcher hydra config "
                                 "+ overrides), mapped by hand to Megatron-LM argument names",
                    flags_unknown=UNKNOWN + m["unknown"],
                    flags_notes="NeMo 1 (NeMo-Launcher) model config fields mapped to Megatron-LM flags.",
                    judge_only=True, confidence="high",
                    judge_groups=["dense_" + prec, "hopper", prec],
                    measured_tokens_per_sec_per_gpu_for_judging=round(tok, 2),
                ))
    return rows
