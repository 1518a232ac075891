"""Megatron-LM arguments the plan models: their flags, defaults, and the mapping to/from a Plan.

Flag names, destinations and defaults are those of Megatron-LM ``megatron/training/arguments.py``
(``_add_network_size_args``, ``_add_training_args``, ``_add_distributed_args``, ``_add_moe_args``,
``_add_mla_args``, ``_add_mixed_precision_args``, ``_add_tokenizer_args``); derived values follow
its ``validate_args`` (ffn = 4*hidden, or int(8*hidden/3/64)*64 with ``--swiglu``; kv_channels =
hidden/heads; ``--bf16`` accumulates and reduces grads in fp32 unless ``--grad-reduce-in-bf16``;
``--add-qkv-bias`` follows ``add_bias_linear``; sequence parallel is switched off when TP=1; VPP
from ``--num-layers-per-virtual-pipeline-stage`` = (layers/PP)/n).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

import primus_launch.adapters.pai_patch as pai_patch
from primus_launch.adapters.megatron_flags import FALSE_WORDS, TRUE_WORDS
from primus_launch.errors import UserError
from primus_launch.plan.legality import torch_fsdp2_problems
from primus_launch.plan.sections import LIMITS
from primus_launch.plan import (Cluster, ModelArch, Offload, Parallelism, Plan, PlanError, Recompute, Source, Training,
                                UnmodelledFlag)


@dataclass(frozen=True)
class Flag:
    """One Megatron argument: ``kind`` is int | str | true (store_true) | false (store_false)."""

    flag: str
    dest: str
    kind: str
    default: Any = None
    group: str = ""


#: what the vocabulary refusal asks for: a Megatron-LM argument of the recipe (primus-launch has no such
#: option); readers of other formats name their own key (primus_yaml: ``vocab_size`` under the module's overrides)
ADD_VOCAB_SIZE = "add --vocab-size N to the recipe's Megatron arguments"


def _f(flag: str, kind: str = "int", default: Any = None, group: str = "", dest: str | None = None) -> Flag:
    d = dest or flag.lstrip("-").replace("-", "_")
    if kind in ("true", "false") and default is None:
        default = kind == "false"
    return Flag(flag, d, kind, default, group)


FLAGS: tuple[Flag, ...] = (
    # network size
    _f("--num-layers", group="model"),
    _f("--hidden-size", group="model"),
    _f("--ffn-hidden-size", group="model"),
    _f("--num-attention-heads", group="model"),
    _f("--group-query-attention", "true", group="model"),
    _f("--num-query-groups", default=1, group="model"),
    _f("--kv-channels", group="model"),
    _f("--max-position-embeddings", group="model"),
    _f("--position-embedding-type", "str", "learned_absolute", group="model"),
    _f("--use-rotary-position-embeddings", "true", group="model"),
    _f("--make-vocab-size-divisible-by", default=128, group="model"),
    _f("--normalization", "str", "LayerNorm", group="model"),
    _f("--swiglu", "true", group="model"),
    _f("--untie-embeddings-and-output-weights", "true", group="model"),
    _f("--disable-bias-linear", "false", group="model", dest="add_bias_linear"),
    _f("--add-qkv-bias", "true", group="model"),
    _f("--add-qkv-bias-linear", "true", group="model"),  # ROCm/Megatron-LM forks' spelling (megatron_flags FORK_ONLY)
    _f("--qk-layernorm", "true", group="model"),
    _f("--multi-latent-attention", "true", group="mla"),
    _f("--q-lora-rank", group="mla"),
    _f("--kv-lora-rank", default=32, group="mla"),
    _f("--qk-head-dim", default=128, group="mla"),
    _f("--qk-pos-emb-head-dim", default=64, group="mla"),
    _f("--v-head-dim", default=128, group="mla"),
    # data / tokenizer
    _f("--seq-length", group="model"),
    _f("--vocab-size", group="tokenizer"),
    _f("--padded-vocab-size", group="tokenizer"),
    _f("--tokenizer-type", "str", group="tokenizer"),
    _f("--tokenizer-model", "str", group="tokenizer"),
    # MoE
    _f("--num-experts", group="moe"),
    _f("--moe-router-topk", default=2, group="moe"),
    _f("--moe-ffn-hidden-size", group="moe"),
    _f("--moe-shared-expert-intermediate-size", group="moe"),
    _f("--moe-layer-freq", "str", "1", group="moe"),
    _f("--moe-router-enable-expert-bias", "true", group="moe"),
    _f("--moe-router-num-groups", group="moe"),
    _f("--moe-router-group-topk", group="moe"),
    _f("--moe-token-dispatcher-type", "str", "allgather", group="moe"),
    _f("--moe-enable-deepep", "true", group="moe"),
    _f("--moe-flex-dispatcher-backend", "str", group="moe"),
    _f("--moe-grouped-gemm", "true", group="moe"),
    _f("--moe-permute-fusion", "true", group="moe"),
    _f("--moe-flex-dispatcher-num-sms", group="moe"),
    _f("--moe-deepep-num-sms", group="moe"),
    _f("--moe-hybridep-num-sms", group="moe"),
    _f("--moe-use-legacy-grouped-gemm", "true", group="moe"),
    _f("--moe-router-force-load-balancing", "true", group="moe"),
    _f("--moe-router-fusion", "true", group="moe"),
    _f("--moe-router-padding-for-quantization", "true", group="moe"),
    _f("--moe-router-padding-for-fp8", "true", group="moe"),
    _f("--moe-router-load-balancing-type", "list", ["aux_loss"], group="moe"),
    _f("--moe-router-dtype", "str", group="moe"),
    _f("--overlap-moe-expert-parallel-comm", "true", group="moe"),
    _f("--delay-wgrad-compute", "true", group="moe"),
    _f("--defer-embedding-wgrad-compute", "true", group="parallel"),
    _f("--wgrad-deferral-limit", default=0, group="parallel"),
    _f("--moe-shared-expert-overlap", "true", group="moe"),
    _f("--moe-expert-rank-capacity-factor", "float", group="moe"),
    _f("--moe-expert-capacity-factor", "float", group="moe"),
    _f("--moe-pad-expert-input-to-capacity", "true", group="moe"),
    _f("--moe-paged-stash", "true", group="moe"),
    _f("--moe-paged-stash-buffer-size-factor-cuda", "float", 1.10, group="moe"),
    _f("--use-transformer-engine-op-fuser", "true", group="moe"),
    _f("--moe-layer-recompute", "true", group="recompute"),
    _f("--mtp-num-layers", group="moe"),
    _f("--mtp-hybrid-override-pattern", "str", group="model"),
    _f("--moe-latent-size", group="moe"),
    _f("--use-fused-weighted-squared-relu", "true", group="moe"),
    # hybrid Mamba-2 / attention stacks (megatron-core ssm/, pretrain_mamba.py)
    _f("--hybrid-override-pattern", "str", group="model"),
    _f("--hybrid-layer-pattern", "str", group="model"),
    _f("--hybrid-attention-ratio", "float", 0.0, group="model"),
    _f("--hybrid-mlp-ratio", "float", 0.0, group="model"),
    _f("--is-hybrid-model", "true", group="model"),
    _f("--mamba-state-dim", default=128, group="model"),
    _f("--mamba-head-dim", default=64, group="model"),
    _f("--mamba-num-groups", default=8, group="model"),
    _f("--mamba-num-heads", group="model"),
    # architecture variants
    _f("--quick-geglu", "true", group="model"),
    _f("--activation-func-clamp-value", "float", group="model"),
    _f("--squared-relu", "true", group="model"),
    _f("--openai-gelu", "true", group="model"),
    _f("--no-position-embedding", "false", group="model", dest="add_position_embedding"),
    _f("--softmax-type", "str", "vanilla", group="model"),
    _f("--window-size", "str", group="model"),
    _f("--window-attn-skip-freq", "str", group="model"),
    _f("--attention-dropout", "float", 0.1, group="model"),
    _f("--hidden-dropout", "float", 0.1, group="model"),
    _f("--vocab-file", "str", group="tokenizer"),
    _f("--encoder-seq-length", group="model"),
    # parallelism
    _f("--tensor-model-parallel-size", default=1, group="parallel"),
    _f("--pipeline-model-parallel-size", default=1, group="parallel"),
    _f("--num-layers-per-virtual-pipeline-stage", group="parallel"),
    _f("--num-virtual-stages-per-pipeline-rank", group="parallel"),
    _f("--virtual-pipeline-model-parallel-size", group="parallel"),  # YAML (TransformerConfig) name
    _f("--microbatch-group-size-per-virtual-pipeline-stage", group="parallel", dest="microbatch_group_size_per_vp_stage"),
    _f("--decoder-first-pipeline-num-layers", group="parallel"),
    _f("--decoder-last-pipeline-num-layers", group="parallel"),
    _f("--pipeline-model-parallel-layout", "str", group="parallel"),
    _f("--account-for-embedding-in-pipeline-split", "true", group="parallel"),
    _f("--account-for-loss-in-pipeline-split", "true", group="parallel"),
    _f("--context-parallel-size", default=1, group="parallel"),
    _f("--cp-comm-type", "list", ["p2p"], group="parallel"),
    _f("--expert-model-parallel-size", default=1, group="parallel"),
    _f("--expert-tensor-parallel-size", group="parallel"),
    _f("--sequence-parallel", "true", group="parallel"),
    _f("--tp-comm-overlap", "true", group="parallel"),
    _f("--tp-comm-overlap-cfg", "str", group="parallel"),
    _f("--no-async-tensor-model-parallel-allreduce", "false", group="parallel",
       dest="async_tensor_model_parallel_allreduce"),
    _f("--use-distributed-optimizer", "true", group="ddp"),
    _f("--num-distributed-optimizer-instances", default=1, group="ddp"),
    _f("--use-torch-fsdp2", "true", group="ddp"),
    _f("--use-megatron-fsdp", "true", group="ddp"),
    _f("--use-custom-fsdp", "true", group="ddp"),  # its spelling before af28b5a (2025-08-21): _custom_fsdp
    _f("--data-parallel-sharding-strategy", "str", "no_shard", group="ddp"),
    _f("--torch-fsdp2-no-reshard-after-forward", "false", group="ddp", dest="torch_fsdp2_reshard_after_forward"),
    _f("--no-gradient-accumulation-fusion", "false", group="ddp", dest="gradient_accumulation_fusion"),
    _f("--ckpt-format", "str", "torch_dist", group="checkpoint"),
    _f("--overlap-grad-reduce", "true", group="ddp"),
    _f("--ddp-bucket-size", group="ddp"),
    _f("--ddp-num-buckets", group="ddp"),
    _f("--overlap-param-gather", "true", group="ddp"),
    _f("--no-align-grad-reduce", "false", group="ddp", dest="align_grad_reduce"),
    _f("--no-align-param-gather", "false", group="ddp", dest="align_param_gather"),
    # training
    _f("--micro-batch-size", group="batch"),
    _f("--global-batch-size", group="batch"),
    _f("--rampup-batch-size", "list", group="batch"),
    _f("--step-batch-size-schedule", "str", group="batch"),
    _f("--train-iters", group="batch"),
    _f("--optimizer", "str", "adam", group="optim"),
    # Muon (--optimizer muon / dist_muon): defaults of core_r0.16.0 / core_v0.17 (Megatron-LM main later made
    # --muon-tp-mode duplicated the default); --muon-scalar-optimizer is main-only (--muon-use-syrk, main-only, is
    # reported by the flag table as not modelled)
    _f("--muon-num-ns-steps", "int", 5, group="optim"),
    _f("--muon-tp-mode", "str", "blockwise", group="optim"),
    _f("--muon-fp32-matmul-prec", "str", "medium", group="optim"),
    _f("--muon-no-split-qkv", "false", group="optim", dest="muon_split_qkv"),
    _f("--muon-scalar-optimizer", "str", "adam", group="optim"),
    _f("--log-params-norm", "true", group="optim"),
    _f("--log-num-zeros-in-grad", "true", group="optim"),
    # per-iteration passes outside the micro-batches (cost/step_extras.py, cost/manual_gc.py)
    _f("--manual-gc", "true", group="optim"),
    _f("--manual-gc-interval", "int", 0, group="optim"),
    _f("--clip-grad", "float", 1.0, group="optim"),
    _f("--no-check-for-nan-in-loss-and-grad", "false", group="optim", dest="check_for_nan_in_loss_and_grad"),
    _f("--ddp-average-in-collective", "true", group="optim"),
    _f("--calculate-per-token-loss", "true", group="optim"),
    _f("--optimizer-cpu-offload", "true", group="optim"),
    _f("--optimizer-offload-fraction", "float", 1.0, group="optim"),
    # Megatron-LM dev (9050d4c5fb): GPU optimizer step over chunks of host-resident state
    _f("--chunked-optimizer-state-offload", "true", group="optim"),
    _f("--offload-optimizer-states", "true", group="optim"),
    _f("--optimizer-state-offload-fraction", "float", 1.0, group="optim"),
    _f("--optimizer-state-offload-chunk-size-mb", "int", 0, group="optim"),
    _f("--use-precision-aware-optimizer", "true", group="optim"),
    _f("--main-grads-dtype", "str", "fp32", group="optim"),
    _f("--main-params-dtype", "str", "fp32", group="optim"),
    _f("--exp-avg-dtype", "str", "fp32", group="optim"),
    _f("--exp-avg-sq-dtype", "str", "fp32", group="optim"),
    _f("--recompute-activations", "true", group="recompute"),
    _f("--checkpoint-activations", "true", group="recompute"),
    _f("--recompute-granularity", "str", group="recompute"),
    _f("--recompute-method", "str", group="recompute"),
    _f("--recompute-num-layers", group="recompute"),
    _f("--recompute-modules", "list", group="recompute"),
    _f("--cpu-offloading-num-layers", default=0, group="recompute"),
    _f("--cpu-offloading", "true", group="recompute"),
    _f("--cpu-offloading-weights", "true", group="recompute"),
    _f("--cpu-offloading-activations", "true", True, group="recompute"),
    _f("--fine-grained-activation-offloading", "true", group="recompute"),
    _f("--offload-modules", "list", group="recompute"),
    # kernels
    _f("--attention-backend", "str", "auto", group="kernels"),
    _f("--transformer-impl", "str", "transformer_engine", group="kernels"),
    _f("--cross-entropy-loss-fusion", "true", group="kernels"),
    _f("--cross-entropy-fusion-impl", "str", "native", group="kernels"),
    _f("--no-rope-fusion", "false", group="kernels", dest="apply_rope_fusion"),
    _f("--no-create-attention-mask-in-dataloader", "false", group="data",
       dest="create_attention_mask_in_dataloader"),
    _f("--cuda-graph-impl", "str", "none", group="kernels"),
    _f("--cuda-graph-scope", "list", group="kernels"),
    _f("--cuda-graph-modules", "list", group="kernels"),
    _f("--enable-cuda-graph", "true", group="kernels"),
    _f("--external-cuda-graph", "true", group="kernels"),
    _f("--cuda-graph-warmup-steps", "int", 3, group="kernels"),
    # mixed precision
    _f("--bf16", "true", group="precision"),
    _f("--fp16", "true", group="precision"),
    _f("--fp8-format", "str", group="precision", dest="fp8"),
    _f("--fp8-recipe", "str", "delayed", group="precision"),
    _f("--fp8-param-gather", "true", group="precision"),
    _f("--fp8-dot-product-attention", "true", group="precision"),  # TransformerConfig field (YAML / Bridge)
    _f("--fp4-format", "str", group="precision", dest="fp4"),
    _f("--fp4-recipe", "str", "nvfp4", group="precision"),
    _f("--fp4-param-gather", "true", group="precision", dest="fp4_param"),
    _f("--first-last-layers-bf16", "true", group="precision"),
    _f("--num-layers-at-start-in-bf16", "int", 1, group="precision"),
    _f("--num-layers-at-end-in-bf16", "int", 1, group="precision"),
    _f("--grad-reduce-in-bf16", "true", group="precision"),
    _f("--accumulate-allreduce-grads-in-fp32", "true", group="precision"),
)
BY_FLAG: dict[str, Flag] = {f.flag: f for f in FLAGS}
BY_DEST: dict[str, Flag] = {f.dest: f for f in FLAGS}
# TransformerConfig-style names found in Megatron's experimental YAML (examples/gpt3/gpt_config.yaml)
YAML_ALIASES = {"num_moe_experts": "num_experts"}
# --fp8-recipe values the plan names (others, e.g. "custom", are reported and priced as the default)
FP8_RECIPES_READ = ("delayed", "tensorwise", "blockwise", "mxfp8")

# plan field -> the flag that sets it, for error messages
FIELD_FLAGS = {
    "parallel.tp": "--tensor-model-parallel-size", "parallel.pp": "--pipeline-model-parallel-size",
    "parallel.vpp": "--num-layers-per-virtual-pipeline-stage", "parallel.cp": "--context-parallel-size",
    "parallel.ep": "--expert-model-parallel-size", "parallel.etp": "--expert-tensor-parallel-size",
    "parallel.sequence_parallel": "--sequence-parallel",
    "parallel.pipeline_layers_first_stage": "--decoder-first-pipeline-num-layers",
    "parallel.pipeline_layers_last_stage": "--decoder-last-pipeline-num-layers",
    "parallel.pipeline_layout": "--pipeline-model-parallel-layout",
    "parallel.microbatch_group": "--microbatch-group-size-per-virtual-pipeline-stage",
    "parallel.account_for_embedding_in_pipeline_split": "--account-for-embedding-in-pipeline-split",
    "parallel.cp_comm_type": "--cp-comm-type", "training.attention_backend": "--attention-backend",
    "parallel.dp_replicate": "--num-distributed-optimizer-instances",
    "parallel": "--tensor-model-parallel-size x --context-parallel-size x --pipeline-model-parallel-size",
    "training.global_batch_size": "--global-batch-size", "training.micro_batch_size": "--micro-batch-size",
    "training.recompute.num_layers": "--recompute-num-layers",
    "training.recompute.modules": "--recompute-modules",
    "training.pipeline_schedule": "--num-layers-per-virtual-pipeline-stage",
    "training.overlap_moe_expert_parallel_comm": "--overlap-moe-expert-parallel-comm",
    "training.delay_wgrad_compute": "--delay-wgrad-compute",
    "training.cuda_graph_scope": "--cuda-graph-scope", "training.cuda_graph_warmup_steps": "--cuda-graph-warmup-steps",
    "training.offload.activation_layers": "--cpu-offloading-num-layers",
    "training.offload.activation_modules": "--offload-modules",
    "model.moe_router_topk": "--moe-router-topk", "model.moe_layer_pattern": "--moe-layer-freq",
    "model.window_layer_pattern": "--window-attn-skip-freq",
    "model.hybrid_pattern": "--hybrid-override-pattern", "model.mamba_num_groups": "--mamba-num-groups",
    "model.mamba_head_dim": "--mamba-head-dim",
}

GPT2_BPE_VOCAB = 50257  # GPT2BPETokenizer: gpt2-vocab.json, 50257 entries

# The training program names a model family (Megatron-LM's entry points); GPT-family programs are read.
FAMILY_PROGRAMS: dict[str, str] = {
    "pretrain_bert.py": "BERT", "pretrain_t5.py": "T5 (encoder-decoder)", "pretrain_vlm.py": "multimodal (VLM)",
    "pretrain_retro.py": "RETRO", "pretrain_ict.py": "biencoder (ICT)", "pretrain_vision_classify.py": "vision",
    "pretrain_vision_dino.py": "vision", "pretrain_vision_inpaint.py": "vision", "train_rl.py": "RL loop",
    "pretrain_mimo.py": "multimodal (MIMO)", "train.py": "", "finetune.py": "",
}


_TOOL_PROGRAM = re.compile(r"(generat|server|convert|export|quantiz|prune|mmlu|eval|inference|checkpoint|"
                           r"preprocess|validate|feature_extract|eagle|distill|merge)", re.I)


#: Megatron-LM's entry points of hybrid Mamba / attention stacks (megatron-core MambaModel / HybridModel): read as
#: hybrid (``--is-hybrid-model`` implied; without a pattern megatron-core allocates one from the ratios, 0 / 0 = every
#: layer Mamba)
HYBRID_PROGRAMS = ("pretrain_mamba.py", "pretrain_hybrid.py")


def is_hybrid_program(program: str | None) -> bool:
    """Whether ``program`` is one of :data:`HYBRID_PROGRAMS` (its base name)."""
    return bool(program) and program.rsplit("/", 1)[-1] in HYBRID_PROGRAMS


def allocate_hybrid(num_layers: int, attention_ratio: float, mlp_ratio: float) -> str:
    """megatron-core 0.16.1 ``ssm/mamba_hybrid_layer_allocation.py`` ``_allocate_auto``, restated: attention layers
    (``round(L x ratio)``) spread evenly between Mamba sections that start and end the stack, then MLP layers
    (``round(L x ratio)``) spread evenly over the remaining Mamba layers, right-justified."""
    kinds = ["M"] * num_layers
    n_attn = round(num_layers * attention_ratio)
    n_mamba = num_layers - n_attn
    section = n_mamba / (n_attn + 1)
    x = section
    for i in range(num_layers):
        if x < 0.5:
            kinds[i] = "*"
            x += section
        else:
            x -= 1
    n_mlp = round(num_layers * mlp_ratio)
    if n_mlp > 0:
        ratio = (n_mamba - n_mlp) / n_mlp
        x = ratio
        for i in range(num_layers):
            if kinds[i] == "M":
                if x < 0.5:
                    kinds[i] = "-"
                    x += ratio
                else:
                    x -= 1
    return "".join(kinds)


def hybrid_pattern(a: dict[str, Any], num_layers: int | None) -> str | None:
    """The hybrid stack's layer symbols of Megatron arguments ``a`` (``--hybrid-override-pattern`` or main's
    ``--hybrid-layer-pattern``; else, with ``--is-hybrid-model``, :func:`allocate_hybrid` of the ratios), or None for a
    GPT stack.  A pattern with pipeline ('|') separators is refused (not modelled); its MTP part ('/<mtp>', read by
    :func:`hybrid_mtp`) is cut off."""
    for dest in ("hybrid_override_pattern", "hybrid_layer_pattern"):
        pat = a.get(dest)
        if pat in (None, "", "None"):
            continue
        return str(pat).strip().strip("'\"").split("/")[0].replace("|", "")
    if a.get("is_hybrid_model") or a.get("hybrid_attention_ratio") or a.get("hybrid_mlp_ratio"):
        if num_layers is None:
            raise PlanError("--num-layers", None, "required for a hybrid model without a layer pattern")
        return allocate_hybrid(num_layers, float(get(a, "hybrid_attention_ratio")), float(get(a, "hybrid_mlp_ratio")))
    return None


# layer symbols of megatron-core hybrid stacks that select an attention / mixer the projection does not model
# (``models/hybrid/hybrid_layer_allocation.py`` ``Symbols``: main d98e8a6 G, D, + ; branch dsv4 (2026-05-13)
# G, D, C, H)
HYBRID_FAMILIES = {"G": "Gated DeltaNet", "D": "DeepSeek sparse attention", "C": "compressed sparse attention (CSA, "
                   "DeepSeek-V4)", "H": "heavily compressed attention (HCA, DeepSeek-V4)", "+": "multi-latent attention"}


def _hybrid_family(a: dict[str, Any], hyb: str | None) -> None:
    """Refuse, by name, a hybrid pattern with layers of a kind the projection does not model (:data:`HYBRID_FAMILIES`);
    other symbols are left to the plan's own check."""
    if hyb is None:
        return
    kinds = [f"{ch} ({HYBRID_FAMILIES[ch]})" for ch in dict.fromkeys(hyb) if ch in HYBRID_FAMILIES]
    if kinds:
        flag = next((BY_DEST[d].flag for d in ("hybrid_override_pattern", "hybrid_layer_pattern") if a.get(d)),
                    "--hybrid-override-pattern")
        raise PlanError(flag, hyb, "hybrid layers of " + ", ".join(kinds) + ": not modelled by the projection "
                        "(Mamba M, attention *, MLP -, MoE E only)")


