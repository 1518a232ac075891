"""Build ``scripts/validation/memory_cases.json``: published memory outcomes (OOM or ran, with the
measured peak where one was published) of real training configurations, for ``scripts/validate_memory.py``.

Three kinds of case, each with its full configuration as the framework's own arguments (Megatron-LM
flags, or a TorchTitan job TOML as a table; ``primus_settings``: Primus-only keys of a Primus experiment, read by
the Primus reader; ``primus_config``: a Primus TorchTitan experiment as a flattened module -- ``{"framework":
"torchtitan", "overrides": <the resolved job>}`` -- read by the Primus reader as ``build_runs.primus_row`` reads the
current Primus rows, so Primus's own modules apply; ``torchtitan_launch``: a torchtitan 0.3 launch line, ``--module`` /
``--config`` and overrides, read by ``adapters.torchtitan_argv.plan_from_launch``), its device, its source and a quote
of what was reported:

- ``oom``: a configuration reported to run out of device memory (an issue, a PR, or a commit that fixes
  an OOM by a config change: the configuration before the fix);
- ``oom_borderline``: reported to OOM in part of its runs ("flaky OOM ~30-60% of runs"), or an OOM whose
  identical configuration ran on a device a few percent larger (the true peak lies between the two
  capacities): inside any honest error band, so ``tight`` or ``does not fit`` are both right;
- ``ran``: reported to run (the configuration after such a fix, a run near the limit, or a run with a
  published peak).

A case may add ``plan_changes`` (``{"training": {...}}``, applied to the adapter's plan with ``Plan.with_changes``):
plan fields its job table cannot state but the build the run used fixes -- e.g. a torchtitan commit whose per-op
SAC save list has no all-to-all (``training.moe_a2a_collective``) -- each said in its ``read`` with the code it
rests on.

The hand-read cases are :data:`CASES` below (how each was read is in its ``read`` field and in
``README.md``).  Two generated families of published peaks join them:

- the pytorch/torchtitan benchmark rows of ``shared/validation/published_runs.json`` (max over GPUs of
  the reserved peak, GiB), written as the TorchTitan job table of the run;
- Megatron-LM functional tests whose golden values log ``mem-max-allocated-bytes`` (the last rank's
  ``torch.cuda.max_memory_allocated``), their ``model_config.yaml`` ``MODEL_ARGS`` as flags
  (``--mlm GITDIR``, default the mirror ``/work/.mirror/NVIDIA+Megatron-LM/repo``).

Where the shared file or the mirror is absent (CI) the committed rows of that family are kept as they
are.  Flags of the Megatron-Bridge cases are derived from the matching row of ``current_runs.json``
(read from Bridge's perf configs at v0.4.2 by ``build_current_runs.py``) with the edits each case lists,
so the data says what differs from a configuration that ran.

    python scripts/validation/build_memory_cases.py [--mlm GITDIR] [--primus GITDIR]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

HERE = Path(__file__).resolve().parent
OUT = HERE / "memory_cases.json"
CURRENT = HERE / "current_runs.json"
MLM_MIRROR = Path("/work/.mirror/NVIDIA+Megatron-LM/repo")

# ----------------------------------------------------------------------------- flag editing


def _split(flags: list[str]) -> list[tuple[str, list[str]]]:
    """``["--a 1", "--b", "--c x y"]`` (or one token per item) -> ``[("--a", ["1"]), ("--b", []), ...]``."""
    toks = [t for f in flags for t in f.split()]
    out: list[tuple[str, list[str]]] = []
    for t in toks:
        if t.startswith("--"):
            out.append((t, []))
        elif out:
            out[-1][1].append(t)
        else:
            raise ValueError(f"value {t!r} before any flag")
    return out


def derive(base: list[str], set_: Optional[dict[str, Any]] = None, drop: tuple[str, ...] = ()) -> list[str]:
    """``base`` flags with ``set_`` applied (value ``None`` = bare flag, a list = several values; an
    existing flag is replaced in place, a new one appended) and the ``drop`` flags removed."""
    set_ = dict(set_ or {})
    items = [(f, v) for f, v in _split(base) if f not in drop]
    out = []
    for f, v in items:
        if f in set_:
            nv = set_.pop(f)
            v = [] if nv is None else [str(x) for x in nv] if isinstance(nv, (list, tuple)) else [str(nv)]
        out.append(" ".join([f, *v]))
    for f, nv in set_.items():
        v = [] if nv is None else [str(x) for x in nv] if isinstance(nv, (list, tuple)) else [str(nv)]
        out.append(" ".join([f, *v]))
    return out


def _current(row_id: str) -> list[str]:
    rows = {r["id"]: r for r in json.loads(CURRENT.read_text())}
    return list(rows[row_id]["megatron_flags"])


FP8_FLAGS = ("--fp8-format", "--fp8-recipe", "--fp8-param-gather", "--reuse-grad-buf-for-mxfp8-param-ag")
#: Megatron-Bridge's model providers default to no dropout (src/megatron/bridge/models/gpt_provider.py
#: ``hidden_dropout: float = 0.0``, ``attention_dropout: float = 0.0``; llama_bridge.py sets 0.0), and Primus's
#: language_model.yaml sets both to 0.0; Megatron-LM's own default is 0.1, so the cases say it
NO_DROPOUT = {"--attention-dropout": 0.0, "--hidden-dropout": 0.0}

# ----------------------------------------------------------------------------- hand-read cases
# Megatron-Bridge Qwen3-235B-A22B, B200, 64 GPUs (Bridge 25.11 perf configs, scripts/performance at
# 2f633397c^): TP1 PP8 VP2 EP8 ETP1, MBS 1, GBS 1024, no recompute (set_qwen3_common_configs), all-to-all
# dispatcher (no flex backend for B200), moe_a2a_overlap -> overlap_moe_expert_parallel_comm +
# delay_wgrad_compute, embedding and loss counted in the pipeline split (qwen3_235b_a22b_pretrain_config),
# grad reduce in bf16.  Base: the 26.04 B200 row (same model flags, PP8 EP8, 256 GPUs).
_Q235_B200 = dict(drop=FP8_FLAGS, set_={
    **NO_DROPOUT, "--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 8,
    "--num-virtual-stages-per-pipeline-rank": 2, "--expert-model-parallel-size": 8,
    "--micro-batch-size": 1, "--global-batch-size": 1024,
    "--moe-token-dispatcher-type": "alltoall", "--overlap-moe-expert-parallel-comm": None,
    "--delay-wgrad-compute": None})
_Q235_SRC = dict(
    ref="NVIDIA-NeMo/Megatron-Bridge commit 2f633397c (2025-11-21, '235b, 405b OOM resolve'): "
        "scripts/performance/configs/qwen3/workload_base_configs.py",
    url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/commit/2f633397c",
    date="2025-11-21")
_Q235_QUOTE = ("QWEN3_235B_A22B_B200_BF16_BASE_CONFIG (and _FP8_CS_): num_gpus=64, pipeline_model_parallel_size=8, "
               "-    virtual_pipeline_model_parallel_size=2, +    virtual_pipeline_model_parallel_size=4, "
               "expert_model_parallel_size=8, global_batch_size=1024, moe_a2a_overlap=True  [commit: '235b, 405b OOM resolve']")
_Q235_READ = ("Flags = current_runs row mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu (same model and recipe flags) "
              "with the 25.11 B200 workload: TP1 PP8 EP8 on 64 GPUs (DP 8, expert-DP 1), MBS 1, GBS 1024, "
              "all-to-all dispatcher (the B200 preset sets no flex backend), moe_a2a_overlap (helpers.py "
              "set_moe_a2a_overlap_overrides: overlap_moe_expert_parallel_comm, delay_wgrad_compute), no recompute "
              "(set_qwen3_common_configs), grad reduce in bf16; embedding and loss counted in the pipeline split "
              "(qwen3_235b_a22b_pretrain_config), so (94+2)/(8 x VP) layers per virtual stage. The commit fixes the OOM "
              "by VP 2 -> 4; the VP 4 configuration is the ran case. Bridge at 2f633397c ran NeMo 25.11 / mcore of "
              "that date; the v0.4.2 flags of the base row are assumed unchanged for what they share."
              " Dropout 0.0 (Bridge's model providers, gpt_provider.py; the base row leaves Megatron's 0.1).")

# Megatron-Bridge DeepSeek-V3, GB200, 256 GPUs (26.04 cycle, scripts/performance/configs/deepseek at
# 02b574d28^): the V1 GB200 preset with recompute_modules=["mlp"] OOMed in BF16.
#: Megatron-Bridge's BF16 precision (scripts/performance/utils/precision.py get_precision_config('bf16') ->
#: bf16_mixed()) keeps MixedPrecisionConfig.fp8_recipe at its default 'tensorwise' with fp8=None, and
#: MixedPrecisionConfig.setup copies it into the OptimizerConfig (training/mixed_precision.py
#: update_config_with_precision_overrides, v0.4.2 .. 600d069b8): Megatron-LM spells that --fp8-recipe tensorwise
#: without --fp8-format (memory.mcore.master_param_bytes)
BRIDGE_BF16_OPT_RECIPE = {"--fp8-recipe": "tensorwise"}
_DSV3_GB200 = dict(drop=FP8_FLAGS, set_={**NO_DROPOUT, **BRIDGE_BF16_OPT_RECIPE, "--global-batch-size": 2048})
_DSV3_SRC = dict(ref="NVIDIA-NeMo/Megatron-Bridge PR #3067 (commit 02b574d28, 2026-03-31, 'restore bf16 mapping for "
                     "OOM'): scripts/performance/configs/deepseek/deepseek_workload_base_configs.py",
                 url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3067", date="2026-03-31")
_DSV3_QUOTE = ("'recompute mlp OOM for bf16, revert back to recompute mla_up_proj'; diff: "
               "-DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_BF16_V1 = DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_V1 "
               "+DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_BF16_V1 = replace(DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_V1, "
               "recompute_modules=[\"mla_up_proj\"]) (GB200_V1: num_gpus=256, global_batch_size=2048, PP 4, VP 4, EP 64, "
               "hybridep, recompute_modules=[\"mlp\"], cuda_graph transformer_engine attn/moe_router/moe_preprocess)")
_DSV3_READ = ("Flags = current_runs row mbridge2604_gb200_fp8_mx_deepseek_v3_256gpu (the same GB200 V1 preset in "
              "MXFP8, which ran with recompute mlp: PP4 VP4 via the layout Et*4|(t*4|)*14tmL, EP64, MBS 1, HybridEP, "
              "TE CUDA graphs attn/moe_router/moe_preprocess, precision-aware optimizer with bf16 moments and "
              "gradients) without the FP8 flags (BF16 compute) and with the V1 global batch 2048.  The OOM case "
              "keeps --recompute-modules mlp; the ran case is the fix, --recompute-modules mla_up_proj."
              " Dropout 0.0 (Bridge's model providers, gpt_provider.py; the base row leaves Megatron's 0.1).")

# Megatron-Bridge Llama 3 70B SFT, H100, 32 GPUs, FP8 current scaling (scripts/performance at 00919dcf1^).
_L70_SFT = [
    "--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 4", "--num-virtual-stages-per-pipeline-rank 5",
    "--context-parallel-size 1", "--sequence-parallel", "--micro-batch-size 1", "--global-batch-size 32",
    "--num-layers 80", "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64",
    "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--seq-length 4096",
    "--max-position-embeddings 8192", "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5",
    "--disable-bias-linear", "--position-embedding-type rope", "--rotary-base 500000",
    "--untie-embeddings-and-output-weights", "--vocab-size 128256", "--use-mcore-models",
    "--transformer-impl transformer_engine", "--bf16", "--mock-data", "--use-distributed-optimizer",
    "--no-check-for-nan-in-loss-and-grad", "--grad-reduce-in-bf16", "--manual-gc", "--manual-gc-interval 100",
    "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te", "--fp8-format hybrid",
    "--fp8-recipe tensorwise", "--fp8-param-gather", "--tp-comm-overlap",
    "--cuda-graph-impl transformer_engine", "--cuda-graph-scope mlp", "--te-rng-tracker",
    "--recompute-granularity selective", "--recompute-modules core_attn", "--attention-dropout 0.0",
    "--hidden-dropout 0.0", "--overlap-grad-reduce", "--overlap-param-gather",
    "--overlap-param-gather-with-optimizer-step", "--defer-embedding-wgrad-compute", "--wgrad-deferral-limit 22"]
_L70_SRC = dict(ref="NVIDIA-NeMo/Megatron-Bridge PR #3107 (commits 9ad290858, 00919dcf1, 2026-04-01/02): "
                    "scripts/performance/configs/llama/llama3_workload_base_configs.py LLAMA3_70B_SFT_CONFIG_H100_FP8_CS_V1",
                url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3107", date="2026-04-02")
_L70_QUOTE = ("'The test was flaky OOMing ~30-60% of runs on H100 80GB. After bisecting ~50 CI pipelines, confirmed this "
              "is a pre-existing borderline memory issue ... VPP=10 reduces peak activation memory through more virtual "
              "pipeline chunks (2 layers/chunk instead of 4) while keeping TP=4, PP=4, DP=2 unchanged'; table: "
              "'recompute_modules: [core_attn] (baseline) | OOM', '[mlp] | -16% GPU util regression', "
              "'[core_attn, layernorm] | OOM', 'TP=4 PP=4 VPP=10 (DP=2) | Passed'")
_L70_READ = ("_LLAMA3_70B_SFT_CONFIG_H100 at 00919dcf1^: 32 GPUs, TP4 PP4 VP5 (DP 2), MBS 1, GBS 32, SP (tp>1); "
             "FP8_CS_V1 adds cuda_graph_impl transformer_engine scope mlp and recompute_modules [core_attn] "
             "(selective).  llama3_70b_sft_config_h100: seq 4096 packed sequences (THD, read as 4096-token "
             "micro-batches), llama3_70b_sft_config (dist. optimizer, fp32 Adam, CE loss fusion, no precision-aware "
             "optimizer; the TE cross-entropy of utils/overrides.py _set_common_perf_overrides), "
             "set_llama3_common_peft_configs (grad reduce bf16, vocab 128256, disable_parameter_transpose_cache), CommOverlapConfig(tp_comm_overlap, "
             "defer_embedding_wgrad_compute=True, wgrad_deferral_limit=22; training/comm_overlap.py with DP 2 and VP > 1: "
             "overlap grad reduce / param gather with aligned param gather, 128 MiB buckets; utils/overrides.py "
             "set_post_overrides: overlap_param_gather_with_optimizer_step for fp8_cs with DP, PP and VP > 1) and FP8 "
             "current scaling with fp8 param gather and first_last_layers_bf16=False (utils/precision.py "
             "get_precision_config('fp8_cs')).  Architecture: Meta-Llama-3-70B config.")
# The same experiment measured (Megatron-Bridge skills, 'measured' from PR #3107; mirror HEAD c335a9954):
# skills/nemo-mbridge-perf-memory-tuning/SKILL.md "Strategy comparison" and
# skills/nemo-mbridge-perf-activation-recompute/SKILL.md "Historical Measurement".  "Peak Mem (GB)" is Bridge's
# mem-max-allocated-gigabytes (training/utils/train_utils.py report_memory: torch max allocated bytes / 1e9),
# the first such line in the logs (scripts/performance/utils/evaluate.py 'max_alloc'), printed by every
# data-parallel-rank-0 process of the first logged iteration: which pipeline stage it is is not stated, so the
# peaks are listed as approximate (not in the statistics).
_L70_SKILLS = dict(ref="NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-memory-tuning/SKILL.md and "
                       "skills/nemo-mbridge-perf-activation-recompute/SKILL.md (measured in PR #3107; validated_on "
                       "2026-06-29)",
                   url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/skills/nemo-mbridge-perf-memory-tuning/SKILL.md",
                   date="2026-06-29")
_L70_FRAG = ("'In earlier experiments we incorrectly attributed an OOM fix to VPP tuning (VPP 5->10). The actual fix was "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True which eliminated memory fragmentation. The VPP=10 run "
             "actually used slightly more peak memory (60.2 GB vs 58.8 GB)'; table: 'Baseline | 4 | 4 | 5 | 2 | ... | 58.8 | "
             "OOM (fragmentation)', 'More PP | 4 | 8 | 5 | 1 | ... | 53.2', 'More TP | 8 | 4 | 5 | 1 | ... | 50.2', "
             "'Baseline + expandable_segments | 4 | 4 | 5 | 2 | ... | ~59 | Passed'; recompute: 'core_attn baseline ... 58.8 GB "
             "(OOM on rank 0)', 'mlp | 593.6 | 55.6 GB', 'core_attn + layernorm | ~702 | 59.6 GB (OOM on rank 0)'")


def _l70_peak(gb: float) -> dict:
    return dict(gib=round(gb * 1e9 / 2**30, 2), basis="allocated", rank="first", approx=True,
                how=f"{gb} GB (1e9 B) mem-max-allocated, first logged line; the stage is not stated")


_L70_SKIP = ("out of memory by fragmentation, not by allocated bytes: the same flags passed with "
             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True at ~59 GB allocated (Megatron-Bridge "
             "skills/nemo-mbridge-perf-memory-tuning, measured in PR #3107; case "
             "mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn_expandable_segments); the allocator setting is "
             "not a plan field, so the plan would equal the ran case's")

# TorchTitan DeepSeek-V3 16B (torchtitan models/deepseek_v3/train_configs/deepseek_v3_16b.toml at f2191557c^,
# 2025-10-02): FSDP over 8 GPUs, EP 8, per-op SAC, compile of the loss only.
_DS16 = {
    "model": {"name": "deepseek_v3", "flavor": "16B"},
    "optimizer": {"name": "AdamW", "lr": 2.2e-4, "eps": 1e-8},
    "training": {"local_batch_size": 8, "seq_len": 4096, "max_norm": 1.0, "steps": 1000, "dataset": "c4"},
    "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                    "fsdp_reshard_after_forward": "default", "tensor_parallel_degree": 1,
                    "enable_async_tensor_parallel": False, "pipeline_parallel_degree": 1,
                    "pipeline_parallel_schedule": "Interleaved1F1B", "expert_parallel_degree": 8,
                    "expert_tensor_parallel_degree": 1},
    "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
    "compile": {"enable": True, "components": ["loss"]},
}


def _titan(base: dict, **sections: dict) -> dict:
    out = json.loads(json.dumps(base))
    for sec, kv in sections.items():
        out.setdefault(sec, {}).update(kv)
    return out


_DS16_SRC = dict(ref="pytorch/torchtitan issue #1789 (2025-10-02) and the fix PR #1792 (commit f2191557c, 'Set proper "
                     "deepseek-v3 16b parameters')",
                 url="https://github.com/pytorch/torchtitan/issues/1789", date="2025-10-02")
_DS16_READ = ("Job table = torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml at f2191557c^ (the default the "
              "issue ran: local_batch_size 8, seq_len 4096, FSDP over the 8 GPUs, expert_parallel_degree 8, selective "
              "per-op AC, compile of the loss only), 8 x H100 80GB HBM3.  PR #1792 sets local_batch_size 4 'to make the "
              "16B default toml config safe for 80GB H100' (the ran case).  The issue's logged run after 'lowering "
              "local_batch_size' shows 'memory: 73.32GiB(92.70%)' (torchtitan's max reserved): read as the batch-4 run "
              "(the issue does not say which value it lowered to; the fix chose 4).  Routing is not forced balanced "
              "here (real router on c4).")
_DS16B200_SRC = dict(ref="pytorch/torchtitan PR #1993 ('PR for deepseek v3 16B moe notes', 2025-11-05)",
                     url="https://github.com/pytorch/torchtitan/pull/1993", date="2025-11-05")
_DS16B200_QUOTE = ("'Disabling activation checkpointing ... included model in compiling ... since the 16B model can fit on "
                   "8xB200s without EP, removed EP=8 and set it to 1 ... bumped up local batch size from 4 to 6 ... local "
                   "batch size of 8 creates OOM, and doubling seq len to 8192 also creates OOM with local batch size of 4 "
                   "... I tried re-enabling EP=8 to achieve local batch size of 8, however we still OOMed ... bump up to "
                   "seq len = 6144 and local batch size of 4, which created 88% mem ut'")
_DS16B200_READ = ("Job table = the 16B default of that date (deepseek_v3_16b.toml after #1792: local_batch_size 4, seq 4096, "
                  "FSDP 8, EP 8) with the PR's stated changes: activation_checkpoint none, compile of model and loss, "
                  "expert_parallel_degree 1 (8 in the EP 8 variant), and the stated batch / sequence.  8 x B200 (the "
                  "PR's '8xB200'); '88% mem ut' read as torchtitan's logged reserved % of the device's total memory.")

# Megatron-LM research branch (_research/launch, 350M-active ablations on 4 x GH200 96GB, Alps): MoE sbatch
# files at the commits that halved their micro-batch after an OOM.
_R350_COMMON = [
    "--transformer-impl transformer_engine", "--main-grads-dtype fp32", "--num-layers 24", "--hidden-size 1024",
    "--ffn-hidden-size 2560", "--num-attention-heads 16", "--group-query-attention", "--num-query-groups 4",
    "--max-position-embeddings 4096", "--position-embedding-type rope", "--rotary-base 500000",
    "--make-vocab-size-divisible-by 128", "--normalization RMSNorm", "--swiglu", "--untie-embeddings-and-output-weights",
    "--attention-backend auto", "--seq-length 4096", "--global-batch-size 128", "--dataloader-type single",
    "--manual-gc", "--manual-gc-interval 50", "--cross-entropy-loss-fusion", "--disable-bias-linear",
    "--no-check-for-nan-in-loss-and-grad", "--attention-dropout 0.0", "--hidden-dropout 0.0", "--bf16",
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--context-parallel-size 1",
    "--sequence-parallel", "--use-distributed-optimizer", "--overlap-grad-reduce",
    "--tokenizer-type GPT2BPETokenizer", "--vocab-size 50257"]
_R350_MOE = ["--qk-layernorm", "--moe-router-topk 2", "--moe-ffn-hidden-size 1280",
             "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 1e-2", "--moe-z-loss-coeff 1e-3",
             "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall",
             "--expert-model-parallel-size 1", "--optimizer aurora"]
_R350_READ = ("MEGATRON_ARGS of the sbatch file at the parent of the fixing commit (I/O, logging, schedule and "
              "optimizer-hyper-parameter flags left out; GPT-2 BPE vocabulary 50,257 from --tokenizer-type "
              "GPT2BPETokenizer with the GPT-2 vocab file), one node of 4 GH200 96GB (#SBATCH --gpus-per-node=4): "
              "DP 4, EP 1.  --optimizer aurora (Newton-Schulz momentum on 2-D matrices; the 3-D grouped-GEMM expert "
              "weights, most of the parameters, fall through to AdamW): the adapter prices Adam and says so.")

# Megatron-Bridge Qwen3-30B-A3B, H100, 16 GPUs, BF16 (Bridge docs commit da871ee81): the recompute sweep.
_Q30_H100 = dict(drop=FP8_FLAGS + ("--moe-flex-dispatcher-backend", "--moe-hybridep-num-sms"),
                 set_={**NO_DROPOUT, "--moe-token-dispatcher-type": "alltoall"})
_Q30_SRC = dict(ref="NVIDIA-NeMo/Megatron-Bridge PR #3880 (commit da871ee81, 2026-05-18, '[docs] Record parallelism and "
                    "recompute perf notes'): skills/perf-activation-recompute/SKILL.md, docs/training/"
                    "activation-recomputation.md, skills/perf-parallelism-strategies/SKILL.md",
                url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/3880", date="2026-05-18")
_Q30_QUOTE = ("'Qwen3 30B A3B pretrain on 16x H100, BF16, all-to-all dispatch, CUDA graphs off, EP overlap off, MBS=1: "
              "| None | 42.21 s | 61.35 | Baseline | [core_attn] | 42.92 s | 63.14 | [moe_act] | 41.79 s | 58.93 | [mlp] | "
              "41.09 s | 61.35 | ... MBS=2 stress rows with [moe_act] and [mlp] both OOMed after one iteration with about "
              "73.4 GiB already allocated by PyTorch.'  Parallelism note of the same commit: '16 H100 GPUs with BF16, "
              "all-to-all dispatch, EP overlap on, CUDA graphs off, GBS=1024, and MBS=1, TP=1, PP=1, EP=16'")
_Q30_READ = ("Flags = current_runs row mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu (the H100 preset: TP1 PP1 EP16, GBS 1024, "
             "MBS 1) in BF16 (FP8 flags dropped) with the all-to-all dispatcher instead of HybridEP, as the note states.  "
             "'Peak Mem (GB)' is Bridge's report_memory peak_allocated (torch max_memory_allocated / 1e9, "
             "src/megatron/bridge/training/utils/train_utils.py), rank 0: converted to GiB."
             " Dropout 0.0 (Bridge's model providers, gpt_provider.py; the base row leaves Megatron's 0.1).")

# AMD Primus MI325X Llama 3.3 70B FP8 (examples/megatron/configs/MI325X/llama3.3_70B-FP8-pretrain.yaml at
# fd1eeabb + primus/configs/models/megatron/llama3.3_70B.yaml + modules/megatron/pre_trainer.yaml).
_P70 = [
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--expert-model-parallel-size 1",
    "--context-parallel-size 1", "--micro-batch-size 1", "--global-batch-size 24", "--num-layers 80",
    "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64", "--group-query-attention",
    "--num-query-groups 8", "--kv-channels 128", "--seq-length 8192", "--max-position-embeddings 8192", "--swiglu",
    "--normalization RMSNorm", "--norm-epsilon 1e-6", "--disable-bias-linear", "--position-embedding-type rope",
    "--rotary-base 500000", "--untie-embeddings-and-output-weights", "--vocab-size 128256", "--use-mcore-models",
    "--transformer-impl transformer_engine", "--bf16", "--mock-data", "--use-torch-fsdp2", "--overlap-grad-reduce",
    "--no-gradient-accumulation-fusion", "--recompute-granularity full", "--recompute-method block",
    "--recompute-num-layers 72", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
    "--fp8-format hybrid", "--fp8-recipe delayed", "--attention-dropout 0.0", "--hidden-dropout 0.0"]
# Primus-only settings of the experiment (no Megatron-LM flag says them): the case's plan reads them through the
# Primus reader (primus_yaml.primus_training_changes); llama3.3_70B-FP8-pretrain.yaml at 27a162d2 sets
# no_fp8_weight_transpose_cache: true
_P70_PRIMUS = {"no_fp8_weight_transpose_cache": True}
_P70_SRC = dict(ref="AMD-AGI/Primus examples/megatron/configs/MI325X/llama3.3_70B-FP8-pretrain.yaml (commit 27a162d2, "
                    "2026-07-23, 'update mi325x config files for primus-v26.5', #900)",
                url="https://github.com/AMD-AGI/Primus/blob/main/examples/megatron/configs/MI325X/llama3.3_70B-FP8-pretrain.yaml",
                date="2026-07-23")
_P70_QUOTE = ("'# NOTE: reduced from micro_batch_size=3 to 1. At MBS=3 this config both OOMs and, once memory is freed, hits "
              "a deterministic FP8 NaN loss at iter 2 (reproducible with both delayed and tensorwise scaling). MBS=1 trains "
              "stably (matches the working llama3.1_70B FP8 config).'")
_P70_READ = ("The experiment resolved as Primus does (pre_trainer.yaml + llama3.3_70B.yaml + overrides; checked with "
             "primus-launch's Primus reader on an export of the Primus tree): 8 x MI325X (one node), TP1 PP1, torch FSDP2 "
             "(use_torch_fsdp2, use_distributed_optimizer false), full recompute block of 72 of the 80 layers, seq 8192, "
             "GBS 24, FP8 hybrid delayed scaling (TE) with no fp8 weight transpose cache, TE cross-entropy fusion.  "
             "MBS 3 is the OOM case, MBS 1 the ran case.")

_P_Q30 = [
    "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--expert-model-parallel-size 8",
    "--expert-tensor-parallel-size 1", "--context-parallel-size 1", "--micro-batch-size 8", "--global-batch-size 512",
    "--num-layers 48", "--hidden-size 2048", "--ffn-hidden-size 6144", "--num-attention-heads 32",
    "--group-query-attention", "--num-query-groups 4", "--kv-channels 128", "--qk-layernorm", "--seq-length 4096",
    "--max-position-embeddings 4096", "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-6",
    "--disable-bias-linear", "--position-embedding-type rope", "--rotary-base 1000000",
    "--untie-embeddings-and-output-weights", "--vocab-size 151936", "--num-experts 128", "--moe-ffn-hidden-size 768",
    "--moe-router-topk 8", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 1e-3",
    "--moe-router-force-load-balancing", "--moe-router-dtype fp32", "--moe-grouped-gemm", "--moe-permute-fusion",
    "--moe-token-dispatcher-type flex", "--moe-flex-dispatcher-backend deepep", "--use-mcore-models",
    "--transformer-impl transformer_engine", "--bf16", "--mock-data", "--use-distributed-optimizer",
    "--overlap-grad-reduce", "--overlap-param-gather", "--use-precision-aware-optimizer", "--main-grads-dtype bf16",
    "--exp-avg-dtype bf16", "--exp-avg-sq-dtype bf16", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
    "--attention-dropout 0.0", "--hidden-dropout 0.0"]
_P_Q30_READ = ("The experiment resolved as Primus does (pre_trainer.yaml + qwen3_30B_A3B.yaml + overrides; checked with "
               "primus-launch's Primus reader): one node of 8 GPUs, TP1 PP1 EP8, MBS 8, GBS 512, seq 4096, BF16, "
               "distributed optimizer with the precision-aware optimizer (bf16 gradients and moments), Primus-Turbo "
               "DeepEP (read as the DeepEP flex dispatcher), forced balanced routing, legacy grouped GEMM.")

CASES: list[dict] = [
    # ---------------------------------------------------------------- Megatron-Bridge Qwen3-235B B200 64 GPUs
    dict(id="mbridge_qwen3_235b_b200_bf16_64gpu_pp8vp2ep8", outcome="oom", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=64, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu", edits=_Q235_B200, source=_Q235_SRC, quote=_Q235_QUOTE,
         read=_Q235_READ, pair="mbridge_qwen3_235b_b200_bf16_64gpu_pp8vp4ep8"),
    dict(id="mbridge_qwen3_235b_b200_bf16_64gpu_pp8vp4ep8", outcome="ran", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=64, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu",
         edits=dict(drop=_Q235_B200["drop"], set_={**_Q235_B200["set_"], "--num-virtual-stages-per-pipeline-rank": 4}),
         source=_Q235_SRC, quote=_Q235_QUOTE, read=_Q235_READ + " (Ran: the fix's configuration; no peak published.)",
         pair="mbridge_qwen3_235b_b200_bf16_64gpu_pp8vp2ep8"),
    dict(id="mbridge_qwen3_235b_b200_fp8cs_64gpu_pp8vp2ep8", outcome="oom", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=64, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_qwen3_235b_a22b_256gpu",
         edits=dict(drop=_Q235_B200["drop"], set_={**_Q235_B200["set_"], "--fp8-format": "hybrid",
                                                   "--fp8-recipe": "tensorwise", "--fp8-param-gather": None}),
         source=_Q235_SRC, quote=_Q235_QUOTE,
         read=_Q235_READ + " FP8 current scaling (get_precision_config('fp8_cs'): hybrid tensorwise, fp8 param gather).",
         skip_reason=("that the FP8 preset itself ran out of memory is not stated: the commit changed the BF16 and FP8-CS "
                      "presets (FP8-MX aliases FP8-CS) in one diff titled 'OOM resolve', and the 25.11 performance table "
                      "(docs/performance-summary.md at 97ad8cc6f, 2025-12-04) lists FP8-MX at this layout (64 B200, PP 8, "
                      "VP 2, EP 8, MBS 1, GBS 1024) as measured, 3,269 tokens/s/GPU; whether that run had the a2a "
                      "overlap of the OOM preset (added 767255d2f, 2025-11-20) is not recorded: not judged"),
         pair=None),
    # ---------------------------------------------------------------- Megatron-Bridge DeepSeek-V3 GB200 BF16
    dict(id="mbridge_dsv3_gb200_bf16_256gpu_recompute_mlp", outcome="oom", framework="megatron",
         hardware=dict(gpu="GB200 NVL72", plan_gpu="gb200", num_gpus=256, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_deepseek_v3_256gpu", edits=_DSV3_GB200, source=_DSV3_SRC, quote=_DSV3_QUOTE,
         read=_DSV3_READ, pair="mbridge_dsv3_gb200_bf16_256gpu_recompute_mla_up_proj"),
    dict(id="mbridge_dsv3_gb200_bf16_256gpu_recompute_mla_up_proj", outcome="ran", framework="megatron",
         hardware=dict(gpu="GB200 NVL72", plan_gpu="gb200", num_gpus=256, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_deepseek_v3_256gpu",
         edits=dict(drop=FP8_FLAGS, set_={**_DSV3_GB200["set_"], "--recompute-modules": "mla_up_proj"}),
         source=_DSV3_SRC, quote=_DSV3_QUOTE, read=_DSV3_READ, pair="mbridge_dsv3_gb200_bf16_256gpu_recompute_mlp"),
    # ---------------------------------------------------------------- Megatron-Bridge Llama 3 70B SFT H100
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn", outcome="oom_borderline", framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=_L70_SFT, source=_L70_SRC, quote=_L70_QUOTE + "; " + _L70_FRAG, read=_L70_READ,
         measured_peak=_l70_peak(58.8), skip_reason=_L70_SKIP,
         pair="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp10"),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn_expandable_segments", outcome="ran",
         framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=_L70_SFT, source=_L70_SKILLS, quote=_L70_FRAG,
         read=_L70_READ + " The OOM baseline's flags run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
                          "(the skill's 'Baseline + expandable_segments ... ~59 ... Passed').",
         measured_peak=_l70_peak(59.0), pair="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn"),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn_layernorm", outcome="oom_borderline",
         framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=derive(_L70_SFT, {"--recompute-modules": ["core_attn", "layernorm"]}), source=_L70_SRC,
         quote=_L70_QUOTE + "; " + _L70_FRAG,
         read=_L70_READ + " Variant of the PR's table: recompute_modules [core_attn, layernorm] -> OOM.",
         measured_peak=_l70_peak(59.6), skip_reason=_L70_SKIP.replace("at ~59 GB allocated", "(core_attn) at ~59 GB "
                                                                      "allocated; this variant measured 59.6 GB"),
         pair=None),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_mlp", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=derive(_L70_SFT, {"--recompute-modules": "mlp"}), source=_L70_SRC,
         quote=_L70_QUOTE + "; " + _L70_FRAG,
         read=_L70_READ + " Variant of the PR's table: recompute_modules [mlp] ran ('-16% GPU util regression').",
         measured_peak=_l70_peak(55.6), pair=None),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp10", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=derive(_L70_SFT, {"--num-virtual-stages-per-pipeline-rank": 10},
                               drop=("--recompute-granularity", "--recompute-modules")),
         source=_L70_SRC, quote=_L70_QUOTE + "; " + _L70_FRAG,
         read=_L70_READ + " The fix, as committed (00919dcf1): virtual_pipeline_model_parallel_size=10 replaces "
                          "the recompute_modules=[\"core_attn\"] line, so the recipe's recompute_granularity=None "
                          "(llama3.py llama3_70b_sft_config) stands: no recompute.",
         measured_peak=_l70_peak(60.2), pair="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_vp5_core_attn"),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_pp8_vp5_dp1", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=derive(_L70_SFT, {"--pipeline-model-parallel-size": 8},
                               drop=("--overlap-grad-reduce", "--overlap-param-gather",
                                     "--overlap-param-gather-with-optimizer-step")),
         source=_L70_SKILLS, quote=_L70_FRAG,
         read=_L70_READ + " The skill's 'More PP' row: PP 8 (DP 1), the rest as the baseline (comm_overlap.py turns "
                          "the DP overlaps on only with DP > 1).",
         measured_peak=_l70_peak(53.2), pair=None),
    dict(id="mbridge_llama3_70b_sft_h100_fp8cs_32gpu_tp8_vp5_dp1", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB (DGX-H100)", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         megatron_flags=derive(_L70_SFT, {"--tensor-model-parallel-size": 8},
                               drop=("--overlap-grad-reduce", "--overlap-param-gather",
                                     "--overlap-param-gather-with-optimizer-step")),
         source=_L70_SKILLS, quote=_L70_FRAG,
         read=_L70_READ + " The skill's 'More TP' row: TP 8 (DP 1), the rest as the baseline.",
         measured_peak=_l70_peak(50.2), pair=None),
    # ---------------------------------------------------------------- Megatron-Bridge Qwen3-30B B200 full-iteration CUDA graph
    dict(id="mbridge_qwen3_30b_b200_fp8mx_8gpu_full_iteration_cg_mbs4", outcome="oom_borderline", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu",
         edits=dict(drop=("--cuda-graph-scope",), set_={
             **NO_DROPOUT, "--cuda-graph-impl": "local", "--cuda-graph-scope": "full_iteration", "--moe-paged-stash": None,
             "--moe-expert-rank-capacity-factor": 1.5, "--moe-paged-stash-buffer-size-factor-cuda": 1.2,
             "--moe-pad-experts-for-cuda-graph-inference": None, "--use-transformer-engine-op-fuser": None,
             "--moe-mlp-glu-interleave-size": 32, "--overlap-moe-expert-parallel-comm": None,
             "--delay-wgrad-compute": None}),
         source=dict(ref="NVIDIA-NeMo/Megatron-Bridge PR #5356 (commit 9c0cd2575, 2026-08-06, 'fix(recipe): Qwen3-30B "
                         "B200 fp8mx OOMs with full-iteration — use partial CG'): src/megatron/bridge/perf_recipes/qwen/b200/"
                         "qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_b200_fp8mx_config",
                     url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/5356", date="2026-08-06"),
         quote=("'Partial (TE-scoped) CUDA graph, not full-iteration: B200's 180 GB cannot hold the full-iteration graph for "
                "this model — it OOMs at every workable config (TP1/EP8 and TP2/EP8, mbs4 and mbs2, even with "
                "defragmentation). Full-iteration is a B300/GB200 feature (279/186 GB); B200 ships the partial-CG design.'"),
         read=("Flags = current_runs row mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu (the same 8-GPU B200 MXFP8 recipe, TP1 "
               "EP8 MBS 4 GBS 512, partial TE CUDA graphs, which ran) with _enable_hybridep_full_iteration_mxfp8 of the "
               "recipe before the fix (qwen/common.py at 9c0cd2575^): cuda_graph_impl full_iteration (Megatron "
               "--cuda-graph-impl local --cuda-graph-scope full_iteration), paged stash with expert-rank capacity factor "
               "1.5 and CUDA buffer factor 1.2, padded experts, TE op fuser, GLU interleave 32, EP overlap with delayed "
               "wgrad.  The ran counterpart is the current_runs row itself."),
         pair="mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu",
         borderline_reason=("the identical recipe ran with the full-iteration graph on 8 GB200 at MBS 4 (Bridge 26.08 "
                            "table, case mbridge2608_qwen3_30b_gb200_fp8mx_8gpu_full_iteration_mbs4): the true peak lies "
                            "between the B200's 178.4 and the GB200's 184.3 GiB, within 3.3 % of the capacity")),
]
CASES.append(dict(CASES[-1], id="mbridge_qwen3_30b_b200_fp8mx_8gpu_full_iteration_cg_mbs2", outcome="oom",
                  edits=dict(drop=CASES[-1]["edits"]["drop"],
                             set_={**CASES[-1]["edits"]["set_"], "--micro-batch-size": 2}),
                  read=CASES[-1]["read"] + " Variant: MBS 2 (the comment's 'mbs2'), GBS 512.", pair=None,
                  borderline_reason=None,
                  skip_reason=("the MBS 2 OOM is a commit comment's summary of tries ('mbs4 and mbs2'), with no log and "
                               "no pairing of TP and MBS; it contradicts the runs of the same recipe: MBS 4 ran on GB200 "
                               "(184.3 GiB), so MBS 2 would OOM on 178.4 GiB only if two 4,096-token samples freed under "
                               "5.9 GiB, where the published H100 MBS 1 / 2 pair of this model implies 20-24 GiB per "
                               "sample (scripts/validation/MEMORY.md round 8): not judged")))
# The same recipe ran with the full-iteration graph on GB200 (MBS 4) and GB300 (MBS 8): Megatron-Bridge's 26.08
# performance summary, measured with the recipes of that commit (both call _enable_hybridep_full_iteration_mxfp8).
_Q30_2608 = dict(ref="NVIDIA-NeMo/Megatron-Bridge commit 09ce5f13c (2026-08-11, 'docs: update performance summary for "
                     "26.08 (#5496)'): docs/performance-summary.md, table 'Model: Qwen3_30B_a3B'; recipes at that commit: "
                     "src/megatron/bridge/perf_recipes/qwen/{gb200,gb300}/qwen3_moe.py "
                     "qwen3_30b_a3b_pretrain_8gpu_{gb200,gb300}_fp8mx_config",
                 url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/pull/5496", date="2026-08-11")
_Q30_2608_READ = ("Flags = current_runs row {base} (the same 8-GPU MXFP8 recipe at 26.04 with partial TE graphs) with "
                  "the edits of the B200 full-iteration case: the 26.08 recipe calls _enable_hybridep_full_iteration_mxfp8 "
                  "(qwen/common.py at 09ce5f13c, the helper identical to 9c0cd2575^), so it is the B200 recipe before "
                  "PR #5356 but for the NVLink-domain environment (NVLINK_DOMAIN_SIZE 72, USE_MNNVL 1; "
                  "NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN 8 as on B200) and, on GB300, MBS 8.  It ran: the table "
                  "publishes its throughput.")
CASES += [
    dict(id="mbridge2608_qwen3_30b_gb200_fp8mx_8gpu_full_iteration_mbs4", outcome="ran", framework="megatron",
         hardware=dict(gpu="GB200 NVL72 (DGX-GB200)", plan_gpu="gb200", num_gpus=8, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_qwen3_30b_a3b_8gpu", edits=CASES[-2]["edits"], source=_Q30_2608,
         quote=("'| DGX-GB200 | 8 | MXFP8 | 512 | 4 | 4096 | 1 | 1 | 1 | n/a | 8 | 39936 | 923 |'; recipe: "
                "'cfg.train.micro_batch_size = 4 ... _enable_hybridep_full_iteration_mxfp8(cfg)'"),
         read=_Q30_2608_READ.format(base="mbridge2604_gb200_fp8_mx_qwen3_30b_a3b_8gpu"),
         pair="mbridge_qwen3_30b_b200_fp8mx_8gpu_full_iteration_cg_mbs4"),
    dict(id="mbridge2608_qwen3_30b_gb300_fp8mx_8gpu_full_iteration_mbs8", outcome="ran", framework="megatron",
         hardware=dict(gpu="GB300 NVL72 (DGX-GB300)", plan_gpu="gb300", num_gpus=8, gpus_per_node=4),
         base="mbridge2604_gb300_fp8_mx_qwen3_30b_a3b_8gpu", edits=CASES[-2]["edits"], source=_Q30_2608,
         quote=("'| DGX-GB300 | 8 | MXFP8 | 512 | 8 | 4096 | 1 | 1 | 1 | n/a | 8 | 44544 | 1029 |'; recipe: "
                "'cfg.train.micro_batch_size = 8 ... _enable_hybridep_full_iteration_mxfp8(cfg)'"),
         read=_Q30_2608_READ.format(base="mbridge2604_gb300_fp8_mx_qwen3_30b_a3b_8gpu"), pair=None),
]
CASES += [
    # ---------------------------------------------------------------- Megatron-Bridge Qwen3-30B H100 BF16 recompute sweep
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs1_norecompute", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu", edits=_Q30_H100, source=_Q30_SRC, quote=_Q30_QUOTE,
         read=_Q30_READ, measured_peak=dict(gib=round(61.35e9 / 2**30, 2), basis="allocated", rank="first",
                                           how="61.35 GB (1e9 B) peak allocated, rank 0")),
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs1_moe_act", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu",
         edits=dict(drop=_Q30_H100["drop"], set_={**_Q30_H100["set_"], "--recompute-granularity": "selective",
                                                  "--recompute-modules": "moe_act"}),
         source=_Q30_SRC, quote=_Q30_QUOTE, read=_Q30_READ,
         measured_peak=dict(gib=round(58.93e9 / 2**30, 2), basis="allocated", rank="first",
                            how="58.93 GB (1e9 B) peak allocated, rank 0")),
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs1_core_attn", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu",
         edits=dict(drop=_Q30_H100["drop"], set_={**_Q30_H100["set_"], "--recompute-granularity": "selective",
                                                  "--recompute-modules": "core_attn"}),
         source=_Q30_SRC, quote=_Q30_QUOTE, read=_Q30_READ,
         measured_peak=dict(gib=round(63.14e9 / 2**30, 2), basis="allocated", rank="first",
                            how="63.14 GB (1e9 B) peak allocated, rank 0")),
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs2_moe_act", outcome="oom", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu",
         edits=dict(drop=_Q30_H100["drop"], set_={**_Q30_H100["set_"], "--micro-batch-size": 2,
                                                  "--recompute-granularity": "selective", "--recompute-modules": "moe_act"}),
         source=_Q30_SRC, quote=_Q30_QUOTE, read=_Q30_READ, pair="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs1_moe_act"),
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_mbs2_mlp", outcome="oom", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu",
         edits=dict(drop=_Q30_H100["drop"], set_={**_Q30_H100["set_"], "--micro-batch-size": 2,
                                                  "--recompute-granularity": "selective", "--recompute-modules": "mlp"}),
         source=_Q30_SRC, quote=_Q30_QUOTE, read=_Q30_READ, pair=None),
    # ---------------------------------------------------------------- TorchTitan DeepSeek-V3 16B, 8 x H100
    dict(id="titan_dsv3_16b_h100_8gpu_lbs8_ep8", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="H100 80GB HBM3", plan_gpu="h100-sxm", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_DS16, source=_DS16_SRC,
         quote=("'With the current configuration of DeepSeek-V3-16B, we run into OOM with the default command: "
                "CONFIG_FILE=\"./torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml\" ./run_train.sh, on 8 x "
                "H100 80GB HBM3.'"), read=_DS16_READ, pair="titan_dsv3_16b_h100_8gpu_lbs4_ep8"),
    dict(id="titan_dsv3_16b_h100_8gpu_lbs4_ep8", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB HBM3", plan_gpu="h100-sxm", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, training={"local_batch_size": 4}), source=_DS16_SRC,
         quote=("'step: 10 ... memory: 73.32GiB(92.70%) tps: 11,636' (the issue's run after lowering local_batch_size); "
                "PR #1792: '-local_batch_size = 8 +local_batch_size = 4'"),
         read=_DS16_READ, measured_peak=dict(gib=73.32, basis="reserved", rank="first", approx=True,
                                             how="torchtitan memory log (max reserved, rank 0); batch 4 assumed")),
    dict(id="titan_dsv3_16b_h100_8gpu_lbs8_ep1", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB HBM3", plan_gpu="h100-sxm", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, parallelism={"expert_parallel_degree": 1}), source=_DS16_SRC,
         quote=("'If we set the expert_parallel_degree to 1, instead of lowering local_batch_size, the workload runs as well, "
                "but at almost 96% memory usage'"),
         read=_DS16_READ + " '96%' of the device's total memory (73.32 GiB / 0.9270 = 79.1 GiB): about 75.9 GiB reserved.",
         measured_peak=dict(gib=round(0.96 * 73.32 / 0.9270, 1), basis="reserved", rank="first", approx=True,
                            how="'almost 96%' of torch total_memory (79.1 GiB from the issue's 73.32GiB(92.70%))")),
    # ---------------------------------------------------------------- TorchTitan DeepSeek-V3 16B, 8 x B200, no AC
    dict(id="titan_dsv3_16b_b200_8gpu_noac_lbs8_ep1", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="B200", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, activation_checkpoint={"mode": "none"}, compile={"components": ["model", "loss"]},
                                  parallelism={"expert_parallel_degree": 1}, training={"local_batch_size": 8}),
         source=_DS16B200_SRC, quote=_DS16B200_QUOTE, read=_DS16B200_READ, pair="titan_dsv3_16b_b200_8gpu_noac_lbs6_ep1"),
    dict(id="titan_dsv3_16b_b200_8gpu_noac_lbs8_ep8", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="B200", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, activation_checkpoint={"mode": "none"}, compile={"components": ["model", "loss"]},
                                  parallelism={"expert_parallel_degree": 8}, training={"local_batch_size": 8}),
         source=_DS16B200_SRC, quote=_DS16B200_QUOTE, read=_DS16B200_READ, pair=None),
    dict(id="titan_dsv3_16b_b200_8gpu_noac_seq8192_lbs4_ep1", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="B200", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, activation_checkpoint={"mode": "none"}, compile={"components": ["model", "loss"]},
                                  parallelism={"expert_parallel_degree": 1},
                                  training={"local_batch_size": 4, "seq_len": 8192}),
         source=_DS16B200_SRC, quote=_DS16B200_QUOTE, read=_DS16B200_READ,
         pair="titan_dsv3_16b_b200_8gpu_noac_seq6144_lbs4_ep1"),
    dict(id="titan_dsv3_16b_b200_8gpu_noac_lbs6_ep1", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="B200", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, activation_checkpoint={"mode": "none"}, compile={"components": ["model", "loss"]},
                                  parallelism={"expert_parallel_degree": 1}, training={"local_batch_size": 6}),
         source=_DS16B200_SRC, quote=_DS16B200_QUOTE, read=_DS16B200_READ, pair="titan_dsv3_16b_b200_8gpu_noac_lbs8_ep1"),
    dict(id="titan_dsv3_16b_b200_8gpu_noac_seq6144_lbs4_ep1", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="B200", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_DS16, activation_checkpoint={"mode": "none"}, compile={"components": ["model", "loss"]},
                                  parallelism={"expert_parallel_degree": 1},
                                  training={"local_batch_size": 4, "seq_len": 6144}),
         source=_DS16B200_SRC, quote=_DS16B200_QUOTE, read=_DS16B200_READ,
         measured_peak=dict(fraction_of_device=0.88, basis="reserved", rank="first", approx=True,
                            how="'88% mem ut' (torchtitan's logged % of torch total_memory)"),
         pair="titan_dsv3_16b_b200_8gpu_noac_seq8192_lbs4_ep1"),
    # ---------------------------------------------------------------- Megatron-LM research 350M on 4 x GH200
    dict(id="mlm_research_350m_moe8e_gh200_4gpu_mbs16", outcome="oom", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=_R350_COMMON + _R350_MOE + ["--num-experts 8", "--micro-batch-size 16"],
         source=dict(ref="NVIDIA/Megatron-LM commit cb9904992d (2026-05-10, 'MoE configs: MBS 16 -> 8 to fit MoE activation "
                         "overhead'): _research/launch/transformer-pp-350m-ablation-aurora-qkn-moe.sbatch",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/cb9904992d", date="2026-05-10"),
         quote=("'First run (job 2079994) OOM'd in fused cross-entropy at MBS=16: MoE permuted activations (top-k=2 doubles "
                "per-token activation count) + grouped-GEMM workspace + replicated expert weights pushed past 96GB. Halving "
                "MBS to 8 (4 grad-accum steps instead of 2 at GBS=128, DP=4) restores headroom.'"),
         read=_R350_READ, pair="mlm_research_350m_moe8e_gh200_4gpu_mbs8"),
    dict(id="mlm_research_350m_moe8e_gh200_4gpu_mbs8", outcome="ran", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=_R350_COMMON + _R350_MOE + ["--num-experts 8", "--micro-batch-size 8"],
         source=dict(ref="NVIDIA/Megatron-LM commits cb9904992d and bec254e7cf (2026-05-10: the 8E top-2 rows of the sweep, "
                         "'full results in PR description')",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/bec254e7cf", date="2026-05-10"),
         quote="'Halving MBS to 8 ... restores headroom'; 'Promoted from a sweep across num_experts in {8, 16, 32, 64} x topk in {2, 4}'",
         read=_R350_READ, pair="mlm_research_350m_moe8e_gh200_4gpu_mbs16"),
    dict(id="mlm_research_350m_moe64e_gh200_4gpu_mbs8", outcome="oom", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=_R350_COMMON + _R350_MOE + ["--num-experts 64", "--micro-batch-size 8"],
         source=dict(ref="NVIDIA/Megatron-LM commit 1bbce36f16 (2026-05-10, 'MoE 64E: MBS 8 -> 4 to fit 96GB'): "
                         "_research/launch/transformer-pp-350m-ablation-aurora-qkn-moe-64e.sbatch",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/1bbce36f16", date="2026-05-10"),
         quote=("'64E job 2081806 OOM'd at the fused-CE step: ~12 GB bf16 weights + ~12 GB bf16 grads replicated on each "
                "GPU under DP=4 EP=1, plus MoE permute activations and the 6 GB fp32 logits buffer pushed past 96 GB. "
                "Halving MBS to 4 (8 grad-accum steps at GBS=128) cuts activation memory enough to make room.'"),
         read=_R350_READ, pair="mlm_research_350m_moe64e_gh200_4gpu_mbs4"),
    dict(id="mlm_research_350m_moe64e_gh200_4gpu_mbs4", outcome="ran", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=_R350_COMMON + _R350_MOE + ["--num-experts 64", "--micro-batch-size 4"],
         source=dict(ref="NVIDIA/Megatron-LM commit b3f152d79b (2026-05-10, 'MoE 64E: bump SLURM time 2.5h->4.5h')",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/b3f152d79b", date="2026-05-10"),
         quote="'64E at MBS=4 runs ~6.6s/iter (vs ~3.3s at 32E MBS=8)'",
         read=_R350_READ, pair="mlm_research_350m_moe64e_gh200_4gpu_mbs8"),
    dict(id="mlm_research_350m_dense_adamw_gh200_4gpu_mbs16", outcome="ran", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=_R350_COMMON + ["--micro-batch-size 16", "--optimizer adam", "--overlap-param-gather"],
         source=dict(ref="NVIDIA/Megatron-LM _research/leaderboards/350m-ablation/runs/05-adamw-lr1e-3.sbatch (at bec254e7cf) "
                         "and commit bcaed50b69 (2026-05-09)",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/bcaed50b69", date="2026-05-09"),
         quote=("bcaed50b69: 'Standard transformer at hidden=1024, MBS=16, seq=4096 fits comfortably on GH200 (95 GiB)'; the "
                "AdamW dense run is a leaderboard row"),
         read=("MEGATRON_ARGS of the leaderboard's AdamW dense run (same 24-layer, 1024-wide Transformer++ without experts "
               "and without QK norm, AdamW), 4 x GH200, DP 4, MBS 16."),
         pair=None),
    # ---------------------------------------------------------------- AMD Primus MI325X
    dict(id="primus_mi325x_llama33_70b_fp8_fsdp2_8gpu_mbs3", outcome="oom", framework="megatron",
         hardware=dict(gpu="MI325X 256GB", plan_gpu="mi325x", num_gpus=8, gpus_per_node=8),
         megatron_flags=derive(_P70, {"--micro-batch-size": 3}), source=_P70_SRC, quote=_P70_QUOTE, read=_P70_READ,
         primus_settings=_P70_PRIMUS,
         pair="primus_mi325x_llama33_70b_fp8_fsdp2_8gpu_mbs1"),
    dict(id="primus_mi325x_llama33_70b_fp8_fsdp2_8gpu_mbs1", outcome="ran", framework="megatron",
         hardware=dict(gpu="MI325X 256GB", plan_gpu="mi325x", num_gpus=8, gpus_per_node=8),
         megatron_flags=_P70, source=_P70_SRC, quote=_P70_QUOTE, read=_P70_READ,
         primus_settings=_P70_PRIMUS,
         pair="primus_mi325x_llama33_70b_fp8_fsdp2_8gpu_mbs3"),
    dict(id="primus_mi355x_qwen3_30b_bf16_8gpu_mbs8_norecompute", outcome="ran", framework="megatron",
         hardware=dict(gpu="MI355X 288GB", plan_gpu="mi355x", num_gpus=8, gpus_per_node=8),
         megatron_flags=_P_Q30,
         source=dict(ref="AMD-AGI/Primus PR #1011 (commit b0a0e4da, 2026-08-21, 'Qwen3-30B MI355X: adopt tuned defaults "
                         "(recompute/batch)'): examples/megatron/configs/MI355X/qwen3_30B_A3B-BF16-pretrain.yaml",
                     url="https://github.com/AMD-AGI/Primus/pull/1011", date="2026-08-21"),
         quote=("'Qwen3-30B BF16 | recompute_num_layers 5 -> 0 | 24,623 (published ref) | 29,209 | +19% ... At "
                "recompute_num_layers: 0 these configs run at ~82-84% peak HBM with this flag [expandable_segments]; "
                "without it, allocator fragmentation may push them to OOM.'"),
         read=_P_Q30_READ + " Measured on one MI355X node; '~82-84% peak HBM' read as 83% of the device, reserved basis.",
         measured_peak=dict(fraction_of_device=0.83, basis="reserved", rank="max", approx=True,
                            how="'~82-84% peak HBM' (expandable_segments on)")),
    dict(id="primus_mi325x_qwen3_30b_bf16_8gpu_mbs8_recompute5", outcome="ran", framework="megatron",
         hardware=dict(gpu="MI325X 256GB", plan_gpu="mi325x", num_gpus=8, gpus_per_node=8),
         megatron_flags=_P_Q30 + ["--recompute-granularity full", "--recompute-method block", "--recompute-num-layers 5"],
         source=dict(ref="AMD-AGI/Primus examples/megatron/configs/MI325X/qwen3_30B_A3B-BF16-pretrain.yaml (commit 27a162d2, "
                         "2026-07-23, #900)",
                     url="https://github.com/AMD-AGI/Primus/blob/main/examples/megatron/configs/MI325X/qwen3_30B_A3B-BF16-pretrain.yaml",
                     date="2026-07-23"),
         quote=("'use_turbo_grouped_gemm ... was tested but uses more device memory than the legacy grouped GEMM here and "
                "OOMs at MBS=8 (only 5 recompute layers), so this model stays on the legacy grouped-GEMM path.'"),
         read=_P_Q30_READ + " The shipped MI325X config (legacy grouped GEMM, full recompute of 5 layers): ran.",
         pair=None),
    dict(id="primus_mi325x_qwen3_30b_bf16_8gpu_mbs8_recompute5_turbo_gemm", outcome="oom", framework="megatron",
         hardware=dict(gpu="MI325X 256GB", plan_gpu="mi325x", num_gpus=8, gpus_per_node=8),
         megatron_flags=_P_Q30 + ["--recompute-granularity full", "--recompute-method block", "--recompute-num-layers 5"],
         source=dict(ref="AMD-AGI/Primus examples/megatron/configs/MI325X/qwen3_30B_A3B-BF16-pretrain.yaml (27a162d2)",
                     url="https://github.com/AMD-AGI/Primus/blob/main/examples/megatron/configs/MI325X/qwen3_30B_A3B-BF16-pretrain.yaml",
                     date="2026-07-23"),
         quote="'use_turbo_grouped_gemm ... uses more device memory than the legacy grouped GEMM here and OOMs at MBS=8'",
         read="Same as the shipped config with Primus-Turbo's grouped GEMM instead of the legacy one.",
         skip_reason=("differs from a configuration that ran only by the grouped-GEMM kernel (Primus-Turbo vs legacy): "
                      "its workspace is not a plan field, so the plan would equal the ran case's"), pair=None),
    # ---------------------------------------------------------------- reports kept, not judged
    dict(id="automodel_llama33_70b_sft_h100_32gpu_pp8", outcome="oom", framework="automodel",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=32, gpus_per_node=8),
         source=dict(ref="NVIDIA-NeMo/Automodel PR #2673 (2026-06-20, 'fix(llama3_3): reduce pp_microbatch_size to fit 70b "
                         "squad on h100')", url="https://github.com/NVIDIA-NeMo/Automodel/pull/2673", date="2026-06-20"),
         quote=("'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 4 has a total capacity of "
                "79.11 GiB of which 1.07 GiB is free. ... 73.15 GiB is allocated by PyTorch ... The recipe is configured for "
                "PP=8 / dp=4 (32 GPUs), packed_sequence_size=1024, pp_microbatch_size=4'"),
         read="NeMo AutoModel (FSDP2 + torch pipelining on the HF model): not a framework primus-launch reads.",
         skip_reason="NeMo AutoModel recipe: no primus-launch adapter reads it", pair=None),
    dict(id="nemo2_qwen3_30b_h100_16gpu_pp2vp24ep8", outcome="oom", framework="nemo",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         source=dict(ref="NVIDIA-NeMo/NeMo issue #14850 (2025-09-30)", url="https://github.com/NVIDIA-NeMo/NeMo/issues/14850",
                     date="2025-09-30"),
         quote=("'pre_train,qwen3,30b_a3b,h100,bf16,16.0,4096.0,1.0,2.0,1.0,8.0,24.0,1.0,512.0,1.0 ... tp_size: 1 pp_size: 2 "
                "cp_size: 1 ep_size: 8 vp_size: 24 mbs: 1 gbs: 512 ... I got OOM error'; later: 'I changed VP from 24 to 2, "
                "and still got the OOM error'"),
         read="NeMo 2 performance script (25.07 container) with the user's own data and checkpointing added.",
         skip_reason=("the NeMo 25.07 recipe defaults (recompute, dispatcher, fusions, grad dtype) are not stated in the "
                      "report, and the user changed data and checkpointing"), pair=None),
]

# ---------------------------------------------------------------- round 11 (branch oom7): held-out reports
# pytorch/torchtitan PR #808 (float8 rowwise via recipe lookup; description 2025-01-27, merged 069bae286 2025-02-27):
# three logged Llama 3 8B runs on 8 H100s with the preset of that date (train_configs/llama3_8b.toml at 690f299d3:
# batch_size 1, seq_len 8192, FSDP over the 8 GPUs, selective per-op AC, AdamW) plus the stated CLI flags.
_PR808_SRC = dict(ref="pytorch/torchtitan PR #808 ('add configuration for float8 with rowwise scaling, via recipe lookup', "
                      "description 2025-01-27, merged as 069bae286 on 2025-02-27)",
                  url="https://github.com/pytorch/torchtitan/pull/808", date="2025-01-27")
_PR808_READ = ("Job table = train_configs/llama3_8b.toml at 690f299d3 (the preset the PR's commands name: batch_size 1, "
               "seq_len 8192, data_parallel_shard_degree -1 over 8 GPUs, selective_ac_option 'op', AdamW) with the PR's "
               "flags.  torchtitan of that date compiles the model only (train.py:137-138 leaves the loss compile "
               "commented out).  Device: 8 H100s whose logged share gives 47.65 / 0.5016 = 95.0 GiB of total memory, the "
               "96 GB H100 of the Dec-2024 benchmark rows; 'memory:' is torchtitan's max reserved on rank 0.")
_PR808_JOB = {"model": {"name": "llama3", "flavor": "8B"},
              "training": {"local_batch_size": 1, "seq_len": 8192},
              "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                              "tensor_parallel_degree": 1},
              "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
              "compile": {"enable": True, "components": ["model"]},
              "optimizer": {"name": "AdamW"}}
_PR808_HW = dict(gpu="H100 96GB (logged total 95.0 GiB)", plan_gpu="h100-sxm-96gb-500w", num_gpus=8, gpus_per_node=8)


def _pr808_peak(gib: float, pct: str) -> dict:
    return dict(gib=gib, basis="reserved", rank="first", how=f"'memory: {gib}GiB({pct})' at step 20/30 (rank 0 max reserved)")


# AMD's Primus + TorchTitan benchmark configurations (ROCm docs "Training a model with Primus and PyTorch" for
# rocm/primus:v25.11, whose image "hosts verified commit c4c083de of the Primus repository": "This Docker image is
# optimized for specific model configurations outlined below ... AMD doesn't test configurations and run conditions
# outside those described"; the v25.10 page gives the same local batch sizes), read through the Primus reader as
# flattened TorchTitan modules of the experiments at c4c083de (examples/torchtitan/configs/{MI300X,MI355X}/
# {llama3.1_8B-BF16,llama3.1_70B-BF16,deepseek_v3_16b}-pretrain.yaml over primus/configs/modules/torchtitan/
# pre_trainer.yaml and the model presets; MI325X runs the MI300X file with the page's --training.local_batch_size).
# Checked: each flattened module gives the plan the Primus reader reads from the experiment in a c4c083de checkout
# (``primus_yaml.load_primus_yaml``, source aside).
_PRIMUS_TT_TURBO = {"enable_primus_turbo": True, "use_turbo_attention": True, "use_classic_attention": False,
                    "use_turbo_async_tp": True, "use_turbo_mx_linear": True, "use_turbo_float8_linear": True,
                    "use_turbo_grouped_mm": False, "enable_attention_float8": False}


def _primus_tt(flavor: str, lbs: int, ac: str) -> dict:
    """The flattened Primus TorchTitan module of a Llama 3.1 BF16 experiment (see above)."""
    return {"framework": "torchtitan", "overrides": {
        "model": {"name": "llama3", "flavor": flavor},
        "training": {"local_batch_size": lbs, "seq_len": 8192, "mixed_precision_param": "bfloat16",
                     "mixed_precision_reduce": "float32", "max_norm": 1.0, "steps": 50},
        "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1, "tensor_parallel_degree": 1,
                        "context_parallel_degree": 1, "pipeline_parallel_degree": 1, "expert_parallel_degree": 1,
                        "fsdp_reshard_after_forward": "default"},
        "activation_checkpoint": {"mode": ac},
        "compile": {"enable": True, "components": ["model", "loss"]},
        "optimizer": {"name": "AdamW", "implementation": "fused"},
        "primus_turbo": dict(_PRIMUS_TT_TURBO)}}


def _primus_tt_dsv3_16b(lbs: int) -> dict:
    """The flattened Primus TorchTitan module of examples/torchtitan/configs/{MI355X,MI300X}/deepseek_v3_16b-pretrain.yaml
    at c4c083de (over pre_trainer.yaml and the deepseek_v3_16b model preset)."""
    return {"framework": "torchtitan", "overrides": {
        "model": {"name": "deepseek_v3", "flavor": "16B"},
        "training": {"local_batch_size": lbs, "seq_len": 4096, "mixed_precision_param": "bfloat16",
                     "mixed_precision_reduce": "float32", "max_norm": 1.0, "debug_moe_force_load_balance": True,
                     "steps": 15},
        "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1, "tensor_parallel_degree": 1,
                        "context_parallel_degree": 1, "pipeline_parallel_degree": 1, "expert_parallel_degree": 8,
                        "expert_tensor_parallel_degree": 1, "fsdp_reshard_after_forward": "default"},
        "activation_checkpoint": {"mode": "none"},
        "compile": {"enable": True, "components": ["model", "loss"]},
        "optimizer": {"name": "AdamW", "implementation": "fused", "lr": 2.2e-4, "eps": 1.0e-8},
        "primus_turbo": dict(_PRIMUS_TT_TURBO, use_turbo_mx_linear=False, use_turbo_float8_linear=False,
                             use_turbo_grouped_mm=True, use_moe_fp8=False, use_classic_attention=True)}}


_PRIMUS349_READ = (
    "Primus release/v25.10 between d80b8d1f (2025-11-26) and 07c68e33 (2025-12-08): the issue's traceback lines "
    "(primus/modules/trainer/torchtitan/pre_trainer.py:92 'self.trainer.train()', primus/pretrain.py:183 / 213, "
    "primus/cli/main.py) match only that range of the branch the rocm/primus:v25.10 image was built from, whose "
    "torchtitan submodule is 5fb7cc2e (its train.py:492 'loss.backward()', :512, :612 are the traceback's); the "
    "image: ROCm 7.1.0, PyTorch 2.10.0.dev20251112+rocm7.1, Python 3.10 (ROCm docs data primus-pytorch-benchmark-"
    "models.yaml for rocm/primus:v25.10; the traceback's /opt/venv/lib/python3.10).  "
    "examples/torchtitan/configs/MI355X/llama3.1_8B-BF16-pretrain.yaml over primus/configs/modules/torchtitan/"
    "pre_trainer.yaml: llama3 8B (Llama 3.1 8B), local_batch_size 3, seq_len 8192, activation_checkpoint none, "
    "compile model + loss, FSDP over the 8 GPUs (data_parallel_shard_degree -1), AdamW (fused), bf16 params / fp32 "
    "reduce, Primus-Turbo on: read as a flattened Primus module by the Primus reader (Primus's llama3 Attention, "
    "primus/backends/torchtitan/models/llama3/model/model.py, comments out torchtitan's repeat_kv and the "
    "primus_turbo converter puts Primus-Turbo's CK flash attention -- custom op primus_turbo::attention_aiter_csrc_"
    "forward_impl, saving q, k, v, out, lse -- in place of SDPA: no s x s tensor).  Device: 8 x MI350 (the issue's "
    "'GPUs: 8* MI350', read as MI350X 288 GB); the OOM message gives a torch-visible total of 251.98 GiB (the "
    "hardware DB's MI350X: 287.98 GiB; the verdict uses the DB's).  The failed allocation, 11.74 GiB = 3 x 8192 x "
    "128,256 x 4 B, is the fp32 gradient of the logits at the start of the compiled loss's backward in step 2 "
    "(traceback: loss.backward -> aot_autograd CompiledFunction.backward), with 229.04 GiB allocated before it.  "
    "Not explained by the model (MEMORY.md, 'Primus issue 349'): the same image's own benchmark commands run twice "
    "the tokens per GPU (local_batch_size 6 on MI355X / MI350X, the primus_v2511_* cases).")

CASES += [
    dict(id="titan_pr808_llama3_8b_h100_8gpu_bf16_compile", outcome="ran", framework="torchtitan", hardware=_PR808_HW,
         torchtitan_config=_PR808_JOB, source=_PR808_SRC,
         quote="'// baseline (bf16 + compile) ... --training.compile ... step: 20  loss:  8.4931  memory: 47.65GiB(50.16%)'",
         read=_PR808_READ, measured_peak=_pr808_peak(47.65, "50.16%"), pair=None),
    dict(id="titan_pr808_llama3_8b_h100_8gpu_float8_rowwise_compile", outcome="ran", framework="torchtitan",
         hardware=_PR808_HW,
         torchtitan_config=_titan(_PR808_JOB, model={"converters": ["float8"]}, float8={"recipe_name": "rowwise"}),
         source=_PR808_SRC,
         quote=("'// experiment (rowwise float8 + compile) ... --model.converters float8 --training.compile "
                "--float8.recipe_name rowwise ... step: 30  loss:  7.7109  memory: 47.77GiB(50.28%)'"),
         read=_PR808_READ + ("  The figure equals #820's 'float8 row-wise WITHOUT storing abs() op output' run (2025-02-04): "
                             "the per-op SAC save list without abs, as torchtitan kept it after #820."),
         measured_peak=_pr808_peak(47.77, "50.28%"), pair=None),
    dict(id="titan_pr808_llama3_8b_h100_8gpu_float8_tensorwise_fsdp_fp8_ag", outcome="ran", framework="torchtitan",
         hardware=_PR808_HW,
         torchtitan_config=_titan(_PR808_JOB, model={"converters": ["float8"]},
                                  float8={"enable_fsdp_float8_all_gather": True,
                                          "precompute_float8_dynamic_scale_for_fsdp": True}),
         source=_PR808_SRC,
         quote=("'tensorwise float8 with float8 all-gather (on main branch) ... --model.converters float8 --training.compile "
                "--float8.enable_fsdp_float8_all_gather --float8.precompute_float8_dynamic_scale_for_fsdp ... step: 20  "
                "loss:  8.4258  memory: 47.32GiB(49.81%)'"),
         read=_PR808_READ, measured_peak=_pr808_peak(47.32, "49.81%"), pair=None),
    dict(id="titan_pr820_llama3_8b_h100_8gpu_float8_tensorwise_compile", outcome="ran", framework="torchtitan",
         hardware=_PR808_HW, torchtitan_config=_titan(_PR808_JOB, model={"converters": ["float8"]}),
         source=dict(ref="pytorch/torchtitan commit 88247277c (#820, 2025-02-06, 'Remove abs from save list for per op AC "
                         "...'), benchmarks run in the PR #808 thread",
                     url="https://github.com/pytorch/torchtitan/pull/820", date="2025-02-04"),
         quote=("'float8 tensorwise WITHOUT storing abs() output: ... step: 20  loss:  8.5451  memory: 47.77GiB(50.28%)  "
                "tps: 6,871  mfu: 40.24%'"),
         read=_PR808_READ + ("  The commit does not repeat the command: read as #808's float8 command with the tensorwise "
                             "default (no float8 all-gather), the configuration whose save list it compares."),
         measured_peak=_pr808_peak(47.77, "50.28%"), pair=None),
    dict(id="primus_issue349_mi350x_llama31_8b_bf16_titan_lbs3_noac", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="MI350 (8x; logged total 252.0 GiB)", plan_gpu="mi350x", num_gpus=8, gpus_per_node=8),
         primus_config=_primus_tt("8B", 3, "none"), primus_model_preset="llama3.1_8B",
         source=dict(ref="AMD-AGI/Primus issue #349 ('Llama 3.1 8B with BF16 precision using Primus torchtitan failed with "
                         "OOM.', 2025-12-11)", url="https://github.com/AMD-AGI/Primus/issues/349", date="2025-12-11"),
         quote=("'GPUs: 8* MI350 ... I used steps from documentation ... primus_pyt_train_llama-3.1-8b ... step:  1  loss: "
                "12.2674  grad_norm:  3.9375  memory: 240.17GiB(95.31%)  tps: 531 ... torch.OutOfMemoryError: HIP out of "
                "memory. Tried to allocate 11.74 GiB. GPU 7 has a total capacity of 251.98 GiB of which 6.94 GiB is free. Of "
                "the allocated memory 229.04 GiB is allocated by PyTorch, and 12.46 GiB is reserved by PyTorch but "
                "unallocated ... train.py, line 512, in train_step: loss = self.forward_backward_step(...)'"),
         read=_PRIMUS349_READ, pair=None),
]

_V2511_SRC = dict(ref="ROCm documentation, 'Training a model with Primus and PyTorch' for rocm/primus:v25.11 "
                      "(docs/how-to/rocm-for-ai/training/benchmark-docker/previous-versions/primus-pytorch-v25.11.rst; "
                      "Primus c4c083de), 'Benchmarking examples'",
                  url="https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/training/benchmark-docker/previous-versions/"
                      "primus-pytorch-v25.11.html",
                  date="2025-12")
_V2511_READ = ("Primus c4c083de (the v25.11 image's verified commit; torchtitan 5fb7cc2e): the experiment YAML named in the "
               "quote over pre_trainer.yaml (compile of model and loss, FSDP over the node's 8 GPUs, AdamW fused, bf16 "
               "params / fp32 reduce) and the model preset.  Primus-Turbo on (enable_primus_turbo, use_turbo_attention: "
               "Primus's llama3 Attention calls Primus-Turbo's flash attention on un-repeated K / V, primus/backends/"
               "torchtitan/models/llama3/model/model.py); read as a flattened Primus module by the Primus reader.  'Ran' = "
               "the image's benchmarked configuration (the docs' own claim); no peak is published.  The rocm/primus:v25.10 "
               "page gives the same local batch sizes (on the command line).")
_V2511_8B = ("'.. container:: model-doc primus_pyt_train_llama-3.1-8b ... MI355X and MI350X: EXP=examples/torchtitan/"
             "configs/MI355X/llama3.1_8B-BF16-pretrain.yaml bash examples/run_pretrain.sh ... MI325X: EXP=examples/"
             "torchtitan/configs/MI300X/llama3.1_8B-BF16-pretrain.yaml bash examples/run_pretrain.sh "
             "--training.local_batch_size 6 ... MI300X: EXP=examples/torchtitan/configs/MI300X/llama3.1_8B-BF16-"
             "pretrain.yaml bash examples/run_pretrain.sh' (c4c083de: local_batch_size 6 in the MI355X file, 4 in the "
             "MI300X one; activation_checkpoint none)")
_V2511_70B = ("'.. container:: model-doc primus_pyt_train_llama-3.1-70b ... MI355X and MI350X: EXP=examples/torchtitan/"
              "configs/MI355X/llama3.1_70B-BF16-pretrain.yaml bash examples/run_pretrain.sh ... MI325X: EXP=examples/"
              "torchtitan/configs/MI300X/llama3.1_70B-BF16-pretrain.yaml ... --training.local_batch_size 6 ... MI300X: "
              "... bash examples/run_pretrain.sh' (c4c083de: local_batch_size 8 in the MI355X file, 4 in the MI300X one; "
              "activation_checkpoint mode full)")
_V2511_DS16 = ("'.. container:: model-doc primus_pyt_train_deepseek-v3-16b ... MI355X and MI350X: EXP=examples/torchtitan/"
               "configs/MI355X/deepseek_v3_16b-pretrain.yaml bash examples/run_pretrain.sh ... MI325X: EXP=examples/"
               "torchtitan/configs/MI300X/deepseek_v3_16b-pretrain.yaml bash examples/run_pretrain.sh "
               "--training.local_batch_size 10 ... MI300X: ... bash examples/run_pretrain.sh' (c4c083de: local_batch_size "
               "12 in the MI355X file, 8 in the MI300X one; seq_len 4096, expert_parallel_degree 8, activation_checkpoint "
               "none, compile model and loss, debug_moe_force_load_balance true)")
_V2511_DS16_READ = (" DeepSeek-V3 16B (MoE: 64 routed experts of 1408, top 6, 2 shared; 27 layers, the first dense) in BF16 "
                    "with Primus-Turbo's grouped GEMM (use_turbo_grouped_mm, use_moe_fp8 false) and forced-balanced "
                    "routing (the model's assumption).  Not a plan field: use_classic_attention true, with which Primus "
                    "(pre_trainer.py patch_classic_attention, primus/backends/torchtitan/models/deepseek_v3/__init__.py "
                    "classic_deepseekv3_args) replaces the 16B's MLA by multi-head attention of 16 heads x 128 (q, k, v "
                    "of 128 where MLA keeps q, k of 192 and the latents): the plan keeps MLA, which keeps more per token.")


def _v2511(gpu: str, flavor: str, lbs: int, ac: str, quote: str, extra: str = "") -> dict:
    return dict(id=f"primus_v2511_{gpu}_llama31_{flavor.lower()}_bf16_titan_lbs{lbs}_{'fullac' if ac == 'full' else 'noac'}",
                outcome="ran", framework="torchtitan",
                hardware=dict(gpu=gpu.upper(), plan_gpu=gpu, num_gpus=8, gpus_per_node=8),
                primus_config=_primus_tt(flavor, lbs, ac), primus_model_preset=f"llama3.1_{flavor}",
                source=_V2511_SRC, quote=quote, read=_V2511_READ + extra, pair=None)


CASES += [
    _v2511("mi300x", "8B", 4, "none", _V2511_8B),
    _v2511("mi325x", "8B", 6, "none", _V2511_8B),
    _v2511("mi355x", "8B", 6, "none", _V2511_8B,
           "  Primus d974e626 (2025-12-17, 'Update local batch size for llama models MI355') wrote the 6 into the MI355X "
           "file (it was 3, the Primus #349 configuration)."),
    _v2511("mi300x", "70B", 4, "full", _V2511_70B),
    _v2511("mi325x", "70B", 6, "full", _V2511_70B),
    _v2511("mi355x", "70B", 8, "full", _V2511_70B,
           "  Primus d974e626 (2025-12-17) wrote the 8 into the MI355X file (it was 4)."),
]
CASES += [
    dict(id=f"primus_v2511_{gpu}_dsv3_16b_bf16_titan_lbs{lbs}_ep8_noac", outcome="ran", framework="torchtitan",
         hardware=dict(gpu=gpu.upper(), plan_gpu=gpu, num_gpus=8, gpus_per_node=8),
         primus_config=_primus_tt_dsv3_16b(lbs), primus_model_preset="deepseek_v3_16b", source=_V2511_SRC,
         quote=_V2511_DS16, read=_V2511_READ + _V2511_DS16_READ, pair=None)
    for gpu, lbs in (("mi355x", 12), ("mi325x", 10), ("mi300x", 8))
]

# pytorch/torchtitan commit 24eecd082 (PR #4016, 2026-07-29, 'Fix large model training configurations'): the
# deepseek_v3_671b() Trainer.Config of torchtitan/models/deepseek_v3/config_registry.py (written as the equivalent job
# table), run once per PP rank under a fake process group on a GB300.
_DS671_SRC = dict(ref="pytorch/torchtitan commit 24eecd082 (PR #4016, 'Fix large model training configurations', "
                      "2026-07-29): torchtitan/models/deepseek_v3/config_registry.py deepseek_v3_671b()",
                  url="https://github.com/pytorch/torchtitan/pull/4016", date="2026-07-29")
_DS671_READ = ("Job table = deepseek_v3_671b() at 24eecd082: DeepSeek-V3 671B (model_registry('671B', attn_backend="
               "'flex')), local_batch_size 128, global_batch_size 4096, seq_len 4096, pipeline_parallel_degree 8 with "
               "Interleaved1F1B and 2 layers per stage (32 stages, 4 per rank: VPP 4), expert_parallel_degree 32, FSDP over "
               "the rest (DP 32 of the commit's 256 GPUs), pipeline micro-batch 1 (128 micro-batches), SelectiveAC (op), "
               "compile of the loss only, AdamW.  Not plan fields: the 2026 loss (ChunkedLossWrapper over CrossEntropyLoss: "
               "the logits are made in chunks -- the 0.3.0 model here counts the whole fp32 logits of one micro-batch, "
               "2 GiB on the last stage) and the commit's force-balanced routing (balanced routing is what the model "
               "assumes).  'Peak memory ranged from 203.44 GiB to 246.26 GiB' is the max over the 8 PP ranks, read as "
               "torchtitan's logged reserved peak; GB300 (the hardware DB's gb300, 4 GPUs a node).")
_DS16HEP_READ = ("Job table = deepseek_v3_16b_hybridep() at aa1d37414 (deepseek_v3_16b(): local_batch_size 4, seq_len 4096, "
                 "flex attention, compile of the loss only, AdamW) with the PR's command-line overrides: "
                 "data_parallel_shard_degree 4, expert_parallel_degree 4, pipeline_parallel_degree 1, activation_checkpoint "
                 "full, on 4 GPUs whose torch total is 276.6 GiB ('74.71GiB(27.01%)': a GB300 / B300; read as gb300, 4 a "
                 "node).  Not plan fields: the HybridEP dispatcher (moe_comm_backend='hybridep', "
                 "non_blocking_capacity_factor 1.0; its buffers, 'max_tokens_per_rank=16384' x 4 ranks x (2 x 2048 + 4 x "
                 "64) B = 0.27 GiB, outside the 0.3.0 all-to-all model) and the 2026 ChunkedCELoss.  The steady-state "
                 "'memory' from step 10 on (the Adam moments exist) is the peak.")
CASES += [
    dict(id="titan_pr4016_dsv3_671b_gb300_256gpu_pp8vpp4_ep32_sac", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="GB300 (276.62 GiB visible)", plan_gpu="gb300", num_gpus=256, gpus_per_node=4),
         torchtitan_config={"model": {"name": "deepseek_v3", "flavor": "671B"},
                            "optimizer": {"name": "AdamW", "lr": 2.2e-4},
                            "training": {"local_batch_size": 128, "global_batch_size": 4096, "seq_len": 4096},
                            "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                                            "tensor_parallel_degree": 1, "context_parallel_degree": 1,
                                            "pipeline_parallel_degree": 8,
                                            "pipeline_parallel_schedule": "Interleaved1F1B",
                                            "pipeline_parallel_layers_per_stage": 2,
                                            "pipeline_parallel_microbatch_size": 1,
                                            "expert_parallel_degree": 32, "expert_tensor_parallel_degree": 1},
                            "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
                            "compile": {"enable": True, "components": ["loss"]}},
         source=_DS671_SRC,
         quote=("'Match the parallel and batch layout of the 256-GPU GB200 BF16 configuration ... TP1, PP8, CP1, EP32, VPP4, "
                "MBS1, and GBS4096. With DP32 in TorchTitan, this maps to a local batch of 128 and pipeline microbatch size "
                "one. Two layers per virtual stage produce 32 stages ... With force-balanced routing, one fake-PG step "
                "completed independently on all eight PP ranks. Peak memory ranged from 203.44 GiB to 246.26 GiB on a "
                "276.62 GiB GB300.'"),
         read=_DS671_READ,
         measured_peak=dict(gib=246.26, basis="reserved", rank="max",
                            how="the largest of the eight PP ranks' peaks (fake-PG step, one rank a run)"),
         pair=None),
    dict(id="titan_pr4016_dsv3_671b_ep2_lbs4_nopp", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="GB300 (276.62 GiB visible)", plan_gpu="gb300", num_gpus=256, gpus_per_node=4),
         skip_reason=("the world size of the fake-PG run is not stated: the previous recipe (PP disabled, EP 2, local batch "
                      "4, 'exceeded 276 GiB in a fake-PG run') names no GPU count, and its FSDP shard of the 671B "
                      "parameters depends on it"),
         source=_DS671_SRC,
         quote=("'The previous DeepSeek-V3 671B recipe left PP disabled, used only EP2, and processed a local batch of four "
                "through all 61 layers on every rank. This exceeded 276 GiB in a fake-PG run.'"),
         read="Not judged (skip_reason).", pair="titan_pr4016_dsv3_671b_gb300_256gpu_pp8vpp4_ep32_sac"),
    dict(id="titan_pr3659_dsv3_16b_hybridep_gb300_4gpu_ep4_fullac", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="GB300 / B300 (276.6 GiB visible)", plan_gpu="gb300", num_gpus=4, gpus_per_node=4),
         torchtitan_config={"model": {"name": "deepseek_v3", "flavor": "16B"},
                            "optimizer": {"name": "AdamW", "lr": 2.2e-4},
                            "training": {"local_batch_size": 4, "seq_len": 4096},
                            "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 4,
                                            "tensor_parallel_degree": 1, "pipeline_parallel_degree": 1,
                                            "expert_parallel_degree": 4, "expert_tensor_parallel_degree": 1},
                            "activation_checkpoint": {"mode": "full"},
                            "compile": {"enable": True, "components": ["loss"]}},
         source=dict(ref="pytorch/torchtitan commit aa1d37414 (PR #3659, 2026-06-16, 'Add FusedGroupedExperts override and "
                         "offset-aware kernels to skip async EP worst case padding')",
                     url="https://github.com/pytorch/torchtitan/pull/3659", date="2026-06-13"),
         quote=("'NGPU=4 MODULE=deepseek_v3 CONFIG=deepseek_v3_16b_hybridep wp ./run_train.sh "
                "--parallelism.pipeline_parallel_degree 1 --parallelism.data_parallel_shard_degree 4 "
                "--parallelism.expert_parallel_degree 4 --activation_checkpoint.mode full ... Initializing HybridEP buffer: "
                "hidden_dim=2048, max_tokens_per_rank=16384, num_local_experts=16, ep_size=4 ... step: 10 ... memory: "
                "74.71GiB(27.01%) ... step: 40 ... memory: 74.71GiB(27.01%)'"),
         read=_DS16HEP_READ,
         measured_peak=dict(gib=74.71, basis="reserved", rank="first",
                            how="torchtitan 'memory: X GiB' (DeviceMemoryMonitor reserved peak), rank 0, steps 10-40"),
         pair=None),
]

# Megatron-LM research branch, the 32-expert top-3 shared-expert MoE ("tk3-sh1") throughput smoke runs on 4 x GH200:
# MEGATRON_ARGS of _research/launch/transformer-pp-350m-ablation-aurora-qkn-moe-32e-tk3-sh1-smoke-{baseline,mbs16-rcs}
# .sbatch at 25551dd583 (the two differ only in --micro-batch-size 8 / 16 and --recompute-granularity selective).
_R350_MOE32 = ["--qk-layernorm", "--num-experts 32", "--moe-router-topk 3", "--moe-ffn-hidden-size 640",
               "--moe-shared-expert-intermediate-size 640", "--moe-router-load-balancing-type aux_loss",
               "--moe-aux-loss-coeff 1e-2", "--moe-z-loss-coeff 1e-3", "--moe-grouped-gemm", "--moe-permute-fusion",
               "--moe-token-dispatcher-type alltoall", "--expert-model-parallel-size 1", "--optimizer aurora"]
_R350_MOE32_HW = dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4)
CASES += [
    dict(id="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs16_recompute_selective", outcome="oom", framework="megatron",
         hardware=_R350_MOE32_HW,
         megatron_flags=_R350_COMMON + _R350_MOE32 + ["--micro-batch-size 16", "--recompute-granularity selective"],
         source=dict(ref="NVIDIA/Megatron-LM commit e6e27508af (2026-05-10, 'Smoke fixes: cudagraph use moe-only scope, "
                         "mbs16-rcs -> mbs16-rcfull'): _research/launch/transformer-pp-350m-ablation-aurora-qkn-moe-32e-"
                         "tk3-sh1-smoke-mbs16-rcs.sbatch at 25551dd583",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/e6e27508af", date="2026-05-10"),
         quote=("'mbs16: --recompute-granularity selective only saves attention-bwd activations, not MoE permute/dispatch "
                "ones, so MBS=16 still OOM'd.'"),
         read=_R350_READ, pair="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs8"),
    dict(id="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs8", outcome="ran", framework="megatron",
         hardware=_R350_MOE32_HW, megatron_flags=_R350_COMMON + _R350_MOE32 + ["--micro-batch-size 8"],
         source=dict(ref="NVIDIA/Megatron-LM commit 25551dd583 (2026-05-10, 'MoE throughput smoke runs: 4 variants on "
                         "tk3-sh1 32E'): the smoke-baseline sbatch, a control re-run of the full run",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/25551dd583", date="2026-05-10"),
         quote="'Quality champion (final 2.098, 86.8 TFLOP/s/GPU) ... baseline - control re-run, MBS=8'",
         read=_R350_READ + "  The full tk3-sh1 run at MBS 8 finished (final loss 2.098): ran.",
         pair="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs16_recompute_selective"),
]

# ---------------------------------------------------------------- round 13 (branch oom8): held-out reports
# Megatron-LM research branch, the 32-expert top-3 shared-expert smoke runs of 25551dd583 / e6e27508af / 37bb10253c, as
# they stood before bec254e7cf dropped them ("smokes confirmed cudagraph ... gives +11.7% throughput", "shoverlap was -6%
# throughput", "mbs16-rcfull only +2.8% with full block recompute"): three more configurations that ran on 4 x GH200.
_R350_SMOKES = dict(ref="NVIDIA/Megatron-LM commit bec254e7cf (2026-05-10, 'MoE: promote tk3-sh1 32E to leaderboard; drop "
                        "premature rows + smoke configs'): the smoke sbatch files at its parent",
                    url="https://github.com/NVIDIA/Megatron-LM/commit/bec254e7cf", date="2026-05-10")
_R350_SMOKES_QUOTE = ("'Drop tk3-sh1 32E throughput-smoke variants (baseline, shoverlap, cudagraph, mbs16-rcfull): smokes "
                      "confirmed cudagraph (TE impl, scope attn+moe_router+moe_preprocess) gives +11.7% throughput ... "
                      "shoverlap was -6% throughput and rejected. mbs16-rcfull only +2.8% with full block recompute, marginal.'")
CASES += [
    dict(id="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs16_recompute_full", outcome="ran", framework="megatron",
         hardware=_R350_MOE32_HW,
         megatron_flags=_R350_COMMON + _R350_MOE32 + ["--micro-batch-size 16", "--recompute-granularity full",
                                                      "--recompute-method block", "--recompute-num-layers 24"],
         source=_R350_SMOKES, quote=_R350_SMOKES_QUOTE,
         read=_R350_READ + ("  The smoke-mbs16-rcfull sbatch at bec254e7cf^ (e6e27508af replaced the selective recompute "
                            "that OOMed by full block recompute of all 24 layers); it ran (its throughput is quoted)."),
         pair="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs16_recompute_selective"),
    dict(id="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs8_te_graphs", outcome="ran", framework="megatron",
         hardware=_R350_MOE32_HW,
         megatron_flags=_R350_COMMON + _R350_MOE32 + ["--micro-batch-size 8", "--cuda-graph-impl transformer_engine",
                                                      "--cuda-graph-scope attn moe_router moe_preprocess"],
         source=_R350_SMOKES,
         quote=_R350_SMOKES_QUOTE + ("; 195127b0cb: 'Smoke at 12-min cap measured 3.481 sec/iter vs baseline 3.944 "
                                     "(+11.7%). Full run will validate ... scope = attn moe_router moe_preprocess'"),
         read=_R350_READ + "  The smoke-cudagraph sbatch at bec254e7cf^ (37bb10253c's scope); it ran (timed at 3.481 s/iter).",
         pair=None),
    dict(id="mlm_research_350m_moe32e_tk3_sh1_gh200_4gpu_mbs8_shared_overlap", outcome="ran", framework="megatron",
         hardware=_R350_MOE32_HW,
         megatron_flags=_R350_COMMON + _R350_MOE32 + ["--micro-batch-size 8", "--moe-shared-expert-overlap"],
         source=_R350_SMOKES, quote=_R350_SMOKES_QUOTE,
         read=_R350_READ + "  The smoke-shoverlap sbatch at bec254e7cf^ (the baseline plus --moe-shared-expert-overlap); it ran.",
         pair=None),
]

# Megatron-Bridge skills/nemo-mbridge-perf-activation-recompute/SKILL.md, "Matched H100 Evidence: Moonlight 16B": a
# 2026-08-12 short-run study at Bridge 600d069b8 / Megatron Core 24bad8e67 of moonlight_16b_pretrain_8gpu_h100_bf16_config
# (recipes/moonlight/h100/moonlight_16b.py) on 8 H100 80GB, seq 4096, MBS 1, GBS 4, TP 2 (sequence parallel), PP 1, EP 8,
# mock data, 20 steps; each row changed only recompute_modules.  Model: moonshotai/Moonlight-16B-A3B through
# DeepSeekV3Bridge (Bridge's MoonlightModelProvider16B spells the same numbers: 27 layers, hidden 2048, first layer dense
# with ffn 11264, 64 experts of 1408 top-6, 2 shared experts (2816), 16 heads, MLA without q LoRA, kv LoRA 512, vocab
# 163840, untied); DeepSeekModelProvider defaults: qk norm, seq_aux_loss, sigmoid router with expert bias, router fp32.
_MOON_FLAGS = [
    "--num-layers 27", "--hidden-size 2048", "--ffn-hidden-size 11264", "--num-attention-heads 16", "--kv-channels 128",
    "--max-position-embeddings 4096", "--normalization RMSNorm", "--norm-epsilon 1e-5", "--swiglu",
    "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--position-embedding-type rope",
    "--rotary-base 50000", "--make-vocab-size-divisible-by 1280", "--vocab-size 163840", "--multi-latent-attention",
    "--kv-lora-rank 512", "--qk-head-dim 128", "--qk-pos-emb-head-dim 64", "--v-head-dim 128",
    "--rotary-scaling-factor 1.0", "--mscale 1.0", "--mscale-all-dim 1.0", "--qk-layernorm", "--num-experts 64",
    "--moe-layer-freq ([0]*1+[1]*26)", "--moe-ffn-hidden-size 1408", "--moe-shared-expert-intermediate-size 2816",
    "--moe-router-load-balancing-type seq_aux_loss", "--moe-router-topk 6", "--moe-router-pre-softmax",
    "--moe-aux-loss-coeff 1e-3", "--moe-router-num-groups 1", "--moe-router-group-topk 1",
    "--moe-router-topk-scaling-factor 2.446", "--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias",
    "--moe-router-bias-update-rate 1e-3", "--moe-router-dtype fp32", "--attention-dropout 0.0", "--hidden-dropout 0.0",
    "--mock-data", "--seq-length 4096", "--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 1",
    "--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1", "--context-parallel-size 1",
    "--sequence-parallel", "--use-distributed-optimizer", "--moe-token-dispatcher-type alltoall", "--moe-grouped-gemm",
    "--moe-permute-fusion", "--moe-shared-expert-overlap", "--use-mcore-models", "--transformer-impl transformer_engine",
    "--micro-batch-size 1", "--global-batch-size 4", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
    "--manual-gc", "--manual-gc-interval 5", "--bf16", "--overlap-grad-reduce", "--overlap-param-gather",
    "--use-precision-aware-optimizer", "--main-grads-dtype bf16", "--main-params-dtype fp32", "--exp-avg-dtype bf16",
    "--exp-avg-sq-dtype bf16", "--fp8-recipe tensorwise"]  # BRIDGE_BF16_OPT_RECIPE: the recipe's MixedPrecisionConfig
_MOON_SRC = dict(ref="NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-activation-recompute/SKILL.md, 'Matched H100 "
                     "Evidence: Moonlight 16B' (study of 2026-08-12 at Bridge 600d069b8, Megatron Core 24bad8e67)",
                 url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/skills/nemo-mbridge-perf-activation-recompute/SKILL.md",
                 date="2026-08-12")
_MOON_READ = ("Flags = moonlight_16b_pretrain_8gpu_h100_bf16_config (Bridge 600d069b8 recipes/moonlight/h100/moonlight_16b.py) "
              "with the study's GBS 4: TP 2 with sequence parallelism, EP 8, ETP 1 (DP 4, expert-DP 1, one micro-batch "
              "per step), alltoall dispatcher with shared-expert overlap, grouped GEMM and permute fusion, TE "
              "cross-entropy, no CUDA graph, precision-aware distributed optimizer with fp32 main params and bf16 "
              "main grads / moments, grads reduced in bf16; model from the Moonlight-16B-A3B HF config "
              "(MoonlightModelProvider16B's numbers).  'Peak allocated memory is the maximum post-optimizer value "
              "reported after iteration 2' (Bridge's mem-max-allocated, GB = 1e9 B): the Adam moments exist.  The "
              "empty selective list recomputes nothing (attention.py checks 'core_attn' in recompute_modules), written "
              "as no recompute flags.")


def _moon(modules: list[str], gb: float, quote_row: str) -> dict:
    tag = "_".join(modules) if modules else "none"
    flags = _MOON_FLAGS + (["--recompute-granularity selective", "--recompute-modules " + " ".join(modules)]
                           if modules else [])
    return dict(id=f"mbridge_moonlight_16b_h100_bf16_8gpu_tp2ep8_recompute_{tag}", outcome="ran", framework="megatron",
                hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=8, gpus_per_node=8),
                megatron_flags=flags, source=_MOON_SRC,
                quote=f"'| Selective modules | Peak allocated (GB) | ... {quote_row}'", read=_MOON_READ,
                measured_peak=dict(gib=round(gb * 1e9 / 2**30, 2), basis="allocated", rank="first",
                                   how=f"{gb} GB (1e9 B) peak allocated after iteration 2"),
                pair=None)


CASES += [
    _moon([], 36.618, "| `[]` | 36.618 | 457.18 | 77.50 | control | control |"),
    _moon(["core_attn"], 36.614, "| `core_attn` | 36.614 | 474.80 | 74.44 | -0.01% | +3.85% |"),
    _moon(["mla_up_proj"], 35.902, "| `mla_up_proj` | 35.902 | 480.89 | 73.72 | -1.96% | +5.19% |"),
    _moon(["mla_up_proj", "mlp"], 35.917, "| `mla_up_proj`, `mlp` | 35.917 | 496.73 | 71.50 | -1.91% | +8.65% |"),
    _moon(["moe_act"], 35.941, "| `moe_act` | 35.941 | 466.26 | 75.50 | -1.85% | +1.99% |"),
    _moon(["layernorm", "moe_act"], 35.949, "| `layernorm`, `moe_act` | 35.949 | 506.53 | 70.27 | -1.83% | +10.79% |"),
]

# pytorch/ao torchao/prototype/mx_formats/README.md, "Training e2e benchmarks on NVIDIA B200" (torchao 0.13.0+gite4e681be6,
# torch 2.9.0.dev20250815, torchtitan 6fc499f6f): benchmarks/float8/training/llama3.sh runs CONFIG_FILE
# llama3_8b.toml with --training.steps=100 --training.local-batch-size=1 --training.compile and the recipe's converter
# flags; parse_torchtitan_logs.py reports the max over the logged steps of torchtitan's 'memory: X GiB' (rank 0's log,
# run_train.sh LOG_RANK=0: the caching allocator's reserved peak).
_AO_B200_SRC = dict(ref="pytorch/ao torchao/prototype/mx_formats/README.md 'Training e2e benchmarks on NVIDIA B200' "
                        "(torchao 0.13.0+gite4e681be6, torch 2.9.0.dev20250815+cu128, torchtitan 6fc499f6f), reproduced "
                        "by benchmarks/float8/training/llama3.sh",
                    url="https://github.com/pytorch/ao/tree/main/torchao/prototype/mx_formats#training-e2e-benchmarks-on-nvidia-b200",
                    date="2025-08-15")
_AO_B200_READ = ("Job table = torchtitan 6fc499f6f torchtitan/models/llama3/train_configs/llama3_8b.toml (Llama 3 8B, "
                 "seq_len 8192, FSDP over the 8 GPUs, selective per-op AC, AdamW) with llama3.sh's --training.steps=100 "
                 "--training.local-batch-size=1 --training.compile (6fc499f6f compiles the model and, "
                 "components/loss.py, the loss) and the row's converter flags (FLOAT8_RECIPE_WITH_BEST_SETTINGS "
                 "tensorwise: --model.converters=float8 --float8.enable_fsdp_float8_all_gather "
                 "--float8.precompute_float8_dynamic_scale_for_fsdp; rowwise: --float8.recipe_name=rowwise; MX_RECIPE: "
                 "--model.converters=mx --mx.recipe_name=R).  Device: '8x power limited B200'.  'Peak Memory (GB)' is "
                 "parse_torchtitan_logs.py's max of torchtitan's logged 'memory: X GiB' (reserved, rank 0): GiB.")
_AO_B200_JOB = {"model": {"name": "llama3", "flavor": "8B"},
                "training": {"local_batch_size": 1, "seq_len": 8192, "compile": True, "steps": 100},
                "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                                "tensor_parallel_degree": 1},
                "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
                "optimizer": {"name": "AdamW"}}
_AO_B200_HW = dict(gpu="B200 (power limited)", plan_gpu="b200", num_gpus=8, gpus_per_node=8)


def _ao_b200(tag: str, gib: float, row: str, **sections: dict) -> dict:
    return dict(id=f"ao_b200_llama3_8b_8gpu_compile_{tag}", outcome="ran", framework="torchtitan", hardware=_AO_B200_HW,
                torchtitan_config=_titan(_AO_B200_JOB, **sections), source=_AO_B200_SRC,
                quote=f"'| Llama3-8b | {row} | {gib} | ...'", read=_AO_B200_READ,
                measured_peak=dict(gib=gib, basis="reserved", rank="first",
                                   how="max over steps of torchtitan's 'memory: X GiB' (rank 0 reserved)"),
                pair=None)


CASES += [
    _ao_b200("bf16", 33.71, "none (bfloat16)"),
    _ao_b200("float8_tensorwise_fsdp_fp8_ag", 33.38, "float8 tensorwise (f8 all-gather)",
             model={"converters": ["float8"]},
             float8={"enable_fsdp_float8_all_gather": True, "precompute_float8_dynamic_scale_for_fsdp": True}),
    _ao_b200("mxfp8_cublas", 33.88, "mxfp8_cublas", model={"converters": ["mx"]}, mx={"recipe_name": "mxfp8_cublas"}),
    _ao_b200("mxfp8_cublas_rceil", 33.88, "mxfp8_cublas_rceil", model={"converters": ["mx"]},
             mx={"recipe_name": "mxfp8_cublas_rceil"}),
    _ao_b200("float8_rowwise", 33.72, "float8 rowwise", model={"converters": ["float8"]},
             float8={"recipe_name": "rowwise"}),
]

# ---------------------------------------------------------------- round 14 (branch oom9): held-out reports
# pytorch/torchtitan PR #1690 ('[Qwen3] Add 32b training configs', description 2025-09-08, merged d66b72a6a 2025-09-17):
# torchtitan/experiments/qwen3/train_configs/qwen3_32b.toml of that commit ("a preset for 8 H100 GPUs (with 96GiB
# memory)": local_batch_size 2, seq_len 4096, FSDP over every GPU, TP 1, full AC, AdamW (torchtitan's default fused
# implementation), compile off) run with the batch / layout of each row of the PR's table ("no compile applied for
# following benchmarking"; the first row compiled model and loss).  Every logged 'memory: X GiB(Y%)' is torchtitan's
# DeviceMemoryMonitor reserved peak; X / Y = 95.0 GiB in every row (the 96 GB H100 of Meta's clusters).
_Q32 = {
    "model": {"name": "qwen3", "flavor": "32B", "hf_assets_path": "./assets/hf/Qwen3-32B"},
    "optimizer": {"name": "AdamW", "lr": 8e-4, "eps": 1e-8},
    "lr_scheduler": {"warmup_steps": 600},
    "training": {"local_batch_size": 2, "seq_len": 4096, "max_norm": 1.0, "steps": 3000, "dataset": "c4"},
    "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                    "fsdp_reshard_after_forward": "default", "tensor_parallel_degree": 1, "context_parallel_degree": 1},
    "activation_checkpoint": {"mode": "full", "selective_ac_option": "op"},
    "compile": {"enable": False, "components": ["model", "loss"]},
}
_Q32_SRC = dict(ref="pytorch/torchtitan PR #1690 ('[Qwen3] Add 32b training configs', merged as d66b72a6a): the description's "
                    "table of runs of torchtitan/experiments/qwen3/train_configs/qwen3_32b.toml",
                url="https://github.com/pytorch/torchtitan/pull/1690", date="2025-09-08")
_Q32_READ = ("Job table = qwen3_32b.toml at d66b72a6a (Qwen3 32B: 64 layers, dim 5120, 64 heads / 8 KV heads of 128, "
             "SwiGLU 25600, qk norm, vocab 151936 untied; seq 4096, full AC, AdamW fused, FSDP2 bf16 params / fp32 "
             "reduce) with the row's local batch, FSDP degree (data_parallel_shard_degree -1 over the GPUs) and TP degree; "
             "GPUs = FSDP x TP on 8-GPU nodes; global batch = local x FSDP as the table states (no gradient accumulation). "
             "Device: '8 H100 GPUs (with 96GiB memory)' (the preset's note), total_memory 95.0 GiB from every row's "
             "'X GiB(Y%)'; 389.87 TFLOPS at 39.42 % MFU = 989 TFLOPS peak, an H100 die (the hardware DB's "
             "h100-sxm-96gb-500w).  Compile off except the first row (components model and loss).")


def _q32(tag: str, lbs: int, fsdp: int, tp: int, gib: float | None, quote: str, compile_: bool = False) -> dict:
    n = fsdp * tp
    case = dict(id=f"titan_pr1690_qwen3_32b_h100_96gb_{n}gpu_{tag}", outcome="ran" if gib else "oom", framework="torchtitan",
                hardware=dict(gpu="H100 SXM 96GB", plan_gpu="h100-sxm-96gb-500w", num_gpus=n, gpus_per_node=8),
                torchtitan_config=_titan(_Q32, training={"local_batch_size": lbs}, parallelism={"tensor_parallel_degree": tp},
                                         compile={"enable": compile_}),
                source=_Q32_SRC, quote=quote, read=_Q32_READ, pair=None)
    if gib:
        case["measured_peak"] = dict(gib=gib, basis="reserved", rank="max",
                                     how="torchtitan 'memory: X GiB' (DeviceMemoryMonitor reserved peak) of the logged step")
    return case


CASES += [
    _q32("fsdp8_lbs2_compile", 2, 8, 1, 81.85, "'local batch size=2, FSDP=8, full AC ... When torch.compile is enabled, FSDP=8 "
         "... step: 50 ... memory: 81.85GiB(86.17%)'", compile_=True),
    _q32("fsdp8_lbs1", 1, 8, 1, 81.47, "'1 (8) | 4096 | FSDP 8 | ... step: 50 ... memory: 81.47GiB(85.76%)'"),
    _q32("fsdp8_lbs2", 2, 8, 1, 89.33, "'2 (16) | 4096 | FSDP 8 | ... step: 50 ... memory: 89.33GiB(94.04%)'"),
    _q32("fsdp16_lbs4", 4, 16, 1, 78.48, "'4 (64) | 4096 | FSDP 16| ... step: 80 ... memory: 78.48GiB(82.54%)'"),
    _q32("fsdp16_lbs8", 8, 16, 1, None, "'8 | 4096 | FSDP 16 | OOM'"),
    _q32("fsdp16_lbs16", 16, 16, 1, None, "'16 | 4096 | Fsdp=16 | OOM'"),
    _q32("fsdp32_lbs16", 16, 32, 1, None, "'16 | 4096 | fsdp=32 | OOM'"),
    _q32("fsdp16_tp2_lbs16", 16, 16, 2, None, "'16 | 4096 | fsdp=16, tp 2 | OOM'"),
    _q32("fsdp8_tp4_lbs16", 16, 8, 4, 70.20, "'16 | 4096 | fsdp=8, tp=4 | ... step: 90 ... memory: 70.20GiB(73.89%)'"),
    _q32("fsdp8_tp4_lbs32", 32, 8, 4, None, "'32 | 4096 | fsdp=8, tp=4 | OOM'"),
    _q32("fsdp4_tp8_lbs16", 16, 4, 8, 43.45, "'16 (64) | 4096 | fsdp 4, tp 8 | Full AC ... step: 20 ... memory: 43.45GiB(45.73%)'"),
    _q32("fsdp4_tp8_lbs32", 32, 4, 8, 70.79, "'32 (128) | 4096 | fsdp 4, tp 8 | Full AC, ... step: 10 ... memory: 70.79GiB(74.51%)'"),
    _q32("fsdp8_tp8_lbs32", 32, 8, 8, 63.27, "'32 (256) | 4096 | Fsdp8, tp 8 | Full AC, ... step: 70 ... memory: 63.27GiB(66.60%)'"),
    _q32("fsdp4_tp8_lbs64", 64, 4, 8, None, "'64 (256) | 4096 | Fsdp 4, tp 8 | Full AC,OOM'"),
    _q32("fsdp8_tp8_lbs64", 64, 8, 8, None, "'64 (512) | 4096 | Fsdp 8, tp 8 | Full AC,OOM'"),
]

# pytorch/torchtitan PR #2461 ('add qwen3 14b config to registry', merged 6b081f404 2026-03-03): the reviewer's "I tested
# sac on 8 96GB H100s and it OOMed, but full ac worked" on the PR's qwen3_14b() (torchtitan/models/qwen3/config_registry.py:
# Qwen3 14B, local_batch_size 4, seq_len 4096, FSDP over the GPUs, AdamW lr 8e-4), which then changed
# activation_checkpoint.mode from "selective" (selective_ac_option "op") to "full".
_Q14 = {
    "model": {"name": "qwen3", "flavor": "14B", "hf_assets_path": "./assets/hf/Qwen3-14B"},
    "optimizer": {"name": "AdamW", "lr": 8e-4},
    "lr_scheduler": {"warmup_steps": 600},
    "training": {"local_batch_size": 4, "seq_len": 4096, "steps": 3000, "dataset": "c4"},
    "parallelism": {"data_parallel_shard_degree": -1, "tensor_parallel_degree": 1, "context_parallel_degree": 1,
                    "pipeline_parallel_degree": 1},
    "activation_checkpoint": {"mode": "full", "selective_ac_option": "op"},
}
_Q14_SRC = dict(ref="pytorch/torchtitan PR #2461 ('add qwen3 14b config to registry', review 2026-02-28, merged as 6b081f404)",
                url="https://github.com/pytorch/torchtitan/pull/2461", date="2026-02-28")
_Q14_READ = ("Job table = the PR's qwen3_14b() Trainer.Config (config_registry.py at 6b081f404, written as the equivalent "
             "TOML job: Qwen3 14B -- 40 layers, dim 5120, 40 heads / 8 KV heads of 128, SwiGLU 17408, qk norm, SDPA, vocab "
             "151936 --, local batch 4, seq 4096, FSDP over the 8 GPUs, no TP / CP / PP, compile off (the Trainer default)) on "
             "8 x H100 96GB (the hardware DB's h100-sxm-96gb-500w, 95.0 GiB).  The review's OOM is the diff's "
             "mode='selective' (op); the merged config, mode='full', ran.  The local batch at review time is read as the "
             "merged 4 (the review thread shows only the AC lines).")
CASES += [
    dict(id="titan_pr2461_qwen3_14b_h100_96gb_8gpu_lbs4_sac_op", outcome="oom", framework="torchtitan",
         hardware=dict(gpu="H100 SXM 96GB", plan_gpu="h100-sxm-96gb-500w", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_Q14, activation_checkpoint={"mode": "selective"}), source=_Q14_SRC,
         quote="'I would suggest using full ac. I tested sac on 8 96GB H100s and it OOMed, but full ac worked.'",
         read=_Q14_READ, pair="titan_pr2461_qwen3_14b_h100_96gb_8gpu_lbs4_full_ac"),
    dict(id="titan_pr2461_qwen3_14b_h100_96gb_8gpu_lbs4_full_ac", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 SXM 96GB", plan_gpu="h100-sxm-96gb-500w", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_titan(_Q14), source=_Q14_SRC,
         quote="'... but full ac worked.' (merged: activation_checkpoint mode='full')", read=_Q14_READ,
         pair="titan_pr2461_qwen3_14b_h100_96gb_8gpu_lbs4_sac_op"),
]

# ---------------------------------------------------------------- round 21 (branch oom11): held-out reports
# Two public autoresearch branches of pytorch/torchtitan that tune one command -- ``NGPU=8 MODULE=qwen3
# CONFIG=qwen3_14b ./run_train.sh --training.steps=10`` on one node of 8 B200 (PyTorch 2.13.0a0+git85cb48a,
# 178.35 GiB per GPU as PyTorch reports it) -- and log every run's step-10 ``memory: X GiB`` (torchtitan's
# DeviceMemoryMonitor reserved peak, LOG_RANK 0) in ``results.tsv`` and every crash's OOM message in
# ``learnings.md``.  qwen3_14b() (config_registry.py at the branch points 68f86f18f / 7c324f253): Qwen3 14B (40
# layers, dim 5120, 40 / 8 heads of 128, SwiGLU 17408, qk norm, vocab 151936 untied), local batch 4, seq 4096,
# FSDP over the 8 GPUs, AdamW fused lr 8e-4, full AC, ChunkedCELoss (8 sequence chunks), SDPA, dtype float32
# (bf16 params / fp32 reduce), no compile.  Written as torchtitan 0.3.0 launches of the same config function
# (qwen3_14b: the same model and ChunkedLossWrapper, 8 chunks) with the run's overrides; the branches predate
# CUDA-graph capture in the trainer (1c8c749ff, 2026-06-02), hence ``--training.disable_cuda_graphs``.
_AR15_SRC = dict(ref="pytorch/torchtitan branch autoresearch-parallelize/may15-qwen3-14b-8xb200 (results.tsv, "
                     "learnings.md; source commit 68f86f18f)",
                 url="https://github.com/pytorch/torchtitan/blob/autoresearch-parallelize/may15-qwen3-14b-8xb200/"
                     "results.tsv", date="2026-05-15")
_AR19_SRC = dict(ref="pytorch/torchtitan branch autoresearch-parallelize/may19-qwen3-14b (results.tsv, learnings.md; "
                     "source commit 7c324f253)",
                 url="https://github.com/pytorch/torchtitan/blob/autoresearch-parallelize/may19-qwen3-14b/results.tsv",
                 date="2026-05-19")
_AR_READ = ("qwen3_14b() of the branch point (local batch 4, seq 4096, FSDP 8, full AC, ChunkedCELoss 8 chunks, fp32 "
            "master / bf16 params, AdamW fused) with the row's command overrides, as the torchtitan 0.3.0 launch of "
            "qwen3_14b (same model and chunked loss; no CUDA graphs at that date).  Not plan fields: the parallelize "
            "function is the branch's own (FSDP2 fully_shard per block and on the root -- may15 -- or per block, "
            "lm_head and root -- may19 -- torchtitan's apply_ac / apply_compile, bf16 params, fp32 reduce), where "
            "torchtitan 0.3.0 also wraps the embedding and [norm, lm_head]: the embedding and final norm stay in the "
            "root unit (~1.5 GiB bf16 unsharded, the root is not resharded after forward); the attention is SDPA "
            "with enable_gqa (0.3.0's default, read here, is FlexAttention: one fp32 [b, heads, s] more per layer); "
            "the 14B block at 68f86f18f fuses wk/wv only (wq separate), which moves per-op SAC's odd-matmul rule "
            "(wq, wo, w3 saved instead of wqkv, w1, w2: ~7 % fewer SAC bytes).  Peak = step-10 'memory: X GiB' of "
            "rank 0 (reserved).")
_AR_BASE = ["torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3", "--config", "qwen3_14b",
            "--training.steps", "10", "--training.disable_cuda_graphs"]


def _ar(tag: str, branch: int, commit: str, outcome: str, overrides: str, ac: str, quote: str,
        gib: float | None = None, extra_read: str = "") -> dict:
    case = dict(id=f"titan_ar{branch}_qwen3_14b_b200_8gpu_{tag}", outcome=outcome, framework="torchtitan",
                hardware=dict(gpu="B200 (8 x B200, 178.35 GiB)", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
                torchtitan_launch=_AR_BASE + overrides.split() + [f"activation-checkpoint:{ac}"],
                source=dict(_AR15_SRC if branch == 15 else _AR19_SRC, ref=(_AR15_SRC if branch == 15 else _AR19_SRC)["ref"]
                            + f", row {commit}"),
                quote=quote, read=_AR_READ + (" " + extra_read if extra_read else ""), pair=None)
    if gib:
        case["measured_peak"] = dict(gib=gib, basis="reserved", rank="first",
                                     how="torchtitan 'memory: X GiB' (DeviceMemoryMonitor reserved peak), step 10, rank 0")
    return case


_NEVER = "--parallelism.fsdp_reshard_after_forward never"
_CM = "--compile.enable --compile.components model"
_CML = "--compile.enable"  # compile.components defaults to model and loss
_BF16 = "--training.dtype bfloat16"
_NOAC_BOOT = ("The may19 bootstrap's parallelize did not apply the config's AC (its next row 'apply configured full "
              "activation checkpointing' adds apply_ac): no AC.")
CASES += [
    _ar("fsdp8_lbs4_fullac", 15, "fc6629b", "ran", "", "full",
        "'bootstrap FSDP over 8-way dp_shard mesh ... 50.1' (learnings: '50.1GiB peak memory')", 50.1),
    _ar("fsdp8_lbs4_fullac_noreshard", 15, "9db79f7", "ran", _NEVER, "full",
        "'FSDP reshard_after_forward never ... 72.2'", 72.2),
    _ar("fsdp8_lbs8_fullac_noreshard", 15, "dfac656", "ran", _NEVER + " --training.local_batch_size 8", "full",
        "'local batch size 8 with no-reshard ... 84.5'", 84.5),
    _ar("fsdp8_lbs4_sac_noreshard", 15, "0b0796f", "ran", _NEVER, "selective",
        "'selective activation checkpointing with no-reshard ... 113.7'", 113.7),
    _ar("fsdp8_lbs4_noac_noreshard", 15, "dc56c35", "oom", _NEVER, "none",
        "'no activation checkpointing with no-reshard OOM' (learnings: 'crashed with OOM during RoPE in "
        "apply_rotary_emb_cos_sin, with about 178.15GiB in use and only about 188MiB free')"),
    _ar("fsdp8_lbs6_sac_noreshard", 15, "50404e", "ran", _NEVER + " --training.local_batch_size 6", "selective",
        "'local batch size 6 with selective AC and no-reshard ... 141.9'", 141.9),
    _ar("fsdp8_lbs4_sac_noreshard_compile", 15, "a68a3c", "ran", _NEVER + " " + _CM, "selective",
        "'per-block compile with selective AC and no-reshard ... 108.2'", 108.2),
    _ar("fsdp8_lbs5_sac_noreshard_compile", 15, "5902e0", "ran", _NEVER + " " + _CM + " --training.local_batch_size 5",
        "selective", "'local batch size 5 with model-only compile selective AC and no-reshard ... 119.9'", 119.9),
    _ar("fsdp8_lbs6_sac_noreshard_compile", 15, "0461f6", "oom", _NEVER + " " + _CM + " --training.local_batch_size 6",
        "selective", "'local batch size 6 with per-block compile selective AC and no-reshard OOM' (learnings: 'crashed "
        "before step 1 with an inductor allocation OOM for an 816MiB bf16 buffer while the GPU was nearly full')"),
    _ar("fsdp8_lbs4_sac_noreshard_compile_loss", 15, "14b663", "ran", _NEVER + " " + _CML, "selective",
        "'default compile components with selective AC and no-reshard ... 106.3'", 106.3),
    _ar("fsdp8_lbs4_noac", 19, "01d1f8e", "ran", "", "none",
        "'bootstrap minimal baseline FSDP ... 173.9' (learnings: 'Step 10 peak memory: 173.91 GiB, 97.51% of the "
        "reported 178.35 GiB capacity')", 173.91, _NOAC_BOOT),
    _ar("fsdp8_lbs4_fullac", 19, "dc2765b", "ran", "", "full",
        "'apply configured full activation checkpointing ... 47.0' (learnings: 'Step 10 peak memory: 47.04 GiB')", 47.04),
    _ar("fsdp8_lbs4_noac_bf16", 19, "73e33ba", "ran", _BF16, "none",
        "'full bf16 training dtype ... 160.7' (learnings: '160.71 GiB')", 160.71, _NOAC_BOOT),
    _ar("fsdp8_lbs5_noac_bf16", 19, "c65a743", "oom", _BF16 + " --training.local_batch_size 5", "none",
        "'bf16 training dtype with local batch size 5' crash (learnings: 'OOMed during the first backward inside "
        "ChunkedCELoss ... about 177.63 GiB in use on GPUs with 178.35 GiB capacity, and a failed 1.45 GiB "
        "allocation')", None, _NOAC_BOOT),
    _ar("fsdp8_lbs4_noac_bf16_noreshard", 19, "a156590", "oom", _BF16 + " " + _NEVER, "none",
        "'bf16 training dtype with fsdp reshard disabled' crash (learnings: 'Step 1 reported ... 176.49 GiB peak "
        "memory before crashing later in first backward ... failed allocation was 2.90 GiB with about 175.75 GiB "
        "already in use')", None, _NOAC_BOOT),
    _ar("fsdp8_lbs4_fullac_noreshard", 19, "9c5ebcc", "ran", _NEVER, "full",
        "'full activation checkpointing with fsdp reshard disabled ... 72.9' (learnings: '72.91 GiB')", 72.91),
    _ar("fsdp8_lbs4_noac_compile", 19, "51369ea", "ran", _CML, "none",
        "'enable per-block compile on current best ... 153.7' (learnings: '153.72 GiB')", 153.72, _NOAC_BOOT),
    _ar("fsdp8_lbs4_noac_bf16_compile", 19, "48c69e1", "ran", _CML + " " + _BF16, "none",
        "'compile with bf16 training dtype ... 140.3' (learnings: '140.34 GiB')", 140.34, _NOAC_BOOT),
    _ar("fsdp8_lbs5_noac_bf16_compile", 19, "f6ae44e", "ran", _CML + " " + _BF16 + " --training.local_batch_size 5",
        "none", "'compile and bf16 with local batch size 5 ... 168.7' (learnings: '168.74 GiB, 94.61% of reported "
        "capacity')", 168.74, _NOAC_BOOT),
    _ar("fsdp8_lbs6_noac_bf16_compile", 19, "d26bddb", "oom", _CML + " " + _BF16 + " --training.local_batch_size 6",
        "none", "'compile and bf16 with local batch size 6' crash (learnings: 'OOMed before completing step 1 in "
        "ChunkedCELoss, at lm_head(h_chunk). The failing allocation was 892 MiB ... about 176.62 GiB already in use')",
        None, _NOAC_BOOT),
    _ar("fsdp8_lbs5_noac_bf16_compile_model", 19, "620b4bb", "oom", _CM + " " + _BF16 + " --training.local_batch_size 5",
        "none", "'compile model blocks only with bf16 local batch size 5' crash (learnings: 'Loss compile was "
        "disabled, and the run OOMed before completing step 1 during ChunkedCELoss backward. The failing allocation "
        "was 1.45 GiB. Rank 0 reported about 177.63 GiB already in use')", None, _NOAC_BOOT),
    _ar("fsdp8_lbs6_sac_bf16_compile", 19, "a593f3a", "ran", _CML + " " + _BF16 + " --training.local_batch_size 6",
        "selective", "'selective activation checkpointing with compile bf16 local batch size 6 ... 91.7' (learnings: "
        "'91.66 GiB')", 91.66),
    _ar("fsdp8_lbs10_sac_bf16_compile", 19, "ad6265f", "ran", _CML + " " + _BF16 + " --training.local_batch_size 10",
        "selective", "'selective activation checkpointing with compile bf16 local batch size 10 retry ... 135.8' "
        "(learnings: '135.75 GiB')", 135.75),
]

# Megatron-Bridge skills/nemo-mbridge-perf-moe-comm-overlap/card.yaml (validated 2026-07-25): the canonical 16 x H100
# Qwen3 30B-A3B BF16 performance recipe (perf_recipes/qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config
# at 3a9559f01 over recipes/qwen/h100/qwen3_moe.py: TP1 PP1 EP16 MBS1 GBS1024, seq 4096, no recompute, HybridEP with 32 SMs,
# forced balance, EP overlap without delayed wgrad, TE graphs of moe_router + moe_preprocess, precision-aware optimizer
# with fp32 states, grad reduce in bf16) with its measured rank-0 peak allocated memory.
_Q30_OVL = dict(drop=tuple(f for f in FP8_FLAGS if f != "--fp8-recipe"),
                set_={**NO_DROPOUT, "--overlap-moe-expert-parallel-comm": None, "--fp8-recipe": "tensorwise",
                                      "--cuda-graph-impl": "transformer_engine",
                                      "--cuda-graph-scope": ["moe_router", "moe_preprocess"],
                                      "--te-rng-tracker": None, "--use-precision-aware-optimizer": None,
                                      "--apply-rope-fusion": None})
CASES += [
    dict(id="mbridge_qwen3_30b_h100_bf16_16gpu_ep16_hybridep_overlap_te_graphs", outcome="ran", framework="megatron",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
         base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu", edits=_Q30_OVL,
         source=dict(ref="NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-moe-comm-overlap/card.yaml (validated "
                         "2026-07-25; recipe perf_recipes/qwen/h100/qwen3_moe.py at 3a9559f01)",
                     url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/skills/nemo-mbridge-perf-moe-comm-"
                         "overlap/card.yaml", date="2026-07-25"),
         quote=("'model: Qwen3 30B-A3B hardware: 16xH100 precision: BF16 shape: seq4096 TP1 PP1 CP1 EP16 MBS1 GBS1024 "
                "dispatcher: HybridEP routing: force_balance cuda_graph_scopes: moe_router, moe_preprocess ... "
                "rank0_peak_allocated_gib: 62.166' (the overlap case: 'plain EP overlap with delayed wgrad disabled')"),
         read=("Flags = current_runs row mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu (the 16 x H100 preset: TP1 PP1 EP16, "
               "MBS 1, GBS 1024, HybridEP 32 SMs, forced balance, grad reduce in bf16) in BF16 (--fp8-format and the fp8 "
               "parameter flags dropped; --fp8-recipe tensorwise kept without --fp8-format: _perf_precision('bf16') is "
               "bf16_mixed(), whose MixedPrecisionConfig.fp8_recipe default 'tensorwise' reaches the OptimizerConfig, so "
               "the precision-aware optimizer keeps its own fp32 masters, memory.mcore.master_param_bytes), with "
               "what qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config at 3a9559f01 adds: --overlap-moe-expert-parallel-comm "
               "(delay_wgrad_compute False), TE graphs of moe_router and moe_preprocess (cuda_graph_impl "
               "transformer_engine, te_rng_tracker), the precision-aware optimizer with fp32 main params / grads / "
               "states, rope fusion; recompute None ('The 16-GPU topology fits without activation recomputation').  "
               "Not flags: moe_permute_fusion_into_hybridep, 64-token combine chunks "
               "(NUM_OF_TOKENS_PER_CHUNK_COMBINE_API), expandable segments.  The peak is the card's rank-0 peak "
               "allocated in GiB.  The earlier rows of the base flags (26.04) are assumed unchanged for what they share."),
         measured_peak=dict(gib=62.166, basis="allocated", rank="first", how="card rank0_peak_allocated_gib"), pair=None),
]

# ---------------------------------------------------------------- round 24 (branch oom12): held-out reports
# NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-cpu-offloading/card.yaml (validated 2026-03-30, committed
# fb5743649 2026-05-29): Qwen3-30B-A3B pretrain, TP2 PP2 EP4 on 2 nodes of 8 H100, the optimizer states moved to the host
# by HybridDeviceOptimizer at fractions 0 / 25 / 50 / 75 / 100 % (and 100 % with the D2H / H2D overlap), each with its
# measured mem_allocated_gb.  The activation-offload OOM row of the card (24 layers, PP 1) names no TP / EP: not added.
_OFF_SRC = dict(ref="NVIDIA-NeMo/Megatron-Bridge skills/nemo-mbridge-perf-cpu-offloading/card.yaml and SKILL.md "
                    "(validated_on 2026-03-30; commit fb5743649), measured_results",
                url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/tree/main/skills/nemo-mbridge-perf-cpu-offloading",
                date="2026-03-30")
_OFF_READ = ("Flags = current_runs row mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu (the Qwen3-30B-A3B architecture, "
             "distributed optimizer, overlapped grad reduce / param gather, TE cross-entropy, grouped GEMM, permute fusion, "
             "average in collective) edited to the library recipe the card's command runs, qwen3_30b_a3b_pretrain_config "
             "at 34486a381 (2026-03-30, recipes/qwen/qwen3_moe.py + recipes/common.py _pretrain_common + bf16_mixed): BF16 "
             "(FP8 flags dropped), full recompute uniform 1 layer, flex dispatcher with the DeepEP backend "
             "(apply_flex_dispatcher_backend on Hopper), no router fusion, no forced balance, grad reduce in fp32, NaN "
             "check on; the card's TP2 PP2 EP4 (ETP 1, sequence parallel) on 16 GPUs; the SKILL.md command's GBS 8 / MBS 1; "
             "--optimizer-cpu-offload with the row's --optimizer-offload-fraction.  mem_allocated_gb read as Bridge's "
             "report_memory max allocated (bytes / 1e9) of rank 0; which rank is not stated, so approximate.")


def _off(tag: str, frac: float | None, gb: float, row: str, overlap: bool = False) -> dict:
    set_ = {**NO_DROPOUT, "--tensor-model-parallel-size": 2, "--pipeline-model-parallel-size": 2,
            "--expert-model-parallel-size": 4, "--expert-tensor-parallel-size": 1, "--sequence-parallel": None,
            "--global-batch-size": 8, "--micro-batch-size": 1, "--recompute-granularity": "full",
            "--recompute-method": "uniform", "--recompute-num-layers": 1, "--moe-token-dispatcher-type": "flex",
            "--moe-flex-dispatcher-backend": "deepep"}
    if frac is not None:
        set_.update({"--optimizer-cpu-offload": None, "--optimizer-offload-fraction": frac})
    if overlap:
        set_["--overlap-cpu-optimizer-d2h-h2d"] = None
    return dict(id=f"mbridge_qwen3_30b_h100_bf16_16gpu_tp2pp2ep4_{tag}", outcome="ran", framework="megatron",
                hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=16, gpus_per_node=8),
                base="mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu",
                edits=dict(drop=FP8_FLAGS + ("--moe-router-fusion", "--moe-router-force-load-balancing",
                                             "--grad-reduce-in-bf16", "--no-check-for-nan-in-loss-and-grad",
                                             "--moe-hybridep-num-sms"), set_=set_),
                source=_OFF_SRC, quote=row, read=_OFF_READ,
                measured_peak=dict(gib=round(gb * 1e9 / 2**30, 2), basis="allocated", rank="first", approx=True,
                                   how=f"card mem_allocated_gb {gb} (1e9 B)"), pair=None)


CASES += [
    _off("baseline", None, 47.2, "'config: baseline iter_ms: 996 mem_allocated_gb: 47.2 status: success'"),
    _off("optoffload25", 0.25, 43.4, "'config: optimizer_offload_25pct ... mem_allocated_gb: 43.4 mem_saved_gb: 3.8'"),
    _off("optoffload50", 0.5, 39.6, "'config: optimizer_offload_50pct ... mem_allocated_gb: 39.6 mem_saved_gb: 7.6'"),
    _off("optoffload75", 0.75, 35.6, "'config: optimizer_offload_75pct ... mem_allocated_gb: 35.6 mem_saved_gb: 11.6'"),
    _off("optoffload100", 1.0, 32.0, "'config: optimizer_offload_100pct ... mem_allocated_gb: 32.0 mem_saved_gb: 15.3'"),
    _off("optoffload100_overlap", 1.0, 32.0,
         "'config: optimizer_offload_100pct_overlap iter_ms: 3877 ... mem_allocated_gb: 32.0'", overlap=True),
]

# ---------------------------------------------------------------- round 27 (branch oom13): held-out reports
# pytorch/torchtitan torchtitan/components/quantization/nvfp4.md as added by bcc09297a ('Add an NVFP4 quantization
# converter (#3914)', 2026-08-05): 'Llama 3 8B 200M-Token Evidence', three eager + torch.compile runs of Llama 3 8B on
# C4, global batch 128 = local batch 32 x FSDP 4, seq 2048 (the command of the same section), each with torchtitan's
# 'memory' column: 110.95 GiB (60.2%) NVFP4 (bf16 tail), 179.94 GiB (97.6%) MXFP8, 174.49 GiB (94.7%) BF16.
_NVFP4_SRC = dict(ref="pytorch/torchtitan bcc09297a torchtitan/components/quantization/nvfp4.md, 'Llama 3 8B 200M-Token "
                      "Evidence' (PyTorch 2.14.0a0+gitd9abf9e, TorchAO 0.18.0+gitcb76f29)",
                  url="https://github.com/pytorch/torchtitan/blob/bcc09297a/torchtitan/components/quantization/nvfp4.md",
                  date="2026-08-05")
_NVFP4_READ = ("The doc's command (torchrun --nproc_per_node 4 -m torchtitan.train --module llama3 --config <config> "
               "--parallelism.tensor_parallel_degree 1 --parallelism.data_parallel_shard_degree 4 "
               "--training.local_batch_size 32 --training.seq_len 2048) as the torchtitan 0.3.0 launch of the config of "
               "each run: llama3_8b_first_85_pct_layers_nvfp4 (model compiled, layers 0-26 NVFP4), llama3_8b_mxfp8 "
               "(model compiled) and, for BF16, llama3_8b with the model compiled ('All runs use eager execution with "
               "model compilation'); llama3_8b's SelectiveAC (per-op) and ChunkedLossWrapper.  Device: the percentages "
               "give total_memory 184.3 GiB (174.49 / 0.947, 179.94 / 0.976, 110.95 / 0.602): a GB200 (184.31 GiB), "
               "4 GPUs.  Peak = torchtitan's 'memory: X GiB' (DeviceMemoryMonitor reserved peak) at step 760, the "
               "logging rank.")


def _nvfp4doc(tag: str, config: str, gib: float, row: str, extra: tuple[str, ...] = ()) -> dict:
    return dict(id=f"titan_nvfp4doc_llama3_8b_gb200_4gpu_{tag}", outcome="ran", framework="torchtitan",
                hardware=dict(gpu="GB200 (184.31 GiB)", plan_gpu="gb200", num_gpus=4, gpus_per_node=4),
                torchtitan_launch=["torchrun", "--standalone", "--nproc_per_node", "4", "-m", "torchtitan.train",
                                   "--module", "llama3", "--config", config, "--parallelism.tensor_parallel_degree", "1",
                                   "--parallelism.data_parallel_shard_degree", "4", "--training.local_batch_size", "32",
                                   "--training.seq_len", "2048", *extra],
                source=_NVFP4_SRC, quote=f"'| {row} | ... | {gib} GiB (...) |'", read=_NVFP4_READ,
                measured_peak=dict(gib=gib, basis="reserved", rank="first",
                                   how="torchtitan 'memory: X GiB' (DeviceMemoryMonitor reserved peak), step 760"),
                pair=None)


CASES += [
    _nvfp4doc("bf16_compile", "llama3_8b", 174.49, "BF16", ("--compile.enable", "--compile.components", "model")),
    _nvfp4doc("mxfp8_compile", "llama3_8b_mxfp8", 179.94, "MXFP8"),
    _nvfp4doc("nvfp4_bf16tail_compile", "llama3_8b_first_85_pct_layers_nvfp4", 110.95, "NVFP4 (bf16 tail)"),
]

# ---------------------------------------------------------------- round 28 (branch oom14): held-out reports
# pytorch/torchtitan docs/performance.md: as added by 395a52627 ('add performance file to show convergence with 64 a100s
# (#255)', 2024-04-18) -- Llama 2 13B / 70B with FSDP2 (1D) on 64 A100 80GB, local batch 2 (1), seq 4096, with two OOM
# rows -- and as of 3faaa1a0d ('Fix the performance number for 405B (#556)', 2024-08-23) -- Llama 3.1 405B on 128 H100
# (95GB), 'We do see OOM for 1D parallelism (FSDP2), so we only tested 2D parallelism (FSDP2 + Tensor Parallel)', and
# Llama 3 8B / 70B with FSDP2 on 64 A100.  No peaks: verdicts only.
_PERF_SRC_L2 = dict(ref="pytorch/torchtitan docs/performance.md as added by 395a52627 (#255), 'LLaMa 13B and LLaMa 70B "
                        "training on 64 A100 (80GB memory) GPUs ... FSDP2 (1D parallelism)'",
                    url="https://github.com/pytorch/torchtitan/blob/395a52627/docs/performance.md", date="2024-04-18")
_PERF_SRC_L3 = dict(ref="pytorch/torchtitan docs/performance.md at 3faaa1a0d (#554 / #556), 'Llama 3.1 performance "
                        "numbers' and 'Llama 3 performance numbers'",
                    url="https://github.com/pytorch/torchtitan/blob/3faaa1a0d/docs/performance.md", date="2024-08-23")
# torchtitan 395a52627 torchtitan/models/llama/__init__.py llama2_configs (ModelArgs: multiple_of 256, vocab from the
# Llama 2 sentencepiece tokenizer, 32,000): 13B dim 5120, 40 layers, 40 heads (no GQA), FFN 13824; 70B dim 8192, 80
# layers, 64 heads, 8 KV heads, ffn_dim_multiplier 1.3, multiple_of 4096 (FFN 28672); torchtitan's registry today has
# no Llama 2, so the architecture is given as fields (the job's model._arch)
_L2_70B = dict(name="llama2-70B", num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
               num_query_groups=8, head_dim=128, vocab_size=32000, max_position_embeddings=4096, normalization="rmsnorm",
               position_embedding="rope", swiglu=True, untie_embeddings_and_output_weights=True, add_bias_linear=False,
               add_qkv_bias=False, qk_layernorm=False, make_vocab_size_divisible_by=1)
_L2_13B = dict(_L2_70B, name="llama2-13B", num_layers=40, hidden_size=5120, ffn_hidden_size=13824,
               num_attention_heads=40, num_query_groups=40)
_PERF_READ_L2 = ("Job = train_configs/llama_{13b,70b}.toml at 395a52627 as the doc ran them: FSDP2 over the 64 GPUs "
                 "(tensor_parallel_degree 1: '1D parallelism'), local batch 2 (1 where stated), seq_len 4096, compile off, "
                 "no float8, FSDP2 MixedPrecisionPolicy bf16 / fp32 reduce (parallelize_llama.py), the doc's AC: 'no' = "
                 "none, 'selective op' = per-op SAC, 'selective layer' = selective_ac_option '2' (the config default, "
                 "'checkpoint every other layer'; option 1 would be full AC, which ran at batch 2), 'full'.  Model "
                 "'llama' of that commit = Llama 2 (README: 'pre-training Llama2 models'), given as fields; 8 A100 per node.")


_A100_64 = dict(gpu="A100 80GB", plan_gpu="a100-sxm-80gb", num_gpus=64, gpus_per_node=8)


def _perfdoc_a100(model: str, size: str, lbs: int, seq: int, ac: str, outcome: str, quote: str, source: str,
                  read: str, pair: str | None = None, arch: dict | None = None) -> dict:
    """One row of TorchTitan's ``docs/performance.md`` A100 tables: FSDP2 over 64 A100 80GB (1D), compile and
    float8 off; ``ac`` the doc's AC ('none', 'full', or a selective option: 'op' / '2')."""
    acd = ({"mode": "none"} if ac == "none" else {"mode": "full"} if ac == "full"
           else {"mode": "selective", "selective_ac_option": ac})
    tag = "sacop" if ac == "op" else "sac2" if ac == "2" else ac + "ac"
    mod = {"name": "llama3", "flavor": size.upper(), **({"_arch": arch} if arch is not None else {})}
    return dict(id=f"titan_perfdoc_{model}_{size}_a100_64gpu_fsdp64_lbs{lbs}_{tag}",
                outcome=outcome, framework="torchtitan",
                hardware=dict(_A100_64),
                torchtitan_config={"model": mod,
                                   "training": {"local_batch_size": lbs, "seq_len": seq},
                                   "parallelism": {"data_parallel_replicate_degree": 1,
                                                   "data_parallel_shard_degree": -1,
                                                   "tensor_parallel_degree": 1},
                                   "activation_checkpoint": acd, "compile": {"enable": False},
                                   "optimizer": {"name": "AdamW"}},
                source=source, quote=quote, read=read, pair=pair)


