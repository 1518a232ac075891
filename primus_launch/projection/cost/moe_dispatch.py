"""The collectives Megatron-Core's MoE token dispatchers issue per MoE layer and micro-batch, one
entry per call, read from megatron-core 0.16.1 ``transformer/moe/token_dispatcher.py`` (and
``tensor_parallel/mappings.py`` for each call's autograd backward, ``transformer/moe/fused_a2a.py``
for the flex backends).  Sizes follow :mod:`collectives`' convention (all-gather: the gathered
OUTPUT; reduce-scatter: the INPUT; all-to-all: what one rank sends).

Per rank the MoE layer holds ``T`` tokens (micro-batch x sequence / CP / TP: Megatron requires
sequence parallelism for MoE with TP), hidden size ``h``, ``E`` experts, top-``k`` routing, EP size
``ep``, expert-TP size ``etp`` and the ``TP x EP`` group ``n = etp * ep`` (``pg_collection.tp_ep``).
A latent MoE (``moe_latent_size`` l) dispatches and combines l-wide tokens: ``h`` below is l (megatron-core
``moe/moe_layer.py``: ``fc1_latent_proj`` before ``dispatch_preprocess``, ``fc2_latent_proj`` after
``combine_postprocess``; ``token_dispatcher.py`` ``hidden_dim = config.moe_latent_size or config.hidden_size``).
``pb`` is the bytes of the router's probabilities: the router's logits dtype, i.e. the activation
dtype (2) -- megatron's ``--moe-router-dtype fp32`` would make it 4, but the plan has no field for it
(``--moe-router-dtype`` is reported as not modelled by the Megatron reader).  Sizes are the balanced
ones (every rank receives as many routed tokens as it sends); :func:`dispatcher_times` prices the
busiest rank's (``cost/moe_imbalance.py``).

``allgather`` (``MoEAllGatherTokenDispatcher``), over ``tp_ep_group``:
  forward  ``token_dispatch``: all-gather of the routing map (bool, ``n T E`` bytes, under
           ``no_grad``), of the probs (``n T E pb``) and of the hidden states (``n T h 2``);
           ``token_combine``: reduce-scatter of the expert output cast to the probs' dtype
           (``n T h pb``);
  backward (``_GatherFromSequenceParallelRegion`` / ``_ReduceScatterToSequenceParallelRegion``):
           reduce-scatter of the probs' and of the hidden states' gradients, all-gather of the
           combine's gradient (probs' dtype); the routing map has no gradient.
``alltoall`` (Megatron ``MoEAlltoAllTokenDispatcher``):
  forward  ``preprocess``: all-gather of the per-expert token counts over ``tp_ep_group`` (int64,
           ``n E 8`` bytes, no gradient); ``token_dispatch``: all-to-all over the EP group of the
           permuted tokens (``T k h 2``) and of their probs (``T k pb``); with ``etp > 1``
           ``dispatch_postprocess`` all-gathers both over the expert-TP group (``etp T k h 2``,
           ``etp T k pb``) and ``combine_preprocess`` reduce-scatters the expert output in the probs'
           dtype (``etp T k h pb``); ``token_combine``: all-to-all of the output (``T k h 2``);
  backward ``mappings._AllToAll`` is its own mirror (an all-to-all of each forward all-to-all's
           gradient: tokens, probs, output), the expert-TP all-gathers become reduce-scatters and
           vice versa; the counts have no gradient.
TorchTitan (0.3.0 ``models/common/token_dispatcher.py`` ``AllToAllTokenDispatcher``, EP group):
  forward  an all-to-all of the per-expert token counts (int64, ``E 8`` bytes sent, under
           ``no_grad``), of the reordered tokens (``T k h 2``) and the combine's (``T k h 2``); the
           routing scores multiply the outputs locally (no probs exchange); backward: the two token
           all-to-alls mirrored.
``deepep`` / ``hybridep`` (``MoEFlexTokenDispatcher``, ``fused_a2a.FusedDispatch`` /
  ``FusedCombine``, ``HybridEPDispatch`` / ``HybridEPCombine``): one fused dispatch and one fused
  combine in forward, whose backwards are a combine and a dispatch: priced by
  :func:`collectives.deepep_dispatch` on ``h 2`` bytes per token (DeepEP: the top-k indices and fp32 weights
  that ride along, ``12 k`` bytes, are below 1 % of a token at ``h >= 2048`` and not priced; HybridEP sends
  the fp32 probabilities of every expert of the destination NVLink domain with each token copy of the
  forward dispatch and, as their gradient, of the backward's combine -- :data:`PROBS_CALLS`,
  :func:`collectives.hybridep_probs_bytes`: 256 B on a 2 KB latent token for Nemotron 3 Super at EP 64 --
  and its forward dispatch all-gathers the ``[T, E]`` routing map, :func:`collectives.hybridep_routing_map_s`); HybridEP
  adds its torch API's own time per call (:func:`collectives.hybridep_api_overhead`) unless CUDA graphs
  capture the dispatcher, and runs its combine at the plan's ``moe_hybridep_combine_chunk`` tokens per chunk
  (None: DeepEP's current default, 64; :mod:`cost.hybridep_chunk`); DeepEP across NVLink domains is bounded below by its V1 internode kernel's
  forwarding warps at the recipe's ``--moe-deepep-num-sms`` (:func:`collectives.deepep_forward_bw`).
  Only the forward dispatch builds the routing metadata: the backward's dispatch (``HybridEPCombine.
  backward``: ``dispatch_with_permute(hidden=grad_x, handle=handle, num_permuted_tokens=...)``, megatron-core
  0.16.1 / Megatron-LM 2edffad ``fused_a2a.py``) reuses the forward's handle, so DeepEP hybrid-ep
  (``deep_ep/hybrid_ep_buffer.py`` @7febc6e ``dispatch_with_permute``: ``if handle is None:`` ...
  ``metadata_preprocessing``) skips the routing-map all-gather (``executor.cu`` ``allgather_routing_map``:
  an NCCL ``all_gather_into_tensor`` of the ``[T, E]`` bool map over the EP group) and the preprocessing
  kernel; it is entered as ``"dispatch (cached handle)"`` and pays the handle path's API time (at most the
  dispatch's, across IB the combine's: :func:`collectives.hybridep_api_overhead`).
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.hardware.placement import GroupPlacement, place

ACT_BYTES = 2        # bf16 / fp16 activations
PROBS_BYTES = 2      # router probs in the activation dtype (no plan field for --moe-router-dtype)
HANDLE_DISPATCH = "dispatch (cached handle)"
"""The flex dispatcher's backward dispatch (the combine's gradient): a dispatch on the forward's handle, which
skips the routing metadata (module doc; :func:`collectives.hybridep_api_overhead` prices its API)."""
PROBS_CALLS = (("fwd", "dispatch"), ("bwd", "combine"))
"""The flex dispatcher's calls that carry fp32 routing probabilities under HybridEP (module doc): the forward
dispatch (``HybridEPDispatch.forward``: ``probs=probs``) and the backward's combine (``HybridEPDispatch.backward``:
``combine_with_unpermute(hidden=grad_x, probs=grad_probs, ...)``), megatron-core ``fused_a2a.py`` (Megatron-LM
d98e8a6)."""


@dataclass(frozen=True)
class Collective:
    """One collective call of a token dispatcher (sizes by :mod:`collectives`' convention)."""

    op: str          # all_gather | reduce_scatter | all_to_all | flex_dispatch
    nbytes: float    # flex_dispatch: tokens sent by this rank (bytes per token in ``what``)
    group: str       # tp_ep | ep | expt_tp
    what: str


def dispatcher_collectives(plan: Plan) -> tuple[tuple[Collective, ...], tuple[Collective, ...]]:
    """(forward, backward) collectives of one MoE layer's token dispatcher for one micro-batch on
    one rank (module doc); empty without experts or with EP = 1."""
    p, m = plan.parallel, plan.model
    if not m.is_moe or p.ep <= 1:
        return (), ()
    T = float(plan.training.micro_batch_size * m.seq_length) / p.cp / p.tp
    h, E, k = float(m.expert_hidden), float(m.num_experts), float(m.moe_router_topk)   # l-wide tokens of a latent MoE
    etp, ep = p.expert_tp, p.ep
    n = etp * ep
    a, pb = ACT_BYTES, PROBS_BYTES
    d = plan.training.moe_token_dispatcher
    C = Collective
    if d == "allgather":
        fwd = (C("all_gather", n * T * E, "tp_ep", "routing map (bool)"),
               C("all_gather", n * T * E * pb, "tp_ep", "probs"),
               C("all_gather", n * T * h * a, "tp_ep", "hidden states"),
               C("reduce_scatter", n * T * h * pb, "tp_ep", "expert output (combine)"))
        bwd = (C("reduce_scatter", n * T * E * pb, "tp_ep", "probs grad"),
               C("reduce_scatter", n * T * h * a, "tp_ep", "hidden states grad"),
               C("all_gather", n * T * h * pb, "tp_ep", "expert output grad (combine)"))
        return fwd, bwd
    if d in ("deepep", "hybridep"):
        # tokens x etp: the flex group is TP x EP with every token sent to each expert-TP rank
        fwd = (C("flex_dispatch", T * etp, "ep", "dispatch"), C("flex_dispatch", T * etp, "ep", "combine"))
        # backward: the dispatch's is a combine, the combine's a dispatch on the forward's handle (module doc)
        bwd = (C("flex_dispatch", T * etp, "ep", "combine"),
               C("flex_dispatch", T * etp, "ep", HANDLE_DISPATCH))
        return fwd, bwd
    Tk = T * k
    if plan.framework == "torchtitan":
        fwd = (C("all_to_all", E * 8, "ep", "tokens per expert (int64)"),
               C("all_to_all", Tk * h * a, "ep", "reordered tokens"),
               C("all_to_all", Tk * h * a, "ep", "expert output (combine)"))
        bwd = (C("all_to_all", Tk * h * a, "ep", "combine grad"), C("all_to_all", Tk * h * a, "ep", "tokens grad"))
        return fwd, bwd
    fwd = [C("all_gather", n * E * 8, "tp_ep", "tokens per expert (int64)"),
           C("all_to_all", Tk * h * a, "ep", "permuted tokens"),
           C("all_to_all", Tk * pb, "ep", "permuted probs")]
    bwd = [C("all_to_all", Tk * h * a, "ep", "combine grad")]
    if etp > 1:
        fwd += [C("all_gather", etp * Tk * h * a, "expt_tp", "tokens"),
                C("all_gather", etp * Tk * pb, "expt_tp", "probs"),
                C("reduce_scatter", etp * Tk * h * pb, "expt_tp", "expert output")]
        bwd += [C("all_gather", etp * Tk * h * pb, "expt_tp", "expert output grad"),
                C("reduce_scatter", etp * Tk * h * a, "expt_tp", "tokens grad"),
                C("reduce_scatter", etp * Tk * pb, "expt_tp", "probs grad")]
    fwd.append(C("all_to_all", Tk * h * a, "ep", "expert output (combine)"))
    bwd += [C("all_to_all", Tk * h * a, "ep", "permuted tokens grad"),
            C("all_to_all", Tk * pb, "ep", "permuted probs grad")]
    return tuple(fwd), tuple(bwd)


def _group(name: str, plan: Plan, ep_pl: GroupPlacement) -> GroupPlacement:
    """Placement of a dispatcher group under Megatron's expert rank order (expert-TP innermost,
    then EP; ``hardware/placement.py``): EP is the layout's; TP x EP and expert-TP are contiguous."""
    etp = plan.parallel.expert_tp
    if name == "ep":
        return ep_pl
    g = ep_pl.gpus_per_node
    return place(etp * plan.parallel.ep, 1, g) if name == "tp_ep" else place(etp, 1, g)


def dispatcher_times(plan: Plan, gpu: str, ep_pl: GroupPlacement, busiest_rank: bool = True,
                     insitu: bool = True, api: bool = True, forward: bool = True) -> tuple[float, float]:
    """Raw (forward, backward) seconds of one MoE layer's token dispatcher per micro-batch: the sum
    of :func:`dispatcher_collectives` priced by :mod:`collectives` (``ep_pl``: the EP group), for the
    busiest EP rank: each all-to-all / flex dispatch ends when the rank that receives the most routed
    tokens has them, ``1 + delta`` times the balanced volume (:mod:`cost.moe_imbalance`, by the router's
    mode).  ``busiest_rank=False`` / ``insitu=False`` / ``api=False`` / ``forward=False``: without that factor /
    with DeepEP and HybridEP at their isolated benchmarks' RDMA rate / without HybridEP's per-call torch-API
    time / without DeepEP V1's internode forwarder bound (:func:`collectives.deepep_forward_bw`, at the
    recipe's ``training.moe_dispatcher_num_sms``) (the explanation's shares of the four terms).  HybridEP's API time is left out where CUDA graphs capture
    the dispatcher (``framework.graph_scopes`` holds ``moe``: Megatron runs HybridEP sync-free there)."""
    from primus_launch.projection.cost.framework import graph_scopes
    from primus_launch.projection.cost.hybridep_chunk import effective_chunk
    from primus_launch.projection.cost.moe_imbalance import forced_round_robin, plan_imbalance

    fwd, bwd = dispatcher_collectives(plan)
    busiest = 1.0 + (plan_imbalance(plan).delta if busiest_rank else 0.0)
    api = api and "moe" not in graph_scopes(plan)
    m = plan.model
    out = []
    for phase, calls in (("fwd", fwd), ("bwd", bwd)):
        s = 0.0
        for c in calls:
            pl = _group(c.group, plan, ep_pl)
            if c.op == "flex_dispatch":
                s += coll.deepep_dispatch(max(1, int(c.nbytes)), float(m.expert_hidden * ACT_BYTES), pl, gpu,
                                          m.num_experts, m.moe_router_topk, m.moe_router_num_groups or 1,
                                          m.moe_router_group_topk or 1, plan.training.moe_token_dispatcher,
                                          insitu, c.what, api, plan.training.moe_dispatcher_num_sms or 0, forward,
                                          forced_round_robin(plan),
                                          effective_chunk(plan.training.moe_hybridep_combine_chunk),
                                          (phase, c.what) in PROBS_CALLS)
            else:
                s += getattr(coll, c.op)(c.nbytes, pl, gpu)
        out.append(s * busiest)
    return out[0], out[1]
