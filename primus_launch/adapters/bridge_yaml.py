"""Megatron-Bridge ConfigContainer YAMLs (the ``run_config.yaml`` a run saves) <-> :class:`Plan`.

What the file is (Megatron-Bridge ``src/megatron/bridge/training/config.py`` ``ConfigContainer``, written by
``to_yaml``: Megatron-LM ``megatron/training/config/container.py`` ``to_dict`` + ``yaml.safe_dump`` under
``yaml_utils.safe_yaml_representers``; Bridge @067f987, 2026-08-22): one mapping per section, each with a
``_target_`` naming its dataclass; ``model:`` is the model provider (``GPTModelProvider`` and its
subclasses: a TransformerConfig, every field written), or the newer ``GPTModelConfig`` with the
TransformerConfig under ``model.transformer``; ``train:`` / ``ddp:`` / ``optimizer:`` / ``tokenizer:`` /
``comm_overlap:`` / ``mixed_precision:`` hold the rest.  Functions, dtypes and enums are written as
``{_target_: torch.nn.functional.silu, _call_: false}``, ``{_target_: torch.bfloat16, _call_: false}`` and
``{_target_: ...AttnBackend, _call_: true, _args_: [..], _name_: auto}``.

Reading translates the fields into Megatron-LM argument dests and lets
:func:`megatron_args.plan_from_args` build the plan, so every field keeps the Megatron reader's
"modelled, or reported as not modelled" handling.  Translations where the names differ:
``num_moe_experts`` -> ``num_experts``; ``gated_linear_unit`` + ``activation_func`` silu -> ``swiglu``
(quick_gelu -> ``quick_geglu``, squared_relu -> ``squared_relu``); ``share_embeddings_and_output_weights``
-> not ``untie_embeddings_and_output_weights``; ``fp8_param`` -> ``fp8_param_gather``;
``num_query_groups`` -> ``group_query_attention`` + ``num_query_groups``; ``ddp.bucket_size`` ->
``ddp_bucket_size``; ``ddp.grad_reduce_in_fp32`` -> ``grad_reduce_in_bf16`` (bf16) /
``accumulate_allreduce_grads_in_fp32``; ``should_pad_vocab: false`` -> ``padded_vocab_size = vocab_size``
(``GPTModelProvider.provide`` pads only when it is true).  Bridge applies ``mixed_precision`` (a recipe
name of ``training/mixed_precision.py`` or its fields) and ``comm_overlap``'s set fields over the model /
DDP / optimizer fields (``runtime_config_update``), so they win here too; ``comm_overlap.tp_comm_overlap_cfg``
(a ``TransformerLayerTPOverlapCfg``, handed to TE as ``asdict``) is read as the content of a Megatron-LM
``--tp-comm-overlap-cfg`` file.  ``env_vars`` is the run's launch environment (``apply_environment_variables``:
``os.environ.setdefault(name, str(value))``), checked and written as a Megatron-LM YAML's ``ENV_VARS``.
Fields with no Megatron-LM argument are listed in one note; sections that do not change an iteration
(checkpoint, logger, scheduler, rng, ...) in another.

Writing (``--tune``) edits the parallel / batch / recompute / DDP values in place (every node that
feeds a changed argument: ``ddp.`` and ``optimizer.use_distributed_optimizer`` both), re-reads the
result and refuses, in one line, a plan the file cannot express.  Precision goes where Bridge reads it:
``mixed_precision``'s fields (a recipe name: the recipe whose fields are the plan's), ``fp8_param`` with
``fp8_param_gather``, ``reuse_grad_buf_for_mxfp8_param_ag`` with MXFP8 param gather (``ConfigContainer.validate``
asserts it); optimizer state dtypes as torch dtype objects, an alias of a shared dtype written out first.
The OptimizerConfig's ``fp8_recipe`` (``mixed_precision.fp8_recipe``, default tensorwise) is read with the
precision-aware optimizer off too, so a tuned plan that turns it on keeps it (priced: fp32 master weights).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

import primus_launch.adapters.megatron_flags as megatron_flags
import primus_launch.adapters.megatron_script as ms
from primus_launch.adapters.bridge_interp import env_var_from_environment, refuse_unresolved, resolve_nodes
from primus_launch.adapters.megatron import (cluster_edits, files_from_run_root, plan_diffs, refuse_diffs,
                                             stated_cluster, with_launch_env, with_source, write_rendered)
from primus_launch.adapters.megatron_args import BY_DEST, changed_args, convert, plan_from_args, ub_cfg_entries
from primus_launch.adapters.megatron_yaml import (MappedYamlRecipe, child_node, env_mapping_edits, flag_dest,
                                                  mapping_items, mapping_root, node_value, scalar_text,
                                                  warnings_as_keys)
from primus_launch.adapters.yaml_text import entries_after, render_unshared
from primus_launch.errors import UserError
from primus_launch.fileio import read_recipe_text
from primus_launch.plan import Cluster, Plan, PlanError, UnmodelledFlag

FORMAT = "bridge-yaml"

# Bridge training/mixed_precision.py recipe factories (@067f987): the fields they set that matter here
# MixedPrecisionConfig's defaults for those fields: setup() writes every field, so a recipe's unset one resets the model's
_MP_DEFAULTS = {"bf16": False, "fp16": False, "fp8": None, "fp8_recipe": "tensorwise", "fp8_param_gather": False,
                "fp8_dot_product_attention": False, "fp4": None, "fp4_recipe": "nvfp4", "fp4_param": False,
                "first_last_layers_bf16": False, "num_layers_at_start_in_bf16": 0, "num_layers_at_end_in_bf16": 0,
                "grad_reduce_in_fp32": True, "reuse_grad_buf_for_mxfp8_param_ag": False}
_BF16 = {"bf16": True, "fp16": False, "grad_reduce_in_fp32": True}
_FP16 = {"bf16": False, "fp16": True, "grad_reduce_in_fp32": False}
MIXED_PRECISION_RECIPES: dict[str, dict[str, Any]] = {
    "bf16_mixed": _BF16, "fp16_mixed": _FP16,
    "bf16_with_fp8_delayed_scaling_mixed": {**_BF16, "fp8": "hybrid", "fp8_recipe": "delayed", "fp8_param_gather": True},
    "fp16_with_fp8_delayed_scaling_mixed": {**_FP16, "fp8": "hybrid", "fp8_recipe": "delayed", "fp8_param_gather": True},
    "bf16_with_mxfp8_mixed": {**_BF16, "fp8": "e4m3", "fp8_recipe": "mxfp8", "fp8_param_gather": True,
                              "reuse_grad_buf_for_mxfp8_param_ag": True},
    "fp16_with_mxfp8_mixed": {**_FP16, "fp8": "e4m3", "fp8_recipe": "mxfp8", "fp8_param_gather": True,
                              "reuse_grad_buf_for_mxfp8_param_ag": True},
    "bf16_with_fp8_current_scaling_mixed": {**_BF16, "fp8": "hybrid", "fp8_recipe": "tensorwise",
                                            "first_last_layers_bf16": True, "num_layers_at_start_in_bf16": 1,
                                            "num_layers_at_end_in_bf16": 1},
    "fp16_with_fp8_current_scaling_mixed": {**_FP16, "fp8": "hybrid", "fp8_recipe": "tensorwise",
                                            "first_last_layers_bf16": True, "num_layers_at_start_in_bf16": 1,
                                            "num_layers_at_end_in_bf16": 1},
    "nemotron_h_bf16_with_fp8_current_scaling_mixed": {**_BF16, "fp8": "hybrid", "fp8_recipe": "tensorwise",
                                                       "first_last_layers_bf16": True,
                                                       "num_layers_at_start_in_bf16": 2, "num_layers_at_end_in_bf16": 2},
    "nanov2_bf16_with_fp8_current_scaling_mixed": {**_BF16, "fp8": "hybrid", "fp8_recipe": "blockwise",
                                                   "first_last_layers_bf16": True,
                                                   "num_layers_at_start_in_bf16": 2, "num_layers_at_end_in_bf16": 2},
    "bf16_with_fp8_subchannel_scaling_mixed": {**_BF16, "fp8": "hybrid", "fp8_recipe": "blockwise"},
    "fp16_with_fp8_subchannel_scaling_mixed": {**_FP16, "fp8": "hybrid", "fp8_recipe": "blockwise"},
    "bf16_with_nvfp4_mixed": {**_BF16, "fp4": "e2m1", "fp4_recipe": "nvfp4", "fp4_param": True},
    "nemotron_3_super_bf16_with_nvfp4_mixed": {**_BF16, "fp4": "e2m1", "fp4_recipe": "nvfp4", "fp4_param": True,
                                               "first_last_layers_bf16": True, "num_layers_at_end_in_bf16": 14},
}

# TransformerConfig / DDP / MixedPrecisionConfig names -> Megatron-LM argument dests, where they differ
# (Megatron-LM megatron/training/argument_utils.py core_transformer_config_from_args, the other direction)
_RENAMES = {"num_moe_experts": "num_experts", "fp8_param": "fp8_param_gather", "fp4_param_gather": "fp4_param",
            "bucket_size": "ddp_bucket_size", "num_layers_in_first_pipeline_stage": "decoder_first_pipeline_num_layers",
            "num_layers_in_last_pipeline_stage": "decoder_last_pipeline_num_layers", "layernorm_epsilon": "norm_epsilon",
            "rope_scaling": "use_rope_scaling"}
# TransformerConfig fields core_transformer_config_from_args derives from other arguments (batch_p2p_comm = not
# overlap_p2p_comm, pipeline_dtype = params_dtype, ...) or sets for every run: nothing of their own to read
_DERIVED = {"batch_p2p_comm", "deallocate_pipeline_outputs", "inference_sampling_seed", "config_logger_dir",
            "persist_layer_norm", "bias_activation_fusion"}
# the fields of Megatron-Bridge's ConfigContainer (src/megatron/bridge/training/config.py, stable from its first
# releases to 067f987 of 2026-08-22) and the container's own _target_: the top-level keys of a run_config.yaml
_CONTAINER_FIELDS = frozenset({
    "_target_", "env_vars", "rng", "rerun_state_machine", "train", "model", "optimizer",
    "optimizer_config_override_provider", "ddp", "validation", "scheduler", "dataset", "logger", "tokenizer",
    "checkpoint", "dist", "ft", "straggler", "nvrx_straggler", "profiling", "peft", "comm_overlap", "mixed_precision",
    "tensor_inspect", "inprocess_restart"})
# sections that do not change an iteration's time or memory (checkpointing, logging, schedules, data paths)
_NEUTRAL_SECTIONS = ("checkpoint", "logger", "scheduler", "rng", "validation", "dist", "profiling",
                     "rerun_state_machine", "ft", "straggler", "nvrx_straggler", "inprocess_restart",
                     "optimizer_config_override_provider", "tensor_inspect", "dataset")
# Bridge's DistributedInitConfig (dist:) holds the FSDP switches; CheckpointConfig the format Megatron-FSDP needs
_PICKED = {"dist": ("use_torch_fsdp2", "use_megatron_fsdp", "align_grad_reduce"), "checkpoint": ("ckpt_format",)}
# fields read elsewhere (the model's precision comes from its own fields / mixed_precision)
_SKIP = {"_target_", "_call_", "gated_linear_unit", "activation_func", "share_embeddings_and_output_weights",
         "should_pad_vocab", "num_query_groups", "grad_reduce_in_fp32", "params_dtype", "pipeline_dtype",
         "autocast_dtype", "seq_length"}
# the inner model; the cluster; the model's name (_model_name)
_READ_ELSEWHERE = {("model", "transformer"), ("comm_overlap", "data_parallel_size"), ("model", "hf_model_id")}
_DTYPES = {"torch.float32": "fp32", "torch.float": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16",
           "torch.half": "fp16", "torch.uint8": "fp8", "torch.float8_e4m3fn": "fp8"}
# model provider classes of families the projection does not model (Bridge models/: t5, falcon_h1 (parallel
# attention + Mamba in one layer), mimo, *_vl, llava, ...): refused by name
_OTHER_FAMILY = re.compile(r"T5|Bert|MIMO|Mimo|VL|Llava|LLaVA|Vision|FalconH1|Whisper|Siglip|WanModel|FluxProvider")
# fields only Bridge's diffusion transformers have (src/megatron/bridge/diffusion/models/wan/wan_provider.py
# WanModelProvider's text cross-attention width; diffusion/models/flux FluxProvider's joint / single block counts
# and CLIP vector width): a file setting one is a WAN / FLUX video / image model's (Bridge's
# examples/diffusion/recipes/wan/conf/*.yaml state num_layers / hidden_size without a _target_)
_DIFFUSION_FIELDS = ("crossattn_emb_size", "num_joint_layers", "num_single_layers", "vec_in_dim")
# hybrid Mamba / attention stacks (Bridge models/hybrid HybridModelProvider, models/mamba MambaModelProvider,
# models/nemotronh NemotronH / Nemotron 3 providers): read as Megatron-LM's --is-hybrid-model with their pattern
_HYBRID_FAMILY = re.compile(r"Mamba|Hybrid|NemotronH|Nemotron3|NemotronNano")
_LAYOUT_LETTERS = {"embedding": "E", "decoder": "t", "loss": "L", "mtp": "m"}
# OptimizerConfig's state dtypes (torch dtypes in the file); the dtype each plan value is (Megatron-LM
# training/arguments.py: fp32 float32, bf16 bfloat16, fp16 float16, fp8 uint8)
_STATE_DTYPES = ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype", "exp_avg_sq_dtype")
_TORCH_DTYPE = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16", "fp8": "torch.uint8"}
# the Megatron dests MixedPrecisionConfig holds (its fields under their Megatron-LM names): setup() writes them over
# the model's, so the writer edits them in mixed_precision:
_MP_DESTS = frozenset(_RENAMES.get(k, k) for k in _MP_DEFAULTS) | {"fp8_param_gather", "fp4_param"}


def _model_section(root: yaml.MappingNode) -> yaml.MappingNode | None:
    """The mapping holding the TransformerConfig fields: ``model`` or ``model.transformer``."""
    model = child_node(root, "model")
    if not isinstance(model, yaml.MappingNode):
        return None
    inner = child_node(model, "transformer")
    return inner if isinstance(inner, yaml.MappingNode) else model


def states_model(root: yaml.Node) -> bool:
    """Whether a Bridge ConfigContainer mapping states the model (``num_layers`` and ``hidden_size`` under
    ``model:``), i.e. is a full run config rather than an override file."""
    if not isinstance(root, yaml.MappingNode) or not isinstance(child_node(root, "train"), yaml.MappingNode):
        return False
    sec = _model_section(root)
    return sec is not None and all(isinstance(child_node(sec, k), yaml.ScalarNode) and node_value(child_node(sec, k))
                                   is not None for k in ("num_layers", "hidden_size"))


def is_bridge_run_config(text: str) -> bool:
    """A Megatron-Bridge ConfigContainer YAML that states the model (the reader of this module)."""
    if not re.search(r"^model:", text, re.M) or not re.search(r"^train:", text, re.M):
        return False
    root = mapping_root(text)
    return root is not None and states_model(root)


@dataclass
class BridgeRecipe(MappedYamlRecipe):
    """A read Bridge config: Megatron argument values, and the YAML nodes each one was read from; ``env``: the
    run's ``env_vars`` (ConfigContainer.env_vars, applied with os.environ.setdefault(name, str(value)) before
    the run starts: training/config.py apply_environment_variables).  ``dtype_keys``: the key node of each
    optimizer state dtype field (its value may be an alias of a dtype another field anchors); ``mp_name``: the
    ``mixed_precision:`` node when it names a recipe."""

    dtype_keys: dict[str, yaml.Node] = field(default_factory=dict)
    mp_name: yaml.ScalarNode | None = None

    spelled: dict[str, tuple[str, Any]] = field(default_factory=dict)  # destination -> (section.key, value)

    def env_edits(self, values: dict[str, str]) -> list[ms.Edit]:
        """Edits that set each ``VAR: 'value'`` of ``values`` in ``env_vars`` (added when absent)."""
        return env_mapping_edits(self.text, self.path, self.env_node, values, "env_vars",
                                 "the run's environment (Megatron-Bridge ConfigContainer.env_vars)")

    def launcher_start(self) -> None:
        """A config file has no launcher line (the cluster lives in ``# primus-launch:`` or the wrapper)."""
        return None

    def put(self, dest: str, value: Any, node: yaml.Node | None, inverted: bool = False) -> None:
        if value is None and self.args.get(dest) is not None:
            return  # an unset field leaves what an earlier section set (tokenizer.vocab_size under model's)
        self.args[dest] = value
        if node is not None:
            self.nodes.setdefault(dest, []).append((node, inverted))


def _target(node: yaml.Node) -> str | None:
    t = child_node(node, "_target_") if isinstance(node, yaml.MappingNode) else None
    return str(t.value) if isinstance(t, yaml.ScalarNode) else None


def _plain(node: yaml.Node) -> Any:
    """The value of a field: an enum as its name, a dtype as fp32/bf16/..., lists element-wise; other
    ``_target_`` objects (functions, nested dataclasses) as ``("object", target)``."""
    tgt = _target(node)
    if tgt is not None:
        name = child_node(node, "_name_")
        if isinstance(name, yaml.ScalarNode):
            return str(name.value)
        if tgt in _DTYPES:
            return _DTYPES[tgt]
        return ("object", tgt)
    if isinstance(node, yaml.SequenceNode):
        return [_plain(x) for x in node.value]
    return node_value(node)


def _integer(node: yaml.Node, dest: str, name: str) -> Any:
    """An integer field the reader translates itself (``model.seq_length``, ``num_query_groups``, ``vocab_size``,
    ``dataset.seq_length``) as the Megatron-LM argument ``dest`` takes it (:func:`megatron_args.convert`): a float,
    a word, nan / inf, a boolean, a list or a mapping is refused in one line naming the argument and the value
    (an ``int()`` of it raised ValueError / TypeError / OverflowError: an internal error)."""
    raw = _plain(node)
    _refuse_quoted_number(name, raw, dest)
    try:
        return convert(BY_DEST[dest], raw)
    except PlanError as e:  # named as the file writes it (``name``), not as the Megatron-LM flag (user15)
        raise PlanError(name, e.value, e.allowed) from None


def _layout_text(v: Any) -> Any:
    """``PipelineParallelLayerLayout.input_data`` as Megatron-LM's layout string (a list of stages of layer
    kinds -> ``Et|tt|tL``; megatron/core/transformer/pipeline_parallel_layer_layout.py)."""
    if not isinstance(v, list):
        return v
    try:
        return "|".join("".join(_LAYOUT_LETTERS[str(x)] for x in st) for st in v)
    except (KeyError, TypeError):
        return v


def _read_fields(rec: BridgeRecipe, section: str, mapping: yaml.MappingNode, unread: list[str],
                 only_set: bool = False) -> None:
    for k, v in mapping_items(mapping):
        if not isinstance(k, yaml.ScalarNode):
            continue
        key = str(k.value)
        if key in _SKIP or key in _DERIVED or key.startswith("_") or (section, key) in _READ_ELSEWHERE:
            continue
        if key == "tp_comm_overlap_cfg" and isinstance(v, yaml.MappingNode):
            rec.put(key, _ub_mapping(v, f"{section}.{key}"), v)
            continue
        raw = _plain(v)
        if only_set and raw is None:
            continue  # comm_overlap: an unset field leaves the model / DDP value (CommOverlapConfig.setup)
        if section == "optimizer" and key in ("bf16", "fp16"):
            continue  # the model's (mixed_precision sets all three alike)
        dest = _RENAMES.get(key, key)
        if dest == "pipeline_model_parallel_layout":
            raw = _layout_text(raw)
        spec = BY_DEST.get(dest)
        known = spec is not None or megatron_flags.lookup(dest) is not None
        if not known or (isinstance(raw, tuple) and raw and raw[0] == "object"):
            if raw not in (None, False, [], {}, "") and not isinstance(raw, dict):
                shown = raw[1] if isinstance(raw, tuple) else raw
                unread.append(f"{section}.{key}={shown}")
            continue
        if isinstance(raw, dict) and not (spec is not None and spec.kind in ("int", "float", "true", "false")):
            unread.append(f"{section}.{key}")
            continue  # a mapping where one number or switch belongs: refused by convert, naming the argument
        _refuse_quoted_false(f"{section}.{key}", raw, dest)
        _refuse_quoted_number(f"{section}.{key}", raw, dest)
        try:
            got = convert(spec, raw) if spec is not None else raw
        except PlanError as e:  # named as the file writes it, not as the Megatron-LM flag it becomes (user15)
            raise PlanError(f"{section}.{key}", raw, e.allowed) from None
        rec.put(dest, got, v)
        rec.spelled[dest] = (f"{section}.{key}", raw)
        if dest in _STATE_DTYPES:
            rec.dtype_keys[dest] = k


def _refuse_quoted_false(field: str, raw: Any, dest: str) -> None:
    """Refuse a switch written as a quoted word that says false (``sequence_parallel: 'false'``, ``'no'``, ``'0'``):
    ``yaml.safe_load`` gives the string, ``ConfigContainer.from_yaml``'s ``instantiate`` passes it to the dataclass
    as it is (Megatron-LM ``megatron/training/config/instantiate_utils.py``; ``MixedPrecisionConfig.setup`` copies
    its fields onto the model config alike) and ``if config.sequence_parallel:`` takes a non-empty string as true.
    The Megatron-LM YAML reader refuses the same (``megatron_yaml``)."""
    if not (isinstance(raw, str) and raw and raw.strip().lower() in megatron_flags.FALSE_WORDS):
        return
    spec = BY_DEST.get(dest)
    f = megatron_flags.lookup(dest) if spec is None else None
    if (spec is not None and spec.kind in ("true", "false")) or (f is not None and f.kind in ("true", "false", "boolopt")):
        raise PlanError(field, raw, "true or false unquoted (a quoted string is no YAML boolean: Megatron-Bridge keeps "
                                    "the string, which is true whatever it says)")


def _refuse_quoted_number(field: str, raw: Any, dest: str) -> None:
    """Refuse a number field written as a string: ``global_batch_size: None`` / ``'null'`` / ``"128"``.  YAML's null
    is ``null`` / ``~`` / empty (``None`` is a string to ``yaml.safe_load`` and to OmegaConf's loader alike);
    ``ConfigContainer.from_yaml``'s ``instantiate`` and the OmegaConf override path (``omegaconf_utils.py``
    ``process_config_with_overrides``: an untyped ``OmegaConf.create`` of the dataclass's dict, then ``setattr``)
    hand the string to the dataclass as it is, where the arithmetic of ``ConfigContainer.validate`` fails; it was
    read as unset (the default) or as the number.  ``${...}`` interpolations are left to ``convert``."""
    spec = BY_DEST.get(dest)
    if spec is None or spec.kind not in ("int", "float") or not isinstance(raw, str) or "${" in raw:
        return
    raise PlanError(field, raw, ("an integer" if spec.kind == "int" else "a number") + " unquoted, or null for the "
                    "default (a string is kept as it is by Megatron-Bridge's loaders, and fails)")


def _env_text(value: Any) -> str | None:
    """An ``env_vars`` value as the run's environment holds it: ``str(value)`` (``True``, ``1``, ``0.5``);
    None for what Bridge refuses (a value that is no str / int / float / bool)."""
    return str(value) if isinstance(value, (str, int, float, bool)) else None


def _read_env(rec: BridgeRecipe, node: yaml.Node | None) -> None:
    """``env_vars`` as the launch environment (the one the Megatron readers take from a script's exports or
    a YAML's ``ENV_VARS``; plan/legality.py ``megatron_env_problems`` checks it when a plan is written)."""
    if not isinstance(node, yaml.MappingNode):
        return
    rec.env_node = node
    for k, v in mapping_items(node):
        txt = _env_text(node_value(v)) if isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.ScalarNode) else None
        if txt is None:
            raise UserError(f"{rec.path}: env_vars.{getattr(k, 'value', k)}: a str, int, float or bool value "
                            "(Megatron-Bridge apply_environment_variables refuses others)")
        said = env_var_from_environment(str(k.value), txt)  # read22: ${oc.env:...} in env_vars
        if said is not None:
            rec.notes.append(said)
            continue
        rec.env[str(k.value)] = txt


