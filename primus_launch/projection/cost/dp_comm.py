"""Data-parallel gradient reduction and parameter all-gather of one pipeline stage, after the pipeline.

Per stage: the gradient reduction (all-reduce, or reduce-scatter with the distributed optimizer;
fp32 when ``grad_reduce_in_fp32``) over the DP x CP group and, for experts, over expert-DP; the
distributed optimizer's bf16 parameter all-gather (1 byte per parameter with ``fp8_param_gather``,
:func:`cost.fsdp.fsdp_bytes`); with FSDP (``dp_sharding = "full"``) the HSDP replicas' all-reduce and,
under torch pipelining with the stage module as the FSDP root, the stage's whole reduce-scatter
(``REDUCE_GRAD``, exposed).  Overlap model: with ``overlap_grad_reduce`` the buckets
(``GRAD_BUCKET_PARAMS``, Megatron DDP's ``max(40M, 1M * dp)``) reduce during the backward of the LAST
micro-batch on that stage (all its chunks), so exposed = max(one bucket, comm - that window); with
``overlap_param_gather`` the all-gather hides behind the first micro-batch's forward likewise; the
hidden part holds NCCL's SMs (``cost/contention.py``).  With PP only that one micro-batch's window is
used (the earlier micro-batches' backward happen before the gradients are final).  The window is that
one micro-batch's backward whatever the number of micro-batches: Megatron runs micro-batches
``0 .. n-2`` under DDP's ``no_sync`` and only the last one's backward launches the bucket reductions
(``megatron/core/pipeline_parallel/schedules.py`` ``forward_backward_no_pipelining``; the pipelined
schedules' ``enable_grad_sync`` before the last backward of each chunk).

Each bucket is its own NCCL call (``distributed/param_and_grad_buffer.py``: one reduce-scatter /
all-reduce and one all-gather per bucket), so the reduction costs the whole transfer as one call plus
NCCL's own per-call latency for every further bucket (``cost/collectives.py`` ``nccl_call_latency``: base +
ring steps, whose inter-node part grows with the nodes of the DP group, ``(m-1) x 14 us`` per reduce-scatter
or all-gather); Megatron's bucket size ``max(40M, 1M x dp)`` keeps that latency a bounded share of a bucket
at large DP.
"""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost.fsdp import fsdp_bytes
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout
from primus_launch.projection.memory.params import StageParams


def bucket_params(dp_size: int) -> int:
    """Parameters per gradient bucket of Megatron DDP: ``max(40M, 1M x dp)`` (megatron-core
    ``distributed/distributed_data_parallel.py``: the default ``bucket_size`` grows with the DP group)."""
    return max(cal.GRAD_BUCKET_PARAMS, 1_000_000 * dp_size)


