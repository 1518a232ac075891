"""Coarse-expert MoE rows (8 experts, top-2: Mixtral 8x7B / 8x22B, Grok-1) for ``current_runs.json`` (issue 28).

Held out, judge only.  Each row is a published measurement plus the configuration of the code that produced it,
mapped by hand to Megatron-LM flags (the rows go through the Megatron adapter like every ``megatron_flags`` row).

NVIDIA NeMo Framework performance summary (``PAGE``; the stored copies whose first tables are the 25.02 DGX-B200 and
the 25.04 DGX-GB200 pre-training tables; also ``.../performance/archive/25.04-performance-summary.html``), FP8:

- ``nemo2502_b200_fp8ds_mixtral_8x7b_64gpu``: "Container: NeMo 25.02, System: DGX-B200", Mixtral-8x7B, 64 GPUs, GBS
  256, MBS 2, seq 4096, TP 1 PP 1 CP 1 VP 1 EP 8, GA 2: 15,457 tokens/s/GPU (1,282 TFLOP/s).  Launch code: NVIDIA/NeMo
  v2.2.0 (7192a2c944, the 25.02 container's NeMo) ``scripts/llm/performance/pretrain_mixtral_8x7b.py`` +
  ``recommended_model_configs/model_configs_b200.csv`` + ``utils.py``: ``pretrain_recipe(performance_mode=True)``,
  ``bf16_with_fp8_mixed()`` (delayed scaling: hybrid, amax history 1024 / max, fp8 param gather) with
  ``grad_reduce_in_fp32 = False``, and ``enable_cuda_graph`` on B200 (``args.gpu == "b200"``).
- ``nemo2502_b200_fp8ds_mixtral_8x22b_256gpu_seq64k``: the same table, Mixtral-8x22B, 256 GPUs, GBS 64, MBS 1, seq
  65,536, TP 2 PP 4 CP 8 VP 14 EP 8, GA 16: 2,232 tokens/s/GPU (824 TFLOP/s).  v2.2.0 ``pretrain_mixtral_8x22b.py``
  (+ the CSV row: ETP 1) and the recipe (``MockDataModule(seq_length=65536)``, ``MixtralConfig8x22B`` seq 65,536):
  delayed-scaling FP8, no CUDA graph (the 8x22B script sets none), vocabulary 32,768 (HF Mixtral-8x22B-v0.1).
- ``nemo2504_gb200_fp8cs_mixtral_8x7b_64gpu``: "Container: NeMo 25.04, System: DGX-GB200", Mixtral-8x7B (as the 25.02
  row, FSDP 0): 19,275 tokens/s/GPU (1,598 TFLOP/s); the page: "We apply per-tensor FP8 quantization, leveraging
  scaling factors computed in the current step" (the script's ``-fr cs``).  Launch code: NeMo v2.3.0 (2b03b748bb)
  ``scripts/performance/llm/pretrain_mixtral_8x7b.py`` + ``model_configs_gb200.csv`` (cuda_graphs 1) + ``utils.py
  set_primary_perf_configs`` (``bf16_with_fp8_current_scaling_mixed()`` with ``first_last_layers_bf16 = False``,
  ``grad_reduce_in_fp32 = False``, ``cross_entropy_fusion_impl = "te"``, ``enable_cuda_graph``).

Shared by the NeMo rows (``recipes/mixtral_8x{7,22}b.py pretrain_performance_optimizations`` and
``gpt/model/mixtral.py`` at each tag): ``MegatronTokenDropCallback()`` -- ``moe_expert_capacity_factor = 1.0`` with
``moe_pad_expert_input_to_capacity = True`` (token drop + pad: every expert computes exactly its capacity) --, GC every
100 steps, alltoall dispatcher, aux-loss router (1e-2), pre-softmax top-2, MCore's default ``moe_grouped_gemm =
False`` (one local expert per rank at EP 8: nothing to group), RoPE fusion, distributed optimizer with grad-reduce
and param-gather overlap, bf16 gradient reduction (``grad_reduce_in_fp32 = False`` on the precision plugin, which
megatron_strategy's ``update_config_with_dtype_overrides`` puts on the DDP config: ``--grad-reduce-in-bf16``, since
Megatron-LM's arguments turn fp32 accumulation on with ``--bf16`` otherwise), dropout 0; NeMo's
MegatronCommOverlapCallback keeps TP overlap off (``tp_comm_overlap`` False unless set) and, with VP,
``overlap_p2p_comm`` True / ``batch_p2p_comm`` False.

Megatron-LM ``megatron/core/transformer/moe/README.md`` @c230e0d7c2 (2024-11-21):

- ``mcore_moe_readme_h100_bf16_mixtral_8x7b_64gpu``: "Mixtral 8X7B bf16 training to achieve **468 TFLOPS** as of MCore
  v0.9", with its "Reference Best Parallel Mapping" row Mixtral 8x7B (Dropless): 32K vocab, All-to-All, BF16, 64
  GPUs, seq 4096, TP 1 EP 8 PP 4 VP 8 MBS 1 GBS 256, on 8x H100 80GB nodes (NVLink 4, 8x 400 Gbit/s IB), PyTorch
  24.09 + TE 1.11; the flags the table leaves out from the README's training example (grouped GEMM, aux loss 1e-2,
  distributed optimizer, overlaps).  VP 8 is the virtual-pipeline size (one layer per chunk), as the README's rule 3
  defines VPP_size (the row's ``flags_unknown`` gives the other reading and its projection).  TFLOP/s ->
  tokens/s with Megatron's formula of that version (full attention).

NVIDIA/dgxc-benchmarking @8f5cbb379 (tag v25.02) ``grok1/README_314b.md``, tables "Grok 1 314b BF16 / FP8", columns
512 / 1,024 / 2,048 H100 (the full 64-layer model; the 8-256-GPU columns are proxies with 2-32 layers, left out as the
weak-scaling rows of ``dgxc_runs.py`` leave theirs): the last of 50 training steps, tokens/s = seq x GBS / step
time (the README's formula).  Recipe: ``grok1/grok1_314b.yaml`` + ``configure.sh`` (NeMo-Launcher hydra config of the
nvidia/nemo:24.12 container): TP 4 PP 8 CP 2 EP 8 VP 8, MBS 1, GBS = 16 x nodes, seq 8192, 64 layers, hidden 6144,
FFN 32768, 48 heads / 8 groups, gated GeLU ('fast-geglu'), RoPE base 1e6, the Llama-3-70B tokenizer (128,256),
alltoall dispatcher with ``moe_expert_capacity_factor: 1.0`` + ``moe_pad_expert_input_to_capacity: true``, no grouped
GEMM, ``ub_tp_comm_overlap=true`` (no cfg: TE's defaults), sequence parallel, mcore distributed optimizer (bf16 grad
sync: ``--grad-reduce-in-bf16``, overlapped grad / param sync, ``overlap_param_gather_with_optimizer_step``), GC
every 40 steps, flash attention (``NVTE_FUSED_ATTN=0``), FP8 = ``model.fp8`` + ``fp8_params`` (delayed, hybrid, amax history 1024 / max).  Expert TP:
NeMo 24.12's ``megatron_init.py`` sets ``expert_tensor_parallel_size_ = tensor_model_parallel_size`` when unset, as
Megatron-LM does: ETP 4, so an EP 8 x ETP 4 expert group spans 32 GPUs (4 nodes).
"""