def _ub_mapping(node: yaml.MappingNode, field: str) -> dict[str, Any]:
    """A ``tp_comm_overlap_cfg`` mapping (``CommOverlapConfig``'s ``TransformerLayerTPOverlapCfg`` with a
    ``*OverlapCfg`` per layer GEMM, or the model's dict after Bridge's ``CommOverlapConfig.setup``) as the
    ``ub_cfgs`` TE is given: ``asdict`` of it, layers set to None dropped (training/comm_overlap.py), the
    ``_target_`` keys of the saved YAML left out; checked as the Megatron reader checks a
    ``--tp-comm-overlap-cfg`` file (megatron_args.ub_cfg_entries)."""
    data = node_value(node)
    if not isinstance(data, dict):
        raise PlanError(field, data, "a mapping of layer names (qkv_fprop, ...) to settings")
    out = {str(k): ({str(a): b for a, b in v.items() if not str(a).startswith("_")} if isinstance(v, dict) else v)
           for k, v in data.items() if not str(k).startswith("_") and v is not None}
    ub_cfg_entries(out, field)
    return out


def _activation(rec: BridgeRecipe, model: yaml.MappingNode) -> None:
    gated_node = child_node(model, "gated_linear_unit")
    gated = bool(node_value(gated_node)) if gated_node is not None else False
    act_node = child_node(model, "activation_func")
    act = (_target(act_node) or "") if act_node is not None else "torch.nn.functional.gelu"
    name = act.rsplit(".", 1)[-1]
    if gated and name == "silu":
        rec.put("swiglu", True, gated_node)
    elif gated and name == "quick_gelu":
        rec.put("quick_geglu", True, gated_node)
    elif not gated and name == "squared_relu":
        rec.put("squared_relu", True, act_node)
    elif gated:
        rec.put("swiglu", True, None)
        rec.unmodelled.append(UnmodelledFlag(flag="model.activation_func", value=f"{act} (gated)", effect=(
            "time: a gated MLP with this activation is priced as SwiGLU (same GEMMs, another elementwise op)")))
    elif name not in ("gelu", ""):
        rec.unmodelled.append(UnmodelledFlag(flag="model.activation_func", value=act, effect=(
            "time: priced as GELU (same GEMMs, another elementwise op)")))


