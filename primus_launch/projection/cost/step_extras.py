"""Per-iteration work of a Megatron DDP rank outside the micro-batches and outside the optimizer kernel.

Read in Megatron-LM core_v0.16.1 (``training/training.py`` ``train_step``, ``core/distributed/
param_and_grad_buffer.py``, ``core/distributed/finalize_model_grads.py``, ``core/optimizer/optimizer.py`` /
``clip_grads.py`` / ``distrib_optimizer.py``, ``training/utils.py``).  Every iteration, per GPU, over the
stage's gradient buffer of ``P`` parameters (all its model chunks, dense and expert, NOT sharded: the
distributed optimizer shards the optimizer state, not the DDP buffer) of ``g`` bytes per element
(4 with ``grad_reduce_in_fp32``, Megatron's default with ``--bf16``; 2 with ``--grad-reduce-in-bf16``):

- ``zero_grad_buffer`` (``train_step``, before the first forward): ``grad_data.zero_()`` -- a write of ``g``.
- ``check_grads`` (``_ParamAndGradBucketGroup.start_grad_sync``, before each bucket's collective, when
  ``--check-for-nan-in-loss-and-grad``, Megatron's default): ``grad_data.norm(p=2)`` per bucket -- a read of
  ``g``; the NaN / Inf tests on its result (``rerun_state_machine.validate_result``) are host syncs.
- the 1/(DP x CP) scaling (same place): ``bucket.grad_data *= gradient_scaling_factor`` unless the factor is 1
  (``--ddp-average-in-collective`` lets NCCL average; DP x CP = 1), and with ``--calculate-per-token-loss``
  ``finalize_model_grads`` scales the whole buffer by 1 / tokens instead (``scale_gradients``) -- a read and a
  write, ``2 g``.  With ``--ddp-average-in-collective`` the expert gradients are still scaled, by
  expert-DP / (DP x CP), where those differ (:func:`grad_buffer_passes`).

They run on the compute stream (the first before the pipeline, the others before each bucket's reduce-scatter,
inside or after the last backward), so they are exposed: ``t_buf = P x bytes / (hbm_bw x eta_hbm)`` with the
same streaming efficiency as the optimizer step (``cost/optimizer.py``).

Then the scalar collectives of the step, each a latency-bound NCCL all-reduce followed by a host sync
(``.item()``), priced at NCCL's own latency of one call (``collectives.nccl_call_latency``): the gradient
norm's (``get_grad_norm_fp32``, when ``--clip-grad`` > 0) over the grad-stats group -- the whole world with
the distributed optimizer, the model-parallel group (TP x PP) without it; ``logical_and_across_model_parallel_
group`` and ``reduce_max_stat_across_model_parallel_group`` (``train_step``) over TP x PP; the loss all-reduce
over DP x CP (``train_step``, the last stage's 2-element losses); with ``--log-num-zeros-in-grad`` one more over
the grad-stats group.

Not priced here (``cost/optimizer.py`` prices the optimizer's own bytes): the launch gaps after each host
sync (two per gradient bucket with the NaN check, one per scalar collective), the clip's ``multi_tensor_scale``
(it runs only when the norm exceeds ``--clip-grad``, data-dependent), timers (``--timing-log-level`` 0, the
default, times only the iteration; levels >= 1 add ``torch.cuda.synchronize`` and, with
``--barrier-with-L1-time``, world barriers around the forward-backward and each optimizer phase), and
Megatron-LM before mid-2023 (285068c8: the 1/DP pass always, the parameter buffer copied into each parameter
after the all-gather, no NaN check).  NeMo 1's Apex DistributedFusedAdam (``optim.name: distributed_fused_adam``)
zeroes its own contiguous buffer, averages in the collective and runs no Megatron NaN check: its readers spell it
``--ddp-average-in-collective --no-check-for-nan-in-loss-and-grad`` (``adapters/nemo_yaml.py``,
``scripts/validation/build_runs.py`` ``APEX_DFA_ROWS``), which leaves the one zeroing pass.
"""

from __future__ import annotations

import math

from primus_launch.plan import Plan
from primus_launch.projection.cost.collectives import nccl_call_latency
from primus_launch.projection.cost.manual_gc import manual_gc_s
from primus_launch.projection.cost.optimizer import stream_bw
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout


def applies(plan: Plan) -> bool:
    """Whether the plan runs Megatron's DDP gradient buffers (Megatron, not its FSDP)."""
    return plan.framework == "megatron" and plan.parallel.dp_sharding not in ("full", "optimizer_grads")