def hybrid_segments(a: dict[str, Any]) -> tuple[str, list[int]] | None:
    """(flag, layers per segment) of a hybrid pattern with pipeline-stage ('|') separators, else None."""
    for dest in ("hybrid_override_pattern", "hybrid_layer_pattern"):
        pat = a.get(dest)
        if pat in (None, "", "None"):
            continue
        main = str(pat).strip().strip("'\"").split("/")[0]
        return (BY_DEST[dest].flag, [len(x) for x in main.split("|")]) if "|" in main else None
    return None


def _hybrid_pipeline(a: dict[str, Any], pp: int, vpp: int, rep: "_Report") -> int:
    """The virtual stages of a hybrid pattern with '|' separators (Megatron-LM main, d98e8a64dd ``arguments.py``
    validate_args: segments divisible by PP, ``virtual_pipeline_model_parallel_size = segments // pp`` when more;
    no --decoder-first/last-pipeline-num-layers, --num-layers-per-virtual-pipeline-stage,
    --num-virtual-stages-per-pipeline-rank, --pipeline-model-parallel-layout or --account-for-* with them;
    megatron-core ``hybrid_layer_allocation.py`` ``select_pipeline_segment``: segment ``vp * pp + pp_rank`` on each
    chunk).  Equal segments are the plan's even split; uneven ones are refused (not modelled).  ``vpp`` otherwise."""
    seg = hybrid_segments(a)
    if seg is None:
        return vpp
    flag, lens = seg
    pat = a.get("hybrid_layer_pattern") or a.get("hybrid_override_pattern")
    for dest in ("decoder_first_pipeline_num_layers", "decoder_last_pipeline_num_layers",
                 "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                 "pipeline_model_parallel_layout", "account_for_embedding_in_pipeline_split",
                 "account_for_loss_in_pipeline_split"):
        if a.get(dest) not in (None, False):
            raise PlanError(BY_DEST[dest].flag if dest in BY_DEST else dest, a[dest],
                            f"not with '|' separators in {flag} (Megatron asserts: the pattern's segments are the "
                            "pipeline layout)")
    if pp == 1:  # segments > PP set virtual stages, and the interleaved schedule asserts PP > 1
        raise PlanError(flag, pat, "'|' segments only with --pipeline-model-parallel-size > 1 (Megatron asserts: "
                                   "they set virtual pipeline stages, which need PP > 1)")
    if len(lens) % pp:
        raise PlanError(flag, pat, f"{len(lens)} '|' segments must divide by --pipeline-model-parallel-size={pp} "
                                   "(Megatron asserts)")
    if len(set(lens)) > 1:
        raise PlanError(flag, pat, f"uneven '|' segments ({', '.join(map(str, lens))} layers) are not modelled: the "
                                   "projection splits the layers evenly; give equal segments")
    out = len(lens) // pp if len(lens) > pp else 1
    rep.note(f"{flag}: {len(lens)} '|' segments of {lens[0]} layers on PP {pp}: "
             f"{out} virtual stage(s) per rank (Megatron-LM main derives VPP from the segments)")
    return out


def hybrid_mtp(a: dict[str, Any]) -> tuple[str | None, int | None]:
    """(one MTP depth's layer symbols, depths) of Megatron arguments ``a``: main's unified pattern
    ``<main>/<mtp>/<mtp>`` (megatron-core ``models/hybrid/hybrid_layer_allocation.py`` ``parse_hybrid_pattern``:
    every depth the same pattern, the depth count the MTP layers) or the legacy ``--mtp-hybrid-override-pattern``
    (one depth, ``--mtp-num-layers`` of them; Megatron-LM ``arguments.py`` converts it to the unified form);
    (None, None) without either."""
    for dest in ("hybrid_override_pattern", "hybrid_layer_pattern"):
        pat = a.get(dest)
        if pat in (None, "", "None"):
            continue
        parts = str(pat).strip().strip("'\"").split("/")
        if len(parts) > 1:
            depths = parts[1:]
            if len(set(depths)) != 1 or not depths[0]:
                raise PlanError(BY_DEST[dest].flag, pat, "every MTP depth after '/' the same non-empty pattern "
                                "(megatron-core parse_hybrid_pattern)")
            return depths[0], len(depths)
    legacy = a.get("mtp_hybrid_override_pattern")
    if legacy not in (None, "", "None"):
        return str(legacy).strip().strip("'\""), None
    return None, None




def program_family(program: str | None) -> str | None:
    """The model family a Megatron-LM entry point trains when it is not a GPT-family decoder, else None
    (``"tool: ..."`` for programs that do not train: generation servers, converters, quantizers)."""
    if not program:
        return None
    base = program.rsplit("/", 1)[-1]
    if not base.endswith(".py") and re.fullmatch(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)+", base):
        base = base.rsplit(".", 1)[-1] + ".py"  # `python -m examples.inference.offline_inference`: its module
    if base.endswith(".py") and _TOOL_PROGRAM.search(base) and not base.startswith("pretrain"):
        return f"tool: {base} is not a training program (inference, conversion or evaluation)"
    fam = FAMILY_PROGRAMS.get(base)
    if fam:
        return fam
    low = program.lower()
    for key, fam in (("llava", "multimodal (LLaVA)"),
                     ("multimodal", "multimodal"), ("mimo", "multimodal (MIMO)"), ("vlm", "multimodal (VLM)"),
                     ("bert", "BERT"), ("t5", "T5 (encoder-decoder)"), ("retro", "RETRO")):
        if re.search(rf"(^|[/_\-.]){key}([/_\-.]|$)", low):
            return fam
    return None


#: Pai-Megatron-Patch's tokenizer arguments (``megatron_patch/arguments.py``), as a script or a YAML spells them:
#: read for the vocabulary only (:func:`megatron_vocab.pai_vocab`)
PAI_VOCAB_KEYS = (("--patch-tokenizer-type", "patch_tokenizer_type"), ("--extra-vocab-size", "extra_vocab_size"))


def tokenizer_vocab(tokenizer_model: str | None, tokenizer_type: str | None,
                    vocab_file: str | None = None) -> tuple[int, str] | None:
    """(vocabulary size, source) of the recipe's tokenizer: a local file when the path exists, the
    GPT-2 BPE vocabulary, or the table of public tokenizers (:mod:`megatron_vocab`); None if unknown."""
    from primus_launch.adapters.megatron_vocab import FORK_TOKENIZER_FIXED, local_vocab, table_vocab

    for path in (tokenizer_model, vocab_file):
        hit = local_vocab(path)
        if hit:
            return hit
    if tokenizer_type == "GPT2BPETokenizer":
        return GPT2_BPE_VOCAB, "GPT2BPETokenizer (gpt2-vocab.json, 50257 entries)"
    if tokenizer_type in FORK_TOKENIZER_FIXED:
        return FORK_TOKENIZER_FIXED[tokenizer_type]
    if tokenizer_type == "TikTokenizer":  # without --vocab-size: DEFAULT_TIKTOKEN_MAX_VOCAB
        return 2**17, "TikTokenizer default vocabulary 2**17 (megatron/core/tokenizers/text/libraries/tiktoken_tokenizer.py)"
    if tokenizer_type in (None, "") and vocab_file and str(vocab_file).endswith("vocab.json"):
        return GPT2_BPE_VOCAB, (f"assumed GPT-2 BPE (50257 entries): --vocab-file {vocab_file} (vocab.json + merges) "
                                "is not on this machine")
    return table_vocab(tokenizer_model) or table_vocab(vocab_file)


#: store_false dests (default true) whose YAML ``null`` reaches Megatron-LM as None -- Primus's
#: ``MegatronArgBuilder.update`` ("None values are allowed and will override Megatron defaults") and the
#: ``--yaml-cfg`` namespace (``yaml_arguments.py`` ``load_yaml``) -- which ``training.py`` reads as false
#: (``if args.align_grad_reduce:`` / ``if args.overlap_param_gather and args.align_param_gather:``, core_r0.16.0)
NULL_MEANS_FALSE = ("align_grad_reduce", "align_param_gather")


# --------------------------------------------------------------------------- value conversion
# str-typed flags whose value may be a YAML list: Megatron parses them with tuple_type (window size)
# or moe_freq_type (per-layer 0/1 list) - megatron/training/arguments.py
_LIST_VALUED = {"window_size": "tuple", "moe_layer_freq": "pattern", "window_attn_skip_freq": "pattern"}


