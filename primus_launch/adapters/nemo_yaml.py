"""NeMo 1.0 training configs (NeMo-Framework-Launcher ``launcher_scripts/conf/training/<family>/<size>.yaml``,
the ``megatron_gpt_config.yaml`` layout) <-> :class:`Plan`.

What the file is: ``run:`` / ``trainer:`` (PyTorch Lightning: ``num_nodes``, ``devices``, ``precision``,
``max_steps``) / ``exp_manager:`` / ``model:`` (NeMo's ``MegatronGPTModel`` config), with OmegaConf
interpolations (:mod:`primus_launch.adapters.nemo_interp`).  Field meanings from NeMo 24.x
``nemo/collections/nlp/models/language_modeling/megatron_base_model.py`` (``build_transformer_config``,
``_vocab_size_with_padding``, ``setup_optimization``) and ``megatron_gpt_model.py``.

Reading translates the fields into the Megatron-LM argument dests of the same run and lets
:func:`megatron_args.plan_from_args` build the plan, so the run written as Megatron-LM flags gives the same
plan and every field keeps the Megatron reader's "modelled, or reported as not modelled" handling.
Translations where the names differ: ``encoder_seq_length`` -> ``seq_length``; ``activation`` (gated when it
ends in ``glu``: ``swiglu`` / ``fast-swiglu`` -> ``--swiglu``; ``geglu`` / ``reglu`` priced as SwiGLU, said;
``squared-relu`` -> ``--squared-relu``); ``normalization`` ``layernorm`` / ``rmsnorm`` / ``layernorm1p`` ->
``LayerNorm`` / ``RMSNorm`` / LayerNorm + ``--apply-layernorm-1p``; ``bias`` -> not ``--disable-bias-linear``;
``share_embeddings_and_output_weights`` (default true) -> not ``--untie-embeddings-and-output-weights``;
``num_query_groups`` -> ``--group-query-attention``; ``num_moe_experts`` -> ``--num-experts``;
``activations_checkpoint_granularity / _method / _num_layers`` -> ``--recompute-*``; ``fp8`` with ``fp8_e4m3``
/ ``fp8_hybrid`` -> ``--fp8-format e4m3 / hybrid``; ``fp8_params`` -> ``--fp8-param-gather``;
``ub_tp_comm_overlap`` -> ``--tp-comm-overlap``; ``transformer_engine: false`` -> ``--transformer-impl local``;
``bias_activation_fusion`` / ``bias_dropout_add_fusion`` / ``persist_layer_norm`` / ``rotary_percentage`` /
``layernorm_epsilon`` -> their Megatron-LM names; ``optim.name`` ``distributed_fused_adam`` /
``mcore_distributed_optim`` -> ``--use-distributed-optimizer``, ``optim.overlap_grad_sync`` /
``overlap_param_sync`` -> ``--overlap-grad-reduce`` / ``--overlap-param-gather`` (Apex's DistributedFusedAdam
defaults: grad sync overlapped, param sync not); ``trainer.precision`` bf16 / 16 -> ``--bf16`` / ``--fp16``;
``trainer.max_steps`` -> ``--train-iters``.  The tokenizer as NeMo builds it (``library`` megatron: the
``type``, GPT2BPETokenizer 50,257 entries; huggingface: the ``type`` names the model; sentencepiece: the
``model`` file), padded as NeMo's ``_vocab_size_with_padding`` (to ``make_vocab_size_divisible_by`` x TP,
the same rule as Megatron-LM's).  The cluster: ``trainer.num_nodes`` x ``trainer.devices`` on the GPU of a
``# primus-launch: gpu=...`` comment, else the default.  Fields that change time or memory but have no
Megatron-LM counterpart are reported as not modelled; the rest are listed in one note.

Writing (``--tune``) replaces the changed values in place (an interpolated value by its number), adds a
missing key at the end of its section, keeps comments, re-reads the result and refuses, in one line, a plan
the file cannot express.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

import primus_launch.adapters.megatron_flags as megatron_flags
import primus_launch.adapters.megatron_script as ms
from primus_launch.adapters.megatron import (cluster_edits, default_cluster_note, plan_diffs, refuse_diffs,
                                             stated_cluster, with_source, write_rendered)
from primus_launch.adapters.megatron_args import BY_DEST, BY_FLAG, changed_args, convert, plan_from_args
from primus_launch.adapters.megatron_flags import FALSE_WORDS
from primus_launch.adapters.megatron_yaml import (MappedYamlRecipe, child_node, mapping_items, mapping_root, node_value,
                                                  scalar_text, warnings_as_keys)
from primus_launch.adapters.nemo_interp import Resolver, Unresolved, unresolved_why
from primus_launch.adapters.yaml_text import entries_after, render_unshared
from primus_launch.errors import UserError
from primus_launch.fileio import read_recipe_text
from primus_launch.plan import Cluster, Plan, PlanError, UnmodelledFlag

FORMAT = "nemo1-yaml"

# model: keys whose Megatron-LM argument has another name (same meaning)
_RENAMES = {"encoder_seq_length": "seq_length", "num_moe_experts": "num_experts", "rotary_percentage": "rotary_percent",
            "layernorm_epsilon": "norm_epsilon", "bias_dropout_add_fusion": "bias_dropout_fusion",
            "activations_checkpoint_granularity": "recompute_granularity",
            "activations_checkpoint_method": "recompute_method",
            "activations_checkpoint_num_layers": "recompute_num_layers", "ub_tp_comm_overlap": "tp_comm_overlap",
            "fp8_params": "fp8_param_gather"}
_NEMO_KEY = {v: k for k, v in _RENAMES.items()}
# model: keys read by hand below (or meaning nothing to Megatron-LM under the same name)
_HANDLED = {"activation", "normalization", "bias", "share_embeddings_and_output_weights", "num_query_groups",
            "persist_layer_norm", "bias_activation_fusion", "fp8", "fp8_e4m3", "fp8_hybrid", "transformer_engine",
            "mcore_gpt", "megatron_amp_O2", "position_embedding_type", "precision", "fsdp", "tokenizer", "optim",
            "data", "nsys_profile", "ub_tp_comm_overlap_cfg", "activations_checkpoint_layers_per_pipeline",
            "num_micro_batches_with_partial_activation_checkpoints", "make_vocab_size_divisible_by",
            "apply_query_key_layer_scaling", "overlap_p2p_comm", "batch_p2p_comm"}
# fp8 tuning fields Megatron-LM reads only with --fp8-format
_FP8_FIELDS = ("fp8_margin", "fp8_interval", "fp8_amax_history_len", "fp8_amax_compute_algo", "fp8_wgrad")
# sections or keys that hold no part of an iteration's time or memory (names, paths, logging, schedules)
_QUIET = {"pre_process", "post_process", "resume_from_checkpoint", "seed", "apex_transformer_log_level", "onnx_safe",
          "use_cpu_initialization", "native_amp_init_scale", "native_amp_growth_interval", "hysteresis",
          "init_method_std", "use_scaled_init_method", "gradient_as_bucket_view", "sync_batch_comm", "headscale",
          "transformer_block_type", "openai_gelu", "normalize_attention_scores", "attention_type",
          "fsdp_sharding_strategy", "fsdp_grad_reduce_dtype", "fsdp_sharded_checkpoint"}
# families the projection does not model: refused by name (exp_manager.name, or a sub-model mapping)
_OTHER_NAMES = re.compile(r"bert|t5|retro|neva|clip|vit|imagen|diffusion|dreambooth|controlnet|nerf|sdxl|pix2pix")
_OTHER_KEYS = ("encoder", "decoder", "mm_cfg", "vision", "text", "unet_config", "first_stage_config",
               "bert_binary_head", "vision_pretraining_type", "nerf", "retro_encoder_num_layers")
_ACTIVATIONS = {"gelu": None, "fast-gelu": None, "openai-gelu": None, "swiglu": "swiglu", "fast-swiglu": "swiglu",
                "squared-relu": "squared_relu", "geglu": "swiglu", "fast-geglu": "swiglu", "reglu": "swiglu",
                "fast-reglu": "swiglu"}
_NORMS = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "layernorm1p": "LayerNorm"}
_PRECISIONS = {"bf16": "bf16", "bf16-mixed": "bf16", "16": "fp16", "16-mixed": "fp16", "32": None, "32-true": None,
               "fp32": None}
_DIST_OPTIMS = ("distributed_fused_adam", "mcore_distributed_optim")


def is_nemo1_config(text: str) -> bool:
    """A NeMo 1.0 training config: a top-level ``trainer:`` mapping with ``model:`` or ``exp_manager:`` beside it
    (no Primus ``modules:``; a ``model:`` taken from Hydra ``defaults:`` is refused by the reader, by name)."""
    if not re.search(r"^trainer:", text, re.M) or not re.search(r"^(model|exp_manager):", text, re.M):
        return False
    root = mapping_root(text)
    return (root is not None and isinstance(child_node(root, "trainer"), yaml.MappingNode)
            and any(isinstance(child_node(root, k), yaml.MappingNode) for k in ("model", "exp_manager")))


@dataclass
class NemoRecipe(MappedYamlRecipe):
    """A read NeMo config: Megatron argument values, and the YAML nodes each came from; the cluster as
    ``trainer.num_nodes`` x ``trainer.devices`` and their nodes."""

    nodes_count: int | None = None
    devices: int | None = None
    cluster_nodes: dict[str, yaml.Node] = field(default_factory=dict)

    def launcher_start(self) -> None:
        """The file has no launcher line (the cluster is ``trainer.num_nodes`` x ``trainer.devices``)."""
        return None

    def put(self, dest: str, value: Any, node: yaml.Node | None, inverted: bool = False) -> None:
        self.args[dest] = value
        if node is not None:
            self.nodes.setdefault(dest, []).append((node, inverted))

    def off(self, flag: str, value: Any, effect: str) -> None:
        self.unmodelled.append(UnmodelledFlag(flag=flag, value=str(value), effect=effect))


def _family(rec: NemoRecipe, root: yaml.MappingNode, res: Resolver) -> None:
    model = rec.sections["model"]
    name = res.at(("exp_manager", "name"))
    keys = [k for k in _OTHER_KEYS if child_node(model, k) is not None]
    if keys or (isinstance(name, str) and _OTHER_NAMES.search(name)):
        what = f"model.{keys[0]}" if keys else f"exp_manager.name={name!r}"
        raise UserError(f"{rec.path}: a NeMo 1.0 config of a model family the projection does not model ({what}); "
                        "GPT-family decoders only (NeMo MegatronGPTModel: gpt3, llama, mistral, mixtral, nemotron, ...)")
    for k in ("num_layers", "hidden_size", "num_attention_heads"):
        v = res.at(("model", k))
        if isinstance(v, Unresolved):  # ${oc.env:X}, ${cluster.x}: named, with why it stayed as written
            raise UserError(f"{rec.path}: model.{k}={str(v)!r}: {unresolved_why(v)}")
        if not isinstance(v, int) or isinstance(v, bool):  # null, a mapping, 8.0
            shown = repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."
            raise UserError(f"{rec.path}: model.{k}={shown}: the model's shape needs a whole number here")


def _num(rec: NemoRecipe, res: Resolver, keys: tuple[str, ...]) -> Any:
    v = res.at(keys)
    if isinstance(v, Unresolved):
        raise UserError(f"{rec.path}: {'.'.join(keys)}={str(v)!r}: {unresolved_why(v)}")
    return v


def _whole(key: str, v: Any) -> int:
    """``model.<key>``'s value as NeMo uses it, an integer; a :class:`PlanError` naming the key otherwise."""
    if isinstance(v, bool) or not isinstance(v, int):
        raise PlanError(f"model.{key}", v, "an integer")
    return v


