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
dispatcher's SMs while it runs beside them, :mod:`cost.contention`, or all of them beside HybridEP's
whole-GPU preprocessing / permutes, :func:`whole_gpu_share`; the attention's exposed TP collectives inside
the attn node, :func:`moe_layer_pair`; one walk per combined step of one
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
from primus_launch.projection.hardware.placement import Layout, layout
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
    t = plan.training
    return con.lost_fraction(con.ep_sms(t.moe_token_dispatcher, layout(plan).ep.nodes, t.moe_dispatcher_num_sms),
                             spec.num_sms, spec.arch)


def ep_exposed(plan: Plan, raw: tuple[float, float], lt: LayerTimes, spec: GPUSpec,
               tp: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """EP seconds left after shared-expert and 1F1B all-to-all overlap (module doc); ``tp``: the MoE
    layer's exposed TP seconds (forward, backward), on the compute stream inside the attn node."""
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
            pair = moe_layer_pair(plan, lt, f, b, tp)
            n = moe_layers_per_step(plan)
            # the permutes the walk moved onto the communication stream are already in the layer's compute
            paired = max(0.0, max(exposed_per_layer(pair, c=c), exposed_per_step(pair, n, c) / n)
                         - permutes_on_comm(plan, lt))
            share = f / (f + b) if f + b > 0 else 0.5
            return u * f + (1 - u) * paired * share, u * b + (1 - u) * paired * (1 - share)
        # delay_wgrad_compute moves the weight gradients out of the backward, where they cover the
        # backward's dispatch / combine as well
        cover_b = mo.fwd_s + (mo.bwd_weight_s if t.delay_wgrad_compute else 0.0)
        f = u * f + (1 - u) * max(0.0, f - (mo.bwd_input_s + mo.bwd_weight_s))
        b = u * b + (1 - u) * max(0.0, b - cover_b)
    return f, b


def moe_layer_pair(plan: Plan, lt: LayerTimes, f: float, b: float,
                   tp: tuple[float, float] = (0.0, 0.0)) -> LayerPair:
    """One MoE layer as :class:`~primus_launch.projection.cost.ep_overlap.LayerPair`: its forward,
    input-gradient and weight-gradient seconds split into the attn and mlp nodes by the roofline's
    scopes (measured layers: the roofline's split scaled to the measured layer), the dispatcher's
    forward (backward) seconds ``f`` (``b``) halved into dispatch and combine (the same tokens go
    out and come back).  ``tp``: the layer's exposed TP seconds (forward, backward): attention's
    sequence-parallel all-gather / reduce-scatter run on the compute stream inside the attn node
    (``fine_grained_callables.submodule_attn_forward`` calls ``layer._forward_attention``), so they
    join ``attn_f`` / ``attn_b`` (the dispatch / combine beside them hide behind them as behind compute).

    The token permutes sit where Megatron-LM dev @d48bd6be runs them (the roofline prices the permute in
    scope ``moe_preprocess``, the attn node, and the unpermute in scope ``moe``, the mlp node):
    ``alltoall``: permute in ``dispatch_preprocess`` (attn node), unpermute in ``combine_postprocess``
    (the combine node, communication stream, whole GPU; its backward in the combine's backward);
    ``deepep``: both in ``dispatch_postprocess`` / ``combine_preprocess`` inside
    ``routed_experts_compute`` (mlp node); ``hybridep``: both inside HybridEP's dispatch / combine
    (communication stream, whole GPU; the permute's backward in the dispatch's backward, the
    unpermute's in the combine's).  ``whole`` adds HybridEP's API share (:func:`whole_gpu_share`) of
    each node; the seconds moved onto the communication stream are :func:`permutes_on_comm`."""
    mo = lt.moe_layer
    af, ai, aw = (getattr(mo, k) * attn_share(plan, lt, k) for k in ("fwd_s", "bwd_input_s", "bwd_weight_s"))
    mf, mi, mw = mo.fwd_s - af, mo.bwd_input_s - ai, mo.bwd_weight_s - aw
    pf, pb = _moe_part(plan, lt, "moe_permute")
    uf, ub = _moe_part(plan, lt, "moe_unpermute")
    d = plan.training.moe_token_dispatcher
    on_f = on_b = (0.0, 0.0)   # (dispatch, combine) whole-GPU seconds moved onto the comm stream
    if d == "deepep":
        af, ai, mf, mi = af - pf, ai - pb, mf + pf, mi + pb
    elif d == "hybridep":
        af, ai, mf, mi = af - pf, ai - pb, mf - uf, mi - ub
        on_f, on_b = (pf, uf), (pb, ub)
    elif d == "alltoall":
        mf, mi = mf - uf, mi - ub
        on_f, on_b = (0.0, uf), (0.0, ub)
    if not plan.training.delay_wgrad_compute:  # each node's backward computes its weight gradients
        ai, mi, aw, mw = ai + aw, mi + mw, 0.0, 0.0
    af, ai = af + tp[0], ai + tp[1]
    g = whole_gpu_share(plan)
    df, cf, db, cb = f / 2, f / 2, b / 2, b / 2
    return LayerPair(attn_f=max(0.0, af), mlp_f=max(0.0, mf), attn_b=max(0.0, ai), mlp_b=max(0.0, mi),
                     attn_w=aw, mlp_w=mw,
                     dispatch_f=df + on_f[0], combine_f=cf + on_f[1], dispatch_b=db + on_b[0],
                     combine_b=cb + on_b[1],
                     whole=(g * df + on_f[0], g * cf + on_f[1], g * db + on_b[0], g * cb + on_b[1]))


def permutes_on_comm(plan: Plan, lt: LayerTimes) -> float:
    """Seconds of one MoE layer's permute / unpermute (forward + backward) that Megatron runs on the
    communication stream under the 1F1B overlap (:func:`moe_layer_pair`): already in the layer's
    compute time, so :func:`ep_exposed` takes them off the walk's exposure."""
    d = plan.training.moe_token_dispatcher
    uf, ub = _moe_part(plan, lt, "moe_unpermute")
    if d == "alltoall":
        return uf + ub
    if d == "hybridep":
        pf, pb = _moe_part(plan, lt, "moe_permute")
        return pf + pb + uf + ub
    return 0.0


def _moe_part(plan: Plan, lt: LayerTimes, key: str) -> tuple[float, float]:
    """(forward, backward) seconds of the MoE layer's roofline part ``key`` (measured layers: its share
    of the roofline's layer applied to the measured one)."""
    src = lt
    if not lt.parts:
        from primus_launch.projection.cost.roofline import layer_times_roofline

        src = layer_times_roofline(plan)
    mo, sm = lt.moe_layer, src.moe_layer
    p = src.part("moe", key)
    fwd = p.fwd_s * (mo.fwd_s / sm.fwd_s) if sm.fwd_s > 0 else 0.0
    bwd = p.bwd_input_s * (mo.bwd_input_s / sm.bwd_input_s) if sm.bwd_input_s > 0 else 0.0
    return fwd, bwd


def whole_gpu_share(plan: Plan) -> float:
    """Share of the dispatcher's seconds that hold the whole GPU on the communication stream (module doc
    of :mod:`cost.ep_overlap`): HybridEP's per-call torch-API time (:func:`collectives.hybridep_api_overhead`:
    metadata preprocessing on 108 blocks, the comm-stream synchronize, the output copy) over its whole
    dispatch / combine time; 0 for the other dispatchers (DeepEP and NCCL keep to their SMs) and where
    CUDA graphs capture the dispatcher (no API time)."""
    if plan.training.moe_token_dispatcher != "hybridep":
        return 0.0
    ep_pl = layout(plan).ep
    with_api = sum(dispatcher_times(plan, plan.cluster.gpu, ep_pl))
    if with_api <= 0.0:
        return 0.0
    return max(0.0, with_api - sum(dispatcher_times(plan, plan.cluster.gpu, ep_pl, api=False))) / with_api


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
