"""Exact parameter counts of a plan's model, per GPU of each pipeline stage.

The counts follow the modules megatron-core 0.16.1 builds (``GPTModel`` with
``get_gpt_decoder_block_spec``; ``megatron/core/transformer/{attention,multi_latent_attention,
mlp}.py``, ``transformer/moe/{router,experts,shared_experts}.py``,
``core/tensor_parallel/layers.py``) and are checked in ``tests/test_params.py`` against the real
modules built on the meta device (megatron-core and torchtitan).  Per decoder layer, with ``t`` =
TP, ``et`` = expert TP, ``ep`` = EP, ``n(x)`` = ``x`` for RMSNorm, ``2x`` for LayerNorm (weight +
bias; norms are replicated over TP):

- attention (GQA): ``n(h) + h*(nq+2*nkv)*d/t + nq*d*h/t`` (+ QKV bias ``(nq+2nkv)d/t``,
  + proj bias ``h``), qk-norm ``2*n(d)``;
- MLA (DeepSeek-V2/V3): ``n(h) + h*ql/ds + n(ql) + ql*nq*(dn+dr)/t + h*(kvl+dr)/ds + n(kvl) +
  kvl*nq*(dn+dv)/t + nq*dv*h/t`` where ``ds = 1`` with Transformer Engine (``TELinear``
  "duplicated" down projections) and ``ds = t`` with the local spec (``ColumnParallelLinear``);
  without ``q_lora_rank`` the query is ``h*nq*(dn+dr)/t`` (and no ``n(ql)``).  The q/kv norms
  are part of MLA as DeepSeek-V2/V3 and torchtitan define it (Megatron builds them with
  ``--qk-layernorm``, which every DeepSeek recipe sets), so they are counted regardless of
  ``qk_layernorm``;
- dense MLP: ``n(h) + h*g*F/t + F*h/t`` (``g = 2`` for SwiGLU) (+ biases ``g*F/t + h``);
- MoE MLP: ``n(h) + E*h`` (router, replicated; + ``E`` bias with ``add_bias_linear`` or
  ``moe_router_bias``) ``+ shared h*g*Fs/t + Fs*h/t``
  ``+ (E/ep) * (h*g*Fe/et + Fe*h/et)`` -- only the last term is *expert* parameters (sharded over
  EP, gradients reduced over expert-DP); everything else is *dense*.

Stage extras: first stage ``V/t*h`` word embeddings (``V`` = padded vocab) and learned position
embeddings; last stage final norm ``n(h)`` and output head ``V/t*h`` -- with tied embeddings and
``pp > 1`` Megatron keeps a copy of the word embeddings on the last stage too
(``LanguageModule.setup_embeddings_and_output_layer``).  Layers are assigned to PP ranks as in
``get_transformer_layer_offset`` (interleaved chunks, uneven first/last stage), or in a "V" for
ZBV (rank ``r`` holds virtual stages ``r`` and ``2pp-1-r``).  Multi-token-prediction modules: :func:`mtp_layer_parameters` on the stage that holds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import Literal

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost.mamba import mamba_layer_params

Spec = Literal["te", "local"]


@dataclass(frozen=True)
class StageParams:
    """Parameters held by one GPU of a PP stage, split by how their gradients are reduced."""

    dense: int  # replicated over DP (reduced over the DP x CP group)
    expert: int  # routed-expert weights: sharded over EP, reduced over expert-DP

    @property
    def total(self) -> int:
        """All parameters the GPU holds: ``dense + expert``."""
        return self.dense + self.expert


ArchKey = tuple


def arch_key(arch: ModelArch) -> ArchKey:
    """A hashable key of an architecture (pydantic models are not hashable) for the caches: its field values in
    field order (one C-level ``attrgetter`` call; the tuner's floors take ~6k keys per tune)."""
    return _KEY_OF(arch)


_FIELDS = tuple(ModelArch.model_fields)
_KEY_OF = attrgetter(*_FIELDS) if len(_FIELDS) > 1 else (lambda a: (getattr(a, _FIELDS[0]),))


@lru_cache(maxsize=1024)
def arch_from_key(key: ArchKey) -> ModelArch:
    """The architecture of a key of :func:`arch_key` (cached: one object per key)."""
    return ModelArch.model_construct(**dict(zip(_FIELDS, key)))


def _norm(arch: ModelArch, n: int) -> int:
    return n if arch.normalization == "rmsnorm" else 2 * n


def _attention_params(arch: ModelArch, tp: int, spec: Spec) -> int:
    h = arch.hidden_size
    nq = arch.num_attention_heads
    out = _norm(arch, h)  # input_layernorm
    if arch.multi_latent_attention:
        qhd = arch.qk_head_dim + arch.qk_pos_emb_head_dim
        ds = tp if spec == "local" else 1
        if arch.q_lora_rank is None:
            out += h * nq * qhd // tp
        else:
            ql = arch.q_lora_rank
            out += h * ql // ds + ql * nq * qhd // tp + _norm(arch, ql)
        kvl = arch.kv_lora_rank
        out += h * (kvl + arch.qk_pos_emb_head_dim) // ds + _norm(arch, kvl)
        out += kvl * nq * (arch.qk_head_dim + arch.v_head_dim) // tp
        out += nq * arch.v_head_dim * h // tp
        if arch.add_bias_linear:
            out += h
        return out
    d = arch.kv_channels
    qkv = (nq + 2 * arch.kv_heads) * d
    out += h * qkv // tp
    if arch.add_bias_linear or arch.add_qkv_bias:
        out += qkv // tp
    if arch.qk_layernorm:
        out += 2 * _norm(arch, d)
    out += nq * d * h // tp
    if arch.add_bias_linear:
        out += h
    return out


def _mlp_params(arch: ModelArch, ffn: int, tp: int, bias: bool, width: int | None = None) -> int:
    """One (column fc1, row fc2) MLP of intermediate size ``ffn`` split over ``tp``, on inputs of ``width``
    (default the hidden size; a latent MoE's routed experts: ``moe_latent_size``, megatron-core 0.16.1
    ``transformer/mlp.py`` ``use_latent_size``)."""
    h, g = width or arch.hidden_size, 2 if arch.swiglu else 1
    out = h * g * ffn // tp + ffn * h // tp
    if bias:
        out += g * ffn // tp + h
    return out


@lru_cache(maxsize=4096)
def largest_linear_module(key: ArchKey, tp: int, etp: int, ep: int, moe: bool) -> int:
    """Weight elements on one GPU of a decoder layer's largest linear module -- the weights one backward
    call produces gradients for at once: the attention's linears (summed: an upper bound on its largest), the
    MLP's FC1 ``g f / t x h`` (the larger of FC1 / FC2), or an MoE layer's local experts' FC1 together (TE
    ``GroupedLinear`` returns every expert's weight gradient from one call, megatron-core 0.16.1
    ``extensions/transformer_engine.py`` ``TEGroupedLinear``; for a per-expert SequentialMLP an upper bound) and
    its shared experts' FC1.  Used for
    the fresh weight gradient of ``--no-gradient-accumulation-fusion`` (``projection/cost/wgrad_accumulation.py``)."""
    arch = arch_from_key(key)
    h, g = arch.hidden_size, 2 if arch.swiglu else 1
    attn = _attention_params(arch, tp, "te") - _norm(arch, h)
    if not moe:
        return max(attn, g * arch.ffn_hidden_size * h // tp)
    experts = (arch.num_experts or 0) // ep * g * arch.expert_ffn * arch.expert_hidden // etp
    shared = g * (arch.moe_shared_expert_intermediate_size or 0) * h // tp
    return max(attn, experts, shared)


def layer_parameter_counts(arch: ModelArch, tp: int, etp: int, ep: int, moe: bool,
                           spec: Spec = "te") -> StageParams:
    """Parameters of one decoder layer on one GPU (dense part, expert part): the module doc's per-layer
    counts (attention / MLA + dense MLP or MoE MLP), megatron-core 0.16.1's modules, checked against the real
    modules on the meta device (``tests/test_params.py``)."""
    return layer_params_for_key(arch_key(arch), tp, etp, ep, moe, spec)


@lru_cache(maxsize=4096)
def layer_params_for_key(key: ArchKey, tp: int, etp: int, ep: int, moe: bool, spec: Spec) -> StageParams:
    """:func:`layer_parameter_counts` of the architecture keyed ``key`` (cached)."""
    arch = arch_from_key(key)
    h = arch.hidden_size
    dense = _attention_params(arch, tp, spec) + _norm(arch, h)  # + pre_mlp_layernorm
    if not moe:
        return StageParams(dense + _mlp_params(arch, arch.ffn_hidden_size, tp, arch.add_bias_linear), 0)
    E = arch.num_experts or 0
    dense += E * h + (E if (arch.add_bias_linear or arch.moe_router_bias) else 0)  # router weight (+ bias)
    if arch.moe_shared_expert_intermediate_size:
        dense += _mlp_params(arch, arch.moe_shared_expert_intermediate_size, tp, False)
    expert = (E // ep) * _mlp_params(arch, arch.expert_ffn, etp, arch.add_bias_linear, arch.expert_hidden)
    dense += latent_proj_params(arch)
    return StageParams(dense, expert)


def latent_proj_params(arch: ModelArch) -> int:
    """A latent MoE layer's two projections (megatron-core 0.16.1 ``moe/moe_layer.py``: ``fc1_latent_proj``
    ``TELinear(h, l, parallel_mode="duplicated")`` and ``fc2_latent_proj`` ``(l, h)``, i.e. whole on every TP
    rank): ``2 h l`` (+ ``l + h`` with ``add_bias_linear``); 0 without ``moe_latent_size``."""
    l = arch.moe_latent_size
    if not l:
        return 0
    return 2 * arch.hidden_size * l + ((l + arch.hidden_size) if arch.add_bias_linear else 0)


def hybrid_layer_params(key: ArchKey, tp: int, etp: int, ep: int, sym: str, spec: Spec = "te") -> StageParams:
    """One layer of a hybrid stack (megatron-core 0.16.1 ``models/mamba/mamba_layer_specs.py``): ``M`` a Mamba layer
    (:func:`~primus_launch.projection.cost.mamba.mamba_layer_params`: its own norm fused into ``in_proj``), ``*``
    attention alone (its norm fused into QKV), ``-`` an MLP alone (norm fused into FC1), ``E`` an MoE layer
    (``pre_mlp_layernorm`` + router + shared + experts); ``T`` a GPT layer (:func:`layer_params_for_key`)."""
    arch = arch_from_key(key)
    if sym == "M":
        return StageParams(mamba_layer_params(arch, tp), 0)
    if sym == "*":
        return StageParams(_attention_params(arch, tp, spec), 0)
    if sym == "-":
        return StageParams(_norm(arch, arch.hidden_size)
                           + _mlp_params(arch, arch.ffn_hidden_size, tp, arch.add_bias_linear), 0)
    if sym == "E":  # a GPT MoE layer minus its attention
        full = layer_params_for_key(key, tp, etp, ep, True, spec)
        return StageParams(full.dense - _attention_params(arch, tp, spec), full.expert)
    raise ValueError(f"hybrid layer symbol {sym!r}: one of M * - E")


def _layer_split(key: ArchKey, tp: int, etp: int, ep: int, layers: list[int], spec: Spec) -> StageParams:
    """The (dense, expert) parameters of the decoder layers ``layers`` of a hybrid stack."""
    m = arch_from_key(key)
    dense = expert = 0
    for i in layers:
        one = hybrid_layer_params(key, tp, etp, ep, m.layer_symbol(i), spec)
        dense += one.dense
        expert += one.expert
    return StageParams(dense, expert)


def stage_layer_ids(plan: Plan) -> list[list[list[int]]]:
    """Global decoder-layer ids held by each PP rank, per model chunk: ``[rank][chunk] -> ids``
    (:mod:`primus_launch.plan.layout`: Megatron's offsets for every placement, ZB-V's "V")."""
    return [[list(c.layers) for c in rank] for rank in plan.chunk_layout()]


def _embedding_params(arch: ModelArch, tp: int) -> int:
    out = arch.padded_vocab_size(tp) // tp * arch.hidden_size
    if arch.position_embedding == "learned":
        out += (arch.max_position_embeddings or arch.seq_length) * arch.hidden_size
    return out


def stage_parameter_split(plan: Plan, spec: Spec = "te") -> list[StageParams]:
    """Per PP rank, the (dense, expert) parameters held by ONE GPU of that rank: its chunks' layers
    (:func:`layer_parameter_counts`) plus the stage extras of the module doc (embeddings on the first
    stage, final norm and output head -- or the tied copy under PP -- on the last, MTP modules where they sit;
    Megatron ``get_transformer_layer_offset`` / ``LanguageModule.setup_embeddings_and_output_layer``)."""
    m, p = plan.model, plan.parallel
    return list(stage_split_for_key(arch_key(m), p.tp, p.expert_tp, p.ep, plan.chunk_layout(), spec))


def mtp_layer_parameters(arch: ModelArch, tp: int, etp: int, ep: int, spec: Spec = "te") -> StageParams:
    """One multi-token-prediction module (megatron ``multi_token_prediction.py``
    ``MultiTokenPredictionLayer``): ``enorm`` and ``hnorm`` ``n(h)`` each, ``eh_proj`` ``2h*h/t``
    (column-parallel), a transformer layer of the decoder's last-layer kind and its
    ``final_layernorm`` ``n(h)``; the output head is the model's own.  A hybrid stack's MTP depth holds the
    layers of ``hybrid_mtp_pattern`` (megatron-core ``models/hybrid/hybrid_layer_allocation.py``: '<main>/<mtp>')
    instead of one transformer layer; each depth counted with its own weights (Megatron-LM's default; Megatron-Bridge's
    ``mtp_use_repeated_layer`` shares one depth's, not modelled: an over-count of one depth's layers)."""
    if arch.is_hybrid and arch.hybrid_mtp_pattern:
        key = arch_key(arch)
        dense = expert = 0
        for sym in arch.hybrid_mtp_pattern:
            one = hybrid_layer_params(key, tp, etp, ep, sym, spec)
            dense += one.dense
            expert += one.expert
        h = arch.hidden_size
        return StageParams(dense + 3 * _norm(arch, h) + 2 * h * h // tp, expert)
    last_moe = arch.is_moe_layer(arch.num_layers - 1)
    layer = layer_params_for_key(arch_key(arch), tp, etp, ep, last_moe, spec)
    h = arch.hidden_size
    return StageParams(layer.dense + 3 * _norm(arch, h) + 2 * h * h // tp, layer.expert)


@lru_cache(maxsize=65536)
def stage_split_for_key(key: ArchKey, tp: int, etp: int, ep: int, layout: tuple,
                        spec: Spec) -> tuple[StageParams, ...]:
    """:func:`stage_parameter_split` of the architecture keyed ``key`` on the chunk ``layout`` (cached)."""
    m = arch_from_key(key)
    dense_layer = layer_params_for_key(key, tp, etp, ep, False, spec)
    moe_layer = layer_params_for_key(key, tp, etp, ep, True, spec) if m.is_moe else dense_layer
    emb_rank = next(r for r, row in enumerate(layout) if any(c.embedding for c in row))
    out = []
    for r, row in enumerate(layout):
        layers = [i for chunk in row for i in chunk.layers]
        if m.is_hybrid:
            hyb = _layer_split(key, tp, etp, ep, layers, spec)
            dense, expert = hyb.dense, hyb.expert
        else:
            n_moe = sum(1 for i in layers if m.is_moe_layer(i))
            n_dense = len(layers) - n_moe
            dense = n_dense * dense_layer.total + n_moe * moe_layer.dense
            expert = n_moe * moe_layer.expert
        n_mtp = sum(c.mtp for c in row)
        if n_mtp:
            mtp = mtp_layer_parameters(m, tp, etp, ep, spec)
            dense += n_mtp * mtp.dense
            expert += n_mtp * mtp.expert
        has_emb = any(c.embedding for c in row)
        if has_emb or n_mtp:
            # the embedding; an MTP stage builds its own copy (GPTModel: pre_process or mtp_process)
            dense += _embedding_params(m, tp)
        if any(c.loss for c in row):
            dense += _norm(m, m.hidden_size)  # final_layernorm
            # untied output head, or Megatron's copy of the tied word embeddings on the loss stage
            if m.untie_embeddings_and_output_weights or r != emb_rank:
                dense += m.padded_vocab_size(tp) // tp * m.hidden_size
        out.append(StageParams(dense, expert))
    return tuple(out)


def bf16_layer_params(plan: Plan, rank: int, spec: Spec = "te") -> StageParams:
    """The (dense, expert) parameters one GPU of PP rank ``rank`` holds in the decoder layers the plan keeps in BF16
    (``Plan.bf16_layer_ids``: ``--first-last-layers-bf16``), counted as :func:`stage_parameter_split` counts them."""
    ids = plan.bf16_layer_ids()
    layers = [i for c in plan.chunk_layout()[rank] for i in c.layers if i in ids]
    if not layers:
        return StageParams(0, 0)
    m, p = plan.model, plan.parallel
    key = arch_key(m)
    if m.is_hybrid:
        return _layer_split(key, p.tp, p.expert_tp, p.ep, layers, spec)
    dense = expert = 0
    for i in layers:
        one = layer_params_for_key(key, p.tp, p.expert_tp, p.ep, m.is_moe_layer(i), spec)
        dense += one.dense
        expert += one.expert
    return StageParams(dense, expert)


def stage_parameter_counts(plan: Plan, spec: Spec = "te") -> list[int]:
    """Parameters held by ONE GPU of each PP stage (after TP / EP / expert-TP sharding).

    ``spec="te"`` (default) counts Megatron with Transformer Engine (MLA down projections
    replicated over TP); ``spec="local"`` the megatron-core local spec (they are TP-sharded).
    Only MLA differs between the two.
    """
    return [s.total for s in stage_parameter_split(plan, spec)]


def total_parameters(arch: ModelArch) -> int:
    """All parameters of the model, unsharded, vocabulary padded as for TP=1, tied head counted once:
    ``dense layers + MoE layers + embedding + final norm + MTP modules (+ untied output head)``, each term
    as the module doc counts it at TP = EP = 1."""
    return _total(arch_key(arch))


@lru_cache(maxsize=1024)
def _total(key: ArchKey) -> int:
    arch = arch_from_key(key)
    if arch.is_hybrid:
        out = _layer_split(key, 1, 1, 1, list(range(arch.num_layers)), "te").total
    else:
        dense_layer = layer_params_for_key(key, 1, 1, 1, False, "te")
        n_moe = arch.num_moe_layers
        out = (arch.num_layers - n_moe) * dense_layer.total
        if n_moe:
            out += n_moe * layer_params_for_key(key, 1, 1, 1, True, "te").total
    out += _embedding_params(arch, 1) + _norm(arch, arch.hidden_size)
    out += arch.mtp_num_layers * mtp_layer_parameters(arch, 1, 1, 1).total
    if arch.untie_embeddings_and_output_weights:
        out += arch.padded_vocab_size(1) * arch.hidden_size
    return out


def active_parameters(arch: ModelArch) -> int:
    """Parameters touched per token (MoE: top-k routed experts instead of all), unsharded:
    ``total - L_moe (E - k) P_expert`` with ``L_moe`` the MoE layers (an MTP module's included when the last
    layer is MoE) and ``P_expert`` one expert's MLP (module doc's expert term at TP = EP = 1)."""
    if not arch.is_moe:
        return total_parameters(arch)
    per_expert = _mlp_params(arch, arch.expert_ffn, 1, arch.add_bias_linear, arch.expert_hidden)
    if arch.is_hybrid and arch.hybrid_mtp_pattern:   # each MTP depth's E layers
        mtp_moe = arch.mtp_num_layers * arch.hybrid_mtp_pattern.count("E")
    else:
        mtp_moe = arch.mtp_num_layers if arch.is_moe_layer(arch.num_layers - 1) else 0
    moe_layers = arch.num_moe_layers + mtp_moe
    return total_parameters(arch) - moe_layers * (arch.num_experts - arch.moe_router_topk) * per_expert