def _model_fields(rec: NemoRecipe, res: Resolver, unread: list[str]) -> None:
    model = rec.sections["model"]
    fp8_on = bool(res.at(("model", "fp8")))
    for k, v in mapping_items(model):
        key = str(k.value)
        if key in _HANDLED or isinstance(v, yaml.MappingNode):
            if isinstance(v, yaml.MappingNode) and key not in _HANDLED and key not in _QUIET:
                unread.append(f"model.{key}")
            continue
        if key in _FP8_FIELDS and not fp8_on:
            continue
        if key in _QUIET:
            continue
        val = _num(rec, res, ("model", key))
        dest = _RENAMES.get(key, key)
        spec = BY_DEST.get(dest)
        if spec is None and megatron_flags.lookup(dest) is None:
            if val not in (None, False, "", [], 0):
                unread.append(f"model.{key}={val}")
            continue
        if spec is not None and spec.kind in ("true", "false") and isinstance(val, str) and val.strip() \
                and val.strip().lower() in FALSE_WORDS and isinstance(v, yaml.ScalarNode) and v.style in ("'", '"'):
            # `sequence_parallel: 'false'`: OmegaConf keeps the string, and NeMo's `cfg.get(key)` hands it on to
            # Megatron-Core, where a non-empty string is true (the reader read false; megatron_yaml refuses the same)
            raise PlanError(f"model.{key}", val, "true or false unquoted (a quoted string is no YAML boolean: NeMo "
                                                 "keeps the string, which is true whatever it says)")
        if spec is not None and spec.kind in ("int", "float") and isinstance(val, str) and "${" not in val:
            # `global_batch_size: None` / `'null'` / `'128'`: a string to OmegaConf's YAML loader (its null is null /
            # ~ / empty), which NeMo's `cfg.get(key)` hands on as it is (its batch arithmetic fails); it was read as
            # unset or as the number.  `???` is OmegaConf's mandatory missing value (MissingMandatoryValue on access)
            what = "an integer" if spec.kind == "int" else "a number"
            raise PlanError(f"model.{key}", val, f"{what}: ??? is OmegaConf's missing mandatory value (NeMo raises "
                            "MissingMandatoryValue reading it)" if val == "???" else f"{what} unquoted, or null "
                            "(a string is kept as it is by OmegaConf and NeMo, and fails)")
        try:
            got = None if val is None else convert(spec, val) if spec is not None else val
        except PlanError as e:  # named as the file writes it, not as the Megatron-LM flag it becomes
            raise PlanError(f"model.{key}", val, e.allowed) from None
        # a null value is the argument's default; its node is kept so that --tune writes over it, never beside it
        rec.put(dest, got, v)