def _perfdoc_l2(size: str, lbs: int, ac: str, outcome: str, quote: str, pair: str | None = None) -> dict:
    return _perfdoc_a100("llama2", size, lbs, 4096, ac, outcome, quote, _PERF_SRC_L2, _PERF_READ_L2, pair,
                         arch=_L2_70B if size == "70b" else _L2_13B)

CASES += [
    _perfdoc_l2("70b", 2, "op", "oom", "'| 70B | 2 | selective op | OOM | OOM |'", pair="titan_perfdoc_llama2_70b_a100_64gpu_fsdp64_lbs1_sacop"),
    _perfdoc_l2("70b", 2, "2", "oom", "'| 70B | 2 | selective layer | OOM | OOM |'", pair="titan_perfdoc_llama2_70b_a100_64gpu_fsdp64_lbs2_fullac"),
    _perfdoc_l2("70b", 1, "op", "ran", "'| 70B | 1[^1] | selective op | 355 | 50.8% |' ('Since the 70B training with local "
                "batch size 2 will cause OOM error when selective activation checkpointing is used, we report the local "
                "batch size 1 case instead')"),
    _perfdoc_l2("70b", 2, "full", "ran", "'| 70B | 2 | full | 353 | 50.5% |'"),
    _perfdoc_l2("13b", 2, "none", "ran", "'| 13B | 2 | no | 2162 | 61.1% |'"),
    _perfdoc_l2("13b", 2, "2", "ran", "'| 13B | 2 | selective layer | 1914 | 54.1% |'"),
    _perfdoc_l2("13b", 2, "op", "ran", "'| 13B | 2 | selective op | 1904 | 53.8% |'"),
]