from __future__ import annotations

PAGE = "https://docs.nvidia.com/nemo-framework/user-guide/latest/performance/performance_summary.html"
MCORE_README = "c230e0d7c2"
DGXC_COMMIT = "8f5cbb379"   # NVIDIA/dgxc-benchmarking tag v25.02
HW = {
    "B200": dict(gpu="B200-180GB (DGX-B200)", gpus_per_node=8, plan_gpu="b200", gpu_family="blackwell",
                 interconnect="DGX-B200: NVLink 5 in node (8 GPUs); 8x 400 Gb/s InfiniBand per node"),
    "GB200": dict(gpu="GB200 NVL72 (DGX-GB200)", gpus_per_node=4, plan_gpu=None, gpu_family="blackwell",
                  interconnect="GB200 NVL72: 4 GPUs per compute tray, 72 GPUs in one NVLink domain"),
    "H100": dict(gpu="H100-SXM-80GB (DGX-H100)", gpus_per_node=8, plan_gpu="h100-sxm", gpu_family="hopper",
                 interconnect="DGX-H100: NVLink 4 / NVSwitch in node (8 GPUs); 8x 400 Gb/s InfiniBand per node"),
}
_MIXTRAL = ["--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--swiglu",
            "--normalization RMSNorm", "--norm-epsilon 1e-5", "--disable-bias-linear", "--position-embedding-type rope",
            "--rotary-base 1000000", "--untie-embeddings-and-output-weights", "--attention-dropout 0.0",
            "--hidden-dropout 0.0", "--num-experts 8", "--moe-router-topk 2", "--moe-router-load-balancing-type aux_loss",
            "--moe-aux-loss-coeff 1e-2", "--moe-token-dispatcher-type alltoall"]
