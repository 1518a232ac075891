"""FSDP (``parallel.dp_sharding = "full"``) communication of one decoder layer per micro-batch.

Per layer, the parameter all-gather (bf16; FP8 with ``fp8_param_gather``) in forward and again in
backward (unless ``fsdp_reshard_after_forward`` is ``never``) and the gradient reduce-scatter in
backward, prefetched: the exposed part is max(0, comm - that layer's compute) per pass
(:func:`fsdp_layer_exposed`).  With PP (torch pipelining: TorchTitan, AutoModel) the parameters are
gathered once per schedule (not resharded after forward by default) and the stage's gradients are
reduce-scattered at once in the schedule's ``REDUCE_GRAD`` action, joined to the compute stream:
exposed after the pipeline (the iteration step) -- where the stage module is the FSDP root
(``fsdp_pp_grad_sync = "schedule"``, TorchTitan).  Where it is not (``"microbatch"``: NeMo AutoModel's
MoE parallelizer), FSDP2's defaults run every micro-batch: per layer as above (gathered in each
forward after the previous backward resharded, reduce-scattered in each backward), plus the chunk-end
exposure of :func:`fsdp_microbatch_edges`.  Per MoE layer, the EP dispatcher's inter-node phases
share the NIC with the FSDP collectives crossing nodes (:func:`fsdp_ep_nic_sharing`).
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost.fp8 import mx_params_gathered_bf16
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.memory.params import layer_parameter_counts


@dataclass(frozen=True)
class FsdpBytes:
    """Bytes per element FSDP moves: the parameter all-gather (bf16; FP8 with ``fp8_param_gather``),
    the gradient reduce-scatter (fp32 with ``grad_reduce_in_fp32``, else bf16) and the expert
    gradients' reduce-scatter (``expert_grad_reduce_in_fp32``, None = as the others); ``expert_param``: the
    routed experts' all-gather (bf16 where ``training.bf16_linears`` holds ``experts``: torchao's float8 FSDP
    all-gather wraps only the converted ``Float8Linear`` weights, torchao ``float8/fsdp_utils.py``
    ``WeightWithDynamicFloat8CastTensor``; unconverted experts gather their bf16 parameters)."""

    param: float
    grad: float
    expert_grad: float
    expert_param: float = 0.0   # 0 = as ``param``


def fsdp_bytes(plan: Plan) -> FsdpBytes:
    """The element sizes of :class:`FsdpBytes` for ``plan`` (also those of the distributed optimizer's
    gradient reduce-scatter and parameter all-gather; Megatron's distributed optimizer gathers MXFP8 primary
    weights in BF16: ``cost/fp8.py`` :func:`mx_params_gathered_bf16`)."""
    t = plan.training
    param_elem = 1.0 if (t.fp8_param_gather and t.precision in ("fp8", "fp4")) else 2.0
    if plan.parallel.dp_sharding != "full" and mx_params_gathered_bf16(plan):
        param_elem = 2.0   # Megatron's MXFP8 weights: gathered in BF16, cast after (cost/fp8.py)
    g = 4.0 if t.grad_reduce_in_fp32 else 2.0
    ge = g if t.expert_grad_reduce_in_fp32 is None else (4.0 if t.expert_grad_reduce_in_fp32 else 2.0)
    pe_e = 2.0 if "experts" in t.bf16_linears else param_elem
    return FsdpBytes(param_elem, g, ge, pe_e)


def fsdp_reshards_after_forward(plan: Plan) -> bool:
    """Whether FSDP frees the gathered parameters after each forward (and gathers them again for the
    backward): ``fsdp_reshard_after_forward`` "always", or "default" without PP (TorchTitan
    ``get_fsdp_reshard_after_forward_policy``: False under PP)."""
    p = plan.parallel
    return p.fsdp_reshard_after_forward == "always" or (p.fsdp_reshard_after_forward == "default" and p.pp == 1)


def fsdp_unit_comm(plan: Plan, spec: GPUSpec, lay: Layout, moe: bool) -> tuple[float, float, float, float]:
    """Raw seconds of one decoder layer's FSDP units on one GPU: (all-gather of the non-expert
    parameters over the DP shard group, all-gather of the expert parameters over expert-DP,
    reduce-scatter of the non-expert gradients, reduce-scatter of the expert gradients): the layer's
    parameter counts per shard (``memory/params.py`` ``layer_parameter_counts``) times the bytes per
    parameter / gradient element of :func:`fsdp_bytes`, priced by ``cost/collectives.py``."""
    gpu = spec.name
    m, p = plan.model, plan.parallel
    b = fsdp_bytes(plan)
    pe, gd, ge = b.param, b.grad, b.expert_grad
    sp_ = layer_parameter_counts(m, p.tp, p.expert_tp, p.ep, moe)
    ag_e = coll.all_gather((b.expert_param or pe) * sp_.expert, lay.expert_dp, gpu) if sp_.expert else 0.0
    rs_e = coll.reduce_scatter(ge * sp_.expert, lay.expert_dp, gpu) if sp_.expert else 0.0
    return (coll.all_gather(pe * sp_.dense, lay.dp_shard, gpu), ag_e,
            coll.reduce_scatter(gd * sp_.dense, lay.dp_shard, gpu), rs_e)


def fsdp_layer_exposed(plan: Plan, lt: LayerTimes, spec: GPUSpec, lay: Layout, ep_raw: tuple[float, float],
                       moe: bool, pt: PassTimes) -> tuple[float, float]:
    """Exposed FSDP seconds of one layer per micro-batch (forward, backward), ``dp_sharding = "full"``
    (module doc): the all-gather prefetched behind the layer's forward, the reduce-scatter (and the
    re-gather when resharded after forward) behind its backward, their hidden part holding NCCL's SMs
    (``cost/contention.py``), plus :func:`fsdp_ep_nic_sharing` for an MoE layer.  Under torch
    pipelining with the stage module as FSDP root (``fsdp_pp_grad_sync = "schedule"``) the gather runs
    once per schedule (its exposure spread over the micro-batches) and the reduce-scatter after the
    pipeline (the iteration step)."""
    p = plan.parallel
    pp, nmb = p.pp, plan.num_microbatches
    units, arch = spec.num_sms, spec.arch
    reshard = fsdp_reshards_after_forward(plan)
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, spec, lay, moe)
    ag, rs = ag_d + ag_e, rs_d + rs_e
    if pp > 1 and p.fsdp_pp_grad_sync == "schedule":
        rs = 0.0
        if not reshard:   # one all-gather per schedule, behind the first micro-batch's forward
            hf = min(ag, pt.fwd_s)
            return (ag - hf + con.displaced(hf, con.NCCL_SMS, units, arch)) / nmb, 0.0
    bwd = (ag if reshard else 0.0) + rs
    hf, hb = min(ag, pt.fwd_s), min(bwd, pt.bwd_input_s + pt.bwd_weight_s)
    nf, nb = fsdp_ep_nic_sharing(plan, lt, spec, lay, ep_raw) if moe else (0.0, 0.0)
    return (ag - hf + con.displaced(hf, con.NCCL_SMS, units, arch) + nf,
            bwd - hb + con.displaced(hb, con.NCCL_SMS, units, arch) + nb)


def fsdp_ep_nic_sharing(plan: Plan, lt: LayerTimes, spec: GPUSpec, lay: Layout,
                        ep_raw: tuple[float, float]) -> tuple[float, float]:
    """Seconds one MoE layer's EP dispatch / combine is slowed (forward, backward) by the FSDP
    collectives of the same micro-batch that cross the same NICs, when both leave the scale-up domain.

    A GPU's NIC carries its EP dispatcher's inter-node traffic (DeepEP / HybridEP RDMA, or the
    all-to-all) and its FSDP all-gathers / reduce-scatters whose group spans nodes (the expert-DP
    group holds one GPU per node).  The EP phases are on the critical path (no EP overlap
    configured) and the FSDP collectives are issued where FSDP2 issues them:

    - forward: the next layer's all-gathers (its non-expert unit, then its experts' unit, serially on
      the all-gather stream) are issued once the host passes this layer's dispatch (the dispatcher
      waits on the host for the received-token counts), so they run during this layer's experts and
      meet its combine: the combine is slowed by what of the inter-node gathers is left when it starts,
      ``min(E_fwd / 2, max(0, ag_inter - experts forward))``;
    - backward: the experts' reduce-scatter is issued as soon as their backward ends, right before
      the dispatch's backward: ``min(E_bwd / 2, rs_experts)`` when the expert-DP group spans nodes.

    While both run the NIC is shared evenly (each at half rate), so the EP phase is delayed by the
    FSDP bytes that cross it.  DeepEP's README (Traffic isolation) recommends putting expert-parallel
    and other traffic on separate InfiniBand virtual lanes "to prevent interference"; no public
    figure of the interference exists, so the even share is the model's assumption."""
    if lay.ep.nodes <= 1 or not plan.model.is_moe:
        return 0.0, 0.0
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, spec, lay, True)
    d_inter, e_inter = lay.dp_shard.nodes > 1, lay.expert_dp.nodes > 1
    ag_end = (ag_d + ag_e) if e_inter else (ag_d if d_inter else 0.0)
    experts_f = lt.part("moe", "scope:moe").fwd_s
    f = min(ep_raw[0] / 2, max(0.0, ag_end - experts_f))
    b = min(ep_raw[1] / 2, rs_e) if e_inter else 0.0
    return f, b