_PERF_READ_405 = ("Job = train_configs/llama3_405b.toml at 3faaa1a0d (Llama 3.1 405B, local batch 2, seq_len 8192, full AC, "
                  "compile on) with the doc's 'None' optimizations (no float8, no async TP), on 128 'HBM2e based lower TDP "
                  "SXM H100(95GB)' (footnote 1), 8 per node: the 1D run FSDP 128 (tensor_parallel_degree 1) 'OOM'; the 2D "
                  "run FSDP 16 x TP 8 ('global batch size = local batch size 2 * number of FSDP ranks 16 = 32') ran.  "
                  "Which optimizations the 1D try had is not stated (with full AC the static state alone, 405e9 x 16 B / "
                  "128 = 47 GiB, plus 126 saved layer inputs of 2 x 8192 x 16384 bf16 = 63 GiB, exceeds 95 GiB in any of them).")
_PERF_READ_L3 = ("Job = train_configs/llama3_{8b,70b}.toml at 3faaa1a0d as the doc ran them: FSDP2 over 64 A100 80GB (1D), "
                 "local batch 1, seq_len 8192, the doc's AC ('selective layer' = selective_ac_option '2'), compile and "
                 "float8 off as in the tomls; 8 per node.")
_L405_JOB = {"model": {"name": "llama3", "flavor": "405B"}, "training": {"local_batch_size": 2, "seq_len": 8192},
             "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                             "tensor_parallel_degree": 8, "enable_async_tensor_parallel": False},
             "activation_checkpoint": {"mode": "full"}, "compile": {"enable": True, "components": ["model"]},
             "optimizer": {"name": "AdamW"}}
