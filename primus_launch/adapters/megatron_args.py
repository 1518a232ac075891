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

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from primus_launch.errors import UserError
from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, PlanError, Recompute, Training


@dataclass(frozen=True)
class Flag:
    """One Megatron argument: ``kind`` is int | str | true (store_true) | false (store_false)."""

    flag: str
    dest: str
    kind: str
    default: Any = None
    group: str = ""


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
    # parallelism
    _f("--tensor-model-parallel-size", default=1, group="parallel"),
    _f("--pipeline-model-parallel-size", default=1, group="parallel"),
    _f("--num-layers-per-virtual-pipeline-stage", group="parallel"),
    _f("--num-virtual-stages-per-pipeline-rank", group="parallel"),
    _f("--virtual-pipeline-model-parallel-size", group="parallel"),  # YAML (TransformerConfig) name
    _f("--decoder-first-pipeline-num-layers", group="parallel"),
    _f("--decoder-last-pipeline-num-layers", group="parallel"),
    _f("--pipeline-model-parallel-layout", "str", group="parallel"),
    _f("--context-parallel-size", default=1, group="parallel"),
    _f("--expert-model-parallel-size", default=1, group="parallel"),
    _f("--expert-tensor-parallel-size", group="parallel"),
    _f("--sequence-parallel", "true", group="parallel"),
    _f("--tp-comm-overlap", "true", group="parallel"),
    _f("--use-distributed-optimizer", "true", group="ddp"),
    _f("--use-torch-fsdp2", "true", group="ddp"),
    _f("--use-megatron-fsdp", "true", group="ddp"),
    _f("--data-parallel-sharding-strategy", "str", "no_shard", group="ddp"),
    _f("--no-gradient-accumulation-fusion", "false", group="ddp", dest="gradient_accumulation_fusion"),
    _f("--ckpt-format", "str", "torch_dist", group="checkpoint"),
    _f("--overlap-grad-reduce", "true", group="ddp"),
    _f("--overlap-param-gather", "true", group="ddp"),
    # training
    _f("--micro-batch-size", group="batch"),
    _f("--global-batch-size", group="batch"),
    _f("--train-iters", group="batch"),
    _f("--optimizer", "str", "adam", group="optim"),
    _f("--recompute-activations", "true", group="recompute"),
    _f("--recompute-granularity", "str", group="recompute"),
    _f("--recompute-method", "str", group="recompute"),
    _f("--recompute-num-layers", group="recompute"),
    # mixed precision
    _f("--bf16", "true", group="precision"),
    _f("--fp16", "true", group="precision"),
    _f("--fp8-format", "str", group="precision", dest="fp8"),
    _f("--grad-reduce-in-bf16", "true", group="precision"),
    _f("--accumulate-allreduce-grads-in-fp32", "true", group="precision"),
)
BY_FLAG: dict[str, Flag] = {f.flag: f for f in FLAGS}
BY_DEST: dict[str, Flag] = {f.dest: f for f in FLAGS}
# TransformerConfig-style names found in Megatron's experimental YAML (examples/gpt3/gpt_config.yaml)
YAML_ALIASES = {"num_moe_experts": "num_experts"}

# plan field -> the flag that sets it, for error messages
FIELD_FLAGS = {
    "parallel.tp": "--tensor-model-parallel-size", "parallel.pp": "--pipeline-model-parallel-size",
    "parallel.vpp": "--num-layers-per-virtual-pipeline-stage", "parallel.cp": "--context-parallel-size",
    "parallel.ep": "--expert-model-parallel-size", "parallel.etp": "--expert-tensor-parallel-size",
    "parallel.sequence_parallel": "--sequence-parallel",
    "parallel.pipeline_layers_first_stage": "--decoder-first-pipeline-num-layers",
    "parallel.pipeline_layers_last_stage": "--decoder-last-pipeline-num-layers",
    "parallel": "--tensor-model-parallel-size x --context-parallel-size x --pipeline-model-parallel-size",
    "training.global_batch_size": "--global-batch-size", "training.micro_batch_size": "--micro-batch-size",
    "training.recompute.num_layers": "--recompute-num-layers",
    "training.pipeline_schedule": "--num-layers-per-virtual-pipeline-stage",
    "model.moe_router_topk": "--moe-router-topk",
}