def _selective_method(rec: NemoRecipe, res: Resolver) -> None:
    """``activations_checkpoint_method`` / ``_num_layers`` under ``activations_checkpoint_granularity: selective``,
    as NeMo reads them (not Megatron-LM's ``validate_args``, which refuses a method with selective).

    Without ``mcore_gpt`` (NeMo's own ``ParallelTransformer``, v1.20 ``nlp/modules/common/megatron/transformer.py``:
    the launcher's 2023 configs): ``uniform`` checkpoints core attention in every layer; ``block`` in the first
    ``activations_checkpoint_num_layers`` layers of each pipeline stage (``index < num_layers``, so 0 is none).
    With ``mcore_gpt``: Megatron-Core's ``TransformerConfig`` keeps the method (read only with ``full``:
    ``transformer_block.py``) and raises on a ``recompute_num_layers`` that is not None under selective.
    """
    if rec.args.get("recompute_granularity") != "selective":
        return
    method, n = rec.args.get("recompute_method"), rec.args.get("recompute_num_layers")
    if res.at(("model", "mcore_gpt")):
        if n is not None:
            raise PlanError("model.activations_checkpoint_num_layers", n, "null with activations_checkpoint_granularity "
                            "selective (Megatron-Core TransformerConfig raises otherwise)")
        rec.args["recompute_method"] = None
        return
    if method == "block":
        layers, pp = rec.args.get("num_layers"), rec.args.get("pipeline_model_parallel_size") or 1
        if not n:
            rec.args["recompute_granularity"] = None  # index < 0: no layer checkpoints its attention
            rec.notes.append("model.activations_checkpoint_granularity=selective with method block and "
                             f"activations_checkpoint_num_layers={n}: NeMo's ParallelTransformer checkpoints no layer "
                             "(the first 0 of each stage); read as no recompute")
        elif isinstance(layers, int) and isinstance(pp, int) and pp > 0 and n < layers // pp:
            rec.off("model.activations_checkpoint_num_layers", n, "memory, time: selective recompute of the first "
                    f"{n} layers of each pipeline stage only (NeMo block method); priced on every layer")
    if method in ("uniform", "block"):
        rec.args["recompute_method"] = None
        rec.args["recompute_num_layers"] = None