MODELS = {
    "mixtral_8x7b": dict(
        name="Mixtral 8x7B",
        arch=dict(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32, num_query_groups=8,
                  vocab_size=32000, seq_length=4096, num_experts=8, moe_topk=2, moe_ffn_hidden_size=14336),
        flags=["--num-layers 32", "--hidden-size 4096", "--ffn-hidden-size 14336", "--num-attention-heads 32",
               "--seq-length 4096", "--max-position-embeddings 4096", "--vocab-size 32000"] + _MIXTRAL),
    "mixtral_8x22b": dict(
        name="Mixtral 8x22B",
        arch=dict(num_layers=56, hidden_size=6144, ffn_hidden_size=16384, num_attention_heads=48, num_query_groups=8,
                  vocab_size=32768, seq_length=65536, num_experts=8, moe_topk=2, moe_ffn_hidden_size=16384),
        flags=["--num-layers 56", "--hidden-size 6144", "--ffn-hidden-size 16384", "--num-attention-heads 48",
               "--seq-length 65536", "--max-position-embeddings 65536", "--vocab-size 32768"] + _MIXTRAL),
}
COMMON = ["--use-mcore-models", "--transformer-impl transformer_engine", "--bf16", "--mock-data",
          "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
TOKEN_DROP = ["--moe-expert-capacity-factor 1.0", "--moe-pad-expert-input-to-capacity"]
FP8_DS = ["--fp8-format hybrid", "--fp8-recipe delayed", "--fp8-margin 0", "--fp8-amax-history-len 1024",
          "--fp8-amax-compute-algo max", "--fp8-param-gather"]
FP8_CS = ["--fp8-format hybrid", "--fp8-recipe tensorwise"]
NEMO_UNKNOWN = [
    "the run itself is not published: the summary table gives the figure and the configuration columns; the "
    "flags are the performance script and recipe of the NeMo tag of that container (stated per row), assumed "
    "to be what ran",
    "optimizer: NeMo's distributed_fused_adam_with_cosine_annealing is Megatron-Core's distributed optimizer "
    "(OptimizerConfig use_distributed_optimizer=True, Adam, fp32 master weights): Megatron-LM's defaults here",
    "environment from NeMo's PerfEnvPlugin (vboost, CUDA_DEVICE_MAX_CONNECTIONS, NCCL PP chunk size) not priced",
    "enable_cuda_graph (MCore per-layer 'local' graphs, use_te_rng_tracker) read as --enable-cuda-graph; the "
    "token-drop callback's capacity padding is what gives the MoE layer static shapes to capture",
]

# NeMo summary rows: id -> (system, container, NeMo tag, model, gpus, tp, pp, cp, vp, etp, mbs, gbs, tokens/s, TFLOP/s,
#                          fp8 recipe, CUDA graph, extra flags, launch files, notes)
NEMO_ROWS = {
    "nemo2502_b200_fp8ds_mixtral_8x7b_64gpu": (
        "B200", "25.02", "v2.2.0 (7192a2c944)", "mixtral_8x7b", 64, 1, 1, 1, 1, None, 2, 256, 15457.0, 1282.0,
        "delayed", True, [],
        "scripts/llm/performance/pretrain_mixtral_8x7b.py + recommended_model_configs/model_configs_b200.csv + "
        "utils.py, nemo/collections/llm/recipes/mixtral_8x7b.py",
        "The 25.02 page says 'FP8 precision (using NeMo 2.0)' without a recipe: the v2.2.0 script has one FP8 choice, "
        "bf16_with_fp8_mixed() (delayed scaling).  No TE cross-entropy setting in v2.2.0's utils.py (GPTConfig "
        "cross_entropy_loss_fusion True: Megatron's native fused cross entropy)."),
    "nemo2502_b200_fp8ds_mixtral_8x22b_256gpu_seq64k": (
        "B200", "25.02", "v2.2.0 (7192a2c944)", "mixtral_8x22b", 256, 2, 4, 8, 14, 1, 1, 64, 2232.0, 824.0,
        "delayed", False, [],
        "scripts/llm/performance/pretrain_mixtral_8x22b.py + recommended_model_configs/model_configs_b200.csv + "
        "utils.py, nemo/collections/llm/recipes/mixtral_8x22b.py (MockDataModule seq_length 65536)",
        "Long context: CP 8 x TP 2 (sequence parallel), 4,096 tokens per rank; ETP 1 (the CSV) so each expert is "
        "whole on its rank.  No CUDA graph (the v2.2.0 8x22B script sets none)."),
    "nemo2504_gb200_fp8cs_mixtral_8x7b_64gpu": (
        "GB200", "25.04", "v2.3.0 (2b03b748bb)", "mixtral_8x7b", 64, 1, 1, 1, 1, None, 2, 256, 19275.0, 1598.0,
        "tensorwise", True, ["--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te"],
        "scripts/performance/llm/pretrain_mixtral_8x7b.py + recommended_model_configs/model_configs_gb200.csv + "
        "utils.py, nemo/collections/llm/recipes/mixtral_8x7b.py",
        "16 trays of 4 GPUs in one NVL72 domain: the EP 8 all-to-all stays on NVLink.  FP8 per-tensor current "
        "scaling as the page states (the script's '-fr cs'; its default 'ds' would contradict the page), every "
        "layer in FP8 (first_last_layers_bf16 False)."),
}


def _nemo_rows() -> list[dict]:
    rows = []
    for rid, (sysname, container, tag, mk, gpus, tp, pp, cp, vp, etp, mbs, gbs, tok, tfl, fp8, graph, extra, launch,
              notes) in NEMO_ROWS.items():
        m = MODELS[mk]
        dp = gpus // (tp * pp * cp)
        flags = (m["flags"] + COMMON + TOKEN_DROP
                 + ["--moe-router-pre-softmax", f"--tensor-model-parallel-size {tp}",
                    f"--pipeline-model-parallel-size {pp}", f"--context-parallel-size {cp}",
                    "--expert-model-parallel-size 8", f"--micro-batch-size {mbs}", f"--global-batch-size {gbs}",
                    "--manual-gc", "--manual-gc-interval 100", "--grad-reduce-in-bf16"]
                 + (["--sequence-parallel"] if tp > 1 else [])
                 + ([f"--num-virtual-stages-per-pipeline-rank {vp}"] if vp > 1 else [])
                 + ([f"--expert-tensor-parallel-size {etp}"] if etp else [])
                 + (["--enable-cuda-graph"] if graph else [])
                 + (FP8_DS if fp8 == "delayed" else FP8_CS) + extra)
        rows.append(dict(
            id=rid,
            source=(f"NVIDIA NeMo Framework performance summary ({PAGE}), 'Container: NeMo {container}', 'System: "
                    f"DGX-{sysname}', pre-training table, row {m['name'].replace(' ', '-')}: {gpus} GPUs, GBS {gbs}, "
                    f"MBS {mbs}, seq {m['arch']['seq_length']}, TP {tp}, PP {pp}, CP {cp}, VP {vp}, EP 8, GA "
                    f"{gbs // (mbs * dp)}: {tok:,.0f} tokens/s/GPU, {tfl:,.0f} model TFLOP/s/GPU"),
            model_name=m["name"], architecture=dict(m["arch"]),
            hardware=dict(HW[sysname], num_gpus=gpus),
            parallelism=dict(tp=tp, pp=pp, vpp=vp if vp > 1 else None, cp=cp, ep=8, etp=etp, dp=dp, fsdp=None,
                             sequence_parallel=tp > 1, zero_stage=None, distributed_optimizer=True,
                             pipeline_layout=None),
            training=dict(global_batch_size=gbs, micro_batch_size=mbs,
                          precision=("fp8 hybrid delayed scaling (TE; amax history 1024, max), fp8 param gather"
                                     if fp8 == "delayed" else "fp8 hybrid per-tensor current scaling (tensorwise)"),
                          fp8_recipe=fp8, recompute="none", moe_dispatcher="alltoall",
                          cuda_graph="local (enable_cuda_graph)" if graph else "none", ep_overlap=False,
                          mtp_num_layers=None, moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True),
            measured=dict(tokens_per_sec_per_gpu=tok, tflops_per_gpu=tfl, mfu=None, iteration_time_s=None,
                          peak_memory_gb=None),
            flops_convention="tokens/s/GPU as published in the table; the TFLOP/s column not used",
            derived_fields=["parallelism.dp (= gpus / (tp pp cp))"],
            source_reliability="primary (NVIDIA's published performance summary + the launch code of that release)",
            notes=f"NeMo {container} on DGX-{sysname}.  " + notes,
            megatron_flags=flags,
            flags_source=f"NVIDIA/NeMo {tag}: {launch}, mapped by hand to Megatron-LM argument names",
            flags_unknown=list(NEMO_UNKNOWN),
            flags_notes="NeMo 2 recipe + performance-script fields mapped to Megatron-LM flags.",
            judge_only=True, confidence="high",
            measured_tokens_per_sec_per_gpu_for_judging=tok,
        ))
    return rows


def _mcore_row() -> dict:
    m = MODELS["mixtral_8x7b"]
    return dict(
        id="mcore_moe_readme_h100_bf16_mixtral_8x7b_64gpu",
        source=(f"NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md @{MCORE_README} (2024-11-21): 'Mixtral "
                "8X7B bf16 training to achieve **468 TFLOPS** as of MCore v0.9' + 'Reference Best Parallel "
                "Mapping' row Mixtral 8x7B (Dropless), 32K vocab, All-to-All, BF16, 64 GPUs, seq 4096, TP 1, EP 8, "
                "PP 4, VP 8, MBS 1, GBS 256; 8x H100 80GB per node, PyTorch 24.09 + TE 1.11"),
        model_name=m["name"], architecture=dict(m["arch"]),
        hardware=dict(HW["H100"], num_gpus=64),
        parallelism=dict(tp=1, pp=4, vpp=8, cp=1, ep=8, etp=None, dp=16, fsdp=None, sequence_parallel=False,
                         zero_stage=None, distributed_optimizer=True, pipeline_layout=None),
        training=dict(global_batch_size=256, micro_batch_size=1, precision="bf16", fp8_recipe=None,
                      recompute="none", moe_dispatcher="alltoall", cuda_graph="none", ep_overlap=False,
                      mtp_num_layers=None),
        measured=dict(tokens_per_sec_per_gpu=None, tflops_per_gpu=468.0, mfu=None, iteration_time_s=None,
                      peak_memory_gb=None),
        flops_convention=("Megatron-LM num_floating_point_operations of MCore v0.9 (late 2024): model FLOPs, "
                          "fwd+bwd = 3x fwd, FULL attention scores (no causal halving), MoE with the top-k routed "
                          "experts; tokens/s/GPU = 468e12 / that per-token count (build_runs.py)"),
        derived_fields=["parallelism.dp (= 64 / (tp pp))", "tokens/s/GPU from 468 TFLOP/s (flops_convention)"],
        source_reliability=("secondary (a headline figure in the framework's README next to the reference mapping it "
                            "was measured with; no per-run log)"),
        notes=("The README's training example of the same commit gives the flags the table leaves out: "
               "--moe-grouped-gemm, aux_loss 1e-2, --overlap-grad-reduce, --overlap-param-gather, "
               "--use-distributed-optimizer, --no-masked-softmax-fusion (dropless: no capacity factor)."),
        megatron_flags=m["flags"] + COMMON + [
            "--tensor-model-parallel-size 1", "--expert-model-parallel-size 8", "--pipeline-model-parallel-size 4",
            "--num-layers-per-virtual-pipeline-stage 1", "--micro-batch-size 1", "--global-batch-size 256",
            "--moe-grouped-gemm", "--no-masked-softmax-fusion"],
        flags_source=(f"NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md @{MCORE_README}: the mapping table "
                      "+ the 'MoE training example' flags"),
        flags_unknown=[
            "that the 468 TFLOPS headline was measured with the table's mapping is read from the README (the table "
            "is 'the reference parallel mappings of MCore v0.8' and the headline moved 438 -> 468 from v0.8 to "
            "v0.9 in the same commit); no log",
            "the table's VP 8 read as the virtual-pipeline size, one layer per model chunk (--num-layers-per-"
            "virtual-pipeline-stage 1): the README's own rule 3 names 'VPP_size = num_layers / PP_size / "
            "num_layers_per_virtual_pipeline_stage' and its legal values the divisors of num_layers / PP_size (8 "
            "here, 7 for the 8x22B row at PP 8); its training example passes 8 as --num-layers-per-virtual-pipeline-"
            "stage (with GBS 128), which at PP 4 would be one chunk per rank, no interleaving: that reading projects "
            "5,021 tokens/s/GPU (-11.0 %; the interleaved one 5,690, +0.8 %, primus-launch of 2026-12-07)",
            "RoPE / bias-activation fusions and the attention backend: Megatron-LM defaults of v0.9",
        ],
        flags_notes="Megatron-LM flags from the README (mapping table + training example).",
        judge_only=True, confidence="medium",
    )


# Grok-1 314B (dgxc v25.02): GPUs -> step time (s) per precision; GBS = 16 x nodes
GROK_STEPS = {"bf16": {512: 21.01, 1024: 21.20, 2048: 21.29}, "fp8": {512: 16.90, 1024: 17.01, 2048: 17.30}}
GROK_ARCH = dict(num_layers=64, hidden_size=6144, ffn_hidden_size=32768, num_attention_heads=48, num_query_groups=8,
                 vocab_size=128256, seq_length=8192, num_experts=8, moe_topk=2, moe_ffn_hidden_size=32768)
GROK_FLAGS = [
    "--num-layers 64", "--hidden-size 6144", "--ffn-hidden-size 32768", "--num-attention-heads 48",
    "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--seq-length 8192",
    "--max-position-embeddings 32768", "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5",
    "--disable-bias-linear", "--position-embedding-type rope", "--rotary-base 1000000",
    "--untie-embeddings-and-output-weights", "--vocab-size 128256", "--attention-dropout 0.0", "--hidden-dropout 0.0",
    "--num-experts 8", "--moe-router-topk 2", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 0.01",
    "--moe-token-dispatcher-type alltoall", "--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 8",
    "--context-parallel-size 2", "--expert-model-parallel-size 8", "--num-virtual-stages-per-pipeline-rank 8",
    "--sequence-parallel", "--tp-comm-overlap", "--micro-batch-size 1", "--attention-backend flash",
    "--manual-gc", "--manual-gc-interval 40", "--overlap-param-gather-with-optimizer-step", "--grad-reduce-in-bf16"]


def _grok_rows() -> list[dict]:
    rows = []
    for prec, steps in GROK_STEPS.items():
        for gpus, t in steps.items():
            gbs = 16 * gpus // 8
            tok = 8192 * gbs / t / gpus
            rows.append(dict(
                id=f"dgxc2502_h100_{prec}_grok1_314b_{gpus}gpu",
                source=(f"NVIDIA/dgxc-benchmarking @{DGXC_COMMIT} (v25.02) grok1/README_314b.md, table 'Grok 1 314b "
                        f"{prec.upper()}', column 'Throughput on {gpus} H100 GPUs': training step time {t} s (last "
                        "step of a 50-step run)"),
                model_name="Grok-1 314B (NeMo recipe: Llama-3 tokenizer, gated GeLU)", architecture=dict(GROK_ARCH),
                hardware=dict(HW["H100"], num_gpus=gpus),
                parallelism=dict(tp=4, pp=8, vpp=8, cp=2, ep=8, etp=4, dp=gpus // 64, fsdp=None,
                                 sequence_parallel=True, zero_stage=None, distributed_optimizer=True,
                                 pipeline_layout=None),
                training=dict(global_batch_size=gbs, micro_batch_size=1,
                              precision="bf16" if prec == "bf16" else
                              "fp8 hybrid delayed scaling (TE; amax history 1024, max), fp8 params",
                              fp8_recipe=None if prec == "bf16" else "delayed", recompute="none",
                              moe_dispatcher="alltoall", cuda_graph="none", ep_overlap=False, mtp_num_layers=None,
                              moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True),
                measured=dict(tokens_per_sec_per_gpu=round(tok, 2), tflops_per_gpu=None, mfu=None,
                              iteration_time_s=t, peak_memory_gb=None),
                flops_convention=("tokens/s/GPU = seq x GBS / step time / GPUs (the README's throughput formula per "
                                  "GPU); no FLOP figure used"),
                derived_fields=["global batch = 16 x nodes (configure.sh)", "parallelism.dp (= gpus / (tp pp cp))",
                                f"tokens/s/GPU = 8192 x {gbs} / {t} / {gpus}"],
                source_reliability=("primary (NVIDIA's benchmarking repository: README table + the recipe that "
                                    "produced it, same commit)"),
                notes=("NeMo-Launcher hydra config grok1/grok1_314b.yaml + configure.sh overrides @" + DGXC_COMMIT
                       + " (container nvidia/nemo:24.12).  ETP 4 (= TP: NeMo 24.12 megatron_init.py and Megatron-LM's "
                       "default when unset): the 8 x 4 expert group spans 4 nodes.  'fast-geglu' is a gated GeLU "
                       "MLP: written --swiglu (the same three GEMMs; a GeLU instead of a SiLU in the gate)."),
                megatron_flags=(GROK_FLAGS + COMMON + TOKEN_DROP + [f"--global-batch-size {gbs}"]
                                + (FP8_DS if prec == "fp8" else [])),
                flags_source=(f"NVIDIA/dgxc-benchmarking @{DGXC_COMMIT}: grok1/grok1_314b.yaml + configure.sh "
                              "(NeMo-Launcher hydra config + overrides), mapped by hand to Megatron-LM argument names"),
                flags_unknown=[
                    "the run itself is not published: only the README table (step time of the last of 50 steps) and "
                    "the recipe's configuration at the commit; that the measurement used exactly this configuration "
                    "is assumed",
                    "ub_tp_comm_overlap true with ub_tp_comm_overlap_cfg null: TE's default userbuffers settings "
                    "(--tp-comm-overlap without --tp-comm-overlap-cfg)",
                    "gated GeLU (fast-geglu) priced as SwiGLU (same GEMMs)",
                    "environment: NVTE_FUSED_ATTN=0 (flash attention), NCCL_NVLS_ENABLE=0, NVTE_DP_AMAX_REDUCE_"
                    "INTERVAL=0, NVTE_ASYNC_AMAX_REDUCTION=1, NCCL_P2P_NET_CHUNKSIZE=2097152 (not priced beyond the "
                    "attention backend)",
                    "grad_allreduce_chunk_size_mb 125 / grad_div_ar_fusion: no Megatron-LM flag; DDP's bucket rule "
                    "kept",
                ],
                flags_notes="NeMo 1 (NeMo-Launcher) model config fields mapped to Megatron-LM flags.",
                judge_only=True, confidence="high",
                measured_tokens_per_sec_per_gpu_for_judging=round(tok, 2),
            ))
    return rows


SCOUT_ARCH = dict(num_layers=48, hidden_size=5120, ffn_hidden_size=16384, num_attention_heads=40, num_query_groups=8,
                  vocab_size=200000, seq_length=8192, num_experts=16, moe_topk=1, moe_ffn_hidden_size=8192,
                  moe_shared_expert_intermediate_size=8192, qk_l2_norm=True, nope_layer_interval=4,
                  attention_chunk_size=8192)
SCOUT_FLAGS = [
    "--num-layers 48", "--hidden-size 5120", "--ffn-hidden-size 16384", "--num-attention-heads 40",
    "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--seq-length 8192",
    "--max-position-embeddings 8192", "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5",
    "--disable-bias-linear", "--position-embedding-type rope", "--rotary-base 500000", "--rotary-interleaved",
    "--use-rope-scaling", "--rope-scaling-factor 8.0", "--no-rope-freq 4", "--qk-l2-norm",
    "--untie-embeddings-and-output-weights", "--vocab-size 200000", "--attention-dropout 0.0", "--hidden-dropout 0.0",
    "--num-experts 16", "--moe-router-topk 1", "--moe-ffn-hidden-size 8192",
    "--moe-shared-expert-intermediate-size 8192", "--moe-shared-expert-overlap", "--moe-router-score-function sigmoid",
    "--moe-apply-probs-on-input", "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall",
    "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 0.0",
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--expert-model-parallel-size 16",
    "--expert-tensor-parallel-size 1", "--micro-batch-size 1", "--global-batch-size 1024", "--enable-cuda-graph",
    "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te", "--manual-gc", "--manual-gc-interval 100",
    "--grad-reduce-in-bf16"]


def _scout_row() -> dict:
    """NeMo 25.07 DGX-GB200 Llama 4 Scout (16 experts, top-1): the page's first table (module doc of the row)."""
    return dict(
        id="nemo2507_gb200_fp8cs_llama4_scout_64gpu",
        source=(f"NVIDIA NeMo Framework performance summary (https://docs.nvidia.com/nemo-framework/user-guide/latest/"
                "performance/performance-summary.html), 'Container: NeMo 25.07', 'System: DGX-GB200', pre-training "
                "table ('per-tensor FP8 quantization, leveraging scaling factors computed in the current step'), row "
                "LLAMA4-Scout-LLM: 64 GPUs, GBS 1024, MBS 1, seq 8192, FSDP 0, TP 1, PP 1, CP 1, VP 1, EP 16, GA 16: "
                "13783 (10717) tokens/s/GPU, 1501 (1167) model TFLOP/s/GPU; the first figure taken"),
        model_name="Llama 4 Scout (17B active, 16 experts)", architecture=dict(SCOUT_ARCH),
        hardware=dict(HW["GB200"], num_gpus=64),
        parallelism=dict(tp=1, pp=1, vpp=None, cp=1, ep=16, etp=1, dp=64, fsdp=None, sequence_parallel=False,
                         zero_stage=None, distributed_optimizer=True, pipeline_layout=None),
        training=dict(global_batch_size=1024, micro_batch_size=1,
                      precision="fp8 hybrid per-tensor current scaling (tensorwise)", fp8_recipe="tensorwise",
                      recompute="none", moe_dispatcher="alltoall", cuda_graph="local (enable_cuda_graph)",
                      ep_overlap=False, mtp_num_layers=None, moe_expert_capacity_factor=1.0,
                      moe_pad_expert_input_to_capacity=True),
        measured=dict(tokens_per_sec_per_gpu=13783.0, tflops_per_gpu=1501.0, mfu=None, iteration_time_s=None,
                      peak_memory_gb=None),
        flops_convention="tokens/s/GPU as published in the table (the first figure); the TFLOP/s column not used",
        derived_fields=["parallelism.dp (= 64 / (tp pp cp))"],
        source_reliability=("primary (NVIDIA's published performance summary + the launch code of that release); "
                            "the parenthesised second figure's meaning is not in the stored part of the page"),
        notes=("NeMo 25.07 on DGX-GB200 (16 trays in one NVL72 domain: EP 16 on NVLink).  Launch code NVIDIA/NeMo "
               "v2.4.0 (2381f42f69): scripts/performance/llm/pretrain_llama4_e16.py (cross_entropy_fusion_impl te, "
               "cross_entropy_loss_fusion, apply_rope_fusion, moe_permute_fusion; NullTokenizer of 200,000 without "
               "--use_hf_tokenizer) + recommended_model_configs/model_configs_gb200.csv (llama4 e16 fp8: ETP 1, "
               "cuda_graphs 1) + helpers.py (set_cuda_graph_configs: enable_cuda_graph; set_precision_configs: "
               "'cs' = bf16_with_fp8_current_scaling_mixed with first_last_layers_bf16 False, grad_reduce_in_fp32 "
               "False); recipe nemo/collections/llm/recipes/llama4_e16.py pretrain_performance_optimizations "
               "(MegatronTokenDropCallback: capacity 1.0 padded, GC 100, TP-overlap callback) and gpt/model/llama.py "
               "Llama4Experts16Config (48 layers, hidden 5120, 40 heads / 8 groups, experts 16 x 8192 top-1 sigmoid "
               "with probs on the input, shared expert 8192 overlapped, grouped GEMM, alltoall, NoPE every 4th "
               "layer, qk L2 norm, interleaved RoPE with Llama-4 scaling 8, attention chunk 8192 = the sequence, so "
               "every layer's attention is plain causal here)."),
        megatron_flags=SCOUT_FLAGS + COMMON + TOKEN_DROP + FP8_CS,
        flags_source=("NVIDIA/NeMo v2.4.0 (2381f42f69): scripts/performance/llm/pretrain_llama4_e16.py + "
                      "recommended_model_configs/model_configs_gb200.csv + helpers.py, nemo/collections/llm/recipes/"
                      "llama4_e16.py, gpt/model/llama.py, mapped by hand to Megatron-LM argument names"),
        flags_unknown=list(NEMO_UNKNOWN) + [
            "the row's parenthesised figures 10717 / 1167 (and the other rows' parenthesised layouts) are not "
            "explained in the stored excerpt of the page; the first figure is read as the header's FP8 current-"
            "scaling run",
            "moe_aux_loss_coeff: Llama4Config sets none (megatron-core's default 0.0; load-balancing type aux_loss)",
            "attention_chunk_size 8192 has no Megatron-LM flag here; at sequence 8192 one chunk is the whole sequence",
        ],
        flags_notes="NeMo 2 recipe + performance-script fields mapped to Megatron-LM flags.",
        judge_only=True, confidence="medium",
        measured_tokens_per_sec_per_gpu_for_judging=13783.0,
    )


def coarse_moe_rows() -> list[dict]:
    """The coarse-expert MoE rows of the module doc, in the current_runs.json row format."""
    return _nemo_rows() + [_scout_row(), _mcore_row()] + _grok_rows()