def _precision(rec: BridgeRecipe, root: yaml.MappingNode, unread: list[str]) -> None:
    """``mixed_precision`` (a recipe name or its fields) over the model's precision fields, as Bridge's
    ``MixedPrecisionConfig.setup`` overwrites them; then the DDP grad-reduce dtype."""
    mp = child_node(root, "mixed_precision")
    fields: dict[str, Any] = {}
    mp_nodes: dict[str, list[yaml.Node]] = {}  # dest -> the mixed_precision value nodes that set it (the writer's)
    if isinstance(mp, yaml.ScalarNode) and node_value(mp) not in (None, ""):
        name = str(node_value(mp)).replace("-", "_")
        if name not in MIXED_PRECISION_RECIPES:
            raise UserError(f"{rec.path}: mixed_precision={node_value(mp)!r}: not a Megatron-Bridge precision recipe; "
                            f"one of {', '.join(sorted(MIXED_PRECISION_RECIPES))}")
        fields = {**_MP_DEFAULTS, **MIXED_PRECISION_RECIPES[name]}
        rec.notes.append(f"mixed_precision {name}: its fields (Megatron-Bridge training/mixed_precision.py) override the "
                         "model's")
        rec.mp_name = mp
    elif isinstance(mp, yaml.MappingNode):
        # the fields the mapping leaves out are MixedPrecisionConfig's defaults, which setup() writes over the model's
        fields = dict(_MP_DEFAULTS)
        rec.sections["mixed_precision"] = mp
        for k, v in mapping_items(mp):
            key = str(k.value)
            if key.startswith("_") or key.endswith("dtype"):
                continue
            val = _plain(v)
            name = {"fp4_param_gather": "fp4_param"}.get(key, key)
            if key in ("fp8_param", "fp4_param"):
                # __init__ assigns every field in declaration order and __setattr__ keeps fp8_param and
                # fp8_param_gather alike: *_param_gather, given or its default False, is set last and wins (and
                # finalize() gives a None *_param the gather's value); the writer edits both where both are written
                if child_node(mp, f"{key}_gather") is not None:
                    mp_nodes.setdefault(_RENAMES.get(name, name), []).append(v)
                continue
            mp_nodes.setdefault(_RENAMES.get(name, name), []).append(v)
            fields[name] = val
    for key, val in fields.items():
        if key == "grad_reduce_in_fp32":
            continue
        dest = _RENAMES.get(key, key)
        if BY_DEST.get(dest) is None and megatron_flags.lookup(dest) is None:
            if val not in (None, False, 0):
                unread.append(f"mixed_precision.{key}={val}")
            continue
        spec = BY_DEST.get(dest)
        if isinstance(mp, yaml.MappingNode):  # a field as written (a recipe name's are the factory's booleans)
            _refuse_quoted_false(f"mixed_precision.{key}", val, dest)
        rec.args[dest] = convert(spec, val) if spec is not None else val  # None too: setup() overwrites with it
        rec.nodes.pop(dest, None)  # the model's node no longer decides it: mixed_precision's does (a recipe name: none)
        if mp_nodes.get(dest):
            rec.nodes[dest] = [(n, False) for n in mp_nodes[dest]]
            rec.spelled[dest] = (f"mixed_precision.{key}", val)  # a refusal names the key in effect, not the model's
    if not rec.args.get("first_last_layers_bf16"):
        for k in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16"):
            rec.args.pop(k, None)  # only read with first_last_layers_bf16
    ddp = rec.sections.get("ddp")
    g_node = child_node(ddp, "grad_reduce_in_fp32") if ddp is not None else None
    if mp_nodes.get("grad_reduce_in_fp32"):
        g_node = mp_nodes["grad_reduce_in_fp32"][0]  # mixed_precision's wins over the DDP config's
    grad_fp32 = fields.get("grad_reduce_in_fp32", node_value(g_node) if g_node is not None else None)
    if grad_fp32 is not None:
        if rec.args.get("bf16"):
            rec.put("grad_reduce_in_bf16", not grad_fp32, g_node, inverted=True)
        else:
            rec.put("accumulate_allreduce_grads_in_fp32", bool(grad_fp32), g_node)