def _architecture(rec: NemoRecipe, res: Resolver) -> None:
    m = rec.sections["model"]
    act = str(res.at(("model", "activation")) or "gelu")
    if act not in _ACTIVATIONS:
        raise UserError(f"{rec.path}: model.activation={act!r}: one of {', '.join(_ACTIVATIONS)}")
    if _ACTIVATIONS[act]:
        rec.put(_ACTIVATIONS[act], True, None)
    if act in ("geglu", "fast-geglu", "reglu", "fast-reglu"):
        rec.off("model.activation", act, "time: a gated MLP with this activation is priced as SwiGLU (same GEMMs, "
                "another elementwise op)")
    norm = str(res.at(("model", "normalization")) or "layernorm").lower()
    if norm not in _NORMS:
        raise UserError(f"{rec.path}: model.normalization={norm!r}: one of {', '.join(_NORMS)}")
    rec.put("normalization", _NORMS[norm], None)
    if norm == "layernorm1p":
        rec.put("apply_layernorm_1p", True, None)
    bias = res.at(("model", "bias"))
    rec.put("add_bias_linear", True if bias is None else bool(bias), child_node(m, "bias"))
    share = res.at(("model", "share_embeddings_and_output_weights"))
    rec.put("untie_embeddings_and_output_weights", share is False, child_node(m, "share_embeddings_and_output_weights"),
            inverted=True)
    groups = res.at(("model", "num_query_groups"))
    if groups is not None and groups != res.at(("model", "num_attention_heads")):
        rec.put("group_query_attention", True, None)
        rec.put("num_query_groups", _whole("num_query_groups", groups), child_node(m, "num_query_groups"))
    pos = res.at(("model", "position_embedding_type")) or "learned_absolute"
    if pos in ("learned_absolute", "rope", "none"):
        rec.put("position_embedding_type", pos, child_node(m, "position_embedding_type"))
    else:
        rec.off("model.position_embedding_type", pos, "time: priced as learned absolute positions (this position "
                "encoding's elementwise work in attention is not modelled)")
    persist = res.at(("model", "persist_layer_norm"))
    if isinstance(persist, bool):
        rec.put("no_persist_layer_norm", not persist, child_node(m, "persist_layer_norm"), inverted=True)
    fusion = res.at(("model", "bias_activation_fusion"))
    if isinstance(fusion, bool):
        rec.put("bias_swiglu_fusion" if rec.args.get("swiglu") else "bias_gelu_fusion", fusion,
                child_node(m, "bias_activation_fusion"))
    # NeMo build_transformer_config: query-key layer scaling only under fp16 (else it warns and turns it off)
    if res.at(("model", "apply_query_key_layer_scaling")) and str(res.at(("trainer", "precision"))) in ("16", "16-mixed"):
        rec.put("apply_query_key_layer_scaling", True, None)
    # overlap_p2p_comm / batch_p2p_comm: read by NeMo only with virtual pipeline stages (its config's comment)
    vp = res.at(("model", "virtual_pipeline_model_parallel_size"))
    if isinstance(vp, int) and vp > 1 and res.at(("model", "overlap_p2p_comm")) is not None:
        rec.put("overlap_p2p_comm", bool(res.at(("model", "overlap_p2p_comm"))), child_node(m, "overlap_p2p_comm"))
    div = res.at(("model", "make_vocab_size_divisible_by"))
    rec.put("make_vocab_size_divisible_by", _whole("make_vocab_size_divisible_by", div) if div is not None else 128,
            child_node(m, "make_vocab_size_divisible_by"))  # NeMo's default 128 (megatron_base_model._build_vocab)


