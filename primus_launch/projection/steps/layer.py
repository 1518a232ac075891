"""Step 2: one transformer layer's communication per micro-batch, raw and left exposed, and the
per-layer recompute and offload terms (the cost models: ``cost/tp_comm.py``, ``cost/cp_comm.py``,
``cost/ep_comm.py``, ``cost/fsdp.py``, ``cost/recompute.py``, ``cost/offload.py``,
``cost/layer_collectives.py``; SM contention of what is hidden: ``cost/contention.py``).

Every pair is (forward, backward) seconds of one micro-batch on one GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.cost.cp_comm import cp_layer_comm, cp_ring, mamba_cp_comm
from primus_launch.projection.cost.ep_comm import (ep_exposed, ep_layer_comm, ep_walked, moe_layers_per_step,
                                                   walk_contention)
from primus_launch.projection.cost.fsdp import (FsdpBytes, fsdp_bytes, fsdp_ep_nic_sharing, fsdp_layer_exposed,
                                                fsdp_microbatch_edges, fsdp_reshards_after_forward, fsdp_unit_comm)
from primus_launch.projection.cost.offload import module_offload_exposed, module_offload_inert, offload_exposed
from primus_launch.projection.cost.recompute import recompute_modules_fwd
from primus_launch.projection.cost.tp_comm import cdmc_unordered, tp_exposed, tp_layer_comm
from primus_launch.projection.steps.setup import Setup

Pair = tuple[float, float]
ZERO: Pair = (0.0, 0.0)


@dataclass(frozen=True)
class LayerCosts:
    """One layer's communication terms (module doc).

    TP: ``tp_raw`` / ``tp`` of a dense layer, ``tp_moe_raw`` / ``tp_moe`` of a MoE layer (its own call
    list where ``tp_moe_own``, else the dense layer's); ``tp_async_lost``: Megatron's async backward
    overlap lost to ``CUDA_DEVICE_MAX_CONNECTIONS`` > 1 (``cost.tp_comm.cdmc_unordered``).
    CP: ``cp_raw``; on a ring (``cp_ring``) ``cp_hidden`` of it runs behind the attention core; ``cp``
    the exposed seconds, the SMs the hidden part holds included.
    EP (one MoE layer): ``ep_raw``; ``ep_overlapped`` after shared-expert / 1F1B overlap; ``ep`` with
    the SMs the hidden part holds (the combined-1F1B walk, ``ep_walked``, prices them itself, at
    ``ep_walk_contention`` of the compute rate lost, over ``ep_layers_per_step`` layers per step; 0
    where not walked).
    FSDP (``fsdp``: ``dp_sharding = "full"`` over more than one rank): ``fsdp_units`` per layer kind
    (``moe``) the raw (gather non-expert, gather experts, reduce-scatter non-expert, reduce-scatter
    experts); ``fsdp_dense`` / ``fsdp_moe`` exposed per layer; ``fsdp_ep_nic`` the MoE layer's EP phases
    slowed by FSDP traffic on the NIC; ``fsdp_edges`` the chunk-end exposure of a per-micro-batch sync
    keyed (first layer MoE, chunk holds the embedding, chunk holds the loss).
    ``embedding_tp`` / ``head_tp``: the embedding's and the output layer + loss's TP calls.
    ``recompute_fwd``: forward seconds selective / per-op recompute re-runs per layer kind (``moe``);
    ``offload``: exposed host-link seconds per offloaded layer kind."""

    tp_raw: Pair
    tp: Pair
    tp_moe_raw: Pair
    tp_moe: Pair
    tp_moe_own: bool
    tp_async_lost: bool
    cp_raw: Pair
    cp_ring: bool
    cp_hidden: Pair
    cp: Pair
    ep_raw: Pair
    ep_overlapped: Pair
    ep: Pair
    ep_walked: bool
    ep_walk_contention: float
    ep_layers_per_step: int
    fsdp: bool
    fsdp_bytes: FsdpBytes
    fsdp_reshard: bool
    fsdp_units: dict[bool, tuple[float, float, float, float]] = field(hash=False)
    fsdp_dense: Pair
    fsdp_moe: Pair
    fsdp_ep_nic: Pair
    fsdp_edges: dict[tuple[bool, bool, bool], Pair] = field(hash=False)
    embedding_tp: Pair
    head_tp: Pair
    recompute_fwd: dict = field(hash=False)   # bool (MoE or not) -> seconds; a hybrid stack: its symbol -> seconds
    offload: dict[bool, Pair] = field(hash=False)
    #: a hybrid stack's Mamba layer's CP all-to-alls, all exposed (cost/cp_comm.py mamba_cp_comm)
    cp_mamba: Pair = (0.0, 0.0)

    @property
    def cp_behind_attention(self) -> Pair:
        """CP seconds the attention core does not hide, before the SMs the hidden part holds."""
        return self.cp_raw[0] - self.cp_hidden[0], self.cp_raw[1] - self.cp_hidden[1]


def layer_costs(s: Setup) -> LayerCosts:
    """The :class:`LayerCosts` of ``s`` (module doc)."""
    plan, spec, lay, lt, attn = s.plan, s.spec, s.lay, s.lt, s.attn
    m, p, t = plan.model, plan.parallel, plan.training
    units, arch = spec.num_sms, spec.arch

    tp_raw = tp_layer_comm(plan, spec, lay)
    tp = tp_exposed(plan, tp_raw, lt, spec, lay)
    # a MoE layer's TP calls: TorchTitan's differ from its dense layer's (layer_collectives)
    tp_moe_raw = tp_layer_comm(plan, spec, lay, moe=True) if m.is_moe else tp_raw
    tp_moe = tp_exposed(plan, tp_moe_raw, lt, spec, lay) if m.is_moe else tp

    cp_raw = cp_layer_comm(plan, spec, lay)
    cp_f, cp_b = cp_raw
    ring = cp_ring(plan)
    hid_f = hid_b = 0.0
    if ring:
        # ring P2P hidden behind the attention core; the hidden part holds NCCL's P2P channels
        # (cost/contention.py: NCCL_SMS inside a scale-up domain, one channel per NIC (2) across)
        n_p2p = con.NCCL_SMS if lay.cp.nodes <= 1 else 2
        hid_f, hid_b = min(cp_f, attn.fwd_s), min(cp_b, attn.bwd_input_s)
        cp_f = cp_f - hid_f + con.displaced(hid_f, n_p2p, units, arch)
        cp_b = cp_b - hid_b + con.displaced(hid_b, n_p2p, units, arch)

    ep_raw = ep_layer_comm(plan, spec, lay)
    ep_over = ep_exposed(plan, ep_raw, lt, spec, tp_moe)
    ep_f, ep_b = ep_over
    walked = ep_walked(plan, lt)
    if not walked:   # the combined-1F1B walk slows its compute nodes itself
        n_ep = con.ep_sms(t.moe_token_dispatcher, lay.ep.nodes, t.moe_dispatcher_num_sms)
        ep_f += con.displaced(ep_raw[0] - ep_f, n_ep, units, arch)
        ep_b += con.displaced(ep_raw[1] - ep_b, n_ep, units, arch)

    fsdp = p.dp_sharding == "full" and lay.dp_shard.size > 1
    sync_mb = fsdp and p.pp > 1 and p.fsdp_pp_grad_sync == "microbatch"
    kinds = (False, True) if m.is_moe else (False,)
    units_comm = {moe: fsdp_unit_comm(plan, spec, lay, moe) for moe in kinds} if fsdp else {}
    fsdp_dense = fsdp_moe = nic = ZERO
    if fsdp:
        fsdp_dense = fsdp_layer_exposed(plan, lt, spec, lay, ep_raw, False, lt.dense_layer)
        if m.is_moe and lt.moe_layer is not None:
            fsdp_moe = fsdp_layer_exposed(plan, lt, spec, lay, ep_raw, True, lt.moe_layer)
        if m.is_moe:
            nic = fsdp_ep_nic_sharing(plan, lt, spec, lay, ep_raw)
    edges = ({(moe, emb, head): fsdp_microbatch_edges(plan, lt, spec, lay, moe, emb, head)
              for moe in kinds for emb in (False, True) for head in (False, True)} if sync_mb else {})

    # embedding / head / loss TP communication, (forward, backward) per micro-batch
    # (cost/layer_collectives.py: the vocab-parallel embedding's all-reduce or reduce-scatter, the
    # output layer's input-gradient all-reduce or its SP all-gathers and reduce-scatter -- TorchTitan's
    # final norm weight's all-reduce too --, the vocab-parallel cross-entropy's three fp32 all-reduces)
    tpc = lc.tp_calls(plan)
    emb_tp = lc.priced([c for c in tpc if c.where == "embedding"], spec.name, {"tp": lay.tp})
    head_tp = lc.priced([c for c in tpc if c.where in ("head", "loss")], spec.name, {"tp": lay.tp})

    rec = {False: recompute_modules_fwd(plan, lt, "dense"),
           True: recompute_modules_fwd(plan, lt, "moe") if m.is_moe else 0.0}
    if m.is_hybrid:   # per layer symbol (steps/stage.py sums them over the chunk's symbols)
        rec = {sym: recompute_modules_fwd(plan, lt, sym) for sym in ("M", "*", "-", "E")}
    # whole layers (the first of each chunk) or, without them, the named modules of every layer (the
    # memory model's rule: megatron-core offloads modules only when no layer is offloaded)
    off = ({moe: offload_exposed(plan, lt, spec, moe) for moe in kinds} if t.offload.activation_layers else
           {moe: module_offload_exposed(plan, lt, spec, moe) for moe in kinds}
           if t.offload.activation_modules and not module_offload_inert(plan)
           else {})
    return LayerCosts(
        tp_raw=tp_raw, tp=tp, tp_moe_raw=tp_moe_raw, tp_moe=tp_moe,
        tp_moe_own=m.is_moe and lc.layer_calls(plan, moe=True) != lc.layer_calls(plan),
        tp_async_lost=cdmc_unordered(plan, spec),
        cp_raw=cp_raw, cp_ring=ring, cp_hidden=(hid_f, hid_b), cp=(cp_f, cp_b),
        ep_raw=ep_raw, ep_overlapped=ep_over, ep=(ep_f, ep_b), ep_walked=walked,
        ep_walk_contention=walk_contention(plan, spec) if walked else 0.0,
        ep_layers_per_step=moe_layers_per_step(plan) if walked else 0,
        fsdp=fsdp, fsdp_bytes=fsdp_bytes(plan), fsdp_reshard=fsdp_reshards_after_forward(plan), fsdp_units=units_comm,
        fsdp_dense=fsdp_dense, fsdp_moe=fsdp_moe, fsdp_ep_nic=nic, fsdp_edges=edges,
        embedding_tp=emb_tp, head_tp=head_tp, recompute_fwd=rec, offload=off,
        cp_mamba=mamba_cp_comm(plan, spec, lay))
