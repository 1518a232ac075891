"""Context-parallel communication of one transformer layer, raw seconds per micro-batch.

By ``parallel.cp_comm_type`` (``T`` = tokens of one rank, K,V / Q / O elements per token of the
rank's attention heads; MLA: K = the nope + rope head dims, V its own):

- ``p2p`` (Megatron + TE ring attention): K,V sent around the CP ring, ``cp - 1`` steps, in forward;
  K,V and their gradients in backward; overlapped with the attention core by the caller
  (exposed = max(0, comm - attention)); ``a2a+p2p`` priced as ``p2p`` (a warning says so);
- ``a2a`` (Ulysses): all-to-alls of Q, K, V before and of O after the attention, and their gradients,
  not overlapped;
- ``allgather``: TE's ``AttnFuncWithCPAndKVAllGather``: K and V all-gathered apart in forward,
  gathered again in backward, dK, dV reduce-scattered (call by call in :mod:`cost.layer_collectives`),
  not overlapped;
- TorchTitan (PyTorch ring attention, ``cost/context_parallel.py``): the K,V all-gather (rotate method
  ``allgather``) or per-step rotation (``p2p``) in forward and again in backward, plus the per-step
  rotation of the fp32 dK,dV in backward (``_RotateMethod.ALL_TO_ALL``), overlapped with the
  attention core like ``p2p``.

A hybrid stack's Mamba layers (megatron-core 0.16.1 ``ssm/mamba_context_parallel.py``) run their own all-to-alls
whatever ``cp_comm_type`` is: :func:`mamba_cp_comm` (``cost/mamba.py`` module doc, Context parallelism).
"""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout


def cp_ring(plan: Plan) -> bool:
    """Whether the CP exchange runs as a ring beside the attention core (module doc): Megatron's
    ``p2p`` / ``a2a+p2p``, or TorchTitan's ring attention with either rotate method."""
    p = plan.parallel
    return p.cp_comm_type in ("p2p", "a2a+p2p") or (plan.framework == "torchtitan" and p.cp_comm_type == "allgather")


def cp_layer_comm(plan: Plan, spec: GPUSpec, lay: Layout) -> tuple[float, float]:
    """Raw context-parallel seconds of one layer (forward, backward) by ``cp_comm_type`` (module doc)."""
    p = plan.parallel
    if p.cp <= 1:
        return 0.0, 0.0
    gpu = spec.name
    m = plan.model
    T = lc.rank_tokens(plan)
    if m.multi_latent_attention:
        kv_elems = m.num_attention_heads // p.tp * (m.qk_head_dim + m.qk_pos_emb_head_dim + m.v_head_dim)
        q_elems = o_elems = m.num_attention_heads // p.tp * m.v_head_dim
    else:
        kv_elems = 2 * max(1, m.kv_heads // p.tp) * m.kv_channels
        q_elems = o_elems = max(1, m.num_attention_heads // p.tp) * m.kv_channels
    if p.cp_comm_type == "a2a":
        one = (coll.all_to_all(float(T * (q_elems + kv_elems) * 2), lay.cp, gpu)
               + coll.all_to_all(float(T * o_elems * 2), lay.cp, gpu))
        return one, one
    step = coll.p2p(float(T * kv_elems * 2), lay.cp.nodes > 1, gpu)
    if plan.framework == "torchtitan":
        # PyTorch ring attention (cost/context_parallel.py): K,V rotate by one all-gather (rotate
        # method allgather) or per step (alltoall), in forward and again in backward; the fp32 dK,dV
        # rotate per step (_RotateMethod.ALL_TO_ALL) in backward
        kv = (coll.all_gather(float(T * p.cp * kv_elems * 2), lay.cp, gpu) if p.cp_comm_type == "allgather"
              else (p.cp - 1) * step)
        return kv, kv + (p.cp - 1) * coll.p2p(float(T * kv_elems * 4), lay.cp.nodes > 1, gpu)
    if p.cp_comm_type == "allgather":
        # TE's AttnFuncWithCPAndKVAllGather: K and V all-gathered apart in forward, gathered again
        # in backward, dK and dV reduce-scattered (cost/layer_collectives.py)
        return lc.priced(lc.cp_calls(plan), gpu, {"cp": lay.cp})
    return (p.cp - 1) * step, (p.cp - 1) * 2 * step


def mamba_cp_comm(plan: Plan, spec: GPUSpec, lay: Layout) -> tuple[float, float]:
    """Raw seconds (forward, backward) of one Mamba layer's context-parallel all-to-alls (megatron-core 0.16.1
    ``ssm/mamba_context_parallel.py``): ``pre_conv_ssm``'s 5 (z, x, B, C, dt of ``in_proj``'s output, [T, b, w] ->
    [cp T, b, w / cp]) and ``post_conv_ssm``'s 1 (the scan's output back), each :func:`collectives.all_to_all` of
    ``cost.mamba.cp_all_to_all_bytes`` over the CP group, in line on the compute stream (nothing overlaps them);
    the backward runs the same six on the gradients (``tensor_parallel.all_to_all``'s ``_AllToAll.backward``).
    (0, 0) without CP or without Mamba layers."""
    from primus_launch.projection.cost.mamba import cp_all_to_all_bytes

    p, m = plan.parallel, plan.model
    if p.cp <= 1 or not m.is_hybrid or "M" not in (m.hybrid_pattern or ""):
        return 0.0, 0.0
    one = sum(coll.all_to_all(b, lay.cp, spec.name) for b in cp_all_to_all_bytes(m, lc.rank_tokens(plan), p.tp, p.cp))
    return one, one