def _tokenizer(rec: NemoRecipe, res: Resolver) -> None:
    tok = res.at(("model", "tokenizer")) or {}
    lib = str(res.at(("model", "tokenizer", "library")) or "").lower()
    ttype, tmodel = res.at(("model", "tokenizer", "type")), res.at(("model", "tokenizer", "model"))
    vocab = res.at(("model", "tokenizer", "vocab_file"))
    if not isinstance(tok, dict) or not lib:
        raise UserError(f"{rec.path}: model.tokenizer.library: missing; the vocabulary size needs the tokenizer "
                        "(megatron, huggingface, sentencepiece or tiktoken)")
    if lib == "megatron":
        rec.args["tokenizer_type"] = str(ttype) if ttype else None
        if vocab:
            rec.args["vocab_file"] = str(vocab)
    elif lib == "huggingface":
        rec.args["tokenizer_type"] = "HuggingFaceTokenizer"
        rec.args["tokenizer_model"] = str(tmodel or ttype) if (tmodel or ttype) else None
    elif lib in ("sentencepiece", "tiktoken"):
        if not tmodel:
            raise UserError(f"{rec.path}: model.tokenizer.model=None: the vocabulary size needs the {lib} model file "
                            "NeMo loads (a local path or a known public tokenizer)")
        rec.args["tokenizer_type"] = "SentencePieceTokenizer" if lib == "sentencepiece" else "TikTokenizer"
        rec.args["tokenizer_model"] = str(tmodel)
    else:
        raise UserError(f"{rec.path}: model.tokenizer.library={lib!r}: one of megatron, huggingface, sentencepiece, "
                        "tiktoken")


def _precision(rec: NemoRecipe, res: Resolver) -> None:
    prec = str(res.at(("trainer", "precision")) if res.at(("trainer", "precision")) is not None else "32")
    if prec not in _PRECISIONS:
        raise UserError(f"{rec.path}: trainer.precision={prec!r}: one of {', '.join(_PRECISIONS)}")
    p = _PRECISIONS[prec]
    if p:
        rec.put(p, True, None)
    if p and res.at(("model", "megatron_amp_O2")) is False:
        rec.off("model.megatron_amp_O2", False, "memory: O1 mixed precision keeps the weights in fp32 and autocasts; "
                "priced as Megatron's half-precision weights with fp32 main params")
    if res.at(("model", "fp8")):
        e4m3, hybrid = res.at(("model", "fp8_e4m3")), res.at(("model", "fp8_hybrid"))
        if not e4m3 and not hybrid:
            raise UserError(f"{rec.path}: model.fp8=true: set model.fp8_e4m3 or model.fp8_hybrid (NeMo refuses fp8 "
                            "without a format)")
        rec.put("fp8", "e4m3" if e4m3 else "hybrid", None)
    if res.at(("model", "transformer_engine")) is False:
        rec.put("transformer_impl", "local", child_node(rec.sections["model"], "transformer_engine"))
    if res.at(("model", "mcore_gpt")) is False:
        rec.off("model.mcore_gpt", False, "time, memory: NeMo's legacy (non-Megatron-Core) GPT model is priced as "
                "Megatron-Core's")


