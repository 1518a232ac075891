"""What a Megatron recipe's training program cannot run: the plan fields (and field values) its argument
parser has no flag for, and those its device cannot run (:attr:`primus_launch.plan.Source.fixed`).

Megatron-LM's own entry points (``pretrain_gpt.py`` and its copies) take every Megatron-LM argument: no
limit.  A program shipped with primus-launch (``primus_launch.examples.*``, run as ``-m`` module or by its
path) is read for what it declares: its ``build_parser()`` (argparse) gives the flags it accepts, its
``DEVICE`` (``"cpu"``: gloo, no CUDA) the settings no CPU run has (CUDA graphs, TE userbuffers TP overlap,
fine-grained activation offloading, the DeepEP / HybridEP dispatchers, FP8 / FP4 GEMMs).  Any other program
(a user's ``train.py``) is not imported (that would run its code): it is taken as Megatron-LM's.

A plan field is fixed (kept at the recipe's value by the tuner) when one of the Megatron arguments its
non-default values are written with (:data:`FIELD_DESTS`, the arguments
:func:`primus_launch.adapters.megatron_args.desired_args` writes for it) is missing from the parser; a
``field=value`` entry names one value the program cannot take (Megatron-FSDP's sharding where only
``--use-distributed-optimizer`` is accepted).
"""

from __future__ import annotations

import importlib
import re
from typing import Optional

#: plan field -> Megatron arguments (argparse dests) its non-default values are written with (megatron_args
#: ``desired_args``); a field whose every listed dest is missing is fixed, as is one missing any of ``ALL``
FIELD_DESTS: dict[str, tuple[str, ...]] = {
    "parallel.tp": ("tensor_model_parallel_size",),
    "parallel.pp": ("pipeline_model_parallel_size",),
    "parallel.cp": ("context_parallel_size",),
    "parallel.ep": ("expert_model_parallel_size",),
    "parallel.etp": ("expert_tensor_parallel_size",),
    "parallel.sequence_parallel": ("sequence_parallel",),
    "parallel.vpp": ("num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank",
                     "virtual_pipeline_model_parallel_size"),
    "parallel.pipeline_layers_first_stage": ("decoder_first_pipeline_num_layers",),
    "parallel.pipeline_layers_last_stage": ("decoder_last_pipeline_num_layers",),
    "parallel.account_for_embedding_in_pipeline_split": ("account_for_embedding_in_pipeline_split",),
    "parallel.account_for_loss_in_pipeline_split": ("account_for_loss_in_pipeline_split",),
    "parallel.pipeline_layout": ("pipeline_model_parallel_layout",),
    "parallel.dp_sharding": ("use_distributed_optimizer",),
    "training.micro_batch_size": ("micro_batch_size",),
    "training.recompute.granularity": ("recompute_granularity",),
    "training.recompute.method": ("recompute_method",),
    "training.recompute.num_layers": ("recompute_num_layers",),
    "training.recompute.modules": ("recompute_modules",),
    "training.overlap_grad_reduce": ("overlap_grad_reduce",),
    "training.overlap_param_gather": ("overlap_param_gather",),
    "training.tp_comm_overlap": ("tp_comm_overlap",),
    "training.cuda_graph_impl": ("cuda_graph_impl", "enable_cuda_graph", "external_cuda_graph"),
    "training.cuda_graph_scope": ("cuda_graph_scope", "cuda_graph_modules"),
    "training.moe_token_dispatcher": ("moe_token_dispatcher_type",),
    "training.overlap_moe_expert_parallel_comm": ("overlap_moe_expert_parallel_comm",),
    "training.delay_wgrad_compute": ("delay_wgrad_compute",),
    "training.offload.activation_layers": ("cpu_offloading_num_layers",),
    "training.offload.activation_modules": ("offload_modules",),
    "training.offload.optimizer_fraction": ("optimizer_cpu_offload",),
    "training.precision": ("bf16", "fp16"),
    "training.fp8_recipe": ("fp8_recipe",),
    "training.fp8_param_gather": ("fp8_param_gather",),
    "training.precision_aware_optimizer": ("use_precision_aware_optimizer",),
    "training.exp_avg_dtype": ("exp_avg_dtype",),
    "training.exp_avg_sq_dtype": ("exp_avg_sq_dtype",),
}
#: fields every listed dest of which must be accepted (the others need one of theirs: vpp's three spellings)
ALL = frozenset({"training.precision"})
#: one value of a field and the further arguments it is written with (Megatron-FSDP's user guide flags)
VALUE_DESTS: dict[str, tuple[str, ...]] = {
    "parallel.dp_sharding=full": ("use_megatron_fsdp", "data_parallel_sharding_strategy"),
    "parallel.dp_sharding=optimizer_grads": ("use_megatron_fsdp", "data_parallel_sharding_strategy"),
    "training.precision=fp8": ("fp8",),
}
#: settings a CPU (gloo) program cannot run: CUDA graph capture, TE userbuffers, CUDA streams for the
#: fine-grained offload, NVSHMEM dispatchers, FP8 tensor-core GEMMs
CPU_FIXED = ("training.cuda_graph_impl", "training.cuda_graph_scope", "training.tp_comm_overlap",
             "training.offload.activation_modules", "training.moe_token_dispatcher=deepep",
             "training.moe_token_dispatcher=hybridep", "training.precision=fp8", "training.precision=fp4")

_OWN = re.compile(r"^(?:-m\s+)?(primus_launch[./]examples[./]\w+?)(?:\.py)?$")


def _own_module(program: Optional[str]) -> Optional[str]:
    """The module name of a program shipped with primus-launch (``-m primus_launch.examples.x`` or a path
    ending ``primus_launch/examples/x.py``), else None."""
    if not program:
        return None
    tail = program.replace("\\", "/")
    i = tail.rfind("primus_launch/examples/")
    if i >= 0:
        tail = tail[i:]
    m = _OWN.match(tail.strip())
    return m.group(1).replace("/", ".") if m else None


def program_fixed(program: Optional[str]) -> list[str]:
    """The plan fields (and ``field=value`` entries) ``program`` cannot run (module docstring); [] for
    Megatron-LM's entry points and for programs not shipped with primus-launch."""
    name = _own_module(program)
    if name is None:
        return []
    try:
        mod = importlib.import_module(name)
    except ImportError:
        return []
    build = getattr(mod, "build_parser", None)
    dests = {a.dest for a in build()._actions} if callable(build) else None
    out: list[str] = []
    if dests is not None:
        for field, need in FIELD_DESTS.items():
            missing = [d for d in need if d not in dests]
            if (field in ALL and missing) or len(missing) == len(need):
                out.append(field)
        for key, need in VALUE_DESTS.items():
            if key.split("=")[0] not in out and any(d not in dests for d in need):
                out.append(key)
    if getattr(mod, "DEVICE", "cuda") == "cpu":
        out += [k for k in CPU_FIXED if k not in out and k.split("=")[0] not in out]
    return out