_H100_95 = dict(gpu="H100 SXM 95GB (HBM2e, lower TDP)", plan_gpu="h100-sxm-96gb-500w", num_gpus=128, gpus_per_node=8)


def _perfdoc_l3(size: str, ac: str, quote: str) -> dict:
    return _perfdoc_a100("llama3", size, 1, 8192, ac, "ran", quote, _PERF_SRC_L3, _PERF_READ_L3)

CASES += [
    dict(id="titan_perfdoc_llama31_405b_h100_128gpu_fsdp128_lbs2_fullac", outcome="oom", framework="torchtitan",
         hardware=dict(_H100_95), torchtitan_config=_titan(_L405_JOB, parallelism={"tensor_parallel_degree": 1}),
         source=_PERF_SRC_L3, quote="'We do see OOM for 1D parallelism (FSDP2), so we only tested 2D parallelism (FSDP2 + "
                                    "Tensor Parallel).'", read=_PERF_READ_405,
         pair="titan_perfdoc_llama31_405b_h100_128gpu_fsdp16_tp8_lbs2_fullac"),
    dict(id="titan_perfdoc_llama31_405b_h100_128gpu_fsdp16_tp8_lbs2_fullac", outcome="ran", framework="torchtitan",
         hardware=dict(_H100_95), torchtitan_config=_L405_JOB, source=_PERF_SRC_L3,
         quote="'| 405B | 2 | full | 109 | 29.0%[^1] | None'", read=_PERF_READ_405, pair=None),
    _perfdoc_l3("8b", "2", "'| 8B | 1 | selective layer | 2904 | 56.8% |'"),
    _perfdoc_l3("8b", "op", "'| 8B | 1 | selective op | 2973 | 58.2% |'"),
    _perfdoc_l3("70b", "full", "'| 70B | 1 | full | 331 | 51.7% |'"),
]

# ---------------------------------------------------------------- round 30 (branch oom15): held-out torchao reports
# pytorch/ao torchao/float8/README.md as changed by 853f87d1b (#2736, 2025-08-11, 'torchao.float8:
# update with AMD MI300X
# benchmark results'), section 'AMD MI300x': 8 x MI300X, batch size 1, sequence length 8192, steps 100, torch.compile,
# FSDP2, per-op SAC; torch 2.9.0.dev20250811+rocm6.4, torchao 0.13.0+git4fc4068d6, torchtitan 2c8b59479.  Run by
# benchmarks/float8/training/llama3.sh of that commit: CONFIG_FILE llama3_8b.toml --training.steps=100
# --training.local-batch-size=1 --training.compile and the recipe's flags (tensorwise: --model.converters=float8
# --float8.enable_fsdp_float8_all_gather --float8.precompute_float8_dynamic_scale_for_fsdp; otherwise
# --float8.recipe_name=R); 'Peak Memory (GB)' = parse_torchtitan_logs.py's max of the logged 'memory: X GiB'.
_AO_MI300X_SRC = dict(ref="pytorch/ao torchao/float8/README.md at 853f87d1b (#2736) 'AMD MI300x' table (torch "
                          "2.9.0.dev20250811+rocm6.4, torchao 0.13.0+git4fc4068d6, torchtitan 2c8b59479), "
                          "reproduced by "
                          ""
                          "benchmarks/float8/training/llama3.sh",
                      url="https://github.com/pytorch/ao/blob/853f87d1b/torchao/float8/README.md", date="2025-08-11")
_AO_MI300X_READ = ("Job table = torchtitan 2c8b59479 torchtitan/models/llama3/train_configs/llama3_8b.toml (Llama "
                   "3 8B, "
                   "seq_len 8192, FSDP over the 8 GPUs, selective per-op AC, AdamW, float8 filter_fqns ['output']) "
                   "with "
                   "llama3.sh's --training.steps=100 --training.local-batch-size=1 --training.compile (2c8b59479 "
                   "compiles "
                   "the model and, components/loss.py:27-29, the loss) and the row's converter flags.  Device: 8 x "
                   "MI300X "
                   "(192 GiB).  'Peak Memory (GB)' is parse_torchtitan_logs.py's max of torchtitan's 'memory: X GiB' "
                   "(reserved, rank 0): GiB.")
_AO_MI300X_HW = dict(gpu="MI300X (8x, 192 GiB)", plan_gpu="mi300x", num_gpus=8, gpus_per_node=8)


def _ao_mi300x(tag: str, gib: float, row: str, **sections: dict) -> dict:
    return dict(id=f"ao_mi300x_llama3_8b_8gpu_compile_{tag}", outcome="ran", framework="torchtitan",
                hardware=_AO_MI300X_HW, torchtitan_config=_titan(_AO_B200_JOB, **sections), source=_AO_MI300X_SRC,
                quote=f"'| Llama3-8b     |  {row} | {gib} | ...'", read=_AO_MI300X_READ,
                measured_peak=dict(gib=gib, basis="reserved", rank="first",
                                   how="max over steps of torchtitan's 'memory: X GiB' (rank 0 reserved)"),
                pair=None)


# pytorch/ao docs/source/eager_tutorials/pretraining.rst ('Pre-training with torchtitan', logs dated 2025-06-04; the
# tutorial links llama3_8b.toml at torchtitan 775a486ed, 2025-06-03): 'NGPU=8 CONFIG_FILE=.../llama3_8b.toml
# ./run_train.sh --training.compile [--model.converters="float8" [--float8.recipe_name="rowwise"]]' on 8 H100s; every
# log line's 'X GiB(Y%)' gives X / Y = 95.0 GiB (the 96 GB H100).
_AO_TUT_SRC = dict(ref="pytorch/ao docs/source/eager_tutorials/pretraining.rst ('Pre-training with torchtitan', logs "
                       "of "
                       "2025-06-04; llama3_8b.toml linked at torchtitan 775a486ed)",
                   url="https://github.com/pytorch/ao/blob/main/docs/source/eager_tutorials/pretraining.rst",
                   date="2025-06-04")
