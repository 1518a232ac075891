"""Reduced real megatron-core models built from a :class:`~primus_launch.plan.Plan`.

Everything is megatron-core's own code: ``TransformerConfig`` / ``MLATransformerConfig``,
``get_gpt_decoder_block_spec`` (the local, Transformer-Engine-free spec; dense-first layers via
``moe_layer_freq``), ``GPTModel`` (its ``embedding``, ``decoder.layers[i]``,
``decoder.final_layernorm``, ``output_layer`` and ``compute_language_model_loss``).  The one
substitution is the attention core: :class:`SDPACoreAttention` subclasses megatron's
``DotProductAttention`` and computes it with ``torch.nn.functional.scaled_dot_product_attention``
(flash / memory-efficient kernels on GPU), because the local core materialises the
[b*heads, s, s] score matrix, which the TE / flash attention of real runs does not.

Two shapes of model:

- ``per_rank=True`` (measurement at world size 1): the *TP-shard equivalent* -- the compute one
  GPU of the target does for one micro-batch: ``num_attention_heads / tp``, ``num_query_groups /
  tp`` (``kv_channels`` kept), ``ffn_hidden_size / tp``, vocabulary ``padded_vocab(tp) / tp``,
  sequence ``seq_length / cp``, ``max(num_experts / ep, topk)`` local experts of
  ``moe_ffn_hidden_size / etp`` (each rank's experts receive ``tokens * topk`` assignments on
  average: ep ranks x tokens x topk spread over num_experts experts, num_experts/ep of them local),
  shared experts ``/ tp``.  Collectives (TP/SP all-gather/reduce-scatter, EP all-to-all, CP ring,
  DP, PP) are not in it: the cost model adds them analytically.
- ``per_rank=False``: the real parallel model of the plan for a real multi-process run (TP, PP,
  CP, EP sizes set; needs ``parallel_state.initialize_model_parallel`` with the same sizes).

Context parallelism: the core attention of a CP rank is its two load-balanced sequence chunks
attending the whole sequence under the causal mask (:func:`_sdpa_core_attention_class`); at world
size 1 the other ranks' keys and values are stand-in tensors, in a real run they are all-gathered.

Tied embeddings (megatron's default): the head piece multiplies by the word-embedding weight, as
``GPTModel.forward`` passes ``shared_embedding_or_output_weight()`` to the output layer.

:func:`build_spec` computes everything a build needs (the per-rank ``TransformerConfig``, the
``GPTModel`` arguments, input shapes, measured dtype, :class:`~.spec.Substitution` s) without
building; :func:`pieces` builds from it only, so its canonical form is the cache key.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.spec import BuildSpec, Substitution, fp8_support

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32, "fp8": torch.bfloat16}


def torch_dtype(plan: Plan) -> torch.dtype:
    """Parameter/activation dtype measured for the plan's precision (fp8 measured as bf16)."""
    return DTYPES[plan.training.precision]


@dataclass
class Piece:
    """One measurable model piece for one micro-batch: ``forward(*inputs)`` returns its output."""

    name: str  # "embedding" | "dense_layer#i" | "moe_layer#i" | "attn_core" | "head_loss"
    forward: Callable[..., torch.Tensor]
    inputs: list[torch.Tensor]
    params: list[torch.Tensor]
    shapes: dict[str, Any]
    flop_split: Optional[float] = None  # input-grad share of backward by FLOPs (split="flop-ratio")
    split: str = "autograd"  # how the backward is split: timing.SPLITS


def cp_positions(seq: int, cp: int, rank: int) -> list[int]:
    """Global token positions held by CP rank ``rank`` in megatron's load-balanced layout: the
    sequence in ``2 cp`` chunks, rank r holding chunks r and 2cp-1-r (``get_batch_on_this_cp_rank``,
    ``rope_utils.get_pos_emb_on_this_cp_rank``), so every rank has the same causal work."""
    n = seq // (2 * cp)
    return list(range(rank * n, (rank + 1) * n)) + list(range((2 * cp - 1 - rank) * n, (2 * cp - rank) * n))


