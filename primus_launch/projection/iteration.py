"""Assembly of one training iteration from per-layer compute times: the model shared by the dry-run
(roofline layer times) and the hybrid projection (measured layer times).

Input: :class:`LayerTimes`, the COMPUTE time of one micro-batch on one GPU per layer kind with the
plan's TP/CP/EP sharding applied and no communication. :func:`assemble` adds, per micro-batch:

- recomputation: ``full`` re-runs a layer's forward (its TP/EP communication included) in its
  backward for every layer of a chunk (``uniform``) or the first ``num_layers`` of each chunk
  (``block``); ``selective`` re-runs the core attention forward (Korthikanti et al. 2022,
  arXiv 2205.05198 sec. 4.2);
- TP: with sequence parallel 2 all-gathers + 2 reduce-scatters of the [T, h] activations per layer
  in forward and the same in backward, else 2 all-reduces each way (Megatron ``ColumnParallel`` /
  ``RowParallelLinear``); ``tp_comm_overlap`` hides ``TP_OVERLAP_HIDDEN`` of it;
- CP: ring attention sends K,V around the CP ring, (cp-1) steps, in forward and K,V plus their
  gradients in backward; overlapped with the attention core: exposed = max(0, comm - attention);
- EP: token dispatch + combine in forward, two more in backward (the backward of a dispatch is a
  combine and vice versa; with ``full`` recompute the forward pair runs again), intra- vs
  inter-node from the layout; not overlapped. ``moe_token_dispatcher="alltoall"``: an all-to-all
  of T_e*k*h bf16 per GPU (one copy per routed expert); ``"deepep"``: DeepEP's one copy per
  destination rank / RDMA node (:func:`collectives.deepep_dispatch`, routing fan-out from
  :mod:`moe_routing`);
- FSDP (``dp_sharding="full"``): per layer, the bf16 parameter all-gather in forward and again in
  backward (reshard after forward) and the gradient reduce-scatter in backward, prefetched: the
  exposed part is max(0, comm - that layer's compute) per pass.

Per (stage, chunk) the layers of that chunk (:mod:`primus_launch.plan.layout`: Megatron's layout
string and offsets, account-for-embedding/loss, uneven first/last stage, ZB-V's "V") sum into a
:class:`pipeline.ChunkCost`; the chunk holding the embedding adds it, the one holding the loss (and
each MTP layer) the final norm, output layer and loss.
:func:`pipeline.simulate` runs the plan's schedule with the activation send time as P2P.

After the pipeline, per stage: DP gradient reduction (all-reduce, or reduce-scatter with the
distributed optimizer; fp32 when ``grad_reduce_in_fp32``) over the DP x CP group and, for experts,
over expert-DP; the distributed optimizer's bf16 parameter all-gather. Overlap model: with
``overlap_grad_reduce`` the buckets (``GRAD_BUCKET_PARAMS``) reduce during the backward of the LAST
micro-batch on that stage (all its chunks), so exposed = max(one bucket, comm - that window); with
``overlap_param_gather`` the all-gather hides behind the first micro-batch's forward likewise.
With PP only that one micro-batch's window is used (the earlier micro-batches' backward happen
before the gradients are final). Then the optimizer step: memory-bound Adam streaming
``ADAM_BYTES_PER_PARAM`` bytes per parameter held (after distributed-optimizer / FSDP sharding) at
``hbm_bw * HBM_BW_EFFICIENCY``. Iteration = pipeline makespan + max over stages of (exposed DP +
optimizer).

Breakdown (exposed seconds, summing to the iteration time), on the busiest stage ``c``:
compute = its chunk costs without the communication parts; tp/cp/ep_comm = the exposed parts in
them; dp_comm = FSDP exposed + post-pipeline DP; bubble = makespan(p2p = 0) - busy_c; pp_comm =
makespan - makespan(p2p = 0); optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection import calibration as cal
from primus_launch.projection import collectives as coll
from primus_launch.projection.flops import model_flops_per_iteration
from primus_launch.projection.hardware import get_gpu
from primus_launch.projection.layout import layout
from primus_launch.projection.memory import estimate_memory
from primus_launch.projection.params import layer_parameter_counts, stage_parameter_split
from primus_launch.projection.pipeline import ChunkCost, simulate
from primus_launch.projection.result import ProjectionResult, TimelineEvent


@dataclass(frozen=True)
class PassTimes:
    """Seconds of one micro-batch: forward, input-grad backward, weight-grad backward."""

    fwd_s: float
    bwd_input_s: float
    bwd_weight_s: float

    @property
    def total_s(self) -> float:
        return self.fwd_s + self.bwd_input_s + self.bwd_weight_s


@dataclass(frozen=True)
class LayerTimes:
    """Compute-only times of one micro-batch on one GPU, per layer kind (sharding applied).

    ``attn_core`` (optional) is the core-attention share of a layer (forward, backward): used for
    selective recompute and CP overlap; when absent, :func:`assemble` takes the roofline's
    core-attention share of a dense layer scaled to the given dense-layer time."""

    dense_layer: PassTimes
    moe_layer: Optional[PassTimes]
    embedding: PassTimes
    head_loss: PassTimes
    attn_core: Optional[PassTimes] = None


@dataclass
class _Parts:
    """Per-micro-batch seconds of one chunk, split by kind (for the breakdown)."""

    f: float = 0.0
    bi: float = 0.0
    bw: float = 0.0
    tp: float = 0.0
    cp: float = 0.0
    ep: float = 0.0
    dp: float = 0.0

    def cost(self) -> ChunkCost:
        return ChunkCost(self.f, self.bi, self.bw)


def _tp_times(plan: Plan, gpu: str, lay) -> tuple[float, float]:
    """Exposed TP seconds of one layer (forward, backward)."""
    p = plan.parallel
    if p.tp <= 1:
        return 0.0, 0.0
    m, t = plan.model, plan.training
    nbytes = t.micro_batch_size * m.seq_length // p.cp * m.hidden_size * 2
    if p.sequence_parallel:
        one = 2 * (coll.all_gather(float(nbytes), lay.tp, gpu) + coll.reduce_scatter(float(nbytes), lay.tp, gpu))
    else:
        one = 2 * coll.all_reduce(float(nbytes), lay.tp, gpu)
    if t.tp_comm_overlap:
        one *= 1.0 - cal.TP_OVERLAP_HIDDEN
    return one, one


def _cp_times(plan: Plan, gpu: str, lay) -> tuple[float, float]:
    """Raw ring-attention P2P seconds of one layer (forward, backward)."""
    p = plan.parallel
    if p.cp <= 1:
        return 0.0, 0.0
    m = plan.model
    b, s = plan.training.micro_batch_size, m.seq_length
    if m.multi_latent_attention:
        kv_elems = m.num_attention_heads // p.tp * (m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim)
    else:
        kv_elems = 2 * max(1, m.kv_heads // p.tp) * m.kv_channels
    nbytes = float(b * s // p.cp * kv_elems * 2)
    step = coll.p2p(nbytes, lay.cp.nodes > 1, gpu)
    return (p.cp - 1) * step, (p.cp - 1) * 2 * step


def _ep_times(plan: Plan, gpu: str, lay) -> tuple[float, float]:
    """EP all-to-all seconds of one MoE layer (forward, backward)."""
    p, m = plan.parallel, plan.model
    if not m.is_moe or p.ep <= 1:
        return 0.0, 0.0
    T = plan.training.micro_batch_size * m.seq_length // p.cp
    Te = max(1, T * p.expert_tp // p.tp)
    if plan.training.moe_token_dispatcher == "deepep":
        one = coll.deepep_dispatch(Te, float(m.hidden_size * 2), lay.ep, gpu, m.num_experts, m.moe_router_topk,
                                   m.moe_router_num_groups or 1, m.moe_router_group_topk or 1)
        return 2 * one, 2 * one
    nbytes = float(Te * m.moe_router_topk * m.hidden_size * 2)
    one = coll.all_to_all(nbytes, lay.ep, gpu)
    return 2 * one, 2 * one


def assemble(plan: Plan, layer_times: LayerTimes, mode: str, record_timeline: bool = False,
             memory_margin: float = 0.05) -> ProjectionResult:
    """One iteration of ``plan`` from ``layer_times`` (module doc for the model)."""
    m, p, t = plan.model, plan.parallel, plan.training
    gpu = plan.cluster.gpu
    spec = get_gpu(gpu)
    lay = layout(plan)
    pp, vpp = p.pp, p.vpp
    nmb = plan.num_microbatches
    lt = layer_times
    attn = lt.attn_core
    if attn is None and (t.recompute.granularity == "selective" or p.cp > 1):
        # measured layer times without an attention split: take the roofline's core-attention
        # share of a dense layer, scaled to the measured layer
        from primus_launch.projection.dryrun import layer_times_roofline

        roof = layer_times_roofline(plan)
        ra = roof.attn_core or PassTimes(0.0, 0.0, 0.0)
        k = lt.dense_layer.total_s / roof.dense_layer.total_s if roof.dense_layer.total_s > 0 else 0.0
        attn = PassTimes(ra.fwd_s * k, ra.bwd_input_s * k, 0.0)
    attn = attn or PassTimes(0.0, 0.0, 0.0)

    tp_f, tp_b = _tp_times(plan, gpu, lay)
    cp_f, cp_b = _cp_times(plan, gpu, lay)
    cp_f = max(0.0, cp_f - attn.fwd_s)
    cp_b = max(0.0, cp_b - attn.bwd_input_s)
    ep_f, ep_b = _ep_times(plan, gpu, lay)

    fsdp = p.dp_sharding == "full" and lay.dp_shard.size > 1
    grad_elem = 4 if t.grad_reduce_in_fp32 else 2
    fsdp_dense = fsdp_moe = (0.0, 0.0)
    if fsdp:
        def _fsdp(moe: bool, pt: PassTimes) -> tuple[float, float]:
            sp_ = layer_parameter_counts(m, p.tp, p.expert_tp, p.ep, moe)
            ag = coll.all_gather(2.0 * sp_.dense, lay.dp_shard, gpu) + (
                coll.all_gather(2.0 * sp_.expert, lay.expert_dp, gpu) if sp_.expert else 0.0)
            rs = coll.reduce_scatter(float(grad_elem * sp_.dense), lay.dp_shard, gpu) + (
                coll.reduce_scatter(float(grad_elem * sp_.expert), lay.expert_dp, gpu) if sp_.expert else 0.0)
            return max(0.0, ag - pt.fwd_s), max(0.0, ag + rs - pt.bwd_input_s - pt.bwd_weight_s)
        fsdp_dense = _fsdp(False, lt.dense_layer)
        if m.is_moe and lt.moe_layer is not None:
            fsdp_moe = _fsdp(True, lt.moe_layer)

    r = t.recompute
    chunks = plan.chunk_layout()
    last_moe = m.is_moe_layer(m.num_layers - 1)

    # embedding / head TP communication (vocab-parallel embedding all-reduce or reduce-scatter,
    # the all-gather before the output layer with SP); cross-entropy's small all-reduces ignored
    emb_tp = tp_f / 4 if p.sequence_parallel else tp_f / 2   # one RS (SP) or one AR per pass
    head_tp = tp_f / 4 if p.sequence_parallel else 0.0        # the AG before the output layer (SP)

    parts: list[list[_Parts]] = []
    for rank in range(pp):
        row = []
        for c in range(vpp):
            chunk = chunks[rank][c]
            # MTP layers (plan.layout: with the loss unless the layout string places them) are
            # priced as decoder layers of the last layer's kind plus their own output head + loss
            kinds = [m.is_moe_layer(i) for i in chunk.layers] + [last_moe] * chunk.mtp
            n = len(kinds)
            n_moe = sum(kinds)
            n_dense = n - n_moe
            if r.granularity == "full":
                if r.method == "every_n":
                    rec = [k for j, k in enumerate(kinds) if j % (r.num_layers or 1) == 0]
                else:
                    n_rec = n if (r.method == "uniform" or r.num_layers is None) else min(r.num_layers, n)
                    rec = kinds[:n_rec]
                rec_moe = sum(rec)
                rec_dense = len(rec) - rec_moe
            else:
                rec_moe = rec_dense = 0
            q = _Parts()
            d, mo = lt.dense_layer, lt.moe_layer
            q.f = n_dense * d.fwd_s + n_moe * (mo.fwd_s if mo else 0.0)
            q.bi = n_dense * d.bwd_input_s + n_moe * (mo.bwd_input_s if mo else 0.0)
            q.bw = n_dense * d.bwd_weight_s + n_moe * (mo.bwd_weight_s if mo else 0.0)
            # recompute (compute part)
            q.bi += rec_dense * d.fwd_s + rec_moe * (mo.fwd_s if mo else 0.0)
            if r.granularity == "selective":
                q.bi += n * attn.fwd_s
            comp = q.f + q.bi + q.bw
            # communication inside the layers
            q.tp = n * (tp_f + tp_b) + (rec_dense + rec_moe) * tp_f
            q.cp = n * (cp_f + cp_b) + (rec_dense + rec_moe) * cp_f
            q.ep = n_moe * (ep_f + ep_b) + rec_moe * ep_f
            q.dp = n_dense * sum(fsdp_dense) + n_moe * sum(fsdp_moe)
            q.f += n * (tp_f + cp_f) + n_moe * ep_f + n_dense * fsdp_dense[0] + n_moe * fsdp_moe[0]
            q.bi += (n * (tp_b + cp_b) + n_moe * ep_b + n_dense * fsdp_dense[1] + n_moe * fsdp_moe[1]
                     + (rec_dense + rec_moe) * (tp_f + cp_f) + rec_moe * ep_f)
            if chunk.embedding:
                q.f += lt.embedding.fwd_s + emb_tp
                q.bi += lt.embedding.bwd_input_s + emb_tp
                q.bw += lt.embedding.bwd_weight_s
                comp += lt.embedding.total_s
                q.tp += 2 * emb_tp
            heads = int(chunk.loss) + chunk.mtp
            if heads:
                q.f += heads * (lt.head_loss.fwd_s + head_tp)
                q.bi += heads * (lt.head_loss.bwd_input_s + head_tp)
                q.bw += heads * lt.head_loss.bwd_weight_s
                comp += heads * lt.head_loss.total_s
                q.tp += heads * 2 * head_tp
            row.append(q)
        parts.append(row)

    costs = [[q.cost() for q in row] for row in parts]
    act = t.micro_batch_size * m.seq_length // p.cp * m.hidden_size * 2
    if p.sequence_parallel:
        act //= p.tp
    p2p_s = coll.p2p(float(act), lay.pp.nodes > 1, gpu) if pp > 1 else 0.0
    schedule = t.pipeline_schedule if pp > 1 else "1f1b"
    res = simulate(schedule, pp, vpp, nmb, costs, p2p_s, record=record_timeline)
    makespan = res.makespan_s
    makespan0 = simulate(schedule, pp, vpp, nmb, costs, 0.0).makespan_s if p2p_s > 0 else makespan

    # ----- after the pipeline: DP gradient reduction, param all-gather, optimizer -----
    stage_params = stage_parameter_split(plan)
    dp_size = lay.dp.size
    shard_dense = {"optimizer": dp_size, "full": lay.dp_shard.size}.get(p.dp_sharding, 1)  # HSDP: shard group
    shard_expert = lay.expert_dp.size if p.dp_sharding in ("optimizer", "full") else 1
    opt_bytes = cal.ADAM_BYTES_PER_PARAM if t.optimizer == "adam" else 14
    hbm = spec.hbm_bw * cal.HBM_BW_EFFICIENCY
    post = []
    for rank in range(pp):
        sp_ = stage_params[rank]
        fwd_win = sum(q.f for q in parts[rank])
        bwd_win = sum(q.bi + q.bw for q in parts[rank])
        grad = ag = 0.0
        if p.dp_sharding == "full":
            if p.dp_replicate > 1:  # HSDP: all-reduce of the shard's grads over the replicas
                grad = coll.all_reduce(float(grad_elem * sp_.total / max(1, lay.dp_shard.size)), lay.dp_replicate, gpu)
        elif dp_size > 1 or lay.expert_dp.size > 1:
            gd, ge = float(grad_elem * sp_.dense), float(grad_elem * sp_.expert)
            if p.dp_sharding == "optimizer":
                grad = coll.reduce_scatter(gd, lay.dp, gpu) + coll.reduce_scatter(ge, lay.expert_dp, gpu)
                ag = coll.all_gather(2.0 * sp_.dense, lay.dp, gpu) + coll.all_gather(2.0 * sp_.expert, lay.expert_dp, gpu)
            else:
                grad = coll.all_reduce(gd, lay.dp, gpu) + coll.all_reduce(ge, lay.expert_dp, gpu)
        buckets = max(1, -(-sp_.total // max(cal.GRAD_BUCKET_PARAMS, 1_000_000 * dp_size)))
        if t.overlap_grad_reduce and grad > 0:
            grad = max(grad / buckets, grad - bwd_win / nmb)
        if t.overlap_param_gather and ag > 0:
            ag = max(ag / buckets, ag - fwd_win / nmb)
        held = sp_.dense / shard_dense + sp_.expert / shard_expert
        opt = held * opt_bytes / hbm
        post.append((grad + ag, opt))
    crit_post = max(range(pp), key=lambda i: post[i][0] + post[i][1])
    dp_post, opt_s = post[crit_post]
    iteration = makespan + dp_post + opt_s

    busy = res.stage_busy_s
    c = max(range(pp), key=lambda i: busy[i])
    tp_c = nmb * sum(q.tp for q in parts[c])
    cp_c = nmb * sum(q.cp for q in parts[c])
    ep_c = nmb * sum(q.ep for q in parts[c])
    dpin_c = nmb * sum(q.dp for q in parts[c])
    compute_c = busy[c] - tp_c - cp_c - ep_c - dpin_c
    bubble = max(0.0, makespan0 - busy[c])
    pp_comm = makespan - busy[c] - bubble
    breakdown = {"compute": compute_c, "tp_comm": tp_c, "cp_comm": cp_c, "ep_comm": ep_c,
                 "dp_comm": dpin_c + dp_post, "pp_comm": pp_comm, "bubble": bubble, "optimizer": opt_s}

    world = plan.world_size
    flops = model_flops_per_iteration(plan)
    tflops = flops / (iteration * world) / 1e12
    timeline: list[TimelineEvent] = []
    if record_timeline:
        timeline = list(res.events)
        for rank in range(pp):
            g, o = post[rank]
            if g > 0:
                timeline.append(TimelineEvent(stage=rank, kind="dp_comm", start_s=makespan, end_s=makespan + g))
            timeline.append(TimelineEvent(stage=rank, kind="optimizer", start_s=makespan + g, end_s=makespan + g + o))
    notes = [f"critical stage {c} of {pp}; {nmb} micro-batches; schedule {res.schedule or schedule}"]
    return ProjectionResult(
        mode=mode, iteration_time_s=iteration,
        tokens_per_sec_per_gpu=plan.tokens_per_iteration / (iteration * world),
        model_tflops_per_gpu=tflops, mfu=tflops * 1e12 / spec.peak_flops(t.precision), num_gpus=world,
        model_flops_per_iteration=flops, time_breakdown=breakdown, memory=estimate_memory(plan, margin=memory_margin),
        plan=plan, timeline=timeline, notes=notes)