_AO_TUT_READ = ("Job table = torchtitan 775a486ed torchtitan/models/llama3/train_configs/llama3_8b.toml (Llama 3 8B, "
                "batch_size 1, seq_len 8192, FSDP over the 8 GPUs (NGPU=8), selective per-op AC, AdamW, float8 "
                "filter_fqns "
                "['output']) with the command's --training.compile (775a486ed compiles the model and, "
                "components/loss.py:26-28, the loss) and converter flags (float8 without a recipe name = tensorwise, "
                "no float8 all-gather).  Device: H100 whose logged share gives 95.0 GiB (the 96 GB H100).  The "
                "peak is the "
                "steady 'memory: X GiB' of steps 10-40 (torchtitan's max reserved, rank 0).")
_AO_TUT_HW = dict(gpu="H100 96GB (logged total 95.0 GiB)", plan_gpu="h100-sxm-96gb-500w", num_gpus=8, gpus_per_node=8)


def _ao_tut(tag: str, gib: float, pct: str, cmd: str, **sections: dict) -> dict:
    return dict(id=f"ao_tutorial_llama3_8b_h100_8gpu_compile_{tag}", outcome="ran", framework="torchtitan",
                hardware=_AO_TUT_HW, torchtitan_config=_titan(_AO_B200_JOB, training={"steps": 1000}, **sections),
                source=_AO_TUT_SRC, quote=f"'{cmd}' ... 'step: 20 ... memory: {gib}GiB({pct})'", read=_AO_TUT_READ,
                measured_peak=dict(gib=gib, basis="reserved", rank="first",
                                   how="'memory: X GiB' of steps 10-40 (rank 0 max reserved)"),
                pair=None)


CASES += [
    _ao_mi300x("bf16", 39.09, "none (bfloat16)                  "),
    _ao_mi300x("float8_tensorwise_fsdp_fp8_ag", 39.07, "tensorwise with float8 all-gather",
               model={"converters": ["float8"]},
               float8={"enable_fsdp_float8_all_gather": True, "precompute_float8_dynamic_scale_for_fsdp": True}),
    _ao_mi300x("float8_rowwise_with_gw_hp", 39.32, "rowwise_with_gw_hp with bfloat16 all-gather ",
               model={"converters": ["float8"]}, float8={"recipe_name": "rowwise_with_gw_hp"}),
    _ao_mi300x("float8_rowwise", 39.32, "rowwise with bfloat16 all-gather ", model={"converters": ["float8"]},
               float8={"recipe_name": "rowwise"}),
    _ao_tut("bf16", 30.89, "32.51%", "./run_train.sh --training.compile"),
    _ao_tut("float8_rowwise", 30.99, "32.62%",
            "./run_train.sh --training.compile --model.converters=\"float8\" --float8.recipe_name=\"rowwise\"",
            model={"converters": ["float8"]}, float8={"recipe_name": "rowwise"}),
    _ao_tut("float8_tensorwise", 30.91, "32.53%", "./run_train.sh --training.compile --model.converters=\"float8\"",
            model={"converters": ["float8"]}),
]

# pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (added by 2887250bb, #1299, 2025-06-16):
# Grand Teton, 8 H100 96GB per host (500 W), torch 38410cf9 (2025-06-14), torchtitan 820504e20: 'Llama3 70b on 256
# H100s with FSDP=32, TP=8, torch.compile, full AC, local batch size 16' and 'Llama3 8b on 64 H100s with FSDP=8, TP=8,
# torch.compile, per op SAC, local batch size 12', each with vanilla and async TP, bf16 / float8 tensorwise / float8
# rowwise: ran (tokens/s published, no memory).  Verdicts only.  The float8 tensorwise rows leave out whether FSDP's
# float8 all-gather was on: left out; bf16 and rowwise (no float8 all-gather) kept, but for the 70B bf16 rows: the
# configuration of the Dec-2024 benchmark's 70B TP / async-TP rows (torchtitan_h100_70b_256gpu_*, measured peaks).
_ATP_SRC = dict(ref="pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (2887250bb, #1299; "
                    "torchtitan 820504e20, torch 38410cf9)",
                url=("https://github.com/pytorch/torchtitan/blob/2887250bb/benchmarks/"
                     "asyncTP_llama3_h100_2025-06_torchtitan.md"),
                date="2025-06-16")
_ATP_READ = ("Job table = torchtitan 820504e20 torchtitan/models/llama3/train_configs/llama3_{size}.toml "
             "(seq_len 8192, "
             "AdamW, FSDP over data_parallel_shard_degree -1) with the table's layout: {layout}; --training.compile "
             "(820504e20 compiles the model and, components/loss.py:27-29, the loss), async TP = "
             "parallelism.enable_async_tensor_parallel; rowwise = --model.converters float8 "
             "--float8.recipe_name rowwise "
             "(filter_fqns ['output']).  Device: 'Each H100 GPU is equipped with 96GB HBM2e', 'the default 500W power "
             "limit'.")
_ATP = {"70b": dict(gpus=256, job={"model": {"name": "llama3", "flavor": "70B"},
                                   "training": {"local_batch_size": 16, "seq_len": 8192, "compile": True},
                                   "parallelism": {"data_parallel_replicate_degree": 1,
                                                   "data_parallel_shard_degree": -1,
                                                   "tensor_parallel_degree": 8},
                                   "activation_checkpoint": {"mode": "full"}, "optimizer": {"name": "AdamW"}},
                    layout="FSDP 32 x TP 8 on 256 GPUs, full AC, local batch 16", title="Llama3 70b on 256 H100s"),
        "8b": dict(gpus=64, job={"model": {"name": "llama3", "flavor": "8B"},
                                 "training": {"local_batch_size": 12, "seq_len": 8192, "compile": True},
                                 "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                                                 "tensor_parallel_degree": 8},
                                 "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
                                 "optimizer": {"name": "AdamW"}},
                   layout="FSDP 8 x TP 8 on 64 GPUs, per-op SAC, local batch 12", title="Llama3 8b on 64 H100s")}


def _atp(size: str, fmt: str, async_tp: bool, quote: str) -> dict:
    a = _ATP[size]
    sections: dict = {"parallelism": {**a["job"]["parallelism"], "enable_async_tensor_parallel": async_tp}}
    if fmt == "rowwise":
        sections.update(model={**a["job"]["model"], "converters": ["float8"]}, float8={"recipe_name": "rowwise"})
    return dict(id=f"titan_asynctp_llama3_{size}_h100_{a['gpus']}gpu_{fmt}_{'async' if async_tp else 'vanilla'}_tp",
                outcome="ran", framework="torchtitan",
                hardware=dict(gpu="H100 96GB HBM2e (Grand Teton, 500 W)", plan_gpu="h100-sxm-96gb-500w",
                              num_gpus=a["gpus"], gpus_per_node=8),
                torchtitan_config=_titan(a["job"], **sections), source=_ATP_SRC,
                quote=f"'#### {a['title']} ...' '{quote}'", read=_ATP_READ.format(size=size, layout=a["layout"]),
                pair=None)


CASES += [
    _atp("70b", "rowwise", False, "| float8 rowwise    | 599.6 | 624.8 | 1.04 |"),
    _atp("70b", "rowwise", True, "| float8 rowwise    | 599.6 | 624.8 | 1.04 |"),
    _atp("8b", "bf16", False, "| None (bfloat16)   | 4378   | 4809.4 | 1.10 |"),
    _atp("8b", "bf16", True, "| None (bfloat16)   | 4378   | 4809.4 | 1.10 |"),
    _atp("8b", "rowwise", False, "| float8 rowwise    | 3708.5 | 3914.9 | 1.06 |"),
    _atp("8b", "rowwise", True, "| float8 rowwise    | 3708.5 | 3914.9 | 1.06 |"),
]

# ---------------------------------------------------------------- round 32 (branch oom16): Megatron-LM research branch
# _research/launch on 4 x GH200 96GB (Alps), read after the model was frozen.  (1) The Transformer++ baselines at
# 423ff71ff8 (2026-04-17, 'transformer-pp: set best MBS from sweep (350M/760M/1.3B->8, 2.7B->4)'): the micro batch each
# file keeps after an MBS sweep of that size (SWEEP_MBS, 457a013a60), i.e. one that ran; the 350M at MBS 16 ('max before
# OOM', 67cd82484b) is the case mlm_research_350m_dense_adamw_gh200_4gpu_mbs16 already.  (2) The softpick ablation at
# de9f8c17a3^ (2026-05-10): the local (unfused) attention at MBS 16 without recompute, which the fixing commit says
# cannot fit ('can't fit 24 layers in 95 GB GH200'; it drops MBS to 2 and adds --recompute-activations; that fix's run
# is not reported -- the file was removed the same day, 62c944613e -- so only the OOM is a case).
_TPP_COMMON = [f for f in _R350_COMMON if not f.startswith(("--num-layers", "--hidden-size", "--ffn-hidden-size",
                                                             "--num-attention-heads", "--num-query-groups"))]
_TPP_SRC = dict(ref="NVIDIA/Megatron-LM commit 423ff71ff8 (2026-04-17, 'transformer-pp: set best MBS from sweep "
                    "(350M/760M/1.3B->8, 2.7B->4)'): _research/launch/transformer-pp-{760m,1.3b,2.7b}.sbatch",
                url="https://github.com/NVIDIA/Megatron-LM/commit/423ff71ff8", date="2026-04-17")
_TPP_READ = ("MEGATRON_ARGS of the sbatch file at 423ff71ff8 (I/O, logging, schedule and optimizer-hyper-parameter flags "
             "left out; GPT-2 BPE vocabulary 50,257 from --tokenizer-type GPT2BPETokenizer with the GPT-2 vocab file): "
             "TP 1 PP 1 CP 1 on one node of 4 GH200 96GB (#SBATCH --gpus-per-node=4), DP 4, GBS 128, seq 4096, no "
             "recompute, bf16, AdamW with the distributed optimizer, overlapped grad reduce and param gather.  The "
             "micro batch is the one the commit sets from its sweep (457a013a60 added SWEEP_MBS for it), so it ran.")


def _tpp(size: str, layers: int, h: int, f: int, heads: int, kv: int, mbs: int) -> dict:
    return dict(id=f"mlm_research_transformer_pp_{size}_gh200_4gpu_mbs{mbs}", outcome="ran", framework="megatron",
                hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
                megatron_flags=_TPP_COMMON + [f"--num-layers {layers}", f"--hidden-size {h}", f"--ffn-hidden-size {f}",
                                              f"--num-attention-heads {heads}", f"--num-query-groups {kv}",
                                              f"--micro-batch-size {mbs}", "--optimizer adam", "--overlap-param-gather"],
                source=_TPP_SRC,
                quote=(f"'transformer-pp: set best MBS from sweep (350M/760M/1.3B->8, 2.7B->4)'; transformer-pp-{size}"
                       f".sbatch: '{layers}L / {h}H / {f}F / {heads}h / {kv}kv (GQA)', 'MBS=${{SWEEP_MBS:-{mbs}}}', "
                       "'GBS=128', 'SEQ_LEN=4096', 'TP=1', 'PP=1', 'CP=1'"),
                read=_TPP_READ, pair=None)


CASES += [
    _tpp("760m", 24, 1536, 4096, 24, 8, 8),
    _tpp("1.3b", 24, 2048, 5632, 32, 8, 8),
    _tpp("2.7b", 32, 2560, 7680, 32, 8, 4),
    dict(id="mlm_research_350m_softpick_local_attn_gh200_4gpu_mbs16", outcome="oom", framework="megatron",
         hardware=dict(gpu="GH200 96GB (Alps)", plan_gpu="gh200-96gb", num_gpus=4, gpus_per_node=4),
         megatron_flags=([f for f in _R350_COMMON if not f.startswith("--attention-backend")
                          and not f.startswith("--transformer-impl")]
                         + ["--transformer-impl local", "--no-persist-layer-norm", "--qk-layernorm",
                            "--micro-batch-size 16", "--optimizer aurora"]),
         source=dict(ref="NVIDIA/Megatron-LM commit de9f8c17a3 (2026-05-10, 'fix(softpick): drop MBS to 2 + "
                         "--recompute-activations to fit local backend'): _research/launch/transformer-pp-350m-"
                         "ablation-aurora-qkn-softpick.sbatch at its parent",
                     url="https://github.com/NVIDIA/Megatron-LM/commit/de9f8c17a3", date="2026-05-10"),
         quote=("'The local backend materializes the full [b, np, sq, sk] attention probs tensor (TE FlashAttention does "
                "not). At MBS=16 / seq=4096 that's 32 GB per layer in bf16, plus softpick's relu_scores + denom + backward "
                "intermediates -- can't fit 24 layers in 95 GB GH200.'"),
         read=("MEGATRON_ARGS of the sbatch file at de9f8c17a3^ (the 350M aurora-qkn ablation: 24L / 1024H / 2560F / 16h "
               "/ 4kv, QK layernorm, --transformer-impl local, --softmax-type softpick, MBS 16, GBS 128, seq 4096, no "
               "recompute, DP 4 on 4 GH200).  --softmax-type softpick (ReLU(x) / sum ReLU(x) in the unfused "
               "attention, a research-branch choice: Megatron-LM main's --softmax-type takes vanilla / off-by-one / "
               "learnable, and the reader refuses it) is left out of the flags: the projection prices the local "
               "spec's softmax, which keeps the probabilities too, so softpick's extra intermediates only add to a "
               "peak that must not fit; "
               "--optimizer aurora priced as Adam (as the other aurora cases)."),
         pair=None),
]

# ---------------------------------------------------------------- round 33 (branch oom17): Bridge model verification cards
# NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/<model>/card.yaml (mirror HEAD 067f987df, 2026-08-22):
# agent-readable records of bounded runs, each with its command (recipe name + overrides), the Bridge commit it ran at,
# the layout it resolved and, for some, the peak memory Bridge's training_log printed.  Read after the model was frozen;
# flags = the named recipe function at the item's commit (src/megatron/bridge/recipes/...), written as Megatron-LM flags
# on a current_runs row of the same model (the model flags) with the recipe's edits.  Items used: the 'verified' training
# items of supported families whose recipe function exists at the stated commit (cards of refused or unmodelled
# families -- Gemma 4, GLM 5, Step 3.5, DeepSeek-V4, Qwen3.8 VL, Nemotron 3.5, Kimi K3 / MiniMax M3 -- are left out).
_CARDS = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/067f987df/examples/model_verification_cards/{}/card.yaml"


def _card_src(model: str, item: str, commit: str, date: str) -> dict:
    return dict(ref=(f"NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/{model}/card.yaml (HEAD 067f987df), "
                     f"item {item} (bridge_commit {commit}, last_verified {date})"),
                url=_CARDS.format(model), date=date)


# Nemotron 3 Super 120B-A12B on 64 H100 (ffeb5a7ae, 2026-08-03, 'perf(recipe): tune Nemotron 3 Super H100 training'):
# recipes/nemotronh/h100/nemotron_3_super.py _nemotron_3_super_pretrain_64gpu_h100_bf16_config (= the public
# nemotron_3_super_pretrain_config) over nemotron_3_super_pretrain_16gpu_h100_bf16_config: TP1 PP2 EP32 ETP1, seq 4096,
# MBS 1, GBS 1280, flex / HybridEP, capacity factor 1.10 with padding to capacity, no CUDA graph, selective recompute
# layernorm / moe_act / moe / core_attn, precision-aware distributed optimizer (bf16 main grads and moments, fp16 main
# params), grads reduced in bf16, no grad-reduce / param-gather overlap, MTP 2 (repeated layer), per-token loss,
# TE cross-entropy, no manual GC.  The performance leaf (perf_recipes/nemotronh/h100/nemotronh.py
# nemotron_3_super_pretrain_64gpu_h100_bf16_config) adds forced routing and _benchmark_common (manual GC every 100).
# Peak: train_utils.training_log prints report_memory() (torch.cuda.memory_stats peaks / 1e9, 5 significant digits,
# 'memory (GB)') on every data-parallel rank 0 -- one line per pipeline stage -- after the first iterations; the card
# states one figure per run: read as the max over the two stages, GB = 1e9 B.
_N3S_EDITS = dict(
    drop=FP8_FLAGS + ("--cuda-graph-impl", "--cuda-graph-scope", "--te-rng-tracker", "--overlap-grad-reduce",
                      "--overlap-param-gather", "--moe-router-force-load-balancing",
                      "--moe-router-padding-for-quantization", "--moe-hybridep-num-sms", "--manual-gc",
                      "--manual-gc-interval"),
    set_={"--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 2, "--expert-model-parallel-size": 32,
          "--expert-tensor-parallel-size": 1, "--seq-length": 4096, "--micro-batch-size": 1,
          "--global-batch-size": 1280, "--moe-expert-capacity-factor": 1.1, "--moe-pad-expert-input-to-capacity": None,
          "--recompute-granularity": "selective", "--recompute-modules": ["layernorm", "moe_act", "moe", "core_attn"],
          "--use-precision-aware-optimizer": None, "--main-grads-dtype": "bf16", "--main-params-dtype": "fp16",
          "--exp-avg-dtype": "bf16", "--exp-avg-sq-dtype": "bf16"})
_N3S_READ = ("Flags = current_runs row mbridge2608_gb300_fp8_mx_nemotron3_super_64gpu (the same Nemotron 3 Super model "
             "flags: 88-layer hybrid pattern with MTP 2, LatentMoE 512 experts top-22, latent 1024) with the H100 recipe "
             "at ffeb5a7ae: BF16 (no FP8 flags), TP1 PP2 EP32 ETP1 (DP 32), seq 4096, MBS 1, GBS 1280, flex HybridEP with "
             "moe_expert_capacity_factor 1.10 + moe_pad_expert_input_to_capacity, cuda_graph_impl none, selective recompute "
             "layernorm / moe_act / moe / core_attn, precision-aware optimizer (main grads bf16, main params fp16, moments "
             "bf16), grad reduce in bf16, overlap_grad_reduce / overlap_param_gather off, TE cross-entropy.  MTP "
             "mtp_use_repeated_layer (one shared depth) is not a plan field: the projection counts two MTP depths' "
             "parameters (an over-count of one depth, params.py).  Peak: 'memory (GB)' of training_log (1e9 B), max over "
             "the two pipeline stages.")


def _n3s_peak(gb: float) -> dict:
    return dict(gib=round(gb * 1e9 / 2**30, 2), basis="allocated", rank="max",
                how=f"{gb} GB (1e9 B) peak allocated, report_memory of training_log, max over the pipeline stages")


_H100 = dict(gpu="H100 80GB", plan_gpu="h100-sxm")
CASES += [
    dict(id="mbridge_card_nemotron3_super_h100_64gpu_tp1pp2ep32_pretrain", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=64, gpus_per_node=8), base="mbridge2608_gb300_fp8_mx_nemotron3_super_64gpu",
         edits=_N3S_EDITS, source=_card_src("nemotron-3-super-120b-a12b", "pretrain.H100", "ffeb5a7ae", "2026-08-03"),
         quote=("'On exactly 64 H100s, the BF16 support run completes 100 bounded RP2 optimizer steps at "
                "TP1/PP2/CP1/EP32/ETP1, GBS/MBS 1280/1, natural routing, HybridEP flex dispatch with 1.10x fixed expert "
                "capacity, eager execution, selective recompute of layernorm, moe_act, moe, and core_attn, no "
                "optimizer-state CPU offload ... Peak device memory is 58.079 GiB allocated and 70.336 GiB reserved.'"),
         read=_N3S_READ + " Natural routing (moe_router_force_load_balancing False), manual GC off.",
         measured_peak=_n3s_peak(58.079), pair="mbridge_card_nemotron3_super_h100_64gpu_tp1pp2ep32_perf"),
    dict(id="mbridge_card_nemotron3_super_h100_64gpu_tp1pp2ep32_perf", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=64, gpus_per_node=8), base="mbridge2608_gb300_fp8_mx_nemotron3_super_64gpu",
         edits=dict(drop=tuple(f for f in _N3S_EDITS["drop"] if f not in ("--moe-router-force-load-balancing",
                                                                          "--manual-gc", "--manual-gc-interval")),
                    set_=_N3S_EDITS["set_"]),
         source=_card_src("nemotron-3-super-120b-a12b", "pretrain_performance.H100", "ffeb5a7ae", "2026-08-03"),
         quote=("'On exactly 64 H100s, the canonical BF16 performance recipe must complete 50 mock-data steps at "
                "TP1/PP2/CP1/EP32/ETP1, GBS/MBS 1280/1, forced routing, HybridEP flex dispatch with 1.10x fixed expert "
                "capacity ... Peak device memory is 59.000 GiB allocated and 69.344 GiB reserved'"),
         read=_N3S_READ + " Performance leaf: forced routing, _benchmark_common's manual GC every 100 steps.",
         measured_peak=_n3s_peak(59.000), pair="mbridge_card_nemotron3_super_h100_64gpu_tp1pp2ep32_pretrain"),
]

# Qwen3 8B (HF Qwen/Qwen3-8B: 36 layers, hidden 4096, FFN 12288, 32 heads / 8 KV groups of 128, QK norm, vocab 151936,
# untied embeddings, RoPE base 1e6) on H100, recipes/qwen/h100/qwen3.py.
_Q8_MODEL = ["--num-layers 36", "--hidden-size 4096", "--ffn-hidden-size 12288", "--num-attention-heads 32",
             "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--qk-layernorm",
             "--normalization RMSNorm", "--norm-epsilon 1e-6", "--swiglu", "--disable-bias-linear",
             "--untie-embeddings-and-output-weights", "--position-embedding-type rope", "--rotary-base 1000000",
             "--max-position-embeddings 40960", "--vocab-size 151936", "--use-mcore-models",
             "--transformer-impl transformer_engine", "--bf16", "--attention-dropout 0.0", "--hidden-dropout 0.0",
             "--use-distributed-optimizer"]
_Q8_SFT = _Q8_MODEL + ["--tensor-model-parallel-size 4", "--pipeline-model-parallel-size 1",
                       "--context-parallel-size 1", "--micro-batch-size 1", "--global-batch-size 32",
                       "--seq-length 2048", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl native"]
_Q8_READ = ("Model flags from the Qwen3-8B HF config the recipe converts (AutoBridge.from_hf_pretrained('Qwen/Qwen3-8B'): "
            "36 layers, hidden 4096, FFN 12288, GQA 32 / 8 x 128 with QK norm, vocab 151936, untied, RoPE 1e6). ")
CASES += [
    dict(id="mbridge_card_qwen3_8b_h100_16gpu_dp16_pretrain", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8),
         megatron_flags=_Q8_MODEL + ["--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1",
                                     "--context-parallel-size 1", "--micro-batch-size 1", "--global-batch-size 1024",
                                     "--seq-length 4096", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
                                     "--manual-gc", "--manual-gc-interval 100", "--overlap-grad-reduce",
                                     "--overlap-param-gather", "--grad-reduce-in-bf16", "--use-precision-aware-optimizer",
                                     "--main-grads-dtype fp32", "--main-params-dtype fp32", "--exp-avg-dtype fp32",
                                     "--exp-avg-sq-dtype fp32"],
         source=_card_src("qwen3-8b", "pretrain.H100", "619cc20bd", "2026-07-21"),
         quote=("'The uninterrupted 16-GPU bounded RP2 run completes exactly 100 steps at TP1/PP1/CP1, DP16, GBS/MBS "
                "1024/1, and 64-way gradient accumulation.'"),
         read=_Q8_READ + ("qwen3_8b_pretrain_16gpu_h100_bf16_config at 619cc20bd over qwen3_8b_pretrain_4gpu_h100_bf16_config: "
                          "TP1 PP1 CP1 (DP 16), seq 4096, MBS 1, no recompute, no CUDA graph, TE cross-entropy, manual GC, "
                          "distributed optimizer with both overlaps, precision-aware optimizer with fp32 states, grads "
                          "reduced in bf16 (grad_reduce_in_fp32 False)."), pair=None),
    dict(id="mbridge_card_qwen3_8b_h100_4gpu_tp4_sft_2k", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=4, gpus_per_node=4), megatron_flags=list(_Q8_SFT),
         source=_card_src("qwen3-8b", "sft.H100", "f3ae2767b", "2026-07-19"),
         quote=("'Full SFT uses DP=1 with 32 gradient-accumulation steps and reaches step 100 with the four recorded "
                "metrics, finite loss, and no skipped or NaN iterations.'"),
         read=_Q8_READ + ("qwen3_8b_sft_4gpu_h100_bf16_config at f3ae2767b: TP4 (no sequence parallelism) on 4 GPUs, "
                          "seq 2048 (packed), MBS 1, GBS 32, no recompute, native fused cross-entropy, distributed "
                          "optimizer without overlaps, grads reduced in fp32."), pair=None),
    dict(id="mbridge_card_qwen3_8b_h100_8gpu_tp4cp2_sft_32k", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=8, gpus_per_node=8),
         megatron_flags=derive(_Q8_SFT, {"--context-parallel-size": 2, "--sequence-parallel": None,
                                         "--cp-comm-type": "a2a", "--seq-length": 32768, "--global-batch-size": 8,
                                         "--calculate-per-token-loss": None},
                               drop=("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl")),
         source=_card_src("qwen3-8b", "sft_long_context.H100", "f3ae2767b", "2026-07-20"),
         quote=("'The immutable-revision 8-GPU run completes exactly 20 Tulu3 SFT steps at sequence length 32768 with "
                "recipe-owned TP4/PP1/CP2/SP-on, GBS/MBS 8/1, and explicit pad-8 offline packing.'"),
         read=_Q8_READ + ("qwen3_8b_sft_8gpu_h100_bf16_32k_config at f3ae2767b over the 4-GPU SFT recipe: CP 2 (a2a), "
                          "sequence parallelism, seq 32768 (packed), GBS 8, cross-entropy fusion off, per-token loss; "
                          "no recompute."), pair=None),
]

# Qwen3-30B-A3B on H100 (recipes/qwen/h100/qwen3_moe.py); model flags of the current_runs H100 row.
_Q30_H100 = "mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu"
_Q30_SFT_DROP = FP8_FLAGS + ("--moe-router-force-load-balancing", "--moe-flex-dispatcher-backend",
                             "--moe-hybridep-num-sms", "--grad-reduce-in-bf16", "--moe-router-fusion")
_Q30_READ = ("Flags = current_runs row mbridge2604_h100_fp8_cs_qwen3_30b_a3b_16gpu (the Qwen3-30B-A3B model flags) with "
             "the recipe's edits at the item's commit: ")
CASES += [
    dict(id="mbridge_card_qwen3_30b_h100_16gpu_ep16_pretrain_bf16", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8), base=_Q30_H100,
         edits=dict(drop=FP8_FLAGS + ("--moe-router-force-load-balancing",),
                    set_={"--cuda-graph-impl": "transformer_engine", "--cuda-graph-scope": ["moe_router", "moe_preprocess"],
                          "--use-precision-aware-optimizer": None}),
         source=_card_src("qwen3-30b-a3b", "pretrain.H100", "5b9d9cf50", "2026-07-19"),
         quote=("'On 16x H100, the public alias resolves to the 16-GPU recipe and completes exactly 100 bounded RP2 "
                "optimizer steps with TP1/PP1/CP1/EP16/ETP1, DP16, SP off, GBS/MBS 1024/1 ... Natural routing, HybridEP, "
                "and Transformer Engine CUDA graphs for moe_router and moe_preprocess remain active.'"),
         read=_Q30_READ + ("qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config at 5b9d9cf50: BF16, EP16, seq 4096, MBS 1, "
                           "GBS 1024, no recompute, flex HybridEP (32 SMs), router fusion, natural routing, TE CUDA "
                           "graphs moe_router / moe_preprocess, precision-aware optimizer with fp32 states, grads reduced "
                           "in bf16."), pair=None),
    dict(id="mbridge_card_qwen3_30b_h100_16gpu_ep16_sft_2k", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8), base=_Q30_H100,
         edits=dict(drop=_Q30_SFT_DROP, set_={"--moe-token-dispatcher-type": "alltoall", "--seq-length": 2048,
                                              "--global-batch-size": 32, "--moe-router-fusion": None}),
         source=_card_src("qwen3-30b-a3b", "sft.H100", "619cc20bd", "2026-07-21"),
         quote=("'The immutable-revision 16-GPU run completes exactly 100 full-SFT steps at TP1/PP1/CP1/EP16/ETP1, DP16, "
                "SP off, GBS/MBS 32/1, and two-way gradient accumulation with natural routing.'"),
         read=_Q30_READ + ("qwen3_30b_a3b_sft_16gpu_h100_bf16_config at 619cc20bd over the 8-GPU SFT recipe: BF16, EP16, "
                           "seq 2048 (packed), MBS 1, GBS 32, alltoall dispatcher, router and permute fusion, grouped GEMM, "
                           "no recompute, no CUDA graph, TE cross-entropy, distributed optimizer with both overlaps, grads "
                           "reduced in fp32, average in collective."), pair=None),
    dict(id="mbridge_card_qwen3_30b_h100_16gpu_tp8cp2ep8_sft_32k_full_recompute", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8), base=_Q30_H100,
         edits=dict(drop=_Q30_SFT_DROP + ("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl"),
                    set_={"--moe-token-dispatcher-type": "alltoall", "--tensor-model-parallel-size": 8,
                          "--expert-model-parallel-size": 8, "--context-parallel-size": 2, "--sequence-parallel": None,
                          "--cp-comm-type": "p2p", "--seq-length": 32768, "--global-batch-size": 32,
                          "--recompute-granularity": "full", "--recompute-method": "uniform",
                          "--recompute-num-layers": 1}),
         source=_card_src("qwen3-30b-a3b", "sft_long_context.H100", "f3ae2767b", "2026-07-20"),
         quote=("'The immutable-revision 16-GPU run completes exactly 20 Tulu3 SFT steps at sequence length 32768 with "
                "TP8/PP1/CP2/EP8/SP-on, DeepEP, and explicit pad-16 offline packing.' (command: -tp 8 -pp 1 -ep 8 "
                "--context_parallel_size 2 model.cp_comm_type=p2p model.cross_entropy_loss_fusion=false "
                "model.recompute_granularity=full model.recompute_method=uniform model.recompute_num_layers=1)"),
         read=_Q30_READ + ("qwen3_30b_a3b_sft_8gpu_h100_bf16_config at f3ae2767b with the card's overrides: TP8 (SP) "
                           "CP2 (p2p) EP8 ETP1 on 16 GPUs (DP 1, expert-DP 2), seq 32768 (packed), MBS 1, GBS 32, full "
                           "uniform recompute of every layer, cross-entropy fusion off, distributed optimizer with both "
                           "overlaps, grads reduced in fp32.  The card names DeepEP (the flex backend the recipe keeps "
                           "with the alltoall dispatcher type): written as the alltoall dispatcher, whose buffers the "
                           "plan prices for both."), pair=None),
]

# Moonlight 16B-A3B, 16 H100 (recipes/moonlight/h100/moonlight_16b.py at 411c6b1dc), on the Moonlight flags of round 24.
CASES += [
    dict(id="mbridge_card_moonlight_16b_h100_16gpu_ep8_mbs2_pretrain", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8),
         megatron_flags=derive(_MOON_FLAGS, {"--tensor-model-parallel-size": 1, "--micro-batch-size": 2,
                                             "--global-batch-size": 1024, "--moe-token-dispatcher-type": "flex",
                                             "--moe-flex-dispatcher-backend": "hybridep", "--moe-router-fusion": None,
                                             "--overlap-moe-expert-parallel-comm": None, "--delay-wgrad-compute": None},
                               drop=("--sequence-parallel", "--moe-shared-expert-overlap")),
         source=_card_src("moonlight-16b-a3b", "pretrain.H100", "411c6b1dc", "2026-07-22"),
         quote=("'The uninterrupted 16-GPU bounded RP2 run completes exactly 100 steps at TP1/PP1/CP1/EP8/ETP1, DP16, "
                "GBS/MBS 1024/2, and 32-way gradient accumulation with natural MoE routing and the HybridEP flex "
                "dispatcher.'"),
         read=("Flags = the Moonlight 16B flags of the round-24 cases (moonlight_16b_pretrain_8gpu_h100_bf16_config) with "
               "moonlight_16b_pretrain_16gpu_h100_bf16_config at 411c6b1dc: TP1 (no SP), EP8, MBS 2, GBS 1024, flex "
               "HybridEP, router fusion, no shared-expert overlap, EP communication overlap with delayed wgrad, no "
               "recompute, precision-aware optimizer (bf16 grads / moments, fp32 main params)."), pair=None),
]

# Qwen3-30B-A3B, 8 GB200 (recipes/qwen/.../qwen3_30b_a3b_pretrain_8gpu_gb200_fp8mx_functional_config at 487f56398): the
# GB200 performance recipe's layout with natural routing and checks on.
CASES += [
    dict(id="mbridge_card_qwen3_30b_gb200_8gpu_ep8_mbs4_fp8mx_functional", outcome="ran", framework="megatron",
         hardware=dict(gpu="GB200 NVL72", plan_gpu="gb200", num_gpus=8, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_qwen3_30b_a3b_8gpu",
         edits=dict(drop=("--moe-router-force-load-balancing", "--no-check-for-nan-in-loss-and-grad"),
                    set_={"--overlap-moe-expert-parallel-comm": None, "--delay-wgrad-compute": None,
                          "--use-transformer-engine-op-fuser": None, "--moe-mlp-glu-interleave-size": 32}),
         source=_card_src("qwen3-30b-a3b", "pretrain.GB200", "487f56398", "2026-07-23"),
         quote=("'On 8x GB200, this support-verification workload completes exactly 100 bounded RP2 optimizer steps with "
                "TP1/PP1/CP1/EP8/ETP1, DP8, SP off, GBS/MBS 512/4 ... MXFP8 compute, natural routing, HybridEP, "
                "Transformer Engine CUDA graphs for moe_router and moe_preprocess, communication overlap, functional "
                "safety checks, and MXFP8 parameter all-gather remain active.'"),
         read=("Flags = current_runs row mbridge2604_gb200_fp8_mx_qwen3_30b_a3b_8gpu (the same 8-GPU GB200 MXFP8 layout: "
               "EP8, MBS 4, GBS 512, HybridEP, TE graphs moe_router / moe_preprocess, MXFP8 param gather) with the "
               "functional recipe at 487f56398: natural routing, NaN checks on, EP overlap with delayed wgrad, TE op "
               "fuser, GLU interleave 32 (fp8 dot-product attention is not a plan field)."), pair=None),
]

# GPT-OSS 20B (HF openai/gpt-oss-20b: the 120B's layer shape with 24 layers and 32 experts) on H100,
# recipes/gpt_oss/h100/gpt_oss.py at 6799f0997 (the card's commit); model flags of the current_runs GPT-OSS H100 row.
_GOSS_H100 = "mbridge2604_h100_bf16_gpt_oss_120b_64gpu"
_GOSS_DROP = ("--moe-router-fusion", "--moe-router-force-load-balancing", "--recompute-granularity",
              "--recompute-modules", "--grad-reduce-in-bf16", "--use-precision-aware-optimizer", "--main-grads-dtype",
              "--main-params-dtype", "--exp-avg-dtype", "--exp-avg-sq-dtype")
_GOSS_READ = ("Flags = current_runs row mbridge2604_h100_bf16_gpt_oss_120b_64gpu (the GPT-OSS layer flags: hidden 2880, "
              "64 heads / 8 KV groups of 64, alternating 128-token sliding window, learnable softmax sinks, YaRN, "
              "experts of 2880 top-4, vocab 201088) with GPT-OSS 20B's 24 layers and 32 experts and the recipe at "
              "6799f0997: ")
CASES += [
    dict(id="mbridge_card_gpt_oss_20b_h100_16gpu_tp2pp4ep4_pretrain", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=16, gpus_per_node=8), base=_GOSS_H100,
         edits=dict(drop=_GOSS_DROP, set_={"--num-layers": 24, "--num-experts": 32, "--tensor-model-parallel-size": 2,
                                          "--sequence-parallel": None, "--pipeline-model-parallel-size": 4,
                                          "--expert-model-parallel-size": 4, "--global-batch-size": 512,
                                          "--cross-entropy-fusion-impl": "native"}),
         source=_card_src("gpt-oss-20b", "pretrain.H100", "6799f0997", "2026-08-09"),
         quote=("'On 16x H100, the command completes exactly 100 bounded pretraining optimizer steps. All 100 "
                "optimizer-step rows are present exactly once with finite loss, zero skipped iterations, and zero NaN "
                "iterations.' (--recipe gpt_oss_20b_pretrain_16gpu_h100_bf16_config --seq_length 4096)"),
         read=_GOSS_READ + ("gpt_oss_20b_pretrain_16gpu_h100_bf16_config: TP2 with SP, PP4 (no embedding / loss in the "
                            "split), EP4 ETP1 (DP 2), seq 4096, MBS 1, GBS 512, alltoall dispatcher, permute fusion, grouped "
                            "GEMM, no recompute, no CUDA graph, native fused cross-entropy, per-token loss, natural "
                            "routing, distributed optimizer with both overlaps, grads reduced in fp32."), pair=None),
    dict(id="mbridge_card_gpt_oss_20b_h100_8gpu_ep8_sft_2k", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=8, gpus_per_node=8), base=_GOSS_H100,
         edits=dict(drop=_GOSS_DROP + ("--overlap-grad-reduce", "--overlap-param-gather"),
                    set_={"--num-layers": 24, "--num-experts": 32, "--pipeline-model-parallel-size": 1,
                          "--seq-length": 2048, "--global-batch-size": 128, "--cross-entropy-fusion-impl": "native"}),
         source=_card_src("gpt-oss-20b", "sft.H100", "6799f0997", "2026-08-09"),
         quote=("'On 8x H100, the command completes exactly 100 full-SFT optimizer steps from the imported GPT-OSS 20B "
                "checkpoint ... All 100 optimizer-step rows are present exactly once with finite loss'"),
         read=_GOSS_READ + ("gpt_oss_20b_sft_8gpu_h100_bf16_config: TP1 PP1 EP8 (DP 8), seq 2048 (packed), MBS 1, GBS "
                            "128, alltoall dispatcher, no recompute, native fused cross-entropy, natural routing, no "
                            "overlaps, bf16_mixed's grad_reduce_in_fp32 True (setup() copies the mixed-precision value "
                            "onto the DDP config).  The recipe sets ddp.use_distributed_optimizer False, but _sft_common's "
                            "optimizer (recipes/utils/optimizer_utils.py distributed_fused_adam_with_cosine_annealing) "
                            "has use_distributed_optimizer True and ConfigContainer.validate "
                            "(_validate_and_sync_distributed_optimizer_settings, training/config.py) turns both on when "
                            "either is: the run had the distributed optimizer (read first as off: 84.0 GiB, 'does not "
                            "fit')."), pair=None),
]

