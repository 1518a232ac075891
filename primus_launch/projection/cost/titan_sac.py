"""TorchTitan's per-op selective activation checkpointing (SAC): the forward GEMM seconds it re-runs in a block's
backward.

Rule (torchtitan ``distributed/activation_checkpoint.py`` ``SelectiveAC``: "Save all compute/comm ops, except every
second mm/linear"; ``force_recompute_mm_shapes_by_fqns = ["moe.router.gate"]``): every second ``aten.mm`` of the
block's forward in program order (:func:`titan_block_mms`) plus the MoE router gate, each at
``compute.gemm_time`` on the plan's GEMM format.
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
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