def _optim(rec: NemoRecipe, res: Resolver) -> None:
    optim = child_node(rec.sections["model"], "optim")
    if not isinstance(optim, yaml.MappingNode):
        return
    rec.sections["optim"] = optim
    name = str(res.at(("model", "optim", "name")) or "fused_adam")
    dist = name in _DIST_OPTIMS
    rec.put("use_distributed_optimizer", dist, child_node(optim, "name"))
    if name == "distributed_fused_adam":
        rec.notes.append("optim.name=distributed_fused_adam (Apex): priced as Megatron-Core's distributed optimizer "
                         "(optimizer state sharded over data-parallel ranks) that averages in the collective and "
                         "runs no per-bucket NaN check (Apex average_grad_sync, ReduceOp.AVG; cost/step_extras.py)")
        rec.put("ddp_average_in_collective", True, None)   # no NeMo key: not written back
        rec.put("check_for_nan_in_loss_and_grad", False, None)
    elif not dist and name not in ("fused_adam", "adam", "adamw", "mcore_adam"):
        rec.off("model.optim.name", name, "time, memory: priced as Adam (two fp32 moments per parameter)")
    grad = res.at(("model", "optim", "overlap_grad_sync"))
    param = res.at(("model", "optim", "overlap_param_sync"))
    if name == "distributed_fused_adam":  # Apex DistributedFusedAdam: overlap_grad_sync=True, overlap_param_sync=False
        grad = True if grad is None else grad
    if dist:
        rec.put("overlap_grad_reduce", bool(grad), child_node(optim, "overlap_grad_sync"))
        rec.put("overlap_param_gather", bool(param) and bool(grad), child_node(optim, "overlap_param_sync"))
    for key, effect in (("bucket_cap_mb", "time: the gradient bucket size (MiB) is not translated to --ddp-bucket-size"),
                        ("dtype", "memory: optimizer state dtype other than fp32"),
                        ("grad_sync_dtype", "time: the gradient reduce-scatter dtype"),
                        ("param_sync_dtype", "time: the parameter all-gather dtype")):
        v = res.at(("model", "optim", key))
        if v is not None and not (key == "dtype" and str(v) in ("32", "fp32", "float32", "torch.float32")):
            rec.off(f"model.optim.{key}", v, effect)


def _other(rec: NemoRecipe, res: Resolver) -> None:
    if res.at(("model", "fsdp")):
        rec.off("model.fsdp", True, "time, memory: NeMo's torch FSDP sharding "
                f"({res.at(('model', 'fsdp_sharding_strategy')) or 'full'}) is priced as DDP")
    # partial checkpointing only changes which layers / micro-batches a *full* checkpoint covers: NeMo's
    # ParallelTransformer reads both in _checkpointed_forward (activations_checkpoint_method 'block'), which runs only
    # under activations_checkpoint_granularity 'full'; megatron-core 0.16.1's TransformerBlock checkpoints only under
    # recompute_granularity 'full' too.  Otherwise they change nothing (user16: the launcher's llama2_13b.yaml, with
    # granularity null and both at 0, read "3 setting(s) not modelled", two of them these)
    full = str(res.at(("model", "activations_checkpoint_granularity"))) == "full"
    for key in ("activations_checkpoint_layers_per_pipeline", "num_micro_batches_with_partial_activation_checkpoints"):
        v = res.at(("model", key))
        if v is not None and full:
            rec.off(f"model.{key}", v, "time, memory: partial activation checkpointing is priced as the stated "
                    "--recompute-* setting on every micro-batch")
    if res.at(("model", "nsys_profile", "enabled")):
        rec.off("model.nsys_profile.enabled", True, "time: Nsight Systems profiling steps")
    if res.at(("model", "ub_tp_comm_overlap")) and res.at(("model", "ub_tp_comm_overlap_cfg")):
        rec.notes.append("model.ub_tp_comm_overlap_cfg: the per-GEMM userbuffers settings are not read (TE defaults)")
    ds = res.at(("model", "data", "seq_length"))
    if ds is not None and not isinstance(ds, Unresolved) and rec.args.get("seq_length") not in (None, ds):
        rec.notes.append(f"model.data.seq_length={ds} differs from model.encoder_seq_length={rec.args['seq_length']}: "
                         "the model's is projected")
    acc = res.at(("trainer", "accumulate_grad_batches"))
    if acc not in (None, 1):
        raise UserError(f"{rec.path}: trainer.accumulate_grad_batches={acc}: NeMo's Megatron models accumulate through "
                        "global_batch_size; 1 is allowed")
    steps = res.at(("trainer", "max_steps"))
    if isinstance(steps, int) and steps > 0:
        rec.put("train_iters", steps, child_node(rec.sections["trainer"], "max_steps"))