# Moonlight 16B-A3B 8K SFT on 8 H100 (recipes/moonlight/h100/moonlight_16b.py at f3ae2767b,
# moonlight_16b_sft_8gpu_h100_bf16_8k_config over moonlight_16b_sft_8gpu_h100_bf16_config).
CASES += [
    dict(id="mbridge_card_moonlight_16b_h100_8gpu_tp2cp2ep8_sft_8k", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=8, gpus_per_node=8),
         megatron_flags=derive(_MOON_FLAGS, {"--seq-length": 8192, "--max-position-embeddings": 8192,
                                             "--context-parallel-size": 2, "--global-batch-size": 128,
                                             "--vocab-size": 163842, "--manual-gc-interval": 100,
                                             "--calculate-per-token-loss": None,
                                             "--recompute-granularity": "selective", "--recompute-modules": "core_attn"},
                               drop=("--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl")),
         source=_card_src("moonlight-16b-a3b", "sft_long_context.H100", "f3ae2767b", "2026-07-20"),
         quote=("'The immutable-revision 8-GPU run completes exactly 20 Tulu3 SFT steps at the model's 8192-token context "
                "limit with recipe-owned TP2/PP1/CP2/EP8/SP-on, GBS/MBS 128/1, and explicit pad-4 offline packing.'"),
         read=("Flags = the Moonlight 16B flags of the round-24 cases with moonlight_16b_sft_8gpu_h100_bf16_8k_config at "
               "f3ae2767b: TP2 with SP, CP2, EP8 (DP 2, expert-DP 1), seq 8192 (packed), MBS 1, GBS 128, the unpadded "
               "fine-tuning vocabulary 163842, alltoall dispatcher with shared-expert overlap (enable_deepep False), "
               "cross-entropy fusion off, per-token loss, precision-aware optimizer (bf16 grads / moments, fp32 main "
               "params), grads reduced in bf16; the finetuning provider's recompute_granularity 'selective' with "
               "recompute_modules None, which TransformerConfig.__post_init__ makes ['core_attn']."), pair=None),
]

# GPT-OSS 20B 32K SFT on 8 H100: gpt_oss_20b_sft_8gpu_h100_bf16_32k_config, added with the card by 8a84d7166 (#5397,
# 2026-08-11; the item ran 2026-08-10 on the PR branch), over the 2K SFT recipe, with the card's overrides.
CASES += [
    dict(id="mbridge_card_gpt_oss_20b_h100_8gpu_tp4cp2ep8_sft_32k_full_recompute", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=8, gpus_per_node=8), base=_GOSS_H100,
         edits=dict(drop=_GOSS_DROP + ("--overlap-grad-reduce", "--overlap-param-gather", "--cross-entropy-loss-fusion",
                                       "--cross-entropy-fusion-impl"),
                    set_={"--num-layers": 24, "--num-experts": 32, "--pipeline-model-parallel-size": 1,
                          "--tensor-model-parallel-size": 4, "--sequence-parallel": None, "--context-parallel-size": 2,
                          "--cp-comm-type": "a2a", "--seq-length": 32768, "--global-batch-size": 32,
                          "--recompute-granularity": "full", "--recompute-method": "uniform",
                          "--recompute-num-layers": 1}),
         source=_card_src("gpt-oss-20b", "sft_long_context.H100", "8a84d7166", "2026-08-10"),
         quote=("'Completed 20 optimizer steps using the 32K SFT recipe, immutable Tulu3 data selection, offline packing, "
                "TP4, CP2, sequence parallelism, non-fused cross entropy, and full activation recompute.' (command: "
                "--seq_length 32768 --tensor_model_parallel_size 4 --context_parallel_size 2 model.sequence_parallel=true "
                "model.cp_comm_type=a2a model.cross_entropy_loss_fusion=false model.recompute_granularity=full "
                "model.recompute_method=uniform model.recompute_num_layers=1)"),
         read=_GOSS_READ.replace("6799f0997", "8a84d7166") + (
             "gpt_oss_20b_sft_8gpu_h100_bf16_32k_config (seq 32768, GBS 32) over the 2K SFT recipe (EP8, MBS 1, "
             "alltoall, no overlaps, grads reduced in fp32, the distributed optimizer as synced by "
             "ConfigContainer.validate) with the card's TP4 + SP, CP2 (a2a), full uniform recompute of every layer, "
             "cross-entropy fusion off: DP 1, expert-DP 1."), pair=None),
]

# GPT-OSS 120B on 64 H100: the card's gpt_oss_120b_pretrain_config = recipes/gpt_oss/h100/gpt_oss.py
# gpt_oss_120b_pretrain_64gpu_h100_bf16_config at the card's commit a8038f6d9 (the library recipe, not the perf leaf).
CASES += [
    dict(id="mbridge_card_gpt_oss_120b_h100_64gpu_tp2pp4ep16_pretrain", outcome="ran", framework="megatron",
         hardware=dict(_H100, num_gpus=64, gpus_per_node=8), base=_GOSS_H100,
         edits=dict(drop=_GOSS_DROP, set_={"--tensor-model-parallel-size": 2, "--sequence-parallel": None,
                                          "--pipeline-model-parallel-size": 4, "--expert-model-parallel-size": 16,
                                          "--global-batch-size": 512, "--cross-entropy-fusion-impl": "native"}),
         source=_card_src("gpt-oss-120b", "pretrain.H100", "a8038f6d9", "2026-08-11"),
         quote=("'On 64x H100, the command completes exactly 100 bounded pretraining optimizer steps using the "
                "recipe-owned GBS/MBS, natural routing, and BF16 configuration.' (--recipe gpt_oss_120b_pretrain_config "
                "--seq_length 4096)"),
         read=("Flags = current_runs row mbridge2604_h100_bf16_gpt_oss_120b_64gpu (the GPT-OSS 120B model flags) with "
               "the library recipe gpt_oss_120b_pretrain_64gpu_h100_bf16_config at a8038f6d9 (recipes/gpt_oss/h100, "
               "which recipes/gpt_oss/gpt_oss.py exports as gpt_oss_120b_pretrain_config): TP2 with SP, PP4 (no "
               "embedding / loss in the split), EP16 ETP1 (DP 8, expert-DP 1), seq 4096, MBS 1, GBS 512, alltoall "
               "dispatcher, no recompute, no CUDA graph, native fused cross-entropy, per-token loss, natural routing, "
               "distributed optimizer with both overlaps, grads reduced in fp32."), pair=None),
]

# ---------------------------------------------------------------- round 35 (branch oom19): Bridge text-pretrain validation
# NVIDIA-NeMo/Megatron-Bridge examples/models/text-pretrain-validation.md + scripts/training/text_pretrain_validation.json
# (MB-747, 2026-07-10/11): every text-only recipe run through scripts/training/submit_text_pretrain_validation.py on
# exactly 2 x 8 H100 80GB (EOS), real indexed DCLM, 100 steps.  The driver's contract (submit_..._validation.py
# build_command at 685b0fc3b): --seq-length 4096, --global-batch-size 128, --micro-batch-size 1, --cp 1, --vp none,
# --etp 1, the manifest row's --tp / --pp / --ep and overrides, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, save at
# step 100.  Everything else is the named recipe function as the jobs ran it: the branch was rebased onto 2026-07-30 main
# before it was pushed (author dates 07-10/11, committer dates 07-30), so each function read at a recording commit was
# compared with main 0b7923d52 (2026-07-10 13:59 -0700; main touched none of these files from then to 07-11 noon, while
# the jobs ran) plus the branch's own recipe commits; for
# the functions used here only the model-provider line differs (AutoBridge from the HF id then, a local provider of the
# same numbers now), except nemotron_3_nano (below, read at 0b7923d52).  ``_pretrain_common`` gives bf16_mixed (grads
# reduced in fp32) and the distributed optimizer with both overlaps; the model's vocabulary is the HF config's (the
# tokenizer-derived vocabulary of #4996 came on 07-28).  Each RETRY row of the table names the job that
# ran out of memory and the change the next commit made (the manifest diff of that commit is the configuration before
# it); a FAIL row names an OOM the change did not cure; PASS = all 100 steps logged.  Model flags: the HF configs the
# recipes convert (AutoBridge.from_hf_pretrained), or a current_runs row of the same model.
_TPV_MD = "https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/{}/examples/models/text-pretrain-validation.md"


def _tpv_src(commit: str, what: str) -> dict:
    return dict(ref=(f"NVIDIA-NeMo/Megatron-Bridge examples/models/text-pretrain-validation.md at {commit} (MB-747 text "
                     f"pretrain validation, 2 x 8 H100, {what}) and scripts/training/text_pretrain_validation.json"),
                url=_TPV_MD.format(commit), date="2026-07-11")


_TPV_HW = dict(_H100, num_gpus=16, gpus_per_node=8)
_TPV_RUN = ["--seq-length 4096", "--micro-batch-size 1", "--global-batch-size 128", "--context-parallel-size 1",
            "--use-mcore-models", "--transformer-impl transformer_engine", "--bf16", "--attention-dropout 0.0",
            "--hidden-dropout 0.0", "--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"]
_TPV_RUN_SET = {"--seq-length": 4096, "--micro-batch-size": 1, "--global-batch-size": 128, "--context-parallel-size": 1}
_TPV_READ = ("Driver contract (submit_text_pretrain_validation.py at 685b0fc3b): 16 H100, seq 4096, MBS 1, GBS 128, CP 1, "
             "no VP, ETP 1, expandable segments.  ")
_BF16_STATE = {"--use-precision-aware-optimizer": None, "--main-params-dtype": "fp16", "--main-grads-dtype": "bf16",
               "--exp-avg-dtype": "bf16", "--exp-avg-sq-dtype": "bf16", "--grad-reduce-in-bf16": None}
_FP32_STATE_DROP = ("--use-precision-aware-optimizer", "--main-grads-dtype", "--main-params-dtype", "--exp-avg-dtype",
                    "--exp-avg-sq-dtype", "--grad-reduce-in-bf16")

# GPT-OSS 120B (gpt_oss_120b_pretrain_64gpu_h100_bf16_config, recipes/gpt_oss/h100/gpt_oss.py): SP, alltoall, no recompute,
# native fused cross-entropy, fp32 optimizer state without the precision-aware optimizer, grads reduced in fp32.
_TPV_GOSS_DROP = _GOSS_DROP + ("--cross-entropy-fusion-impl", "--calculate-per-token-loss", "--fp8-recipe")
_TPV_GOSS_SET = {**_TPV_RUN_SET, "--cross-entropy-loss-fusion": None, "--cross-entropy-fusion-impl": "native",
                 "--moe-token-dispatcher-type": "alltoall"}
_TPV_GOSS_READ = (_TPV_READ + "Flags = current_runs row mbridge2604_h100_bf16_gpt_oss_120b_64gpu (the GPT-OSS 120B model) "
                  "with gpt_oss_120b_pretrain_64gpu_h100_bf16_config: sequence parallel, alltoall dispatcher, no "
                  "recompute, no CUDA graph, native fused cross-entropy, distributed optimizer with both overlaps")


def _tpv_goss(tag: str, tp: int, pp: int, ep: int, bf16_state: bool, job: str, commit: str, quote: str) -> dict:
    par = {"--tensor-model-parallel-size": tp, "--pipeline-model-parallel-size": pp, "--expert-model-parallel-size": ep,
           "--expert-tensor-parallel-size": 1}
    if tp > 1:
        par["--sequence-parallel"] = None
    state = _BF16_STATE if bf16_state else {}
    read = _TPV_GOSS_READ + (
        "; the manifest's mixed_precision=bf16_mixed_with_bf16_grad_reduce and precision-aware optimizer with fp16 main "
        "params, bf16 main grads and moments." if bf16_state else "; fp32 main params, grads and moments, grads reduced "
        "in fp32 (bf16_mixed).")
    return dict(id=f"mbridge_tpv_gpt_oss_120b_h100_16gpu_{tag}", outcome="oom", framework="megatron", hardware=_TPV_HW,
                base=_GOSS_H100, edits=dict(drop=_TPV_GOSS_DROP + (() if bf16_state else _FP32_STATE_DROP),
                                            set_={**_TPV_GOSS_SET, **par, **state}),
                source=_tpv_src(commit, f"gpt-oss-120b job {job}"), quote=quote,
                read=read + f" TP{tp} PP{pp} EP{ep} on 16 GPUs.", pair=None)


CASES += [
    _tpv_goss("tp1pp1ep16", 1, 1, 16, False, "5614979", "59a1de927",
              "'`gpt-oss-120b` ... RETRY: job 5614979 main-param OOM; validation changed to PP=2/EP=8' (manifest before: "
              "tp 1, pp 1, ep 16)"),
    _tpv_goss("tp1pp2ep8", 1, 2, 8, False, "5615615", "180b7b3de",
              "'RETRY: job 5615615 optimizer OOM; validation uses PP=2/EP=8 plus BF16 optimizer state' (manifest before: "
              "tp 1, pp 2, ep 8, no overrides)"),
    _tpv_goss("tp1pp2ep8_bf16_state", 1, 2, 8, True, "5615780", "685b0fc3b",
              "'RETRY: job 5615780 first optimizer step lacked 32-64 MiB; TP=2 added' (manifest before 005bd7097: tp 1, "
              "pp 2, ep 8, bf16_mixed_with_bf16_grad_reduce, precision-aware optimizer fp16 / bf16)"),
    _tpv_goss("tp2pp2ep8_bf16_state", 2, 2, 8, True, "5615824", "922002264",
              "'FAIL: job 5615824 still exhausts 79.1 GiB/rank at the first optimizer step with TP=2 and BF16 optimizer "
              "state; exceeds 16-H100 capacity'"),
    dict(id="mbridge_tpv_gpt_oss_20b_h100_16gpu_ep8", outcome="ran", framework="megatron", hardware=_TPV_HW,
         base=_GOSS_H100, edits=dict(drop=_TPV_GOSS_DROP + _FP32_STATE_DROP,
                                     set_={**_TPV_GOSS_SET, "--num-layers": 24, "--num-experts": 32,
                                           "--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 1,
                                           "--expert-model-parallel-size": 8, "--expert-tensor-parallel-size": 1}),
         source=_tpv_src("cbe825ed1", "gpt-oss-20b job 5614349"), quote="'`gpt-oss-20b` ... PASS: job 5614349'",
         read=_TPV_GOSS_READ.replace("120B model", "layer flags; GPT-OSS 20B's 24 layers and 32 experts").replace(
             "gpt_oss_120b_pretrain_64gpu", "gpt_oss_20b_pretrain_16gpu") + "; fp32 optimizer state.  TP1 PP1 EP8 (DP 16).",
         pair=None),
]

# Llama 3.3 70B (llama31_70b_pretrain_32gpu_h100_bf16_config, recipes/llama/h100/llama3.py, as the manifest runs it for
# meta-llama/Llama-3.3-70B-Instruct): TP8 PP2 (DP 1), SP, TP comm overlap, no recompute, TE cross-entropy.
_TPV_L70 = ["--num-layers 80", "--hidden-size 8192", "--ffn-hidden-size 28672", "--num-attention-heads 64",
            "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--max-position-embeddings 131072",
            "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5", "--disable-bias-linear",
            "--position-embedding-type rope", "--rotary-base 500000", "--untie-embeddings-and-output-weights",
            "--vocab-size 128256", *_TPV_RUN, "--tensor-model-parallel-size 8", "--pipeline-model-parallel-size 2",
            "--sequence-parallel", "--tp-comm-overlap", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te"]
_TPV_L70_READ = (_TPV_READ + "Llama 3.3 70B (80 layers, hidden 8192, FFN 28672, GQA 64 / 8, vocab 128256, untied) with "
                 "llama31_70b_pretrain_32gpu_h100_bf16_config at the commit: TP8 PP2 on 16 GPUs (DP 1), sequence "
                 "parallel, TP comm overlap, no recompute, no CUDA graph, TE cross-entropy, distributed optimizer with "
                 "both overlaps.")
CASES += [
    dict(id="mbridge_tpv_llama33_70b_h100_16gpu_tp8pp2_fp32_state", outcome="oom", framework="megatron",
         hardware=_TPV_HW, megatron_flags=list(_TPV_L70),
         source=_tpv_src("f60a0baf2", "llama33-70b job 5614973"),
         quote="'RETRY: job 5614973 optimizer-state OOM; BF16 moments added' (f60a0baf2 'reduce Llama 70B optimizer memory')",
         read=_TPV_L70_READ + " The recipe before f60a0baf2: fp32 main params, grads and moments, grads reduced in fp32.",
         pair="mbridge_tpv_llama33_70b_h100_16gpu_tp8pp2_bf16_state"),
    dict(id="mbridge_tpv_llama33_70b_h100_16gpu_tp8pp2_bf16_state", outcome="ran", framework="megatron",
         hardware=_TPV_HW, megatron_flags=_TPV_L70 + [f"{k} {v}" if v is not None else k for k, v in _BF16_STATE.items()],
         source=_tpv_src("4607a07c3", "llama33-70b job 5615791"),
         quote=("'PASS: job 5615791' (manifest: mixed_precision=bf16_mixed_with_bf16_grad_reduce, "
                "checkpoint.save_optim=false; job 5615691 of the same training state 'completed 100 steps but optimizer "
                "serialization OOM')"),
         read=_TPV_L70_READ + (" The recipe at 4607a07c3: precision-aware optimizer with fp16 main params (b126c0005), "
                               "bf16 main grads and moments; grads reduced in bf16 (the manifest's preset); weights-only "
                               "checkpoint (not a training-step term)."),
         pair="mbridge_tpv_llama33_70b_h100_16gpu_tp8pp2_fp32_state"),
]

# Nemotron 3 Nano 30B-A3B (nemotron_3_nano_pretrain_8gpu_h100_bf16_config, recipes/nemotronh/h100/nemotron_3_nano.py) as
# the jobs ran it: the validation branch was rebased onto 2026-07-30 main before it was pushed (its commits carry author
# date 07-10/11, committer date 07-30), and main changed this recipe in between (e28e1ca37, cce495373, 4810068ad,
# 92abf628c); the run-time function is main's at 0b7923d52 (2026-07-10, the branch does not touch the file): sequence
# parallel on, flex DeepEP, no CUDA graph, no recompute, native fused cross-entropy, fp32 optimizer state, grads reduced
# in fp32 (bf16_mixed), TP comm overlap.  The function builds ``HybridModelProvider`` without a vocab_size, so
# ``setup.py`` (0b7923d52 l. 609) takes the tokenizer's: the driver's HuggingFaceTokenizer mistralai/Mistral-7B-v0.1 (the
# DCLM index is Mistral-32k tokenised), 32000, padded to 128 x TP = 32000 -- not the HF model's 131072.  (Read first at
# the rebased commit -- HybridEP, TE graphs of attn + mamba,
# selective moe + layernorm recompute, grads in bf16, no sequence parallel -- the TP1 OOM projected 59.2 GiB, 'fits'.)
_TPV_NANO = dict(drop=FP8_FLAGS + ("--moe-router-force-load-balancing", "--attention-backend", "--cuda-graph-impl",
                                   "--cuda-graph-scope", "--te-rng-tracker", "--moe-hybridep-num-sms",
                                   "--grad-reduce-in-bf16", "--cross-entropy-fusion-impl", "--manual-gc",
                                   "--manual-gc-interval"),
                 set_={**_TPV_RUN_SET, "--moe-token-dispatcher-type": "flex", "--moe-flex-dispatcher-backend": "deepep",
                       "--cross-entropy-fusion-impl": "native", "--vocab-size": 32000})
_TPV_NANO_READ = (_TPV_READ + "Flags = current_runs row mbridge2608_gb300_fp8_mx_nemotron3_nano_8gpu (the Nemotron 3 Nano "
                  "model: 52-layer hybrid pattern, 128 experts top-6 + shared) with the H100 recipe at "
                  "main 0b7923d52 (the run-time function; the pushed branch was rebased onto later main): BF16, EP8, "
                  "flex DeepEP, no CUDA graph, no recompute, native fused cross-entropy, fp32 optimizer state, grads "
                  "reduced in fp32, sequence parallel (on at TP > 1), TP comm overlap; vocabulary 32000 (the provider sets "
                  "none, so setup.py takes the driver's Mistral-7B tokenizer's).")
CASES += [
    dict(id="mbridge_tpv_nemotron3_nano_h100_16gpu_tp1ep8", outcome="oom", framework="megatron", hardware=_TPV_HW,
         base="mbridge2608_gb300_fp8_mx_nemotron3_nano_8gpu",
         edits=dict(drop=_TPV_NANO["drop"], set_={**_TPV_NANO["set_"], "--tensor-model-parallel-size": 1}),
         source=_tpv_src("5a113ff0e", "nemotron3-nano job 5614962"),
         quote="'RETRY: job 5614962 logits OOM; validation TP increased to 2' (manifest before: tp 1, pp 1, ep 8)",
         read=_TPV_NANO_READ + " TP1 (DP 16).", pair="mbridge_tpv_nemotron3_nano_h100_16gpu_tp2ep8"),
    dict(id="mbridge_tpv_nemotron3_nano_h100_16gpu_tp2ep8", outcome="ran", framework="megatron", hardware=_TPV_HW,
         base="mbridge2608_gb300_fp8_mx_nemotron3_nano_8gpu",
         edits=dict(drop=_TPV_NANO["drop"], set_={**_TPV_NANO["set_"], "--tensor-model-parallel-size": 2,
                                                  "--sequence-parallel": None, "--tp-comm-overlap": None}),
         source=_tpv_src("089f718db", "nemotron3-nano job 5615024"), quote="'`nemotron3-nano` ... PASS: job 5615024'",
         read=_TPV_NANO_READ + " TP2 (DP 8), EP8.", pair="mbridge_tpv_nemotron3_nano_h100_16gpu_tp1ep8"),
]

# Setup-time OOMs at EP16 on 16 GPUs: the recipes' own layouts need 128+ GPUs; the manifest runs them at TP1 PP1 EP16.
_DSV2 = ["--num-layers 60", "--hidden-size 5120", "--ffn-hidden-size 12288", "--num-attention-heads 128",
         "--normalization RMSNorm", "--norm-epsilon 1e-6", "--swiglu", "--disable-bias-linear",
         "--untie-embeddings-and-output-weights", "--position-embedding-type rope", "--rotary-base 10000",
         "--max-position-embeddings 4096", "--vocab-size 102400", "--multi-latent-attention", "--q-lora-rank 1536",
         "--kv-lora-rank 512", "--qk-head-dim 128", "--qk-pos-emb-head-dim 64", "--v-head-dim 128", "--qk-layernorm",
         "--num-experts 160", "--moe-layer-freq ([0]*1+[1]*59)", "--moe-ffn-hidden-size 1536",
         "--moe-shared-expert-intermediate-size 3072", "--moe-router-topk 6", "--moe-router-load-balancing-type aux_loss",
         "--moe-aux-loss-coeff 1e-3", "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall",
         "--moe-shared-expert-overlap", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te",
         "--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1", *_TPV_RUN]
_DSV2_READ = ("DeepSeek-V2 (HF deepseek-ai/DeepSeek-V2: 60 layers, hidden 5120, 128 heads, MLA q LoRA 1536 / kv LoRA 512, "
              "qk 128 + rope 64, v 128, first layer dense 12288, 160 routed experts of 1536 top-6 + 2 shared, vocab "
              "102400, untied) with {fn}: alltoall dispatcher, full uniform recompute of every layer, TE cross-entropy, "
              "fp32 optimizer state, grads reduced in fp32.  ")
_GLM45 = ["--num-layers 92", "--hidden-size 5120", "--ffn-hidden-size 12288", "--num-attention-heads 96",
          "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--qk-layernorm", "--add-qkv-bias",
          "--normalization RMSNorm", "--norm-epsilon 1e-5", "--swiglu", "--disable-bias-linear",
          "--untie-embeddings-and-output-weights", "--position-embedding-type rope", "--rotary-percent 0.5",
          "--rotary-base 1000000", "--max-position-embeddings 131072", "--vocab-size 151552", "--num-experts 160",
          "--moe-layer-freq ([0]*3+[1]*89)", "--moe-ffn-hidden-size 1536", "--moe-shared-expert-intermediate-size 1536",
          "--moe-router-topk 8", "--moe-router-score-function sigmoid", "--moe-router-enable-expert-bias",
          "--moe-router-load-balancing-type seq_aux_loss", "--moe-aux-loss-coeff 1e-3", "--moe-grouped-gemm",
          "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall", "--moe-shared-expert-overlap",
          "--mtp-num-layers 1", "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl native",
          "--recompute-granularity selective", "--recompute-modules core_attn", *_TPV_RUN,
          "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--expert-model-parallel-size 16",
          "--expert-tensor-parallel-size 1"]
_MINIMAX_M2 = ["--num-layers 62", "--hidden-size 3072", "--ffn-hidden-size 1536", "--num-attention-heads 48",
               "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--qk-layernorm",
               "--normalization RMSNorm", "--norm-epsilon 1e-6", "--swiglu", "--disable-bias-linear",
               "--untie-embeddings-and-output-weights", "--position-embedding-type rope", "--rotary-percent 0.5",
               "--rotary-base 5000000", "--max-position-embeddings 196608", "--vocab-size 200064", "--num-experts 256",
               "--moe-ffn-hidden-size 1536", "--moe-router-topk 8", "--moe-router-score-function sigmoid",
               "--moe-router-enable-expert-bias", "--moe-router-load-balancing-type aux_loss", "--moe-aux-loss-coeff 1e-3",
               "--moe-grouped-gemm", "--moe-permute-fusion", "--moe-token-dispatcher-type alltoall",
               "--recompute-granularity selective", "--recompute-modules core_attn", *_TPV_RUN,
               "--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1", "--expert-model-parallel-size 16",
               "--expert-tensor-parallel-size 1"]
CASES += [
    dict(id="mbridge_tpv_deepseek_v2_h100_16gpu_ep16", outcome="oom", framework="megatron", hardware=_TPV_HW,
         megatron_flags=_DSV2 + ["--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1",
                                 "--expert-model-parallel-size 16", "--expert-tensor-parallel-size 1"],
         source=_tpv_src("99c0468b3", "deepseek-v2 job 5614992"),
         quote="'FAIL: job 5614992 requires a 48.52 GiB/rank grad buffer; exceeds 16-H100 capacity'",
         read=_TPV_READ + _DSV2_READ.format(fn="deepseek_v2_pretrain_128gpu_h100_bf16_config (manifest: tp 1, pp 1, "
                                                "ep 16, pipeline layout null)") +
         "Checked: the non-expert parameters per rank (8.96B attention + 2.78B shared experts + 0.19B dense layer + "
         "1.05B embeddings + 0.05B routers = 13.0B) x 4 B = 48.5 GiB, the stated fp32 grad buffer.", pair=None),
    dict(id="mbridge_tpv_glm45_355b_h100_16gpu_ep16", outcome="oom", framework="megatron", hardware=_TPV_HW,
         megatron_flags=list(_GLM45), source=_tpv_src("6c39abd74", "glm45-355b job 5615002"),
         quote=("'FAIL: job 5615002 requires a 31.75 GiB/rank grad buffer after 71.30 GiB is allocated; exceeds 16-H100 "
                "capacity'"),
         read=_TPV_READ + ("GLM-4.5 (HF zai-org/GLM-4.5: 92 layers, hidden 5120, GQA 96 / 8 x 128 with QK norm and QKV "
                           "bias, partial RoPE 0.5, first 3 layers dense 12288, 160 experts of 1536 top-8 + 1 shared, "
                           "vocab 151552, untied) with glm45_355b_pretrain_128gpu_h100_bf16_config (manifest: tp 1, pp 1, "
                           "ep 16, layout null): MTP 1 layer, sequence_parallel True (TP 1: none), alltoall, selective "
                           "recompute (core_attn, TransformerConfig's default for modules None), native fused "
                           "cross-entropy, fp32 optimizer state, grads reduced in fp32."), pair=None),
    dict(id="mbridge_tpv_minimax_m2_h100_16gpu_ep16", outcome="oom", framework="megatron", hardware=_TPV_HW,
         megatron_flags=list(_MINIMAX_M2), source=_tpv_src("72b89b74f", "minimax-m2 job 5615005"),
         quote=("'FAIL: job 5615005 requires a 52.31 GiB/rank grad buffer after 74.72 GiB is allocated; exceeds 16-H100 "
                "capacity'"),
         read=_TPV_READ + ("MiniMax-M2 (HF MiniMaxAI/MiniMax-M2: 62 layers, hidden 3072, GQA 48 / 8 x 128 with QK norm, "
                           "rotary dim 64 of 128, 256 experts of 1536 top-8, no shared expert, vocab 200064, untied; MTP "
                           "modules not built) with minimax_m2_pretrain_16gpu_h100_bf16_config = build_text_pretrain_config "
                           "(recipes/utils/text_pretrain_utils.py: TP1 PP1 EP16, selective core_attn recompute, bf16_mixed "
                           "from _pretrain_common).  Checked: the routed experts per rank, 62 x 16 x 3 x 3072 x 1536 = "
                           "14.0B, x 4 B = 52.3 GiB, the stated (expert) fp32 grad buffer."), pair=None),
]

# Runs that passed (100 steps), recipes at the commit that records them.
_TPV_L8 = ["--num-layers 32", "--hidden-size 4096", "--ffn-hidden-size 14336", "--num-attention-heads 32",
           "--group-query-attention", "--num-query-groups 8", "--kv-channels 128", "--max-position-embeddings 8192",
           "--swiglu", "--normalization RMSNorm", "--norm-epsilon 1e-5", "--disable-bias-linear",
           "--position-embedding-type rope", "--rotary-base 500000", "--untie-embeddings-and-output-weights",
           "--vocab-size 128256"]
_DSV2L = [f for f in _DSV2 if not f.startswith(("--num-layers", "--hidden-size", "--ffn-hidden-size",
                                                 "--num-attention-heads", "--q-lora-rank", "--num-experts",
                                                 "--moe-layer-freq", "--moe-ffn-hidden-size",
                                                 "--moe-shared-expert-intermediate-size"))] + [
    "--num-layers 27", "--hidden-size 2048", "--ffn-hidden-size 10944", "--num-attention-heads 16", "--num-experts 64",
    "--moe-layer-freq ([0]*1+[1]*26)", "--moe-ffn-hidden-size 1408", "--moe-shared-expert-intermediate-size 2816"]
CASES += [
    dict(id="mbridge_tpv_llama3_8b_h100_16gpu_tp2", outcome="ran", framework="megatron", hardware=_TPV_HW,
         megatron_flags=_TPV_L8 + _TPV_RUN + ["--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 1",
                                              "--cross-entropy-loss-fusion", "--cross-entropy-fusion-impl te"],
         source=_tpv_src("685b0fc3b", "llama3-8b job 5615014"), quote="'`llama3-8b` ... PASS: job 5615014'",
         read=_TPV_READ + ("Llama 3 8B (32 layers, hidden 4096, FFN 14336, GQA 32 / 8, vocab 128256, untied) with "
                           "llama3_8b_pretrain_2gpu_h100_bf16_config (its seq 8192 overridden to 4096): TP2 (DP 8), no "
                           "sequence parallel, no recompute, TE cross-entropy, fp32 optimizer state, grads in fp32."),
         pair=None),
    dict(id="mbridge_tpv_qwen3_8b_h100_16gpu_tp4", outcome="ran", framework="megatron", hardware=_TPV_HW,
         megatron_flags=derive(_Q8_MODEL, {**_TPV_RUN_SET, "--tensor-model-parallel-size": 4,
                                           "--pipeline-model-parallel-size": 1, "--overlap-grad-reduce": None,
                                           "--overlap-param-gather": None, "--cross-entropy-loss-fusion": None,
                                           "--cross-entropy-fusion-impl": "te"}),
         source=_tpv_src("685b0fc3b", "qwen3-8b job 5614268"), quote="'`qwen3-8b` ... PASS: job 5614268'",
         read=_TPV_READ + _Q8_READ + ("qwen3_8b_pretrain_4gpu_h100_bf16_config: TP4 (DP 4), no sequence parallel, no "
                                      "recompute, TE cross-entropy, fp32 optimizer state, grads in fp32."), pair=None),
    dict(id="mbridge_tpv_qwen3_30b_a3b_h100_16gpu_ep8", outcome="ran", framework="megatron", hardware=_TPV_HW,
         base=_Q30_H100,
         edits=dict(drop=FP8_FLAGS + ("--moe-router-force-load-balancing", "--moe-hybridep-num-sms", "--grad-reduce-in-bf16",
                                      "--moe-router-fusion", "--manual-gc", "--manual-gc-interval"),
                    set_={**_TPV_RUN_SET, "--expert-model-parallel-size": 8, "--moe-token-dispatcher-type": "flex",
                          "--moe-flex-dispatcher-backend": "deepep", "--recompute-granularity": "full",
                          "--recompute-method": "uniform", "--recompute-num-layers": 1}),
         source=_tpv_src("3d018eec6", "qwen3-30b-a3b job 5614462"), quote="'`qwen3-30b-a3b` ... PASS: job 5614462'",
         read=_TPV_READ + _Q30_READ + ("qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config: TP1 PP1 EP8 (DP 16), "
                                       "apply_flex_dispatcher_backend(deepep) on Hopper = flex DeepEP, full uniform "
                                       "recompute of every layer, TE cross-entropy, fp32 optimizer state, grads in fp32."),
         pair=None),
    dict(id="mbridge_tpv_moonlight_16b_h100_16gpu_ep8", outcome="ran", framework="megatron", hardware=_TPV_HW,
         megatron_flags=derive(_MOON_FLAGS, {**_TPV_RUN_SET, "--tensor-model-parallel-size": 1,
                                             "--recompute-granularity": "selective", "--recompute-modules": "core_attn",
                                             "--grad-reduce-in-bf16": None},
                               drop=("--sequence-parallel", "--mock-data")),
         source=_tpv_src("cbe825ed1", "moonlight-16b job 5614345"), quote="'`moonlight-16b` ... PASS: job 5614345'",
         read=_TPV_READ + ("The Moonlight 16B flags of the round-24 cases with moonlight_16b_pretrain_8gpu_h100_bf16_config: "
                           "TP1 PP1 EP8 (DP 16), alltoall with shared-expert overlap, selective recompute (modules None -> "
                           "core_attn), TE cross-entropy, precision-aware optimizer (fp32 main params, bf16 grads and "
                           "moments), grads reduced in bf16."), pair=None),
    dict(id="mbridge_tpv_deepseek_v2_lite_h100_16gpu_ep8", outcome="ran", framework="megatron", hardware=_TPV_HW,
         megatron_flags=_DSV2L + ["--tensor-model-parallel-size 1", "--pipeline-model-parallel-size 1",
                                  "--expert-model-parallel-size 8", "--expert-tensor-parallel-size 1"],
         source=_tpv_src("cbe825ed1", "deepseek-v2-lite job 5614279"), quote="'`deepseek-v2-lite` ... PASS: job 5614279'",
         read=_TPV_READ + _DSV2_READ.replace("DeepSeek-V2 (HF deepseek-ai/DeepSeek-V2: 60 layers, hidden 5120, 128 heads, "
                                             "MLA q LoRA 1536 / kv LoRA 512", "DeepSeek-V2-Lite (HF deepseek-ai/DeepSeek-V2-"
                                             "Lite: 27 layers, hidden 2048, 16 heads, MLA without q LoRA, kv LoRA 512").replace(
             "first layer dense 12288, 160 routed experts of 1536", "first layer dense 10944, 64 routed experts of 1408").format(
             fn="deepseek_v2_lite_pretrain_8gpu_h100_bf16_config (TP1 PP1 EP8, DP 16)"), pair=None),
]

# ---------------------------------------------------------------- round 36 (branch oom20): pytorch/torchtitan commit messages
# Squash-merged PR descriptions in pytorch/torchtitan's history that log 'memory: X GiB(Y%)' (torchtitan's max reserved on
# rank 0) for a stated preset and flags: #355 (40f8fd007), #822 (5940ddeb5), #1610 (f738a03bf), #1672 (c4e229115), #2107
# (36a4b6942).  Each job table is the preset TOML at the commit's parent with the stated flags (older key names mapped
# to the torchtitan 0.3 ones, as _PR808_JOB does).
_L8_2025 = {"model": {"name": "llama3", "flavor": "8B"},
            "training": {"local_batch_size": 1, "seq_len": 8192},
            "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                            "tensor_parallel_degree": 1},
            "activation_checkpoint": {"mode": "selective", "selective_ac_option": "op"},
            "compile": {"enable": False},
            "optimizer": {"name": "AdamW"}}
_PR822_SRC = dict(ref="pytorch/torchtitan PR #822 ('Makes FSDP reshard_after_forward configurable', merged as 5940ddeb5 "
                      "on 2025-02-06; runs logged 2025-02-05)",
                  url="https://github.com/pytorch/torchtitan/pull/822", date="2025-02-05")
_PR822_READ = ("Job table = train_configs/llama3_8b.toml at 5940ddeb5^ (batch_size 1, seq_len 8192, "
               "data_parallel_shard_degree -1 over 8 GPUs, selective_ac_option 'op', compile false, AdamW) with "
               "reshard_after_forward_policy as stated ('Ran Llama3 8B model with all options, default / never / always on a "
               "machine with 8 H100s'; the log: 'local batch size 1, global batch size 8, sequence length 8192').  Device: "
               "49.59 / 0.5219 = 95.0 GiB total, the 96 GB H100; 'memory:' is torchtitan's max reserved on rank 0 (steps "
               "10-50 equal).")


def _pr822(policy: str, gib: float, pct: str) -> dict:
    return dict(id=f"titan_pr822_llama3_8b_h100_8gpu_reshard_{policy}", outcome="ran", framework="torchtitan",
                hardware=_PR808_HW,
                torchtitan_config=_titan(_L8_2025, parallelism={"fsdp_reshard_after_forward": policy}),
                source=_PR822_SRC,
                quote=f"'## {policy.capitalize()} ... step: 10  loss: ...  memory: {gib}GiB({pct})'",
                read=_PR822_READ, measured_peak=dict(gib=gib, basis="reserved", rank="first",
                                                      how=f"'memory: {gib}GiB({pct})' at step 10-50 (rank 0 max reserved)"),
                pair=None)


_DS16_SRC_1672 = dict(ref="pytorch/torchtitan PR #1672 ('Save _to_copy and a2a in selective AC policy', merged as "
                          "c4e229115 on 2025-09-06; runs logged 2025-09-01)",
                      url="https://github.com/pytorch/torchtitan/pull/1672", date="2025-09-01")
_DS16_READ_1672 = ("Job table = torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml at c4e229115^ (local_batch_size "
                   "8, FSDP over all GPUs, per-op SAC, compile of the loss only) with the PR's "
                   "'--parallelism.expert_parallel_degree 4' and, as the PR's own log states, seq_len 512 on 4 GPUs: "
                   "its 'tflops' / 'tps' is 10.65e12 / 708 = 12.08e12 / 803 = 15.04 GFLOP per token, which torchtitan's "
                   "formula of that commit (models/deepseek_v3/model/args.py get_nparams_and_flops: 6 x the non-embedding "
                   "active parameters + 12 x layers x heads x dim / heads x seq_len; 17.43 GFLOP at seq 4096 in the "
                   "PR #1610 and issue #1789 logs of the same flavor) gives at seq_len 512, and 'tps' x the 52.1 s / 45.9 s "
                   "between the step-1 and step-10 lines / 9 steps = 4,099 / 4,096 tokens per GPU per step = 8 x 512 "
                   "(tests/test_titan_dsv3_16b_logs.py).  The world size is not logged: 4 GPUs, because the toml's EP 8 "
                   "cannot run on 4 (EP must divide the data-parallel ranks) and the PR overrides it to 4, and because 8 "
                   "GPUs at 4,096 tokens hold FSDP2 state of 15.7 B params x 12 B / 8 = 22 GiB (+ 7 GiB of fp32 "
                   "gradients) and under 10 GiB of activations, far from 70 GiB; the peaks are marked approximate for "
                   "that.  Device: 70.02 / 0.8848 = 79.1 GiB total, an H100 80GB.  Routing not forced balanced (real "
                   "router on c4).  'memory:' is torchtitan's max reserved on rank 0 at step 10.")
_DS16_SRC_1610 = dict(ref="pytorch/torchtitan PR #1610 ('Switch DeepSeekV3 to Use FlexAttention by Default', merged as "
                          "f738a03bf on 2025-08-22; runs logged 2025-08-20)",
                      url="https://github.com/pytorch/torchtitan/pull/1610", date="2025-08-20")
_DSV3_671_SRC = dict(ref="pytorch/torchtitan PR #2107 ('Integrate DeepEP to torchtitan', merged as 36a4b6942 on 2025-12-17)",
                     url="https://github.com/pytorch/torchtitan/pull/2107", date="2025-12-17")
_DSV3_671 = {"model": {"name": "deepseek_v3", "flavor": "671B"},
             "optimizer": {"name": "AdamW", "lr": 2.2e-4, "eps": 1e-8},
             "training": {"local_batch_size": 16, "seq_len": 4096, "max_norm": 1.0, "steps": 120, "dataset": "c4"},
             "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": 64,
                             "fsdp_reshard_after_forward": "default", "tensor_parallel_degree": 1,
                             "enable_async_tensor_parallel": False, "pipeline_parallel_degree": 8,
                             "pipeline_parallel_schedule": "Interleaved1F1B", "pipeline_parallel_microbatch_size": 1,
                             "expert_parallel_degree": 32, "expert_tensor_parallel_degree": 1},
             "activation_checkpoint": {"mode": "full"},
             "compile": {"enable": True, "components": ["model", "loss"]},
             "debug": {"moe_force_load_balance": True}}
