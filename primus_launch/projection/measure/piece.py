"""What a measured piece is, and the plan-derived facts both builders share.

A :class:`Piece` is one part of the per-rank model timed for one micro-batch (the embedding, one
decoder layer, the attention core, an MTP module's own part, the head with its loss).  Everything
else here is computed from the plan alone, identically for the Megatron builder
(:mod:`.build_mcore`) and the TorchTitan one (:mod:`.build_titan`): which layer kinds the reduced
model holds (:func:`layer_kinds`), the pieces' names and per-rank shapes (:func:`piece_shapes`,
part of the cache key), the context-parallel layout (:func:`cp_positions`), the attention masks,
and the FLOP counts that split a backward into input- and weight-gradient time
(:func:`bwd_input_fraction`) or size a CPU measurement (:func:`measurement_flops_estimate`).
The builders import this module; it imports neither of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from primus_launch.plan import Plan


@dataclass
class Piece:
    """One measurable model piece for one micro-batch: ``forward(*inputs)`` returns its output."""

    name: str  # "embedding" | "dense_layer#i" | "moe_layer#i" | "attn_core" | "head_loss" | ...
    forward: Callable[..., torch.Tensor]
    inputs: list[torch.Tensor]
    params: list[torch.Tensor]
    shapes: dict[str, Any]
    flop_split: Optional[float] = None  # input-grad share of backward by FLOPs (split="flop-ratio")
    split: str = "autograd"  # how the backward is split: timing.SPLITS
    # memory-only variants (name -> forward over the same inputs/params), e.g. the block under the
    # framework's activation checkpointing: their kept bytes go to PieceTiming.variant_bytes
    memory_variants: dict[str, Callable[..., torch.Tensor]] = field(default_factory=dict)
    # the forward whose memory is measured when it cannot be the timed one (a compiled module on
    # the CPU: MemTracker cannot run inside compiled code); None = ``forward``
    memory_forward: Optional[Callable[..., torch.Tensor]] = None
    # the piece's work is drawn afresh each pass (an MoE layer routing at random, megatron's
    # --moe-router-force-load-balancing): its samples are summarized by their mean (timing.STATISTICS)
    routed: bool = False


def cp_positions(seq: int, cp: int, rank: int) -> list[int]:
    """Global token positions held by CP rank ``rank`` in megatron's load-balanced layout: the
    sequence in ``2 cp`` chunks, rank r holding chunks r and 2cp-1-r (``get_batch_on_this_cp_rank``,
    ``rope_utils.get_pos_emb_on_this_cp_rank``; torchtitan's CP load balancer splits it the same
    way), so every rank has the same causal work."""
    n = seq // (2 * cp)
    return list(range(rank * n, (rank + 1) * n)) + list(range((2 * cp - 1 - rank) * n, (2 * cp - rank) * n))


def cp_mask(seq: int, cp: int, rank: int, device: torch.device | str) -> torch.Tensor:
    """[s/cp, s] boolean mask (True = attend) of CP rank ``rank``'s queries over all keys in
    global order: key position <= query position."""
    q = torch.tensor(cp_positions(seq, cp, rank), device=device)
    return torch.arange(seq, device=device).unsqueeze(0) <= q.unsqueeze(1)


def attention_mask(q_pos: list[int] | None, sk: int, window: Optional[int],
                   device: torch.device | str) -> Optional[torch.Tensor]:
    """[sq, sk] boolean mask (True = attend) of queries at global positions ``q_pos`` (None: 0..sk-1)
    over keys 0..sk-1: causal (key <= query) and, with a sliding ``window``, query - key <= window
    (Megatron ``window_size=(window, 0)``, ``transformer/utils.get_sliding_window_causal_mask``);
    None for plain causal attention over the whole sequence (SDPA's ``is_causal``)."""
    if q_pos is None and window is None:
        return None
    q = torch.tensor(q_pos, device=device) if q_pos is not None else torch.arange(sk, device=device)
    k = torch.arange(sk, device=device).unsqueeze(0)
    mask = k <= q.unsqueeze(1)
    if window is not None:
        mask = mask & (q.unsqueeze(1) - k <= window)
    return mask


def expert_ranks(ep: int, expert_tp: int) -> int:
    """Ranks whose tokens reach one rank's experts in the run: expert-TP x EP (megatron's ``tp_ep``
    group), both dispatchers (the allgather one gathers over it; the alltoall one exchanges over EP,
    then gathers over expert-TP)."""
    return ep * expert_tp


def layer_kinds(plan: Plan, measure_layers: int = 2) -> list[tuple[bool, bool]]:
    """(MoE, sliding window) of each layer of the reduced model: up to ``measure_layers`` of every
    kind the plan has (``is_moe_layer`` / ``is_window_layer``), dense before MoE, full attention
    before windowed; the measured time of a kind is the median over its built layers."""
    m = plan.model
    have: dict[tuple[bool, bool], int] = {}
    for i in range(m.num_layers):
        k = (m.is_moe_layer(i), m.is_window_layer(i))
        have[k] = have.get(k, 0) + 1
    return [k for k in ((False, False), (False, True), (True, False), (True, True)) if k in have
            for _ in range(min(have[k], measure_layers))]


def layer_counts(plan: Plan, measure_layers: int = 2) -> tuple[int, int]:
    """(dense, MoE) layers of the reduced model (:func:`layer_kinds`)."""
    kinds = layer_kinds(plan, measure_layers)
    n_moe = sum(1 for moe, _ in kinds if moe)
    return len(kinds) - n_moe, n_moe


def layer_piece_name(i: int, moe: bool, window: bool) -> str:
    """``dense_layer#i`` / ``moe_layer#i``, ``dense_window_layer#i`` / ``moe_window_layer#i`` for
    sliding-window layers (``i``: the layer's index in the reduced model)."""
    return f"{'moe' if moe else 'dense'}{'_window' if window else ''}_layer#{i}"


def piece_shapes(plan: Plan, measure_layers: int = 2) -> dict[str, dict[str, Any]]:
    """Name -> per-rank shapes of every piece of the reduced model (Megatron's full set; the
    TorchTitan builder keeps the kinds its models have), computed from the plan alone (the piece
    names of the build spec; a cache hit needs no build)."""
    m, p, t = plan.model, plan.parallel, plan.training
    s, b = m.seq_length // p.cp, t.micro_batch_size
    vocab = m.padded_vocab_size(p.tp) // p.tp
    common = {"hidden": m.hidden_size, "seq": s, "mbs": b}
    attn = {"heads": m.num_attention_heads // p.tp,
            "kv_heads": max(1, m.kv_heads // p.tp) if not m.multi_latent_attention else None,
            "kv_channels": m.kv_channels, "qkv_bias": m.add_qkv_bias, "qk_norm": m.qk_layernorm,
            "pos": m.position_embedding,
            "mla": [m.q_lora_rank, m.kv_lora_rank, m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim]
            if m.multi_latent_attention else None}
    layer = {**common, **attn, "norm": m.normalization, "swiglu": m.swiglu, "bias": m.add_bias_linear}
    out: dict[str, dict[str, Any]] = {
        "embedding": {**common, "vocab_per_rank": vocab, "pos": m.position_embedding,
                      "tied": not m.untie_embeddings_and_output_weights}}
    kinds = layer_kinds(plan, measure_layers)
    for i, (moe, win) in enumerate(kinds):
        extra = {"window": m.window_size} if win else {}
        if moe:
            out[layer_piece_name(i, moe, win)] = {
                **layer, **extra, "experts_local": m.num_experts // p.ep, "router_experts": m.num_experts,
                "token_ranks": expert_ranks(p.ep, p.expert_tp),
                "topk": m.moe_router_topk, "expert_ffn": m.expert_ffn // p.expert_tp,
                "shared": m.moe_shared_expert_intermediate_size // p.tp,
                **({"force_balance": True} if plan.training.moe_router_force_load_balancing else {})}
        else:
            out[layer_piece_name(i, moe, win)] = {**layer, **extra, "ffn": m.ffn_hidden_size // p.tp}
    out["attn_core"] = {**common, **attn}
    if any(w for _, w in kinds):
        out["attn_core_window"] = {**common, **attn, "window": m.window_size}
    if m.mtp_num_layers:
        out["mtp"] = {**common, "vocab_per_rank": vocab, "norm": m.normalization}
    out["head_loss"] = {**common, "vocab_per_rank": vocab, "norm": m.normalization}
    return out


def linear_params(module: torch.nn.Module, experts_active: float) -> float:
    """Weights of the GEMMs one token passes through: 2-D parameters, expert weights scaled by
    the fraction of local experts a token visits (``experts_active``)."""
    n = 0.0
    for name, prm in module.named_parameters():
        if prm.dim() != 2:
            continue
        n += prm.numel() * (experts_active if ".experts." in f".{name}" else 1.0)
    return n


def bwd_input_fraction(linear_params: float, tokens: int, attn_fwd_flops: float) -> float:
    """Share of a piece's backward spent on input gradients, by FLOPs.

    megatron's ``LinearWithGradAccumulationAndAsyncCommunication.backward`` always computes the
    weight gradient together with the input gradient (tensor_parallel/layers.py), so autograd
    cannot time the two apart; the split is attributed by FLOPs: per linear layer, the input-grad
    GEMM and the weight-grad GEMM each cost ``2 * tokens * params``; the attention core's
    backward (``2 x`` its forward) has no weights, so it counts as input-grad:

        r = (2 T P + 2 A_f) / (4 T P + 2 A_f)
    """
    lin = 2.0 * tokens * linear_params
    return (lin + 2.0 * attn_fwd_flops) / (2.0 * lin + 2.0 * attn_fwd_flops) if lin or attn_fwd_flops else 0.5


def attn_core_dims(plan: Plan) -> tuple[int, int, int, int]:
    """``(heads, kv_heads, d_qk, d_v)`` of the attention core on one tensor-parallel rank: MLA's
    queries and keys are ``qk_head_dim + qk_pos_emb_head_dim`` wide (the RoPE part concatenated), its
    values ``v_head_dim``, with as many key / value heads as query heads (megatron-core
    ``MLASelfAttention``); otherwise ``kv_channels`` for both and ``kv_heads / tp`` key / value heads
    (GQA, at least one per rank)."""
    m, p = plan.model, plan.parallel
    heads = m.num_attention_heads // p.tp
    if m.multi_latent_attention:
        return heads, heads, m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim
    return heads, max(1, m.kv_heads // p.tp), m.kv_channels, m.kv_channels


def attn_fwd_flops(plan: Plan) -> float:
    """Causal attention core forward FLOPs per rank: 2 * b * heads * s^2/2 * (d_qk + d_v)."""
    m, p, t = plan.model, plan.parallel, plan.training
    s = m.seq_length // p.cp
    heads, _, dqk, dv = attn_core_dims(plan)
    return 2.0 * t.micro_batch_size * heads * s * s / 2 * (dqk + dv)


def measurement_flops_estimate(plan: Plan, measure_layers: int = 2) -> float:
    """Rough FLOPs of one measurement pass (fwd+bwd, all pieces, per-rank shapes):
    ``6 * tokens * params`` of the built layers plus ``12 * s^2 * h * b`` attention per layer
    (Kaplan et al. 2020 / Narayanan et al. 2021 counting); used only to refuse a slow CPU run."""
    m, p, t = plan.model, plan.parallel, plan.training
    s, b = m.seq_length // p.cp, t.micro_batch_size
    nd, nm = layer_counts(plan, measure_layers)
    h = m.hidden_size
    attn = 4 * h * h / p.tp
    dense = attn + 3 * h * m.ffn_hidden_size / p.tp
    moe = attn + 3 * h * m.expert_ffn * m.moe_router_topk / p.expert_tp if m.is_moe else 0
    head = 2 * h * m.padded_vocab_size(p.tp) / p.tp
    per_tok = nd * dense + nm * moe + head
    return 6 * s * b * per_tok + (nd + nm) * 12 * s * s * h * b / p.tp