# Tokenizers whose vocabulary (len(tokenizer), what Megatron's HuggingFaceTokenizer reports) equals
# the embedding rows of the published checkpoint; source: each model's Hugging Face config.json
# ("vocab_size") and tokenizer.json.  Keys are matched case-insensitively on the last path part.
TOKENIZER_VOCAB: dict[str, tuple[int, str]] = {
    "llama-3.1-8b": (128256, "meta-llama/Llama-3.1-8B config.json vocab_size"),
    "llama-3.1-70b": (128256, "meta-llama/Llama-3.1-70B config.json vocab_size"),
    "llama-3.1-405b": (128256, "meta-llama/Llama-3.1-405B config.json vocab_size"),
    "meta-llama-3-8b": (128256, "meta-llama/Meta-Llama-3-8B config.json vocab_size"),
    "meta-llama-3-70b": (128256, "meta-llama/Meta-Llama-3-70B config.json vocab_size"),
    "llama-3.3-70b-instruct": (128256, "meta-llama/Llama-3.3-70B-Instruct config.json vocab_size"),
    "llama-2-7b-hf": (32000, "meta-llama/Llama-2-7b-hf config.json vocab_size"),
    "llama-2-70b-hf": (32000, "meta-llama/Llama-2-70b-hf config.json vocab_size"),
    "mixtral-8x22b-v0.1": (32768, "mistralai/Mixtral-8x22B-v0.1 config.json vocab_size"),
    "mixtral-8x7b-v0.1": (32000, "mistralai/Mixtral-8x7B-v0.1 config.json vocab_size"),
    "mistral-7b-v0.1": (32000, "mistralai/Mistral-7B-v0.1 config.json vocab_size"),
    "gpt2": (50257, "GPT-2 BPE vocab (openai-community/gpt2 config.json vocab_size)"),
}
GPT2_BPE_VOCAB = 50257  # GPT2BPETokenizer: gpt2-vocab.json, 50257 entries


def tokenizer_vocab(tokenizer_model: str | None, tokenizer_type: str | None) -> int | None:
    """Vocabulary size of a known tokenizer, or None."""
    if tokenizer_type == "GPT2BPETokenizer":
        return GPT2_BPE_VOCAB
    if not tokenizer_model:
        return None
    key = tokenizer_model.rstrip("/").split("/")[-1].lower()
    hit = TOKENIZER_VOCAB.get(key)
    return hit[0] if hit else None


# --------------------------------------------------------------------------- value conversion
def convert(flag: Flag, raw: Any) -> Any:
    """A Megatron value from a command-line string or a YAML scalar."""
    if raw is None:
        return None
    if flag.kind in ("true", "false"):
        if isinstance(raw, bool):
            return raw
        txt = str(raw).strip().lower()
        if txt in ("true", "1", "yes", "on"):
            return True
        if txt in ("false", "0", "no", "off", "null", "none", ""):
            return False
        raise PlanError(flag.flag, raw, "a boolean")
    if flag.kind == "int":
        if isinstance(raw, bool):
            raise PlanError(flag.flag, raw, "an integer")
        if isinstance(raw, int):
            return raw
        txt = str(raw).strip().strip("'\"")
        if txt.lower() in ("null", "none"):
            return None
        try:
            return int(txt)
        except ValueError:
            raise PlanError(flag.flag, str(raw), "an integer") from None
    txt = str(raw)
    return None if txt.lower() in ("null", "none") and flag.dest not in ("recompute_granularity",) else txt