def convert(flag: Flag, raw: Any) -> Any:
    """A Megatron value from a command-line string, a YAML scalar, or a list (nargs '+' flags)."""
    if raw is None:
        return None
    if flag.kind == "list":
        if isinstance(raw, (list, tuple)):
            return [str(x) for x in raw]
        txt = str(raw).strip().strip("[]")
        return [x.strip("'\"") for x in re.split(r"[,\s]+", txt) if x.strip("'\"")]
    if isinstance(raw, (list, tuple)) and flag.dest in _LIST_VALUED and not any(isinstance(x, str) for x in raw):
        # a YAML list given to a tuple / per-layer-pattern flag (Primus passes it to Megatron as is):
        # the text Megatron's own parser accepts (tuple_type "128,0"; moe_freq_type "[1, 0, 1]")
        return ",".join(map(str, raw)) if _LIST_VALUED[flag.dest] == "tuple" else "[" + ", ".join(map(str, raw)) + "]"
    if isinstance(raw, dict) or (isinstance(raw, (list, tuple)) and flag.kind in ("int", "float", "true", "false")):
        # a YAML list or mapping where one value belongs (`num_layers: [32]`): Megatron would not take it
        raise PlanError(flag.flag, raw, "a single value, not a mapping" if isinstance(raw, dict) else
                        "an integer" if flag.kind == "int" else "a number" if flag.kind == "float" else "true or false")
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if len(raw) == 1 else " ".join(str(x) for x in raw)
    if flag.kind in ("true", "false"):
        if isinstance(raw, bool):
            return raw
        txt = str(raw).strip().lower()
        if txt in TRUE_WORDS:
            return True
        if txt in FALSE_WORDS:
            return False
        raise PlanError(flag.flag, raw, "a boolean")
    if flag.kind in ("int", "float"):
        if isinstance(raw, bool):
            raise PlanError(flag.flag, raw, 'an integer' if flag.kind == 'int' else 'a number')
        if isinstance(raw, (int, float)) and not (flag.kind == "int" and isinstance(raw, float)):
            return raw
        txt = str(raw).strip().strip("'\"")
        if txt.lower() in ("null", "none"):
            return None
        try:
            return int(txt) if flag.kind == "int" else float(txt)
        except ValueError:
            raise PlanError(flag.flag, str(raw), "an integer" if flag.kind == "int" else "a number") from None
    txt = str(raw)
    # "none" is a value of its own for these (Megatron-LM choices; --position-embedding-type none: no position
    # embedding, e.g. Nemotron-H), not an unset field
    keep = ("recompute_granularity", "position_embedding_type")
    return None if txt.lower() in ("null", "none") and flag.dest not in keep else txt


def layer_pattern(flag: str, value: Any, num_layers: int) -> list[int]:
    """Per-layer 0/1 of a Megatron frequency argument (``moe_freq_type``): an int N or a Python list
    expression (``([0]*3+[1]*58)``, ``[1,0]*24``).  ``--moe-layer-freq N``: layer i (0-based) is MoE
    when ``i % N == 0`` (megatron/core/models/gpt/gpt_layer_specs.py); ``--window-attn-skip-freq N``:
    layer i is windowed when ``(i+1) % N != 0`` (megatron/core/transformer/utils.py
    ``is_layer_window_attention``)."""
    txt = str(value).strip().strip("'\"")
    if "[" not in txt:
        try:
            n = int(txt)
        except ValueError:
            raise PlanError(flag, txt, "an integer N or a list pattern such as ([0]*3+[1]*58)") from None
        if n <= 0:
            raise PlanError(flag, txt, "a positive integer")
        if flag == "--moe-layer-freq":
            return [1 if i % n == 0 else 0 for i in range(num_layers)]
        return [1 if (i + 1) % n != 0 else 0 for i in range(num_layers)]
    if re.search(r"[^,\d\[\]\(\)\+\*\s]", txt):
        raise PlanError(flag, txt, "a list pattern of 0/1 with + and * (e.g. ([0]*3+[1]*58))")
    pattern = _eval_list_pattern(txt, flag)
    if len(pattern) != num_layers:
        raise PlanError(flag, txt, f"pattern length {len(pattern)} must equal --num-layers={num_layers}")
    if any(x not in (0, 1) for x in pattern):
        raise PlanError(flag, txt, "entries 0 or 1")
    return pattern


def moe_dense_first(freq: Any, num_layers: int) -> int:
    """Leading dense layers of a ``--moe-layer-freq`` whose pattern is dense layers then MoE layers
    (``1``, ``([0]*3+[1]*58)``); other patterns raise (use :func:`layer_pattern`)."""
    pat = layer_pattern("--moe-layer-freq", freq, num_layers)
    k = 0
    while k < len(pat) and pat[k] == 0:
        k += 1
    if any(x != 1 for x in pat[k:]):
        raise PlanError("--moe-layer-freq", freq, "leading dense layers then MoE layers")
    return k


#: the longest layer pattern a list expression may build (no model has more layers)
_MAX_PATTERN = 100_000


def _eval_list_pattern(txt: str, flag: str = "--moe-layer-freq") -> list[int]:
    """Evaluate a list expression of ints, ``+``, ``*`` and brackets (the grammar moe_freq_type allows)."""
    import ast

    try:
        node = ast.parse(txt.replace(" ", ""), mode="eval").body
    except SyntaxError:
        raise PlanError(flag, txt, "a list pattern of 0/1 with + and *") from None

    allowed = f"a list pattern of 0/1 with + and * (at most {_MAX_PATTERN:,} layers)"

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, (ast.List, ast.Tuple)):
            out = [ev(e) for e in n.elts]
            if any(type(x) is not int for x in out):   # a nested list is not a layer
                raise PlanError(flag, txt, allowed)
            return out
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Mult)):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.Add):
                if type(a) is not type(b):   # a list plus a number
                    raise PlanError(flag, txt, allowed)
            elif isinstance(a, list) == isinstance(b, list):   # list * list, or a product of numbers
                if isinstance(a, list) or abs(a * b) > _MAX_PATTERN:
                    raise PlanError(flag, txt, allowed)
            elif (len(a) if isinstance(a, list) else len(b)) * (b if isinstance(a, list) else a) > _MAX_PATTERN:
                raise PlanError(flag, txt, allowed)   # [0]*10**12 would build the list
            out = a + b if isinstance(n.op, ast.Add) else a * b
            if isinstance(out, list) and len(out) > _MAX_PATTERN:
                raise PlanError(flag, txt, allowed)
            return out
        raise PlanError(flag, txt, allowed)

    out = ev(node)
    if not isinstance(out, list):
        raise PlanError(flag, txt, allowed)
    return out


def steady_batch(schedule: str) -> int:
    """The last (steady) global batch of ``--step-batch-size-schedule "0:384 200B:768 400B:1152"``."""
    items = [x for x in re.split(r"[\s,]+", schedule.strip().strip("'\"")) if x]
    try:
        return int(items[-1].split(":")[-1])
    except (IndexError, ValueError):
        raise PlanError("--step-batch-size-schedule", schedule, "'START:BATCH ...' pairs such as '0:384 200B:768'") from None


# --------------------------------------------------------------------------- args -> plan
SHAPE_DESTS = ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "encoder_seq_length")


def _req(a: dict[str, Any], dest: str) -> Any:
    v = a.get(dest)
    if v is None:
        raise PlanError(BY_DEST[dest].flag, None, "required (Megatron-LM has no default)")
    return v


def _ub_cfg(path: Any) -> tuple[tuple[str, str, int, bool], ...]:
    """``--tp-comm-overlap-cfg PATH``: the userbuffers YAML Megatron hands to TE's ``initialize_ub``
    as ``ub_cfgs`` (``megatron/training/initialize.py`` ``_initialize_tp_communicators``: ``yaml.safe_load``),
    merged over TE's defaults per layer name (``ub_cfg.update(ub_cfgs[name])``); kept: the method,
    ``num_sm`` and ``set_sm_margin`` of each named layer GEMM (what sets the SMs its GEMM loses,
    ``projection/cost/contention.py``).  A mapping instead of a path is that YAML's content (a
    Megatron-Bridge config's ``tp_comm_overlap_cfg``: :func:`ub_cfg_entries`)."""
    if not path:
        return ()
    if isinstance(path, dict):
        return ub_cfg_entries(path, "--tp-comm-overlap-cfg")
    from primus_launch.inputs import parse_yaml, read_text

    data = parse_yaml(read_text(str(path), "--tp-comm-overlap-cfg"), "--tp-comm-overlap-cfg", str(path)) or {}
    if not isinstance(data, dict):
        raise PlanError("--tp-comm-overlap-cfg", path, "a YAML mapping of layer names (qkv_fprop, ...) to settings")
    return ub_cfg_entries(data, "--tp-comm-overlap-cfg")


def ub_cfg_entries(data: dict, field: str) -> tuple[tuple[str, str, int, bool], ...]:
    """(layer GEMM name, method, num_sm, set_sm_margin) of a userbuffers config mapping (``ub_cfgs``: layer
    name -> its settings, over TE's defaults), sorted by name; ``field`` names it in errors."""
    from primus_launch.plan.userbuffers import UB_NAMES, ub_default

    out = []
    for name in sorted(data, key=str):
        if name not in UB_NAMES:
            raise PlanError(field, name, "one of " + ", ".join(sorted(UB_NAMES)))
        v = data[name] or {}
        if not isinstance(v, dict):
            raise PlanError(f"{field} {name}", v, "a mapping of method, num_sm, set_sm_margin")
        method, n, margin = ub_default(name)
        method = str(v.get("method", method))
        if method not in ("ring_exchange", "pipeline", "bulk", "external"):
            raise PlanError(field, f"{name}.method={method}", "ring_exchange, pipeline, bulk, external")
        n = v.get("num_sm", n)
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 100_000:
            raise PlanError(f"{field} {name}.num_sm", n, "an integer between 0 and 100000")
        out.append((name, method, n, bool(v.get("set_sm_margin", margin))))
    return tuple(out)


def _deterministic(a: dict[str, Any], rep: "_Report") -> None:
    """``--deterministic-mode``'s argument rules.  Fused cross entropy: every Megatron-LM release's ``validate_args``
    asserts it off ("Cross Entropy Fusion is currently not deterministic", core_r0.9.0 .. core_v0.18.0; main's
    ``megatron/training/determinism.py`` ``ARG_VALUES_REQUIRED_FOR_DETERMINISM`` from 3ab71eeb3e, 2026-07-08;
    Megatron-Bridge ``ConfigContainer._validate_and_apply_deterministic_mode``): refused.  TP comm overlap: only
    that determinism.py (core_r0.19.0, core_v0.19.0, main, dev) asserts it off: read as the older releases run it,
    noted (main's own functional test ``gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_sp_tp_overlap``
    sets both)."""
    if get(a, "cross_entropy_loss_fusion"):
        raise PlanError("--cross-entropy-loss-fusion", True, "off under --deterministic-mode (Megatron-LM's "
                        "validate_args asserts it: 'Cross Entropy Fusion is currently not deterministic')")
    if get(a, "tp_comm_overlap"):
        rep.note("--deterministic-mode with --tp-comm-overlap: read as Megatron-LM core_v0.18.0 and older run it; "
                 "from core_r0.19.0 / core_v0.19.0 (megatron/training/determinism.py, 3ab71eeb3e, 2026-07-08) "
                 "Megatron-LM asserts tp_comm_overlap=False under deterministic mode")


def get(a: dict[str, Any], dest: str) -> Any:
    """The value of ``dest`` or Megatron's default."""
    v = a.get(dest)
    return BY_DEST[dest].default if v is None else v


_POS = {"learned_absolute": "learned", "rope": "rope", "mrope": "rope", "yarn": "yarn", "none": "none"}
_NORM = {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}
_STATE_DTYPES = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16",
                 "float16": "fp16", "fp8": "fp8"}
_CP_COMM = ("p2p", "a2a", "allgather", "a2a+p2p")


class _Report:
    """What the reader could not express: unmodelled flags and stated guesses."""

    def __init__(self) -> None:
        self.unmodelled: list[UnmodelledFlag] = []
        self.notes: list[str] = []

    def flag(self, flag: str, value: Any, effect: str) -> None:
        from primus_launch.adapters.megatron_flags import value_text

        if not any(u.flag == flag for u in self.unmodelled):
            self.unmodelled.append(UnmodelledFlag(flag=flag, value=value_text(value), effect=effect))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def report_args(a: dict[str, Any], rep: _Report | None = None, skip: frozenset[str] = frozenset()) -> _Report:
    """Classify every argument of ``a`` that the plan does not read (:mod:`megatron_flags`): flags
    that change time or memory and are set away from Megatron's default become
    ``UnmodelledFlag``s, unknown keys a note; a flag that selects a model family the projection does
    not model raises a one-line :class:`PlanError`.  Keys in ``skip`` are not looked at."""
    from primus_launch.adapters.megatron_flags import (MODELLED, MULTIMODAL_FAMILY, MULTIMODAL_FLAGS, NOT_MODELLED,
                                                       REFUSED, abbreviation_problem, check_value, is_default, lookup)

    rep = rep or _Report()
    for key, val in a.items():
        if key in skip:
            continue
        f = lookup(key)
        if f is None and key in BY_DEST:
            continue  # a name only the experimental --yaml-cfg layout uses
        if f is not None and f.cls == MODELLED and f.dest in BY_DEST:
            continue
        if f is not None:  # a value Megatron-LM's parser would refuse (a word where a number belongs, nan, ...)
            check_value(f, val)
        if f is None:
            shown = key if key.startswith("-") else "--" + key.replace("_", "-")
            problem = abbreviation_problem(key, val) if key.startswith("--") else None
            if problem is not None:  # `--num-layer 32` on a command line: Megatron-LM exits 'unrecognized arguments'
                raise problem
            if shown in MULTIMODAL_FLAGS:  # a vision-language run: its language model alone is not the run
                raise PlanError(shown, val if val is not True else "set", f"{MULTIMODAL_FAMILY}: not modelled by the "
                                "projection (GPT-family decoders only)")
            rep.note(f"unknown Megatron-LM flag {shown}" + (f"={val}" if val not in (None, True) else "")
                     + ": not read (not in the flag table of core_r0.16.0 / main / dev)")
            continue
        if f.cls == REFUSED and not is_default(f, val):
            raise PlanError(f.flag, val if not isinstance(val, list) else " ".join(map(str, val)),
                            f"{f.note}: not modelled by the projection (GPT-family decoders only)")
        if f.cls in (NOT_MODELLED, MODELLED) and not is_default(f, val):
            shown = f.flag
            if f.kind == "false" and val is False:
                val = True  # the flag is set (its dest holds False)
            elif f.kind == "boolopt" and val is False:
                shown, val = "--no-" + f.flag[2:], True
            rep.flag(shown, val, f.note)
    return rep