_DSV3_671_READ = ("Job table = torchtitan/models/deepseek_v3/train_configs/deepseek_v3_671b.toml at 36a4b6942 with the PR's "
                  "command_args: seq 4096, data_parallel_shard_degree 64, TP 1, EP 32, ETP 1, PP 8 Interleaved1F1B, "
                  "local_batch_size 16 (pipeline_parallel_microbatch_size 1, job_config.py's default), activation_checkpoint full, "
                  "compile model + loss, debug.moe_force_load_balance, "
                  "and expert_parallel_comm_backend deepep ('After') or the standard all-to-all ('Before'); 64 nodes x 8 "
                  "H100 (512 GPUs); 56.75 / 0.7174 = 79.1 GiB total, the 80 GB H100.  'memory:' is torchtitan's max reserved "
                  "on rank 0 (the first pipeline stage).")

CASES += [
    dict(id="titan_pr355_llama3_8b_a100_8gpu_bf16", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="A100 80GB (logged total 79.15 GiB)", plan_gpu="a100-sxm-80gb", num_gpus=8, gpus_per_node=8),
         torchtitan_config=_L8_2025,
         source=dict(ref="pytorch/torchtitan PR #355 ('[torchtitan][optim] Add fused as an option in train config', merged "
                         "as 40f8fd007 on 2024-06-06; runs logged 2024-06-05)",
                     url="https://github.com/pytorch/torchtitan/pull/355", date="2024-06-05"),
         quote=("'Run performance evaluation on 8 A100 DevGPU: 1000 steps on 1D DP default llama_8b.toml ... Fused = False ... "
                "step: 1000  loss:  4.5351  memory: 59.48GiB(75.15%)'; 'Fused = True ... memory: 59.48GiB(75.15%)'"),
         read=("Job table = train_configs/llama3_8b.toml at 40f8fd007^ (batch_size 1, seq_len 8192, data_parallel_degree -1 "
               "over 8 GPUs, selective_ac_option 'op', compile false, AdamW; fused or foreach gives the same peak).  "
               "59.48 / 0.7515 = 79.15 GiB total: an A100 80GB.  torchtitan of that date: FSDP2 with bf16 parameters and "
               "fp32 reduction, the loss in eager.  'memory:' is its max reserved on rank 0 (steps 910-1000)."),
         measured_peak=dict(gib=59.48, basis="reserved", rank="first",
                            how="'memory: 59.48GiB(75.15%)' at steps 910-1000 (rank 0 max reserved)"), pair=None),
    _pr822("default", 49.59, "52.19%"),
    _pr822("always", 49.41, "52.01%"),
    _pr822("never", 62.18, "65.45%"),
    dict(id="titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_before", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=4, gpus_per_node=4),
         torchtitan_config=_titan(_DS16, parallelism={"expert_parallel_degree": 4}, training={"seq_len": 512}),
         source=_DS16_SRC_1672,
         quote=("'CONFIG_FILE=./torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml ./run_train.sh "
                "--parallelism.expert_parallel_degree 4 ... Before (not saving a2a and to_copy) ... 16:03:30,779 ... "
                "step:  1 ... 16:04:22,882 ... step: 10 ... memory: 70.02GiB(88.48%)  tps: 708  tflops: 10.65'"),
         read=_DS16_READ_1672 + ("  'Before': the per-op SAC save list of c4e229115^ (mm, SDPA kernels, reduce_scatter, "
                                 "max, flex_attention; no _to_copy, no _c10d_functional.all_to_all_single): the token "
                                 "all-to-alls (all_to_all_single_autograd, functional since 093347271) are recomputed, "
                                 "neither output kept -- plan field training.moe_a2a_collective 'c10d', the plan's "
                                 "spelling of an exchange not on the save list."),
         plan_changes={"training": {"moe_a2a_collective": "c10d"}},
         measured_peak=dict(gib=70.02, basis="reserved", rank="first", approx=True,
                            how="'memory: 70.02GiB(88.48%)' at step 10 (rank 0 max reserved); world size inferred"),
         pair=None),
    dict(id="titan_pr1672_dsv3_16b_h100_4gpu_ep4_seq512_sac_after", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=4, gpus_per_node=4),
         torchtitan_config=_titan(_DS16, parallelism={"expert_parallel_degree": 4}, training={"seq_len": 512}),
         source=_DS16_SRC_1672,
         quote=("'After (saving a2a and to_copy) ... 16:01:39,691 ... step:  1 ... 16:02:25,603 ... step: 10 ... memory: "
                "74.53GiB(94.17%)  tps: 803  tflops: 12.08'"),
         read=_DS16_READ_1672 + ("  'After': the save list as committed (adds aten._to_copy and "
                                 "_c10d_functional.all_to_all_single), torchtitan's policy from then on: both token "
                                 "all-to-all outputs kept."),
         measured_peak=dict(gib=74.53, basis="reserved", rank="first", approx=True,
                            how="'memory: 74.53GiB(94.17%)' at step 10 (rank 0 max reserved); world size inferred"),
         pair=None),
    dict(id="titan_pr1610_dsv3_16b_h100_96gb_8gpu_ep8_lbs8", outcome="ran", framework="torchtitan",
         hardware=_PR808_HW, torchtitan_config=_DS16, source=_DS16_SRC_1610,
         quote=("'CONFIG_FILE=\"./torchtitan/models/deepseek_v3/train_configs/deepseek_v3_16b.toml\" ./run_train.sh "
                "--training.steps=100 --parallelism.expert_parallel_degree=8 ... CUDA capacity: NVIDIA H100 with 95.00GiB "
                "memory ... local batch size 8, global batch size 64 ... sequence length 4096 ... FlexAttention (now) ... "
                "step: 10 ... memory: 78.14GiB(82.25%)'"),
         read=("Job table = deepseek_v3_16b.toml at f738a03bf (identical to _DS16: local_batch_size 8, seq 4096, FSDP over 8 "
               "GPUs, EP 8, per-op SAC, compile of the loss only) on 8 x H100 96GB ('95.00GiB').  Both logged runs -- SDPA "
               "(the efficient-attention kernel, before) and FlexAttention (the flavor's default from this commit) -- show "
               "78.14 GiB from step 10 on; entered once, as the committed flavor.  The same table OOMs on the 80 GB H100 "
               "(case titan_dsv3_16b_h100_8gpu_lbs8_ep8, a build of 2025-10-02 that keeps both token all-to-all outputs).  "
               "At f738a03bf the token exchange is torchtitan's _A2A workaround (distributed/expert_parallel.py: an "
               "autograd.Function over torch.distributed.all_to_all_single, the c10d collective, until 093347271 of "
               "2025-08-29) and the op-SAC save list has no all-to-all (until ab95c7031 / c4e229115, 2025-09-06): both "
               "exchanges are recomputed, neither output kept -- plan field training.moe_a2a_collective 'c10d'.  "
               "Log: 'tps' 8,922 x 36.7 s / 10 steps = 32,750 tokens per GPU per step = 8 x 4096.  Routing not forced "
               "balanced."),
         plan_changes={"training": {"moe_a2a_collective": "c10d"}},
         measured_peak=dict(gib=78.14, basis="reserved", rank="first",
                            how="'memory: 78.14GiB(82.25%)' at steps 10-100 (rank 0 max reserved)"), pair=None),
    dict(id="titan_pr2107_dsv3_671b_h100_512gpu_pp8_ep32_deepep", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=512, gpus_per_node=8),
         torchtitan_config=_titan(_DSV3_671, parallelism={"expert_parallel_comm_backend": "deepep"}),
         source=_DSV3_671_SRC,
         quote="'Perf: DeepSeek-V3 671B on 64 nodes x H100 (512 GPUs total) ... After: memory: 56.75GiB(71.74%)  tps: 579'",
         read=_DSV3_671_READ, measured_peak=dict(gib=56.75, basis="reserved", rank="first",
                                                 how="'memory: 56.75GiB(71.74%)' (rank 0 max reserved)"), pair=None),
    dict(id="titan_pr2107_dsv3_671b_h100_512gpu_pp8_ep32_standard", outcome="ran", framework="torchtitan",
         hardware=dict(gpu="H100 80GB", plan_gpu="h100-sxm", num_gpus=512, gpus_per_node=8),
         torchtitan_config=_DSV3_671, source=_DSV3_671_SRC,
         quote="'Before: memory: 60.18GiB(76.07%)  tps: 346'",
         read=_DSV3_671_READ, measured_peak=dict(gib=60.18, basis="reserved", rank="first",
                                                 how="'memory: 60.18GiB(76.07%)' (rank 0 max reserved)"), pair=None),
]


# ---------------------------------------------------------------- round 37 (branch oom21): GeodesicResearch PA warm-start SFT
# GeodesicResearch/geodesic-megatron (a Megatron-Bridge fork; mirror HEAD df06386a): the GEOD-147 "PA warm-start" full SFT
# of Nemotron 3 Super 120B-A12B on Isambard-AI (4 x GH200 96GB a node, "95 GB usable each"), 2026-06-07..10.  Each job is
# `pipeline_training_run.py --model super --mode sft` = the fork's recipe nemotron_3_super_sft_config (recipes/nemotronh/
# nemotron_3_super.py at the case's commit) with the YAML of configs/pa_warm_start_sft_120b/ merged over it; the commits
# that change a YAML after a run, the README's attempt tables and findings, and the later commit messages state what each
# configuration did.  Common to all (recipe + YAML, read at 5816803d .. 7fd973f8): BF16 (no FP8, first_last_layers_bf16
# False), packed SFT sequences of seq_length tokens (THD), MBS 1, GBS 64, EP 4, ETP 1, alltoall dispatcher with permute
# fusion and grouped GEMM, sequence parallel, MTP off (mtp_num_layers null), no CUDA graph, distributed optimizer with
# the precision-aware optimizer (bf16 moments; main params and main grads fp32: _sft_common's grad_reduce_in_fp32),
# overlap_grad_reduce on, overlap_param_gather off, natural routing, the Nemotron-H provider's native fused
# cross-entropy, gradient_accumulation_fusion off.  Model flags = the current_runs Nemotron 3 Super row's (88-layer
# hybrid pattern, LatentMoE 512 experts top-22, latent 1024, vocab 131072 -- the fork's tokenizer has the same
# 131,072-entry encoder) without its MTP segments.  Memory figures in the sources ("~81/95 GB used", "46/95GB") do not
# say allocated or reserved: the cases are verdicts only.
_GEOD_URL = "https://github.com/GeodesicResearch/geodesic-megatron/blob/{}/configs/pa_warm_start_sft_120b/{}"
_GEOD_PATTERN = "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME"
_GEOD_HW = dict(gpu="GH200 96GB (Isambard-AI, 4 a node)", plan_gpu="gh200-96gb", gpus_per_node=4)
_GEOD_DROP = FP8_FLAGS + ("--cuda-graph-impl", "--cuda-graph-scope", "--overlap-param-gather", "--grad-reduce-in-bf16",
                          "--moe-router-force-load-balancing", "--moe-router-padding-for-quantization",
                          "--moe-hybridep-num-sms", "--moe-flex-dispatcher-backend", "--manual-gc",
                          "--manual-gc-interval", "--mtp-num-layers", "--mtp-loss-scaling-factor")
_GEOD_READ = ("Recipe nemotron_3_super_sft_config of the fork (TP1 PP1 EP8 SP, seq 2048, alltoall, no CUDA graph, MTP 2, "
              "grad_reduce_in_fp32 from _sft_common, distributed optimizer with both overlaps) with the case's YAML merged "
              "over it: seq {seq} (packed THD), TP{tp} CP{cp} PP{pp} EP4 ETP1 on {n} GH200 (DP {dp}), MBS 1, GBS 64, {mem}; "
              "mtp_num_layers null, moe_token_dispatcher_type alltoall, overlap_param_gather false, precision-aware "
              "optimizer with bf16 moments (fp32 main params and grads), BF16.  ")


def _geod_flags(*, seq: int, tp: int, cp: int, pp: int, ep: int = 4, mem: list[str]) -> dict:
    set_: dict[str, Any] = {"--tensor-model-parallel-size": tp, "--pipeline-model-parallel-size": pp,
                            "--context-parallel-size": cp, "--expert-model-parallel-size": ep,
                            "--expert-tensor-parallel-size": 1, "--seq-length": seq, "--max-position-embeddings": seq,
                            "--micro-batch-size": 1, "--global-batch-size": 64,
                            "--hybrid-layer-pattern": _GEOD_PATTERN, "--moe-token-dispatcher-type": "alltoall",
                            "--use-precision-aware-optimizer": None, "--exp-avg-dtype": "bf16",
                            "--exp-avg-sq-dtype": "bf16", "--cross-entropy-fusion-impl": "native",
                            "--no-gradient-accumulation-fusion": None}
    if tp > 1:
        set_["--sequence-parallel"] = None
    for f in mem:
        k, *v = f.split()
        set_[k] = None if not v else (v[0] if len(v) == 1 else v)
    return dict(drop=_GEOD_DROP, set_=set_)


_GEOD_SEL = ["--recompute-granularity selective"]
_GEOD_FULL = ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
_GEOD_OFF2 = ["--fine-grained-activation-offloading", "--offload-modules expert_fc1 moe_act"]
_GEOD_OFF7 = ["--fine-grained-activation-offloading",
              "--offload-modules attn_norm qkv_linear core_attn attn_proj mlp_norm expert_fc1 moe_act"]


def _geod(cid: str, outcome: str, *, commit: str, yaml: str, seq: int, tp: int, cp: int, pp: int, n: int, mem: list[str],
          memtxt: str, ep: int = 4, quote: str, what: str, pair: Optional[str] = None) -> dict:
    dp = n // (tp * cp * pp)
    return dict(id=f"geod_n3super_sft_{cid}", outcome=outcome, framework="megatron",
                hardware=dict(_GEOD_HW, num_gpus=n), base="mbridge2608_gb300_fp8_mx_nemotron3_super_64gpu",
                edits=_geod_flags(seq=seq, tp=tp, cp=cp, pp=pp, ep=ep, mem=mem),
                source=dict(ref=(f"GeodesicResearch/geodesic-megatron configs/pa_warm_start_sft_120b/{yaml} at {commit} "
                                 f"(GEOD-147 PA warm-start SFT of Nemotron 3 Super 120B on Isambard-AI GH200); {what}"),
                            url=_GEOD_URL.format(commit, yaml), date="2026-06-10"),
                quote=quote,
                read=_GEOD_READ.format(seq=seq, tp=tp, cp=cp, pp=pp, n=n, dp=dp, mem=memtxt).replace("EP4", f"EP{ep}"),
                pair=pair)


CASES += [
    _geod("8k_tp4pp8_rc_coreattn", "oom", commit="5816803d", yaml="pa_warm_start_sft_120b_8k.yaml", seq=8192, tp=4, cp=1,
          pp=8, n=64, mem=_GEOD_SEL + ["--recompute-modules core_attn"] + _GEOD_OFF2,
          memtxt="selective recompute core_attn, fine-grained offload of expert_fc1 / moe_act",
          what="the commit ab0dfe1e that changes it after its first run",
          quote=("ab0dfe1e 'fix(pa-warm-start): recompute MoE+shared experts at 8K (MoE-forward OOM)': 'First 8K smoke "
                 "OOM-looped in the expert linear_fc2 forward with core_attn-only recompute.'"),
          pair="geod_n3super_sft_8k_tp4pp8_rc_moe"),
    _geod("8k_tp4pp8_rc_moe", "ran", commit="ab0dfe1e", yaml="pa_warm_start_sft_120b_8k.yaml", seq=8192, tp=4, cp=1,
          pp=8, n=64, mem=_GEOD_SEL + ["--recompute-modules core_attn moe shared_experts"] + _GEOD_OFF2,
          memtxt="selective recompute core_attn / moe / shared_experts, offload of expert_fc1 / moe_act",
          what="bf01c2b9's message and the README at 78a652e5 ('8K smoke peaked ~42/95 GB')",
          quote="bf01c2b9: '8K smoke peaked at ~42/95 GB with selective MoE recompute'",
          pair="geod_n3super_sft_8k_tp4pp8_rc_coreattn"),
    _geod("64k_tp4pp8_full", "oom", commit="0b84da84", yaml="pa_warm_start_sft_120b_64k.yaml", seq=65536, tp=4, cp=1,
          pp=8, n=64, mem=_GEOD_FULL, memtxt="full uniform recompute of 1 layer, no offload",
          what="0a386578's message and the README's 64K attempt table at 78a652e5",
          quote=("0a386578: 'TP4/EP4/PP8 + full recompute reached the training step but OOM'd in forward/backward "
                 "(~81/95 GB used, 1.6 GB free)'; README: 'OOM in forward/backward, ~2 GB over (81/95 GB used)'")),
    _geod("64k_tp4pp11_full", "oom", commit="0a386578", yaml="pa_warm_start_sft_120b_64k.yaml", seq=65536, tp=4, cp=1,
          pp=11, n=88, mem=_GEOD_FULL, memtxt="full uniform recompute of 1 layer, no offload",
          what="d7ec9257's message and the README's 64K attempt table at 78a652e5",
          quote=("README 78a652e5: '`TP4·EP4·PP11`, full recompute | OOM — deeper PP frees per-stage weights but not "
                 "the activation working set.'")),
    _geod("64k_tp2cp2pp8_full", "oom", commit="d7ec9257", yaml="pa_warm_start_sft_120b_64k.yaml", seq=65536, tp=2, cp=2,
          pp=8, n=64, mem=_GEOD_FULL, memtxt="full uniform recompute of 1 layer, no offload",
          what="the README's 64K attempt table at 78a652e5",
          quote=("README 78a652e5: '`TP2·CP2·EP4·PP8`, full recompute | OOM — CP works on Mamba2 (reached the training "
                 "step) but doesn't help'")),
    _geod("32k_tp4pp8_selective", "oom", commit="77449edb", yaml="pa_warm_start_sft_120b_32k.yaml", seq=32768, tp=4,
          cp=1, pp=8, n=64, mem=_GEOD_SEL + ["--recompute-modules core_attn moe shared_experts"] + _GEOD_OFF2,
          memtxt="selective recompute core_attn / moe / shared_experts, offload of expert_fc1 / moe_act",
          what="the commit 06b9906f that changes it after its run",
          quote=("06b9906f 'fix(pa-warm-start): 32K full recompute (selective OOM'd at ~81GB)': '32K selective stores "
                 "~43GB of residual+mamba activations (->~81/95GB, OOM, ft_launcher gave up on the non-retryable OOM)'")),
    _geod("32k_tp4pp8_full", "oom", commit="06b9906f", yaml="pa_warm_start_sft_120b_32k.yaml", seq=32768, tp=4, cp=1,
          pp=8, n=64, mem=_GEOD_FULL, memtxt="full uniform recompute of 1 layer, no offload",
          what="the README's findings at a194edd3 (the 32K TP x CP = 4 tests)",
          quote=("README a194edd3: 'At 32K with TP×CP=4 it is ~2 GB over budget regardless of recompute granularity, "
                 "offload set, or PP depth (tested: max-offload PP8, max-offload PP11, recompute-attention PP8, "
                 "full-recompute PP8 — all peaked 93–94 GB)'")),
    _geod("64k_tp4pp8_offload7", "oom", commit="c6479baf", yaml="pa_warm_start_sft_120b_64k.yaml", seq=65536, tp=4, cp=1,
          pp=8, n=64, mem=_GEOD_OFF7, memtxt="no recompute, fine-grained offload of all seven allowed modules",
          what="the next commit 4b3cb0db's message",
          quote="4b3cb0db: 'The activation-offload attempt OOM'd at ~89GB (offloaded activations still transit the GPU).'"),
    _geod("8k_tp1pp8", "oom", commit="8c083b95", yaml="pa_warm_start_sft_120b_8k_tp1.yaml", seq=8192, tp=1, cp=1, pp=8,
          n=32, mem=_GEOD_SEL + ["--recompute-modules core_attn moe shared_experts"] + _GEOD_OFF2,
          memtxt="selective recompute core_attn / moe / shared_experts, offload of expert_fc1 / moe_act",
          what="2242385f's message and the README at HEAD",
          quote=("2242385f: 'U8 probe (job 5118811): 8K/TP1/CP1/EP4/PP8/DP4 reaches the training step with zero NaN ... "
                 "but OOMs ~87/95GB'")),
    _geod("32k_tp1cp4pp8_maxoff", "oom", commit="8c083b95", yaml="pa_warm_start_sft_120b_32k_maxoff_cp4.yaml",
          seq=32768, tp=1, cp=4, pp=8, n=64, mem=_GEOD_SEL + ["--recompute-modules moe shared_experts"] + _GEOD_OFF7,
          memtxt="selective recompute moe / shared_experts, offload of all seven allowed modules",
          what="the README's findings at a194edd3 and 164d7055's message",
          quote=("README a194edd3: '... tested: max-offload PP8, ... — all peaked 93–94 GB'; 164d7055: 'PP=22 sheds the "
                 "per-stage weight that made CP4/EP4 OOM at PP8/11'"),
          pair="geod_n3super_sft_32k_tp1cp4pp22_v4"),
    _geod("32k_tp1cp8pp8_v2", "ran", commit="ed411073", yaml="pa_warm_start_sft_120b_32k_v2.yaml", seq=32768, tp=1, cp=8,
          pp=8, n=64, mem=_GEOD_SEL + ["--recompute-modules moe shared_experts"] + _GEOD_OFF7,
          memtxt="selective recompute moe / shared_experts, offload of all seven allowed modules",
          what="bebe5d77's message (the CP8 smoke 5118973)",
          quote=("bebe5d77: 'CP8 smoke (5118973) validated the mult16 pad fix end-to-end (loss 0.79-0.82, 0 nan "
                 "iterations, 46/95GB, ~50s/iter, 47 TFLOP/s/GPU) but exposed a hang doom loop'")),
    _geod("32k_tp1cp4ep8pp8_v3", "ran", commit="bebe5d77", yaml="pa_warm_start_sft_120b_32k_v3.yaml", seq=32768, tp=1,
          cp=4, pp=8, ep=8, n=64, mem=_GEOD_SEL + ["--recompute-modules moe shared_experts"] + _GEOD_OFF7,
          memtxt="selective recompute moe / shared_experts, offload of all seven allowed modules",
          what="164d7055's message (the v3 run hung in the EP all-to-all, it did not run out of memory)",
          quote=("164d7055: 'Hang evidence to date: CP8 cross-node ring hangs @~13 iters; CP4-nodelocal+EP8 cross-node "
                 "a2a hangs @~8 iters'")),
    _geod("32k_tp1cp4pp22_v4", "ran", commit="7fd973f8", yaml="pa_warm_start_sft_120b_32k_v4.yaml", seq=32768, tp=1,
          cp=4, pp=22, n=88, mem=_GEOD_SEL + ["--recompute-modules moe shared_experts"] + _GEOD_OFF7,
          memtxt="selective recompute moe / shared_experts, offload of all seven allowed modules",
          what="4dba252e's message (v5 = 'v4 topology unchanged' with the 'moe' recompute dropped on v4's measured margin)",
          quote=("4dba252e: 'recompute drops 'moe' (offload already catches the dispatched fc1 + activation giants; ~14GB "
                 "stage-0 margin measured)'"),
          pair="geod_n3super_sft_32k_tp1cp4pp8_maxoff"),
]


# ---------------------------------------------------------------- round 41 (branch oom22): Megatron-Bridge issue threads
# A source not used before: the GitHub *issue* threads (bug reports) of NVIDIA-NeMo/Megatron-Bridge (earlier rounds read
# Bridge's docs, recipes, commits and pull requests, never an issue).  Each case = the performance recipe at the commit
# the report names (read in the Bridge mirror), as the Megatron-LM flags of the matching current_runs row with the
# edits that recipe makes; outcome from the thread (and, for a 'ran' twin, from the fix commit / the release table).
FP4_FLAGS = {"--fp4-format": "e2m1", "--fp4-recipe": "nvfp4", "--fp4-param-gather": None}


def _mbi_src(num: int, date: str, what: str) -> dict:
    return dict(ref=f"NVIDIA-NeMo/Megatron-Bridge issue #{num}: {what}",
                url=f"https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/{num}", date=date)


# Qwen3-30B-A3B on one 8 x B300 node, nvcr.io/nvidia/nemo:26.06.00 (Bridge v0.5.0, fcbb60311), the performance recipe
# launched through scripts/performance/run_script.py with torchrun.
_Q30_B300_CG_FP8 = ("--fp8-dot-product-attention", "--moe-pad-experts-for-cuda-graph-inference", "--moe-paged-stash",
                    "--moe-expert-rank-capacity-factor", "--moe-paged-stash-buffer-size-factor-cuda",
                    "--moe-paged-stash-buffer-size-factor-cpu", "--high-priority-a2a-comm-stream",
                    "--use-transformer-engine-op-fuser", "--moe-mlp-glu-interleave-size",
                    "--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute")
_MBI4587_QUOTE = ("reporter: 'With the official/default configuration, bf16 and nvfp4 pretraining can run successfully. "
                  "However, the same official recipe with --compute_dtype fp8_mx consistently runs into CUDA OOM'; "
                  "maintainer (2026-07-01): 'The resolved workload configuration is the same in both cases: EP=8, MBS=8, "
                  "GBS=512, sequence length 4096, HybridEP, and full-iteration CUDA graphs. ... invoking "
                  "scripts/performance/run_script.py directly bypasses the performance executor and PerfEnvPlugin, which "
                  "normally inject the allocator and CUDA-graph environment ... the failing run reports about 60.9 GB "
                  "inactive and 268.9 GB reserved, then falls roughly 2.2 GiB short on the next 9.27 GiB allocation. The "
                  "reference run has 0 inactive memory at the same point and completes all 50 steps.'")
_MBI4587_READ = ("Container 26.06.00 = Bridge v0.5.0 (fcbb60311, 2026-06-16).  scripts/performance/configs/qwen at v0.5.0: "
                 "QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_{BF16,FP8_MX}_V1 (8 GPUs, MBS 8, hybridep; BF16: TE CUDA graphs of "
                 "moe_router + moe_preprocess; FP8_MX: + moe_a2a_overlap, full_iteration graph, cutedsl fused grouped MLP, "
                 "FP8 attention), qwen3_30b_a3b_pretrain_config_b300 (set_full_iter_cg_configs -- paged stash, padded "
                 "experts -- only for fp8_mx with a full-iteration graph; no recompute; grads reduced in bf16).  Flags = "
                 "current_runs row mbridge2606_b300_fp8_mx_qwen3_30b_a3b_8gpu (the same recipe, 26.06 table) with the "
                 "edits listed.")
CASES += [
    dict(id="mbissue4587_qwen3_30b_b300_fp8mx_8gpu_no_perf_env", outcome="oom", framework="megatron",
         hardware=dict(gpu="B300 (8 x B300, one node)", plan_gpu="b300", num_gpus=8, gpus_per_node=8),
         base="mbridge2606_b300_fp8_mx_qwen3_30b_a3b_8gpu", edits=dict(set_={}),
         source=_mbi_src(4587, "2026-06-30", "'Qwen3-30B-A3B fp8_mx pretrain OOMs with official defaults on 8x B300, "
                                             "while bf16 and nvfp4 run successfully'"),
         quote=_MBI4587_QUOTE, read=_MBI4587_READ + " The failing run: the row's flags unchanged, launched without "
                                                    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,"
                                                    "graph_capture_record_stream_reuse:True.",
         pair="mbridge2606_b300_fp8_mx_qwen3_30b_a3b_8gpu",
         skip_reason=("out of memory by fragmentation during graph capture, not by allocated bytes (60.9 GB inactive of "
                      "268.9 GB reserved, per the maintainer); the same flags ran with the launcher's allocator "
                      "environment (the maintainer's reference run, and current_runs row "
                      "mbridge2606_b300_fp8_mx_qwen3_30b_a3b_8gpu); the allocator setting is not a plan field, so the "
                      "plan equals the ran row's")),
    dict(id="mbissue4587_qwen3_30b_b300_bf16_8gpu", outcome="ran", framework="megatron",
         hardware=dict(gpu="B300 (8 x B300, one node)", plan_gpu="b300", num_gpus=8, gpus_per_node=8),
         base="mbridge2606_b300_fp8_mx_qwen3_30b_a3b_8gpu",
         edits=dict(drop=FP8_FLAGS + _Q30_B300_CG_FP8 + ("--cuda-graph-impl",),
                    set_={"--cuda-graph-impl": "transformer_engine", "--cuda-graph-scope": ["moe_router", "moe_preprocess"]}),
         source=_mbi_src(4587, "2026-06-30", "the bf16 run of the same report"),
         quote=_MBI4587_QUOTE,
         read=_MBI4587_READ + " BF16: FP8 flags and the fp8_mx-only settings dropped (FP8 attention, full-iteration "
                              "graph and its paged stash / padded experts, EP overlap with delayed wgrad and its "
                              "high-priority stream, TE op fuser / GLU interleave of the cutedsl grouped MLP); TE graphs "
                              "of moe_router + moe_preprocess.  Ran ('can run successfully'), launched the same way as "
                              "the fp8_mx one (no allocator environment).",
         pair="mbissue4587_qwen3_30b_b300_fp8mx_8gpu_no_perf_env"),
    # Qwen3-30B-A3B on one DGX B200, nemo:26.04.01 (Bridge v0.4.2): the recipe's BF16 run beside its MXFP8 one (the
    # MXFP8 one is current_runs row mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu's configuration: not entered twice).
    dict(id="mbissue4439_qwen3_30b_b200_bf16_8gpu", outcome="ran", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=8, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu", edits=dict(drop=FP8_FLAGS),
         source=_mbi_src(4439, "2026-06-22", "'Qwen3-30B-A3B DGX-B200 MXFP8: 562 TFLOP/s achieved vs documented 619 "
                                             "TFLOP/s'"),
         quote=("'Container: nvcr.io/nvidia/nemo:26.04.01 (Megatron-Bridge v0.4.2) ... Hardware: DGX B200 (8x B200 GPU, "
                "NVLink) ... Config Used QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 via qwen3_30b_a3b_pretrain_config_b200("
                "precision='fp8_mx', config_variant='v1') ... micro_batch_size=4, global_batch_size=512, "
                "expert_model_parallel_size=8, moe_flex_dispatcher_backend=hybridep ... cuda_graph_scope=[attn, moe_router, "
                "moe_preprocess] ... Results (100 iterations, stable) | MXFP8 | ~562 | BF16 | ~552 |'"),
         read=("Bridge v0.4.2 scripts/performance/configs/qwen: QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1 is "
               "QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_BF16_V1 (MBS 4, hybridep, TE graphs of attn / moe_router / "
               "moe_preprocess), and qwen3_30b_a3b_pretrain_config_b200 differs between the two only in the precision "
               "config; so the BF16 run = current_runs row mbridge2604_b200_fp8_mx_qwen3_30b_a3b_8gpu without the FP8 "
               "flags.  Ran 100 iterations ('stable')."),
         pair=None),
]

# Llama 3.1 405B on 256 GB200 (64 trays of 4), NVFP4, the performance recipe's default variant v2 at Bridge 9d004fab7
# (2026-05-02): LLAMA31_405B_PRETRAIN_CONFIG_GB200_NVFP4_V2 = TP 4, PP 16, VP 8, CP 1, GBS 1536, MBS 1, no CUDA graph,
# no recompute (recompute_num_layers None), the same parallelism as the MXFP8 v2 row; llama31_405b_pretrain_config_gb200
# turns TP comm overlap off for nvfp4; bf16_with_nvfp4_mixed: fp4 e2m1, recipe nvfp4, fp4 param gather, no fp8 gather.
_L405_NVFP4 = dict(drop=FP8_FLAGS + ("--tp-comm-overlap",), set_=dict(FP4_FLAGS))
_MBI3714_QUOTE = ("'OOM for pre-training GB200 405B NVFP4 using performance scripts. We have been using this setup as a "
                  "default without any issues. Disabled overlap param gather as below to avoid OOM. "
                  "cfg.ddp.overlap_param_gather = False / cfg.optimizer.overlap_param_gather = False / "
                  "cfg.comm_overlap.overlap_param_gather = False / cfg.comm_overlap.align_param_gather = False ... git checkout "
                  "9d004fa ... setup_experiment.py --model_family_name llama --model_recipe_name llama31_405b --num_gpus 256 "
                  "... --gpu gb200 -c nvfp4 ... Megatron-LM commit: a6cf5663a'")