def from_bridge_yaml(text: str, path: str) -> BridgeRecipe:
    """The Megatron argument values of a Bridge run config, with the nodes they came from."""
    from primus_launch.inputs import parse_yaml

    parse_yaml(text, "recipe", path)  # the input boundary: syntax, nesting and size as one line
    root = yaml.compose(text)
    if not states_model(root):
        raise UserError(f"{path}: a Megatron-Bridge config without model.num_layers / model.hidden_size: it overrides a "
                        "recipe Megatron-Bridge builds in Python; give the saved run_config.yaml of the run")
    left = resolve_nodes(root, text, path)  # ${...} as ConfigContainer.from_yaml's OmegaConf resolves them
    rec = BridgeRecipe(text, path)
    try:
        _read_root(rec, root, path)
    except PlanError as e:  # a field that stayed an interpolation (oc.env): said as such, not as a bad number
        if isinstance(e.value, str) and "${" in e.value:
            refuse_unresolved(e.field, e.value)
        raise
    for dest, nodes in rec.nodes.items():
        hit = next((left[id(n)] for n, _ in nodes if id(n) in left), None)
        if hit is not None and rec.args.get(dest) is not None:
            refuse_unresolved(*hit)
    rec.args = {k: v for k, v in rec.args.items() if v is not None}
    return rec


