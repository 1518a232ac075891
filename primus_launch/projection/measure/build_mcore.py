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
  sequence ``seq_length / cp``; MoE layers are rank 0's of the run's expert-parallel group
  (:mod:`.mirror_ranks`: a router over all ``num_experts``, ``num_experts / ep`` local experts of
  ``moe_ffn_hidden_size / etp``, the dispatcher's multi-rank path with the other ranks' tokens as
  copies of this rank's), shared experts ``/ tp``.  Collectives (TP/SP all-gather/reduce-scatter,
  EP all-to-all, CP ring, DP, PP) are not in it: the cost model adds them analytically.
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
from typing import Any, Callable, Iterator, Optional

import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.mirror_ranks import expert_groups, mirror_expert_tp, mirrored_collectives
from primus_launch.projection.measure.piece import (
    Piece,
    attention_mask,
    attn_core_dims,
    attn_fwd_flops,
    bwd_input_fraction,
    cp_positions,
    expert_ranks,
    layer_counts,
    layer_kinds,
    layer_piece_name,
    linear_params,
    piece_shapes,
)
from primus_launch.projection.measure.spec import (
    BuildSpec,
    Substitution,
    common_substitutions,
    torch_dtype,
    torch_dtype_name,
)


class _KVAllGather(torch.autograd.Function):
    """All-gather of one of K / V over the context-parallel group along the sequence (first) dim,
    exchanging what TransformerEngine's ``AttnFuncWithCPAndKVAllGather`` exchanges
    (``pytorch/attention/dot_product_attention/context_parallel.py``): forward
    ``all_gather_into_tensor`` (TE ``gather_along_first_dim``); backward the re-all-gather of the
    local tensor (TE keeps only the local K, V and gathers them again for its backward; the SDPA
    core here keeps the gathered ones through autograd, so the re-gather is issued for its cost
    only) and the ``reduce_scatter_tensor`` of the gradient (TE ``reduce_scatter_along_first_dim``).
    ``torch.distributed.nn.functional.all_gather`` would instead run gloo's backward as an
    all-to-all by scatters plus a sum, which no GPU run does."""

    @staticmethod
    def forward(ctx, t, group):
        import torch.distributed as dist

        t = t.contiguous()
        n = dist.get_world_size(group)
        ctx.group, ctx.n = group, n
        ctx.save_for_backward(t)
        out = t.new_empty((n * t.size(0), *t.shape[1:]))
        dist.all_gather_into_tensor(out, t, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        import torch.distributed as dist

        (t,) = ctx.saved_tensors
        regather = t.new_empty((ctx.n * t.size(0), *t.shape[1:]))
        dist.all_gather_into_tensor(regather, t, group=ctx.group)
        del regather
        out = grad.new_empty(t.shape)
        dist.reduce_scatter_tensor(out, grad.contiguous(), group=ctx.group)
        return out, None


def _sdpa_core_attention_class(cp: int = 1, cp_mode: str = "emulate"):
    """The core-attention class for ``cp`` context-parallel ranks (1: plain causal SDPA).

    With ``cp > 1`` a rank's queries (its two load-balanced chunks, :func:`cp_positions`) attend
    to the keys and values of the WHOLE sequence under the causal mask (:func:`.piece.cp_mask`), as each
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
        Sliding window: the layers megatron's ``is_layer_window_attention`` marks attend through
        :func:`attention_mask` (SDPA takes no window argument: a masked SDPA computes every score).
        ``softmax_type`` off-by-one / learnable: the parent builds the sink (``softmax_offset``), the
        SDPA core leaves it out (one extra logit per row: a stated substitution).
        Context parallelism: see :func:`_sdpa_core_attention_class`.
        """

        cp_size = cp
        mode = cp_mode

        def __init__(self, config, *args, k_channels=None, v_channels=None, **kwargs):
            from megatron.core.transformer.utils import is_layer_window_attention

            if getattr(config, "context_parallel_size", 1) > 1:  # the parent refuses CP (TE only)
                import copy

                config = copy.copy(config)
                config.context_parallel_size = 1
            super().__init__(config, *args, **kwargs)
            layer_number = kwargs.get("layer_number", args[0] if args else 1)
            self.window = (config.window_size[0] if is_layer_window_attention(
                config.window_size, config.window_attn_skip_freq, layer_number) else None)
            self._standin: dict = {}

        def _full_kv(self, t: torch.Tensor, name: str) -> torch.Tensor:
            """[s, b, g, d] in global order from this rank's [s/cp, b, g, d] (load-balanced chunks)."""
            n = t.size(0) // 2
            if self.mode == "allgather":
                from megatron.core import parallel_state as ps

                group = ps.get_context_parallel_group()
                parts = list(_KVAllGather.apply(t, group).chunk(self.cp_size, dim=0))
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
            q_pos = None
            if self.cp_size > 1:
                key, value = self._full_kv(key, "k"), self._full_kv(value, "v")
                q_pos = cp_positions(key.size(0), self.cp_size, self._rank)
            mask = self._mask(q_pos, key.size(0), query.device)
            q = query.permute(1, 2, 0, 3)
            k = key.permute(1, 2, 0, 3)
            v = value.permute(1, 2, 0, 3)
            drop = self.config.attention_dropout if self.training else 0.0
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, dropout_p=drop, scale=self.softmax_scale,
                enable_gqa=q.size(1) != k.size(1))
            sq, b = out.size(2), out.size(0)
            return out.permute(2, 0, 1, 3).reshape(sq, b, -1)

        def _mask(self, q_pos, sk: int, device):
            key = (None if q_pos is None else tuple(q_pos), sk, self.window, str(device))
            if getattr(self, "_mask_key", None) != key:
                self._mask_key, self._mask_val = key, attention_mask(q_pos, sk, self.window, device)
            return self._mask_val

    return SDPACoreAttention


