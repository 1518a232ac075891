"""Megatron-LM forks whose launch scripts look like Megatron-LM's but run another engine or MoE layer.

A script of such a fork calls ``pretrain_gpt.py`` with Megatron-LM's flags plus the fork's own; read with
Megatron-LM's flag table, the fork's flags are unknown (a note each) and the rest makes a plan of another
run: Megatron-DeepSpeed's ``--num-experts 128`` (nargs '+', MoE every ``--expert-interval`` = 2 layers,
DeepSpeed's MoE layer) became Megatron-core MoE in every layer, its ZeRO stage (from the DeepSpeed JSON
config) and pipeline engine were ignored; MegaBlocks' ``--moe-num-experts 64`` (a dMoE) was read as a dense
model.  These runs are refused by name: the flag that shows the fork, and what it changes.

Sources: microsoft/Megatron-DeepSpeed f4157bea (2024-12-24) ``megatron/arguments.py`` (``deepspeed.
add_config_arguments`` adds ``--deepspeed`` / ``--deepspeed_config``; ``--num-experts`` nargs='+',
``--expert-interval`` default 2, ``--zero-stage``), bigscience-workshop/Megatron-DeepSpeed 8387ae17 (the same
``--deepspeed`` switch); databricks/megablocks 78eea65 (2025-06-26) ``exp/{moe,dmoe}/*.sh`` run the fork in
``third_party/Megatron-LM`` (Dockerfile: PYTHONPATH), whose ``--moe-num-experts`` / ``--moe-top-k`` /
``--moe-capacity-factor`` select MegaBlocks' MoE / dMoE layers (``megablocks.layers``: block-sparse expert GEMMs).
None of these flags is in Megatron-LM's parser (core_r0.16.0 / main / dev), which exits 'unrecognized
arguments' on them.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from primus_launch.plan import PlanError

_DEEPSPEED = ("a Megatron-DeepSpeed run (the DeepSpeed engine: ZeRO stage, pipeline engine and MoE layers from its "
              "JSON config and its own flags): not modelled (primus-launch reads Megatron-LM, Megatron-Bridge / "
              "NeMo, TorchTitan and Primus recipes)")
_MEGABLOCKS = ("MegaBlocks' Megatron-LM fork (its block-sparse MoE / dMoE layers, megablocks.layers): not modelled; "
               "Megatron-LM's own MoE is --num-experts / --moe-router-topk")

#: a flag only the fork's parser has (as the reader keeps an unknown flag: its written spelling) -> why refused
FORK_FLAGS: dict[str, str] = {
    "--deepspeed": _DEEPSPEED, "--deepspeed_config": _DEEPSPEED, "--deepspeed-config": _DEEPSPEED,
    "--deepspeed-activation-checkpointing": _DEEPSPEED,
    "--moe-num-experts": _MEGABLOCKS,
}


def fork_problem(args: Mapping[str, Any]) -> Optional[PlanError]:
    """The one-line refusal of a recipe whose arguments name a fork's own flag (:data:`FORK_FLAGS`, first in
    the recipe's order), or None.  ``args``: the reader's parsed arguments (unknown flags keep their spelling)."""
    for key, val in args.items():
        why = FORK_FLAGS.get(key.split("=", 1)[0] if key.startswith("--") else "")
        if why is not None and val not in (None, False):
            return PlanError(key, "set" if val is True else val, why)
    return None