def _read_root(rec: BridgeRecipe, root: yaml.MappingNode, path: str) -> None:
    """Read the composed config ``root`` (its interpolations resolved) into ``rec``."""
    from primus_launch.inputs import duplicate_keys

    text = rec.text

    # a key given twice: Megatron-Bridge loads the file with yaml.safe_load (training/utils/checkpoint_utils.py), which
    # keeps the last without a word; so does this reader -- said, as for Megatron-LM and Primus YAMLs
    rec.notes += [f"{key}: given twice (lines {a} and {b}); the last is read" for key, a, b in duplicate_keys(text)]
    _read_env(rec, child_node(root, "env_vars"))
    cls = (_target(child_node(root, "model")) or "").rsplit(".", 1)[-1]
    if _OTHER_FAMILY.search(cls):
        raise PlanError("model._target_", _target(child_node(root, "model")), "a model family the projection does not "
                        "model (GPT-family decoders only: GPTModelProvider and its subclasses)")
    msec = _model_section(root)
    odd = next((k for k in _DIFFUSION_FIELDS if msec is not None and child_node(msec, k) is not None), None)
    if odd:
        raise PlanError(f"model.{odd}", node_value(child_node(msec, odd)), "a field of Megatron-Bridge's diffusion "
                        "transformers (WanModelProvider / FluxProvider: video / image generation), not a GPT-family "
                        "decoder; not modelled")
    if _HYBRID_FAMILY.search(cls):
        rec.put("is_hybrid_model", True, None)
    for name in ("model", "train", "ddp", "optimizer", "tokenizer", "comm_overlap", "dataset"):
        node = child_node(root, name)
        if isinstance(node, yaml.MappingNode):
            rec.sections[name] = node
    model = _model_section(root)
    rec.sections["model"] = model
    unread: list[str] = []
    outer = child_node(root, "model")
    if "tokenizer" in rec.sections:  # first: a model's vocab_size (set by Bridge's setup) wins over it
        _read_fields(rec, "tokenizer", rec.sections["tokenizer"], unread)
    if outer is not model:  # GPTModelConfig: vocabulary, sequence, embeddings on the outer mapping
        _read_fields(rec, "model", outer, unread)
    _read_fields(rec, "model", model, unread)
    for name in ("train", "ddp", "optimizer"):
        if name in rec.sections:
            _read_fields(rec, name, rec.sections[name], unread)
    for name, keys in _PICKED.items():  # the few fields of otherwise neutral sections that Megatron's rules read
        sec = child_node(root, name)
        if isinstance(sec, yaml.MappingNode):
            rec.sections[name] = sec
            for key in keys:
                node = child_node(sec, key)
                val = _plain(node) if node is not None else None  # a list or mapping: refused by convert
                if val is not None and (val is not False or not rec.args.get(key)):  # either use_megatron_fsdp turns it on
                    rec.put(key, convert(BY_DEST[key], val), node)
    if "comm_overlap" in rec.sections:
        _read_fields(rec, "comm_overlap", rec.sections["comm_overlap"], unread, only_set=True)
    # model-level translations
    _activation(rec, model)
    for m in ((outer, model) if outer is not model else (model,)):  # GPTModelConfig: both; a provider: one mapping
        share = child_node(m, "share_embeddings_and_output_weights")
        if share is not None:
            rec.put("untie_embeddings_and_output_weights", not node_value(share), share, inverted=True)
        seq = child_node(m, "seq_length")
        if seq is not None and node_value(seq) is not None:  # a list or mapping too: refused, naming it
            rec.put("seq_length", _integer(seq, "seq_length", "model.seq_length"), seq)
    persist = child_node(model, "persist_layer_norm")
    if isinstance(persist, yaml.ScalarNode) and isinstance(node_value(persist), bool):
        rec.put("no_persist_layer_norm", not node_value(persist), persist, inverted=True)
    fusion = child_node(model, "bias_activation_fusion")
    if isinstance(fusion, yaml.ScalarNode) and isinstance(node_value(fusion), bool):  # per MLP kind in Megatron-LM
        rec.put("bias_swiglu_fusion" if rec.args.get("swiglu") else "bias_gelu_fusion", node_value(fusion), fusion)
    groups = child_node(model, "num_query_groups")
    if groups is not None and node_value(groups) is not None:
        rec.put("group_query_attention", True, None)
        rec.put("num_query_groups", _integer(groups, "num_query_groups", "model.num_query_groups"), groups)
    pad, own = child_node(outer, "should_pad_vocab"), child_node(outer, "vocab_size")
    if pad is not None and node_value(pad) is False and own is not None and node_value(own) is not None:
        rec.put("padded_vocab_size", _integer(own, "vocab_size", "model.vocab_size"), None)  # GPTModelProvider.provide: no padding
    ds = rec.sections.get("dataset")
    ds_node = child_node(ds, "seq_length") if ds is not None else None
    ds_seq = _integer(ds_node, "seq_length", "dataset.seq_length") if ds_node is not None else None
    if ds_seq is not None and rec.args.get("seq_length") is not None and ds_seq != rec.args["seq_length"]:
        rec.notes.append(f"dataset.seq_length={ds_seq} differs from model.seq_length={rec.args['seq_length']}: the "
                         "model's is projected")
    _precision(rec, root, unread)
    peft = child_node(root, "peft")
    if isinstance(peft, yaml.MappingNode):
        rec.unmodelled.append(UnmodelledFlag(flag="peft", value=_target(peft) or "set", effect=(
            "time, memory: parameter-efficient fine-tuning (frozen base weights, adapter gradients and optimizer "
            "state) is priced as full training")))
    if unread:
        rec.notes.append(f"{len(unread)} Megatron-Bridge field(s) with no Megatron-LM argument, not read: "
                         + ", ".join(unread[:40]) + (", ..." if len(unread) > 40 else ""))
    _foreign_sections(rec, root)
    quiet = [s for s in _NEUTRAL_SECTIONS if isinstance(child_node(root, s), yaml.MappingNode)]
    if quiet:
        rec.notes.append(f"sections not read (no effect on an iteration's time or memory; of dist and checkpoint only "
                         f"the FSDP switches and ckpt_format): {', '.join(quiet)}")