def megatron_fsdp_passes(plan: Plan) -> tuple[float, int]:
    """Megatron-FSDP's passes over its gradient buffer each iteration, as ``(zeroed fraction, full passes)``.

    From megatron-core 0.16.1 ``distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py``: ``zero_grad``
    zeroes each parameter group's ``main_grad_buffer`` -- the rank's shard under ``optim_grads`` /
    ``optim_grads_params`` (``parallel.dp_sharding`` ``optimizer_grads`` / ``full``), i.e. 1 / (DP x CP) of the
    stage's elements; ``gradient_reduce_preprocessing`` before each bucket's reduce-scatter multiplies the bucket
    by the scaling factor (a read and a write of every element) unless the factor is None
    (``--calculate-per-token-loss``), ``average_in_collective`` (``ReduceOp.AVG``) or ``gradient_reduce_div_fusion``
    (default True) folds it into NCCL's ``premul_sum`` for a non-bf16 buffer; the factor is 1 / DP even at DP 1,
    so the multiply runs there too.  No NaN / Inf check: Megatron-FSDP's buffer has no ``check_grads``.  torch
    FSDP2 (``--use-torch-fsdp2``) sets gradients to None and divides inside its reduce-scatter: no pass."""
    from primus_launch.plan.legality import effective_fsdp_impl

    p, t = plan.parallel, plan.training
    if plan.framework != "megatron" or p.dp_sharding not in ("full", "optimizer_grads") or (
            p.dp_sharding == "full" and effective_fsdp_impl(plan) == "torch_fsdp2"):
        return 0.0, 0
    scaled = not t.calculate_per_token_loss and not t.ddp_average_in_collective and not t.grad_reduce_in_fp32
    return 1.0, 2 * int(scaled)


def grad_buffer_passes(plan: Plan, dp_cp: int, expert_dp: int | None = None) -> int:
    """Passes over one element of the stage's gradient buffer each iteration outside the micro-batches (module
    doc): 1 (zero) + 1 (NaN-check norm) + 2 (scaling, a read and a write).  ``dp_cp``: DP x CP ranks; ``expert_dp``:
    the expert-DP ranks for an expert parameter (None: a dense one).  The scaling factor is Megatron's
    (``distributed_data_parallel.py``): 1 with ``--calculate-per-token-loss`` (then ``finalize_model_grads`` scales
    the whole buffer by 1 / tokens), else with ``--ddp-average-in-collective`` 1 for dense and expert-DP / (DP x CP)
    for expert gradients, else 1 / (DP x CP); a factor of 1 skips the pass."""
    t = plan.training
    if t.calculate_per_token_loss:
        scaled = True
    elif t.ddp_average_in_collective:
        scaled = expert_dp is not None and expert_dp != dp_cp
    else:
        scaled = dp_cp > 1
    return 1 + int(t.check_for_nan_in_grad) + 2 * int(scaled)


def grad_bytes(plan: Plan) -> float:
    """Bytes per element of Megatron's gradient buffer: 4 with ``grad_reduce_in_fp32``, else 2."""
    return 4.0 if plan.training.grad_reduce_in_fp32 else 2.0


def scalar_collectives_s(plan: Plan, lay: Layout, last_stage: bool) -> float:
    """Seconds of the step's one-element all-reduces (module doc), each at NCCL's per-call latency."""
    p, t = plan.parallel, plan.training
    gpn = max(1, lay.tp.gpus_per_node)
    world = plan.world_size
    mp = p.tp * p.pp
    mp_nodes = min(max(1, math.ceil(world / gpn)), p.pp * max(1, math.ceil(p.tp / gpn)))
    world_nodes = max(1, math.ceil(world / gpn))
    stats = (world, world_nodes) if p.dp_sharding != "none" else (mp, mp_nodes)
    calls = [(mp, mp_nodes), (mp, mp_nodes)]           # logical_and, reduce_max of the grad norm
    if t.clip_grad > 0:
        calls.append(stats)
    if t.log_num_zeros_in_grad:
        calls.append(stats)
    if last_stage:
        calls.append((lay.dp.size, lay.dp.nodes))
    return sum(nccl_call_latency("all_reduce", n, m) for n, m in calls)


def step_extras_s(plan: Plan, spec: GPUSpec, lay: Layout, dense_params: float, expert_params: float,
                  last_stage: bool) -> float:
    """Seconds one GPU of a stage holding ``dense_params`` + ``expert_params`` parameters spends each iteration on
    the module doc's gradient-buffer passes and scalar collectives (Megatron-FSDP: :func:`megatron_fsdp_passes`),
    plus the manual garbage collection's share of the iteration (``cost/manual_gc.py``); 0 outside Megatron."""
    if plan.framework != "megatron":
        return 0.0
    return _buffer_and_scalars_s(plan, spec, lay, dense_params, expert_params, last_stage) + manual_gc_s(plan)


def _buffer_and_scalars_s(plan: Plan, spec: GPUSpec, lay: Layout, dense_params: float, expert_params: float,
                          last_stage: bool) -> float:
    """The gradient-buffer passes and scalar collectives of :func:`step_extras_s` (module doc)."""
    hbm = stream_bw(spec)   # the optimizer step's streaming rate (cost/optimizer.py)
    dp_cp = lay.dp.size
    if not applies(plan):
        zeroed, full = megatron_fsdp_passes(plan)
        elements = (dense_params * (zeroed / max(1, dp_cp) + full)         # experts: sharded over expert-DP
                    + expert_params * (zeroed / max(1, lay.expert_dp.size) + full))
        return elements * grad_bytes(plan) / hbm + scalar_collectives_s(plan, lay, last_stage)
    elements = (dense_params * grad_buffer_passes(plan, dp_cp)
                + expert_params * grad_buffer_passes(plan, dp_cp, lay.expert_dp.size))
    return elements * grad_bytes(plan) / hbm + scalar_collectives_s(plan, lay, last_stage)