def bucket_calls(plan: Plan, params: float, dp_size: int) -> int:
    """NCCL calls one gradient reduction (and parameter all-gather) of ``params`` parameters takes: one per
    bucket with ``overlap_grad_reduce``, else one (Megatron DDP sets ``bucket_size = None`` without the
    overlap: one bucket per buffer)."""
    if params <= 0:
        return 0
    if not plan.training.overlap_grad_reduce:
        return 1
    return max(1, -(-int(params) // bucket_params(dp_size)))


_OP = {coll.reduce_scatter: "reduce_scatter", coll.all_gather: "all_gather", coll.all_reduce: "all_reduce"}


def _per_bucket(fn, nbytes: float, calls: int, pl, gpu: str) -> float:
    """Seconds of ``calls`` back-to-back NCCL calls moving ``nbytes`` together: the whole transfer priced as one
    call (its bandwidth, fitted fixed latency and ring steps), plus for each later call NCCL's own per-call
    latency (:func:`collectives.nccl_call_latency`: base + ring / tree steps; its launch hides behind the call
    before it on the communication stream)."""
    if calls <= 0 or nbytes <= 0 or pl.size <= 1:
        return 0.0
    return fn(float(nbytes), pl, gpu) + (calls - 1) * coll.nccl_call_latency(_OP[fn], pl.size, pl.nodes)


def dp_grad_sync(plan: Plan, spec: GPUSpec, lay: Layout, sp_: StageParams, fwd_win: float,
                 bwd_win: float) -> float:
    """Exposed seconds of one stage's gradient reduction plus parameter all-gather after the pipeline
    (module doc); ``sp_``: the parameters one GPU of the stage holds, ``fwd_win`` / ``bwd_win``: one
    micro-batch's forward / backward seconds summed over the stage's chunks."""
    gpu = spec.name
    p, t = plan.parallel, plan.training
    nmb = plan.num_microbatches
    eb = fsdp_bytes(plan)
    param_elem, grad_elem, expert_grad_elem = eb.param, eb.grad, eb.expert_grad
    dp_size = lay.dp.size
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    fsdp_pp = p.dp_sharding == "full" and lay.dp_shard.size > 1 and p.pp > 1
    sync_mb = fsdp_pp and p.fsdp_pp_grad_sync == "microbatch"
    grad = ag = 0.0
    if p.dp_sharding == "full":
        if p.dp_replicate > 1:  # HSDP: all-reduce of the shard's grads over the replicas
            grad = coll.all_reduce(float(grad_elem * sp_.total / max(1, lay.dp_shard.size)), lay.dp_replicate, gpu)
        if fsdp_pp and not sync_mb:   # torch pipelining's REDUCE_GRAD: the stage's gradients at once, exposed
            grad += (coll.reduce_scatter(float(grad_elem * sp_.dense), lay.dp_shard, gpu)
                     + coll.reduce_scatter(expert_grad_elem * sp_.expert, lay.expert_dp, gpu))
    elif dp_size > 1 or lay.expert_dp.size > 1:
        gd, ge = float(grad_elem * sp_.dense), float(grad_elem * sp_.expert)
        nd, ne = bucket_calls(plan, sp_.dense, dp_size), bucket_calls(plan, sp_.expert, dp_size)
        if sharded:
            grad = (_per_bucket(coll.reduce_scatter, gd, nd, lay.dp, gpu)
                    + _per_bucket(coll.reduce_scatter, ge, ne, lay.expert_dp, gpu))
            ag = (_per_bucket(coll.all_gather, param_elem * sp_.dense, nd, lay.dp, gpu)
                  + _per_bucket(coll.all_gather, param_elem * sp_.expert, ne, lay.expert_dp, gpu))
        else:
            grad = (_per_bucket(coll.all_reduce, gd, nd, lay.dp, gpu)
                    + _per_bucket(coll.all_reduce, ge, ne, lay.expert_dp, gpu))
    buckets = max(1, -(-sp_.total // bucket_params(dp_size)))
    units, arch = spec.num_sms, spec.arch
    if t.overlap_grad_reduce and grad > 0:
        raw = grad
        grad = max(grad / buckets, grad - bwd_win)
        grad += con.displaced(raw - grad, con.NCCL_SMS, units, arch)
    if t.overlap_param_gather and ag > 0:
        raw = ag
        ag = max(ag / buckets, ag - fwd_win)
        ag += con.displaced(raw - ag, con.NCCL_SMS, units, arch)
    return grad + ag


def held_parameters(plan: Plan, lay: Layout, sp_: StageParams) -> float:
    """Parameters the optimizer of one GPU of the stage updates: the dense ones over the FSDP shard
    group (the DP group with the distributed optimizer), the experts' over expert-DP (module doc)."""
    p = plan.parallel
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    shard_dense = lay.dp_shard.size if p.dp_sharding == "full" else (lay.dp.size if sharded else 1)  # HSDP: shard group
    shard_expert = lay.expert_dp.size if p.dp_sharding != "none" else 1
    return sp_.dense / shard_dense + sp_.expert / shard_expert


def dp_sync_line(plan: Plan) -> str:
    """One line for the explanation table: the DP group's footprint, its buckets (NCCL calls) and NCCL's per-call
    latency each further bucket pays (module doc); '' where the plan has no Megatron DP gradient buckets."""
    from primus_launch.projection.hardware.placement import layout

    p = plan.parallel
    lay = layout(plan)
    if p.dp_sharding == "full" or lay.dp.size <= 1:
        return ""
    sharded = p.dp_sharding in ("optimizer", "optimizer_grads")
    op = "reduce_scatter" if sharded else "all_reduce"
    per = bucket_params(lay.dp.size)
    lat = coll.nccl_call_latency(op, lay.dp.size, lay.dp.nodes)
    how = (f"{per / 1e6:.0f}M-parameter buckets (Megatron DDP max(40M, 1M x dp)), one NCCL call each"
           if plan.training.overlap_grad_reduce else "one bucket (no overlap_grad_reduce)")
    return (f"{lay.dp.size} ranks over {lay.dp.nodes} domain(s), {lay.dp.per_node} per domain; {how}; "
            f"{'reduce-scatter + all-gather' if sharded else 'all-reduce'}: NCCL per-call latency "
            f"{1e6 * lat:.0f} us (base + ring / tree steps, NCCL tuning.cc; inter-node step "
            f"{1e6 * coll.NCCL_NET_STEP_S:.0f} us)")

