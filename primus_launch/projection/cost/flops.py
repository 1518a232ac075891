"""Model FLOPs and parameter counts, with Megatron-LM's own accounting.

:func:`model_flops_per_iteration` follows ``num_floating_point_operations(args, batch_size)`` in
NVIDIA/Megatron-LM ``megatron/training/training.py`` (``transformer_flops()``, read at commit
001b00c2): with B = global batch, s = seq_length, h = hidden, the per-iteration count is

    F = B * s * [ 3*2*h * ( f*e*L_dense + (f_moe*topk*e + f_shared*e) * L_moe )
                  + L * attn
                  + 3*2*h*V_padded ]

where e = 3 with SwiGLU else 2 (stacked up/gate + down GEMMs), 3 = forward + dgrad + wgrad,
2 = one FMA, and per layer

- MHA/GQA:  attn = 3*2*( h*(q + 2*kv) + q*s/2*2 + q*h ),  q = kv_channels*heads,
  kv = kv_channels*query_groups; the core-attention term uses s/2 (causal mask);
- MLA:      attn = 3*2*( q_term + r_kv*(h + n*(d_qk + d_v) + 1) + h*d_rope + n*d_v*h
                         + s*n*(d_qk + d_rope)/2 + s*n*d_v/2 ),
  q_term = h*n*(d_qk + d_rope) without q-LoRA, else r_q*(h + n*(d_qk + d_rope) + 1).

A hybrid Mamba / attention stack (``hybrid_pattern``) is counted by Megatron's hybrid branch instead
(:func:`hybrid_flops_per_sequence`).

Recomputation is NOT counted (model FLOPs, as Megatron's throughput log); MTP layers are not
modelled (mtp_num_layers = 0). Norms, softmax, RoPE and the router GEMM are not counted, as in
Megatron.
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost import mamba
from primus_launch.projection.memory.params import arch_from_key, arch_key


def _attn_term(m: ModelArch, causal: bool = True) -> float:
    """Per-token, per-layer attention FLOPs (forward+backward), Megatron ``standard_self_attn_term``."""
    h = m.hidden_size
    s = m.seq_length if causal else 2 * m.seq_length  # the formula's s/2 is the causal halving
    if m.multi_latent_attention:
        n = m.num_attention_heads
        dqk, dr, dv = m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim
        if m.q_lora_rank is None:
            q_term = h * n * (dqk + dr)
        else:
            q_term = m.q_lora_rank * (h + n * (dqk + dr) + 1)
        return 6 * (q_term + m.kv_lora_rank * (h + n * (dqk + dv) + 1) + h * dr + n * dv * h
                    + s * n * (dqk + dr) / 2 + s * n * dv / 2)
    q = m.kv_channels * m.num_attention_heads
    kv = m.kv_channels * m.kv_heads
    return 6 * (h * (q + 2 * kv) + q * s / 2 * 2 + q * h)


@lru_cache(maxsize=4096)
def _flops_per_sequence_key(key: tuple, padded_vocab: int, causal: bool) -> float:
    return _flops_per_sequence(arch_from_key(key), padded_vocab, causal)


def _flops_per_sequence(m: ModelArch, padded_vocab: int, causal: bool = True) -> float:
    """One sequence's model FLOPs, ``s * [6h (f e L_dense + (f_moe topk e + f_shared e) L_moe) + L attn
    + 6h V_padded]`` (module doc; Megatron-LM ``training.py`` ``transformer_flops()`` @001b00c2)."""
    if m.is_hybrid:
        return hybrid_flops_per_sequence(m, padded_vocab, causal)
    h, s = m.hidden_size, m.seq_length
    e = 3 if m.swiglu else 2
    L = m.num_layers
    l_moe = m.num_moe_layers
    l_dense = L - l_moe
    mlp = l_dense * m.ffn_hidden_size * e
    if m.is_moe:
        mlp += l_moe * (m.expert_ffn * m.moe_router_topk * e + m.moe_shared_expert_intermediate_size * e)
    per_token = 6 * h * mlp + L * _attn_term(m, causal) + 6 * h * padded_vocab
    return s * per_token


def hybrid_flops_per_sequence(m: ModelArch, padded_vocab: int, causal: bool = True) -> float:
    """One sequence's model FLOPs of a hybrid Mamba / attention stack: Megatron-LM ``training.py``
    ``num_floating_point_operations`` hybrid branch (``hybrid_flops``, mirror @d98e8a64; Megatron-Bridge
    ``training/utils/flop_utils.py`` ``hybrid_flops`` @067f987d counts the same, with the padded vocabulary), per
    token, forward, x 3:

    - attention (``*``): ``4 h p (h + h g / n) + 2 h p s`` with ``p = kv_channels n / h`` (the causal halving
      cancels the FMA's 2);
    - MLP (``-``): ``4 f h x (3/2 if gated)``; MoE (``E``): ``4 h (f_e k + f_s) x (3/2 if gated)``;
    - Mamba (``M``): :func:`~primus_launch.projection.cost.mamba.mamba_layer_flops`;
    - logits: ``2 h V_padded (1 + mtp)``.

    ``causal=False`` doubles the core-attention term (the full s x s scores)."""
    h, s = m.hidden_size, m.seq_length
    pat = m.hybrid_pattern or ""
    n = m.num_attention_heads
    p = m.kv_channels * n / h
    gated = 1.5 if m.swiglu else 1.0
    attn = 4 * h * p * (h + h * m.kv_heads / n) + 2 * h * p * s * (1 if causal else 2)
    mlp = 4 * m.ffn_hidden_size * h * gated
    moe = (4 * h * (m.expert_ffn * m.moe_router_topk + m.moe_shared_expert_intermediate_size) * gated
           if m.is_moe else 0.0)
    per_token = (pat.count("*") * attn + pat.count("-") * mlp + pat.count("E") * moe
                 + pat.count("M") * mamba.mamba_layer_flops(m) + 2 * h * padded_vocab * (1 + m.mtp_num_layers))
    return 3 * s * per_token


def model_flops_per_iteration(plan: Plan, causal_attention: bool = True) -> float:
    """Megatron ``num_floating_point_operations(args, global_batch_size)`` for ``plan`` (see module doc).

    The logit term uses Megatron's ``padded_vocab_size`` (vocab padded to a multiple of
    ``make_vocab_size_divisible_by * tp``). ``causal_attention=False`` counts the full s x s score
    matrix, as Megatron did before the causal halving and as Korthikanti et al. 2022 eq. (7) do.
    """
    m = plan.model
    return plan.training.global_batch_size * _flops_per_sequence_key(
        arch_key(m), m.padded_vocab_size(plan.parallel.tp), causal_attention)


def model_flops_per_token(plan: Plan) -> float:
    """:func:`model_flops_per_iteration` / tokens per iteration (global batch x sequence)."""
    return model_flops_per_iteration(plan) / plan.tokens_per_iteration
