"""Expert-parallel communication of one MoE layer: raw seconds and what overlap leaves exposed.

Raw (:func:`ep_layer_comm`): every collective the plan's Megatron token dispatcher issues in forward
and backward (with ``full`` recompute the caller runs the forward ones again), placed on the scale-up
domains by the layout (:mod:`cost.moe_dispatch`, read from megatron-core's ``token_dispatcher.py``):
``moe_token_dispatcher="alltoall"``: all-to-alls of the T*k routed token copies and their probs over
EP and back (+ the token-count all-gather; + expert-TP all-gather / reduce-scatter); ``"allgather"``:
all-gathers of routing map, probs and tokens over TP x EP, reduce-scatter back, mirrored in backward;
``"deepep"`` / ``"hybridep"``: one copy per destination rank / RDMA domain
(:func:`collectives.deepep_dispatch`, efficiencies fitted to DeepEP's and HybridEP's figures, routing
fan-out from :mod:`cost.moe_routing`).

Exposed (:func:`ep_exposed`): ``moe_shared_expert_overlap`` hides the dispatch behind the shared
expert; ``overlap_moe_expert_parallel_comm`` (1F1B all-to-all overlap) runs a forward's and another
micro-batch's backward of each MoE layer on two streams, node by node as Megatron's combined 1F1B
orders them (:mod:`cost.ep_overlap`: the exposed time of the walk, its compute nodes slowed by the
dispatcher's SMs while it runs beside them, :mod:`cost.contention`; one walk per combined step of one
model chunk's layers, :func:`moe_layers_per_step`) on the passes the schedule can pair, the whole
comm on the warm-up / cool-down passes it cannot (:func:`ep_unpaired_fraction`); with PP each paired
step also waits for half of its neighbours' exposed activation sends (:func:`combined_step_p2p`);
TorchTitan: exposed = max(0, comm - the other pass's compute).
"""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost.ep_overlap import LayerPair, exposed_per_layer, exposed_per_step
from primus_launch.projection.cost.moe_dispatch import dispatcher_times
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout
from primus_launch.projection.layer_times import LayerTimes

# where megatron's fine-grained schedule cuts an MoE layer (models/gpt/fine_grained_callables.py): the
# attn node runs attention, the pre-MLP norm, the router, the dispatch preprocess and the shared
# experts (unless --moe-shared-expert-overlap); the mlp node the routed experts and the combine's
# local part
ATTN_NODE = ("scope:attn", "scope:moe_router", "scope:moe_preprocess", "scope:mlp")


def ep_layer_comm(plan: Plan, spec: GPUSpec, lay: Layout) -> tuple[float, float]:
    """Raw EP seconds of one MoE layer (forward, backward): every collective the plan's Megatron
    token dispatcher issues (:mod:`primus_launch.projection.cost.moe_dispatch`)."""
    return dispatcher_times(plan, spec.name, lay.ep)


def ep_walked(plan: Plan, lt: LayerTimes) -> bool:
    """Whether the EP exposure comes from the combined-1F1B two-stream walk (Megatron's
    ``--overlap-moe-expert-parallel-comm``), which prices SM contention inside it."""
    return (plan.framework == "megatron" and plan.training.overlap_moe_expert_parallel_comm
            and lt.moe_layer is not None)


def walk_contention(plan: Plan, spec: GPUSpec) -> float:
    """Fraction of a compute node's rate the dispatcher's SMs take while the combined-1F1B walk runs
    it beside a dispatch / combine (:func:`cost.contention.lost_fraction`)."""
    return con.lost_fraction(con.ep_sms(plan.training.moe_token_dispatcher), spec.num_sms, spec.arch)


def ep_exposed(plan: Plan, raw: tuple[float, float], lt: LayerTimes, spec: GPUSpec) -> tuple[float, float]:
    """EP seconds left after shared-expert and 1F1B all-to-all overlap (module doc)."""
    t = plan.training
    f, b = raw
    if t.moe_shared_expert_overlap:
        sh = lt.part("moe", "shared_experts")
        f = max(0.0, f - sh.fwd_s)
        b = max(0.0, b - sh.bwd_input_s - sh.bwd_weight_s)
    if t.overlap_moe_expert_parallel_comm and lt.moe_layer is not None:
        mo = lt.moe_layer
        u = ep_unpaired_fraction(plan)
        if ep_walked(plan, lt):
            # the two streams of Megatron's combined 1F1B, node by node (cost/ep_overlap.py); the
            # dispatcher's SMs slow the compute nodes it overlaps (cost/contention.py)
            c = walk_contention(plan, spec)
            pair = moe_layer_pair(plan, lt, f, b)
            n = moe_layers_per_step(plan)
            paired = max(exposed_per_layer(pair, c=c), exposed_per_step(pair, n, c) / n)
            share = f / (f + b) if f + b > 0 else 0.5
            return u * f + (1 - u) * paired * share, u * b + (1 - u) * paired * (1 - share)
        # delay_wgrad_compute moves the weight gradients out of the backward, where they cover the
        # backward's dispatch / combine as well
        cover_b = mo.fwd_s + (mo.bwd_weight_s if t.delay_wgrad_compute else 0.0)
        f = u * f + (1 - u) * max(0.0, f - (mo.bwd_input_s + mo.bwd_weight_s))
        b = u * b + (1 - u) * max(0.0, b - cover_b)
    return f, b