_MBI3714_READ = ("Flags = current_runs row mbridge2604_gb200_fp8_mx_llama31_405b_256gpu (GB200 MXFP8 v2, the same TP4 PP16 "
                 "VP8 CP1 GBS1536 layout) with the NVFP4 precision of bf16_with_nvfp4_mixed (--fp4-format e2m1 "
                 "--fp4-recipe nvfp4 --fp4-param-gather, FP8 flags dropped) and no TP comm overlap "
                 "(llama31_llm_pretrain.py: tp_comm_overlap False for nvfp4); scripts/performance/configs/llama at 9d004fab7.")
CASES += [
    dict(id="mbissue3714_llama31_405b_gb200_nvfp4_256gpu_param_gather_overlap", outcome="oom_borderline",
         framework="megatron",
         hardware=dict(gpu="GB200 NVL72 (DGX-GB200)", plan_gpu="gb200", num_gpus=256, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_llama31_405b_256gpu", edits=_L405_NVFP4,
         source=_mbi_src(3714, "2026-05-06", "'[bug] OOM for GB200 405B NVFP4'"), quote=_MBI3714_QUOTE,
         read=_MBI3714_READ + " As reported: with the recipe's overlapped parameter all-gather (--overlap-param-gather).",
         pair="mbissue3714_llama31_405b_gb200_nvfp4_256gpu_no_param_gather_overlap",
         borderline_reason=("the report says the identical setup 'ha[d] been used as a default without any issues' before "
                            "(a regression of the software, not of the configuration): the true peak lies at the "
                            "capacity")),
    dict(id="mbissue3714_llama31_405b_gb200_nvfp4_256gpu_no_param_gather_overlap", outcome="ran", framework="megatron",
         hardware=dict(gpu="GB200 NVL72 (DGX-GB200)", plan_gpu="gb200", num_gpus=256, gpus_per_node=4),
         base="mbridge2604_gb200_fp8_mx_llama31_405b_256gpu",
         edits=dict(drop=_L405_NVFP4["drop"] + ("--overlap-param-gather",), set_=_L405_NVFP4["set_"]),
         source=dict(ref=("NVIDIA-NeMo/Megatron-Bridge issue #3714's workaround as committed: b8f078318 (2026-05-11, 'cp: "
                          "llama31 405b gb200 nvfp4 no pg overlap (3713)', disable_param_gather_overlap for nvfp4 v2, "
                          "citing issue #3714) and the v0.4.2 docs/performance-summary.md row it produced"),
                     url="https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/3714", date="2026-05-28"),
         quote=("b8f078318: 'Disable parameter-gather overlap to reduce training peak memory and avoid OOM. ... See: "
                "https://github.com/NVIDIA-NeMo/Megatron-Bridge/issues/3714'; v0.4.2 table: '| DGX-GB200 | 256 | NVFP4 | "
                "1536 | 1 | 8192 | 0 | 4 | 16 | 1 | 8 | n/a | 1184 | 2960 |'"),
         read=_MBI3714_READ + " The workaround: overlap_param_gather and align_param_gather off (Megatron: no "
                              "--overlap-param-gather); ran (v0.4.2 = c81012934, 26.04.01, publishes its throughput).",
         pair="mbissue3714_llama31_405b_gb200_nvfp4_256gpu_param_gather_overlap"),
]

# DeepSeek-V3 on 256 B200, NVFP4, variant v2 at Bridge fcb4c287b (2026-04-29): DEEPSEEK_V3_PRETRAIN_CONFIG_B200_NVFP4_V2 =
# the B200 v2 (GBS 4096, MBS 1) with DeepEP, PP 8 x VP 2 (layout Et*4|(t*4|)*14tmL), EP 32, EP overlap, no CUDA graph,
# recompute mla_up_proj / layernorm / moe_act; the FP8_MX_V2 row differs by TE graphs and recompute mla_up_proj / mlp.
CASES += [
    dict(id="mbissue3597_dsv3_b200_nvfp4_256gpu_v2_fp4_param_gather", outcome="oom", framework="megatron",
         hardware=dict(gpu="B200 (DGX-B200)", plan_gpu="b200", num_gpus=256, gpus_per_node=8),
         base="mbridge2604_b200_fp8_mx_deepseek_v3_256gpu",
         edits=dict(drop=FP8_FLAGS + ("--cuda-graph-impl", "--cuda-graph-scope", "--te-rng-tracker",
                                      "--recompute-modules"),
                    set_={**FP4_FLAGS, "--recompute-modules": ["mla_up_proj", "layernorm", "moe_act"]}),
         source=_mbi_src(3597, "2026-04-30", "'[bug] OOM observed with fp4_param_gather=true for "
                                             "DEEPSEEK_V3_PRETRAIN_CONFIG_B200_NVFP4_V2'"),
         quote=("'Out of Memory (OOM) observed for pre-training DEEPSEEK_V3_PRETRAIN_CONFIG_B200_NVFP4_V2 with "
                "fp4_param_gather=true ... commit- fcb4c287b312c78585d114c5a6a71574dbfc290f container- "
                "nvcr.io/nvidian/nemo:nightly-2026-04-28 GPU: B200 ... Regression? Yes'"),
         read=("scripts/performance/configs/deepseek at fcb4c287b: DEEPSEEK_V3_PRETRAIN_CONFIG_B200_NVFP4_V2 (256 GPUs), "
               "deepseek_v3_pretrain_config_b200 + set_deepseek_v3_common_configs (selective recompute, grads reduced in "
               "bf16, forced load balance), bf16_with_nvfp4_mixed (fp4_param_gather True).  Flags = current_runs row "
               "mbridge2604_b200_fp8_mx_deepseek_v3_256gpu (B200 MXFP8 v2: the same GBS / PP / VP / layout / EP / "
               "DeepEP / EP overlap / MTP / precision-aware optimizer) with the NVFP4 precision, no CUDA graph and the "
               "NVFP4 v2 recompute modules.  (The thread's repro line is a copy of #3714's llama command; the title, "
               "config name, commit and GPU are the report's.)  The fix 03915dd72 (2026-04-30, 'no fp4 param gather "
               "(3578)') sets mixed_precision.fp4_param_gather = False in deepseek_v3_pretrain_config_b200; no run of "
               "the fixed recipe is published (the v0.4.2 table has no DeepSeek-V3 NVFP4 row), so no 'ran' twin."),
         pair=None),
]


# ----------------------------------------------------------------------------- published peaks: TorchTitan benchmarks
_TITAN_FLAVOR = {32: "8B", 80: "70B", 126: "405B"}


def titan_peak_cases(published: Path) -> list[dict]:
    """pytorch/torchtitan benchmark rows with a published peak, as job tables (reserved peak, max over GPUs)."""
    out = []
    for r in json.loads(published.read_text()):
        m = r.get("measured") or {}
        if not m.get("peak_memory_gb") or not r["id"].startswith("torchtitan"):
            continue
        a, p, t, hw = r["architecture"], r["parallelism"], r["training"], r["hardware"]
        flavor = _TITAN_FLAVOR.get(a["num_layers"])
        lbs = t.get("local_batch_size_per_dp_rank") or t.get("micro_batch_size")
        pp = p.get("pp") or 1
        sched = "Interleaved1F1B" if "interleaved" in r["id"] else "1F1B"
        job: dict[str, Any] = {
            "model": {"name": "llama3", "flavor": flavor},
            "training": {"local_batch_size": lbs, "seq_len": a["seq_length"]},
            "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                            "tensor_parallel_degree": p.get("tp") or 1, "pipeline_parallel_degree": pp,
                            "context_parallel_degree": p.get("cp") or 1,
                            "enable_async_tensor_parallel": bool(p.get("async_tp"))},
            "activation_checkpoint": ({"mode": "full"} if t["recompute"] == "full"
                                      else {"mode": "selective", "selective_ac_option": "op"}),
            # torchtitan 9dec370 (the Dec 2024 benchmarks) compiled the model only: train.py:137-138 leaves
            # `loss_fn = torch.compile(loss_fn)` commented out; e7c0cae compiles both (components/loss.py:27-29)
            "compile": {"enable": bool(p.get("torch_compile")),
                        "components": ["model"] if "torchtitan 9dec370" in r["source"] else ["model", "loss"]},
            "optimizer": {"name": "AdamW"},
        }
        read = [f"pytorch/torchtitan benchmark row {r['id']} (shared/validation/published_runs.json): {r['source']}"]
        if pp > 1:
            job["parallelism"]["pipeline_parallel_schedule"] = sched
            job["parallelism"]["pipeline_parallel_microbatch_size"] = max(1, lbs // pp)
            read.append(f"local batch {lbs} split into {pp} micro-batches of {max(1, lbs // pp)} (torchtitan 9dec370's "
                        "default: as many micro-batches as PP stages)")
            if sched == "Interleaved1F1B":
                read.append("interleaved: two stages per rank (torchtitan's default for multi-stage schedules), assumed")
        if "float8" in str(t.get("precision")):
            job["model"]["converters"] = ["float8"]
            job["float8"] = {"enable_fsdp_float8_all_gather": bool(p.get("fsdp_float8_all_gather"))}
        if not flavor:
            continue
        gpu = "h200" if "H200" in hw["gpu"] else "h100-sxm-96gb-500w"
        out.append(dict(
            id=r["id"], outcome="ran", framework="torchtitan",
            hardware=dict(gpu=hw["gpu"], plan_gpu=gpu, num_gpus=hw["num_gpus"], gpus_per_node=hw.get("gpus_per_node") or 8),
            torchtitan_config=job, source=dict(ref=r["source"], url="https://github.com/pytorch/torchtitan", date=None),
            quote=f"peak memory {m['peak_memory_gb']} {m.get('peak_memory_unit', '')} ({r.get('flops_convention', '')})",
            read="; ".join(read),
            measured_peak=dict(gib=float(m["peak_memory_gb"]), basis="reserved", rank="max",
                               how="torchtitan DeviceMemoryMonitor max reserved, max over GPUs"),
            family="published_peak", pair=None))
    return out


# ----------------------------------------------------------------------------- published peaks: Megatron-LM functional tests
MLM_TESTS = (
    "gpt/gpt3_7b_tp1_pp4_memory_speed",
    "gpt/gpt3_7b_tp4_pp1_memory_speed",
    "gpt/gpt3_mcore_te_tp2_pp2_mla",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1",
    "gpt/gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion",
    "moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_memory_speed",
    "gpt/gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap",
    # round 14 (branch oom9), held out: fine-grained activation offloading (with MTP / without MTP and the EP
    # overlap), FP8 MoE + MLA + MTP, selective recompute, TE CUDA graphs of the attention, FP8 params + CP,
    # interleaved PP (overlapped optimizer; embedding and loss in the split), MoE with CP, Megatron-FSDP
    "moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_fine_grained_offloading",
    "moe/gpt3_moe_mcore_te_tp2_pp2_ep4_etp1_no_mtp_no_a2a_ovlp_fine_grained_offloading",
    "moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_mtp_resume_torch_dist_fp8",
    "moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_selective_recompute_experimental",
    "moe/gpt3_mcore_te_tp2_pp2_ep4_etp1_resume_torch_dist_attn_cudagraph",
    "gpt/gpt3_weekly_mcore_tp4_cp2_current_scaling_native_fp8_tp_sp_cp_tp_overlap",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_dist_optimizer_overlap_grad_reduce_param_gather_overlap_optimizer",
    "gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split",
    "moe/gpt3_mcore_tp2_cp2_pp2_ep2_te_4experts2parallel",
    "gpt/gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor",
    # round 24 (branch oom12), held out: every remaining one-node (1 x 8 H100, tests/test_utils/recipes/h100/*.yaml
    # 'nodes: 1, gpus: 8') GPT / MoE pretraining test of the mirror whose H100 golden values log
    # mem-max-allocated-bytes, less the resume / checkpoint-consistency / inference / GRPO / release ones: TP 1 PP 1
    # distributed optimizer, tunable overlap, the local (non-TE) spec at PP 2 / PP 4, uneven pipeline split, the
    # all-to-all overlap, ETP 1 / 2 and expert-TP MoE, grouped GEMM with the TE op fuser, Megatron-FSDP with EP
    # (DeepSeek proxy), MoE with CP, TP 4 overlapped dist-optimizer, CP 2 with ETP 4 and per-token loss
    "gpt/gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap",
    "gpt/gpt3_mcore_tp1_pp2",
    "gpt/gpt3_mcore_tp1_pp4",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline",
    "gpt/gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_etp4_calculate_per_token_loss_dp_last",
    "moe/gpt3_mcore_te_tp2_pp1_te_a2a_ovlp_8experts_etp1_ep4",
    "moe/gpt3_mcore_te_tp2_pp1_te_8experts_etp1_ep4",
    "moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM",
    "moe/gpt3_mcore_te_tp1_pp1_te_4experts_groupedGEMM_op_fuser",
    "moe/deepseek_proxy_fsdp_ep2_fsdp2_ep_overlap",
    "moe/gpt3_mcore_tp2_pp2_ep2_te_4experts2parallel",
    "moe/gpt3_mcore_cp2_pp2_ep2_te_4experts2parallel_nondeterministic",
    "moe/gpt3_mcore_tp2_pp2_ep2_etp2_te_4experts2parallel",
)
# round 27 (branch oom13), held out: the first run of the one-node (tests/test_utils/recipes/h100/{gpt,moe}.yaml,
# 'nodes: 1, gpus: 8', platform dgx_h100) ckpt-resume tests, and the one regular MoE test left, whose H100 golden values
# log mem-max-allocated-bytes and whose configuration is not already above (the dp_last / nondeterministic twins of
# used tests, frozen-resume tests (not in a recipe), checkpoint-consistency and muon tests left out).
# run_ci_test.sh: 'First run never loads from a checkpoint'; the golden file is that run (iterations 1..100), which
# saves every --save-interval: the peak is read at the last iteration before the first save.
MLM_RESUME_TESTS = (
    "gpt/gpt3_mcore_te_tp1_pp1_resume_torch_dist_dist_optimizer",
    "gpt/gpt3_mcore_te_tp1_pp1_resume_torch_dist_uniform_full_recompute",
    "gpt/gpt3_mcore_te_tp1_pp2_resume_torch_dist_rope_embeddings",
    "gpt/gpt3_mcore_te_tp1_pp2_resume_torch_dist_rope_embeddings_interleaved_no_fusion",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_swiglu",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_disable_bias_linear",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_untie_embeddings_and_outputs",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_calculate_per_token_loss",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce",
    "gpt/gpt3_mcore_te_tp2_pp1_resume_torch_dist_cp2_nondeterministic",
    "gpt/gpt3_mcore_te_tp2_pp1_resume_torch_dist_multi_dist_optimizer_instances",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute",
    "gpt/gpt3_mcore_te_tp4_pp1_resume_torch_dist_qk_layernorm_test_mode",
    "gpt/gpt3_mcore_te_tp4_pp2_resume_torch_dist_reshard_8x1xNone",
    "gpt/gpt3_mcore_tp1_pp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_param_gather",
    "gpt/gpt3_mcore_tp4_pp1_resume_torch_dist",
    "moe/gpt3_mcore_te_tp1_pp2_resume_torch_dist_reshard_2x1x4_te_8experts2parallel_dist_optimizer",
    "moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_dist_optimizer",
    "moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_multi_dist_optimizer_instances",
    "moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_ddp_average_in_collective",
    "moe/gpt3_mcore_te_tp2_zp_z3_resume_torch_dist_te_8experts2parallel_top2router",
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer",
    "moe/gpt3_moe_mcore_te_tp4_ep2_etp2_pp2_resume_torch_dist_dist_optimizer",
    "moe/gpt3_moe_mcore_te_tp4_ep2_etp2_pp2_scoped_cudagraph",
)
# round 28 (branch oom14), held out: Muon (`--optimizer muon` / `dist_muon`, the H100 ckpt-resume tests of
# tests/test_utils/recipes/h100/moe.yaml, first run), and the same tests on other platforms than 1 x 8 H100 whose golden
# values log mem-max-allocated-bytes: the `_1node` twin (tests/test_utils/recipes/gb200/{gpt,moe}-1node.yaml: 'nodes: 1,
# gpus: 4', platform dgx_gb200; the MODEL_ARGS equal the 8-GPU test's or change PP / EP / CP / layers to fit 4 ranks) of
# every test above, plus the Muon ones, and the GB200-only Megatron-FSDP DeepSeek proxy (tests/test_utils/recipes/gb200/
# moe.yaml, 'nodes: 2, gpus: 4'); the nondeterministic / dp_last / persistent / param_layout / fim / decoupled-lr twins
# of these left out.
MLM_MUON_TESTS = (
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_muon",
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_muon",
)
MLM_GB200_2NODE_TESTS = ("moe/deepseek_proxy_fsdp_ep2_fsdp2",)
MLM_GB200_1NODE_TESTS = tuple(f"{t}_1node" for t in MLM_TESTS + MLM_RESUME_TESTS + MLM_MUON_TESTS if t + "_1node" in {
    "gpt/gpt3_mcore_te_tp1_pp1_dist_optimizer_no_mmap_bin_files_1node",
    "gpt/gpt3_mcore_te_tp1_pp1_resume_torch_dist_dist_optimizer_1node",
    "gpt/gpt3_mcore_te_tp1_pp1_resume_torch_dist_uniform_full_recompute_1node",
    "gpt/gpt3_mcore_te_tp1_pp2_resume_torch_dist_rope_embeddings_1node",
    "gpt/gpt3_mcore_te_tp1_pp2_resume_torch_dist_rope_embeddings_interleaved_no_fusion_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_disable_bias_linear_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_swiglu_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_resume_torch_dist_untie_embeddings_and_outputs_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_dist_optimizer_overlap_grad_reduce_param_gather_overlap_optimizer_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_calculate_per_token_loss_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_uneven_pipeline_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp2_account_for_embedding_loss_in_pipeline_split_1node",
    "gpt/gpt3_mcore_te_tp2_pp1_resume_torch_dist_cp2_nondeterministic_1node",
    "gpt/gpt3_mcore_te_tp2_pp1_resume_torch_dist_multi_dist_optimizer_instances_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_etp4_calculate_per_token_loss_dp_last_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_cross_entropy_loss_fusion_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_mla_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_defer_embedding_wgrad_compute_1node",
    "gpt/gpt3_mcore_te_tp2_zp_z3_resume_fsdp_dtensor_1node",
    "gpt/gpt3_mcore_te_tp4_pp1_dist_optimizer_overlap_grad_reduce_param_gather_1node",
    "gpt/gpt3_mcore_te_tp4_pp1_resume_torch_dist_qk_layernorm_test_mode_1node",
    "gpt/gpt3_mcore_te_tp4_pp2_resume_torch_dist_reshard_8x1xNone_1node",
    "moe/gpt3_mcore_te_tp1_pp2_resume_torch_dist_reshard_2x1x4_te_8experts2parallel_dist_optimizer_1node",
    "moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_dist_optimizer_1node",
    "moe/gpt3_mcore_te_tp2_pp1_resume_torch_dist_te_8experts2parallel_multi_dist_optimizer_instances_1node",
    "moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_ddp_average_in_collective_1node",
    "moe/gpt3_mcore_te_tp2_pp1_te_8experts2parallel_overlap_grad_reduce_param_gather_groupedGEMM_1node",
    "moe/gpt3_mcore_te_tp2_pp1_te_a2a_ovlp_8experts_etp1_ep4_1node",
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer_1node",
    "moe/gpt3_moe_mcore_te_tp4_ep2_etp2_pp2_resume_torch_dist_dist_optimizer_1node",
    "moe/gpt3_moe_mcore_te_tp4_ep2_etp2_pp2_scoped_cudagraph_1node",
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_muon_1node",
    "moe/gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_muon_1node",
}) + ("moe/deepseek_proxy_fsdp_ep2_fsdp2_1node",)
# round 32 (branch oom16), held out: the functional tests of the mirror's recipes left after rounds 14-28 whose
# MODEL_ARGS differ from every test above in a flag that can move memory (a script compared the argument sets with the
# I/O, logging and checkpoint-format flags dropped): the five Mamba-hybrid tests of tests/test_utils/recipes/h100/
# mamba.yaml (1 x 8 H100, golden values on dgx_h100: the hybrid stack, pattern M-M-M-M*-..., GQA, TP / PP / VP / CP),
# and GPT twins that change the param all-gather overlap, untied embeddings under VP, the attention backend, the
# vocabulary (GPT-2 BPE file instead of a tokenizer), per-token loss / ETP without the other, the averaging in the
# collective, the dataloader's attention mask, a decoupled LR; and on 2 x 4 GB200 (gb200/gpt.yaml) the fp16 twins of
# gpt3_mcore_tp1_pp2 / _pp4 (no H100 golden values log memory).  Left out: near-duplicates (persistent / reshard /
# nondeterministic-only / fim-dataset / legacy-model twins with the same arguments), frozen-resume tests (in no
# recipe), the modelopt distillation test, the release tests (node counts not published), BERT / T5 / multimodal /
# inference / GRPO tests (no adapter path).  The peak is read at the last iteration before the first save.
MLM_ROUND32_H100_TESTS = (
    "hybrid/hybrid_mr_mcore_te_tp1_pp1_cp1_dgx_a100_1N8G",
    "hybrid/hybrid_mr_mcore_te_tp1_pp2_vpp2_cp1_dgx_a100_1N8G",
    "hybrid/hybrid_mr_mcore_te_tp1_pp4_cp1_dgx_a100_1N8G",
    "hybrid/hybrid_mr_mcore_te_tp2_pp1_cp1_dgx_a100_1N8G",
    "hybrid/hybrid_mr_mcore_te_tp2_pp1_cp4_dgx_a100_1N8G",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_param_gather",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_untied",
    "gpt/gpt3_mcore_te_tp4_pp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_calculate_per_token_loss",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_etp4_dp_last",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_nondeterministic",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_dist_tunable_overlap",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_ddp_average_in_collective",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_no_create_attention_mask_in_dataloader",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_decoupled_lr",
)
MLM_ROUND32_GB200_2NODE_TESTS = (
    "gpt/gpt3_mcore_tp1_pp2_resume_torch_dist",
    "gpt/gpt3_mcore_tp1_pp4_resume_torch_dist",
)
#: the ``_1node`` twins (gb200/gpt-1node.yaml: 1 x 4 GB200) of the H100 tests above that have one
MLM_ROUND32_GB200_1NODE_TESTS = (
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_calculate_per_token_loss_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_etp4_dp_last_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_cp2_nondeterministic_1node",
    "gpt/gpt3_mcore_te_tp2_pp2_resume_torch_dist_ddp_average_in_collective_1node",
    "gpt/gpt3_mcore_te_tp4_pp1_resume_torch_dist_dist_optimizer_overlap_grad_reduce_1node",
    "gpt/gpt3_mcore_te_tp1_pp4_vp1_resume_torch_decoupled_lr_1node",
)
# where each family ran: (golden-values platform, hardware of the case)
_H100 = ("dgx_h100", dict(gpu="DGX-H100 (H100 80GB)", plan_gpu="h100-sxm", num_gpus=8, gpus_per_node=8))
_GB200_1N = ("dgx_gb200", dict(gpu="GB200 (1 node x 4)", plan_gpu="gb200", num_gpus=4, gpus_per_node=4))
_GB200_2N = ("dgx_gb200", dict(gpu="GB200 (2 nodes x 4)", plan_gpu="gb200", num_gpus=8, gpus_per_node=4))
# flags of a functional test that only move files or logs; dropped from the stored argv
_IO_FLAGS = {"--save", "--load", "--tensorboard-dir", "--data-path", "--data-cache-path", "--vocab-file", "--merge-file",
             "--tokenizer-model", "--log-throughput", "--log-params-norm", "--log-num-zeros-in-grad",
             "--log-validation-ppl-to-tensorboard", "--log-timers-to-tensorboard", "--log-memory-to-tensorboard",
             "--timing-log-level", "--save-interval", "--eval-interval", "--eval-iters", "--log-interval", "--exit-interval",
             "--async-save", "--use-persistent-ckpt-worker", "--ckpt-format", "--dist-ckpt-strictness", "--split",
             "--distributed-backend", "--train-iters", "--lr-decay-iters", "--exit-duration-in-mins",
             "--distributed-timeout-minutes", "--ckpt-fully-parallel-load", "--ckpt-assume-constant-structure",
             "--tp-comm-overlap-cfg"}


def _git_show(repo: Path, rev: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def _launcher_value(v: Any) -> str:
    """A MODEL_ARGS value as the functional-test launcher passes it: ``tests/functional_tests/shell_test_utils/
    _run_training.sh`` strips the brackets of a ``[a b c]`` value (``--recompute-modules "[layernorm moe_act]"`` ->
    ``--recompute-modules layernorm moe_act``) and passes any other value as one argument."""
    s = str(v).strip()
    return s[1:-1].strip() if len(s) > 2 and s[0] == "[" and s[-1] == "]" and "]" not in s[1:-1] else s


def mlm_peak_cases(repo: Path) -> list[dict]:
    """Megatron-LM functional tests: MODEL_ARGS as flags, last rank's max allocated (golden values, last iteration)."""
    import yaml

    rev = subprocess.run(["git", "-C", str(repo), "rev-parse", "main"], check=True, capture_output=True,
                         text=True).stdout.strip()
    out = []
    runs = ([(t, _H100) for t in MLM_TESTS + MLM_RESUME_TESTS + MLM_MUON_TESTS]
            + [(t, _GB200_2N) for t in MLM_GB200_2NODE_TESTS] + [(t, _GB200_1N) for t in MLM_GB200_1NODE_TESTS]
            + [(t, _H100) for t in MLM_ROUND32_H100_TESTS] + [(t, _GB200_2N) for t in MLM_ROUND32_GB200_2NODE_TESTS]
            + [(t, _GB200_1N) for t in MLM_ROUND32_GB200_1NODE_TESTS])
    for test, (platform, hardware) in runs:
        base = f"tests/functional_tests/test_cases/{test}"
        gold_file = f"golden_values_dev_{platform}.json"
        try:
            cfg = yaml.safe_load(_git_show(repo, rev, f"{base}/model_config.yaml"))
            gold = json.loads(_git_show(repo, rev, f"{base}/{gold_file}"))
        except subprocess.CalledProcessError:
            continue
        vals = {k: v for k, v in gold["mem-max-allocated-bytes"]["values"].items() if isinstance(v, (int, float))}
        save = cfg["MODEL_ARGS"].get("--save-interval")
        twin_of = test.removesuffix("_1node")
        round32 = MLM_ROUND32_H100_TESTS + MLM_ROUND32_GB200_2NODE_TESTS + MLM_ROUND32_GB200_1NODE_TESTS
        before_save = twin_of in MLM_RESUME_TESTS + MLM_MUON_TESTS + round32 and save is not None
        if test in round32:
            before_save = before_save and int(save) <= max(int(k) for k in vals)
        last = max((k for k in vals if not before_save or int(k) < int(save)), key=int)
        peak = float(vals[last]) / 2**30
        margs = cfg["MODEL_ARGS"]
        flags: list[str] = []
        if "--vocab-file" in margs and "--tokenizer-type" not in margs:
            flags += ["--tokenizer-type GPT2BPETokenizer", "--vocab-size 50257"]  # Megatron's GPT-2 BPE default
        for k, v in margs.items():
            if k in _IO_FLAGS or v is False or isinstance(v, str) and "${" in v:
                continue
            flags.append(k if v is True else f"{k} {_launcher_value(v)}")
        out.append(dict(
            id="mlm_functional_" + test.replace("/", "_"), outcome="ran", framework="megatron",
            hardware=dict(hardware), megatron_flags=flags,
            source=dict(ref=f"NVIDIA/Megatron-LM @{rev[:10]} {base}/model_config.yaml + {gold_file}",
                        url=f"https://github.com/NVIDIA/Megatron-LM/tree/{rev[:10]}/{base}", date=None),
            quote=(f"mem-max-allocated-bytes at iteration {last}: {int(float(vals[last]))}"
                   + (f" (the last iteration before the first save, --save-interval {save})" if before_save else "")),
            read=("MODEL_ARGS of the test (placeholders ${...}, I/O / logging flags and a --tp-comm-overlap-cfg YAML of the "
                  "test folder dropped; a bracketed list passed without its brackets, as _run_training.sh does; GPT-2 BPE vocabulary "
                  "50,257 where a vocab file is given) on " + ("one 8-GPU DGX-H100 node" if platform == "dgx_h100" else
                  f"{hardware['num_gpus'] // 4} GB200 node(s) of 4 GPUs (the recipe's nodes / gpus)") + "; the golden value is the last rank's "
                  "torch.cuda.max_memory_allocated (--log-memory-to-tensorboard writes from the last rank)."),
            measured_peak=dict(gib=round(peak, 3), basis="allocated", rank="last",
                               how=("mem-max-allocated-bytes, " + ("last iteration before the first save" if before_save
                                                          else "last logged iteration") + ", last rank")),
            family="published_peak", pair=None))
    return out


# ---------------------------------------------------------------- round 30 (branch oom15): Primus Mamba / hybrid sweeps
# AMD-AGI/Primus experiment files annotated with the largest batch of an on-node OOM sweep ('MI300X max batch (8 GPUs):
# GBS=..., ... TFLOP/s, X% mem (BS=... OOM)'): each the experiment at that commit, read through the Primus reader
# (build_current_runs.primus_flatten: the flattened module, checked to give the resolved plan) with the micro batch of
# the row (global batch = micro x 8: DP 8, no accumulation, as the comments' GBS).  The 'X% mem' basis is not stated
# (and the same Zebra-Llama 1B at MBS 12 reads 88.7 % of 192 GiB on MI300X and 97.2 % of 288 GiB on MI355X): peaks
# are kept rough (approx), the outcome is what is judged.  (commit, experiment, micro batch, outcome, rough %, quote)
PRIMUS_MIRROR = Path("/work/.mirror/AMD-AGI+Primus/repo")
_PRIMUS_SWEEP_MAIN = "fd1eeabbad15135e3702094087e96142b4b4eacb"  # main 2026-08-22: #1005 (be3dfcde) + 554f61f7
#: PR #1007 head (branch refactor/rename-gdn-kda-model-configs)
_PRIMUS_SWEEP_PR1007 = "84035edc24d72e7f7238e6bad48fb1ae900bc326"
PRIMUS_SWEEPS = (
    (_PRIMUS_SWEEP_MAIN, "MI300X/mamba_370M-pretrain.yaml", 52, "ran", 98.5,
     "# MI300X max batch (8 GPUs): GBS=416, 258.6 TFLOP/s, 98.5% mem (BS=448 OOM)"),
    (_PRIMUS_SWEEP_MAIN, "MI300X/mamba_370M-pretrain.yaml", 56, "oom", None,
     "# MI300X max batch (8 GPUs): GBS=416, 258.6 TFLOP/s, 98.5% mem (BS=448 OOM)"),
    (_PRIMUS_SWEEP_MAIN, "MI355X/zebra_llama_1B-pretrain.yaml", 12, "ran", 97.2,
     "# MI355X max batch (8 GPUs): MBS=12, GBS=96, 97.2% mem (↑ from MBS=8)"),
    (_PRIMUS_SWEEP_MAIN, "MI355X/zebra_llama_3B-pretrain.yaml", 7, "ran", 96.3,
     "# MI355X max batch (8 GPUs): MBS=7, GBS=56, 96.3% mem (↑ from MBS=4)"),
    (_PRIMUS_SWEEP_MAIN, "MI355X/zebra_llama_8B-pretrain.yaml", 4, "ran", 98.3,
     "# MI355X max batch (8 GPUs): MBS=4, GBS=32, 98.3% mem (↑ from MBS=2)"),
    (_PRIMUS_SWEEP_PR1007, "MI300X/hylo_llama_mamba_1B_BF16-pretrain.yaml", 12, "ran", 88.7,
     "# MI300X max batch (8 GPUs): GBS=96, 227.6 TFLOP/s, 88.7% mem"),
    (_PRIMUS_SWEEP_PR1007, "MI300X/hylo_llama_mamba_3B_BF16-pretrain.yaml", 5, "ran", 86.5,
     "# MI300X max batch (8 GPUs): GBS=40, 321.2 TFLOP/s, 86.5% mem"),
    (_PRIMUS_SWEEP_PR1007, "MI300X/hylo_llama_mamba_8B_BF16-pretrain.yaml", 2, "ran", 82.4,
     "# MI300X max batch (8 GPUs): GBS=16, 299.6 TFLOP/s, 82.4% mem (BS=24 OOM)"),
    (_PRIMUS_SWEEP_PR1007, "MI300X/hylo_llama_mamba_8B_BF16-pretrain.yaml", 3, "oom", None,
     "# MI300X max batch (8 GPUs): GBS=16, 299.6 TFLOP/s, 82.4% mem (BS=24 OOM)"),
)
_PRIMUS_GPU = {"MI300X": ("MI300X (8x, 192 GiB)", "mi300x", 192.0), "MI355X": ("MI355X (8x, 288 GiB)", "mi355x", 288.0)}


def primus_sweep_cases(repo: Path) -> list[dict]:
    """The Primus sweep rows (``PRIMUS_SWEEPS``), each experiment flattened from the mirror's commit."""
    sys.path.insert(0, str(HERE))
    from build_current_runs import primus_flatten
    from build_runs import _cluster_for

    out = []
    for commit, exp, mbs, outcome, pct, quote in PRIMUS_SWEEPS:
        arch = exp.split("/")[0]
        gpu, plan_gpu, cap = _PRIMUS_GPU[arch]
        with tempfile.TemporaryDirectory() as tmp:
            arc = subprocess.run(["git", "-C", str(repo), "archive", commit, "examples/megatron/configs",
                                  "primus/configs"], check=True, capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=arc, check=True)
            flat, _ = primus_flatten(tmp, f"examples/megatron/configs/{exp}",
                                     {"micro_batch_size": mbs, "global_batch_size": 8 * mbs},
                                     _cluster_for(plan_gpu, 8, 8))
        name = exp.split("/")[1].removesuffix("-pretrain.yaml").removesuffix("_BF16").lower().replace(".", "")
        ref = "main" if commit == _PRIMUS_SWEEP_MAIN else "PR #1007 head"
        out.append(dict(
            id=f"primus_sweep_{arch.lower()}_{name}_mbs{mbs}", outcome=outcome, framework="megatron",
            hardware=dict(gpu=gpu, plan_gpu=plan_gpu, num_gpus=8, gpus_per_node=8),
            primus_config=flat, primus_model_preset=Path(str(flat.get("overrides", {}).get("model", exp))).stem,
            source=dict(ref=f"AMD-AGI/Primus @{commit[:8]} ({ref}) examples/megatron/configs/{exp}",
                        url=f"https://github.com/AMD-AGI/Primus/blob/{commit[:8]}/examples/megatron/configs/{exp}",
                        date="2026-08-22" if commit == _PRIMUS_SWEEP_PR1007 else "2026-08-20"),
            quote=f"'{quote}'",
            read=(f"The experiment at {commit[:8]} through the Primus reader (its model preset, pre_trainer.yaml, the "
                  f"Primus spec named in 'spec'), micro batch {mbs}, global batch {8 * mbs} on one node of 8 {arch}: "
                  + ("the sweep's largest batch, which ran" if outcome == "ran" else
                     f"the next batch of the sweep ('BS={8 * mbs} OOM')") + "."),
            measured_peak=(dict(gib=round(pct / 100 * cap, 1), basis="reserved", rank="first", approx=True,
                                how=f"'{pct}% mem' of {cap:.0f} GiB (basis not stated)") if pct else None),
            family="published_peak" if pct else "report", pair=None))
    return out


# ----------------------------------------------------------------------------- assembly
def resolve(case: dict) -> dict:
    """The case as stored: ``base`` + ``edits`` turned into ``megatron_flags`` (the base is named in ``derived_from``)."""
    c = {k: v for k, v in case.items() if k not in ("base", "edits") and not (k == "borderline_reason" and v is None)}
    if case.get("base"):
        e = case.get("edits") or {}
        c["megatron_flags"] = derive(_current(case["base"]), e.get("set_"), tuple(e.get("drop", ())))
        c["derived_from"] = {"current_runs_row": case["base"],
                             "set": {k: v for k, v in (e.get("set_") or {}).items()},
                             "drop": list(e.get("drop", ()))}
    c.setdefault("family", "report")
    c.setdefault("pair", None)
    return c


def main(argv: list[str] | None = None) -> int:
    import argparse

    sys.path.insert(0, str(HERE))
    from build_runs import shared_source

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mlm", type=Path, default=MLM_MIRROR, help="Megatron-LM git directory (functional tests)")
    ap.add_argument("--primus", type=Path, default=PRIMUS_MIRROR, help="Primus git directory (the sweep rows)")
    args = ap.parse_args(argv)
    old = json.loads(OUT.read_text())["cases"] if OUT.exists() else []
    cases = [resolve(c) for c in CASES]
    src = shared_source()
    titan = (titan_peak_cases(src) if src is not None and src.is_file()
             else [c for c in old if c["id"].startswith("torchtitan_")])
    mlm = mlm_peak_cases(args.mlm) if args.mlm.exists() else [c for c in old if c["id"].startswith("mlm_functional_")]
    sweeps = (primus_sweep_cases(args.primus) if args.primus.exists()
              else [c for c in old if c["id"].startswith("primus_sweep_")])
    cases += titan + mlm + sweeps
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SystemExit(f"duplicate case ids: {sorted(dup)}")
    doc = {"generated_by": "scripts/validation/build_memory_cases.py",
           "outcomes": {"oom": "reported out of memory: the projection must say 'does not fit'",
                        "oom_borderline": "reported to OOM in part of its runs: 'tight' or 'does not fit'",
                        "ran": "reported to run: 'fits' or 'tight'"},
           "cases": cases}
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, OUT)
    n = {k: sum(c["outcome"] == k for c in cases) for k in ("oom", "oom_borderline", "ran")}
    print(f"{len(cases)} cases ({n}) -> {OUT}; torchtitan peaks {len(titan)}, Megatron-LM functional tests {len(mlm)}, "
          f"Primus sweeps {len(sweeps)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
