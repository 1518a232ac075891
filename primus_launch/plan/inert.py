"""Plan fields that have no effect on a given plan: a change of them is no change of the run.

- A dense model (``ModelArch.is_moe`` false) runs no expert layer, so the expert-parallel degrees and the MoE
  dispatch settings are read by nothing: Megatron-LM builds the expert process groups
  (megatron-core 0.16 ``parallel_state.initialize_model_parallel``: ``expert_tensor_parallel_size`` x
  ``expert_model_parallel_size`` x pp must divide the world, the one constraint left) but only
  ``transformer/moe/`` modules use them, and ``--moe-token-dispatcher-type``, ``--overlap-moe-expert-parallel-comm``
  are read by ``MoELayer`` / its dispatchers alone; TorchTitan reads ``expert_parallel_degree`` /
  ``expert_tensor_parallel_degree`` in ``apply_moe_ep_tp`` only for MoE blocks.
- Without a pipeline (``pp = 1``) there is no virtual stage, no schedule and no stage split: Megatron-LM
  ``schedules.get_forward_backward_func`` runs ``forward_backward_no_pipelining`` at pp 1 (the interleaved /
  1F1B choice and ``--num-layers-per-virtual-pipeline-stage`` are not read), and the first / last stage layer
  counts and the embedding / loss accounting only place layers across stages.
- Without tensor parallelism (``tp = 1``) there is no sequence to split: Megatron-LM ``validate_args`` sets
  ``args.sequence_parallel = False`` at ``tensor_model_parallel_size == 1`` ("Disabling sequence parallelism because
  tensor model parallelism is disabled", megatron/training/arguments.py, core_v0.16.1 line 907).

:func:`inert_fields` lists them as the tuner's dotted change keys (``tuner/engine.py`` ``plan_changes``), so that
the tuner's answer does not list ``parallel.etp=4`` on a dense model (user18) nor ``vpp=1`` beside ``pp=1``.
"""

from __future__ import annotations

from primus_launch.plan.schema import Plan

#: fields read only where the model has experts
EXPERT_FIELDS = frozenset({"parallel.ep", "parallel.etp", "training.moe_token_dispatcher",
                           "training.overlap_moe_expert_parallel_comm", "training.moe_dispatcher_num_sms",
                           "training.moe_hybridep_combine_chunk"})

#: fields read only where there is a pipeline (pp > 1)
PIPELINE_FIELDS = frozenset({"parallel.vpp", "parallel.microbatch_group", "parallel.pipeline_layers_first_stage",
                             "parallel.pipeline_layers_last_stage", "parallel.account_for_embedding_in_pipeline_split",
                             "parallel.account_for_loss_in_pipeline_split", "training.pipeline_schedule"})


#: fields read only where there is tensor parallelism (tp > 1)
TENSOR_FIELDS = frozenset({"parallel.sequence_parallel"})


def inert_fields(plan: Plan) -> frozenset[str]:
    """The dotted fields (``parallel.etp``, ``training.pipeline_schedule``, ...) whose value does not change the run
    ``plan`` describes (module doc): :data:`EXPERT_FIELDS` on a dense model, :data:`PIPELINE_FIELDS` at pp 1,
    :data:`TENSOR_FIELDS` at tp 1."""
    out: frozenset[str] = frozenset()
    if plan.parallel.tp == 1:
        out |= TENSOR_FIELDS
    if not plan.model.is_moe:
        out |= EXPERT_FIELDS
    if plan.parallel.pp == 1:
        out |= PIPELINE_FIELDS
    return out