def moe_layer_pair(plan: Plan, lt: LayerTimes, f: float, b: float) -> LayerPair:
    """One MoE layer as :class:`~primus_launch.projection.cost.ep_overlap.LayerPair`: its forward,
    input-gradient and weight-gradient seconds split into the attn and mlp nodes by the roofline's
    scopes (measured layers: the roofline's split scaled to the measured layer), the dispatcher's
    forward (backward) seconds ``f`` (``b``) halved into dispatch and combine (the same tokens go
    out and come back)."""
    mo = lt.moe_layer
    af, ai, aw = (getattr(mo, k) * attn_share(plan, lt, k) for k in ("fwd_s", "bwd_input_s", "bwd_weight_s"))
    mf, mi, mw = mo.fwd_s - af, mo.bwd_input_s - ai, mo.bwd_weight_s - aw
    if not plan.training.delay_wgrad_compute:  # each node's backward computes its weight gradients
        ai, mi, aw, mw = ai + aw, mi + mw, 0.0, 0.0
    return LayerPair(attn_f=af, mlp_f=mf, attn_b=ai, mlp_b=mi, attn_w=aw, mlp_w=mw,
                     dispatch_f=f / 2, combine_f=f / 2, dispatch_b=b / 2, combine_b=b / 2)


def moe_layers_per_step(plan: Plan) -> int:
    """MoE layers one combined 1F1B step pairs (:func:`cost.ep_overlap.exposed_per_step`): those of
    one model chunk, the mean over the busiest rank's chunks (at least 1)."""
    m = plan.model
    rows = plan.chunk_layout()
    best = max(rows, key=lambda r: sum(len(c.layers) for c in r))
    n = sum(sum(1 for i in c.layers if m.is_moe_layer(i)) for c in best)
    return max(1, round(n / max(1, len(best))))


def combined_step_p2p(plan: Plan, lt: LayerTimes, p2p_s: float) -> float:
    """Pipeline send seconds each steady step of Megatron's combined 1F1B waits for, per model chunk
    and micro-batch (``--overlap-moe-expert-parallel-comm`` with PP > 1).

    A combined step runs one chunk's forward with another's backward and needs both inputs before it
    starts: ``TransformerModelChunkSchedulePlan.run`` (megatron-core dev
    ``models/common/model_chunk_schedule_plan.py``) calls ``pre_forward`` and ``pre_backward`` (the
    P2P receive waits, ``pipeline_parallel/schedules.py``) before the first layer's nodes, and a stage
    produces both outputs only at the end of its own step: the forward output after the last
    ``combine_fwd`` (sent on the communication stream beside the last ``attn_bwd``), the input
    gradient after the last ``attn_bwd`` (sent on the compute stream beside the delayed
    ``attn.backward_dw`` of that layer).  With the forward inputs one step ahead (the extra warm-up
    micro-batch of ``get_pp_rank_microbatches``) and the gradients a step behind, the pipeline's
    period is the step plus half of each send's exposed part: ``(max(0, p - (attn_b + attn_w)) +
    max(0, p - attn_w)) / 2`` (``p``: one activation send).  Separate forward and backward passes
    (no overlap) hide the sends behind the other pass; warm-up / cool-down passes are unpaired
    (:func:`ep_unpaired_fraction`)."""
    t, p = plan.training, plan.parallel
    if (plan.framework != "megatron" or not t.overlap_moe_expert_parallel_comm or p.pp <= 1 or p2p_s <= 0.0
            or lt.moe_layer is None):
        return 0.0
    mo = lt.moe_layer
    aw = mo.bwd_weight_s * attn_share(plan, lt, "bwd_weight_s") if t.delay_wgrad_compute else 0.0
    ab = mo.bwd_input_s * attn_share(plan, lt, "bwd_input_s")
    if not t.delay_wgrad_compute:
        ab += mo.bwd_weight_s * attn_share(plan, lt, "bwd_weight_s")
    e = (max(0.0, p2p_s - (ab + aw)) + max(0.0, p2p_s - aw)) / 2
    return (1.0 - ep_unpaired_fraction(plan)) * e


def attn_share(plan: Plan, lt: LayerTimes, field: str) -> float:
    """Share of an MoE layer's ``field`` seconds in the combined schedule's ``attn`` node (the
    roofline's scopes where ``lt`` has no parts: measured layers)."""
    src = lt
    if not lt.parts:
        from primus_launch.projection.cost.roofline import layer_times_roofline

        src = layer_times_roofline(plan)
    tot = getattr(src.moe_layer, field)
    if tot <= 0:
        return 0.5
    return sum(getattr(src.part("moe", k), field) for k in ATTN_NODE) / tot


def ep_unpaired_fraction(plan: Plan) -> float:
    """Fraction of a stage's forward (and backward) passes that Megatron's 1F1B all-to-all overlap
    (``--overlap-moe-expert-parallel-comm``) cannot pair with a pass of another micro-batch, so their
    dispatch / combine stay exposed: the overlap merges the forward of one micro-batch with the
    backward of an earlier one, which exists only in the steady state of the schedule.  The warm-up
    forwards and the cool-down backwards run alone: ``w`` of the ``nmb x vpp`` passes with ``w`` =
    Megatron's warm-up count for the first stage (``pipeline_parallel/schedules.py``: ``pp - 1``
    without interleaving, ``(pp - 1) * 2 + (vpp - 1) * pp`` with it), and at least 1 (with PP = 1 the
    combined schedule still starts with a lone forward and ends with a lone backward)."""
    p = plan.parallel
    return unpaired_fraction(p.pp, p.vpp, plan.num_microbatches)


def unpaired_fraction(pp: int, vpp: int, num_microbatches: int) -> float:
    """:func:`ep_unpaired_fraction` from the pipeline degrees and the micro-batch count."""
    n = max(1, num_microbatches * vpp)
    if pp <= 1:
        w = 1
    elif vpp > 1:
        w = (pp - 1) * 2 + (vpp - 1) * pp
    else:
        w = pp - 1
    return min(1.0, max(1, w) / n)