def fsdp_microbatch_edges(plan: Plan, lt: LayerTimes, spec: GPUSpec, lay: Layout, first_moe: bool,
                          embedding: bool, head: bool = False) -> tuple[float, float]:
    """Seconds FSDP2 leaves exposed at the ends of one model chunk's forward and backward when it
    syncs every micro-batch (``parallel.fsdp_pp_grad_sync = "microbatch"``, pp > 1), on top of the
    per-layer prefetched exposure.

    - forward: the chunk's FSDP root orders the all-gather streams after the compute stream in its
      pre-forward (torch ``_fully_shard/_fsdp_state.py`` ``_root_pre_forward``:
      ``all_gather_stream.wait_stream(current_stream)``) and FSDP2 has no forward prefetch across
      units by default, so the first unit's gather waits: the embedding's (chunk holding it) and the
      first layer's non-expert parameters; the experts (their own ``fully_shard`` unit, gathered in
      their pre-forward) hide behind that layer's attention block and router;
    - backward: the root's post-backward final callback (``is_last_backward`` stays True)
      makes the compute stream wait for every reduce-scatter it issued
      (``_root_post_backward_final_callback``, ``FSDPParamGroup.finalize_backward``): the first
      layer's non-expert gradients (reduced after its whole backward) and the embedding's, and what
      of the experts' reduce-scatter (issued after the experts' backward) the layer's attention
      block and router backward do not cover;
    - an untied output layer (AutoModel shards ``lm_head`` outside ``model.model``, so it is an FSDP root
      of its own) waits for its gather in its own root pre-forward: exposed on the chunk holding the
      loss (its reduce-scatter, issued first in the backward, hides behind the chunk's backward).

    Returns (forward, backward) seconds, the first layer's per-layer exposure not subtracted."""
    gpu = spec.name
    m, p = plan.model, plan.parallel
    eb = fsdp_bytes(plan)
    pe, gd = eb.param, eb.grad
    ag_d, ag_e, rs_d, rs_e = fsdp_unit_comm(plan, spec, lay, first_moe)
    kind = "moe" if first_moe else "dense"
    a, r = lt.part(kind, "scope:attn"), lt.part(kind, "scope:moe_router")
    win_f = a.fwd_s + r.fwd_s
    win_b = a.bwd_input_s + a.bwd_weight_s + r.bwd_input_s + r.bwd_weight_s
    f = ag_d + max(0.0, ag_e - win_f)
    b = rs_d + max(0.0, rs_e - win_b)
    vocab = float(m.vocab_size * m.hidden_size // p.tp)   # the embedding's / output layer's shard
    if embedding:
        f += coll.all_gather(pe * vocab, lay.dp_shard, gpu)
        b += coll.reduce_scatter(gd * vocab, lay.dp_shard, gpu)
    if head and m.untie_embeddings_and_output_weights:
        f += coll.all_gather(pe * vocab, lay.dp_shard, gpu)
    return f, b