def _cp_mask(seq: int, cp: int, rank: int, device) -> torch.Tensor:
    """[s/cp, s] boolean mask (True = attend) of CP rank ``rank``'s queries over all keys in
    global order: key position <= query position."""
    q = torch.tensor(cp_positions(seq, cp, rank), device=device)
    return torch.arange(seq, device=device).unsqueeze(0) <= q.unsqueeze(1)


def _sdpa_core_attention_class(cp: int = 1, cp_mode: str = "emulate"):
    """The core-attention class for ``cp`` context-parallel ranks (1: plain causal SDPA).

    With ``cp > 1`` a rank's queries (its two load-balanced chunks, :func:`cp_positions`) attend
    to the keys and values of the WHOLE sequence under the causal mask (:func:`_cp_mask`), as each
    rank of an all-gather context-parallel attention does (TE's ``cp_comm_type="all_gather"``; the
    ring variant computes the same blocks).  ``cp_mode="allgather"``: K and V are all-gathered over
    the context-parallel group (a real multi-process run); ``"emulate"`` (world size 1): the other
    ranks' K and V are stand-in tensors of their shape that take part in backward, so the piece
    costs what one CP rank computes; the K/V exchange itself is the cost model's.
    """
    from megatron.core.transformer.dot_product_attention import DotProductAttention

    class SDPACoreAttention(DotProductAttention):
        """megatron ``DotProductAttention`` with the core done by torch SDPA (causal).

        Inputs ``query [sq, b, np, hn]``, ``key/value [sk, b, ng, hn(v)]``; output
        ``[sq, b, np * hn_v]`` exactly as the parent's (same ``softmax_scale``).  Also accepts
        the ``k_channels`` / ``v_channels`` that ``MLASelfAttention`` passes (megatron 0.16.1's
        local ``DotProductAttention`` rejects them, so the local MLA spec cannot be built without it).
        Context parallelism: see :func:`_sdpa_core_attention_class`.
        """

        cp_size = cp
        mode = cp_mode

        def __init__(self, config, *args, k_channels=None, v_channels=None, **kwargs):
            if getattr(config, "context_parallel_size", 1) > 1:  # the parent refuses CP (TE only)
                import copy

                config = copy.copy(config)
                config.context_parallel_size = 1
            super().__init__(config, *args, **kwargs)
            self._standin: dict = {}

        def _full_kv(self, t: torch.Tensor, name: str) -> torch.Tensor:
            """[s, b, g, d] in global order from this rank's [s/cp, b, g, d] (load-balanced chunks)."""
            n = t.size(0) // 2
            if self.mode == "allgather":
                import torch.distributed.nn.functional as dist_fn
                from megatron.core import parallel_state as ps

                parts = dist_fn.all_gather(t.contiguous(), group=ps.get_context_parallel_group())
                rank = ps.get_context_parallel_rank()
            else:
                key = (name, tuple(t.shape), t.dtype, t.device)
                if key not in self._standin:
                    g = torch.Generator().manual_seed(11)
                    self._standin[key] = [
                        (torch.randn(t.shape, generator=g) * 0.5).to(t.device, t.dtype).requires_grad_(True)
                        for _ in range(self.cp_size - 1)]
                parts = [t] + self._standin[key]
                rank = 0
            chunks: list = [None] * (2 * self.cp_size)
            for r, part in enumerate(parts):
                chunks[r], chunks[2 * self.cp_size - 1 - r] = part[:n], part[n:]
            self._rank = rank
            return torch.cat(chunks, dim=0)

        def forward(self, query, key, value, attention_mask, attn_mask_type=None,
                    attention_bias=None, packed_seq_params=None):
            assert packed_seq_params is None and attention_bias is None
            mask = None
            if self.cp_size > 1:
                key, value = self._full_kv(key, "k"), self._full_kv(value, "v")
                mask = _cp_mask(key.size(0), self.cp_size, self._rank, query.device)
            q = query.permute(1, 2, 0, 3)
            k = key.permute(1, 2, 0, 3)
            v = value.permute(1, 2, 0, 3)
            drop = self.config.attention_dropout if self.training else 0.0
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=drop, scale=self.softmax_scale,
                enable_gqa=q.size(1) != k.size(1))
            sq, b = out.size(2), out.size(0)
            return out.permute(2, 0, 1, 3).reshape(sq, b, -1)

    return SDPACoreAttention