def moe_dense_first(freq: Any, num_layers: int) -> int:
    """Leading dense layers of a ``--moe-layer-freq`` value (Megatron ``moe_freq_type``).

    ``1`` -> every layer MoE; a pattern like ``([0]*3+[1]*58)`` -> 3 dense layers then MoE layers.
    Other layouts (interleaved dense/MoE) are not modelled by the plan.
    """
    txt = str(freq).strip().strip("'\"")
    allowed = "1, or a list pattern of leading dense layers then MoE layers such as ([0]*3+[1]*58)"
    if "[" not in txt:
        if txt == "1":
            return 0
        raise PlanError("--moe-layer-freq", txt, allowed)
    if re.search(r"[^,\d\[\]\(\)\+\*\s]", txt):
        raise PlanError("--moe-layer-freq", txt, allowed)
    pattern = _eval_list_pattern(txt)
    if len(pattern) != num_layers:
        raise PlanError("--moe-layer-freq", txt, f"pattern length {len(pattern)} must equal --num-layers={num_layers}")
    k = 0
    while k < len(pattern) and pattern[k] == 0:
        k += 1
    if any(x != 1 for x in pattern[k:]):
        raise PlanError("--moe-layer-freq", txt, allowed)
    return k


def _eval_list_pattern(txt: str) -> list[int]:
    """Evaluate a list expression of ints, ``+``, ``*`` and brackets (the grammar moe_freq_type allows)."""
    import ast

    node = ast.parse(txt.replace(" ", ""), mode="eval").body

    def ev(n: ast.AST) -> Any:
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, (ast.List, ast.Tuple)):
            return [ev(e) for e in n.elts]
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Mult)):
            a, b = ev(n.left), ev(n.right)
            return a + b if isinstance(n.op, ast.Add) else a * b
        raise PlanError("--moe-layer-freq", txt, "a list pattern of 0/1 with + and *")

    out = ev(node)
    if not isinstance(out, list):
        raise PlanError("--moe-layer-freq", txt, "a list pattern of 0/1 with + and *")
    return out


# --------------------------------------------------------------------------- args -> plan
def _req(a: dict[str, Any], dest: str) -> Any:
    v = a.get(dest)
    if v is None:
        raise PlanError(BY_DEST[dest].flag, None, "required (Megatron-LM has no default)")
    return v


def get(a: dict[str, Any], dest: str) -> Any:
    """The value of ``dest`` or Megatron's default."""
    v = a.get(dest)
    return BY_DEST[dest].default if v is None else v


_POS = {"learned_absolute": "learned", "rope": "rope", "mrope": "rope", "none": "none"}
_NORM = {"LayerNorm": "layernorm", "RMSNorm": "rmsnorm"}


