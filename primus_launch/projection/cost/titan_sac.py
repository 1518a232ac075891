"""TorchTitan's per-op selective activation checkpointing (SAC): the forward GEMM seconds it re-runs in a block's
backward.

Rule (torchtitan ``distributed/activation_checkpoint.py`` ``SelectiveAC``: "Save all compute/comm ops, except every
second mm/linear"; ``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``): every second ``aten.mm`` of the
block's forward in program order (:func:`titan_block_mms`) plus the MoE router gate, each at
``compute.gemm_time`` on the plan's GEMM format.

The EP exchanges of an MoE block (:func:`op_sac_keeps_ep_a2a`): the save list holds
``torch.ops._c10d_functional.all_to_all_single.default``.  TorchTitan 0.3.0's ``AllToAllTokenDispatcher``
(``models/common/token_dispatcher.py`` ``_token_count_exchange`` / ``_dispatch_token_exchange`` /
``_combine_token_exchange``) calls that functional op when compiling (``torch.compiler.is_compiling()``) or when
``parallelism.spmd_backend`` is not ``spmd_types``; eager under the default ``spmd_types`` it calls spmd_types'
``all_to_all`` (0.2.3 ``_collectives.py`` ``_AllToAllStack`` / ``_AllToAllUneven``: ``torch.split`` +
``torch.distributed.all_to_all`` = ``c10d.alltoall_`` + ``torch.cat``), none of which is on the list, so the policy
returns PREFER_RECOMPUTE for all three forward exchanges (the per-expert counts and the two token exchanges)
and the block's backward re-runs them before its own two gradient all-to-alls (traced with torchtitan's
``SelectiveAC`` on a gloo group, torch 2.13: 3 ``c10d.alltoall_`` in the forward, 5 in the backward;
``tests/test_titan_sac_all_to_all.py``).  The backward of every MoE layer then adds the layer's forward EP
seconds, ``ep_f = sum of the forward dispatcher collectives`` (``cost/moe_dispatch.py``: ``E 8`` + ``2 T k h 2``
bytes per rank at the busiest rank's factor, exposed as ``steps/layer.py`` prices it): ``steps/stage.py``.
The memory side is :func:`memory.titan.layer_activation_bytes` ``a2a_rows`` (:func:`op_sac_a2a_rows`).
"""

from __future__ import annotations

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost.compute import gemm_time
from primus_launch.projection.cost.layer_ops import LayerOps