def _foreign_sections(rec: BridgeRecipe, root: yaml.Node) -> None:
    """Note each top-level key that is no field of Megatron-Bridge's ``ConfigContainer`` (a misspelt
    ``mixed_precison:``, a section of another tool): Bridge's ``apply_overrides`` (training/utils/omegaconf_utils.py,
    Megatron-Bridge 067f987) logs "Key ... not found in config object ... Skipping." and runs without it; so does
    the projection, said with the nearest section name."""
    import difflib

    if not isinstance(root, yaml.MappingNode):
        return
    for key_node, _ in root.value:
        key = node_value(key_node) if isinstance(key_node, yaml.ScalarNode) else None
        if not isinstance(key, str) or key in _CONTAINER_FIELDS:
            continue
        near = difflib.get_close_matches(key, sorted(_CONTAINER_FIELDS - {"_target_"}), n=1, cutoff=0.75)
        rec.notes.append(f"{key}: not a section of Megatron-Bridge's ConfigContainer (Bridge skips it with a "
                         "warning), not read" + (f"; did you mean {near[0]}?" if near else ""))


def _dp_node(rec: BridgeRecipe) -> yaml.Node | None:
    co = rec.sections.get("comm_overlap")
    node = child_node(co, "data_parallel_size") if co is not None else None
    value = node_value(node) if isinstance(node, yaml.ScalarNode) else None
    return node if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _saved_cluster(rec: BridgeRecipe) -> Cluster | None:
    """The run's world size from ``comm_overlap.data_parallel_size`` (``ConfigContainer.set_data_parallel_size``
    writes world / (TP x PP x CP) there) on the default GPU, 8 per node: a guess (``_saved_note`` says it)."""
    node = _dp_node(rec)
    if node is None:
        return None
    a = rec.args
    world = int(node_value(node)) * max(1, int(a.get("tensor_model_parallel_size") or 1)) * max(
        1, int(a.get("pipeline_model_parallel_size") or 1)) * max(1, int(a.get("context_parallel_size") or 1))
    gpn = 8 if world % 8 == 0 else world
    return stated_cluster({"nodes": str(world // gpn), "gpus_per_node": str(gpn)}, None)


def _saved_note(rec: BridgeRecipe, saved: Cluster, final: Cluster, overrides: Mapping[str, Any] | None) -> str | None:
    """The note on what the saved ``comm_overlap.data_parallel_size`` gave the answer's cluster ``final``: its GPU
    count (unless the cluster flags restated it: the answer's count is theirs) and the default GPU (unless
    ``--gpu`` named one); ``None`` where the flags set both."""
    gpu_given = not Cluster.uncovered(("gpu",), overrides)
    count_given = final.world_size != saved.world_size or not Cluster.uncovered(("num_nodes",), overrides)
    said = f"comm_overlap.data_parallel_size={node_value(_dp_node(rec))}"
    if count_given and gpu_given:
        return None
    if count_given:
        replaced = (f" ({said}, {saved.world_size} GPUs when saved, is replaced by the cluster flags' "
                    f"{final.world_size})" if final.world_size != saved.world_size else "")
        return f"cluster gpu={final.gpu}: the default (the config names no GPU); pass --gpu to override{replaced}"
    gpu = "" if gpu_given else "; the GPU the default: the config names none"
    return (f"cluster from {said}: {final.world_size} x {final.gpu} ({final.num_nodes} nodes x "
            f"{final.gpus_per_node}{gpu}); pass --gpu/--nodes to override")


def _parse(text: str, path: str, given: Cluster | None,
           overrides: Mapping[str, Any] | None = None) -> tuple[BridgeRecipe, Cluster]:
    """(recipe, cluster): ``given``, else the one the config states (``# primus-launch:`` comment, the saved
    ``comm_overlap.data_parallel_size``, else the default) completed by ``overrides`` (partial cluster flags,
    which keep the saved GPU count; the guess's note left out only where they set every cluster field)."""
    rec = from_bridge_yaml(text, path)
    # a relative tp_comm_overlap_cfg file: looked up from the config's folder upwards, as the Megatron reader
    # looks up --tp-comm-overlap-cfg (the run starts from its checkout's root, not from here)
    rec.args = files_from_run_root(rec.args, Path(path))
    cfg = ms.comment_config(text)
    if given is not None:
        return rec, given
    saved = _saved_cluster(rec) if not cfg else None
    written = saved or stated_cluster(cfg, None)
    final = written.completed(overrides, saved.world_size if saved else None) if overrides else written
    note = _saved_note(rec, saved, final, overrides) if saved is not None else None
    if note:
        rec.notes.append(note)
    return rec, final


def _model_name(rec: BridgeRecipe, path: Path) -> str:
    """The answer's model name: the provider's ``model.hf_model_id`` (``Qwen/Qwen3-30B-A3B`` -> ``Qwen3-30B-A3B``;
    every Bridge provider of a Hugging Face model saves it) where it is one plain word (the name goes into emitted
    scripts' comments), else the file's stem (``run_config`` names no model)."""
    model = rec.sections.get("model")
    node = child_node(model, "hf_model_id") if model is not None else None
    value = node_value(node) if isinstance(node, yaml.ScalarNode) else None
    name = value.rstrip("/").rsplit("/", 1)[-1] if isinstance(value, str) else ""
    return name if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}", name) else path.stem


def load_bridge_yaml(path: str | Path, cluster: Cluster | None = None,
                     overrides: Mapping[str, Any] | None = None) -> Plan:
    """Read a Megatron-Bridge run config (``run_config.yaml``) into a plan, on ``cluster`` (else the
    ``# primus-launch:`` comment's, else the default cluster, completed by partial cluster flags
    ``overrides``)."""
    p = Path(path)
    rec, written = _parse(read_recipe_text(p), str(p), cluster, overrides)
    try:
        plan = plan_from_args(rec.args, written, name=_model_name(rec, p))
    except PlanError as e:  # the rule names the file's key (model.tensor_model_parallel_size), not the flag
        field_ = _bridge_keys(str(e.field), rec.spelled)
        if field_ == e.field:
            raise
        raise PlanError(field_, e.value, _bridge_keys(e.allowed, rec.spelled)) from None
    except UserError as e:  # a plan bound broken ('--micro-batch-size=0: Input should be greater than 0')
        said = _bridge_keys(str(e), rec.spelled)
        if said == str(e):
            raise
        raise UserError(said) from None
    plan = with_source(plan, rec, str(p), FORMAT)
    src = plan.source
    unmodelled = warnings_as_keys(list(src.unmodelled), rec.spelled)
    notes = [_bridge_keys(n, rec.spelled) for n in src.notes]
    # the cluster's note first: the one-screen answer shows the first notes that fit (the saved data-parallel size's
    # cluster was cut off behind the unread-fields note)
    notes = [n for n in notes if n.startswith("cluster")] + [n for n in notes if not n.startswith("cluster")]
    return plan.model_copy(update={"source": src.model_copy(update={"unmodelled": unmodelled, "notes": notes})})


#: Megatron-LM destinations one Bridge field sets under another name: the plan's virtual stages are named by
#: ``--num-virtual-stages-per-pipeline-rank``, which ``validate_args`` copies into
#: ``virtual_pipeline_model_parallel_size`` (the field Bridge's model config holds)
_SAME_DEST = {"num_virtual_stages_per_pipeline_rank": "virtual_pipeline_model_parallel_size"}


def _bridge_keys(text: str, spelled: Mapping[str, tuple[str, Any]]) -> str:
    """``text`` with each Megatron-LM flag (``--manual-gc``) whose value the config gave spelled as the config's
    ``section.key`` (``train.manual_gc``): a Bridge user's warnings, notes and errors named Megatron-LM's flags."""
    def key(m: re.Match) -> str:
        dest = flag_dest(m.group(0))
        dest = _SAME_DEST.get(dest, dest) if dest not in spelled else dest
        return spelled[dest][0] if dest in spelled else m.group(0)

    return re.sub(r"(?<![\w-])--[a-z][a-z0-9-]*", key, text)


# --------------------------------------------------------------------------- writing
def _scalar(value: Any) -> str:
    return scalar_text(value, quote="'")  # yaml.safe_dump's quoting


# the section a dest is added to when the file does not write it
_HOME = {"micro_batch_size": "train", "global_batch_size": "train", "train_iters": "train",
         "overlap_grad_reduce": "ddp", "overlap_param_gather": "ddp", "use_distributed_optimizer": "ddp",
         "ddp_bucket_size": "ddp", "use_megatron_fsdp": "ddp", "data_parallel_sharding_strategy": "ddp",
         "use_torch_fsdp2": "dist", "ckpt_format": "checkpoint",
         # Bridge's OptimizerConfig (megatron-core optimizer_config.py) fields
         "use_precision_aware_optimizer": "optimizer", "optimizer_cpu_offload": "optimizer",
         "optimizer_offload_fraction": "optimizer", **dict.fromkeys(_STATE_DTYPES, "optimizer")}
_BRIDGE_KEY = {v: k for k, v in _RENAMES.items()}


def _value_text(dest: str, value: Any) -> str:
    """A value as the Bridge file spells it: an optimizer state dtype as the torch dtype object
    (``{_call_: false, _target_: torch.bfloat16}``, yaml_utils' representer), no FP8 recipe as ``delayed`` (the
    plan's None; MixedPrecisionConfig.fp8_recipe is a str, copied into the OptimizerConfig), anything else as YAML."""
    if dest in _STATE_DTYPES and value in _TORCH_DTYPE:
        return f"{{_call_: false, _target_: {_TORCH_DTYPE[value]}}}"
    if dest == "fp8_recipe" and value is None:  # the plan's None is Megatron-LM's default; Bridge's is tensorwise
        return "delayed"
    return _scalar(value)


def _home(rec: BridgeRecipe, dest: str) -> str:
    """The section a dest the file does not write is added to (a precision field: ``mixed_precision:`` when that
    is a mapping, as setup() writes it over the model's)."""
    if dest in _MP_DESTS and "mixed_precision" in rec.sections:
        return "mixed_precision"
    return _HOME.get(dest, "model")


def _recipe_name_edit(rec: BridgeRecipe, changes: dict[str, Any]) -> list[ms.Edit]:
    """``mixed_precision: <recipe name>`` edited to the recipe whose fields (training/mixed_precision.py, over
    MixedPrecisionConfig's defaults) are the precision the plan asks for; none: refused in one line."""
    mine = {k: v for k, v in changes.items() if k in _MP_DESTS}
    if rec.mp_name is None or not mine:
        return []
    name = str(node_value(rec.mp_name)).replace("-", "_")
    want = {_RENAMES.get(k, k): v for k, v in {**_MP_DEFAULTS, **MIXED_PRECISION_RECIPES[name]}.items()}
    want.update(mine)
    for other, f in MIXED_PRECISION_RECIPES.items():
        have = {_RENAMES.get(k, k): v for k, v in {**_MP_DEFAULTS, **f}.items()}
        # the FP8 format (hybrid / e4m3) is no plan field: any recipe with FP8 on matches an FP8 plan
        if all(bool(have.get(k)) == bool(v) if k == "fp8" else have.get(k) == v or (v is None and not have.get(k))
               for k, v in want.items()):
            return [ms.Edit(rec.mp_name.start_mark.index, rec.mp_name.end_mark.index, other)]
    shown = ", ".join(f"{k}={v}" for k, v in mine.items())
    raise UserError(f"{rec.path}: cannot express {shown} with mixed_precision={node_value(rec.mp_name)!r}: no "
                    "Megatron-Bridge precision recipe sets it; write mixed_precision's fields as a mapping")


def _edits(rec: BridgeRecipe, changes: dict[str, Any]) -> list[ms.Edit]:
    edits: list[ms.Edit] = _recipe_name_edit(rec, changes)
    for dest, val in changes.items():
        spec = BY_DEST.get(dest)
        nodes = rec.nodes.get(dest)
        if nodes:
            for node, inverted in nodes:
                v = (not val) if inverted and isinstance(val, bool) else val
                if isinstance(node, yaml.ScalarNode) or node.flow_style:
                    edits.append(ms.Edit(node.start_mark.index, node.end_mark.index, _value_text(dest, v)))
                else:  # a block list / mapping (its items may start at the key's column): the value, in flow style
                    a = rec.text.rfind(":", 0, node.start_mark.index) + 1
                    end = rec.text.rfind("\n", node.start_mark.index, node.end_mark.index)
                    edits.append(ms.Edit(a, end if end > 0 else node.end_mark.index, " " + _value_text(dest, v)))
            continue
        if rec.mp_name is not None and dest in _MP_DESTS:
            continue  # the recipe name's (_recipe_name_edit)
        if val is None or (spec is not None and (val == spec.default or (spec.kind == "true" and not val))):
            continue
        home = _home(rec, dest)
        sec = rec.sections.get(home)
        items = mapping_items(sec) if sec is not None else []
        if not items or sec.flow_style:
            raise UserError(f"{rec.path}: cannot add {dest}={val} to this Megatron-Bridge config (no block mapping "
                            f"{home}:)")
        at, lines = entries_after(rec.text, *items[-1], [f"{_BRIDGE_KEY.get(dest, dest)}: {_value_text(dest, val)}"])
        edits.append(ms.Edit(at, at, lines))
    return edits


def _unaliased(text: str, path: str, dests: list[str]) -> str:
    """``text`` with the dtype the state dtype fields ``dests`` share by a YAML anchor (``exp_avg_dtype: &id002
    {...}``, ``exp_avg_sq_dtype: *id002``: safe_dump aliases one torch dtype object) written out at every alias,
    so that one field can change alone (an edit of the anchor would change them all, or drop the anchor the
    others name)."""
    rec = from_bridge_yaml(text, path)
    shared: dict[str, yaml.Node] = {}  # anchor name -> the dtype node it names
    for dest in dests:
        k = rec.dtype_keys.get(dest)
        m = re.compile(r":[ \t]*[&*]([^\s,\]}]+)").match(text, k.end_mark.index) if k is not None else None
        if m and isinstance(rec.nodes[dest][0][0], yaml.MappingNode):
            shared[m.group(1)] = rec.nodes[dest][0][0]
    edits: list[ms.Edit] = []
    for name, node in shared.items():
        flow = "{" + ", ".join(f"{a.value}: {text[b.start_mark.index:b.end_mark.index]}"
                               for a, b in mapping_items(node)) + "}"
        alias = re.compile(r"\*" + re.escape(name) + r"(?![^\s,\]}])")
        edits += [ms.Edit(m.start(), m.end(), flow) for m in alias.finditer(text)]
    return ms.apply_edits(text, edits, path) if edits else text


def render_bridge_yaml(plan: Plan, original_text: str) -> str:
    """The Bridge config with only the plan's changed values edited (identical text if unchanged); the
    result must read back as ``plan``, or a one-line :class:`UserError` names what it cannot express.  FP8 with no
    scaling recipe named (the plan's None: Megatron-LM's default, delayed; the tuner's FP8 candidate) is written as
    ``delayed``: Bridge's MixedPrecisionConfig always names one (its default tensorwise), so it reads back by name."""
    return render_unshared(original_text, lambda t: _render_bridge_text(plan, t))


def _render_bridge_text(plan: Plan, original_text: str) -> str:
    path = plan.source.path if plan.source and plan.source.path else "<recipe>"
    if plan.training.precision == "fp8" and plan.training.fp8_recipe is None:
        plan = plan.model_copy(update={"training": plan.training.model_copy(update={"fp8_recipe": "delayed"})})
    p = plan.parallel

    def edits_of(out: str) -> list[ms.Edit]:
        rec, _ = _parse(out, path, plan.cluster)
        cfg = ms.comment_config(out)
        written = stated_cluster(cfg, None) if cfg else plan.cluster
        current = plan_from_args(rec.args, plan.cluster, validate=False)
        changes = changed_args(current, plan, rec.args, frozenset(rec.nodes))
        after = {**rec.args, **changes}
        if (after.get("fp8") and after.get("fp8_recipe") == "mxfp8" and after.get("fp8_param_gather")
                and not after.get("use_megatron_fsdp") and not after.get("reuse_grad_buf_for_mxfp8_param_ag")):
            # Bridge's ConfigContainer.validate asserts it for MXFP8 param gather without Megatron-FSDP
            # (training/config.py, @067f987; its bf16_with_mxfp8_mixed recipe sets it)
            changes["reuse_grad_buf_for_mxfp8_param_ag"] = True
        edits = _edits(rec, changes) + cluster_edits(out, rec, written, plan.cluster, False)
        dp_node, dp = _dp_node(rec), plan.cluster.world_size // max(1, p.tp * p.pp * p.cp)
        if dp_node is not None and node_value(dp_node) != dp:  # keep the saved world size the plan's
            edits.append(ms.Edit(dp_node.start_mark.index, dp_node.end_mark.index, str(dp)))
        return edits

    rec0, _ = _parse(original_text, path, plan.cluster)
    changes0 = changed_args(plan_from_args(rec0.args, plan.cluster, validate=False), plan, rec0.args,
                            frozenset(rec0.nodes))
    start = _unaliased(original_text, path, [d for d in _STATE_DTYPES if d in changes0])
    out = ms.edit_to_fixpoint(start, path, edits_of)
    if out != original_text:
        # the variables the tuned plan newly needs at start-up, written into env_vars (megatron.with_launch_env: Bridge
        # asserts CUDA_DEVICE_MAX_CONNECTIONS != 1 under Megatron-FSDP and NVTE_CPU_OFFLOAD_V1=1 with fine-grained
        # offloading, training/config.py; its launcher sets CUDA_DEVICE_MAX_CONNECTIONS 1 with TP/CP > 1 before
        # Blackwell, scripts/performance/utils/overrides.py; Bridge @067f987)
        out = with_launch_env(plan, original_text, out, path, lambda t: _parse(t, path, plan.cluster)[0])
    rec, _ = _parse(out, path, plan.cluster)
    back = plan_from_args(rec.args, plan.cluster)  # validated: Megatron would accept the result
    refuse_diffs(plan_diffs(plan, back), path, "Megatron-Bridge config")
    return out


def write_bridge_yaml(plan: Plan, original_path: str | Path, out_path: str | Path) -> Path:
    """Write the rendered config atomically to ``out_path`` (never over the original)."""
    return write_rendered(plan, original_path, out_path, FORMAT, render_bridge_yaml)


__all__ = ["is_bridge_run_config", "load_bridge_yaml", "render_bridge_yaml", "write_bridge_yaml", "states_model"]