def plan_from_args(a: dict[str, Any], cluster: Cluster, name: str = "gpt", validate: bool = True) -> Plan:
    """Build the plan from Megatron argument values (``dest -> value``; absent = Megatron default)."""
    L = _req(a, "num_layers")
    h = _req(a, "hidden_size")
    heads = _req(a, "num_attention_heads")
    swiglu = bool(get(a, "swiglu"))
    ffn = a.get("ffn_hidden_size")
    if ffn is None:
        ffn = int((4 * h * 2 / 3) / 64) * 64 if swiglu else 4 * h
    pos = "rope" if get(a, "use_rotary_position_embeddings") else get(a, "position_embedding_type")
    if pos not in _POS:
        raise PlanError("--position-embedding-type", pos, "one of learned_absolute, rope, mrope, none")
    norm = get(a, "normalization")
    if norm not in _NORM:
        raise PlanError("--normalization", norm, "one of LayerNorm, RMSNorm")
    add_bias = bool(get(a, "add_bias_linear"))
    seq = _req(a, "seq_length")

    # vocabulary: --padded-vocab-size > --vocab-size > known tokenizer
    divisible = get(a, "make_vocab_size_divisible_by")
    if a.get("padded_vocab_size") is not None:
        vocab, divisible = a["padded_vocab_size"], 1
    elif a.get("vocab_size") is not None:
        vocab = a["vocab_size"]
        if a.get("tokenizer_type") in ("NullTokenizer", "NullMultimodalTokenizer"):
            vocab += 1  # megatron _NullTokenizer.vocab_size = vocab_size + 1 (EOD)
    else:
        vocab = tokenizer_vocab(a.get("tokenizer_model"), a.get("tokenizer_type"))
        if vocab is None:
            raise PlanError("--tokenizer-model", a.get("tokenizer_model") or a.get("tokenizer_type"),
                            "vocab size unknown: add --vocab-size N (known tokenizers: "
                            + ", ".join(sorted(TOKENIZER_VOCAB)) + ")")

    num_experts = a.get("num_experts") or None
    dense_first = moe_dense_first(get(a, "moe_layer_freq"), L) if num_experts else 0
    mla = bool(get(a, "multi_latent_attention"))
    model = dict(
        name=name, num_layers=L, hidden_size=h, ffn_hidden_size=ffn, num_attention_heads=heads,
        num_query_groups=get(a, "num_query_groups") if get(a, "group_query_attention") else None,
        head_dim=a.get("kv_channels"), vocab_size=vocab, make_vocab_size_divisible_by=divisible,
        seq_length=seq, max_position_embeddings=a.get("max_position_embeddings"), swiglu=swiglu,
        untie_embeddings_and_output_weights=bool(get(a, "untie_embeddings_and_output_weights")),
        normalization=_NORM[norm], add_bias_linear=add_bias,
        add_qkv_bias=add_bias or bool(get(a, "add_qkv_bias")), qk_layernorm=bool(get(a, "qk_layernorm")),
        position_embedding=_POS[pos], num_experts=num_experts,
        moe_router_topk=get(a, "moe_router_topk"), moe_ffn_hidden_size=(a.get("moe_ffn_hidden_size") or ffn) if num_experts else None,
        moe_shared_expert_intermediate_size=(a.get("moe_shared_expert_intermediate_size") or 0) if num_experts else 0,
        moe_dense_first_layers=dense_first, moe_router_bias=bool(get(a, "moe_router_enable_expert_bias")),
        moe_router_num_groups=a.get("moe_router_num_groups") if num_experts else None,
        moe_router_group_topk=a.get("moe_router_group_topk") if num_experts else None,
        multi_latent_attention=mla, q_lora_rank=a.get("q_lora_rank"), kv_lora_rank=get(a, "kv_lora_rank"),
        qk_head_dim=get(a, "qk_head_dim"), qk_pos_emb_head_dim=get(a, "qk_pos_emb_head_dim"),
        v_head_dim=get(a, "v_head_dim"),
    )

    tp, pp = get(a, "tensor_model_parallel_size"), get(a, "pipeline_model_parallel_size")
    if a.get("pipeline_model_parallel_layout") is not None:
        raise PlanError("--pipeline-model-parallel-layout", a["pipeline_model_parallel_layout"],
                        "not modelled; use --decoder-first/last-pipeline-num-layers and --num-virtual-stages-per-pipeline-rank")
    first, last = a.get("decoder_first_pipeline_num_layers"), a.get("decoder_last_pipeline_num_layers")
    vpp = 1
    if a.get("num_layers_per_virtual_pipeline_stage") is not None:
        n = a["num_layers_per_virtual_pipeline_stage"]
        if first is not None or last is not None:
            raise PlanError("--num-layers-per-virtual-pipeline-stage", n,
                            "use --num-virtual-stages-per-pipeline-rank with uneven pipeline stages")
        if n <= 0 or L % pp or (L // pp) % n:
            raise PlanError("--num-layers-per-virtual-pipeline-stage", n,
                            f"must divide layers per pipeline stage ({L}/{pp})")
        vpp = (L // pp) // n
    elif a.get("num_virtual_stages_per_pipeline_rank") is not None:
        vpp = a["num_virtual_stages_per_pipeline_rank"]
    elif a.get("virtual_pipeline_model_parallel_size") is not None:
        vpp = a["virtual_pipeline_model_parallel_size"]
    sp = bool(get(a, "sequence_parallel")) and tp > 1  # validate_args: disabled when TP=1
    if get(a, "use_torch_fsdp2"):
        sharding = "full"
    elif get(a, "use_megatron_fsdp"):
        strat = get(a, "data_parallel_sharding_strategy")
        sharding = {"optim_grads_params": "full", "optim_grads": "optimizer", "optim": "optimizer"}.get(strat, "none")
    elif get(a, "use_distributed_optimizer"):
        sharding = "optimizer"
    else:
        sharding = "none"
    parallel = dict(tp=tp, pp=pp, vpp=vpp, cp=get(a, "context_parallel_size"),
                    ep=get(a, "expert_model_parallel_size"), etp=a.get("expert_tensor_parallel_size"),
                    sequence_parallel=sp, dp_sharding=sharding,
                    pipeline_layers_first_stage=first if pp > 1 else None,
                    pipeline_layers_last_stage=last if pp > 1 else None)

    gran = "selective" if get(a, "recompute_activations") else (a.get("recompute_granularity") or "none")
    if gran not in ("none", "selective", "full"):
        raise PlanError("--recompute-granularity", gran, "one of full, selective")
    method, rnl = a.get("recompute_method"), a.get("recompute_num_layers")
    if gran == "full":
        if method not in ("uniform", "block"):
            raise PlanError("--recompute-method", method, "uniform or block (required with --recompute-granularity full)")
        if rnl is None:
            raise PlanError("--recompute-num-layers", None, "required with --recompute-granularity full")
    elif gran == "selective" and method is not None:
        raise PlanError("--recompute-method", method, "must be unset with --recompute-granularity selective")
    recompute = dict(granularity=gran, method=method if gran == "full" else "uniform",
                     num_layers=rnl if gran == "full" else None)

    bf16, fp16 = bool(get(a, "bf16")), bool(get(a, "fp16"))
    if bf16 and fp16:
        raise PlanError("--fp16", True, "cannot be combined with --bf16")
    fp8 = a.get("fp8")
    if fp8 is not None and fp8 not in ("e4m3", "hybrid"):
        raise PlanError("--fp8-format", fp8, "one of e4m3, hybrid")
    precision = "fp8" if fp8 else "bf16" if bf16 else "fp16" if fp16 else "fp32"
    if bf16:
        grad_fp32 = not get(a, "grad_reduce_in_bf16")
    else:
        grad_fp32 = bool(get(a, "accumulate_allreduce_grads_in_fp32"))
    optimizer = get(a, "optimizer")
    if optimizer not in ("adam", "sgd"):
        raise PlanError("--optimizer", optimizer, "adam or sgd (the optimizers the plan models)")
    mbs = _req(a, "micro_batch_size")
    training = dict(
        micro_batch_size=mbs, global_batch_size=a.get("global_batch_size"), precision=precision,
        recompute=recompute, pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        overlap_grad_reduce=bool(get(a, "overlap_grad_reduce")),
        overlap_param_gather=bool(get(a, "overlap_param_gather")),
        tp_comm_overlap=bool(get(a, "tp_comm_overlap")), optimizer=optimizer,
        grad_reduce_in_fp32=grad_fp32, train_iters=a.get("train_iters"),
        # DeepEP: the flex dispatcher with --moe-enable-deepep (Megatron-LM <= 0.14) or
        # --moe-flex-dispatcher-backend deepep (later); every other dispatcher is priced as all-to-all
        moe_token_dispatcher="deepep" if num_experts and (get(a, "moe_enable_deepep") or (
            get(a, "moe_token_dispatcher_type") == "flex" and a.get("moe_flex_dispatcher_backend") in (None, "deepep")))
        else "alltoall",
    )
    if validate:  # further megatron/training/arguments.py validate_args assertions
        if training["tp_comm_overlap"] and not sp:
            raise PlanError("--tp-comm-overlap", True, "requires --sequence-parallel with TP > 1")
        if training["overlap_param_gather"] and (sharding == "none" or not training["overlap_grad_reduce"]):
            raise PlanError("--overlap-param-gather", True,
                            "requires --use-distributed-optimizer (or Megatron-FSDP) and --overlap-grad-reduce")
        if fp16 and parallel["ep"] > 1:
            raise PlanError("--fp16", True, "expert parallelism is not supported with fp16")
    if training["global_batch_size"] is None:  # validate_args: mbs * dp
        world = cluster.world_size
        training["global_batch_size"] = mbs * max(1, world // (tp * pp * parallel["cp"]))
    return build_plan(model, parallel, training, cluster, validate)


def build_plan(model: dict, parallel: dict, training: dict, cluster: Cluster, validate: bool = True) -> Plan:
    """Validate into a Plan; errors are re-raised naming the Megatron flag.

    ``validate=False`` skips only the cross-field legality rules (used for intermediate states).
    """
    try:
        parts = dict(model=ModelArch(**model), parallel=Parallelism(**parallel),
                     training=Training(**{**training, "recompute": Recompute(**training["recompute"])}),
                     cluster=cluster)
        return Plan(**parts) if validate else Plan.model_construct(**parts)
    except PlanError as e:
        raise PlanError(FIELD_FLAGS.get(e.field, e.field), e.value, e.allowed) from None
    except ValidationError as e:
        for err in e.errors():
            ctx = (err.get("ctx") or {}).get("error")
            if isinstance(ctx, PlanError):
                raise PlanError(FIELD_FLAGS.get(ctx.field, ctx.field), ctx.value, ctx.allowed) from None
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err.get("loc", ()))
        raise UserError(f"{loc}={err.get('input')!r}: {err.get('msg')}") from None


# --------------------------------------------------------------------------- plan -> args
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
        "num_layers": m.num_layers, "hidden_size": m.hidden_size, "seq_length": m.seq_length,
        "num_attention_heads": m.num_attention_heads,
    }
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
    # --ckpt-format fsdp_dtensor); a script already on torch FSDP2 stays on it.
    if current.get("use_megatron_fsdp"):
        out["data_parallel_sharding_strategy"] = {"full": "optim_grads_params", "optimizer": "optim",
                                                  "none": "no_shard"}[p.dp_sharding]
    elif current.get("use_torch_fsdp2"):
        out["use_torch_fsdp2"] = p.dp_sharding == "full"
        out["use_distributed_optimizer"] = p.dp_sharding == "optimizer"
    else:
        out["use_distributed_optimizer"] = p.dp_sharding in ("optimizer", "full")
        if p.dp_sharding == "full":
            out.update(use_megatron_fsdp=True, data_parallel_sharding_strategy="optim_grads_params",
                       gradient_accumulation_fusion=False, ckpt_format="fsdp_dtensor")
    # pipeline layout
    out["decoder_first_pipeline_num_layers"] = p.pipeline_layers_first_stage if p.pp > 1 else None
    out["decoder_last_pipeline_num_layers"] = p.pipeline_layers_last_stage if p.pp > 1 else None
    uneven = out["decoder_first_pipeline_num_layers"] is not None or out["decoder_last_pipeline_num_layers"] is not None
    vpp_keys = ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                "virtual_pipeline_model_parallel_size")
    for k in vpp_keys:
        out[k] = None
    if p.vpp > 1:
        used = next((k for k in vpp_keys if current.get(k) is not None), None)
        used = used or next((k for k in vpp_keys if k in present), None)
        if uneven and used == "num_layers_per_virtual_pipeline_stage":
            used = "num_virtual_stages_per_pipeline_rank"
        used = used or ("num_virtual_stages_per_pipeline_rank" if uneven else "num_layers_per_virtual_pipeline_stage")
        out[used] = (m.num_layers // p.pp) // p.vpp if used == "num_layers_per_virtual_pipeline_stage" else p.vpp
    if t.pipeline_schedule not in ("1f1b", "interleaved_1f1b"):
        raise PlanError("training.pipeline_schedule", t.pipeline_schedule,
                        "Megatron-LM runs 1f1b, or interleaved 1f1b when vpp > 1")
    # recompute
    r = t.recompute
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
    # precision
    out["bf16"] = t.precision == "bf16" or (t.precision == "fp8" and not current.get("fp16"))
    out["fp16"] = t.precision == "fp16" or (t.precision == "fp8" and bool(current.get("fp16")))
    out["fp8"] = (current.get("fp8") or "hybrid") if t.precision == "fp8" else None
    return out