def titan_block_mms(m: ModelArch, T: int, t: int, moe: bool) -> list[tuple[str, int, int, int]]:
    """The ``aten.mm`` calls of one TorchTitan transformer block's forward, in program order, as
    ``(name, M, N, K)`` with TP sharding applied (torchtitan 0.3.0: attention ``FusedQKVLinear`` =
    one ``wqkv`` mm, SDPA, then ``wo``; ``FeedForward``: ``w2(silu(w1(x)) * w3(x))`` = ``w1, w3,
    w2``; DeepSeek-V3 MLA: ``wq`` (or ``wq_a, wq_b``), ``wkv_a, wkv_b``, ``wo``; MoE: the shared
    experts' ``w1, w3, w2``, the routed experts run ``torch._grouped_mm``, not ``aten.mm``).  Checked
    against torchtitan's own ``SelectiveAC`` decisions on its llama3 block
    (``tests/test_cost_model.py``)."""
    h = m.hidden_size
    a = max(1, m.num_attention_heads // t)
    out: list[tuple[str, int, int, int]] = []
    if m.multi_latent_attention:
        dqk, dr, dv = m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim
        if m.q_lora_rank:
            out += [("wq_a", T, m.q_lora_rank, h), ("wq_b", T, a * (dqk + dr), m.q_lora_rank)]
        else:
            out.append(("wq", T, a * (dqk + dr), h))
        out += [("wkv_a", T, m.kv_lora_rank + dr, h), ("wkv_b", T, a * (dqk + dv), m.kv_lora_rank),
                ("wo", T, h, a * dv)]
    else:
        d, g = m.kv_channels, max(1, m.kv_heads // t)
        out += [("wqkv", T, (a + 2 * g) * d, h), ("wo", T, h, a * d)]
    f = (m.moe_shared_expert_intermediate_size if moe else m.ffn_hidden_size) // t
    if f > 0:
        out += [("w1", T, f, h)] + ([("w3", T, f, h)] if m.swiglu else []) + [("w2", T, h, f)]
    return out


def op_sac_recompute_fwd(acc: LayerOps, m: ModelArch, T: int, t: int, moe: bool) -> float:
    """Forward GEMM seconds TorchTitan's per-op SAC re-runs in the backward of one block: every
    second ``aten.mm`` of the block's forward (``torchtitan/distributed/activation_checkpoint.py``
    ``SelectiveAC``: "Save all compute/comm ops, except every second mm/linear"; the same rule in
    ``models/llama3/infra/parallelize.py`` ``_custom_policy`` since 2024) and the MoE router gate,
    whose shape is always recomputed (``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``).
    Attention outputs are saved (SDPA ops are in the save list), the rest is ``non_matmul``."""
    fmt = acc.fmt if acc.recipe else "bf16"
    tot = 0.0
    for i, (_, mm, n, k) in enumerate(titan_block_mms(m, T, t, moe), start=1):
        if i % 2 == 0:
            tot += gemm_time(mm, n, k, acc.gpu, "bf16", 1, fmt)
    if moe:
        tot += gemm_time(T, m.num_experts, m.hidden_size, acc.gpu, "bf16", 1, "bf16")
    return tot * acc.slow




def op_sac_keeps_ep_a2a(plan: Plan) -> bool:
    """Whether TorchTitan's per-op SAC keeps an MoE block's EP token all-to-all outputs (module doc): False only for
    the alltoall dispatcher sending with the c10d collective (``training.moe_a2a_collective``: torchtitan 0.3's
    ``spmd_types`` backend) in an eager block; a compiled block traces the functional ``all_to_all_single``, which
    is on the save list."""
    t = plan.training
    return not (t.moe_a2a_collective == "c10d" and t.moe_token_dispatcher == "alltoall" and not t.compile)


def op_sac_a2a_rows(plan: Plan) -> float:
    """Rows of ``h`` per token of an EP rank that TorchTitan's per-op SAC keeps from an MoE block's two EP token
    exchanges (:func:`memory.titan.layer_activation_bytes` ``a2a_rows``): 0 where it keeps neither
    (:func:`op_sac_keeps_ep_a2a`); ``2 k`` for the all-to-all dispatcher (``all_to_all_single`` sends every
    (token, expert) pair: ``T k`` dispatched and ``T k`` combined rows); ``d + 1`` for DeepEP.

    DeepEP (pytorch/torchtitan c0c0bf965, March 2026, ``distributed/deepep/deepep.py``; ``models/deepseek_v3/
    parallelize.py`` adds ``torch.ops.deepep.dispatch`` / ``combine`` to the op-SAC save list with the deepep
    backend): ``dispatch`` returns ``recv_x [num_recv_tokens, h]``, "the number of unique tokens received" -- a
    token once per destination rank, ``_permute_tokens`` then repeats it per local expert (``index_select``,
    recomputed) -- and ``combine`` returns the rank's own ``[T, h]``.  ``d`` = the expected EP ranks one token's
    top-k experts fall on (:mod:`cost.moe_routing`, contiguous blocks of ``E / ep`` experts): under
    ``debug.moe_force_load_balance`` TorchTitan's round robin (``models/common/moe/moe.py``
    ``_debug_force_load_balance_routing``: ``arange(T k).reshape(T, k) % E``, the same rule as
    :func:`cost.moe_routing.round_robin_units_hit`), else balanced group-limited routing
    (:func:`cost.moe_routing.expected_units_hit`)."""
    from primus_launch.projection.cost.moe_routing import expected_units_hit, round_robin_units_hit

    m, t = plan.model, plan.training
    if not op_sac_keeps_ep_a2a(plan) or not m.is_moe:
        return 0.0
    k = m.moe_router_topk
    if t.moe_token_dispatcher != "deepep":
        return 2.0 * k
    E = m.num_experts
    u = max(1, E // max(1, plan.parallel.ep))
    if t.moe_router_force_load_balancing:
        d = round_robin_units_hit(E, k, u)
    else:
        d = expected_units_hit(E, k, u, m.moe_router_num_groups or 1, m.moe_router_group_topk or 1)
    return d + 1.0


def op_sac_reruns_ep_forward(plan: Plan) -> bool:
    """Whether a TorchTitan plan's per-op SAC re-runs every MoE layer's forward EP exchanges in its backward (module
    doc): per-op recompute, experts over more than one EP rank, and the all-to-alls not kept
    (:func:`op_sac_keeps_ep_a2a`)."""
    return (plan.framework == "torchtitan" and plan.training.recompute.granularity in ("op", "selective")
            and plan.model.is_moe and plan.parallel.ep > 1 and not op_sac_keeps_ep_a2a(plan))