def _bf16_ends(a: dict[str, Any], precision: str) -> tuple[int, int]:
    """(first, last) decoder layers kept in BF16 under FP8 / FP4: ``--num-layers-at-start-in-bf16`` /
    ``--num-layers-at-end-in-bf16`` (TransformerConfig defaults 1 / 1) when ``--first-last-layers-bf16`` is set,
    else none (megatron-core 0.16.1 ``fp8_utils.py`` ``is_first_last_bf16_layer``, ``fp4_utils.py``
    ``get_fp4_context``); a BF16 run reads neither.  FP8 with the delayed recipe raises as megatron-core's
    TransformerConfig does."""
    if not get(a, "first_last_layers_bf16") or precision not in ("fp8", "fp4"):
        return 0, 0
    start, end = get(a, "num_layers_at_start_in_bf16"), get(a, "num_layers_at_end_in_bf16")
    for dest, n in (("num_layers_at_start_in_bf16", start), ("num_layers_at_end_in_bf16", end)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise PlanError(BY_DEST[dest].flag, n, "a whole number >= 0")
    if precision == "fp8" and get(a, "fp8_recipe") == "delayed":
        raise PlanError("--first-last-layers-bf16", True, "not with --fp8-recipe delayed (megatron-core "
                        "TransformerConfig raises: 'Delayed scaling does not support first / last layer in BF16')")
    return start, end


#: Megatron-LM arguments naming a file the training run reads (the tokenizer's; the data files are prefixes)
RUN_INPUT_FILES = (("tokenizer_model", "--tokenizer-model"), ("vocab_file", "--vocab-file"),
                   ("merge_file", "--merge-file"))


def _remember_run_files(a: dict[str, Any]) -> None:
    """Each existing file (or Hugging Face folder) a tokenizer argument names is an input of the run
    (:func:`primus_launch.inputs.remember_named`), read here or not (a SentencePiece ``.model`` is not; ``--vocab-size``
    given, none is): no output of the run may replace what the training reads (``--report tokenizer.model`` did)."""
    from primus_launch.inputs import remember_named

    for dest, flag in RUN_INPUT_FILES:
        remember_named(a.get(dest), flag)


def pipeline_split_hint(L: int, pp: int, acc_e: bool, acc_l: bool) -> str:
    """What makes ``L`` layers split over ``pp`` stages, in Megatron-LM's own terms (``validate_args``,
    ``megatron/training/arguments.py`` @d98e8a6: the layers plus one per ``--account-for-*-in-pipeline-split``
    flag divide by pp; else ``--decoder-first/last-pipeline-num-layers``, the middle stages sharing the rest evenly;
    else a ``--pipeline-model-parallel-layout``): the account-for flags not yet set that make the count divide
    (Primus's Llama 3.1 405B experiment: 126 layers on PP 8, 126 + 2 = 128), then a first / last pair whose middle
    stages hold ceil(L / pp) layers each."""
    adds = [(e, l) for e, l in ((True, True), (True, False), (False, True))
            if (e or acc_e, l or acc_l) != (acc_e, acc_l) and (L + (e or acc_e) + (l or acc_l)) % pp == 0]
    out = []
    if adds:
        e, l = adds[0]
        flags = [f for f, on, had in (("--account-for-embedding-in-pipeline-split", e, acc_e),
                                      ("--account-for-loss-in-pipeline-split", l, acc_l)) if on and not had]
        total = L + (e or acc_e) + (l or acc_l)
        out.append(f"set {' and '.join(flags)} ({total} = {pp} x {total // pp} slots, the embedding / loss each "
                   "counted as one layer)")
    if not (acc_e or acc_l):  # Megatron asserts the account-for flags and an uneven split are not combined
        for each in range(-(-L // pp), 0, -1):  # the middle stages' share, from the even one down
            rest = L - each * (pp - 2)
            if rest >= 2:
                out.append(f"set --decoder-first-pipeline-num-layers {rest // 2} --decoder-last-pipeline-num-layers "
                           f"{rest - rest // 2}" + (f" ({pp - 2} middle stages of {each})" if pp > 2 else ""))
                break
    out.append("set --pipeline-model-parallel-layout")
    return "or " + "; or ".join(out)


def plan_from_args(a: dict[str, Any], cluster: Cluster, name: str = "gpt", validate: bool = True) -> Plan:
    """Build the plan from Megatron argument values (``dest -> value``; absent = Megatron default).

    Keys other than the modelled dests (any Megatron dest or flag name) are classified by
    :mod:`megatron_flags` into ``plan.source.unmodelled`` / ``notes`` (see :func:`report_args`);
    the returned plan's ``source`` is ``Source(framework="megatron")`` carrying them.
    """
    _remember_run_files(a)
    cfg = a.get("yaml_cfg")
    if isinstance(cfg, str) and cfg:  # the documented launch of a Megatron YAML recipe: its flags are not the run's
        raise PlanError("--yaml-cfg", cfg, "Megatron-LM then trains with that file's arguments and ignores the "
                        "command's other flags (megatron/training/arguments.py parse_args: load_yaml, 'argparse "
                        f"arguments will be ignored'); project the file itself: --project {cfg} (its cluster with "
                        "--nodes / --gpus-per-node)")
    rep = report_args(a, skip=frozenset(k for keys in PAI_VOCAB_KEYS for k in keys)
                      | frozenset(k for k in pai_patch.KEYS if "qk" not in k))
    a = _custom_fsdp(a, rep)
    if all(a.get(d) is None for d in SHAPE_DESTS):
        raise PlanError("--num-layers", None, "required (Megatron-LM has no default); the command names none of "
                        "Megatron-LM's model flags (--num-layers, --hidden-size, --num-attention-heads, --seq-length): "
                        "not a Megatron-LM flag recipe (Megatron-Bridge / NeMo recipes build the model in Python; "
                        "give the run's Megatron-LM flags after --)")
    hyb = hybrid_pattern(a, a.get("num_layers"))
    _hybrid_family(a, hyb)
    if hyb is not None and a.get("num_layers") is None:   # main's --hybrid-layer-pattern sets the layer count
        a = {**a, "num_layers": len(hyb)}
    L = _req(a, "num_layers")
    if isinstance(L, int) and L > LIMITS["model.num_layers"]:  # before any per-layer pattern is built from it
        raise PlanError("--num-layers", L, f"at most {LIMITS['model.num_layers']:,} (the projection's bound; far "
                        "above any real run)")
    h = _req(a, "hidden_size")
    heads = _req(a, "num_attention_heads")
    # MLP: --swiglu (gated silu), --quick-geglu (gated quick_gelu), --squared-relu, default gelu
    # (megatron/training/arguments.py core_transformer_config_from_args)
    swiglu, qgeglu = bool(get(a, "swiglu")), bool(get(a, "quick_geglu"))
    gated = swiglu or qgeglu
    activation = ("silu" if swiglu else "quick_gelu" if qgeglu else "squared_relu" if get(a, "squared_relu")
                  else "gelu")
    ffn = a.get("ffn_hidden_size")
    if ffn is None:
        ffn = int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h  # validate_args: only --swiglu shrinks it
    pos = "rope" if get(a, "use_rotary_position_embeddings") else get(a, "position_embedding_type")
    if pos not in _POS:
        raise PlanError("--position-embedding-type", pos, "one of learned_absolute, rope, mrope, yarn, none")
    if pos == "learned_absolute" and not get(a, "add_position_embedding"):
        pos = "none"
    norm = get(a, "normalization")
    if norm not in _NORM:
        raise PlanError("--normalization", norm, "one of LayerNorm, RMSNorm")
    add_bias = bool(get(a, "add_bias_linear"))
    if a.get("seq_length") is not None and a.get("encoder_seq_length") is not None:
        # megatron/training/arguments.py validate_args (core_v0.16.1, main): `assert args.encoder_seq_length is
        # None` where --seq-length is given (it then sets encoder_seq_length from seq_length)
        raise PlanError("--encoder-seq-length", a["encoder_seq_length"],
                        f"left out with --seq-length={a['seq_length']} (Megatron-LM's validate_args asserts it)")
    seq = a.get("seq_length") if a.get("seq_length") is not None else a.get("encoder_seq_length")
    if seq is None:
        raise PlanError("--seq-length", None, "required (Megatron-LM has no default)")

    # vocabulary: --padded-vocab-size > --vocab-size > local tokenizer file / public tokenizer table
    divisible = get(a, "make_vocab_size_divisible_by")
    pai_type, pai_extra = (next((a[k] for k in keys if a.get(k) not in (None, "")), None) for keys in PAI_VOCAB_KEYS)
    from primus_launch.adapters.megatron_vocab import fork_vocab

    fork = fork_vocab(a.get("tokenizer_type"), pai_extra)
    for dest, v in (("padded_vocab_size", a.get("padded_vocab_size")),
                    ("encoder_seq_length", None if a.get("seq_length") is not None else a.get("encoder_seq_length"))):
        if isinstance(v, int) and not isinstance(v, bool) and v <= 0:  # named as given, not as the plan's field
            raise PlanError(BY_DEST[dest].flag, v, "a positive integer")
    if a.get("padded_vocab_size") is not None:
        vocab, divisible = a["padded_vocab_size"], 1
    elif a.get("vocab_size") is not None:
        vocab = a["vocab_size"]
        if a.get("tokenizer_type") in ("NullTokenizer", "NullMultimodalTokenizer"):
            vocab += 1  # megatron _NullTokenizer.vocab_size = vocab_size + 1 (EOD)
    elif pai_type is not None:  # Pai-Megatron-Patch: its build_tokenizer sets padded_vocab_size, unpadded
        from primus_launch.adapters.megatron_vocab import pai_vocab

        hit = pai_vocab(pai_type, pai_extra, a.get("load"))
        if hit is None:
            raise PlanError("--patch-tokenizer-type", pai_type, "vocabulary size unknown: Pai-Megatron-Patch loads this "
                            f"tokenizer from --load={a.get('load')!r}, not a local checkpoint nor a known public model: "
                            "add --padded-vocab-size N to the recipe's Megatron arguments")
        vocab, divisible = hit[0], 1
        rep.note(f"vocabulary {vocab} from {hit[1]}")
    elif fork is not None:  # a fork's --tokenizer-type that adds --extra-vocab-size itself, unpadded
        vocab, divisible = fork[0], 1
        rep.note(f"vocabulary {vocab} from {fork[1]}")
    else:
        hit = tokenizer_vocab(a.get("tokenizer_model"), a.get("tokenizer_type"), a.get("vocab_file"))
        if hit is None:
            flag, what = next(((f, a.get(d)) for f, d in (("--tokenizer-model", "tokenizer_model"), ("--vocab-file", "vocab_file"),
                                                          ("--tokenizer-type", "tokenizer_type")) if a.get(d)),
                              ("--tokenizer-model", None))
            here = isinstance(what, str) and flag != "--tokenizer-type" and os.path.exists(what)
            raise PlanError(flag, what, "vocabulary size unknown (" + (
                "a local tokenizer whose files give no vocabulary size: config.json vocab_size, tokenizer.json "
                "model.vocab / added_tokens ids, vocab.json entries" if here else
                "not a local file nor a known public tokenizer") + "): " + ADD_VOCAB_SIZE
                            + (" (or the script's arguments, if it takes the tokenizer from $1..$N)" if what is None else ""))
        vocab = hit[0]
        rep.note(f"vocabulary {vocab} from {hit[1]}")

    # dropout: Megatron's defaults are 0.1 (their masks are memory)
    att_do, hid_do = float(get(a, "attention_dropout")), float(get(a, "hidden_dropout"))

    # sliding window: --window-size L,R (left L; -1 = unlimited); --window-attn-skip-freq N or a pattern
    window, window_pat = None, None
    if a.get("window_size") not in (None, "", "None"):
        txt = str(a["window_size"]).strip("()[] '\"")
        try:
            left = int(txt.split(",")[0])
        except ValueError:
            raise PlanError("--window-size", a["window_size"], "'LEFT,RIGHT' such as 128,0") from None
        if left >= 0:
            window = max(left, 1)
            if a.get("window_attn_skip_freq") not in (None, ""):
                window_pat = tuple(layer_pattern("--window-attn-skip-freq", a["window_attn_skip_freq"], L))
    softmax = get(a, "softmax_type")
    if softmax not in ("vanilla", "off-by-one", "learnable"):
        raise PlanError("--softmax-type", softmax, "one of vanilla, off-by-one, learnable")

    num_experts = a.get("num_experts") or None
    dense_first, moe_pattern = 0, None
    if num_experts:  # --moe-layer-freq N or a list: one 0/1 per layer (all-MoE stays None)
        pat = layer_pattern("--moe-layer-freq", get(a, "moe_layer_freq"), L)
        moe_pattern = None if all(pat) else tuple(pat)
    mla = bool(get(a, "multi_latent_attention"))
    mla_dims: dict[str, int] = {}
    given_shared = a.get("moe_shared_expert_intermediate_size")
    if isinstance(given_shared, (int, float)) and not isinstance(given_shared, bool) and given_shared <= 0:
        # megatron-core TransformerConfig.__post_init__ (core_v0.16.1) raises for a shared size <= 0, MoE or not
        raise PlanError("--moe-shared-expert-intermediate-size", given_shared,
                        "a positive size (num_shared_experts x each one's FFN size), or left out for no shared "
                        "expert (megatron-core's TransformerConfig raises for <= 0)")
    shared = (given_shared or 0) if num_experts else 0
    # Megatron-LM fills only an absent --moe-ffn-hidden-size from --ffn-hidden-size (arguments.py): 0 stays 0
    moe_ffn = (ffn if a.get("moe_ffn_hidden_size") is None else a["moe_ffn_hidden_size"]) if num_experts else None
    if num_experts and not shared:  # Pai-Megatron-Patch's legacy MoE models: --enable-shared-expert
        pai_shared = pai_patch.shared_expert_size(a, moe_ffn)
        if pai_shared:
            shared = pai_shared[0]
            rep.note(pai_shared[1])
    if get(a, "add_qkv_bias_linear"):
        rep.note("--add-qkv-bias-linear: a ROCm/Megatron-LM fork's flag (renwuli/disable_te_qwen*, guihong_dev: bias on "
                 "the QKV projection only), read as --add-qkv-bias; Megatron-LM's own parser exits 'unrecognized "
                 "arguments'")
    pai_mla = pai_patch.legacy_mla(a, mla)
    if pai_mla:  # Pai's DeepSeek-V2 model: MLA without Megatron's switch
        mla, mla_dims = True, pai_mla[0]
        rep.notes[:] = [n for n in rep.notes if not n.startswith(("unknown Megatron-LM flag --qk-nope-head-dim",
                                                                  "unknown Megatron-LM flag --qk-rope-head-dim"))]
        rep.note(pai_mla[1])
    model = dict(
        name=name, num_layers=L, hidden_size=h, ffn_hidden_size=ffn, num_attention_heads=heads,
        num_query_groups=get(a, "num_query_groups") if get(a, "group_query_attention") else None,
        head_dim=a.get("kv_channels"), vocab_size=vocab, make_vocab_size_divisible_by=divisible,
        seq_length=seq, max_position_embeddings=a.get("max_position_embeddings"), swiglu=gated,
        activation=activation, activation_clamp=a.get("activation_func_clamp_value") if gated else None,
        untie_embeddings_and_output_weights=bool(get(a, "untie_embeddings_and_output_weights")),
        normalization=_NORM[norm], add_bias_linear=add_bias,
        add_qkv_bias=add_bias or bool(get(a, "add_qkv_bias")) or bool(get(a, "add_qkv_bias_linear")),
        qk_layernorm=bool(get(a, "qk_layernorm")),
        position_embedding=_POS[pos], softmax_type=softmax, window_size=window, window_layer_pattern=window_pat,
        attention_dropout=att_do, hidden_dropout=hid_do, num_experts=num_experts,
        moe_router_topk=get(a, "moe_router_topk"),
        moe_ffn_hidden_size=moe_ffn,
        moe_shared_expert_intermediate_size=shared,
        moe_dense_first_layers=dense_first, moe_layer_pattern=moe_pattern,
        moe_router_bias=bool(get(a, "moe_router_enable_expert_bias")),
        moe_router_num_groups=a.get("moe_router_num_groups") if num_experts else None,
        moe_router_group_topk=a.get("moe_router_group_topk") if num_experts else None,
        multi_latent_attention=mla, q_lora_rank=a.get("q_lora_rank"), kv_lora_rank=get(a, "kv_lora_rank"),
        qk_head_dim=mla_dims.get("qk_head_dim", get(a, "qk_head_dim")),
        qk_pos_emb_head_dim=mla_dims.get("qk_pos_emb_head_dim", get(a, "qk_pos_emb_head_dim")),
        v_head_dim=get(a, "v_head_dim"), mtp_num_layers=a.get("mtp_num_layers") or 0,
    )
    model.update(_hybrid_model(a, hyb, bool(num_experts)))

    tp, pp = get(a, "tensor_model_parallel_size"), get(a, "pipeline_model_parallel_size")
    layout = a.get("pipeline_model_parallel_layout") or None
    first, last = a.get("decoder_first_pipeline_num_layers"), a.get("decoder_last_pipeline_num_layers")
    vpp_ways = [k for k in ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank")
                if a.get(k) is not None] + (["pipeline_model_parallel_layout"] if layout else [])
    if len(vpp_ways) > 1:  # validate_args: no more than one of them
        raise PlanError(BY_DEST[vpp_ways[1]].flag, a[vpp_ways[1]],
                        f"cannot be combined with {BY_DEST[vpp_ways[0]].flag} (Megatron asserts)")
    acc_e, acc_l = bool(get(a, "account_for_embedding_in_pipeline_split")), bool(get(a, "account_for_loss_in_pipeline_split"))
    vpp = 1
    if layout is not None:
        from primus_launch.plan.layout import parse_layout

        n_st = len(parse_layout(str(layout)))
        if n_st % pp:
            raise PlanError("--pipeline-model-parallel-layout", layout,
                            f"{n_st} stages must divide by --pipeline-model-parallel-size={pp}")
        vpp = n_st // pp
        first = last = None  # the layout places every layer
        layout = _layout_mtp(str(layout), a.get("mtp_num_layers"), rep)
    elif a.get("num_layers_per_virtual_pipeline_stage") is not None:
        n = a["num_layers_per_virtual_pipeline_stage"]
        if first is not None or last is not None:
            raise PlanError("--num-layers-per-virtual-pipeline-stage", n,
                            "use --num-virtual-stages-per-pipeline-rank with uneven pipeline stages")
        slots = L + acc_e + acc_l
        if n <= 0 or slots % pp or (slots // pp) % n:
            raise PlanError("--num-layers-per-virtual-pipeline-stage", n,
                            f"must divide layers per pipeline stage ({slots}/{pp})")
        vpp = (slots // pp) // n
    elif validate and pp > 1 and first is None and last is None and (L + acc_e + acc_l) % pp and not hybrid_segments(a) \
            and all(
            a.get(k) is None for k in ("num_virtual_stages_per_pipeline_rank", "virtual_pipeline_model_parallel_size")):
        # megatron/training/arguments.py validate_args (even split, no virtual stages) asserts this
        raise PlanError("--pipeline-model-parallel-size", pp,
                        f"must divide --num-layers={L}" + (f" + {acc_e + acc_l} (--account-for-*)" if acc_e or acc_l
                                                          else "")
                        + f" (Megatron asserts); {pipeline_split_hint(L, pp, acc_e, acc_l)}")
    elif a.get("num_virtual_stages_per_pipeline_rank") is not None:
        vpp = a["num_virtual_stages_per_pipeline_rank"]
    elif a.get("virtual_pipeline_model_parallel_size") is not None:
        vpp = a["virtual_pipeline_model_parallel_size"]
    vpp = _hybrid_pipeline(a, pp, vpp, rep)
    sp = bool(get(a, "sequence_parallel")) and tp > 1  # validate_args: disabled when TP=1
    if get(a, "use_torch_fsdp2"):
        sharding = "full"
    elif get(a, "use_megatron_fsdp"):
        strat = get(a, "data_parallel_sharding_strategy")
        if strat not in ("no_shard", "optim", "optim_grads", "optim_grads_params"):
            raise PlanError("--data-parallel-sharding-strategy", strat, "one of no_shard, optim, optim_grads, optim_grads_params")
        sharding = {"optim_grads_params": "full", "optim_grads": "optimizer_grads", "optim": "optimizer"}.get(
            strat, "optimizer" if get(a, "use_distributed_optimizer") else "none")
    elif get(a, "use_distributed_optimizer") and str(get(a, "optimizer")) not in ("muon", "dist_muon"):
        sharding = "optimizer"
    else:
        # Megatron-LM d98e8a64dd validate_args: an emerging optimizer (muon) turns --use-distributed-optimizer into
        # the layer-wise distributed optimizer (use_distributed_optimizer = False): _muon reads it
        sharding = "none"
    instances = _dist_opt_instances(a, rep, sharding)
    cp = get(a, "context_parallel_size")
    cp_types = [str(x) for x in get(a, "cp_comm_type")] or ["p2p"]
    bad = [x for x in cp_types if x not in _CP_COMM]
    if bad:
        raise PlanError("--cp-comm-type", " ".join(cp_types), "of p2p, a2a, allgather, a2a+p2p")
    cp_comm = max(set(cp_types), key=cp_types.count)
    if len(set(cp_types)) > 1 and cp > 1:
        rep.flag("--cp-comm-type", cp_types, f"time: per-layer context-parallel kinds; all layers priced as {cp_comm}")
    parallel = dict(tp=tp, pp=pp, vpp=vpp, cp=cp,
                    ep=get(a, "expert_model_parallel_size"), etp=a.get("expert_tensor_parallel_size"),
                    sequence_parallel=sp, dp_sharding=sharding, dp_replicate=instances, cp_comm_type=cp_comm,
                    pipeline_layout=str(layout) if layout is not None else None,
                    pipeline_layers_first_stage=first if pp > 1 else None,
                    pipeline_layers_last_stage=last if pp > 1 else None,
                    microbatch_group=a.get("microbatch_group_size_per_vp_stage") if pp > 1 and vpp > 1 else None,
                    account_for_embedding_in_pipeline_split=acc_e and pp > 1 and layout is None,
                    account_for_loss_in_pipeline_split=acc_l and pp > 1 and layout is None,
                    fsdp_reshard_after_forward="default" if get(a, "torch_fsdp2_reshard_after_forward") else "never",
                    fsdp_impl="torch_fsdp2" if get(a, "use_torch_fsdp2") else "megatron_fsdp")

    recompute = _recompute(a, rep)
    bf16, fp16 = bool(get(a, "bf16")), bool(get(a, "fp16"))
    if bf16 and fp16:
        raise PlanError("--fp16", True, "cannot be combined with --bf16")
    fp8, fp4 = a.get("fp8"), a.get("fp4")
    if fp8 is not None and fp8 not in ("e4m3", "hybrid"):
        raise PlanError("--fp8-format", fp8, "one of e4m3, hybrid")
    if fp8 and fp4:
        raise PlanError("--fp4-format", fp4, "cannot be combined with --fp8-format (Megatron raises)")
    if fp4 is not None and fp4 != "e2m1":
        raise PlanError("--fp4-format", fp4, "e2m1")
    precision = "fp4" if fp4 else "fp8" if fp8 else "bf16" if bf16 else "fp16" if fp16 else "fp32"
    fp8_recipe = None
    if fp8:
        r = get(a, "fp8_recipe")
        if r in FP8_RECIPES_READ:
            fp8_recipe = r if a.get("fp8_recipe") is not None else None
        else:
            rep.flag("--fp8-recipe", r, "time: a custom FP8 recipe, priced as Megatron's default (delayed)")
    fp4_recipe = None
    if fp4:
        r = get(a, "fp4_recipe")
        if r == "nvfp4":
            fp4_recipe = "nvfp4"
        else:
            rep.flag("--fp4-recipe", r, "time: a custom FP4 recipe, priced as nvfp4")
    # fp8 / fp4 GEMMs over the parameters' dtype: Megatron-LM d98e8a64dd training/arguments.py sets params_dtype
    # torch.float, then half under --fp16, bfloat16 under --bf16; --fp8-format / --fp4-format do not change it, so
    # without either flag the parameters, gradients and the activations between the quantized GEMMs are fp32
    lowp_params = None
    if precision in ("fp8", "fp4") and not bf16:
        lowp_params = "fp16" if fp16 else "fp32"
        if lowp_params == "fp32":
            rep.flag("--fp8-format" if fp8 else "--fp4-format", fp8 or fp4,
                     f"time: without --bf16 the {precision} GEMMs run over fp32 parameters and activations; priced as "
                     "over bf16 ones (the memory is fp32)")
    bf16_ends = _bf16_ends(a, precision)
    if bf16:
        grad_fp32 = not get(a, "grad_reduce_in_bf16")
    else:
        grad_fp32 = bool(get(a, "accumulate_allreduce_grads_in_fp32"))
    optimizer = get(a, "optimizer")
    muon = _muon(a, rep, validate) if optimizer in ("muon", "dist_muon") else {}
    if optimizer in ("muon", "dist_muon"):
        optimizer = "muon"
    elif optimizer not in ("adam", "sgd"):
        rep.flag("--optimizer", optimizer, "time, memory: priced as Adam (two fp32 moments), "
                                           "not this optimizer's state and step")
        optimizer = "adam"

    # global batch: --rampup-batch-size ramps up to --global-batch-size; --step-batch-size-schedule steps
    mbs = _req(a, "micro_batch_size")
    gbs = a.get("global_batch_size")
    if a.get("step_batch_size_schedule"):
        if gbs is not None:
            raise PlanError("--step-batch-size-schedule", a["step_batch_size_schedule"],
                            "cannot be combined with --global-batch-size (Megatron raises)")
        gbs = steady_batch(str(a["step_batch_size_schedule"]))
        rep.note(f"--step-batch-size-schedule {a['step_batch_size_schedule']}: the steady batch {gbs} is projected")
    if a.get("rampup_batch_size"):
        rep.note(f"--rampup-batch-size {' '.join(map(str, a['rampup_batch_size']))}: the steady batch "
                 f"(--global-batch-size) is projected, not the ramp")
    if get(a, "cross_entropy_loss_fusion") and str(get(a, "cross_entropy_fusion_impl")) == "te":
        # Megatron-LM 168cb15d70 (2026-06-03, #5115; core_r0.18.0, core_v0.19.0, main, dev) validate_args
        rep.note("--cross-entropy-fusion-impl te with --cross-entropy-loss-fusion: read as Transformer Engine's fused "
                 "cross entropy (Megatron-LM before 168cb15, 2026-06-03: core_v0.18.0 and older); from core_r0.18.0 / "
                 "core_v0.19.0 Megatron-LM asserts 'Transformer Engine cross entropy loss fusion is disabled due to "
                 "stability issues' (--cross-entropy-fusion-impl native runs)")

    if a.get("deterministic_mode") is True:  # a switch the plan does not hold (reported as not modelled)
        _deterministic(a, rep)

    num_experts_set = bool(num_experts)
    dispatcher = get(a, "moe_token_dispatcher_type")
    if dispatcher not in ("allgather", "alltoall", "flex"):
        raise PlanError("--moe-token-dispatcher-type", dispatcher, "one of allgather, alltoall, flex")
    if dispatcher == "flex" or get(a, "moe_enable_deepep"):
        backend = "deepep" if get(a, "moe_enable_deepep") else (a.get("moe_flex_dispatcher_backend") or "deepep")
        if backend not in ("deepep", "hybridep"):
            raise PlanError("--moe-flex-dispatcher-backend", backend, "deepep or hybridep")
        dispatcher = backend
    state = {}
    for dest in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        v = str(get(a, dest))
        state[dest] = _STATE_DTYPES.get(v)
        if state[dest] is None:
            raise PlanError(BY_DEST[dest].flag, v, "one of fp32, bf16, fp16, fp8")
    pao = bool(get(a, "use_precision_aware_optimizer"))
    if not pao:
        state = dict.fromkeys(state, "fp32")  # the dtypes only take effect with the precision-aware optimizer
    # without fp8 --fp8-recipe still reaches the OptimizerConfig (training.optimizer_fp8_recipe): read when given,
    # with the precision-aware optimizer off too, so that a tuned candidate turning it on keeps the recipe the file
    # states (Megatron-Bridge's MixedPrecisionConfig.setup copies its fp8_recipe, default 'tensorwise', into every
    # run's OptimizerConfig: a bf16 Bridge config reads 'tensorwise')
    opt_fp8_recipe = (a.get("fp8_recipe") if precision not in ("fp8", "fp4")
                      and a.get("fp8_recipe") in FP8_RECIPES_READ and a.get("fp8_recipe") != "delayed" else None)
    training = dict(
        micro_batch_size=mbs, global_batch_size=gbs, precision=precision, fp8_recipe=fp8_recipe,
        optimizer_fp8_recipe=opt_fp8_recipe,
        fp8_param_gather=bool(get(a, "fp8_param_gather") or get(a, "fp4_param")) and precision in ("fp8", "fp4"),
        fp8_attention=bool(get(a, "fp8_dot_product_attention")) and precision == "fp8",
        fp4_recipe=fp4_recipe, lowp_params_dtype=lowp_params, bf16_layers_start=bf16_ends[0],
        bf16_layers_end=bf16_ends[1], recompute=recompute, offload=_offload(a, L, rep),
        pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        overlap_grad_reduce=bool(get(a, "overlap_grad_reduce")),
        overlap_param_gather=bool(get(a, "overlap_param_gather")),
        # --no-align-grad-reduce / --no-align-param-gather (dest align_*, default on; arguments.py turns
        # align_param_gather off without VP, where dp_comm does not read it)
        align_grad_reduce=bool(get(a, "align_grad_reduce")), align_param_gather=bool(get(a, "align_param_gather")),
        tp_comm_overlap=bool(get(a, "tp_comm_overlap")), optimizer=optimizer, **muon,
        tp_comm_overlap_cfg=_ub_cfg(a.get("tp_comm_overlap_cfg")),
        # --no-async-tensor-model-parallel-allreduce (dest async_tensor_model_parallel_allreduce, default on)
        tp_async_backward=bool(get(a, "async_tensor_model_parallel_allreduce")),
        # --no-gradient-accumulation-fusion (dest gradient_accumulation_fusion, default on)
        gradient_accumulation_fusion=bool(get(a, "gradient_accumulation_fusion")),
        grad_reduce_in_fp32=grad_fp32, train_iters=a.get("train_iters"),
        attention_backend=_attention_backend(a), **_cuda_graph(a, rep),
        moe_token_dispatcher=dispatcher if num_experts_set else "alltoall",
        moe_grouped_gemm=bool(get(a, "moe_grouped_gemm")), moe_permute_fusion=bool(get(a, "moe_permute_fusion")),
        # transformer_config.__post_init__ (dev @d48bd6be): an explicit --moe-flex-dispatcher-num-sms wins, else the
        # deprecated per-backend knobs are routed to it
        moe_dispatcher_num_sms=(get(a, "moe_flex_dispatcher_num_sms") or get(a, "moe_deepep_num_sms")
                                or get(a, "moe_hybridep_num_sms") or None),
        moe_expert_gemm=_expert_gemm(a),
        moe_router_force_load_balancing=bool(get(a, "moe_router_force_load_balancing")),
        moe_router_fusion=bool(get(a, "moe_router_fusion")),
        # transformer_config.__post_init__: --moe-router-padding-for-fp8 is the alias that turns the other on
        moe_router_padding_for_quantization=bool(get(a, "moe_router_padding_for_quantization")
                                                 or get(a, "moe_router_padding_for_fp8")),
        moe_router_aux_loss=any(str(x) != "none" for x in (get(a, "moe_router_load_balancing_type") or ["aux_loss"])),
        moe_router_fp32=str(get(a, "moe_router_dtype") or "") in ("fp32", "fp64"),
        overlap_moe_expert_parallel_comm=bool(get(a, "overlap_moe_expert_parallel_comm")),
        delay_wgrad_compute=bool(get(a, "delay_wgrad_compute")),
        defer_embedding_wgrad=bool(get(a, "defer_embedding_wgrad_compute")),
        wgrad_deferral_limit=int(get(a, "wgrad_deferral_limit") or 0),
        moe_shared_expert_overlap=bool(get(a, "moe_shared_expert_overlap")),
        **_static_moe(a), **_token_drop(a),
        cross_entropy_loss_fusion=bool(get(a, "cross_entropy_loss_fusion")),
        cross_entropy_fusion_impl="te" if str(get(a, "cross_entropy_fusion_impl")) == "te" else "native",
        rope_fusion=bool(get(a, "apply_rope_fusion")),
        dataloader_attention_mask=bool(get(a, "create_attention_mask_in_dataloader")),
        precision_aware_optimizer=pao, **state,
        ddp_bucket_size=a.get("ddp_bucket_size"), ddp_num_buckets=a.get("ddp_num_buckets"),
        log_params_norm=bool(get(a, "log_params_norm")), log_num_zeros_in_grad=bool(get(a, "log_num_zeros_in_grad")),
        manual_gc=bool(get(a, "manual_gc")), manual_gc_interval=int(get(a, "manual_gc_interval") or 0),
        clip_grad=float(get(a, "clip_grad")), check_for_nan_in_grad=bool(get(a, "check_for_nan_in_loss_and_grad")),
        ddp_average_in_collective=bool(get(a, "ddp_average_in_collective")),
        calculate_per_token_loss=bool(get(a, "calculate_per_token_loss")),
    )
    if training["defer_embedding_wgrad"] and pp > 1:
        # memory modelled (memory.mcore.deferred_wgrad_bytes); the step time is not
        rep.flag("--defer-embedding-wgrad-compute", True, "time: the output layer's weight-gradient GEMMs run in the "
                 "pipeline flush, hiding part of it (not modelled; the memory it keeps is)")
    if get(a, "use_transformer_engine_op_fuser"):
        # Megatron passes use_te_op_fuser to the decoder layer specs too: the attention / dense-MLP linears built
        # from TE ops are priced as TE's modules (only the MoE experts' fused grouped MLP is modelled: _expert_gemm)
        rep.flag("--use-transformer-engine-op-fuser", True,
                 "time: the TE op-fuser modules outside the MoE experts' grouped MLP (attention and dense-MLP linears) "
                 "are priced as TE's unfused modules" if training["moe_expert_gemm"] == "te_fused" else
                 "time: the TE op-fuser modules are priced as TE's unfused modules (without --moe-grouped-gemm the "
                 "fused grouped MLP does not apply)")
    if validate:  # further megatron/training/arguments.py validate_args assertions
        if training["tp_comm_overlap"] and not sp:
            raise PlanError("--tp-comm-overlap", True, "requires --sequence-parallel with TP > 1")
        # (dist_muon's layer-wise optimizer gathers too: "or args.optimizer == 'dist_muon'")
        if training["overlap_param_gather"] and ((sharding == "none" and not training.get("muon_layer_wise"))
                                                 or not training["overlap_grad_reduce"]):
            raise PlanError("--overlap-param-gather", True,
                            "requires --use-distributed-optimizer (or Megatron-FSDP) and --overlap-grad-reduce")
        # model_parallel_config.py __post_init__ (megatron-core 0.16.1)
        if training["defer_embedding_wgrad"] and pp == 1:
            raise PlanError("--defer-embedding-wgrad-compute", True, "requires pipeline parallelism (PP > 1)")
        if training["ddp_bucket_size"] is not None and training["ddp_num_buckets"] is not None:
            raise PlanError("--ddp-num-buckets", training["ddp_num_buckets"],
                            "cannot be combined with --ddp-bucket-size (Megatron asserts)")
        if training["wgrad_deferral_limit"] < 0:
            raise PlanError("--wgrad-deferral-limit", training["wgrad_deferral_limit"], "an integer >= 0")
        if fp16 and parallel["ep"] > 1:
            raise PlanError("--fp16", True, "expert parallelism is not supported with fp16")
        if (get(a, "enable_cuda_graph") or get(a, "external_cuda_graph")) and get(a, "cuda_graph_impl") != "none":
            raise PlanError("--cuda-graph-impl", get(a, "cuda_graph_impl"),
                            "do not combine with --enable-cuda-graph / --external-cuda-graph (Megatron asserts)")
        if training["offload"]["optimizer_state_fraction"] > 0:
            # Megatron-LM dev (9050d4c5fb) validate_args and OptimizerConfig.__post_init__
            if get(a, "use_megatron_fsdp") or not get(a, "use_distributed_optimizer"):
                raise PlanError("--chunked-optimizer-state-offload", True,
                                "requires --use-distributed-optimizer and no Megatron-FSDP (Megatron asserts)")
            if str(get(a, "optimizer")) not in ("adam", "muon"):
                raise PlanError("--chunked-optimizer-state-offload", True,
                                f"supports --optimizer adam or muon (here {get(a, 'optimizer')}; Megatron asserts)")
            if "full_iteration" in training.get("cuda_graph_scope", ()):
                raise PlanError("--chunked-optimizer-state-offload", True,
                                "not with full-iteration CUDA graphs (Megatron asserts)")
    if training["global_batch_size"] is None:  # validate_args: mbs * dp
        world = cluster.world_size
        training["global_batch_size"] = mbs * max(1, world // (tp * pp * parallel["cp"]))
    try:
        plan = build_plan(model, parallel, training, cluster, validate)
    except PlanError as e:
        raise _vpp_as_written(_model_as_written(e, a), a, vpp_ways, pp) from None
    if validate and get(a, "use_torch_fsdp2"):  # validate_args' torch FSDP2 assertions (plan/legality.py)
        problems = torch_fsdp2_problems(plan)
        if problems:
            field, value, allowed = problems[0]
            raise PlanError("--use-torch-fsdp2", True, f"Megatron's validate_args requires {field} {allowed} (here {value})")
    # a '|'-separated hybrid pattern fixes the pipeline split: the tuner keeps it (plan.source.fixed)
    fixed = ["parallel.pp", "parallel.vpp", "parallel.pipeline_layers_first_stage",
             "parallel.pipeline_layers_last_stage", "parallel.pipeline_layout"] if hybrid_segments(a) else []
    src = Source(framework="megatron", unmodelled=rep.unmodelled, notes=rep.notes, fixed=fixed)
    return plan.model_copy(update={"source": src})


#: the Megatron destination a model field is read from where its name differs (``--kv-channels`` sets ``head_dim``)
MODEL_DESTS = {"model.head_dim": "kv_channels"}


def _model_as_written(e: PlanError, a: dict[str, Any]) -> PlanError:
    """``e`` (a rule or bound of the plan's model section: ``model.num_experts=99999999``, ``model.moe_router_num_groups=3:
    must divide num_experts=8``) named by the Megatron flag the value was read from, where the arguments hold that very
    value (a derived value -- a padded vocabulary, a default FFN width -- keeps the plan's name: no flag wrote it)."""
    if not e.field.startswith("model."):
        return e
    dest = MODEL_DESTS.get(e.field, e.field[len("model."):])
    given = a.get(dest)
    if dest not in BY_DEST or given is None or isinstance(given, bool) != isinstance(e.value, bool) or given != e.value:
        return e
    return PlanError(BY_DEST[dest].flag, e.value, e.allowed)


def _vpp_as_written(e: PlanError, a: dict[str, Any], ways: list[str], pp: int) -> PlanError:
    """``e`` on the plan's virtual-stage count (named ``--num-layers-per-virtual-pipeline-stage`` with the count, which
    is not that flag's value) named by the way the arguments set it: that flag with its own value, the count of
    virtual stages per rank, or the layout whose stages make it (``--num-virtual-stages-per-pipeline-rank 2`` on one
    pipeline stage was "--num-layers-per-virtual-pipeline-stage=2")."""
    ways = ways or [k for k in ("virtual_pipeline_model_parallel_size",) if a.get(k) is not None and k in BY_DEST]
    if e.field != FIELD_FLAGS["parallel.vpp"] or not ways:
        return e
    way = ways[0]
    if way == "pipeline_model_parallel_layout":
        return PlanError(BY_DEST[way].flag, a[way], f"its stages make {e.value} virtual stages per rank on "
                         f"--pipeline-model-parallel-size={pp}, which {e.allowed}")
    if a[way] == e.value:
        return PlanError(BY_DEST[way].flag, a[way], e.allowed)
    return PlanError(BY_DEST[way].flag, a[way], f"{e.value} virtual stages per rank, which {e.allowed}")


def _layout_mtp(layout: str, mtp: Any, rep: _Report) -> str:
    """A ``--pipeline-model-parallel-layout`` that names no MTP layer (``m``) with ``--mtp-num-layers`` N: the layout
    of Megatron-LM before d7bf5aa (2025-08-26: core_v0.14.0rc0 and older, branches training-moe-june2025 and
    chcui/gpt_oss), whose ``validate_layer_layout`` raised NotImplementedError on ``m`` and whose
    ``get_mtp_num_layers_to_build`` put every MTP layer on the last pipeline stage: read so (N ``m`` before the last
    stage's ``L``), with a note that later Megatron-LM asserts "Number of mtp layers in layout must match
    mtp_num_layers".  Any other layout is returned as written."""
    from primus_launch.plan.layout import parse_layout

    if not mtp or not isinstance(mtp, int) or mtp < 1:
        return layout
    stages = list(parse_layout(layout))
    if "m" in "".join(stages) or not stages[-1].endswith("L"):
        return layout
    stages[-1] = stages[-1][:-1] + "m" * mtp + "L"
    rep.note(f"--pipeline-model-parallel-layout {layout} places no MTP layer (m): read as Megatron-LM before d7bf5aa "
             f"(2025-08-26; core_v0.14.0rc0 and older) builds it, the {mtp} MTP layer(s) on the last pipeline stage; "
             "Megatron-LM from core_v0.14.0 asserts 'Number of mtp layers in layout must match mtp_num_layers'")
    return "|".join(stages)


def _custom_fsdp(a: dict[str, Any], rep: _Report) -> dict[str, Any]:
    """``--use-custom-fsdp``, the Megatron-FSDP switch of Megatron-LM from d165a85 (2025-02-26) to af28b5a
    (2025-08-21: renamed ``--use-megatron-fsdp``; core_r0.12.0 .. core_v0.14.0rc0, the training-moe-june2025 and
    chcui/gpt_oss branches), read as ``--use-megatron-fsdp``.  Those versions' ``validate_args`` also set
    ``overlap_param_gather`` and ``overlap_grad_reduce`` with ``--data-parallel-sharding-strategy optim_grads_params``
    and ``overlap_grad_reduce`` with ``optim_grads`` (removed by af28b5a), which the spelling dates."""
    if not get(a, "use_custom_fsdp"):
        return a
    out = {**a, "use_megatron_fsdp": True}
    strat = get(a, "data_parallel_sharding_strategy")
    forced = {"optim_grads_params": ("overlap_param_gather", "overlap_grad_reduce"),
              "optim_grads": ("overlap_grad_reduce",)}.get(str(strat), ())
    for dest in forced:
        if not get(a, dest):
            out[dest] = True
            rep.note(f"--{dest.replace('_', '-')}: on, as --use-custom-fsdp's Megatron-LM (before af28b5a, "
                     f"2025-08-21) sets it with --data-parallel-sharding-strategy {strat}")
    return out


def _hybrid_model(a: dict[str, Any], hyb: str | None, moe: bool) -> dict[str, Any]:
    """The model fields of a hybrid stack (``hyb``: :func:`hybrid_pattern`), its MTP depths' pattern
    (:func:`hybrid_mtp`; a conflicting ``--mtp-num-layers`` refused as Megatron-LM ``arguments.py`` does) and, with
    experts, the latent MoE width and the fused weighted squared ReLU."""
    out: dict[str, Any] = {}
    if hyb is not None:
        out.update(hybrid_pattern=hyb, moe_layer_pattern=None, moe_dense_first_layers=0,
                   mamba_state_dim=get(a, "mamba_state_dim"), mamba_head_dim=get(a, "mamba_head_dim"),
                   mamba_num_groups=get(a, "mamba_num_groups"), mamba_num_heads=a.get("mamba_num_heads"))
        mtp_pat, depths = hybrid_mtp(a)
        if mtp_pat is not None:
            given = a.get("mtp_num_layers")
            if depths is not None and given not in (None, 0) and given != depths:
                raise PlanError("--mtp-num-layers", given, f"{depths} (the hybrid pattern's MTP depths; Megatron-LM "
                                "arguments.py refuses the conflict)")
            n = depths if depths is not None else (given or 0)
            if n:
                out.update(hybrid_mtp_pattern=mtp_pat, mtp_num_layers=n)
    if moe and a.get("moe_latent_size"):
        out.update(moe_latent_size=a.get("moe_latent_size"))
    if moe and a.get("use_fused_weighted_squared_relu"):
        out.update(moe_fused_weighted_squared_relu=True)
    return out


def _dist_opt_instances(a: dict[str, Any], rep: _Report, sharding: str) -> int:
    """``--num-distributed-optimizer-instances N`` -> ``parallel.dp_replicate``: the partial distributed optimizer,
    sharded over dp x cp / N and replicated N times (megatron-core 0.16.1 distributed_data_parallel.py asserts
    'Partial DistOpt cannot be used without DistOpt'); the inter-instance all-reduce is not priced (reported)."""
    instances = get(a, "num_distributed_optimizer_instances")
    if instances < 1 or instances > 1 and sharding == "none":
        raise PlanError("--num-distributed-optimizer-instances", instances,
                        "1, or more with --use-distributed-optimizer (Megatron: partial DistOpt needs DistOpt)")
    if instances > 1:
        rep.flag("--num-distributed-optimizer-instances", instances,
                 "time: gradients priced as one reduce-scatter over dp x cp (Megatron: over dp x cp / N, then an "
                 "all-reduce of the shards across the N instances)"
                 + ("; memory: hybrid FSDP (Megatron-FSDP / torch FSDP2) projected as the dense parameters sharded "
                    "over dp x cp / N (experts and --outer-dp-sharding-strategy not modelled)"
                    if sharding != "optimizer" else ""))
    return instances


def muon_layer_wise_dist_opt(a: dict[str, Any]) -> bool:
    """``--optimizer muon`` / ``dist_muon`` with ``--use-distributed-optimizer`` (no FSDP): Megatron-LM >=
    core_v0.18.0 runs the layer-wise distributed optimizer, ``dist_muon``'s (5b512b45d1, 2026-04-02,
    ``arguments.py`` validate_args: ``use_layer_wise_distributed_optimizer = True``, ``use_distributed_optimizer =
    False``); earlier releases assert "Muon optimizer does not support distributed optimizer"."""
    return (str(get(a, "optimizer")) in ("muon", "dist_muon") and bool(get(a, "use_distributed_optimizer"))
            and not get(a, "use_torch_fsdp2") and not get(a, "use_megatron_fsdp"))


def _muon(a: dict[str, Any], rep: _Report, validate: bool) -> dict:
    """``--optimizer muon`` / ``dist_muon`` and the ``--muon-*`` flags -> the plan's ``training.muon_*`` fields
    (Megatron-LM 2edffadb52 ``arguments.py`` validate_args: no FSDP, no overlap with plain muon;
    ``optimizer/muon.py``: no fp16; d98e8a64dd: ``--use-distributed-optimizer`` makes it layer-wise, as dist_muon).  The knobs that change no time or memory
    (momentum, Nesterov, scale mode and factor, coefficient type) are neutral in the flag table."""
    opt = str(get(a, "optimizer"))
    # Megatron-LM d98e8a64dd arguments.py ('emerging optimizer check'): dist_muon is the deprecated spelling of
    # --optimizer muon --use-distributed-optimizer, both the layer-wise distributed optimizer
    # (use_layer_wise_distributed_optimizer; use_distributed_optimizer turned off); 2edffadb52 asserted on the latter
    layer_wise = opt == "dist_muon" or bool(get(a, "use_distributed_optimizer"))
    if opt == "muon" and layer_wise:
        rep.note("--optimizer muon with --use-distributed-optimizer: the layer-wise distributed optimizer "
                 "(Megatron-LM d98e8a64dd; dist_muon's newer spelling), priced as dist_muon")
    if validate:
        for dest, why in (("use_torch_fsdp2", "Muon optimizer does not support Torch-FSDP2"),
                          ("use_megatron_fsdp", "Muon optimizer does not support Megatron-FSDP"),
                          ("fp16", "muon with fp16 is not supported")):
            if get(a, dest):
                raise PlanError(BY_DEST[dest].flag, True, f"not with --optimizer {opt} (Megatron asserts: {why})")
        if not layer_wise and (get(a, "overlap_grad_reduce") or get(a, "overlap_param_gather")):
            raise PlanError("--overlap-grad-reduce" if get(a, "overlap_grad_reduce") else "--overlap-param-gather",
                            True, "not with --optimizer muon (Megatron asserts; use dist_muon)")
    out: dict[str, Any] = {"muon_layer_wise": layer_wise}
    steps = get(a, "muon_num_ns_steps")
    try:
        n = int(str(steps))
    except ValueError:
        n = 0
    if isinstance(steps, bool) or not 1 <= n <= 10_000:
        raise PlanError("--muon-num-ns-steps", steps, "an integer between 1 and 10000")
    out["muon_num_ns_steps"] = n
    for dest, flag, allowed in (("muon_tp_mode", "--muon-tp-mode", ("blockwise", "duplicated", "distributed")),
                                ("muon_fp32_matmul_prec", "--muon-fp32-matmul-prec", ("medium", "high", "highest")),
                                ("muon_scalar_optimizer", "--muon-scalar-optimizer", ("adam", "lion"))):
        v = str(get(a, dest))
        if dest == "muon_fp32_matmul_prec" and v == "low":
            # Megatron-LM's parser offers low, medium, high; torch.set_float32_matmul_precision('low') warns ("low is
            # not one of 'highest', 'high', or 'medium'; ... has no effect") and the GEMMs run at the current precision,
            # torch's default 'highest' (Megatron-LM sets none)
            rep.flag(flag, v, "time: torch ignores 'low' (not a float32 matmul precision) and keeps its default "
                              "'highest': priced as highest")
            v = "highest"
        if v not in allowed:
            raise PlanError(flag, v, "one of " + ", ".join(allowed + (("low",) if flag == "--muon-fp32-matmul-prec"
                                                                     else ())))
        out[dest] = v
    out["muon_split_qkv"] = bool(get(a, "muon_split_qkv"))
    if out["muon_fp32_matmul_prec"] == "highest":
        rep.flag("--muon-fp32-matmul-prec", "highest", "time: the Newton-Schulz GEMMs in true fp32 priced as TF32 "
                                                        "(half the bf16 peak); slower in fact")
    if get(a, "use_precision_aware_optimizer"):
        rep.flag("--use-precision-aware-optimizer", True, "memory: Megatron's Muon path does not support the "
                 "precision-aware optimizer; its state dtypes are not applied (fp32 masters and states priced)")
    if layer_wise and get(a, "overlap_param_gather"):
        rep.flag("--overlap-param-gather", True, "time: dist_muon's parameter all-gather deferred to the forward "
                 "pre-hooks (async_allgather) priced exposed after the optimizer step")
    return out


def _recompute(a: dict[str, Any], rep: _Report) -> dict:
    """Megatron recompute arguments -> plan.training.recompute (validate_args rules kept)."""
    from primus_launch.plan import RECOMPUTE_MODULES

    gran = a.get("recompute_granularity") or "none"
    if get(a, "recompute_activations"):
        gran = "selective"  # validate_args: --recompute-activations = selective
    method, rnl = a.get("recompute_method"), a.get("recompute_num_layers")
    if get(a, "checkpoint_activations"):  # deprecated: full, uniform, 1 layer
        gran, method, rnl = "full", method or "uniform", rnl or 1
    if gran not in ("none", "selective", "full"):
        raise PlanError("--recompute-granularity", gran, "one of full, selective")
    modules = list(a.get("recompute_modules") or [])
    if get(a, "moe_layer_recompute"):  # deprecated: selective recompute of the MoE layer
        gran = "selective" if gran == "none" else gran
        modules = (modules or ["core_attn"]) + ["moe"]
    if gran == "full":
        if method not in ("uniform", "block"):
            raise PlanError("--recompute-method", method, "uniform or block (required with --recompute-granularity full)")
        if rnl is None:
            raise PlanError("--recompute-num-layers", None, "required with --recompute-granularity full")
    elif gran == "selective" and method is not None:
        raise PlanError("--recompute-method", method, "must be unset with --recompute-granularity selective")
    kept = [m for m in modules if m in RECOMPUTE_MODULES]
    dropped = [m for m in modules if m not in RECOMPUTE_MODULES]
    if dropped and gran == "selective":
        rep.flag("--recompute-modules", dropped, "memory, time: recompute of these modules is not modelled")
    return dict(granularity=gran, method=method if gran == "full" else "uniform",
                num_layers=rnl if gran == "full" else None,
                modules=tuple(dict.fromkeys(kept)) if (gran == "selective" and modules) else ("core_attn",))


def _offload(a: dict[str, Any], num_layers: int, rep: _Report) -> dict:
    from primus_launch.plan import OFFLOAD_MODULES

    n = a.get("cpu_offloading_num_layers") or 0
    acts = bool(get(a, "cpu_offloading_activations"))
    weights = bool(get(a, "cpu_offloading_weights")) and (n > 0 or bool(get(a, "cpu_offloading")))
    mods: list[str] = []
    if get(a, "fine_grained_activation_offloading"):
        mods = list(a.get("offload_modules") or [])
        bad = [m for m in mods if m not in OFFLOAD_MODULES]
        if bad:
            rep.flag("--offload-modules", bad, "memory, time: offloading of these modules is not modelled")
        mods = [m for m in mods if m in OFFLOAD_MODULES]
    frac = float(get(a, "optimizer_offload_fraction")) if get(a, "optimizer_cpu_offload") else 0.0
    # Megatron-LM dev optimizer_config.py: the deprecated --offload-optimizer-states turns the chunked mode on
    # (with the tuning flags' defaults, chunk 0 and fraction 1.0, unless those are set)
    chunked = bool(get(a, "chunked_optimizer_state_offload")) or bool(get(a, "offload_optimizer_states"))
    state_frac = float(get(a, "optimizer_state_offload_fraction")) if chunked else 0.0
    chunk_mb = int(get(a, "optimizer_state_offload_chunk_size_mb") or 0) if chunked else 0
    if chunked and not 0.0 <= state_frac <= 1.0:
        raise PlanError("--optimizer-state-offload-fraction", state_frac, "a fraction in [0, 1]")
    if chunked and chunk_mb < 0:
        raise PlanError("--optimizer-state-offload-chunk-size-mb", chunk_mb, "a non-negative integer (MiB)")
    if state_frac > 0 and frac > 0:
        raise PlanError("--chunked-optimizer-state-offload", True,
                        "not with --optimizer-cpu-offload (Megatron-LM: the two offload modes are mutually exclusive)")
    return dict(activation_layers=min(n, num_layers) if acts else 0, weights=weights,
                activation_modules=tuple(dict.fromkeys(mods)), optimizer_fraction=frac,
                optimizer_state_fraction=state_frac, optimizer_state_chunk_mb=chunk_mb if state_frac > 0 else 0)


def _attention_backend(a: dict[str, Any]) -> str:
    """``training.attention_backend``: Megatron's ``--attention-backend``, and ``local`` (the megatron-core local
    spec, its unfused ``DotProductAttention`` with materialised ``s x s`` scores) whenever ``--transformer-impl
    local``: Megatron-LM d98e8a64dd ``gpt_builders.py`` (``use_te = args.transformer_impl ==
    "transformer_engine"``, else ``get_gpt_layer_local_spec``) and ``megatron/core/models/backends.py``
    (``LocalSpecProvider.core_attention`` returns ``DotProductAttention`` whatever ``--attention-backend`` says)."""
    v = str(get(a, "attention_backend")).split(".")[-1]
    if v not in ("auto", "flash", "fused", "unfused", "local"):
        raise PlanError("--attention-backend", v, "one of auto, flash, fused, unfused, local")
    if str(get(a, "transformer_impl")) == "local":
        return "local"
    return v


def _expert_gemm(a: dict[str, Any]) -> str:
    """``training.moe_expert_gemm`` from Megatron's arguments: ``legacy`` with --moe-use-legacy-grouped-gemm;
    ``te_fused`` with --use-transformer-engine-op-fuser and --moe-grouped-gemm: Megatron-LM main (cd4afffa, the
    Megatron-Bridge 26.08 pin) ``megatron/core/transformer/moe/experts.py`` ``TEGroupedMLP.__init__`` asserts
    ``_is_fused_impl_supported()`` when the op fuser is on (true for a GLU activation only with
    ``NVTE_CUTEDSL_FUSED_GROUPED_MLP`` > 0, so a run that started runs it) and ``forward`` returns
    ``_fused_forward`` (TE ``ops.GroupedLinear -> ScaledSwiGLU / ScaledClampedQGeGLU -> GroupedLinear(scale_bias)``,
    fused by ``transformer_engine/pytorch/ops/fused/grouped_mlp.py`` into cudnn-frontend's CuTeDSL grouped GEMM
    kernels); else ``te`` (TE GroupedLinear)."""
    if get(a, "moe_use_legacy_grouped_gemm"):
        return "legacy"
    if get(a, "use_transformer_engine_op_fuser") and get(a, "moe_grouped_gemm"):
        return "te_fused"
    return "te"


def _token_drop(a: dict[str, Any]) -> dict:
    """Token drop (megatron-core ``TransformerConfig``): --moe-expert-capacity-factor (a negative factor is
    dropless: ``__post_init__`` sets it to None) and --moe-pad-expert-input-to-capacity, which Megatron refuses
    without a capacity factor ("moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity")."""
    cap = get(a, "moe_expert_capacity_factor")
    cap = None if cap is None or float(cap) < 0 else float(cap)
    pad = bool(get(a, "moe_pad_expert_input_to_capacity"))
    if cap == 0:
        raise PlanError("--moe-expert-capacity-factor", 0, "a positive factor (negative: dropless)")
    if pad and cap is None:
        raise PlanError("--moe-pad-expert-input-to-capacity", True,
                        "requires --moe-expert-capacity-factor (Megatron's TransformerConfig refuses it without)")
    return dict(moe_expert_capacity_factor=cap, moe_pad_expert_input_to_capacity=pad)


def _static_moe(a: dict[str, Any]) -> dict:
    """Static-shape MoE of megatron main / dev (memory.paged_stash): --moe-expert-rank-capacity-factor,
    --moe-paged-stash (Megatron's TransformerConfig asserts the capacity factor is set with it) and
    --moe-paged-stash-buffer-size-factor-cuda."""
    cap = get(a, "moe_expert_rank_capacity_factor")
    paged = bool(get(a, "moe_paged_stash"))
    if cap is not None and float(cap) <= 0:
        raise PlanError("--moe-expert-rank-capacity-factor", cap, "a positive factor")
    if paged and cap is None:
        raise PlanError("--moe-paged-stash", True, "requires --moe-expert-rank-capacity-factor (Megatron asserts)")
    return dict(moe_expert_rank_capacity_factor=None if cap is None else float(cap), moe_paged_stash=paged,
                moe_paged_stash_buffer_factor=float(get(a, "moe_paged_stash_buffer_size_factor_cuda")))


def _cuda_graph(a: dict[str, Any], rep: _Report) -> dict:
    """--cuda-graph-impl (none, local, transformer_engine; main: full_iteration), the deprecated
    --enable-cuda-graph (local) / --external-cuda-graph (transformer_engine), and the scope
    (--cuda-graph-scope, main's --cuda-graph-modules; "full" = whole layers)."""
    from primus_launch.plan import CUDA_GRAPH_SCOPES

    impl = str(get(a, "cuda_graph_impl"))
    scope = [str(x).split(".")[-1] for x in (a.get("cuda_graph_scope") or a.get("cuda_graph_modules") or [])]
    if get(a, "enable_cuda_graph"):
        impl = "local"
    elif get(a, "external_cuda_graph"):
        impl = "transformer_engine"
    if impl == "full_iteration":
        impl, scope = "local", ["full_iteration"]
    if impl not in ("none", "local", "transformer_engine"):
        raise PlanError("--cuda-graph-impl", impl, "one of none, local, transformer_engine, full_iteration")
    scope = [s for s in scope if s != "full"]
    bad = [s for s in scope if s not in CUDA_GRAPH_SCOPES]
    if bad:
        rep.flag("--cuda-graph-scope", bad, "time: graph capture of these scopes is not modelled")
    scope = [s for s in scope if s in CUDA_GRAPH_SCOPES]
    if impl == "none":
        scope = []
    return dict(cuda_graph_impl=impl, cuda_graph_scope=tuple(dict.fromkeys(scope)),
                cuda_graph_warmup_steps=max(0, int(get(a, "cuda_graph_warmup_steps") or 0)))


def build_plan(model: dict, parallel: dict, training: dict, cluster: Cluster, validate: bool = True) -> Plan:
    """Validate into a Plan; errors are re-raised naming the Megatron flag.

    ``validate=False`` skips only the cross-field legality rules (used for intermediate states).
    """
    try:
        offload = training.get("offload", {})
        parts = dict(model=_section("model", lambda: ModelArch(**model)),
                     parallel=_section("parallel", lambda: Parallelism(**parallel)),
                     training=_section("training", lambda: Training(**{
                         **training, "recompute": _section("training.recompute", lambda: Recompute(**training["recompute"])),
                         "offload": offload if isinstance(offload, Offload) else
                         _section("training.offload", lambda: Offload(**offload))})),
                     cluster=cluster)
        return Plan(**parts) if validate else Plan.model_construct(**parts)
    except PlanError as e:
        raise PlanError(FIELD_FLAGS.get(e.field, e.field), e.value, e.allowed) from None
    except ValidationError as e:
        raise _named(e, "") from None


#: the Megatron flag of a plan field where a bound of the field's own type is broken (``--tensor-model-parallel-size 0``:
#: "Input should be greater than 0") and the flag is not ``--`` + the field's name: where the value is the field's
#: own (a count of virtual stages, not of layers per stage)
CONSTRAINT_FLAGS = {**FIELD_FLAGS, "parallel.vpp": "--num-virtual-stages-per-pipeline-rank", "model.head_dim": "--kv-channels"}


def _flag_of(field: str) -> str:
    """The Megatron flag a plan field (``section.name``) is read from: :data:`CONSTRAINT_FLAGS`, else ``--`` + the
    name where Megatron-LM has that flag, else the plan's own name."""
    if field in CONSTRAINT_FLAGS:
        return CONSTRAINT_FLAGS[field]
    from primus_launch.adapters.megatron_flags import by_option

    flag = "--" + field.rpartition(".")[2].replace("_", "-")
    return flag if by_option().get(flag) is not None else field


def _named(e: ValidationError, section: str) -> Exception:
    """One line for a plan section's validation error, naming the Megatron flag (``tp=0`` was the plan's name)."""
    for err in e.errors():
        ctx = (err.get("ctx") or {}).get("error")
        if isinstance(ctx, PlanError):
            return PlanError(FIELD_FLAGS.get(ctx.field, ctx.field), ctx.value, ctx.allowed)
    err = e.errors()[0]
    loc = ".".join(str(x) for x in err.get("loc", ()))
    name = _flag_of(f"{section}.{loc}") if section and loc and "." not in loc else f"{section}.{loc}".strip(".")
    return UserError(f"{name}={err.get('input')!r}: {err.get('msg')}")


def _section(section: str, build: Any) -> Any:
    """``build()`` (one plan section), its validation error named by the Megatron flag (:func:`_named`)."""
    try:
        return build()
    except ValidationError as e:
        raise _named(e, section) from None


# --------------------------------------------------------------------------- plan -> args
def changed_args(old: Plan, new: Plan, current: dict[str, Any], present: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The Megatron arguments whose :func:`desired_args` value differs between the plan a recipe reads as
    (``old``) and the plan to write (``new``): what a tuned-recipe writer must edit."""
    d0, d1 = desired_args(old, current, present), desired_args(new, current, present)
    return {k: v for k, v in d1.items() if d0.get(k) != v}


def desired_args(plan: Plan, current: dict[str, Any], present: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Megatron argument values expressing ``plan``'s tunable fields, in the script's own idiom.

    ``current`` holds the script's present values; the representation it already uses is kept
    (e.g. ``--num-layers-per-virtual-pipeline-stage`` vs ``--num-virtual-stages-per-pipeline-rank``).
    ``present`` names keys written in the recipe even with an empty value (YAML ``key: null``).
    Only dests whose meaning differs from ``current`` need editing; the caller compares.
    """
    p, t, m = plan.parallel, plan.training, plan.model
    out: dict[str, Any] = {
        "tensor_model_parallel_size": p.tp, "pipeline_model_parallel_size": p.pp,
        "context_parallel_size": p.cp, "expert_model_parallel_size": p.ep,
        "micro_batch_size": t.micro_batch_size, "global_batch_size": t.global_batch_size,
        "overlap_grad_reduce": t.overlap_grad_reduce, "overlap_param_gather": t.overlap_param_gather,
        "tp_comm_overlap": t.tp_comm_overlap, "train_iters": t.train_iters,
        # Megatron refuses the deferral without pipeline parallelism (model_parallel_config.py)
        "defer_embedding_wgrad_compute": t.defer_embedding_wgrad and p.pp > 1,
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "seq_length": m.seq_length,
        "num_attention_heads": m.num_attention_heads,
    }
    if (t.defer_embedding_wgrad and p.pp > 1 and t.wgrad_deferral_limit) or current.get("wgrad_deferral_limit") is not None:
        out["wgrad_deferral_limit"] = t.wgrad_deferral_limit
    if m.is_moe:
        out["num_experts"] = m.num_experts
        out["moe_router_topk"] = m.moe_router_topk
    if p.etp is not None or current.get("expert_tensor_parallel_size") is not None:
        out["expert_tensor_parallel_size"] = p.etp if p.etp is not None else p.tp
    # sequence parallel: keep an inert flag at TP=1 (Megatron ignores it there)
    out["sequence_parallel"] = p.sequence_parallel or (p.tp == 1 and bool(current.get("sequence_parallel")))
    # data-parallel sharding: the distributed optimizer (ZeRO-1), or Megatron-FSDP for "full" with the
    # flags its user guide requires (--use-megatron-fsdp --data-parallel-sharding-strategy
    # optim_grads_params --no-gradient-accumulation-fusion --use-distributed-optimizer
    # --ckpt-format fsdp_dtensor; the fusion flag is the plan's own field, which the tuner turns off with it:
    # tuner/knobs.py apply_knobs); a script already on torch FSDP2 stays on it where Megatron allows
    # (plan/legality.py torch_fsdp2_problems: e.g. no --overlap-param-gather with torch FSDP2).
    strategies = {"full": "optim_grads_params", "optimizer_grads": "optim_grads", "optimizer": "optim",
                  "none": "no_shard"}
    if current.get("use_megatron_fsdp") or current.get("use_custom_fsdp"):  # (its spelling before af28b5a)
        out["data_parallel_sharding_strategy"] = strategies[p.dp_sharding]
    elif (current.get("use_torch_fsdp2") or (p.dp_sharding == "full" and p.fsdp_impl == "torch_fsdp2")) \
            and p.dp_sharding != "optimizer_grads" and not (
            p.dp_sharding == "full" and torch_fsdp2_problems(plan)):  # else: Megatron-FSDP (plan/legality.py)
        out["use_torch_fsdp2"] = p.dp_sharding == "full"
        out["use_distributed_optimizer"] = p.dp_sharding == "optimizer"
        if out["use_torch_fsdp2"]:  # validate_args: torch FSDP2 refuses gradient accumulation fusion
            out["gradient_accumulation_fusion"] = False
    else:
        out["use_distributed_optimizer"] = p.dp_sharding in ("optimizer", "optimizer_grads", "full") or (
            t.optimizer == "muon" and t.muon_layer_wise and muon_layer_wise_dist_opt(current))  # >= 0.18 dist_muon
        if p.dp_sharding in ("full", "optimizer_grads"):
            out.update(use_megatron_fsdp=True, data_parallel_sharding_strategy=strategies[p.dp_sharding],
                       ckpt_format="fsdp_dtensor")
            if current.get("use_torch_fsdp2"):
                out["use_torch_fsdp2"] = False
    # the partial distributed optimizer's instances (the tuner keeps a Megatron plan's dp_replicate or sets 1)
    if p.dp_replicate > 1 or current.get("num_distributed_optimizer_instances") is not None:
        out["num_distributed_optimizer_instances"] = p.dp_replicate
    # --no-gradient-accumulation-fusion: the plan's (a Megatron-FSDP or torch FSDP2 switch above turns it off)
    out.setdefault("gradient_accumulation_fusion", t.gradient_accumulation_fusion)
    if current.get("torch_fsdp2_reshard_after_forward") is not None or p.fsdp_reshard_after_forward == "never":
        out["torch_fsdp2_reshard_after_forward"] = p.fsdp_reshard_after_forward != "never"
    # context parallel kind (a one-element list; Megatron's default p2p stays unwritten)
    out["cp_comm_type"] = [p.cp_comm_type] if (p.cp_comm_type != "p2p" or current.get("cp_comm_type")) else None
    # pipeline layout: a layout string places every layer (and sets vpp); else first/last + vpp flags
    out["pipeline_model_parallel_layout"] = p.pipeline_layout if p.pp > 1 or p.pipeline_layout else None
    out["account_for_embedding_in_pipeline_split"] = p.account_for_embedding_in_pipeline_split and not p.pipeline_layout
    out["account_for_loss_in_pipeline_split"] = p.account_for_loss_in_pipeline_split and not p.pipeline_layout
    out["decoder_first_pipeline_num_layers"] = p.pipeline_layers_first_stage if p.pp > 1 else None
    out["decoder_last_pipeline_num_layers"] = p.pipeline_layers_last_stage if p.pp > 1 else None
    out["microbatch_group_size_per_vp_stage"] = p.microbatch_group if p.pp > 1 and p.vpp > 1 else None
    uneven = out["decoder_first_pipeline_num_layers"] is not None or out["decoder_last_pipeline_num_layers"] is not None
    vpp_keys = ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                "virtual_pipeline_model_parallel_size")
    for k in vpp_keys:
        out[k] = None
    if p.vpp > 1 and not p.pipeline_layout:
        used = next((k for k in vpp_keys if current.get(k) is not None), None)
        used = used or next((k for k in vpp_keys if k in present), None)
        if uneven and used == "num_layers_per_virtual_pipeline_stage":
            used = "num_virtual_stages_per_pipeline_rank"
        used = used or ("num_virtual_stages_per_pipeline_rank" if uneven else "num_layers_per_virtual_pipeline_stage")
        slots = m.num_layers + out["account_for_embedding_in_pipeline_split"] + out["account_for_loss_in_pipeline_split"]
        out[used] = (slots // p.pp) // p.vpp if used == "num_layers_per_virtual_pipeline_stage" else p.vpp
    if t.pipeline_schedule not in ("1f1b", "interleaved_1f1b"):
        raise PlanError("training.pipeline_schedule", t.pipeline_schedule,
                        "Megatron-LM runs 1f1b, or interleaved 1f1b when vpp > 1")
    # recompute
    r = t.recompute
    if r.method == "layer_ids":
        raise PlanError("training.recompute.method", r.method, "uniform or block in Megatron-LM (recompute_layer_ids "
                        "is AMD Primus's: write the plan as a Primus experiment)")
    out["recompute_activations"] = False if r.granularity != "selective" else bool(current.get("recompute_activations"))
    if r.granularity == "none":
        out.update(recompute_granularity=None, recompute_method=None, recompute_num_layers=None)
    elif r.granularity == "selective":
        out.update(recompute_granularity=None if out["recompute_activations"] else "selective",
                   recompute_method=None, recompute_num_layers=None)
    else:
        out.update(recompute_granularity="full", recompute_method=r.method,
                   recompute_num_layers=r.num_layers if r.num_layers is not None else
                   (1 if r.method == "uniform" else max(plan.layers_per_stage()) // p.vpp))
    if r.granularity == "selective":
        mods = [x for x in r.modules if not (current.get("moe_layer_recompute") and x == "moe")]
        if current.get("moe_layer_recompute"):
            out["moe_layer_recompute"] = "moe" in r.modules
        out["recompute_modules"] = mods if (mods != ["core_attn"] or current.get("recompute_modules")) else None
    else:
        out["recompute_modules"] = None
        if current.get("moe_layer_recompute"):
            out["moe_layer_recompute"] = False
    # offloading (Megatron-LM 0.16/main flags; the weights switch is a TransformerConfig field only)
    o = t.offload
    out["cpu_offloading_num_layers"] = o.activation_layers or (0 if current.get("cpu_offloading_num_layers") is not None else None)
    if current.get("cpu_offloading_weights") is not None or "cpu_offloading_weights" in present or o.weights:
        out["cpu_offloading_weights"] = o.weights
    out["fine_grained_activation_offloading"] = bool(o.activation_modules)
    out["offload_modules"] = list(o.activation_modules) or None
    out["optimizer_cpu_offload"] = o.optimizer_fraction > 0
    out["optimizer_offload_fraction"] = (o.optimizer_fraction if o.optimizer_fraction not in (0.0, 1.0)
                                         or current.get("optimizer_offload_fraction") is not None else None)
    if o.optimizer_fraction == 0 and current.get("optimizer_offload_fraction") is not None:
        out["optimizer_offload_fraction"] = current["optimizer_offload_fraction"]
    # chunked optimizer-state offload (Megatron-LM dev): a recipe's deprecated --offload-optimizer-states is kept
    # while the offload stays on, both switches go when it is turned off
    on, legacy = o.optimizer_state_fraction > 0, bool(current.get("offload_optimizer_states"))
    if on or legacy or current.get("chunked_optimizer_state_offload"):
        out["offload_optimizer_states"] = on and legacy
        out["chunked_optimizer_state_offload"] = on and (not legacy or bool(current.get("chunked_optimizer_state_offload")))
        had_f, had_c = (current.get(k) is not None for k in ("optimizer_state_offload_fraction",
                                                              "optimizer_state_offload_chunk_size_mb"))
        out["optimizer_state_offload_fraction"] = (
            (o.optimizer_state_fraction if (o.optimizer_state_fraction != 1.0 or had_f) else None) if on
            else current.get("optimizer_state_offload_fraction"))
        out["optimizer_state_offload_chunk_size_mb"] = (
            (o.optimizer_state_chunk_mb if (o.optimizer_state_chunk_mb or had_c) else None) if on
            else current.get("optimizer_state_offload_chunk_size_mb"))
    # precision
    lowp_base = t.lowp_params_dtype or ("fp16" if current.get("fp16") else "bf16")  # fp8 / fp4 over this dtype
    out["bf16"] = t.precision == "bf16" or (t.precision in ("fp8", "fp4") and lowp_base == "bf16")
    out["fp16"] = t.precision == "fp16" or (t.precision in ("fp8", "fp4") and lowp_base == "fp16")
    out["fp8"] = (current.get("fp8") or "hybrid") if t.precision == "fp8" else None
    out["fp8_recipe"] = (t.fp8_recipe if t.precision == "fp8" else
                         t.optimizer_fp8_recipe if t.precision_aware_optimizer and t.precision != "fp4" else None)
    if t.precision == "fp8" and t.fp8_recipe is None and current.get("fp8_recipe") not in FP8_RECIPES_READ:
        out["fp8_recipe"] = current.get("fp8_recipe")  # a recipe the plan does not name (reported): kept as written
    out["fp8_param_gather"] = t.fp8_param_gather and t.precision == "fp8"
    if t.fp8_attention or current.get("fp8_dot_product_attention") is not None:
        out["fp8_dot_product_attention"] = t.fp8_attention and t.precision == "fp8"
    out["fp4"] = "e2m1" if t.precision == "fp4" else None
    out["fp4_recipe"] = t.fp4_recipe if t.precision == "fp4" and (t.fp4_recipe != "nvfp4" or current.get("fp4_recipe")) else None
    if t.precision == "fp4" and t.fp4_recipe is None and current.get("fp4_recipe") not in (None, "nvfp4"):
        out["fp4_recipe"] = current.get("fp4_recipe")  # e.g. Primus mxfp4 (reported, priced as nvfp4): kept as written
    out["fp4_param"] = t.fp8_param_gather and t.precision == "fp4"
    lowp, s_, e_ = t.precision in ("fp8", "fp4"), t.bf16_layers_start, t.bf16_layers_end
    if lowp and (s_ or e_):
        out["first_last_layers_bf16"] = True
        for dest, n in (("num_layers_at_start_in_bf16", s_), ("num_layers_at_end_in_bf16", e_)):
            out[dest] = n if (n != 1 or current.get(dest) is not None) else None   # TransformerConfig default 1
    elif lowp and current.get("first_last_layers_bf16") and any(
            1 if current.get(d) is None else current.get(d)
            for d in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16")):
        out["first_last_layers_bf16"] = False
    out["use_precision_aware_optimizer"] = t.precision_aware_optimizer
    for dest in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"):
        v = getattr(t, dest) if t.precision_aware_optimizer else "fp32"
        out[dest] = v if (v != "fp32" or current.get(dest) is not None) else None
    # kernels, CUDA graphs
    # --transformer-impl local builds the local spec whatever --attention-backend says (_attention_backend): never
    # written there (the plan's "local" is the layers', not a backend flag)
    if str(current.get("transformer_impl") or "").split(".")[-1] != "local":
        out["attention_backend"] = t.attention_backend if (t.attention_backend != "auto" or current.get("attention_backend")) else None
    out["cross_entropy_loss_fusion"] = t.cross_entropy_loss_fusion
    if t.cross_entropy_loss_fusion and (t.cross_entropy_fusion_impl != "native" or current.get("cross_entropy_fusion_impl")):
        out["cross_entropy_fusion_impl"] = t.cross_entropy_fusion_impl
    out["apply_rope_fusion"] = t.rope_fusion
    out["create_attention_mask_in_dataloader"] = t.dataloader_attention_mask
    legacy = "enable_cuda_graph" if current.get("enable_cuda_graph") else "external_cuda_graph" if current.get("external_cuda_graph") else None
    legacy_impl = {"enable_cuda_graph": "local", "external_cuda_graph": "transformer_engine"}.get(legacy or "")
    if legacy and t.cuda_graph_impl == legacy_impl:
        out[legacy] = True
        out["cuda_graph_impl"] = None
    else:
        out["enable_cuda_graph"] = out["external_cuda_graph"] = False
        out["cuda_graph_impl"] = t.cuda_graph_impl if (t.cuda_graph_impl != "none" or current.get("cuda_graph_impl")) else None
    scope_key = "cuda_graph_modules" if current.get("cuda_graph_modules") else "cuda_graph_scope"
    out[scope_key] = list(t.cuda_graph_scope) or None
    if t.cuda_graph_warmup_steps != 3 or current.get("cuda_graph_warmup_steps") is not None:
        out["cuda_graph_warmup_steps"] = t.cuda_graph_warmup_steps
    # MoE execution
    if m.is_moe:
        disp = t.moe_token_dispatcher
        if disp in ("deepep", "hybridep"):
            out["moe_token_dispatcher_type"] = "flex"
            if current.get("moe_enable_deepep") and disp == "deepep":
                out["moe_enable_deepep"] = True
            else:
                out["moe_enable_deepep"] = False
                out["moe_flex_dispatcher_backend"] = disp if (disp == "hybridep" or current.get("moe_flex_dispatcher_backend")) else None
        else:
            out["moe_enable_deepep"] = False
            out["moe_flex_dispatcher_backend"] = None
            out["moe_token_dispatcher_type"] = disp if (disp != "allgather" or current.get("moe_token_dispatcher_type")) else None
        for dest in ("moe_grouped_gemm", "moe_permute_fusion", "moe_router_force_load_balancing",
                     "overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "moe_shared_expert_overlap",
                     "moe_router_fusion"):
            out[dest] = bool(getattr(t, dest))
        # Primus <= v25.10 runs its Turbo grouped MLP on the legacy path (and its sync-free stages 2-3 require
        # moe_use_legacy_grouped_gemm): a turbo plan keeps the switch as the recipe has it
        out["moe_use_legacy_grouped_gemm"] = t.moe_expert_gemm == "legacy" or (
            t.moe_expert_gemm == "turbo" and bool(current.get("moe_use_legacy_grouped_gemm")))
        if current.get("moe_router_padding_for_fp8") is not None and not t.moe_router_padding_for_quantization:
            out["moe_router_padding_for_fp8"] = False  # the deprecated alias, written off where it stands
        if (t.moe_router_padding_for_quantization and not current.get("moe_router_padding_for_fp8")) \
                or current.get("moe_router_padding_for_quantization") is not None:
            out["moe_router_padding_for_quantization"] = t.moe_router_padding_for_quantization
        if t.moe_expert_gemm == "te_fused" or current.get("use_transformer_engine_op_fuser") is not None:
            out["use_transformer_engine_op_fuser"] = t.moe_expert_gemm == "te_fused"
        out["moe_expert_rank_capacity_factor"] = t.moe_expert_rank_capacity_factor
        if t.moe_expert_capacity_factor is not None or current.get("moe_expert_capacity_factor") is not None:
            out["moe_expert_capacity_factor"] = t.moe_expert_capacity_factor
        if t.moe_pad_expert_input_to_capacity or current.get("moe_pad_expert_input_to_capacity") is not None:
            out["moe_pad_expert_input_to_capacity"] = t.moe_pad_expert_input_to_capacity
        out["moe_paged_stash"] = t.moe_paged_stash
        if t.moe_paged_stash_buffer_factor != 1.10 or current.get("moe_paged_stash_buffer_size_factor_cuda") is not None:
            out["moe_paged_stash_buffer_size_factor_cuda"] = t.moe_paged_stash_buffer_factor
        lb = current.get("moe_router_load_balancing_type")
        if not t.moe_router_aux_loss:
            out["moe_router_load_balancing_type"] = ["none"]
        elif lb and all(str(x) == "none" for x in (lb if isinstance(lb, list) else [lb])):
            out["moe_router_load_balancing_type"] = ["aux_loss"]
        if t.moe_router_fp32:
            out["moe_router_dtype"] = current.get("moe_router_dtype") if current.get("moe_router_dtype") in ("fp32", "fp64") \
                else "fp32"
        elif current.get("moe_router_dtype"):
            out["moe_router_dtype"] = None
    return out