def from_nemo1_yaml(text: str, path: str) -> NemoRecipe:
    """The Megatron argument values of a NeMo 1.0 training config, with the nodes they came from."""
    from primus_launch.inputs import duplicate_keys, parse_yaml

    parse_yaml(text, "recipe", path)  # the input boundary: syntax, nesting and size as one line
    for key, a, b in duplicate_keys(text)[:1]:
        # OmegaConf's YAML loader refuses it ("found duplicate key", omegaconf _utils.get_yaml_loader), where
        # yaml.safe_load keeps the last silently
        raise UserError(f"{path}: {key}: given twice in one mapping (lines {a} and {b}); NeMo's OmegaConf loader "
                        "refuses a duplicate key")
    root, data = yaml.compose(text), yaml.safe_load(text)
    if not is_nemo1_config(text) or not isinstance(data, dict):
        raise UserError(f"{path}: not a NeMo 1.0 training config (top-level trainer: and model: mappings)")
    if not isinstance(child_node(root, "model"), yaml.MappingNode):
        raise UserError(f"{path}: model: absent (a NeMo config whose model comes from its Hydra defaults: list, "
                        "composed at launch); give the composed config, with its model: section")
    rec = NemoRecipe(text, path)
    for name in ("trainer", "model"):
        rec.sections[name] = child_node(root, name)
    res = Resolver(data, path)
    _family(rec, root, res)
    unread: list[str] = []
    _model_fields(rec, res, unread)
    _selective_method(rec, res)
    _architecture(rec, res)
    _tokenizer(rec, res)
    _precision(rec, res)
    _optim(rec, res)
    _other(rec, res)
    for key in ("num_nodes", "devices"):
        node = child_node(rec.sections["trainer"], key)
        val = _num(rec, res, ("trainer", key))
        if node is None or not isinstance(val, int) or isinstance(val, bool) or val < 1:
            raise UserError(f"{path}: trainer.{key}={val!r}: a positive integer (the run's cluster is trainer.num_nodes "
                            "x trainer.devices)")
        rec.cluster_nodes[key] = node
    rec.nodes_count, rec.devices = int(res.at(("trainer", "num_nodes"))), int(res.at(("trainer", "devices")))
    if unread:
        rec.notes.append(f"{len(unread)} NeMo field(s) with no Megatron-LM argument, not read: "
                         + ", ".join(unread[:40]) + (", ..." if len(unread) > 40 else ""))
    rec.args = {k: v for k, v in rec.args.items() if v is not None}
    return rec


def _parse(text: str, path: str, given: Cluster | None,
           overrides: Mapping[str, Any] | None = None) -> tuple[NemoRecipe, Cluster]:
    rec = from_nemo1_yaml(text, path)
    if given is not None:
        return rec, given
    comment = ms.comment_config(text)
    cfg = {**comment, "nodes": str(rec.nodes_count), "gpus_per_node": str(rec.devices)}
    written = stated_cluster(cfg, None)
    # the GPU a config names nowhere (trainer: has no GPU kind) falls back to the default: said in a note, as the
    # Megatron readers say it (user14: a NeMo config was projected on h100-sxm without a word)
    default_cluster_note(rec, path, written, {"num_nodes", "gpus_per_node"}, overrides, comment)
    return rec, written.completed(overrides) if overrides else written


# where a Megatron-LM argument lives in the file, when not model.<its NeMo name>
_HOME = {"train_iters": ("trainer", "max_steps"), "overlap_grad_reduce": ("optim", "overlap_grad_sync"),
         "overlap_param_gather": ("optim", "overlap_param_sync")}
_VOCAB_FLAGS = {"--tokenizer-model": "model.tokenizer.model", "--vocab-file": "model.tokenizer.vocab_file",
                "--tokenizer-type": "model.tokenizer.type"}


def _plan(rec: NemoRecipe, cluster: Cluster, name: str, validate: bool = True) -> Plan:
    try:
        return plan_from_args(rec.args, cluster, name=name, validate=validate)
    except PlanError as e:
        if e.field in _VOCAB_FLAGS and "vocabulary" in str(e.allowed):
            outside = " (its ${...} is the launcher's, not this file's: write the path)" if "${" in str(e.value) else ""
            raise UserError(f"{rec.path}: {_VOCAB_FLAGS[e.field]}={e.value!r}: vocabulary size unknown (not a local "
                            f"tokenizer file nor a known public tokenizer); point it at the tokenizer file{outside}") from None
        spec = BY_FLAG.get(str(e.field))
        if spec is not None and spec.dest in rec.nodes:  # the rule names the file's key, not the Megatron-LM flag
            raise PlanError(file_key(spec.dest), e.value, e.allowed) from None
        raise


def file_key(dest: str) -> str:
    """The NeMo 1.0 config's dotted key of a Megatron-LM destination, where this reader looks for it
    (``rotary_percent`` -> ``model.rotary_percentage``; the optimizer's under ``model.optim``)."""
    sec, key = _HOME.get(dest, ("model", _NEMO_KEY.get(dest, dest)))
    return f"{'model.' if sec == 'optim' else ''}{sec}.{key}"


