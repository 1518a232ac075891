"""TorchTitan adapter: a TorchTitan job (v0.1/v0.2 TOML, Primus YAML, 0.3 launch line) <-> :class:`Plan`.

Every TorchTitan reader builds one *job*: a nested dict in the key space of torchtitan v0.2.x's
``JobConfig`` (``torchtitan/config/job_config.py``: ``[model]``, ``[training]``, ``[parallelism]``,
``[activation_checkpoint]``, ``[compile]``, ``[quantize.*]``, ``[debug]``, ...).  The v0.2 TOML is
that dict; a Primus TorchTitan module (``primus/configs/modules/torchtitan``) merges to it; a
torchtitan 0.3 launch line (``--module M --config C --section.key value``) is converted to it
(:mod:`primus_launch.adapters.torchtitan_argv`).  :func:`plan_from_job` maps it to the plan:

- ``[model] name, flavor`` -> architecture from torchtitan's registry (:func:`arch_from_flavor`);
  converters ``float8`` / ``quantize.linear.float8`` -> precision fp8 with
  ``quantize.linear.float8.recipe_name`` (``None`` = tensorwise) as ``fp8_recipe``; ``mx`` /
  ``quantize.linear.mx`` -> fp8 ``mxfp8``; 0.3's NVFP4 converter -> fp4 ``nvfp4``;
  ``enable_fsdp_float8_all_gather`` -> ``fp8_param_gather``; FP8 on MoE experts alone is reported.
- ``[training] local_batch_size`` (8), ``global_batch_size`` (-1 = local x dp), ``seq_len`` (2048),
  ``steps`` (10000), ``mixed_precision_param`` ("bfloat16"; "float32" -> fp32), ``dtype``
  ("bfloat16" = parameters and optimizer states in bf16), ``enable_cpu_offload`` (FSDP2 CPU offload
  of parameters, gradients and optimizer states), 0.3's ``disable_cuda_graphs`` (false = the whole
  forward+backward step is one CUDA graph).
- ``[parallelism]``: ``data_parallel_replicate_degree`` (1), ``data_parallel_shard_degree`` (-1 = the
  ranks left after replicate x cp x tp x pp), ``tensor_parallel_degree`` (1; sequence parallel unless
  0.3's ``enable_sequence_parallel = false``), ``pipeline_parallel_degree`` (1),
  ``pipeline_parallel_schedule`` ("1F1B"), ``pipeline_parallel_microbatch_size`` (1), the stage split
  keys (:mod:`primus_launch.plan.torchtitan_split`), ``context_parallel_degree`` (1) with
  ``context_parallel_rotate_method`` (allgather | alltoall = ring), ``expert_parallel_degree`` (1),
  ``expert_tensor_parallel_degree`` (1; only with EP; 1 or tp), ``expert_parallel_comm_backend``
  (standard | deepep; 0.3 also hybridep), ``enable_async_tensor_parallel`` (0.3:
  ``compile.enable_async_tensor_parallel``), ``fsdp_reshard_after_forward``, 0.3's ``spmd_backend``
  ("spmd_types": an MoE's standard EP all-to-alls are c10d ones off per-op SAC's save list,
  ``training.moe_a2a_collective``).
- ``[activation_checkpoint] mode`` ("selective") / ``selective_ac_option`` ("2"): "full" = every block
  checkpointed; "op" = per-op SAC; an integer N = every N-th block (``every_n``); "memory_budget" =
  compiler-chosen recomputation, projected as per-op SAC and reported.
- ``[compile] enable`` with ``"model"`` in ``components`` (v0.1: ``[training] compile``) -> ``compile``.

Batch: the micro-batch is ``pipeline_parallel_microbatch_size`` with PP, else ``local_batch_size``;
gradient accumulation = global / (local x dp).  Data parallel: a shard degree above 1 (or CP, which
FSDP spans) -> FSDP (``dp_sharding="full"``, HSDP replicate groups -> ``dp_replicate``); otherwise DDP
(``"none"``).  FSDP2 and DDP overlap their collectives with compute, so ``overlap_grad_reduce`` (and
``overlap_param_gather`` with FSDP) are on.

Every other key is neutral (logging, checkpoints, data, learning rate, ...) or, when set away from its
default, reported as not modelled (``plan.source.unmodelled``), never ignored silently.

The cluster is not in the job: the ``cluster`` argument, else the upstream header comment
("# NOTE: this toml config is a preset for 64 A100 GPUs."), else the product of explicit degrees,
else 1 node x 8 h100-sxm.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Optional

from pydantic import ValidationError

from primus_launch.adapters.titan_job_types import JOB_TYPES, check_job_types, job_get, type_problem
from primus_launch.adapters.titan_mapped_values import (check_mapped_values, earlier_names, later_name_hint,
                                                         unknown_key_table)
from primus_launch.adapters.torchtitan_arch import arch_from_fields, arch_from_flavor
from primus_launch.plan.torchtitan_split import (
    explicit_stage_layers,
    generate_split,
    is_single_stage,
    is_v_schedule,
    plan_placement,
    plan_schedule,
    stage_layers,
    titan_schedule,
    virtual_stage_strings,
)
from primus_launch.errors import UserError, one_line
from primus_launch.fileio import atomic_write_text, read_recipe_text
from primus_launch.plan import Cluster, Plan, PlanError, Source, UnmodelledFlag, torchtitan_problems
from primus_launch.plan.layout import virtual_stages

__all__ = ["arch_from_flavor", "load_torchtitan", "plan_from_text", "plan_from_job", "render_torchtitan",
           "write_torchtitan", "cluster_from_header", "job_assignments", "DELETE"]

# ---------------------------------------------------------------- cluster header
_GPU_TOKENS = {"A100": "a100-sxm-80gb", "H100": "h100-sxm", "H200": "h200", "B200": "b200",
               "MI300X": "mi300x", "MI325X": "mi325x", "MI355X": "mi355x"}
_GPU_WORDS = {v: k for k, v in _GPU_TOKENS.items()}
# the GPU word: torchtitan's own (H100, A100) or a primus-launch GPU name as the tuner writes it (gb200,
# a100-sxm-40gb, a --gpu-file's name): letters, digits and the - _ . @ + of those names (gpus._GPU_NAME)
_HEADER_RE = re.compile(r"preset for (\d+) ([A-Za-z0-9][A-Za-z0-9_.@+-]*) GPUs(?: \((\d+) nodes x (\d+) GPUs\))?")
DEFAULT_CLUSTER = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)


def comment_cluster(text: str) -> dict[str, str]:
    """The ``# primus-launch: gpu=G nodes=N gpus_per_node=K`` comment (any of the three), as Megatron scripts and
    YAMLs, NeMo and Megatron-Bridge configs state a cluster (:func:`megatron_script.comment_config`); {} when the
    text has none.  A job TOML read it as no cluster (user16: "the job states no cluster" over the user's comment)."""
    if not text:
        return {}
    from primus_launch.adapters.megatron_script import comment_config

    return comment_config(text)


def comment_count(cfg: dict[str, str], key: str, default: int) -> int:
    """The count ``cfg[key]`` of a ``# primus-launch:`` comment (:func:`comment_cluster`), ``default`` where the
    comment leaves ``key`` out; refused (one line naming the key) unless a whole number from 1 to 9,999,999."""
    if key not in cfg:
        return default
    try:
        n = int(cfg[key])
    except ValueError:
        n = 0
    if not 1 <= n <= 9_999_999:
        raise PlanError(key, cfg[key], "an integer from 1 to 9,999,999 (in the '# primus-launch:' comment)")
    return n


def cluster_from_header(text: str) -> Optional[Cluster]:
    """The cluster the file's comments state: a ``# primus-launch: [gpu=G] nodes=N [gpus_per_node=K]`` comment
    (:func:`comment_cluster`; 1 node, 8 GPUs per node and the GPU below by default), else a ``# NOTE: this toml
    config is a preset for N <GPU> GPUs.`` comment (optionally followed by ``(M nodes x K GPUs)``), 8 GPUs per node
    by default, its GPU replaced by the ``# primus-launch: gpu=`` comment's where it gives only a GPU."""
    cfg = comment_cluster(text)
    note = _note_header(text)
    if "nodes" in cfg or "gpus_per_node" in cfg:
        return Cluster(gpu=cfg.get("gpu") or (note.gpu if note else DEFAULT_CLUSTER.gpu),
                       num_nodes=comment_count(cfg, "nodes", 1), gpus_per_node=comment_count(cfg, "gpus_per_node", 8))
    if note is not None and cfg.get("gpu"):
        return note.model_copy(update={"gpu": cfg["gpu"]})
    return note


def _note_header(text: str) -> Optional[Cluster]:
    """The cluster of torchtitan's ``# NOTE: ... preset for N <GPU> GPUs.`` header (see :func:`cluster_from_header`)."""
    for line in text.splitlines():
        s = line.strip()
        if not s.startswith("#"):
            continue
        m = _HEADER_RE.search(s)
        if m is None:
            continue
        counts = [g for g in (m.group(1), m.group(3), m.group(4)) if g is not None]
        if any(len(g) > 7 or int(g) < 1 for g in counts):  # int() of 5,000 digits raises; 0 GPUs is no cluster
            raise PlanError("header comment", s, "GPU and node counts from 1 to 9,999,999")
        n, word = int(m.group(1)), m.group(2)
        gpu = _header_gpu(word)
        if gpu is None:
            raise PlanError("header comment GPU", word, f"one of {', '.join(_GPU_TOKENS)}, a primus-launch GPU name "
                            "(--gpu) or one a --gpu-file adds")
        if m.group(3):
            nodes, gpn = int(m.group(3)), int(m.group(4))
            if nodes * gpn != n:
                raise PlanError("header comment", s, f"{nodes} nodes x {gpn} GPUs must equal {n}")
        else:
            nodes, gpn = (n // 8, 8) if n % 8 == 0 else (1, n)
        return Cluster(gpu=gpu, num_nodes=nodes, gpus_per_node=gpn)
    return None


def _header_gpu(word: str) -> Optional[str]:
    """The GPU a header's word names: torchtitan's word (any case), else a known GPU name (as written, or
    in lower case: headers written before the tuner kept names as they are said ``GB200``); None otherwise."""
    from primus_launch.projection.hardware.gpus import known_gpus

    if word.upper() in _GPU_TOKENS:
        return _GPU_TOKENS[word.upper()]
    known = set(known_gpus())
    from primus_launch.plan.sections import normalize_gpu

    return next((w for w in (word, word.lower(), normalize_gpu(word)) if w in known), None)


def _header_line(c: Cluster) -> str:
    # torchtitan's word where it has one, else the name itself (read back by _header_gpu: upper-casing a
    # --gpu-file name or 'a100-sxm-40gb' made a header the reader refused or, past the old [A-Za-z0-9]+ word,
    # did not see: the tuned TOML then read as 8 H100s)
    word = _GPU_WORDS.get(c.gpu, c.gpu)
    extra = "" if c.gpus_per_node == 8 else f" ({c.num_nodes} nodes x {c.gpus_per_node} GPUs)"
    return f"preset for {c.world_size} {word} GPUs{extra}"


# ---------------------------------------------------------------- the key table
@dataclass(frozen=True)
class Key:
    """How a job key is read: ``mapped`` (into the plan), ``neutral`` (no effect on step time or
    memory) or ``unmodelled`` (reported with ``effect`` when set away from ``default``)."""

    status: str
    default: Any = None
    effect: str = ""


_MAPPED = Key("mapped")
_NEUTRAL = Key("neutral")
# whole sections that never change step time or memory
NEUTRAL_SECTIONS = frozenset({
    "job", "profiling", "profiler", "metrics", "lr_scheduler", "checkpoint", "validation", "validator",
    "memory_estimation", "dataloader", "tokenizer", "hf_assets_path", "dump_folder", "override", "lora"})


# architecture keys a Primus model preset may write next to name / flavor (Primus
# patches/model_override_patches.py overrides torchtitan's registry with them): plan field of each
_ARCH_OVERRIDES = {"n_layers": "num_layers", "dim": "hidden_size", "n_heads": "num_attention_heads"}


def _u(default: Any, effect: str) -> Key:
    return Key("unmodelled", default, effect)


KEYS: dict[str, Key] = {
    **{f"model.{k}": _MAPPED for k in ("name", "flavor", "converters", *_ARCH_OVERRIDES)},
    **{f"model.{k}": _NEUTRAL for k in ("hf_assets_path", "tokenizer_path", "print_after_conversion")},
    **{f"training.{k}": _MAPPED for k in ("local_batch_size", "global_batch_size", "seq_len", "steps",
                                          "mixed_precision_param", "mixed_precision_reduce", "dtype",
                                          "enable_cpu_offload", "compile",
                                          "disable_cuda_graphs", "batch_size")},
    **{f"training.{k}": _NEUTRAL for k in ("dataset", "dataset_path", "max_norm", "gc_freq", "mock_data", "seed",
                                           "deterministic_warn_only", "dataloader")},
    "training.gc_debug": _u(False, "time: gc.collect() every step"),
    "training.deterministic": _u(False, "time: deterministic kernels"),
    **{f"parallelism.{k}": _MAPPED for k in (
        "data_parallel_replicate_degree", "data_parallel_shard_degree", "fsdp_reshard_after_forward",
        "tensor_parallel_degree", "enable_sequence_parallel", "enable_async_tensor_parallel",
        "pipeline_parallel_degree", "module_fqns_per_model_part", "pipeline_parallel_first_stage_less_layers",
        "pipeline_parallel_last_stage_less_layers", "pipeline_parallel_layers_per_stage",
        "pipeline_parallel_schedule", "pipeline_parallel_microbatch_size", "pipeline_parallel_expert_parallel_overlap",
        "context_parallel_degree", "context_parallel_rotate_method", "expert_parallel_degree",
        "expert_tensor_parallel_degree", "expert_parallel_comm_backend", "spmd_backend")},
    **{f"parallelism.{k}": _NEUTRAL for k in ("context_parallel_load_balancer", "context_parallel_ptrr_mask_key",
                                              "pipeline_parallel_split_points")},
    "parallelism.disable_loss_parallel": _u(False, "memory: the full-vocabulary logits on every TP rank"),
    "parallelism.pipeline_parallel_schedule_csv": _u("", "time: a pipeline schedule read from a CSV file"),
    "parallelism.enable_fsdp_symm_mem": _u(False, "time: FSDP collectives over symmetric memory"),
    "parallelism.enable_compiled_autograd": _u(False, "time: compiled autograd"),
    **{f"activation_checkpoint.{k}": _MAPPED for k in ("mode", "selective_ac_option", "memory_budget")},
    **{f"activation_checkpoint.{k}": _NEUTRAL for k in (
        "per_op_sac_force_recompute_mm_shapes_by_fqns", "force_recompute_mm_shapes_by_fqns", "preserve_rng_state",
        "determinism_check", "debug", "visualize_memory_budget_pareto", "early_stop")},
    **{f"compile.{k}": _MAPPED for k in ("enable", "components", "enable_async_tensor_parallel")},
    "compile.backend": _u("inductor", "time: a torch.compile backend other than inductor"),
    **{f"quantize.linear.float8.{k}": _MAPPED for k in ("recipe_name", "enable_fsdp_float8_all_gather")},
    **{f"quantize.linear.float8.{k}": _NEUTRAL for k in ("precompute_float8_dynamic_scale_for_fsdp", "filter_fqns")},
    "quantize.linear.float8.emulate": _u(False, "time: FP8 matmuls emulated in higher precision"),
    **{f"quantize.linear.mx.{k}": _MAPPED for k in ("recipe_name", "mxfp8_dim1_cast_kernel_choice")},
    **{f"quantize.linear.mx.{k}": _NEUTRAL for k in ("filter_fqns",)},
    "quantize.grouped_mm.float8.fqns": _MAPPED,
    **{f"quantize.grouped_mm.mx.{k}": _MAPPED for k in ("fqns", "recipe_name")},
    **{f"float8.{k}": _MAPPED for k in ("recipe_name", "enable_fsdp_float8_all_gather", "enable_float8_linear")},
    **{f"float8.{k}": _NEUTRAL for k in ("precompute_float8_dynamic_scale_for_fsdp", "filter_fqns",
                                         "force_recompute_fp8_weight_in_bwd", "moe_fqns_prototype")},
    "float8.emulate": _u(False, "time: FP8 matmuls emulated in higher precision"),
    **{f"mx.{k}": _MAPPED for k in ("recipe_name", "mxfp8_dim1_cast_kernel_choice", "use_fp8_dim1_cast_triton_kernel")},
    **{f"mx.{k}": _NEUTRAL for k in ("filter_fqns", "moe_fqns_prototype")},
    "debug.moe_force_load_balance": _MAPPED,
    # its first name (torchtitan 99fee810b, 2025-10-02, until e61f2cce4 moved it to [debug]; Primus v25.10's
    # TorchTitan DeepSeek-V3 experiments write it): the same round-robin routing
    "training.debug_moe_force_load_balance": _MAPPED,
    **{f"debug.{k}": _NEUTRAL for k in ("seed", "deterministic_warn_only", "print_config", "save_config_file",
                                        "enable_structured_logging", "spmd_typechecking")},
    "debug.deterministic": _u(False, "time: deterministic kernels"),
    "debug.detect_anomaly": _u(False, "time: autograd anomaly detection"),
    "debug.batch_invariant": _u(False, "time: batch-invariant kernels"),
    "optimizer.name": _MAPPED,
    **{f"optimizer.{k}": _NEUTRAL for k in ("lr", "eps", "weight_decay", "beta1", "beta2", "betas", "type",
                                            "min_lr", "lr_min")},
    "optimizer.implementation": _u("fused", "time: an unfused optimizer step; memory: foreach AdamW's "
                                                "_foreach_sqrt temporary of the shard (4 B per parameter) at the step, "
                                                "or (fused_opt_states_bf16, torchtitan 0.3) AdamW's two states in bf16 "
                                                "(4 B per parameter where 8 B are projected)"),
    # torchtitan 0.3 param groups (--optimizer.param_groups.<i>.*, components/optimizer.py): the optimizer of a
    # group sets its state per parameter; its kwargs (lr, betas, eps, weight_decay) change neither time nor memory
    "optimizer.param_groups.N.optimizer_name": _u("AdamW", "memory: another optimizer's state per parameter of the "
                                                           "group; time: its step"),
    "optimizer.param_groups.N.pattern": _u(None, "memory: which parameters get which optimizer's state"),
    "optimizer.param_groups.N.optimizer_kwargs": _NEUTRAL,
    # checkpoint saves and validation passes run between steps: not in the projected step time
    "checkpoint.enable": _u(False, "time: a checkpoint save every checkpoint.interval steps (a stall outside the "
                                   "projected step time); memory: async modes stage the state in host memory"),
    "checkpoint.async_mode": _u("disabled", "time / host memory: an async checkpoint save (a staging copy of the "
                                            "state, pinned with async_with_pinned_mem)"),
    "validation.enable": _u(False, "time: a validation pass every validation.freq steps (outside the projected "
                                   "step time)"),
    "validator.enable": _u(False, "time: a validation pass every validator.freq steps (outside the projected "
                                  "step time)"),
    "optimizer.early_step_in_backward": _u(False, "memory: gradients freed during backward"),
    **{f"comm.{k}": _NEUTRAL for k in ("init_timeout_seconds", "train_timeout_seconds", "trace_buf_size",
                                       "save_traces_folder", "save_traces_file_prefix")},
    "comm.mode": _u("default", "time: a fake or local communication backend (a dry run of torchtitan)"),
    "fault_tolerance.enable": _u(False, "time: fault-tolerant (TorchFT) replica groups"),
    **{f"fault_tolerance.{k}": _NEUTRAL for k in ("process_group", "process_group_timeout_ms", "replica_id",
                                                  "group_size", "min_replica_size", "semi_sync_method")},
    "experimental.custom_import": _u("", "model: a custom module imported into torchtitan"),
    "experimental.custom_args_module": _NEUTRAL,
    # fields only the LambdaLabsML/torchtitan fork holds (0768f5d, 2026-01-09: config/job_config.py; its configs/*.toml
    # set them and run on that fork alone; upstream's ConfigManager refuses them): reported, not refused
    "parallelism.prefetch_distance": _u(1, "time, memory: FSDP2 forward / backward prefetch of this many layers' "
                                           "all-gathers (LambdaLabsML/torchtitan fork: models/llama3/infra/"
                                           "parallelize.py); priced as torchtitan's one-layer prefetch"),
    "parallelism.prefetch_before_data": _u(False, "time: the first FSDP all-gather issued before the batch is "
                                                  "loaded (LambdaLabsML/torchtitan fork: train.py)"),
    "optimizer.follow_fsdp_groups": _u(False, "time: the in-backward optimizer step run per FSDP parameter group "
                                              "(LambdaLabsML/torchtitan fork: components/optimizer.py)"),
    "infra.set_gpu_affinity": _u(False, "time: host threads pinned to the GPU's CPU cores (LambdaLabsML/"
                                        "torchtitan fork: train.py)"),
}


def leaf_paths(d: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """``(dotted path, value)`` of every non-table value of a nested dict."""
    if not isinstance(d, dict):
        return
    for k, v in d.items():
        p = f"{prefix}{k}"
        if isinstance(v, dict) and v and p not in ("quantize.linear.float8.filter_fqns",):
            yield from leaf_paths(v, p + ".")
        else:
            yield p, v


def key_status(path: str) -> Key:
    """How ``path`` is read (unknown keys are unmodelled with an unknown effect; a list index of torchtitan
    0.3's ``--optimizer.param_groups.<i>.*`` read as ``N``)."""
    if path in KEYS:
        return KEYS[path]
    import re

    generic = re.sub(r"\.\d+(\.|$)", r".N\1", path)
    if generic != path:
        for cut in (generic, generic.rsplit(".", 1)[0]):
            if cut in KEYS:
                return KEYS[cut]
    if path.split(".", 1)[0] in NEUTRAL_SECTIONS:
        return _NEUTRAL
    return Key("unknown", None, "not known to primus-launch: may change time or memory")


def check_key_typos(job: dict) -> None:
    """Refuse a key or table one or two letters away from a TorchTitan field (``tensor_paralel_degree``,
    ``[paralelism]``), or cut short to the start of one field (``tensor_parallel``): TorchTitan's ``ConfigManager`` refuses a field its ``JobConfig`` does not hold
    ("Invalid field names", torchtitan v0.2.2 ``torchtitan/config/manager.py`` ``_dict_to_dataclass``), where
    the reader would only list it as not modelled and project the run without the value meant; a key of a known table
    that no release of TorchTitan holds (``[metrics] log_frequency``) is refused too, naming its (sub-)table as
    TorchTitan does (``[training.dataloader]``); a field of v0.1.0 - v0.2.1 that v0.2.2 dropped is kept.  A job that
    extends ``JobConfig`` (``job.custom_config_module``, ``experimental.custom_args_module``) may hold fields of
    its own: nothing is refused then."""
    import difflib

    if job_get(job, "job.custom_config_module") or job_get(job, "experimental.custom_args_module"):
        return
    known = set(KEYS) | set(JOB_TYPES)
    sections = {p.split(".", 1)[0] for p in known} | set(NEUTRAL_SECTIONS)
    earlier = earlier_names()  # v0.1.0 / v0.2.0 / v0.2.1 fields v0.2.2 dropped: a job of those releases holds them
    for path, value in leaf_paths(job):
        if path in KEYS or path in JOB_TYPES or path in earlier or path.startswith("model._arch."):
            continue  # model._arch: the architecture given as fields (this reader's own key, :func:`_model_arch`)
        if key_status(path).status != "unknown" and not (path.split(".", 1)[0] in NEUTRAL_SECTIONS and "." in path):
            continue
        # a key of a neutral table (checkpoint, metrics, lr_scheduler, validation, profiling, job, ...) is judged
        # too: [checkpoint] intervall = 10 is refused by ConfigManager, and was read as neutral (interval 500 kept)
        section, _, rest = path.partition(".")
        if section not in sections:
            close = difflib.get_close_matches(section, sorted(sections), n=1, cutoff=0.8)
            if close:
                raise PlanError(path, value, f"[{section}] is no TorchTitan table (its ConfigManager refuses unknown "
                                             f"fields); did you mean [{close[0]}]?")
            continue
        later = later_name_hint(path)
        if later:
            raise PlanError(path, value, f"not a field of TorchTitan's [{section}] (its ConfigManager refuses unknown "
                                         f"fields); {later}")
        leaves = sorted(p.split(".", 1)[1] for p in known if p.startswith(section + "."))
        # a field of another table (the pre-v0.1 layout's [training] tensor_parallel_degree, [experimental]
        # pipeline_parallel_degree, now in [parallelism]): refused as TorchTitan refuses it, naming where it lives
        # (user14: TP=8 and PP=2 written there were projected as TP=1 PP=1)
        homes = sorted({p.split(".", 1)[0] for p in known if p.split(".", 1)[1:] == [rest]} - {section})
        if len(homes) == 1 and rest not in leaves:
            raise PlanError(path, value, f"not a field of TorchTitan's [{section}] (its ConfigManager refuses unknown "
                                         f"fields; [{homes[0]}] holds it since torchtitan v0.1.0); did you mean "
                                         f"{homes[0]}.{rest}?")
        close = difflib.get_close_matches(rest, leaves, n=1, cutoff=0.85)
        cut = [leaf for leaf in leaves if leaf.startswith(rest)] if len(rest) >= 3 else []
        if len(cut) == 1 and not close:  # tensor_parallel: a field cut short (tyro takes no abbreviations either)
            close = cut
        table = unknown_key_table(path, known)  # the (sub-)table TorchTitan names: [training.dataloader]
        if close and close[0] != rest:
            raise PlanError(path, value, f"not a field of TorchTitan's [{table}] (its ConfigManager refuses unknown "
                                         f"fields); did you mean {section}.{close[0]}?")
        # [metrics] log_frequency: far from every name of any release, refused all the same by v0.2's ConfigManager
        # (v0.2.2 config/manager.py:164-170 "Invalid field names"; v0.1.0 dropped it unread)
        raise PlanError(path, value, f"not a field of TorchTitan's [{table}] (its ConfigManager refuses unknown "
                                     f"fields since torchtitan v0.2.0)")


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


def unmodelled_of(job: dict, paths: Iterable[str], flag: Callable[[str], str] = lambda p: p) -> list[UnmodelledFlag]:
    """The keys among ``paths`` (set in the user's file) that change time or memory and are not
    modelled, one :class:`UnmodelledFlag` each (``flag`` spells the key as the format does)."""
    out: list[UnmodelledFlag] = []
    for path in paths:
        st = key_status(path)
        if st.status not in ("unmodelled", "unknown"):
            continue
        v = job_get(job, path)
        if st.status == "unmodelled" and (v == st.default or v is None):
            continue
        out.append(UnmodelledFlag(flag=flag(path), value=_fmt(v), effect=st.effect))
    return out


# ---------------------------------------------------------------- typed access to the job
_MISSING = object()


def _tbl(data: dict, name: str) -> dict:
    v = job_get(data, name, {})
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise PlanError(name, v, "must be a table")
    return v


def _int(tbl: dict, table: str, key: str, default: int, *, minimum: int = 1, allow_minus_one: bool = False) -> int:
    v = tbl.get(key, default)
    if v is None:
        v = default
    ok = isinstance(v, int) and not isinstance(v, bool) and (v >= minimum or (allow_minus_one and v == -1))
    if not ok:
        allowed = f"an integer >= {minimum}" + (" or -1" if allow_minus_one else "")
        raise PlanError(f"{table}.{key}", v, allowed)
    return v


def _opt_int(tbl: dict, table: str, key: str) -> Optional[int]:
    if tbl.get(key) is None:
        return None
    return _int(tbl, table, key, 1)


def _choice(tbl: dict, table: str, key: str, default: str, allowed: tuple[str, ...]) -> str:
    v = tbl.get(key, default)
    if v is None:
        v = default
    if v not in allowed:
        raise PlanError(f"{table}.{key}", v, f"one of {', '.join(allowed)}")
    return v


def _bool(tbl: dict, table: str, key: str, default: bool) -> bool:
    v = tbl.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise PlanError(f"{table}.{key}", v, "true or false")
    return v


def _ac_option(v: Any) -> Optional[int]:
    """``selective_ac_option``: "op" -> None, an integer (string) N >= 0 -> N."""
    if str(v).strip() == "op":
        return None
    try:
        n = int(str(v).strip())
    except ValueError:
        n = -1
    if n < 0:
        raise PlanError("activation_checkpoint.selective_ac_option", v,
                        "'op' or a non-negative integer (every N-th layer)")
    return n


def converters_of(job: dict) -> list[str]:
    conv = job_get(job, "model.converters", [])
    if conv is None:
        return []
    if isinstance(conv, str):
        conv = [c.strip() for c in conv.split(",") if c.strip()]
    if not isinstance(conv, list):
        raise PlanError("model.converters", conv, "a list of converter names, e.g. [\"quantize.linear.float8\"]")
    return [str(c) for c in conv]


def _is_linear_fp8(c: str) -> bool:
    return c in ("float8", "quantize.linear.float8", "float8_linear")


def _is_linear_mx(c: str) -> bool:
    return c in ("mx", "quantize.linear.mx", "mx_linear")


def _is_grouped(c: str) -> bool:
    return c.startswith("quantize.grouped_mm")


# ---------------------------------------------------------------- job -> Plan
def _parse(text: str, where: str) -> dict:
    from primus_launch.inputs import parse_toml

    return parse_toml(text, "recipe", where)


_CLUSTER_FLAGS = {"gpu": "--gpu", "num_nodes": "--nodes", "gpus_per_node": "--gpus-per-node"}


def _assumed_note(cl: Cluster, overrides: Optional[Mapping[str, Any]] = None) -> str:
    """The note on a cluster the job does not state; the partial cluster flags ``overrides`` gave are named as
    given, not as assumed (user14: "--nodes 16" read "16 x 8 h100-sxm assumed ...; give --gpu / --nodes / ...")."""
    given = [flag for f, flag in _CLUSTER_FLAGS.items() if (overrides or {}).get(f) is not None]
    rest = [flag for f, flag in _CLUSTER_FLAGS.items() if (overrides or {}).get(f) is None]
    if not given:
        return (f"cluster: {cl.num_nodes} x {cl.gpus_per_node} {cl.gpu} assumed (the job states no cluster; "
                "give --gpu / --nodes / --gpus-per-node)")
    return (f"cluster: {cl.num_nodes} x {cl.gpus_per_node} {cl.gpu}, {' / '.join(given)} given and the rest assumed "
            f"(the job states no cluster; give {' / '.join(rest)})")


def job_states_world(text: str, job: dict) -> bool:
    """Whether the job states its GPU count: a header comment naming the scale (:func:`cluster_from_header`) or an
    explicit ``parallelism.data_parallel_shard_degree`` > 0 (else TorchTitan's -1 takes what the world leaves)."""
    shard = _tbl(job, "parallelism").get("data_parallel_shard_degree", -1)
    return (bool(text) and cluster_from_header(text) is not None) or (isinstance(shard, int) and shard > 0)


def job_cluster(text: str, job: dict, cluster: Optional[Cluster]) -> Cluster:
    """The cluster: given, else the header comment of ``text``, else the explicit degrees, else the default."""
    if cluster is not None:
        return cluster
    header = cluster_from_header(text) if text else None
    if header is not None:
        return header
    gpu = comment_cluster(text).get("gpu")
    implied = _implied_cluster(job)
    return implied.model_copy(update={"gpu": gpu}) if gpu else implied


def _implied_cluster(job: dict) -> Cluster:
    """The cluster of a job whose comments state none: the product of its explicit degrees, else the default."""
    par = _tbl(job, "parallelism")
    shard = par.get("data_parallel_shard_degree", -1)
    if isinstance(shard, int) and shard > 0:
        world = shard
        for k in ("data_parallel_replicate_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
                  "context_parallel_degree"):
            v = par.get(k, 1)
            world *= v if isinstance(v, int) and v > 0 else 1
        return Cluster(gpu="h100-sxm", num_nodes=world // 8, gpus_per_node=8) if world % 8 == 0 else \
            Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=world)
    other = 1
    for k in ("data_parallel_replicate_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
              "context_parallel_degree"):
        v = par.get(k, 1)
        other *= v if isinstance(v, int) and v > 0 else 1
    if other > 8:  # the default node is too small for the written degrees: the fewest nodes they fit
        import math

        return Cluster(gpu="h100-sxm", num_nodes=math.lcm(8, other) // 8, gpus_per_node=8)
    return DEFAULT_CLUSTER


def _mx_dim1_kernel(job: dict) -> str:
    """The dim1 cast kernel of TorchTitan v0.1 / v0.2's MX linear converter, which overrides the torchao recipe's
    (v0.2.1 components/quantization/mx.py; ``training.mx_dim1_cast_kernel``, cost/fp8.py): v0.2
    ``quantize.linear.mx.mxfp8_dim1_cast_kernel_choice`` / early ``mx.mxfp8_dim1_cast_kernel_choice`` (default
    "triton", config/job_config.py), v0.1.0 ``mx.use_fp8_dim1_cast_triton_kernel`` (default True; False = torch)."""
    key = "quantize.linear.mx.mxfp8_dim1_cast_kernel_choice"
    v = job_get(job, key)
    if v is None:
        key = "mx.mxfp8_dim1_cast_kernel_choice"
        v = job_get(job, key)
    if v is None:
        flag = job_get(job, "mx.use_fp8_dim1_cast_triton_kernel")
        return "torch" if flag is False else "triton"
    if v not in ("triton", "cuda", "torch"):
        raise PlanError(key, v, "one of triton, cuda, torch")
    return str(v)


def _mixed_precision_reduce(job: dict, notes: list[str]) -> str:
    """``training.mixed_precision_reduce``: fully_shard's ``MixedPrecisionPolicy(reduce_dtype=
    TORCH_DTYPE_MAP[value])`` (torchtitan v0.2.2 ``models/llama3/infra/parallelize.py``; ``TORCH_DTYPE_MAP``:
    float16, float32, bfloat16).  The field is typed ``Literal["float32"]`` (v0.1.0 .. v0.2.2), but the
    ConfigManager makes the TOML's tables the tyro defaults unchecked (``manager.py`` ``parse_args``:
    ``_dict_to_dataclass`` then ``tyro.cli(default=...)``; tyro warns "annotated with type Literal['float32'], but
    the default value bfloat16 ..." and keeps it), so a TOML's ``"bfloat16"`` runs: FSDP2 reduce-scatters the
    gradients in bf16 (LambdaLabsML/torchtitan 0768f5d ``configs/*.toml``, checked with that fork's
    ConfigManager).  A launch line's ``--training.mixed_precision_reduce bfloat16`` is refused by tyro itself."""
    v = _choice(_tbl(job, "training"), "training", "mixed_precision_reduce", "float32",
                ("float32", "bfloat16", "float16"))
    if v != "float32":
        notes.append(f"training.mixed_precision_reduce={v}: outside the field's Literal['float32'], kept by "
                     "torchtitan's ConfigManager from a TOML (tyro warns): gradients reduced in 16 bits under FSDP")
    return v


def _precision(job: dict, notes: list[str], unmodelled: list[UnmodelledFlag]) -> dict[str, Any]:
    """Precision fields from the converters (v0.1/v0.2 names and 0.3 converter classes)."""
    trn = _tbl(job, "training")
    mp = _choice(trn, "training", "mixed_precision_param", "bfloat16", ("bfloat16", "float32"))
    out: dict[str, Any] = {"precision": "fp32" if mp == "float32" else "bf16"}
    dtype = _choice(trn, "training", "dtype", "float32", ("bfloat16", "float32"))
    if dtype == "bfloat16":  # parameters, gradients and optimizer states all bf16, no fp32 master copy
        out.update(precision="bf16", main_params_dtype="bf16", main_grads_dtype="bf16", exp_avg_dtype="bf16",
                   exp_avg_sq_dtype="bf16", grad_reduce_in_fp32=False)
    conv = converters_of(job)
    conv03 = job_get(job, "model._converters03") or []
    fp8_linear = any(_is_linear_fp8(c) for c in conv) or bool(job_get(job, "float8.enable_float8_linear"))
    mx_linear = any(_is_linear_mx(c) for c in conv)
    recipe = None
    if fp8_linear:
        recipe = job_get(job, "quantize.linear.float8.recipe_name", job_get(job, "float8.recipe_name")) or "tensorwise"
        if recipe not in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
            raise PlanError("quantize.linear.float8.recipe_name", recipe, "one of tensorwise, rowwise, rowwise_with_gw_hp")
        out.update(precision="fp8", fp8_recipe=recipe)
        gather = job_get(job, "quantize.linear.float8.enable_fsdp_float8_all_gather",
                      job_get(job, "float8.enable_fsdp_float8_all_gather", False))
        if gather:
            out["fp8_param_gather"] = True
            pre = "quantize.linear.float8.precompute_float8_dynamic_scale_for_fsdp"
            if job_get(job, pre, job_get(job, "float8.precompute_float8_dynamic_scale_for_fsdp", False)):
                # torchtitan v0.2 components/quantization/float8.py: precompute_float8_dynamic_scale_for_fsdp after
                # the optimizer step (one amax all-reduce for every float8 weight) instead of one per weight in its
                # FSDP all-gather pre-hook; neither is priced
                unmodelled.append(UnmodelledFlag(flag=pre, value="true", effect="time: the float8 weights' scales "
                                                 "computed together after the optimizer step (one amax all-reduce) "
                                                 "instead of one all-reduce per weight before its FSDP all-gather; "
                                                 "neither is priced"))
    if mx_linear:
        out.update(precision="fp8", fp8_recipe="mxfp8", mx_dim1_cast_kernel=_mx_dim1_kernel(job))
    for c in conv03:
        kind = c.get("type")
        if kind == "Float8LinearConverter":
            out.update(precision="fp8", fp8_recipe=c.get("recipe_name") or "rowwise")
        elif kind == "MXFP8LinearConverter":
            out.update(precision="fp8", fp8_recipe="mxfp8")
        elif kind == "NVFP4LinearConverter":
            out.update(precision="fp4", fp4_recipe="nvfp4")
            if c.get("fqns") and c.get("fqns") != ["layers"]:
                # fqns 'layers.N.' (nvfp4_bf16_tail_fqns) select decoder layers: their pattern is read (memory);
                # any other fqn (an LM head, a sub-module) leaves the pattern unread
                idx = [re.fullmatch(r"layers\.(\d+)\.?", str(f)) for f in c["fqns"]]
                if all(idx):
                    out["_fp4_layers"] = sorted({int(x.group(1)) for x in idx})
                unmodelled.append(UnmodelledFlag(flag="NVFP4LinearConverter.fqns", value=_fmt(c["fqns"])[:80],
                                                 effect="time: NVFP4 on some layers only (projected on all)"
                                                 + ("" if all(idx) else "; memory: projected on all layers")))
        elif kind in ("Float8GroupedExpertsConverter", "MXFP8GroupedExpertsConverter"):
            if out["precision"] not in ("fp8", "fp4"):
                unmodelled.append(UnmodelledFlag(flag=kind, value="experts", effect="time: MoE expert GEMMs in "
                                                 "FP8 while the other GEMMs stay BF16"))
        elif kind == "LoRAConverter":
            unmodelled.append(UnmodelledFlag(flag=kind, value=f"rank={c.get('rank')}", effect="memory and time: "
                                             "LoRA adapters on frozen base weights (projected as full training)"))
        elif kind:
            unmodelled.append(UnmodelledFlag(flag=kind, value="on", effect="model converter not known to primus-launch"))
    # torchtitan v0.2.x builds only the converters ``model.converters`` names (protocols/model_converter.py
    # ModelConvertersContainer); ``[quantize.grouped_mm.*] fqns`` is the config of the grouped converter and
    # does nothing without it (the upstream DeepSeek-V3 / Qwen3 TOMLs set it with the converters commented out)
    grouped = [c for c in conv if _is_grouped(c)]
    idle = [f"quantize.grouped_mm.{k}" for k in ("float8", "mx") if job_get(job, f"quantize.grouped_mm.{k}.fqns")
            and f"quantize.grouped_mm.{k}" not in grouped]
    if idle and not conv03 and out["precision"] not in ("fp8", "fp4"):  # else _converter_coverage warns
        notes.append(f"{', '.join(k + '.fqns' for k in idle)} ignored: the converter is not in "
                     "model.converters (experts in BF16)")
    if grouped and out["precision"] not in ("fp8", "fp4"):
        unmodelled.append(UnmodelledFlag(flag="model.converters", value=",".join(grouped),
                                         effect="time: MoE expert GEMMs in FP8 while the other GEMMs stay BF16"))
    for c in conv:
        if not (_is_linear_fp8(c) or _is_linear_mx(c) or _is_grouped(c) or c in ("primus_turbo",)):
            unmodelled.append(UnmodelledFlag(flag="model.converters", value=c,
                                             effect="model converter not known to primus-launch"))
    return out


# linears the projection keeps in BF16 under an FP8 / MX recipe: the output layer (cost/roofline.py "output layer
# (bf16)") and the MoE router gate (its "router" GEMM)
_BF16_LINEARS = frozenset({"output", "router.gate"})


def _fqn_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [s.strip() for s in v.split(",") if s.strip()]
    return [str(s) for s in v] if isinstance(v, (list, tuple)) else [str(v)]


# the attention linears of torchtitan v0.2's llama-style blocks (models/llama3|llama4|qwen3 model.py Attention: wq,
# wk, wv, wo nn.Linear modules under "layers.<i>.attention."), which a filter_fqns entry matches by substring
# (components/quantization/utils.py module_filter_fn: ``any(filter_fqn in fqn for filter_fqn in filter_fqns)``)
_ATTN_LINEARS = ("wq", "wk", "wv", "wo")


def _linear_coverage_03(convs: list[dict], unmodelled: list[UnmodelledFlag]) -> None:
    """Report what torchtitan 0.3.0's linear converters run in another precision than the plan prices (every
    layer GEMM in the recipe, the output layer ``lm_head`` in BF16).  From 0.3.0 ``components/quantization``:
    each converter swaps the ``Linear.Config`` entries of ``model_config.traverse`` -- ``lm_head`` and the MoE
    router gate included -- ``Float8LinearConverter`` those no ``filter_fqns`` entry is a substring of
    (``utils.module_filter_fn``; ``"auto_filter_small_kn"`` asks torchao to skip small GEMMs), ``MXFP8`` /
    ``NVFP4LinearConverter`` those some ``fqns`` entry is a substring of (all when ``fqns`` is empty).  With
    ``emulate`` the float8 config is replaced by torchao's emulated one (``Float8LinearConfig(emulate=True)``:
    no FP8 tensor-core GEMMs)."""
    for c in convs:
        kind = c.get("type")
        if kind == "Float8LinearConverter":
            filt = [str(f) for f in (c.get("filter_fqns") or [])]
            head = not any(f in "lm_head" for f in filt)
            rest = [f for f in filt if f not in ("lm_head", "router.gate", "gate") and not any(f in n for n in
                                                                                      ("lm_head", "router.gate"))]
            if rest:
                unmodelled.append(UnmodelledFlag(flag=f"{kind}.filter_fqns", value=",".join(rest)[:80],
                                                 effect="time: these linears stay BF16 (projected in the "
                                                        "recipe's low precision)"))
            if c.get("emulate"):
                unmodelled.append(UnmodelledFlag(flag=f"{kind}.emulate", value="True",
                                                 effect="time: FP8 matmuls emulated in higher precision (torchao "
                                                        "Float8LinearConfig(emulate=True)); projected as FP8 GEMMs"))
        elif kind in ("MXFP8LinearConverter", "NVFP4LinearConverter"):
            fqns = [str(f) for f in (c.get("fqns") or [])]
            head = not fqns or any(f in "lm_head" for f in fqns)
        else:
            continue
        if head:
            unmodelled.append(UnmodelledFlag(flag=kind, value="lm_head",
                                             effect="time: the output layer's GEMM (lm_head) runs in the low "
                                                    "precision (projected in BF16)"))


def _converter_coverage(job: dict, is_moe: bool, prec: dict[str, Any], unmodelled: list[UnmodelledFlag],
                        mla: bool = False) -> None:
    """Report what torchtitan v0.2's float8 / MX converters leave in another precision than the plan prices.

    The plan's ``precision`` covers every layer GEMM, with the output layer and the router in BF16.  From
    torchtitan v0.2.1 ``config/job_config.py`` and ``components/quantization/{float8,mx}.py``:
    ``quantize.linear.float8`` / ``quantize.linear.mx`` swap ``nn.Linear`` modules only (filtered by
    ``filter_fqns``: default ``[]`` for float8, ``["output"]`` for MX), so a MoE's routed experts (3-D
    parameters run by ``torch._grouped_mm``) stay BF16 unless the ``quantize.grouped_mm.{float8,mx}`` converter
    is in ``model.converters`` (its ``fqns`` alone do nothing; before v0.2.0 ``*.moe_fqns_prototype``); a filtered linear stays BF16 and an unfiltered ``output`` runs
    in FP8.  Each mismatch is reported (time), never silently projected, except filtered attention linears of a
    non-MLA model (``wq`` / ``wk`` / ``wv`` / ``wo``) and unconverted routed experts (``experts``), which
    ``training.bf16_linears`` prices in BF16."""
    if prec.get("precision") not in ("fp8", "fp4"):
        return
    convs = [c for c in (job_get(job, "model._converters03") or []) if isinstance(c, dict)]
    conv03 = [c.get("type") for c in convs]
    if conv03:  # torchtitan 0.3: the converter classes (components/quantization)
        _linear_coverage_03(convs, unmodelled)
        if is_moe and not any(k in ("Float8GroupedExpertsConverter", "MXFP8GroupedExpertsConverter") for k in conv03):
            _bf16_experts(prec)
        return
    conv = converters_of(job)
    for kind, is_kind, default in (("float8", _is_linear_fp8, []), ("mx", _is_linear_mx, ["output"])):
        if not (any(is_kind(c) for c in conv) or (kind == "float8" and job_get(job, "float8.enable_float8_linear"))):
            continue
        key = f"quantize.linear.{kind}.filter_fqns"
        raw = job_get(job, key, job_get(job, f"{kind}.filter_fqns"))
        filt = default if raw is None else _fqn_list(raw)
        extra = [f for f in filt if f not in _BF16_LINEARS]
        if not mla:   # attention linears kept in BF16 are priced so (training.bf16_linears); MLA's differ
            hit = tuple(r for r in _ATTN_LINEARS if any(f in f"layers.0.attention.{r}" for f in filt))
            if hit:
                prec["bf16_linears"] = tuple(sorted(set(prec.get("bf16_linears", ())) | set(hit),
                                                    key=(*_ATTN_LINEARS, "experts").index))
            extra = [f for f in extra if not any(f in f"layers.0.attention.{r}" for r in hit)]
        if extra:
            unmodelled.append(UnmodelledFlag(flag=key, value=",".join(extra)[:80],
                                             effect="time: these linears stay BF16 (projected in the recipe's "
                                                    "low precision)"))
        if "output" not in filt:
            unmodelled.append(UnmodelledFlag(flag=key, value=",".join(filt) or "[]",
                                             effect="time: the output layer's GEMM runs in the low precision "
                                                    "(projected in BF16)"))
    if is_moe:
        # the grouped converter must be in model.converters (its fqns alone do nothing); before v0.2.0 the
        # float8 / mx linear converter itself read ``moe_fqns_prototype``
        grouped = any(_is_grouped(c) for c in conv) or any(
            job_get(job, k) for k in ("float8.moe_fqns_prototype", "mx.moe_fqns_prototype"))
        if not grouped:
            _bf16_experts(prec)


def _bf16_experts(prec: dict[str, Any]) -> None:
    """No grouped-experts converter: the routed experts' ``torch._grouped_mm`` runs in BF16 while the linears
    run the converter's FP8 / MX (torchtitan v0.2.1 ``components/quantization/{float8,mx}.py``, 0.3.0
    ``components/quantization``: the linear converters swap ``nn.Linear`` only), priced so by
    ``training.bf16_linears`` ``experts`` (cost/moe_layer.py)."""
    prec["bf16_linears"] = tuple(prec.get("bf16_linears", ())) + ("experts",)


def _recompute(job: dict, unmodelled: list[UnmodelledFlag]) -> dict[str, Any]:
    ac = _tbl(job, "activation_checkpoint")
    mode = _choice(ac, "activation_checkpoint", "mode", "selective", ("none", "selective", "full", "memory_budget"))
    if mode == "none":
        return {"granularity": "none"}
    if mode == "full":
        return {"granularity": "full", "method": "uniform", "num_layers": 1}
    if mode == "memory_budget":  # compiler-chosen recomputation: nearest plan notion is per-op SAC
        unmodelled.append(UnmodelledFlag(flag="activation_checkpoint.mode", value="memory_budget",
                                         effect=f"memory and time: recomputation chosen by the compiler for a "
                                                f"budget of {ac.get('memory_budget', 0.5)} (projected as per-op SAC)"))
        return {"granularity": "op"}
    n = _ac_option(ac.get("selective_ac_option", "2"))
    if n is None:
        return {"granularity": "op"}
    if n <= 1:
        return {"granularity": "full", "method": "uniform", "num_layers": 1}
    return {"granularity": "full", "method": "every_n", "num_layers": n}  # torchtitan _apply_layer_sac


def _model_arch(job: dict, seq: int) -> Any:
    mdl = _tbl(job, "model")
    fields = mdl.get("_arch")
    name, flavor = mdl.get("name", "llama3"), mdl.get("flavor", "debugmodel")
    if not isinstance(name, str) or not isinstance(flavor, str):
        raise PlanError("model.name" if not isinstance(name, str) else "model.flavor",
                        name if not isinstance(name, str) else flavor, "a string")
    if fields is not None:
        return arch_from_fields(fields, seq)
    arch = arch_from_flavor(name, flavor, seq_len=seq)
    for key, field in _ARCH_OVERRIDES.items():  # the flavor's own value reads; another is not modelled
        v = mdl.get(key)
        if v is not None and v != getattr(arch, field):
            raise PlanError(f"model.{key}", v, f"differs from {name} {flavor}'s {getattr(arch, field)}: an override "
                            "of the registry architecture (Primus model_overrides) is not modelled")
    return arch


def plan_from_job(job: dict, cluster: Optional[Cluster] = None, *, path: Optional[str] = None,
                  fmt: str = "torchtitan-toml", header_text: str = "", set_paths: Iterable[str] = (),
                  flag: Callable[[str], str] = lambda p: p, notes: Optional[list[str]] = None,
                  unmodelled: Optional[list[UnmodelledFlag]] = None, version: str = "0.2",
                  nodes_fitted: Optional[bool] = None) -> Plan:
    """The plan of a TorchTitan job (see the module docstring).

    ``set_paths``: the dotted keys the user's file sets (reported when they are not modelled);
    ``flag``: how to spell a key in warnings (``--parallelism.x`` for a launch line); ``version``:
    "0.3" applies torchtitan 0.3's rules (no expert TP, CUDA graphs by default); ``nodes_fitted``: whether the
    node count is the reader's choice, not the user's or the job's (``source.nodes_fitted``); None: when
    ``cluster`` is None and the job states no world (:func:`job_states_world`).
    """
    from primus_launch.inputs import remember_named

    for key in ("hf_assets_path", "tokenizer_path"):  # what the training reads: no output may replace it
        remember_named(job_get(job, f"model.{key}", None), f"model.{key}")
    notes = list(notes or [])
    unmod = list(unmodelled or [])
    set_paths = list(set_paths)
    cl = job_cluster(header_text, job, cluster)
    fitted = (cluster is None and not job_states_world(header_text, job)) if nodes_fitted is None else nodes_fitted
    comment = comment_cluster(header_text)
    if cluster is None and (not header_text or cluster_from_header(header_text) is None) and comment.get("gpu"):
        notes.append(f"cluster: {cl.num_nodes} x {cl.gpus_per_node} {cl.gpu}: the GPU from the file's '# primus-launch:' "
                     "comment, the node count assumed (the job states none; give --nodes / --gpus-per-node, or "
                     "nodes= / gpus_per_node= in the comment)")
    elif cluster is None and (not header_text or cluster_from_header(header_text) is None):
        notes.append(_assumed_note(cl))
    elif cluster is None and ("nodes" in comment or "gpus_per_node" in comment):
        notes.append(f"cluster: {cl.num_nodes} x {cl.gpus_per_node} {cl.gpu} from the file's '# primus-launch:' "
                     "comment (give --gpu / --nodes / --gpus-per-node for another)")
    elif cluster is None:  # said: the answer's cluster is the header comment's, not one the user typed (user15)
        notes.append(f"cluster: {cl.num_nodes} x {cl.gpus_per_node} {cl.gpu} from the file's header comment "
                     f"('{_header_line(cl)}'; give --gpu / --nodes / --gpus-per-node for another)")
    W = cl.world_size
    trn, par = _tbl(job, "training"), _tbl(job, "parallelism")
    cmp_ = _tbl(job, "compile")

    seq = _int(trn, "training", "seq_len", 2048)
    try:
        model = _model_arch(job, seq)
    except ValidationError as e:  # the sequence the job gives, past the plan's bound: named by its key
        err = next((x for x in ((y.get("ctx") or {}).get("error") for y in e.errors()) if isinstance(x, PlanError)), None)
        if err is None or err.field not in PLAN_KEYS:
            raise
        raise PlanError(flag(PLAN_KEYS[err.field]), err.value, err.allowed) from None
    except PlanError as e:
        if e.field not in PLAN_KEYS:
            raise
        raise PlanError(flag(PLAN_KEYS[e.field]), e.value, e.allowed) from None
    from primus_launch.adapters.torchtitan_arch import LEGACY_NOTE

    if job_get(job, "model.name") in LEGACY_NOTE and not job_get(job, "model._arch"):
        notes.append(LEGACY_NOTE[job_get(job, "model.name")])

    rep = _int(par, "parallelism", "data_parallel_replicate_degree", 1)
    shard_raw = _int(par, "parallelism", "data_parallel_shard_degree", -1, allow_minus_one=True)
    tp = _int(par, "parallelism", "tensor_parallel_degree", 1)
    pp = _int(par, "parallelism", "pipeline_parallel_degree", 1)
    cp = _int(par, "parallelism", "context_parallel_degree", 1)
    ep = _int(par, "parallelism", "expert_parallel_degree", 1)
    etp_raw = _int(par, "parallelism", "expert_tensor_parallel_degree", 1)
    other = rep * cp * tp * pp
    if shard_raw == -1:
        if W % other:  # named by the degrees the job sets, as the user spells them (user15: was 'parallelism=')
            set_ = [flag(f"parallelism.{k}") for k, v in (("data_parallel_replicate_degree", rep),
                    ("context_parallel_degree", cp), ("tensor_parallel_degree", tp), ("pipeline_parallel_degree", pp))
                    if v > 1]
            raise PlanError(" x ".join(set_), other,
                            f"must divide the world size {W} ({cl.num_nodes} x {cl.gpus_per_node} {cl.gpu})")
        shard = W // other
    else:
        shard = shard_raw
        if shard * other != W:
            raise PlanError("parallelism.data_parallel_shard_degree", shard_raw,
                            f"replicate*shard*cp*tp*pp={shard * other} must equal the world size {W}; or use -1")
    dp = rep * shard
    fsdp = shard > 1 or cp > 1  # torchtitan ParallelDims.fsdp_enabled

    sched_name = par.get("pipeline_parallel_schedule") or "1F1B"
    schedule = plan_schedule(sched_name)
    if pp == 1:
        schedule = "1f1b"  # torchtitan ignores the schedule without PP
    elif schedule == "zb_h1":
        # torchtitan 0.3.0 distributed/pipeline_parallel.py: a multi-stage schedule "requires at least 2 stages
        # per rank"; the simulator's zb_h1 is ZB-H1 at one stage per rank (projection/pipeline/orders.py)
        raise PlanError("parallelism.pipeline_parallel_schedule", sched_name,
                        "InterleavedZeroBubble (torch ScheduleInterleavedZeroBubble, >= 2 stages per rank) is not "
                        "modelled; modelled with PP: 1F1B, GPipe, Interleaved1F1B, LoopedBFS, ZBVZeroBubble, DualPipeV")
    lps = _opt_int(par, "parallelism", "pipeline_parallel_layers_per_stage")
    first_less = _int(par, "parallelism", "pipeline_parallel_first_stage_less_layers", 1, minimum=0)
    last_less = _int(par, "parallelism", "pipeline_parallel_last_stage_less_layers", 1, minimum=0)
    fqns = par.get("module_fqns_per_model_part")
    if pp > 1 and fqns is not None:
        per_stage = explicit_stage_layers(pp, str(sched_name), fqns)
        if sum(per_stage) != model.num_layers:
            raise PlanError("parallelism.module_fqns_per_model_part", f"{sum(per_stage)} layers",
                            f"must list all {model.num_layers} layers of {model.name}")
        if (len(per_stage) // pp == 1) != is_single_stage(str(sched_name)):
            raise PlanError("parallelism.module_fqns_per_model_part", f"{len(per_stage)} stages",
                            f"{sched_name} runs {'exactly 1' if is_single_stage(str(sched_name)) else '>= 2'} "
                            f"stages per rank over pipeline_parallel_degree={pp}")
    else:
        per_stage = list(stage_layers(model.num_layers, pp, str(sched_name), lps, first_less, last_less))
    placement = plan_placement(model.num_layers, pp, str(sched_name), per_stage, model.mtp_num_layers)

    local = _int(trn, "training", "local_batch_size", _int(trn, "training", "batch_size", 8))
    gbs_raw = _int(trn, "training", "global_batch_size", -1, allow_minus_one=True)
    gbs = local * dp if gbs_raw == -1 else gbs_raw
    if gbs % (local * dp):
        raise PlanError("training.global_batch_size", gbs_raw,
                        f"must be a multiple of local_batch_size x dp = {local} x {dp}")
    if pp > 1:
        mbs = _int(par, "parallelism", "pipeline_parallel_microbatch_size", 1)
        if local % mbs:
            raise PlanError("parallelism.pipeline_parallel_microbatch_size", mbs,
                            f"must divide training.local_batch_size={local}")
    else:
        mbs = local

    recompute = _recompute(job, unmod)
    prec = _precision(job, notes, unmod)
    fp4_layers = prec.pop("_fp4_layers", None)
    if fp4_layers is not None:
        prec["fp4_layer_pattern"] = tuple(int(i in fp4_layers) for i in range(model.num_layers))
    if version == "0.3":   # 0.3's MXFP8 converter keeps the torchao recipe's CUDA dim1 kernel (no such option)
        prec.pop("mx_dim1_cast_kernel", None)
    _converter_coverage(job, model.is_moe, prec, unmod, mla=model.multi_latent_attention)
    if prec.get("grad_reduce_in_fp32") is False and (version == "0.3" or fsdp):
        # training.dtype bfloat16 keeps the parameters and gradients in bf16, but the gradients are still reduced
        # in fp32 wherever fully_shard's MixedPrecisionPolicy(param_dtype=mixed_precision_param,
        # reduce_dtype=mixed_precision_reduce, "float32" unless a TOML writes a 16-bit one: below) is installed: torch
        # _fully_shard/_fsdp_param.py init_dtype_attrs drops reduce_dtype only when it equals param_dtype
        # (bf16 by default; float32 reduces in the fp32 param dtype).  torchtitan 0.3.0 installs it always
        # (models/*/parallelize.py: apply_fsdp_to_decoder "with shard_degree=1 ... still installs the
        # MixedPrecisionPolicy"); v0.2 only under FSDP (ParallelDims.fsdp_enabled; else DDP reduces the bf16 grads)
        prec["grad_reduce_in_fp32"] = True
    reduce = _mixed_precision_reduce(job, notes)
    if reduce != "float32" and (version == "0.3" or fsdp):
        prec["grad_reduce_in_fp32"] = False
    opt = _tbl(job, "optimizer").get("name", "AdamW")
    if str(opt).lower() not in ("adamw", "adam", "sgd"):
        # TorchTitan's optimizer registry past 0.3.0 (components/optimizer/optimizer.py at the 2026-08-22 mirror:
        # Adam, AdamW, DistMuon) builds FlexShard's DistMuon: its state and Newton-Schulz step are not modelled for
        # TorchTitan (projection/cost/muon.py prices Megatron's)
        unmod.append(UnmodelledFlag(flag="optimizer.name", value=str(opt),
                                    effect="time, memory: priced as AdamW (two fp32 moments, a streaming step), "
                                           "not this optimizer's state and step"))
    steps = _int(trn, "training", "steps", 10000)

    if version == "0.3":
        etp_raw = 1 if ep > 1 else tp
    if ep > 1 and etp_raw not in (1, tp):
        raise PlanError("parallelism.expert_tensor_parallel_degree", etp_raw, f"1 or tensor_parallel_degree={tp}")
    async_tp = _bool(par, "parallelism", "enable_async_tensor_parallel", False) or \
        _bool(cmp_, "compile", "enable_async_tensor_parallel", False)
    sp = tp > 1 and _bool(par, "parallelism", "enable_sequence_parallel", True)
    components = cmp_.get("components") or ["model", "loss"]
    why = type_problem(JOB_TYPES["compile.components"], components)  # the job-type check's rule and words
    if why:
        raise PlanError(flag("compile.components"), components, why)
    compile_on = (_bool(cmp_, "compile", "enable", False) and "model" in components) \
        or _bool(trn, "training", "compile", False)
    # the loss: 0.3 compile.components (default model + loss); v0.2 training.compile compiles it too
    # (components/loss.py build_cross_entropy_loss: torch.compile(loss_fn) when training.compile)
    compile_loss = (_bool(cmp_, "compile", "enable", False) and "loss" in components) \
        or _bool(trn, "training", "compile", False)
    # v0.2 compiles an MoE block submodule by submodule (models/llama4/infra/parallelize.py apply_compile, PR
    # #1895): MoE.forward's glue and the EP permute / unpermute run eager with or without compile.enable
    # (cost/titan_moe.py); 0.3 compiles the whole block and routes through its token_dispatcher
    glue_eager = model.is_moe and version != "0.3"
    if async_tp and tp > 1 and not compile_on:  # CompileConfig.__post_init__ (0.3) / parallelize (v0.2)
        key = "compile.enable_async_tensor_parallel" if version == "0.3" else "parallelism.enable_async_tensor_parallel"
        raise PlanError(key, True, "async TP requires torch.compile of the model (compile.enable with 'model' in "
                                   "compile.components)")
    if _tbl(job, "activation_checkpoint").get("mode") == "memory_budget" and not compile_on:
        raise PlanError("activation_checkpoint.mode", "memory_budget", "requires the model to be compiled "
                                                                        "(compile.enable with 'model' in components)")
    rotate = _choice(par, "parallelism", "context_parallel_rotate_method", "allgather", ("allgather", "alltoall"))
    reshard = _choice(par, "parallelism", "fsdp_reshard_after_forward", "default", ("default", "always", "never"))
    backend = _choice(par, "parallelism", "expert_parallel_comm_backend",
                      job_get(job, "model._moe_comm_backend") or "standard",
                      ("standard", "deepep", "hybridep", "minimal_async_ep", "none"))
    dispatcher = {"deepep": "deepep", "hybridep": "hybridep"}.get(backend, "alltoall")
    # 0.3's AllToAllTokenDispatcher (models/common/token_dispatcher.py ``_dispatch_token_exchange`` /
    # ``_combine_token_exchange``): under the default ``spmd_types`` backend, eager, spmd_types' ``all_to_all``
    # (torch.distributed.all_to_all in an autograd Function), else the functional ``all_to_all_single``
    # (v0.1 / v0.2 always); cost/titan_sac.py op_sac_keeps_ep_a2a
    spmd = _choice(par, "parallelism", "spmd_backend", "spmd_types",
                   ("partial_dtensor", "full_dtensor", "spmd_types")) if version == "0.3" else "partial_dtensor"
    a2a = "c10d" if model.is_moe and backend == "standard" and spmd == "spmd_types" else "functional"
    if backend == "minimal_async_ep" and model.is_moe and ep > 1:
        unmod.append(UnmodelledFlag(flag="moe_comm_backend", value=backend,
                                    effect="time: asynchronous EP dispatch (projected as all-to-all)"))
    offload = {}
    if _bool(trn, "training", "enable_cpu_offload", False):  # FSDP2 CPUOffloadPolicy
        offload = {"weights": True, "optimizer_fraction": 1.0}
        notes.append("training.enable_cpu_offload: FSDP2 keeps parameters, gradients and optimizer states in "
                     "host memory (projected as weight and optimizer offload)")
    cuda_graphs = {}
    if version == "0.3" and not _bool(trn, "training", "disable_cuda_graphs", False):
        if pp > 1:
            raise PlanError("training.disable_cuda_graphs", False, "torchtitan 0.3 refuses CUDA graphs with pipeline "
                                                                   "parallelism: set --training.disable_cuda_graphs")
        if ep > 1 and model.is_moe and backend not in ("minimal_async_ep", "hybridep"):
            raise PlanError("training.disable_cuda_graphs", False, "torchtitan 0.3 captures CUDA graphs only with "
                                                                   "HybridEP or MinimalAsyncEP dispatchers under EP: "
                                                                   "set --training.disable_cuda_graphs")
        cuda_graphs = {"cuda_graph_impl": "local", "cuda_graph_scope": ("full_iteration",)}
    ep_overlap = bool(par.get("pipeline_parallel_expert_parallel_overlap", True)) and \
        str(sched_name).lower() == "dualpipev" and ep > 1 and model.is_moe
    force_balance = _bool(_tbl(job, "debug"), "debug", "moe_force_load_balance",
                          _bool(trn, "training", "debug_moe_force_load_balance", False)) and model.is_moe

    chunked = job_get(job, "model._loss03") == "ChunkedLossWrapper"
    # the chunk count is read where the loss is the chunked one (below); elsewhere the key is reported
    unmod += unmodelled_of(job, [q for q in set_paths if not (chunked and q == "loss.num_chunks")], flag)
    loss_chunks = 1
    if chunked:
        # torchtitan 0.3.0 components/loss.py ChunkedLossWrapper (the loss the LLM config functions build;
        # Config.num_chunks 8 unless the config or --loss.num_chunks sets it): lm_head + loss per sequence chunk,
        # each chunk's backward at once, lm_head unsharded across the chunks, its gradient accumulated
        # (memory.titan.stage_walk)
        raw = job_get(job, "loss.num_chunks", job_get(job, "model._loss_chunks03"))
        loss_chunks = 8 if raw is None else raw
        if isinstance(loss_chunks, bool) or not isinstance(loss_chunks, int) or loss_chunks < 1:
            # 0 divides by zero in ChunkedLossWrapper (seq_len % num_chunks)
            raise PlanError(flag("loss.num_chunks"), raw, "a whole number of chunks, 1 or more")
        unmod.append(UnmodelledFlag(flag="loss", value="ChunkedLossWrapper",
                                    effect=f"time: lm_head and the loss run per sequence chunk ({loss_chunks} GEMMs "
                                           "of a chunk's rows, the hidden-state gradient accumulated in fp32); "
                                           "timed as one full-sequence lm_head (memory modelled per chunk)"))
        if loss_chunks > 1 and (seq // max(1, cp)) % loss_chunks:
            raise PlanError("training.seq_len", seq, f"a multiple of {loss_chunks} x context_parallel_degree "
                                                         "(ChunkedLossWrapper splits the local sequence into "
                                                         f"{loss_chunks} equal chunks)")
    imports = job_get(job, "override.imports") or []
    if imports:
        # torchtitan 0.3 config/override.py: each target swaps a Configurable (a model component, the
        # optimizer, the loss) for another implementation before anything is built; torchtitan's own
        # (overrides/fused_swiglu.py, fused_mla.py, helion_rope.py) are Triton / Helion kernels
        unmod.append(UnmodelledFlag(flag=flag("override.imports"), value=_fmt(imports if isinstance(imports, list)
                                                                             else [imports]),
                                    effect="time, memory: the components these overrides replace run their "
                                           "implementation (fused Triton / Helion kernels); projected as "
                                           "torchtitan's default components"))
    lb_path = "parallelism.context_parallel_load_balancer"
    if cp > 1 and lb_path in set_paths and str(job_get(job, lb_path)).lower() in ("none", "null"):
        # torchtitan 0.3.0 config/configs.py: "None: Disable load balancing" (default "headtail"); the CP model
        # prices balanced causal chunks
        unmod.append(UnmodelledFlag(flag=flag(lb_path), value="None",
                                    effect="time: causal context parallelism without load balancing (the last CP rank "
                                           "computes the most attention); priced as balanced"))
    try:
        plan = Plan(
            model=model,
            parallel=dict(
                tp=tp, pp=pp, cp=cp, ep=ep, etp=(etp_raw if ep > 1 and etp_raw != tp else None),
                sequence_parallel=sp, dp_sharding="full" if fsdp else "none",
                dp_replicate=rep if fsdp else 1, fsdp_reshard_after_forward=reshard,
                cp_comm_type="p2p" if rotate == "alltoall" and version != "0.3" else "allgather", **placement),
            training=dict(
                global_batch_size=gbs, micro_batch_size=mbs, recompute=recompute,
                pipeline_schedule=schedule, overlap_grad_reduce=True, overlap_param_gather=fsdp,
                tp_comm_overlap=async_tp and sp, optimizer="sgd" if "sgd" in str(opt).lower() else "adam",
                train_iters=steps, compile=compile_on, compile_loss=compile_loss, loss_chunks=loss_chunks,
                moe_token_dispatcher=dispatcher,
                moe_glue_eager=glue_eager, moe_a2a_collective=a2a,
                overlap_moe_expert_parallel_comm=ep_overlap, moe_router_force_load_balancing=force_balance,
                offload=offload, **{"grad_reduce_in_fp32": True, **prec}, **cuda_graphs),
            cluster=cl,
            source=Source(framework="torchtitan", path=path, format=fmt, unmodelled=_dedup(unmod), notes=notes,
                          nodes_fitted=fitted),
        )
    except ValidationError as e:
        for err in e.errors():
            ctx_err = (err.get("ctx") or {}).get("error")
            if isinstance(ctx_err, PlanError):  # a bound of a field the job gives, named by its key
                key = PLAN_KEYS.get(ctx_err.field)
                raise (PlanError(flag(key), ctx_err.value, ctx_err.allowed) if key else ctx_err) from None
        raise UserError(f"recipe={path or '<text>'!r}: {one_line(e)}") from None
    problems = torchtitan_problems(plan)
    if problems:
        field, value, allowed = problems[0]
        raise PlanError(flag(PLAN_KEYS[field]) if field in PLAN_KEYS else field, value, allowed)
    return plan


#: the job key a plan field is read from, value for value, where a bound of the plan refuses it
#: (``selective_ac_option = "99999999999"`` was "training.recompute.num_layers=...": the plan's name)
PLAN_KEYS = {"model.seq_length": "training.seq_len", "training.recompute.num_layers": "activation_checkpoint.selective_ac_option",
             "training.micro_batch_size": "training.local_batch_size", "training.train_iters": "training.steps",
             "parallel.tp": "parallelism.tensor_parallel_degree", "parallel.pp": "parallelism.pipeline_parallel_degree",
             "parallel.cp": "parallelism.context_parallel_degree", "parallel.ep": "parallelism.expert_parallel_degree",
             "parallel.etp": "parallelism.expert_tensor_parallel_degree"}


def _dedup(flags: list[UnmodelledFlag]) -> list[UnmodelledFlag]:
    seen, out = set(), []
    for f in flags:
        if (f.flag, f.value) not in seen:
            seen.add((f.flag, f.value))
            out.append(f)
    return out


def plan_from_text(text: str, cluster: Optional[Cluster] = None, path: Optional[str] = None,
                   overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    """Parse the text of a v0.1/v0.2 job TOML into a validated :class:`Plan` (see the module docstring); on
    ``cluster``, else the one the job implies (:func:`job_cluster`) completed by partial cluster flags
    ``overrides``, else the one it implies (with a note when it states none)."""
    job = _parse(text, path or "<text>")
    check_job_types(job)  # TorchTitan takes the TOML's values as they are: a wrong type is refused here
    check_key_typos(job)
    check_mapped_values(job)  # and the keys read into the plan, by the values TorchTitan allows
    if not job:
        raise UserError(f"recipe={path or '<text>'!r}: an empty TOML (no tables, no keys); expected a TorchTitan job "
                        "([model] name / flavor, [training], [parallelism])")
    if job_get(job, "model.name") is None and job_get(job, "model.flavor") is None:
        # TorchTitan would train its default (llama3 debugmodel, a test model): surely not what was meant
        raise PlanError("model.flavor", None, "required: the job names no model ([model] name and flavor; "
                        "TorchTitan's default is the llama3 debugmodel test model)")
    notes: list[str] = []
    fitted = not job_states_world(text, job) and (cluster is None and (overrides or {}).get("num_nodes") is None)
    if cluster is None and overrides:
        implied = job_cluster(text, job, None)
        header = cluster_from_header(text)
        shard = _tbl(job, "parallelism").get("data_parallel_shard_degree", -1)
        # a header or an explicit shard degree states the GPU count, not the nodes: partial flags keep it (a
        # '# primus-launch: nodes=N gpus_per_node=K' comment states the nodes: a flag replaces its own key, as in a script)
        by_comment = bool({"nodes", "gpus_per_node"} & comment_cluster(text).keys())
        stated = (header is not None and not by_comment) or (isinstance(shard, int) and shard > 0)
        cluster = implied.completed(overrides, implied.world_size if stated else None)
        if header is None and Cluster.uncovered(("gpu", "num_nodes", "gpus_per_node"), overrides):
            notes.append(_assumed_note(cluster, overrides))
    return plan_from_job(job, cluster, path=path, fmt="torchtitan-toml", header_text=text,
                         set_paths=[p for p, _ in leaf_paths(job)], notes=notes, nodes_fitted=fitted)


def load_torchtitan(path: str | Path, cluster: Optional[Cluster] = None,
                    overrides: Optional[Mapping[str, Any]] = None) -> Plan:
    """Read a v0.1/v0.2-format TorchTitan job TOML into a :class:`Plan` (``plan.source`` = the file); the cluster
    as :func:`plan_from_text` picks it."""
    return plan_from_text(read_recipe_text(path), cluster, path=str(path), overrides=overrides)


# ---------------------------------------------------------------- Plan -> job assignments
DELETE = object()  # assignment value: remove the key


def _split_keys(plan: Plan, sched_name: str, cur: tuple, strict_only: bool = False
                ) -> Optional[tuple[Optional[int], int, int]]:
    """``pipeline_parallel_layers_per_stage`` / first / last "less layers" whose torchtitan split gives
    the plan's placement (``cur`` first, then the fewest changed keys); None when none does."""
    p, L = plan.parallel, plan.model.num_layers
    want = virtual_stages(plan)

    def ok(lps: Optional[int], fl: int, ll: int) -> bool:
        try:
            st = stage_layers(L, p.pp, sched_name, lps, fl, ll)
        except PlanError:
            return False
        return len(st) == p.pp * p.vpp and virtual_stage_strings(st, plan.model.mtp_num_layers) == want

    weights = range(0, max(L // p.pp, 1) + 1)
    lps_opts = [None, *range(1, L + 3)]
    cands = [cur] + [(x, cur[1], cur[2]) for x in lps_opts] + [(cur[0], f, cur[2]) for f in weights] + \
        [(cur[0], cur[1], g) for g in weights] + [(cur[0], f, g) for f in weights for g in weights] + \
        [(x, f, g) for x in lps_opts for f in range(0, 4) for g in range(0, 4)]
    for c in cands:
        if ok(*c):
            return c
    return None


def _fqn_parts(plan: Plan) -> list[list[str]]:
    """``module_fqns_per_model_part`` stating the plan's placement stage by stage."""
    parts, nxt = [], 0
    for st in virtual_stages(plan):
        names = ["tok_embeddings"] if "E" in st else []
        for _ in range(st.count("t")):
            names.append(f"layers.{nxt}")
            nxt += 1
        if "L" in st:
            names += ["norm", "output"]
        parts.append(names)
    return parts


def job_assignments(plan: Plan, get: Callable[[str, Any], Any], old: Plan, *, allow_fqns: bool = True,
                    version: str = "0.2") -> list[tuple[str, Any]]:
    """``(dotted job key, value)`` assignments that turn the job ``get`` reads (whose plan is ``old``)
    into ``plan``; ``value`` is :data:`DELETE` to remove a key.  Only keys whose meaning changes are
    assigned; the job's own idiom (e.g. ``-1`` shard degree) is kept where it still holds."""
    problems = torchtitan_problems(plan)
    if problems:
        raise PlanError(*problems[0])
    out: list[tuple[str, Any]] = []
    vals: dict[str, Any] = {}

    def cur(path: str, default: Any) -> Any:
        return vals[path] if path in vals else get(path, default)

    def put(path: str, value: Any, default: Any = None) -> None:
        if value is not DELETE and cur(path, default) == value:
            return
        if value is DELETE and cur(path, _MISSING) is _MISSING:
            return
        vals[path] = value
        out.append((path, value))

    p, t, op, ot = plan.parallel, plan.training, old.parallel, old.training
    # ---- model / precision
    if plan.model.seq_length != old.model.seq_length:
        put("training.seq_len", plan.model.seq_length, 2048)
    if (t.precision, t.fp8_recipe) != (ot.precision, ot.fp8_recipe):
        if version == "0.3":
            raise PlanError("training.precision", t.precision, "the precision of a torchtitan 0.3 config function is "
                                                               "set by its model converters (not a command-line key)")
        conv = list(cur("model.converters", []) or [])
        conv = [c for c in conv if not (_is_linear_fp8(c) or _is_linear_mx(c))]
        if t.precision == "fp8":
            if t.fp8_recipe == "mxfp8":
                conv.append("quantize.linear.mx")
            elif t.fp8_recipe in (None, "tensorwise", "rowwise", "rowwise_with_gw_hp"):
                conv.append("quantize.linear.float8")
                if (t.fp8_recipe or "tensorwise") != (cur("quantize.linear.float8.recipe_name", None) or "tensorwise"):
                    put("quantize.linear.float8.recipe_name", t.fp8_recipe)
            else:
                raise PlanError("training.fp8_recipe", t.fp8_recipe, "torchtitan: tensorwise, rowwise, "
                                                                     "rowwise_with_gw_hp or mxfp8")
        elif t.precision not in ("bf16", "fp32"):
            raise PlanError("training.precision", t.precision, "torchtitan: bf16, fp32 or fp8")
        put("model.converters", conv, [])
        put("training.mixed_precision_param", "float32" if t.precision == "fp32" else "bfloat16", "bfloat16")
    if t.fp8_param_gather != ot.fp8_param_gather:
        put("quantize.linear.float8.enable_fsdp_float8_all_gather", t.fp8_param_gather, False)
    if version != "0.3" and t.fp8_recipe == "mxfp8" and t.mx_dim1_cast_kernel != ot.mx_dim1_cast_kernel:
        put("quantize.linear.mx.mxfp8_dim1_cast_kernel_choice", t.mx_dim1_cast_kernel, "triton")
    if t.train_iters is not None and t.train_iters != ot.train_iters:
        put("training.steps", t.train_iters, 10000)
    if t.compile != ot.compile:
        put("compile.enable", t.compile, False)
    if t.compile and (t.compile, t.compile_loss) != (ot.compile, ot.compile_loss):
        # the components the plan compiles: the model, and the loss where the plan says so (a candidate that turns
        # compile on compiles the loss too, tuner/knobs.py apply_knobs; the reader's compile_loss is "loss" in them)
        comps = list(cur("compile.components", ["model", "loss"]) or [])
        want = ["model", *[c for c in comps if c not in ("model", "loss")]] + (["loss"] if t.compile_loss else [])
        if sorted(want) != sorted(comps):
            put("compile.components", want, ["model", "loss"])

    # ---- degrees
    put("parallelism.tensor_parallel_degree", p.tp, 1)
    put("parallelism.pipeline_parallel_degree", p.pp, 1)
    put("parallelism.context_parallel_degree", p.cp, 1)
    put("parallelism.expert_parallel_degree", p.ep, 1)
    if version != "0.3" and p.ep > 1 and (p.expert_tp != op.expert_tp or p.ep != op.ep):
        put("parallelism.expert_tensor_parallel_degree", p.expert_tp, 1)
    if version == "0.3" and p.ep > 1 and p.expert_tp != 1:
        raise PlanError("parallel.etp", p.expert_tp, "torchtitan 0.3 has no expert TP: 1 with EP")
    dp = plan.dp
    if p.dp_sharding == "none":  # DDP: every DP rank a replica
        if p.cp > 1:
            raise PlanError("parallel.dp_sharding", "none", "torchtitan shards parameters over CP (FSDP) when cp > 1")
        rep_want, shard_want = dp, 1
    else:  # FSDP / HSDP
        rep_want, shard_want = p.dp_replicate, dp // p.dp_replicate
    put("parallelism.data_parallel_replicate_degree", rep_want, 1)
    raw = cur("parallelism.data_parallel_shard_degree", -1)
    if raw not in (-1, None) and raw != shard_want:  # -1 always resolves to the ranks left: keep it
        put("parallelism.data_parallel_shard_degree", shard_want, -1)
    if p.fsdp_reshard_after_forward != op.fsdp_reshard_after_forward:
        put("parallelism.fsdp_reshard_after_forward", p.fsdp_reshard_after_forward, "default")
    # async TP: the reader gives ``(parallelism | compile).enable_async_tensor_parallel and sequence_parallel`` and
    # refuses the switch at TP > 1 without compile, so at TP > 1 the switch must say the plan's value even where
    # the old plan had the same one -- a job with async TP on at TP 1 (inert there) tuned to TP 2 without it is
    # turned off, not left on to re-read as async TP
    async_keys = ("compile.enable_async_tensor_parallel",) if version == "0.3" else (
        "parallelism.enable_async_tensor_parallel", "compile.enable_async_tensor_parallel")
    file_async = any(bool(cur(k, False)) for k in async_keys)
    if (p.tp > 1 and file_async != t.tp_comm_overlap) or t.tp_comm_overlap != ot.tp_comm_overlap:
        if t.tp_comm_overlap:
            put(async_keys[0], True, False)
        else:
            for k in async_keys:
                put(k, False, False)
    if p.sequence_parallel != op.sequence_parallel and p.tp > 1:
        if not p.sequence_parallel and version != "0.3":
            raise PlanError("parallel.sequence_parallel", False, "torchtitan v0.2 always shards the sequence with TP")
        put("parallelism.enable_sequence_parallel", p.sequence_parallel, True)
    if p.cp_comm_type != op.cp_comm_type and p.cp > 1:
        if version == "0.3" or p.cp_comm_type not in ("allgather", "p2p"):
            raise PlanError("parallel.cp_comm_type", p.cp_comm_type, "torchtitan: allgather" +
                            ("" if version == "0.3" else " or p2p (alltoall rotation)"))
        put("parallelism.context_parallel_rotate_method", "allgather" if p.cp_comm_type == "allgather" else "alltoall",
            "allgather")
    if t.moe_token_dispatcher != ot.moe_token_dispatcher:
        backend = {"deepep": "deepep", "hybridep": "hybridep", "alltoall": "standard"}.get(t.moe_token_dispatcher)
        if backend is None or version == "0.3":
            raise PlanError("training.moe_token_dispatcher", t.moe_token_dispatcher,
                            "torchtitan: alltoall (standard) or deepep" + (
                                " (0.3: chosen by the config function's model)" if version == "0.3" else ""))
        put("parallelism.expert_parallel_comm_backend", backend, "standard")
    if t.moe_a2a_collective != ot.moe_a2a_collective and plan.model.is_moe:
        if version != "0.3":
            raise PlanError("training.moe_a2a_collective", t.moe_a2a_collective,
                            "functional (torchtitan before 0.3 has no spmd_backend)")
        put("parallelism.spmd_backend", "spmd_types" if t.moe_a2a_collective == "c10d" else "partial_dtensor",
            "spmd_types")

    # ---- pipeline schedule and layout
    cur_sched = cur("parallelism.pipeline_parallel_schedule", "1F1B") or "1F1B"
    sched_name = cur_sched
    if p.pp > 1 and (t.pipeline_schedule != plan_schedule(cur_sched) or is_single_stage(cur_sched) != (p.vpp == 1)):
        sched_name = titan_schedule(t.pipeline_schedule, p.vpp)
        put("parallelism.pipeline_parallel_schedule", sched_name, "1F1B")
    if p.pp > 1 and (sched_name != cur_sched or op.pp != p.pp or virtual_stages(plan) != virtual_stages(old)):
        keys = ("parallelism.pipeline_parallel_layers_per_stage", "parallelism.pipeline_parallel_first_stage_less_layers",
                "parallelism.pipeline_parallel_last_stage_less_layers")
        has_fqns = cur("parallelism.module_fqns_per_model_part", None) is not None
        now = (cur(keys[0], None), cur(keys[1], 1), cur(keys[2], 1))
        found = _split_keys(plan, sched_name, now)
        if found is not None:
            if has_fqns:
                put("parallelism.module_fqns_per_model_part", DELETE)
            lps, fl, ll = found
            if lps != now[0]:
                put(keys[0], DELETE if lps is None else lps, None)
            put(keys[1], fl, 1)
            put(keys[2], ll, 1)
        elif allow_fqns:
            put("parallelism.module_fqns_per_model_part", _fqn_parts(plan))
        else:
            raise PlanError("parallel.pipeline_layout", p.pipeline_layout or
                            f"first={p.pipeline_layers_first_stage}, last={p.pipeline_layers_last_stage}",
                            f"torchtitan's split of {plan.model.num_layers} layers over pp={p.pp} x vpp={p.vpp} "
                            f"cannot give this placement")

    # ---- batch: micro-batch is the PP micro-batch, else local_batch_size
    G, m = t.global_batch_size, t.micro_batch_size
    # a job written with the key's earlier name (``training.batch_size``, which the reader takes when
    # ``local_batch_size`` is absent: Primus release/v25.9 TorchTitan experiments) keeps it
    bkey = "training.batch_size" if cur("training.local_batch_size", None) is None and \
        cur("training.batch_size", None) is not None else "training.local_batch_size"
    local = cur(bkey, 8)
    if p.pp > 1:
        put("parallelism.pipeline_parallel_microbatch_size", m, 1)
        if local % m or G % (local * dp):
            local = G // dp
    else:
        local = m
    put(bkey, local, 8)
    gbs_cur = cur("training.global_batch_size", -1)
    if not (gbs_cur == -1 and G == local * dp):
        put("training.global_batch_size", G, -1)
    if version == "0.3" and not cur("training.disable_cuda_graphs", False):
        backend = cur("model._moe_comm_backend", None) or "standard"
        refused = p.pp > 1 or (p.ep > 1 and plan.model.is_moe and backend not in ("minimal_async_ep", "hybridep"))
        if refused or (t.cuda_graph_impl == "none" and ot.cuda_graph_impl != "none"):
            put("training.disable_cuda_graphs", True, False)

    # ---- activation checkpointing
    if t.recompute != ot.recompute:
        r = t.recompute
        if r.granularity == "none":
            put("activation_checkpoint.mode", "none", "selective")
        elif r.granularity == "op":
            put("activation_checkpoint.mode", "selective", "selective")
            put("activation_checkpoint.selective_ac_option", "op", "2")
        elif r.method == "every_n" and (r.num_layers or 1) > 1:
            if version == "0.3":
                raise PlanError("training.recompute", f"every {r.num_layers} layers",
                                "torchtitan 0.3: none, full or per-op selective")
            put("activation_checkpoint.mode", "selective", "selective")
            put("activation_checkpoint.selective_ac_option", str(r.num_layers), "2")
        else:
            put("activation_checkpoint.mode", "full", "selective")
    return out


# ---------------------------------------------------------------- Plan -> TOML text
_ANCHORS = {  # where a new key goes: after the first of these that the table already has
    "pipeline_parallel_schedule": ["pipeline_parallel_degree"],
    "pipeline_parallel_microbatch_size": ["pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_layers_per_stage": ["pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_first_stage_less_layers": ["pipeline_parallel_layers_per_stage", "pipeline_parallel_schedule",
                                                  "pipeline_parallel_degree"],
    "pipeline_parallel_last_stage_less_layers": ["pipeline_parallel_first_stage_less_layers",
                                                 "pipeline_parallel_schedule", "pipeline_parallel_degree"],
    "pipeline_parallel_degree": ["tensor_parallel_degree"],
    "tensor_parallel_degree": ["data_parallel_shard_degree"],
    "data_parallel_shard_degree": ["data_parallel_replicate_degree"],
    "context_parallel_degree": ["pipeline_parallel_degree", "tensor_parallel_degree"],
    "expert_parallel_degree": ["context_parallel_degree", "pipeline_parallel_degree"],
    "expert_tensor_parallel_degree": ["expert_parallel_degree"],
    "global_batch_size": ["local_batch_size"],
    "selective_ac_option": ["mode"],
    "converters": ["flavor"],
}


class _Editor:
    """Sets dotted keys in a tomlkit document, remembering whether anything changed."""

    def __init__(self, text: str):
        import tomlkit

        self.doc = tomlkit.parse(text)
        self.changed = False

    def _table(self, parts: list[str], create: bool) -> Any:
        import tomlkit

        t: Any = self.doc
        for part in parts:
            if part not in t:
                if not create:
                    return None
                t.add(part, tomlkit.table())
            t = t[part]
        return t

    def get(self, path: str, default: Any = None) -> Any:
        *tbl, key = path.split(".")
        t = self._table(tbl, False)
        if t is None or key not in t:
            return default
        v = t[key]
        return v.unwrap() if hasattr(v, "unwrap") else v

    def set(self, path: str, value: Any) -> None:
        *tbl, key = path.split(".")
        if value is DELETE:
            t = self._table(tbl, False)
            if t is not None and key in t:
                del t[key]
                self.changed = True
            return
        t = self._table(tbl, True)
        if key in t:
            old = t[key]
            t[key] = value
            _date_comment(t[key], old)
        else:
            anchor = next((a for a in _ANCHORS.get(key, []) if a in t), None)
            container = getattr(t, "value", None)
            if anchor is not None and hasattr(container, "_insert_after"):
                container._insert_after(anchor, key, value)
            else:
                t.add(key, value)
        self.changed = True


def _date_comment(item: Any, old: Any) -> None:
    """A trailing comment that names the value a tuned line replaces says it was the old value:
    ``tensor_parallel_degree = 8  # 8-way TP`` tuned to 4 read ``= 4  # 8-way TP``; now ``= 4  # was 8:
    8-way TP``.  Other comments are kept as written."""
    trivia = getattr(item, "trivia", None)
    before = old.unwrap() if hasattr(old, "unwrap") else old
    text = (trivia.comment if trivia is not None else "") or ""
    if not text.startswith("#") or isinstance(before, (dict, list)):
        return
    shown = str(before).lower() if isinstance(before, bool) else str(before)
    if re.search(rf"(?<![\w.]){re.escape(shown)}(?![\w.])", text[1:]):
        trivia.comment = f"# was {shown}: {text[1:].strip()}"


def render_torchtitan(plan: Plan, original_text: str) -> str:
    """``original_text`` with only the values that differ from ``plan`` changed (tomlkit keeps every
    other key, comment and the order).  An unchanged plan gives ``original_text`` byte for byte."""
    import tomlkit

    try:
        old = plan_from_text(original_text, plan.cluster)
    except PlanError:  # the original's explicit degrees may not fit the plan's (new) cluster
        old = plan_from_text(original_text, None)
    ed = _Editor(original_text)
    for path, value in job_assignments(plan, ed.get, old):
        ed.set(path, value)
    text = tomlkit.dumps(ed.doc) if ed.changed else original_text
    return _render_cluster(text, original_text, plan.cluster)


def _render_cluster(text: str, original_text: str, cluster: Cluster) -> str:
    """Keep the header comment naming the cluster in step with ``cluster`` (only when it differs
    from the cluster the original text implies); add one at the top if there is none."""
    try:
        implied = job_cluster(original_text, _parse(original_text, "<text>"), None)
    except PlanError:
        implied = None
    if implied == cluster:
        return text
    from primus_launch.adapters.megatron_script import comment_key_span

    span = comment_key_span(text, None)
    if span is not None:  # the cluster the file states in its '# primus-launch:' comment: that comment says it
        a, b = span
        line = text[a:b]
        lead = line[:line.index("primus-launch:") + len("primus-launch:")]
        return (text[:a] + f"{lead} gpu={cluster.gpu} nodes={cluster.num_nodes} gpus_per_node={cluster.gpus_per_node}"
                + text[b:])
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        m = _HEADER_RE.search(line)
        if line.lstrip().startswith("#") and m is not None:
            lines[i] = line[:m.start()] + _header_line(cluster) + line[m.end():]
            return "".join(lines)
    return f"# NOTE: this toml config is a {_header_line(cluster)}.\n" + text


def write_torchtitan(plan: Plan, original_path: str | Path, out_path: str | Path) -> Path:
    """Render ``plan`` over the TOML at ``original_path`` and write it atomically to ``out_path``
    (never over the original)."""
    orig = Path(original_path)
    text = render_torchtitan(plan, read_recipe_text(orig))
    return atomic_write_text(out_path, text, protect=orig)


# kept for callers of the earlier API (tuner): torchtitan's own split, exact
__all__ += ["generate_split", "is_v_schedule"]