def _with_sdpa(block_spec, cp: int = 1, cp_mode: str = "emulate"):
    cls = _sdpa_core_attention_class(cp, cp_mode)
    for spec in block_spec.layer_specs:
        sub = spec.submodules.self_attention.submodules
        sub.core_attention = cls
    return block_spec


def mcore_config(plan: Plan, *, num_dense: int, num_moe: int, per_rank: bool, device: str = "cpu",
                 extra: Optional[dict] = None):
    """megatron-core ``TransformerConfig`` (``MLATransformerConfig`` for MLA) for ``num_dense``
    dense then ``num_moe`` MoE layers of the plan's architecture; see the module docstring for
    ``per_rank``."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    from primus_launch.frameworks import mcore_cpu

    m, p = plan.model, plan.parallel
    tp = p.tp if per_rank else 1
    etp = p.expert_tp if per_rank else 1
    dtype = torch_dtype(plan)
    heads = m.num_attention_heads // tp
    groups = (m.kv_heads // tp) if not m.multi_latent_attention else None
    kw: dict[str, Any] = dict(
        num_layers=num_dense + num_moe,
        hidden_size=m.hidden_size,
        ffn_hidden_size=m.ffn_hidden_size // tp,
        num_attention_heads=heads,
        num_query_groups=groups,
        kv_channels=m.kv_channels,
        hidden_dropout=0.0,
        attention_dropout=0.0,
        normalization="RMSNorm" if m.normalization == "rmsnorm" else "LayerNorm",
        gated_linear_unit=m.swiglu,
        activation_func=torch.nn.functional.silu if m.swiglu else torch.nn.functional.gelu,
        add_bias_linear=m.add_bias_linear,
        add_qkv_bias=m.add_qkv_bias,
        qk_layernorm=m.qk_layernorm,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        **mcore_cpu.config_overrides(device),
    )
    # megatron-LM's default --bias-swiglu-fusion (bias_activation_fusion): the fused SwiGLU keeps
    # only fc1's output for backward; on the CPU it runs eagerly (mcore_cpu.eager_fusions)
    kw["bias_activation_fusion"] = bool(m.swiglu)
    if not per_rank:
        kw.update(tensor_model_parallel_size=p.tp, pipeline_model_parallel_size=p.pp,
                  context_parallel_size=p.cp, expert_model_parallel_size=p.ep,
                  expert_tensor_parallel_size=p.expert_tp, sequence_parallel=p.sequence_parallel)
    if num_moe:
        experts = m.num_experts if not per_rank else max(m.num_experts // p.ep, m.moe_router_topk)
        kw.update(num_moe_experts=experts, moe_router_topk=m.moe_router_topk,
                  moe_ffn_hidden_size=m.expert_ffn // etp,
                  moe_layer_freq=[0] * num_dense + [1] * num_moe,
                  moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
                  add_bias_linear=False)
        if m.moe_shared_expert_intermediate_size:
            kw["moe_shared_expert_intermediate_size"] = m.moe_shared_expert_intermediate_size // tp
    if m.multi_latent_attention:
        kw.pop("num_query_groups")
        kw.update(q_lora_rank=m.q_lora_rank, kv_lora_rank=m.kv_lora_rank, qk_head_dim=m.qk_head_dim,
                  qk_pos_emb_head_dim=m.qk_pos_emb_head_dim, v_head_dim=m.v_head_dim, rope_type="rope")
        kw.pop("kv_channels")
    kw.update(extra or {})
    cls = MLATransformerConfig if m.multi_latent_attention else TransformerConfig
    return cls(**kw)


def build_gpt(plan: Plan, *, num_dense: int, num_moe: int, per_rank: bool, device: str = "cpu",
              pre_process: bool = True, post_process: bool = True, sdpa: bool = True,
              extra: Optional[dict] = None):
    """A real megatron-core ``GPTModel`` (local spec) with ``num_dense`` + ``num_moe`` layers.

    With ``per_rank=False`` and pp > 1, ``num_dense``/``num_moe`` are the model's total layer
    counts and this rank builds its stage (megatron's ``get_num_layers_to_build``).
    """
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    m, p = plan.model, plan.parallel
    cfg = mcore_config(plan, num_dense=num_dense, num_moe=num_moe, per_rank=per_rank, device=device,
                       extra=extra)
    spec = get_gpt_decoder_block_spec(cfg, use_transformer_engine=False)
    if sdpa:
        spec = _with_sdpa(spec, p.cp, "emulate" if per_rank else "allgather")
    tp_v = p.tp
    vocab = m.padded_vocab_size(tp_v)
    if per_rank:
        vocab = vocab // tp_v
    pos = {"rope": "rope", "learned": "learned_absolute", "none": "none"}[m.position_embedding]
    model = GPTModel(cfg, spec, vocab_size=vocab, max_sequence_length=m.seq_length,
                     pre_process=pre_process, post_process=post_process,
                     share_embeddings_and_output_weights=not m.untie_embeddings_and_output_weights,
                     position_embedding_type=pos)
    dev = torch.device(device)
    if dev.type == "cuda":
        model = model.to(dev)
    model.to(torch_dtype(plan))
    return model


@contextlib.contextmanager
def world_size_one(device: str) -> Iterator[None]:
    """A world-size-1 process group with megatron model-parallel state (tp=pp=1) for
    measurement; tears down what it created.  Refuses when another parallel state is active."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from primus_launch.errors import UserError
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install(device)
    created_pg = False
    if not dist.is_initialized():
        mcore_cpu.init_single_process()
        created_pg = True
    elif dist.get_world_size() != 1:
        raise UserError("measurement runs at world size 1; call it outside a multi-process job")
    created_ps = False
    if not ps.model_parallel_is_initialized():
        ps.initialize_model_parallel(1, 1)
        created_ps = True
    if torch.device(device).type == "cpu":
        mcore_cpu.seed_rng_tracker(1234)
    else:
        from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

        model_parallel_cuda_manual_seed(1234)
    try:
        with mcore_cpu.eager_fusions(device):
            yield
    finally:
        if created_ps:
            ps.destroy_model_parallel()
        if created_pg:
            dist.destroy_process_group()


def layer_counts(plan: Plan, measure_layers: int = 2) -> tuple[int, int]:
    """(dense, MoE) layers to build: up to ``measure_layers`` of each kind the plan has; the
    measured time of a kind is the median over its built layers."""
    m = plan.model
    n_moe = m.num_moe_layers
    n_dense = m.num_layers - n_moe
    return (min(n_dense, measure_layers), min(n_moe, measure_layers))


def piece_shapes(plan: Plan, measure_layers: int = 2) -> dict[str, dict[str, Any]]:
    """Name -> per-rank shapes of every piece :func:`pieces` builds (the cache key), computed
    from the plan alone so that a cache hit needs no build."""
    m, p, t = plan.model, plan.parallel, plan.training
    s, b = m.seq_length // p.cp, t.micro_batch_size
    vocab = m.padded_vocab_size(p.tp) // p.tp
    common = {"hidden": m.hidden_size, "seq": s, "mbs": b}
    attn = {"heads": m.num_attention_heads // p.tp,
            "kv_heads": (m.kv_heads // p.tp) if not m.multi_latent_attention else None,
            "kv_channels": m.kv_channels, "qkv_bias": m.add_qkv_bias, "qk_norm": m.qk_layernorm,
            "pos": m.position_embedding,
            "mla": [m.q_lora_rank, m.kv_lora_rank, m.qk_head_dim, m.qk_pos_emb_head_dim, m.v_head_dim]
            if m.multi_latent_attention else None}
    layer = {**common, **attn, "norm": m.normalization, "swiglu": m.swiglu, "bias": m.add_bias_linear}
    n_dense, n_moe = layer_counts(plan, measure_layers)
    out: dict[str, dict[str, Any]] = {
        "embedding": {**common, "vocab_per_rank": vocab, "pos": m.position_embedding,
                      "tied": not m.untie_embeddings_and_output_weights}}
    for i in range(n_dense):
        out[f"dense_layer#{i}"] = {**layer, "ffn": m.ffn_hidden_size // p.tp}
    for i in range(n_dense, n_dense + n_moe):
        out[f"moe_layer#{i}"] = {**layer, "experts_local": max(m.num_experts // p.ep, m.moe_router_topk),
                                 "topk": m.moe_router_topk, "expert_ffn": m.expert_ffn // p.expert_tp,
                                 "shared": m.moe_shared_expert_intermediate_size // p.tp}
    out["attn_core"] = {**common, **attn}
    out["head_loss"] = {**common, "vocab_per_rank": vocab, "norm": m.normalization}
    return out


def _linear_params(module: torch.nn.Module, experts_active: float) -> float:
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


def _attn_fwd_flops(plan: Plan) -> float:
    """Causal attention core forward FLOPs per rank: 2 * b * heads * s^2/2 * (d_qk + d_v)."""
    m, p, t = plan.model, plan.parallel, plan.training
    s = m.seq_length // p.cp
    if m.multi_latent_attention:
        dqk, dv = m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim
    else:
        dqk = dv = m.kv_channels
    return 2.0 * t.micro_batch_size * (m.num_attention_heads // p.tp) * s * s / 2 * (dqk + dv)


def _substitutions(plan: Plan, device: str, framework: str = "megatron") -> list[Substitution]:
    """How a world-size-1 build of the plan's per-rank model differs from its run (module
    docstring of :mod:`.spec`); shared by both builders, each adds its own."""
    m, p, t = plan.model, plan.parallel, plan.training
    out: list[Substitution] = []
    if t.precision == "fp8":
        ok, why = fp8_support(framework, device)
        if not ok:
            out.append(Substitution(("layer", "head_loss", "attn_core", "embedding"), "timed in bf16 instead of fp8",
                                    why or "", "forward / backward scaled by the dry-run roofline's fp8 / bf16 time "
                                               f"ratio of the same piece on {plan.cluster.gpu}"))
    if p.sequence_parallel:
        out.append(Substitution(("layer",), "norms and residuals on the full sequence (no sequence parallelism)",
                                "world size 1 has no tensor-parallel group to shard the sequence over",
                                "SP all-gather / reduce-scatter added analytically; the norms' compute is an upper bound"))
    if p.cp > 1:
        out.append(Substitution(("layer", "attn_core"), f"the other {p.cp - 1} context-parallel rank(s)' keys and "
                                "values are stand-in tensors (this rank's 2 load-balanced chunks attend the whole "
                                "sequence, causal)", "world size 1 has no context-parallel group to gather them from",
                                "the K/V exchange added analytically, overlapped with the measured core"))
    return out


def build_spec(plan: Plan, device: str = "cpu", measure_layers: int = 2) -> BuildSpec:
    """Everything :func:`pieces` builds from (the per-rank ``TransformerConfig``, the ``GPTModel``
    arguments, input shapes, measured dtype) and the substitutions, without building."""
    import importlib.util

    m, p, t = plan.model, plan.parallel, plan.training
    n_dense, n_moe = layer_counts(plan, measure_layers)
    cfg = mcore_config(plan, num_dense=n_dense, num_moe=n_moe, per_rank=True, device=device)
    tied = not m.untie_embeddings_and_output_weights
    pos = {"rope": "rope", "learned": "learned_absolute", "none": "none"}[m.position_embedding]
    model_args = {"vocab_size": m.padded_vocab_size(p.tp) // p.tp, "max_sequence_length": m.seq_length,
                  "share_embeddings_and_output_weights": tied, "position_embedding_type": pos,
                  "layer_spec": "get_gpt_decoder_block_spec(use_transformer_engine=False)",
                  "core_attention": "SDPACoreAttention", "cp": p.cp}
    subs = _substitutions(plan, device, "megatron")
    have_te = importlib.util.find_spec("transformer_engine") is not None
    subs.append(Substitution(("layer",), "megatron-core local spec (torch norms and RoPE, no Transformer Engine kernels)",
                             "the measured path builds the local spec" + ("" if have_te else
                                                                          " (Transformer Engine is not installed)")))
    subs.append(Substitution(("layer", "attn_core"), "torch scaled_dot_product_attention as the core attention",
                             "megatron's local core materialises the s x s scores, which TE / flash attention of real "
                             "runs do not"))
    if n_moe:
        subs.append(Substitution(("moe_layer",), f"allgather token dispatcher at world size 1 (plan: "
                                 f"{t.moe_token_dispatcher})",
                                 "no token leaves the rank at world size 1 (and the alltoall dispatcher creates a CUDA "
                                 "stream, which the CPU has not)",
                                 "EP dispatch / combine added analytically for the plan's dispatcher"))
    shapes = piece_shapes(plan, measure_layers)
    return BuildSpec(framework="megatron", config=cfg, model_args=model_args,
                     inputs={"seq": m.seq_length // p.cp, "mbs": t.micro_batch_size, "hidden": m.hidden_size},
                     layers=(n_dense, n_moe), dtype=torch_dtype_name(plan, device, "megatron"),
                     piece_names=list(shapes), substitutions=subs, extra={"shapes": shapes})


def torch_dtype_name(plan: Plan, device: str, framework: str) -> str:
    """The dtype the pieces are timed in: the plan's, except fp8 where the device or the
    framework's measured path has none (:func:`spec.fp8_support`), then bf16."""
    if plan.training.precision == "fp8":
        ok, _ = fp8_support(framework, device)
        return "fp8" if ok else "bf16"
    return plan.training.precision


def pieces(plan: Plan, device: str, measure_layers: int = 2,
           spec: Optional[BuildSpec] = None) -> tuple[list[Piece], Any]:
    """The measurable pieces of the plan's per-rank model (call inside :func:`world_size_one`).

    Returns (pieces, model): ``embedding`` (token ids -> hidden, incl. the RoPE table),
    ``dense_layer#i`` / ``moe_layer#i`` (one ``TransformerLayer`` each: hidden [s, b, h] with grad
    -> hidden), ``attn_core`` (the first layer's core attention alone: q, k, v -> context),
    ``head_loss`` (final norm + output layer + vocab-parallel cross entropy, mean; with tied
    embeddings the output layer multiplies by the word-embedding weight, as ``GPTModel.forward``
    passes ``shared_embedding_or_output_weight()``).  Backward split: ``flop-ratio`` (megatron's
    linear computes its weight gradient in the input-gradient node) with :func:`bwd_input_fraction`.
    """
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec

    spec = spec or build_spec(plan, device, measure_layers)
    m, p, t = plan.model, plan.parallel, plan.training
    n_dense, n_moe = spec.layers
    cfg = spec.config
    a = spec.model_args
    block = _with_sdpa(get_gpt_decoder_block_spec(cfg, use_transformer_engine=False), a["cp"], "emulate")
    model = GPTModel(cfg, block, vocab_size=a["vocab_size"], max_sequence_length=a["max_sequence_length"],
                     share_embeddings_and_output_weights=a["share_embeddings_and_output_weights"],
                     position_embedding_type=a["position_embedding_type"])
    dev = torch.device(device)
    dtype = cfg.params_dtype
    if dev.type == "cuda":
        model = model.to(dev)
    model.to(dtype)
    model.train()
    s, b = spec.inputs["seq"], spec.inputs["mbs"]
    T = s * b
    vocab = model.vocab_size
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(0, vocab, (b, s), generator=gen).to(dev)
    labels = torch.randint(0, vocab, (b, s), generator=gen).to(dev)
    pos_ids = torch.arange(s, device=dev).unsqueeze(0).expand(b, -1)
    shapes = spec.extra["shapes"]
    out: list[Piece] = []
    rope = getattr(model, "rotary_pos_emb", None)

    def rope_table():
        return rope(s) if rope is not None and m.position_embedding == "rope" else None

    def emb_forward():
        rope_table()
        return model.embedding(input_ids=ids, position_ids=pos_ids)

    out.append(Piece("embedding", emb_forward, [], list(model.embedding.parameters()), shapes["embedding"],
                     flop_split=0.0, split="no-input"))

    rope_pe = rope_table()
    attn_f = _attn_fwd_flops(plan)
    for i, layer in enumerate(model.decoder.layers):
        kind = "dense_layer" if i < n_dense else "moe_layer"
        x = (torch.randn(s, b, m.hidden_size, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)

        def layer_forward(x, layer=layer):
            y, _ = layer(x, attention_mask=None, rotary_pos_emb=rope_pe)
            return y

        active = 1.0
        if kind == "moe_layer":
            active = m.moe_router_topk / layer.mlp.num_local_experts
        r = bwd_input_fraction(_linear_params(layer, active), T, attn_f)
        out.append(Piece(f"{kind}#{i}", layer_forward, [x], list(layer.parameters()),
                         shapes[f"{kind}#{i}"], flop_split=r, split="flop-ratio"))

    core = model.decoder.layers[0].self_attention.core_attention
    heads = m.num_attention_heads // p.tp
    if m.multi_latent_attention:
        dq, dv, kvh = m.qk_head_dim + m.qk_pos_emb_head_dim, m.v_head_dim, heads
    else:
        dq = dv = m.kv_channels
        kvh = m.kv_heads // p.tp
    q = torch.randn(s, b, heads, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    k = torch.randn(s, b, kvh, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    v = torch.randn(s, b, kvh, dv, generator=gen).to(dev, dtype).requires_grad_(True)

    def core_forward(q, k, v):
        return core(q, k, v, None)

    out.append(Piece("attn_core", core_forward, [q, k, v], [], shapes["attn_core"], flop_split=1.0,
                     split="no-weights"))

    head_x = (torch.randn(s, b, m.hidden_size, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)
    tied = model.share_embeddings_and_output_weights
    head_params = list(model.decoder.final_layernorm.parameters()) + (
        [model.shared_embedding_or_output_weight()] if tied else list(model.output_layer.parameters()))

    def head_forward(x):
        h = model.decoder.final_layernorm(x)
        w = model.shared_embedding_or_output_weight() if tied else None
        logits, _ = model.output_layer(h, weight=w)
        loss = model.compute_language_model_loss(labels, logits)
        return loss.float().mean()

    out.append(Piece("head_loss", head_forward, [head_x], head_params, shapes["head_loss"],
                     flop_split=bwd_input_fraction(float(m.hidden_size * vocab), T, 0.0), split="flop-ratio"))
    return out, model


def measurement_flops_estimate(plan: Plan, measure_layers: int = 2) -> float:
    """Rough FLOPs of one measurement pass (fwd+bwd, all pieces, per-rank shapes):
    ``6 * tokens * params`` of the built layers plus ``12 * s^2 * h * b`` attention per layer
    (Kaplan et al. 2020 / Narayanan et al. 2021 counting); used only to warn before a slow CPU run."""
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