def load_nemo1_yaml(path: str | Path, cluster: Cluster | None = None,
                    overrides: Mapping[str, Any] | None = None) -> Plan:
    """Read a NeMo 1.0 training config into a plan, on ``cluster`` (else ``trainer.num_nodes`` x
    ``trainer.devices`` on the ``# primus-launch: gpu=`` comment's GPU, completed by partial ``overrides``)."""
    p = Path(path)
    rec, written = _parse(read_recipe_text(p), str(p), cluster, overrides)
    plan = with_source(_plan(rec, written, p.stem), rec, str(p), FORMAT)
    spelled = {}  # destination -> (the file's dotted key, its value as written), where the file gave it directly
    for dest, nodes in rec.nodes.items():
        node, inverted = nodes[-1]
        if not inverted and isinstance(node, yaml.ScalarNode):
            spelled[dest] = (file_key(dest), node_value(node))
    src = plan.source  # user15: '--no-masked-softmax-fusion=true' for the file's model.masked_softmax_fusion: false
    return plan.model_copy(update={"source": src.model_copy(update={
        "unmodelled": warnings_as_keys(list(src.unmodelled), spelled)})})


# --------------------------------------------------------------------------- writing


def _scalar(value: Any) -> str:
    return scalar_text(value, quote="'")


def _edits(rec: NemoRecipe, changes: dict[str, Any]) -> list[ms.Edit]:
    edits: list[ms.Edit] = []
    if changes.get("recompute_granularity") == "selective" and any(
            isinstance(n, yaml.ScalarNode) and n.value == "block" for n, _ in rec.nodes.get("recompute_method", [])):
        # selective over a file's method block would checkpoint only its first num_layers layers per stage
        # (_selective_method): uniform makes it every layer, as the plan says
        changes = {**changes, "recompute_method": "uniform"}
    for dest, val in changes.items():
        spec = BY_DEST.get(dest)
        nodes = rec.nodes.get(dest)
        if dest == "use_distributed_optimizer":
            val = "mcore_distributed_optim" if val else "fused_adam"
        if nodes:
            for node, inverted in nodes:
                v = (not val) if inverted and isinstance(val, bool) else val
                if isinstance(node, yaml.ScalarNode) or node.flow_style:
                    edits.append(ms.Edit(node.start_mark.index, node.end_mark.index, _scalar(v)))
                else:
                    raise UserError(f"{rec.path}: cannot write {dest}={val} over a block value")
            continue
        if val is None or (spec is not None and (val == spec.default or (spec.kind == "true" and not val))):
            continue
        sec_name, key = _HOME.get(dest, ("model", _NEMO_KEY.get(dest, dest)))
        if dest == "use_distributed_optimizer":
            sec_name, key = "optim", "name"
        sec = rec.sections.get(sec_name)
        items = mapping_items(sec) if sec is not None else []
        if not items or sec.flow_style:
            raise UserError(f"{rec.path}: cannot add {key}={val} to this NeMo config (no block mapping {sec_name}:)")
        at, lines = entries_after(rec.text, *items[-1], [f"{key}: {_scalar(val)}"])
        edits.append(ms.Edit(at, at, lines))
    return edits


def render_nemo1_yaml(plan: Plan, original_text: str) -> str:
    """The NeMo config with only the plan's changed values edited (identical text if unchanged); the result
    must read back as ``plan``, or a one-line :class:`UserError` names what it cannot express."""
    return render_unshared(original_text, lambda t: _render_nemo_text(plan, t))


def _render_nemo_text(plan: Plan, original_text: str) -> str:
    path = plan.source.path if plan.source and plan.source.path else "<recipe>"

    def edits_of(out: str) -> list[ms.Edit]:
        rec, written = _parse(out, path, None)
        current = _plan(rec, plan.cluster, "gpt", validate=False)
        edits = _edits(rec, changed_args(current, plan, rec.args, frozenset(rec.nodes)))
        for key, new in (("num_nodes", plan.cluster.num_nodes), ("devices", plan.cluster.gpus_per_node)):
            node = rec.cluster_nodes[key]
            if (rec.nodes_count if key == "num_nodes" else rec.devices) != new:
                edits.append(ms.Edit(node.start_mark.index, node.end_mark.index, str(new)))
        same_shape = written.model_copy(update={"num_nodes": plan.cluster.num_nodes,
                                                "gpus_per_node": plan.cluster.gpus_per_node})
        return edits + cluster_edits(out, rec, same_shape, plan.cluster, False)

    out = ms.edit_to_fixpoint(original_text, path, edits_of)
    rec, _ = _parse(out, path, plan.cluster)
    back = _plan(rec, plan.cluster, "gpt")
    refuse_diffs(plan_diffs(plan, back), path, "NeMo config")
    return out


def write_nemo1_yaml(plan: Plan, original_path: str | Path, out_path: str | Path) -> Path:
    """Write the rendered config atomically to ``out_path`` (never over the original)."""
    return write_rendered(plan, original_path, out_path, FORMAT, render_nemo1_yaml)


__all__ = ["is_nemo1_config", "load_nemo1_yaml", "render_nemo1_yaml", "write_nemo1_yaml", "from_nemo1_yaml"]