def uses_megatron_core_attention(plan: Plan) -> bool:
    """Whether the measured layers keep megatron's own local ``DotProductAttention`` (the plan's
    ``attention_backend`` is unfused / local: the materialised s x s scores are what the run does;
    not with CP, which megatron's local core refuses), else :class:`SDPACoreAttention`."""
    return plan.training.attention_backend in ("unfused", "local") and plan.parallel.cp == 1 \
        and not plan.model.multi_latent_attention


def _with_sdpa(block_spec, cp: int = 1, cp_mode: str = "emulate", keep_megatron: bool = False):
    if keep_megatron:
        return block_spec
    cls = _sdpa_core_attention_class(cp, cp_mode)
    for spec in block_spec.layer_specs:
        sub = spec.submodules.self_attention.submodules
        sub.core_attention = cls
    return block_spec


def activation_function(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """megatron-core's ``activation_func`` for the plan's ``activation`` (``transformer_config.py``:
    silu / gelu / relu from torch, ``quick_gelu`` from ``fusions.fused_bias_geglu``, ``squared_relu``
    from ``activations``)."""
    import torch.nn.functional as F

    if name == "quick_gelu":
        from megatron.core.fusions.fused_bias_geglu import quick_gelu

        return quick_gelu
    if name == "squared_relu":
        from megatron.core.activations import squared_relu

        return squared_relu
    return {"silu": F.silu, "gelu": F.gelu, "relu": F.relu}[name]


def measured_dispatcher(plan: Plan) -> str:
    """The MoE token dispatcher the measured layers run: the plan's ``alltoall`` / ``allgather``
    (megatron's own; the CPU shim gives ``alltoall`` its stream), ``alltoall`` for the flex backends
    ``deepep`` / ``hybridep`` (they need the DeepEP / HybridEP libraries and a GPU fabric)."""
    d = plan.training.moe_token_dispatcher
    return d if d in ("alltoall", "allgather") else "alltoall"


def default_kinds(plan: Plan, num_dense: int, num_moe: int, per_rank: bool) -> list[tuple[bool, bool]]:
    """(MoE, sliding window) per built layer when the caller gives counts only: the plan's own
    pattern for a full model, else ``num_dense`` dense then ``num_moe`` MoE layers (windowed when
    every layer of the plan is)."""
    m = plan.model
    if not per_rank and num_dense + num_moe == m.num_layers:
        return [(m.is_moe_layer(i), m.is_window_layer(i)) for i in range(m.num_layers)]
    win = m.window_size is not None and m.num_window_layers == m.num_layers
    return [(False, win)] * num_dense + [(True, win)] * num_moe


def mcore_config(plan: Plan, *, num_dense: int = 0, num_moe: int = 0, per_rank: bool, device: str = "cpu",
                 extra: Optional[dict] = None, kinds: Optional[list[tuple[bool, bool]]] = None,
                 mtp: int = 0) -> Any:
    """megatron-core ``TransformerConfig`` (``MLATransformerConfig`` for MLA) for layers of the plan's
    architecture: ``kinds`` = (MoE, sliding window) per built layer (default :func:`default_kinds`
    of ``num_dense`` / ``num_moe``), ``mtp`` MTP layers; see the module docstring for ``per_rank``.

    From the plan: dropout (``hidden_dropout`` / ``attention_dropout``: the Megatron reader's 0.1
    default reaches the layers), ``activation`` (gated when ``swiglu``; megatron's fused bias-SwiGLU /
    GeGLU where megatron-LM fuses by default), ``softmax_type``, sliding window (``window_size`` as
    ``(window, 0)``, ``window_attn_skip_freq`` = the built layers' pattern), MoE layer pattern
    (``moe_layer_freq``), the token dispatcher (:func:`measured_dispatcher`); experts as megatron's
    ``SequentialMLP`` (its grouped GEMMs need the ``grouped_gemm`` package or Transformer Engine) and
    unfused permutation (a TE kernel) whatever the plan says: stated substitutions."""
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    from primus_launch.frameworks import mcore_cpu

    m, p = plan.model, plan.parallel
    kinds = list(kinds) if kinds is not None else default_kinds(plan, num_dense, num_moe, per_rank)
    tp = p.tp if per_rank else 1
    etp = p.expert_tp if per_rank else 1
    dtype = torch_dtype(plan)
    heads = m.num_attention_heads // tp
    # QKV sub-sharding (fewer query groups than TP ranks): one key / value group per rank, as the rank's core
    # attention has (_megatron_substitutions)
    groups = max(1, m.kv_heads // tp) if not m.multi_latent_attention else None
    kw: dict[str, Any] = dict(
        num_layers=len(kinds),
        hidden_size=m.hidden_size,
        ffn_hidden_size=m.ffn_hidden_size // tp,
        num_attention_heads=heads,
        num_query_groups=groups,
        kv_channels=m.kv_channels,
        hidden_dropout=m.hidden_dropout,
        attention_dropout=m.attention_dropout,
        normalization="RMSNorm" if m.normalization == "rmsnorm" else "LayerNorm",
        gated_linear_unit=m.swiglu,
        activation_func=activation_function(m.activation),
        add_bias_linear=m.add_bias_linear,
        add_qkv_bias=m.add_qkv_bias,
        qk_layernorm=m.qk_layernorm,
        softmax_type=m.softmax_type,
        params_dtype=dtype,
        pipeline_dtype=dtype,
        bf16=dtype == torch.bfloat16,
        fp16=dtype == torch.float16,
        **mcore_cpu.config_overrides(device),
    )
    # megatron-LM's default --bias-swiglu-fusion / GeGLU fusion (bias_activation_fusion): the fused
    # gated activation keeps only fc1's output for backward; on the CPU it runs eagerly
    # (mcore_cpu.eager_fusions); megatron's dense MLP fuses gated silu and gelu only (mlp.py)
    kw["bias_activation_fusion"] = bool(m.swiglu) and m.activation in ("silu", "gelu")
    if any(w for _, w in kinds) and m.window_size is not None:
        kw.update(window_size=(m.window_size, 0), window_attn_skip_freq=[1 if w else 0 for _, w in kinds])
    if not per_rank:
        kw.update(tensor_model_parallel_size=p.tp, pipeline_model_parallel_size=p.pp,
                  context_parallel_size=p.cp, expert_model_parallel_size=p.ep,
                  expert_tensor_parallel_size=p.expert_tp, sequence_parallel=p.sequence_parallel)
    if any(moe for moe, _ in kinds):
        kw.update(num_moe_experts=m.num_experts, moe_router_topk=m.moe_router_topk,
                  moe_ffn_hidden_size=m.expert_ffn // etp,
                  moe_layer_freq=[1 if moe else 0 for moe, _ in kinds],
                  moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
                  moe_token_dispatcher_type=measured_dispatcher(plan), moe_grouped_gemm=False,
                  moe_permute_fusion=False, add_bias_linear=False)
        if plan.training.moe_router_force_load_balancing:
            # megatron's --moe-router-force-load-balancing (router.py: random logits per token), the
            # balanced routing the cost model assumes
            kw["moe_router_force_load_balancing"] = True
        if m.moe_shared_expert_intermediate_size:
            kw["moe_shared_expert_intermediate_size"] = m.moe_shared_expert_intermediate_size // tp
    if mtp:
        kw["mtp_num_layers"] = mtp
    if m.multi_latent_attention:
        kw.pop("num_query_groups")
        kw.update(q_lora_rank=m.q_lora_rank, kv_lora_rank=m.kv_lora_rank, qk_head_dim=m.qk_head_dim,
                  qk_pos_emb_head_dim=m.qk_pos_emb_head_dim, v_head_dim=m.v_head_dim,
                  rope_type="yarn" if m.position_embedding == "yarn" else "rope")
        kw.pop("kv_channels")
    kw.update(extra or {})
    cls = MLATransformerConfig if m.multi_latent_attention else TransformerConfig
    return cls(**kw)


def position_type(plan: Plan) -> str:
    """GPTModel ``position_embedding_type``: YaRN (outside MLA) timed as plain RoPE (GPTModel's YaRN
    needs the MLA config's YaRN fields; the rotation kernels are the same, the table differs)."""
    return {"rope": "rope", "yarn": "rope", "learned": "learned_absolute", "none": "none"}[plan.model.position_embedding]


def build_gpt(plan: Plan, *, num_dense: int, num_moe: int, per_rank: bool, device: str = "cpu",
              pre_process: bool = True, post_process: bool = True, sdpa: bool = True,
              extra: Optional[dict] = None) -> torch.nn.Module:
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
        spec = _with_sdpa(spec, p.cp, "emulate" if per_rank else "allgather", uses_megatron_core_attention(plan))
    tp_v = p.tp
    vocab = m.padded_vocab_size(tp_v)
    if per_rank:
        vocab = vocab // tp_v
    model = GPTModel(cfg, spec, vocab_size=vocab, max_sequence_length=m.seq_length,
                     pre_process=pre_process, post_process=post_process,
                     share_embeddings_and_output_weights=not m.untie_embeddings_and_output_weights,
                     position_embedding_type=position_type(plan),
                     pg_collection=per_rank_groups(plan, cfg) if per_rank else None)
    if per_rank:
        mirror_expert_tp(model, p.ep, p.expert_tp)
    dev = torch.device(device)
    if dev.type == "cuda":
        model = model.to(dev)
    model.to(torch_dtype(plan))
    return model


def per_rank_groups(plan: Plan, cfg: Any) -> Any:
    """The process groups of a per-rank build: megatron's world-size-1 groups, with the expert-
    parallel ones mirrored (:func:`.mirror_ranks.expert_groups`) when ``cfg`` has MoE layers and the
    plan's expert-TP x EP has more than one rank; None (megatron's own) otherwise."""
    p = plan.parallel
    if not cfg.num_moe_experts:
        return None
    return expert_groups(p.ep, p.expert_tp)


@contextlib.contextmanager
def world_size_one(device: str) -> Iterator[None]:
    """A world-size-1 process group with megatron model-parallel state (tp=pp=1) for
    measurement; tears down what it created.  Refuses when another parallel state is active.

    Creating and destroying the gloo process group and megatron's groups are sections a signal does not
    cut (:func:`primus_launch.interrupt.deferred`: SIGINT / SIGTERM there is raised when the section
    ends): a ``KeyboardInterrupt`` raised from the Python half of ``init_process_group`` /
    ``destroy_process_group`` would leave a C++ ``ProcessGroupGloo`` (its worker threads, its store)
    built but unregistered, or registered but half torn down, and the teardown would never run."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    from primus_launch import interrupt
    from primus_launch.errors import UserError
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install(device)
    created_pg = created_ps = False
    try:
        with interrupt.deferred():
            if not dist.is_initialized():
                if ps.model_parallel_is_initialized():  # its groups belong to a process group destroyed since
                    ps.destroy_model_parallel()
                mcore_cpu.init_single_process()
                created_pg = True
            elif dist.get_world_size() != 1:
                raise UserError("measurement runs at world size 1; call it outside a multi-process job")
            if not ps.model_parallel_is_initialized():
                ps.initialize_model_parallel(1, 1)
                created_ps = True
        if torch.device(device).type == "cpu":
            mcore_cpu.seed_rng_tracker(1234)
        else:
            from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

            # force_reset_rng: a CPU measurement earlier in the process left mcore_cpu's CPU tracker in place,
            # whose forks would not reach the CUDA generator
            model_parallel_cuda_manual_seed(1234, force_reset_rng=True)
        # megatron's MoE aux-loss logging tracker is process-global and sized by the first model that
        # logs into it (moe_utils.save_to_aux_losses_tracker: a tensor of num_layers per loss); a later
        # build with more layers would index past it, so each build here starts and ends with it empty
        from megatron.core.transformer.moe.moe_utils import get_moe_layer_wise_logging_tracker

        get_moe_layer_wise_logging_tracker().clear()
        try:
            with mcore_cpu.eager_fusions(device), mirrored_collectives():
                yield
        finally:
            get_moe_layer_wise_logging_tracker().clear()
    finally:
        with interrupt.deferred():
            if created_ps:
                ps.destroy_model_parallel()
            if created_pg:
                dist.destroy_process_group()


def _megatron_substitutions(plan: Plan, device: str, kinds: list[tuple[bool, bool]]) -> list[Substitution]:
    """The Megatron builder's own substitutions (see :func:`mcore_config`)."""
    import importlib.util

    m, p, t = plan.model, plan.parallel, plan.training
    subs: list[Substitution] = []
    have_te = importlib.util.find_spec("transformer_engine") is not None
    subs.append(Substitution(("layer", "mtp"), "megatron-core local spec (torch norms and RoPE, no Transformer Engine "
                             "kernels)", "the measured path builds the local spec" + ("" if have_te else
                                                                                      " (Transformer Engine is not installed)")))
    if not uses_megatron_core_attention(plan):
        subs.append(Substitution(("layer", "attn_core"), "torch scaled_dot_product_attention as the core attention",
                                 "megatron's local core materialises the s x s scores, which TE / flash attention of "
                                 f"real runs do not (plan: attention_backend={t.attention_backend})"))
        if m.attention_dropout > 0 and torch.device(device).type == "cpu":
            subs.append(Substitution(("layer", "attn_core"), f"attention dropout ({m.attention_dropout:g}) inside torch "
                                     "SDPA's CPU math kernel, which keeps the s x s probabilities and dropout mask",
                                     "the CPU has no fused attention kernel with in-kernel dropout",
                                     "not corrected: the measured time and kept bytes of the core are upper bounds"))
        if m.softmax_type != "vanilla":
            subs.append(Substitution(("layer", "attn_core"), f"vanilla softmax in the core (plan: {m.softmax_type}; "
                                     "the layer builds its softmax_offset)", "torch SDPA has no attention sink",
                                     "not corrected: the sink adds one logit per query row (< 1/s of the core's work)"))
    if p.tp > 1 and not m.multi_latent_attention and m.kv_heads < p.tp:
        nq, ng, d = m.num_attention_heads, m.kv_heads, m.kv_channels
        subs.append(Substitution(("layer",), f"one whole key / value group per rank: QKV {(nq // p.tp + 2) * d} wide "
                                 f"(plan: megatron-core's QKV sub-sharding, {(nq + 2 * ng) * d // p.tp} wide, its "
                                 "output "
                                 f"all-gathered to {(nq + 2 * ng) * d} and the rank's group sliced out)",
                                 f"{ng} query groups < TP {p.tp}: a world-size-1 build has no TP group to gather over; "
                                 "the core attention is the same (nq / tp query heads, one key / value head)",
                                 "the all-gather and its reduce-scatter added analytically (cost/tp_comm.py "
                                 "qkv_subshard_comm); not corrected: the measured QKV GEMM is "
                                 f"{2 * d - 2 * ng * d // p.tp} columns wider, the gather's copies are not in it"))
    if m.position_embedding == "yarn" and not m.multi_latent_attention:
        subs.append(Substitution(("layer", "embedding"), "plain RoPE instead of YaRN",
                                 "GPTModel's YaRN needs the MLA config's YaRN fields; the rotation kernels are the same",
                                 "not corrected (only the frequency table differs)"))
    if any(w for _, w in kinds):
        subs.append(Substitution(
            ("dense_window_layer", "moe_window_layer", "attn_core_window"),
            f"sliding-window attention (window {m.window_size}) as a masked core over every score",
            "neither torch SDPA nor megatron's local core skips the blocks outside the window, as the flash kernels of "
            "real runs do", "window layers: the measured masked core (attn_core_window) replaced by the measured causal "
            "core (attn_core) times the dry-run roofline's window / full core-attention time ratio", keyed=False))
    if any(moe for moe, _ in kinds):
        d = t.moe_token_dispatcher
        md = measured_dispatcher(plan)
        n = expert_ranks(p.ep, p.expert_tp)
        subs.append(Substitution(("moe_layer", "moe_window_layer"), f"megatron's {md} token dispatcher at world size 1"
                                 + (f" (plan: {d})" if d != md else "")
                                 + (f", as rank 0 of its {n}-rank expert group whose other ranks hold this rank's "
                                    f"tokens (the router scores all {m.num_experts} experts, {m.num_experts // p.ep} "
                                    "are local; the exchanges copy this rank's data: mirror_ranks)" if n > 1 else ""),
                                 "no token leaves the rank at world size 1" + (
                                     f"; {d} needs its library and a GPU fabric" if d != md else ""),
                                 "EP dispatch / combine added analytically for the plan's dispatcher"
                                 + (f"; the local permutation scaled by the dry-run's {d} / {md} layer ratio"
                                    if d != md else ""),
                                 keyed=d == md, alt={"training": {"moe_token_dispatcher": md}} if d != md else None))
        if t.moe_grouped_gemm:
            subs.append(Substitution(("moe_layer", "moe_window_layer"), "one GEMM per local expert (megatron "
                                     "SequentialMLP) instead of grouped GEMMs",
                                     "megatron's grouped experts need the grouped_gemm package (GroupedMLP) or "
                                     "Transformer Engine (TEGroupedMLP)",
                                     "MoE layers scaled by the dry-run roofline's grouped / per-expert GEMM layer ratio",
                                     keyed=False, alt={"training": {"moe_grouped_gemm": False}}))
        if t.moe_permute_fusion:
            subs.append(Substitution(("moe_layer", "moe_window_layer"), "unfused token permutation",
                                     "the fused permute is a Transformer Engine kernel",
                                     "MoE layers scaled by the dry-run roofline's fused / unfused permutation layer "
                                     "ratio", keyed=False, alt={"training": {"moe_permute_fusion": False}}))
    return subs


# model_args a piece kind does not read (left out of its cache key)
_NOT_FOR_LAYERS = ("vocab_size", "share_embeddings_and_output_weights", "max_sequence_length")
ARGS_NOT_FOR = {k: _NOT_FOR_LAYERS for k in ("dense_layer", "moe_layer", "dense_window_layer", "moe_window_layer",
                                             "attn_core", "attn_core_window")}


def build_spec(plan: Plan, device: str = "cpu", measure_layers: int = 2) -> BuildSpec:
    """Everything :func:`pieces` builds from (the per-rank ``TransformerConfig``, the ``GPTModel``
    arguments, input shapes, measured dtype) and the substitutions, without building."""
    m, p, t = plan.model, plan.parallel, plan.training
    kinds = layer_kinds(plan, measure_layers)
    n_dense, n_moe = layer_counts(plan, measure_layers)
    mtp = 1 if m.mtp_num_layers else 0
    cfg = mcore_config(plan, per_rank=True, device=device, kinds=kinds, mtp=mtp)
    tied = not m.untie_embeddings_and_output_weights
    keep = uses_megatron_core_attention(plan)
    model_args = {"vocab_size": m.padded_vocab_size(p.tp) // p.tp, "max_sequence_length": m.seq_length,
                  "share_embeddings_and_output_weights": tied, "position_embedding_type": position_type(plan),
                  "layer_spec": "get_gpt_decoder_block_spec(use_transformer_engine=False)",
                  "core_attention": "DotProductAttention" if keep else "SDPACoreAttention", "cp": p.cp,
                  "kinds": [list(k) for k in kinds]}
    if mtp:
        model_args["mtp_block_spec"] = "get_gpt_mtp_block_spec(use_transformer_engine=False)"
        model_args["mtp_eh_proj_out"] = m.hidden_size // p.tp
    subs = common_substitutions(plan, device, "megatron") + _megatron_substitutions(plan, device, kinds)
    shapes = piece_shapes(plan, measure_layers)
    return BuildSpec(framework="megatron", config=cfg, model_args=model_args,
                     inputs={"seq": m.seq_length // p.cp, "mbs": t.micro_batch_size, "hidden": m.hidden_size},
                     layers=(n_dense, n_moe), dtype=torch_dtype_name(plan, device, "megatron"),
                     piece_names=list(shapes), substitutions=subs, extra={"shapes": shapes, "kinds": kinds},
                     args_not_for=dict(ARGS_NOT_FOR))


def pieces(plan: Plan, device: str, measure_layers: int = 2,
           spec: Optional[BuildSpec] = None) -> tuple[list[Piece], Any]:
    """The measurable pieces of the plan's per-rank model (call inside :func:`world_size_one`).

    Returns (pieces, model): ``embedding`` (token ids -> hidden, incl. the RoPE table), one piece
    per built ``TransformerLayer`` (:func:`layer_piece_name`: hidden [s, b, h] with grad -> hidden),
    ``attn_core`` (a full-attention core alone: q, k, v -> context) and, with sliding-window layers,
    ``attn_core_window`` (a windowed layer's core), ``mtp`` with MTP layers (megatron's own
    ``MultiTokenPredictionLayer`` up to its transformer layer: the shifted tokens' embedding,
    ``enorm`` / ``hnorm``, their concatenation and ``eh_proj`` -- its transformer layer and output
    head are priced as a decoder layer and a head), ``head_loss`` (final norm + output layer +
    vocab-parallel cross entropy, mean; with tied embeddings the output layer multiplies by the
    word-embedding weight, as ``GPTModel.forward`` passes ``shared_embedding_or_output_weight()``).
    Backward split: ``flop-ratio`` (megatron's linear computes its weight gradient in the
    input-gradient node) with :func:`bwd_input_fraction`.
    """
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec, get_gpt_mtp_block_spec

    spec = spec or build_spec(plan, device, measure_layers)
    m, p, t = plan.model, plan.parallel, plan.training
    kinds = spec.extra["kinds"]
    cfg = spec.config
    a = spec.model_args
    keep = a["core_attention"] == "DotProductAttention"
    block = _with_sdpa(get_gpt_decoder_block_spec(cfg, use_transformer_engine=False), a["cp"], "emulate", keep)
    mtp_spec = get_gpt_mtp_block_spec(cfg, block, use_transformer_engine=False) if cfg.mtp_num_layers else None
    model = GPTModel(cfg, block, vocab_size=a["vocab_size"], max_sequence_length=a["max_sequence_length"],
                     share_embeddings_and_output_weights=a["share_embeddings_and_output_weights"],
                     position_embedding_type=a["position_embedding_type"], mtp_block_spec=mtp_spec,
                     pg_collection=per_rank_groups(plan, cfg))
    mirror_expert_tp(model, p.ep, p.expert_tp)
    mtp_layer = model.mtp.layers[0] if mtp_spec is not None else None
    if mtp_layer is not None and a["mtp_eh_proj_out"] != m.hidden_size:  # the TP shard of eh_proj
        e = mtp_layer.eh_proj
        mtp_layer.eh_proj = type(e)(2 * m.hidden_size, a["mtp_eh_proj_out"], config=cfg, init_method=cfg.init_method,
                                    gather_output=False, bias=False, skip_bias_add=False, is_expert=False)
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
        return rope(s) if rope is not None and a["position_embedding_type"] == "rope" else None

    def emb_forward():
        rope_table()
        return model.embedding(input_ids=ids, position_ids=pos_ids)

    out.append(Piece("embedding", emb_forward, [], list(model.embedding.parameters()), shapes["embedding"],
                     flop_split=0.0, split="no-input"))

    rope_pe = rope_table()
    attn_f = attn_fwd_flops(plan)
    for i, layer in enumerate(model.decoder.layers):
        moe, win = kinds[i]
        name = layer_piece_name(i, moe, win)
        x = (torch.randn(s, b, m.hidden_size, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)

        def layer_forward(x, layer=layer):
            y, _ = layer(x, attention_mask=None, rotary_pos_emb=rope_pe)
            return y

        # balanced routing: the local experts' GEMMs see topk x (token ranks) / num_experts of
        # their weights per token of this rank (mirror_ranks)
        active = m.moe_router_topk * expert_ranks(p.ep, p.expert_tp) / m.num_experts if moe else 1.0
        r = bwd_input_fraction(linear_params(layer, active), T, attn_f)
        out.append(Piece(name, layer_forward, [x], list(layer.parameters()), shapes[name], flop_split=r,
                         split="flop-ratio", routed=moe and plan.training.moe_router_force_load_balancing))

    heads, kvh, dq, dv = attn_core_dims(plan)
    q = torch.randn(s, b, heads, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    k = torch.randn(s, b, kvh, dq, generator=gen).to(dev, dtype).requires_grad_(True)
    v = torch.randn(s, b, kvh, dv, generator=gen).to(dev, dtype).requires_grad_(True)
    layers = list(model.decoder.layers)
    full_i = next((i for i, (_, w) in enumerate(kinds) if not w), 0)
    cores = [("attn_core", layers[full_i].self_attention.core_attention, None)]
    if "attn_core_window" in shapes:
        win_i = next(i for i, (_, w) in enumerate(kinds) if w)
        cores.append(("attn_core_window", layers[win_i].self_attention.core_attention, m.window_size))
    for name, core, window in cores:

        def core_forward(q, k, v, core=core, window=window):
            if keep:
                return core(q, k, v, None)
            saved, core.window = core.window, window  # a full-attention core even when every layer is windowed
            try:
                return core(q, k, v, None)
            finally:
                core.window = saved

        out.append(Piece(name, core_forward, [q, k, v], [], shapes[name], flop_split=1.0, split="no-weights"))

    if mtp_layer is not None:
        mtp_x = (torch.randn(s, b, m.hidden_size, generator=gen) * 0.5).to(dev, dtype).requires_grad_(True)

        def mtp_forward(hidden):
            _, _, dec_in, hs = mtp_layer._get_embeddings(input_ids=ids, position_ids=pos_ids,
                                                         embedding=model.embedding, hidden_states=hidden)
            return mtp_layer._concat_embeddings(hs, dec_in)

        mtp_params = [q_ for mod in (mtp_layer.enorm, mtp_layer.hnorm, mtp_layer.eh_proj, model.embedding)
                      for q_ in mod.parameters()]
        out.append(Piece("mtp", mtp_forward, [mtp_x], mtp_params, shapes["mtp"], split="flop-ratio",
                         flop_split=bwd_input_fraction(float(2 * m.hidden_size * a["mtp_eh_proj_out"]), T, 0.0)))

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
