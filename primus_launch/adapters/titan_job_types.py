"""The value types of a TorchTitan job's keys, and the one-line refusal of a value of the wrong type.

TorchTitan builds its ``JobConfig`` dataclasses from the TOML without checking the values' types
(torchtitan v0.2.2 ``torchtitan/config/manager.py``: the tables become the dataclasses as they are),
so ``enable = "false"`` (a non-empty string: true), ``lr = "3e-4"`` or ``components = 1`` reach the
trainer and fail there, or silently do the opposite of what was meant.  The types below are the
fields' annotations in torchtitan v0.2.2 ``torchtitan/config/job_config.py`` (``int``, ``float``,
``bool``, ``str``, ``list[str]``, ``Literal[...]``; v0.1 ``[float8]`` / ``[mx]`` tables as in v0.1.0),
completed by v0.2.2's own dataclasses for every key the plan does not read (``[training.dataloader]``,
``mixed_precision_reduce``, ``context_parallel_load_balancer``, ...: ``primus_launch/data/torchtitan-0.2.2-job.json``,
built by ``scripts/build_titan_job_types.py``); a key not listed here is not judged (the adapter's key table
reports unknown keys).

A TOML integer is a number too (``max_norm = 1``); nan / inf are refused where a number belongs;
integers are 64-bit (they reach torch: seeds, step counters).
"""

from __future__ import annotations

import functools
import math
from typing import Any, Union

from primus_launch.adapters.megatron_flags import INT64  # the one 64-bit bound both frameworks' values are held to
from primus_launch.plan import PlanError

Kind = Union[str, tuple[str, ...]]   # "int" | "float" | "bool" | "str" | "strs" | the allowed strings

_I, _F, _B, _S, _L = "int", "float", "bool", "str", "strs"


def _tbl(section: str, **fields: Kind) -> dict[str, Kind]:
    return {f"{section}.{k}": v for k, v in fields.items()}


HAND_TYPES: dict[str, Kind] = {
    **_tbl("job", dump_folder=_S, description=_S, print_config=_B, save_config_file=_S, custom_config_module=_S,
           use_for_integration_test=_B),
    **_tbl("profiling", enable_profiling=_B, save_traces_folder=_S, profile_freq=_I, profiler_active=_I,
           profiler_warmup=_I, enable_memory_snapshot=_B, save_memory_snapshot_folder=_S),
    **_tbl("metrics", log_freq=_I, enable_tensorboard=_B, disable_color_printing=_B, save_tb_folder=_S,
           save_for_all_ranks=_B, enable_wandb=_B),
    **_tbl("model", name=_S, flavor=_S, hf_assets_path=_S, tokenizer_path=_S, print_after_conversion=_B),
    **_tbl("optimizer", name=_S, lr=_F, eps=_F, weight_decay=_F, beta1=_F, beta2=_F, min_lr=_F,
           implementation=("for-loop", "foreach", "fused"), early_step_in_backward=_B),
    **_tbl("lr_scheduler", warmup_steps=_I, total_steps=_I, decay_ratio=_F, decay_type=("linear", "sqrt", "cosine"),
           min_lr_factor=_F, lr_min=_F),
    **_tbl("training", dataset=_S, dataset_path=_S, local_batch_size=_I, global_batch_size=_I, batch_size=_I,
           seq_len=_I, max_norm=_F, steps=_I, enable_cpu_offload=_B, gc_freq=_I, gc_debug=_B, seed=_I,
           deterministic=_B, mock_data=_B, compile=_B),
    **_tbl("parallelism", data_parallel_replicate_degree=_I, data_parallel_shard_degree=_I, tensor_parallel_degree=_I,
           disable_loss_parallel=_B, enable_async_tensor_parallel=_B, pipeline_parallel_degree=_I,
           pipeline_parallel_first_stage_less_layers=_I, pipeline_parallel_last_stage_less_layers=_I,
           pipeline_parallel_layers_per_stage=_I, pipeline_parallel_schedule=_S, pipeline_parallel_schedule_csv=_S,
           pipeline_parallel_microbatch_size=_I, pipeline_parallel_expert_parallel_overlap=_B,
           context_parallel_degree=_I, expert_parallel_degree=_I, expert_tensor_parallel_degree=_I,
           enable_sequence_parallel=_B, enable_compiled_autograd=_B, enable_fsdp_symm_mem=_B,
           pipeline_parallel_split_points=_L),
    **_tbl("checkpoint", enable=_B, enable_checkpoint=_B, enable_ft_dataloader_checkpoints=_B, folder=_S,
           interval=_I, initial_load_path=_S, initial_load_model_only=_B, initial_load_in_hf=_B,
           initial_load_in_hf_quantized=_B, last_save_model_only=_B, last_save_in_hf=_B,
           export_dtype=("float16", "bfloat16", "float32"), async_mode=("disabled", "async", "async_with_pinned_mem"),
           keep_latest_k=_I, load_step=_I, exclude_from_loading=_L, enable_first_step_checkpoint=_B,
           create_seed_checkpoint=_B, load_only=_B),
    **_tbl("activation_checkpoint", memory_budget=_F, early_stop=_B, preserve_rng_state=_B, debug=_B,
           visualize_memory_budget_pareto=_B, determinism_check=_S),
    **_tbl("compile", enable=_B, components=_L, backend=_S),
    **_tbl("quantize.linear.float8", enable_fsdp_float8_all_gather=_B, precompute_float8_dynamic_scale_for_fsdp=_B,
           filter_fqns=_L, emulate=_B),
    **_tbl("quantize.linear.mx", filter_fqns=_L),
    **_tbl("float8", enable_float8_linear=_B, enable_fsdp_float8_all_gather=_B,
           precompute_float8_dynamic_scale_for_fsdp=_B, filter_fqns=_L, emulate=_B,
           force_recompute_fp8_weight_in_bwd=_B),
    **_tbl("comm", init_timeout_seconds=_I, train_timeout_seconds=_I, trace_buf_size=_I, save_traces_folder=_S,
           save_traces_file_prefix=_S, mode=("default", "fake_backend", "local_tensor")),
    **_tbl("memory_estimation", enable=_B, disable_fake_mode=_B),
    **_tbl("fault_tolerance", enable=_B, process_group=_S, process_group_timeout_ms=_I, replica_id=_I, group_size=_I,
           min_replica_size=_I, semi_sync_method=_S),
    **_tbl("experimental", custom_import=_S, custom_args_module=_S),
    **_tbl("validation", enable=_B, dataset=_S, dataset_path=_S, local_batch_size=_I, seq_len=_I, freq=_I, steps=_I),
    **_tbl("debug", seed=_I, deterministic=_B, deterministic_warn_only=_B, moe_force_load_balance=_B),
}

@functools.lru_cache(maxsize=1)
def job_data() -> dict[str, Any]:
    """``primus_launch/data/torchtitan-0.2.2-job.json`` (built from torchtitan v0.2.2's ``JobConfig`` dataclasses
    by ``scripts/build_titan_job_types.py``: ``types``, ``earlier_names``), read once."""
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / "data" / "torchtitan-0.2.2-job.json").read_text())


def job_get(job: dict, path: str, default: Any = None) -> Any:
    """The value at the dotted ``path`` of a TorchTitan job (nested tables), ``default`` when absent."""
    cur: Any = job
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def optional_keys() -> frozenset[str]:
    """The keys v0.2.2 types ``X | None`` (its parser takes the word ``None`` for them on a command line)."""
    return frozenset(k for k, v in job_data()["types"].items() if isinstance(v, str) and v.startswith("opt:"))


def _generated() -> dict[str, Kind]:
    """torchtitan v0.2.2's own field types (``primus_launch/data/torchtitan-0.2.2-job.json``, built from its
    ``JobConfig`` dataclasses by ``scripts/build_titan_job_types.py``), for the keys the reader does not map into
    the plan itself (a mapped key is checked where it is read, with the versions it accepts).  ``X | None`` is
    read as ``X`` (a TOML cannot write None); a union the table calls ``other`` is not judged."""
    out: dict[str, Kind] = {}
    for key, kind in job_data()["types"].items():
        if isinstance(kind, list):
            out[key] = tuple(kind)
        elif isinstance(kind, str) and kind != "other":
            base = kind.split(":", 1)[1] if kind.startswith("opt:") else kind
            out[key] = {"strs": _L}.get(base, base)
    return out


# keys the plan reads, each checked where it is read with the values of every torchtitan version the reader takes
_READ_BY_THE_PLAN = ("activation_checkpoint.", "model.", "quantize.", "parallelism.fsdp_reshard_after_forward",
                     "parallelism.context_parallel_rotate_method", "parallelism.expert_parallel_comm_backend",
                     "parallelism.module_fqns_per_model_part", "training.dtype", "training.mixed_precision_param",
                     "training.mixed_precision_reduce")


def _merge(hand: dict[str, Kind]) -> dict[str, Kind]:
    """The hand table (v0.1 / v0.2 keys of other releases too) with v0.2.2's own types of the keys the plan does
    not read (its types win: the same but for ``X | None``, read as ``X``)."""
    out = dict(hand)
    for key, kind in _generated().items():
        if not key.startswith(_READ_BY_THE_PLAN):
            out[key] = kind
    return out


JOB_TYPES: dict[str, Kind] = _merge(HAND_TYPES)

_WORDS = {_I: "an integer", _F: "a number", _B: "true or false", _S: "a string",
          _L: 'a list of names (e.g. ["model", "loss"])'}


def type_problem(kind: Kind, v: Any) -> str | None:
    """What is wrong with ``v`` for a field of ``kind``, or None."""
    if isinstance(kind, tuple):
        return None if isinstance(v, str) and v in kind else f"one of {', '.join(kind)}"
    if kind == _B:
        return None if isinstance(v, bool) else _WORDS[kind]
    if kind == _I:
        if not isinstance(v, int) or isinstance(v, bool):
            return _WORDS[kind]
        return None if -INT64 <= v < INT64 else "an integer of at most 64 bits (|value| < 2**63)"
    if kind == _F:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            return _WORDS[kind]
        return None if math.isfinite(v) else "a finite number (not nan or inf)"
    if kind == _S:
        return None if isinstance(v, str) else _WORDS[kind]
    if kind == _L:
        ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
        return None if ok else _WORDS[kind]
    return None


def check_job_types(job: dict, flag=lambda path: path) -> None:
    """Raise the one-line :class:`PlanError` (``table.key=value: what is allowed``) for the first key of
    ``job`` (nested tables) whose value has the wrong type for TorchTitan (:data:`JOB_TYPES`);
    ``flag`` spells the key as the format does (a launch script's ``--table.key``)."""
    stack: list[tuple[str, Any]] = [("", job)]
    while stack:
        prefix, d = stack.pop()
        for k, v in d.items():
            path = f"{prefix}{k}"
            kind = JOB_TYPES.get(path)
            if kind is not None:
                why = type_problem(kind, v)
                if why:
                    raise PlanError(flag(path), v, why)
            elif isinstance(v, dict):
                stack.append((path + ".", v))
