"""Activation memory of one micro-batch: what autograd keeps per decoder layer, per GPU.

Reference point: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
Models", arXiv 2205.05198, sec. 4 and Table 2.  Per layer of a GPT (MHA, GeLU MLP with
``F = 4h``, dropout, unfused softmax attention, 2-byte activations) they count
``sbh (34 + 5 a s / h)`` bytes:

- attention ``11 sbh + 5 a s^2 b``: QKV input ``2sbh``, Q and K ``4sbh``, softmax output
  ``2as^2b``, its dropout mask ``as^2b`` and dropped output ``2as^2b``, V ``2sbh``, projection
  input ``2sbh``, dropout mask ``sbh``;
- MLP ``19 sbh``: input ``2sbh``, GeLU input ``8sbh``, GeLU output ``8sbh``, dropout mask ``sbh``;
- two LayerNorm inputs ``4sbh``.

With tensor parallelism ``t`` and sequence parallelism everything divides by ``t``
(``sbh (34/t + 5as/(ht))``); without SP the ``10 sbh`` of LayerNorm inputs, QKV/MLP inputs and
dropout masks stay replicated (``sbh (10 + 24/t + 5as/(ht))``); selective recompute drops the
``5as^2b`` term; full recompute keeps the layer input ``2sbh`` (``/t`` with SP).

This module generalises that count tensor by tensor (so it reproduces Table 2 exactly with
:data:`KORTHIKANTI`) and by default assumes megatron-core with Transformer Engine (:data:`TE`):

- flash / fused attention (no ``s x s`` tensor): the core attention keeps Q, K, V, the output O
  and the fp32 log-sum-exp ``4 b (nq/t) s``; selective recompute of ``core_attn`` then only drops
  the log-sum-exp (Q, K, V are the checkpoint's inputs, O is the projection's input);
- GQA: the fused QKV output ``(nq + 2 nkv) d`` stays alive because V is a view of it; RoPE writes
  new rotated Q ``nq d`` and K ``nkv d`` tensors (``d`` = head dim);
- SwiGLU: fused ``bias_swiglu`` keeps fc1's output ``2F`` and fc2 keeps its input ``F``
  (non-gated GeLU: ``F`` + ``F``); ``F`` is the MLP intermediate size, split over TP;
- MLA (DeepSeek-V2/V3): input norm, the down projections' input ``h``, q/kv norms and the up
  projections' inputs ``ql`` and ``kvl`` (not TP-split; sequence-split under SP), the RoPE-concatenated query and key
  ``nq (dn + dr) / t`` each, a contiguous V ``nq dv / t``, the output ``nq dv / t``, the
  log-sum-exp, and the fp32 RoPE frequencies MLA computes in every layer ``4 s dr``;
- norms keep their input in the activation dtype (+ fp32 rstd per token; LayerNorm also the
  mean); no dropout (Llama-style recipes set it to 0);
- with SP, column-parallel linears save their sequence-sharded input (``/t``) and all-gather it
  again in backward (megatron ``LinearWithGradAccumulationAndAsyncCommunication``); CP divides
  ``s``.

:data:`MCORE_LOCAL` is the same count for megatron-core's local (torch) modules on CPU, which the
tests measure: ``torch.nn.RMSNorm`` keeps an fp32 copy of its input and its fp32 normalised
output (``8`` bytes per element instead of ``2``) and the unfused RoPE keeps its per-layer
``cos``/``sin`` tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import ModelArch


@dataclass(frozen=True)
class ActivationImpl:
    """Which tensors an implementation keeps (see module docstring)."""

    flash_attention: bool = True  # no s x s scores kept (flash / cuDNN fused attention)
    dropout: bool = False  # hidden dropout masks (1 byte per element, Megatron bias-dropout-add)
    attention_dropout: bool = False  # unfused attention only: the s x s dropout mask and dropped probabilities
    mask_bytes: int = 1  # per dropped element: CUDA fused dropout keeps a bool mask; torch's CPU dropout a bf16 noise
    softmax_bytes: int = 2  # unfused attention, per s x s element: fused scale-mask-softmax keeps its bf16
    #                        output; megatron's torch fallback in fp32 keeps the fp32 softmax and its bf16 copy (6)
    dropped_copy: bool = True  # attention dropout writes a new dropped-probabilities tensor (TE); in the torch
    #                            fallback it replaces the bf16 copy the V matmul would otherwise keep
    rope_copies: bool = True  # RoPE writes new Q, K (off: Q, K are views of the fused QKV output)
    rope_tables: bool = False  # unfused RoPE keeps cos/sin of q and k per layer (4 * s * d_rot)
    norm_bytes: int = 2  # bytes kept per norm-input element (TE: the bf16 input; torch CPU: 8)
    norm_stats: bool = True  # fp32 rstd (and mean for LayerNorm) per token
    fused_norm_linear: bool = True  # TE fuses the dense layers' norms into their first linear
    #                                 (TELayerNormColumnParallelLinear / LayerNormMLP); MLA's input norm and
    #                                 MoE's pre-MLP norm stay separate modules


TE = ActivationImpl()
MCORE_LOCAL = ActivationImpl(norm_bytes=8, rope_tables=True, mask_bytes=2, softmax_bytes=6, dropped_copy=False,
                             fused_norm_linear=False)
KORTHIKANTI = ActivationImpl(flash_attention=False, dropout=True, attention_dropout=True, rope_copies=False,
                             norm_stats=False)


def impl_for(arch: ModelArch, attention_backend: str = "auto", base: ActivationImpl = TE) -> ActivationImpl:
    """``base`` with the plan's dropout and attention backend: hidden dropout > 0 keeps two bool masks
    ``sbh/spd`` per layer (Megatron ``bias_dropout_add``); ``attention_backend`` unfused / local keeps
    the ``s x s`` softmax output ``a b (nq/t) s^2`` (megatron ``DotProductAttention``), and with
    attention dropout > 0 its bool mask and dropped copy; flash / fused attention drop in-kernel from
    the RNG state (nothing kept)."""
    import dataclasses

    return dataclasses.replace(base, dropout=arch.hidden_dropout > 0,
                               flash_attention=base.flash_attention and attention_backend not in ("unfused", "local"),
                               attention_dropout=arch.attention_dropout > 0)


@dataclass(frozen=True)
class LayerActivations:
    """Bytes kept by one decoder layer for one micro-batch on one GPU."""

    full: float  # no recompute
    core_attention: float  # what selective recompute of the core attention drops
    layer_input: float  # what full recompute keeps (the checkpointed layer input)
    backward_temp: float  # activation-gradient temporaries of the layer's backward (MLP dominated)
    drops: tuple[tuple[str, float], ...] = ()  # bytes each --recompute-modules entry drops (selective)
    offloadable: tuple[tuple[str, float], ...] = ()  # bytes each --offload-modules entry moves to host

    def selective(self, modules: tuple[str, ...] = ("core_attn",)) -> float:
        """Bytes kept under ``--recompute-granularity selective --recompute-modules modules``."""
        d = dict(self.drops) or {"core_attn": self.core_attention}
        return self.full - sum(d.get(mod, 0.0) for mod in set(modules))


def layer_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1,
                           moe: bool = False, ep: int = 1, etp: int | None = None, abytes: int = 2,
                           impl: ActivationImpl = TE, fp8: str | None = None) -> LayerActivations:
    """Activation bytes of one decoder layer (see the module docstring for the tensor list).

    ``seq`` is the full sequence length (CP divides it here); ``abytes`` the activation dtype size.
    MoE layers (megatron allgather dispatcher; measured at EP = TP = 1 in the tests): the routing
    state ``sb (20 topk + 3 E)`` bytes; each GPU keeps, for the ``sb * topk`` (token, expert)
    pairs it receives on average (exact at EP 1; balanced routing assumed for EP > 1), the
    permuted input ``h``, fc1's output ``2 Fe / etp`` and fc2's input ``Fe / etp``; shared
    experts count as a dense MLP of their size.
    """
    a = abytes
    s = seq // cp
    sb = s * mbs
    h = arch.hidden_size
    t = tp
    spd = t if sp else 1
    etp = etp or tp
    nq = arch.num_attention_heads
    stats = (8 if arch.normalization == "layernorm" else 4) * sb / spd if impl.norm_stats else 0.0

    def norm(n: int, shard: int = spd) -> float:
        return impl.norm_bytes * sb * n / shard + (stats if shard == spd else 0.0)

    def mask(n: float) -> float:
        return impl.mask_bytes * n if impl.dropout else 0.0

    # ---- attention ----
    attn = norm(h) + a * sb * h / spd  # input norm, QKV (or q/kv down) input
    if arch.multi_latent_attention:
        dn, dr, dv = arch.qk_head_dim, arch.qk_pos_emb_head_dim, arch.v_head_dim
        kvl = arch.kv_lora_rank
        # the down projections run on the (sequence-parallel) hidden states, so under SP the latents
        # are sequence-sharded: their norms and the up projections' saved inputs divide by t (measured)
        if arch.q_lora_rank:
            ql = arch.q_lora_rank
            attn += norm(ql) + a * sb * ql / spd  # q_layernorm input, q_up input
        attn += norm(kvl) + a * sb * kvl / spd  # kv_layernorm input, kv_up input
        attn += a * sb * nq * (dn + dr) / t * 2  # query and key after RoPE concat
        attn += a * sb * nq * dv / t  # V (a contiguous copy: kv_up's output is freed)
        attn += 4.0 * s * dr  # MLA computes its fp32 RoPE frequencies in every layer
        o = a * sb * nq * dv / t
    else:
        d, nkv = arch.kv_channels, arch.kv_heads
        attn += a * sb * (nq + 2 * nkv) * d / t  # fused QKV output (V view; Q, K views w/o RoPE)
        if arch.position_embedding == "rope" and impl.rope_copies:
            attn += a * sb * (nq + nkv) * d / t
        o = a * sb * nq * d / t
    if arch.position_embedding == "rope" and impl.rope_tables:
        attn += 4 * a * s * (arch.qk_pos_emb_head_dim if arch.multi_latent_attention else arch.kv_channels)
    attn += o  # core-attention output = projection input
    if impl.flash_attention:
        core = 4.0 * mbs * nq / t * s  # fp32 log-sum-exp
    else:
        core = (impl.softmax_bytes if a == 2 else a) * mbs * nq / t * s * s
        if impl.attention_dropout:
            core += (impl.mask_bytes + (a if impl.dropped_copy else 0)) * mbs * nq / t * s * s  # mask + dropped probs
    attn += core + mask(sb * h / spd)

    # ---- MLP ----
    g = 2 if arch.swiglu else 1
    mlp = norm(h)
    # backward temporaries (measured on megatron-core, tests/test_memory.py): the gradients of
    # fc1's output (gF), of fc2's input (F) and one more F-sized gradient, plus the layer's
    # output gradient: a sb ((g + 2) F / t + h / spd)
    largest = 0.0
    if moe:
        E, k, fe = arch.num_experts or 1, arch.moe_router_topk, arch.expert_ffn
        # router/dispatch input; routing state: top-k indices (int64), probs (fp32), sorted
        # indices (int64) per (token, expert) pair, routing map (bool) and probs (bf16) per expert
        mlp += a * sb * h / spd + sb * (20 * k + 3 * E)
        pairs = sb * k  # tokens gathered over TP (SP) then routed: sb * topk per rank on average
        mlp += pairs * (a * h + a * (g + 1) * fe / etp)  # permuted input, fc1 out, fc2 in
        largest = pairs * a * (g + 2) * fe / etp
        if arch.moe_shared_expert_intermediate_size:
            fs = arch.moe_shared_expert_intermediate_size
            mlp += a * sb * (g + 1) * fs / t
    else:
        f = arch.ffn_hidden_size
        mlp += a * sb * h / spd + a * sb * (g + 1) * f / t
        largest = a * sb * (g + 2) * f / t
    mlp += mask(sb * h / spd)
    full = attn + mlp
    # --recompute-modules (megatron transformer_layer.py, attention.py, mlp.py, moe/{moe_layer,experts,
    # shared_experts}.py, multi_latent_attention.py): what each drops from ``full``
    # - layernorm (output-discarding CheckpointWithoutOutput on each separate norm): the norm's saved
    #   internals beyond its input (stats; torch's fp32 copies) and its output, the next linear's input;
    # - mlp (dense layers, a checkpoint of the MLP): fc1's output and fc2's input, and with TE's fused
    #   LayerNormMLP the norm's stats and output too (the checkpoint keeps the residual input);
    # - moe (a checkpoint of the MoE layer, which keeps its input): routing state, permuted tokens,
    #   the experts' and the shared expert's tensors; shared_experts: the shared expert's;
    # - moe_act (grouped GEMM, output-discarding): the experts' activation output (fc2's input);
    # - mla_up_proj (output-discarding): the up projections' outputs, query / key after RoPE and V.
    norm_internal = (impl.norm_bytes * sb * h / spd if impl.norm_bytes != a else 0.0) + stats
    sep_in = not impl.fused_norm_linear or arch.multi_latent_attention
    sep_mlp = not impl.fused_norm_linear or moe
    drops = {"core_attn": core,
             "layernorm": (sep_in + sep_mlp) * (norm_internal + a * sb * h / spd)}
    if not moe:
        fused_ln = 0.0 if sep_mlp else norm_internal + a * sb * h / spd
        drops["mlp"] = a * sb * g * arch.ffn_hidden_size / t + a * sb * arch.ffn_hidden_size / t + fused_ln
    else:
        E, k, fe = arch.num_experts or 1, arch.moe_router_topk, arch.expert_ffn
        pairs = sb * k
        shared = a * sb * (g + 1) * arch.moe_shared_expert_intermediate_size / t
        drops["moe"] = sb * (20 * k + 3 * E) + pairs * (a * h + a * (g + 1) * fe / etp) + shared
        drops["shared_experts"] = shared
        drops["moe_act"] = pairs * a * fe / etp
    if arch.multi_latent_attention:
        drops["mla_up_proj"] = (a * sb * arch.num_attention_heads * (2 * (arch.qk_head_dim + arch.qk_pos_emb_head_dim)
                                                                      + arch.v_head_dim) / t)
    # --offload-modules (fine-grained activation offloading, megatron transformer_config.offload_modules:
    # "offload the input of the specified modules"): the bytes each moves to host
    d_att = arch.kv_channels if not arch.multi_latent_attention else arch.qk_head_dim + arch.qk_pos_emb_head_dim
    n_kv = arch.kv_heads if not arch.multi_latent_attention else nq
    off = {"attn_norm": norm(h), "qkv_linear": a * sb * h / spd,
           "core_attn": a * sb * (nq + n_kv) * d_att / t + a * sb * n_kv * (arch.v_head_dim if arch.multi_latent_attention
                                                                              else arch.kv_channels) / t,
           "attn_proj": o, "mlp_norm": norm(h)}
    if moe:
        pairs = sb * arch.moe_router_topk
        off["expert_fc1"] = pairs * a * h
        off["moe_act"] = pairs * a * g * arch.expert_ffn / etp
    if fp8:
        # Transformer Engine saves its linears' inputs quantized for the weight-gradient GEMM
        # (transformer_engine/pytorch/module/{layernorm_linear,linear,layernorm_mlp,grouped_linear}.py:
        # ``ln_out`` / ``inputmat`` / ``act_out`` kept as fp8, columnwise usage): 1 byte (+ scales: MXFP8
        # one e8m0 per 32, blockwise one fp32 per 128) instead of the bf16 tensor where only the linear
        # kept it (the norms' outputs, the activation output, the permuted tokens), in addition to it where
        # it is kept anyway (the attention output, kept by the attention backward; the shared expert's
        # input, kept by the router)
        q = 1.0 + {"mxfp8": 1 / 32, "blockwise": 4 / 128}.get(fp8, 0.0)
        f_in = arch.expert_ffn if moe else arch.ffn_hidden_size
        delta = -(a - q) * sb * h / spd * (2 if not arch.multi_latent_attention else 1)  # QKV / fc1 inputs
        delta += q * sb * nq * (arch.v_head_dim if arch.multi_latent_attention else arch.kv_channels) / t  # proj
        if moe:
            delta += -(a - q) * sb * arch.moe_router_topk * (h + f_in / etp)  # expert fc1 / fc2 inputs
            if arch.moe_shared_expert_intermediate_size:
                delta += q * sb * h / spd - (a - q) * sb * arch.moe_shared_expert_intermediate_size / t
        else:
            delta += -(a - q) * sb * f_in / t  # fc2 input
        full += delta
    return LayerActivations(full=full, core_attention=core, layer_input=a * sb * h / spd,
                            backward_temp=largest + a * sb * h / spd, drops=tuple(drops.items()),
                            offloadable=tuple(off.items()))


def _head_dims(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int,
               impl: ActivationImpl) -> tuple[int, int, int, float, float]:
    """(tokens ``sb`` per rank, SP divisor, hidden, vocab shard ``V/t``, norm-statistics bytes) shared by
    the output layer's and the MTP module's activations: ``sb = s/cp * b``; the norm keeps fp32 mean and
    rstd (layernorm, 8 B/token) or rstd (RMSNorm, 4 B/token) per token when the implementation does."""
    sb = seq // cp * mbs
    spd = tp if sp else 1
    stats = (8 if arch.normalization == "layernorm" else 4) * sb / spd if impl.norm_stats else 0.0
    return sb, spd, arch.hidden_size, arch.padded_vocab_size(tp) / tp, stats


def output_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1,
                            abytes: int = 2, impl: ActivationImpl = TE) -> tuple[float, float]:
    """(kept, transient) bytes of the last stage's final norm, output layer and loss.

    Kept until backward: final-norm input, output-layer input and megatron's
    ``vocab_parallel_cross_entropy`` fp32 softmax ``4 sb V/t`` (computed in place of the logits'
    fp32 copy).  Transient on top of that in the loss forward: the logits ``a sb V/t`` in the
    activation dtype, alive until the loss returns, and the output layer's input at full
    sequence length (measured, tests/test_memory.py).  ``V`` = padded vocabulary.
    """
    sb, spd, h, v, stats = _head_dims(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, impl=impl)
    kept = impl.norm_bytes * sb * h / spd + stats + abytes * sb * h / spd + 4.0 * sb * v
    # + a full-sequence hidden-size tensor (and under SP one more sequence shard), measured
    transient = abytes * sb * v + abytes * sb * h * (1 + (1 / spd if sp else 0))
    return kept, transient


def rope_table_bytes(arch: ModelArch, *, seq: int, cp: int = 1) -> float:
    """fp32 ``[s, 1, 1, d_rot]`` RoPE frequencies each model chunk computes once per forward and
    keeps for its layers' backward (megatron ``RotaryEmbedding.forward``)."""
    if arch.position_embedding != "rope":
        return 0.0
    d = arch.qk_pos_emb_head_dim if arch.multi_latent_attention else arch.kv_channels
    return 4.0 * seq // cp * d


def mtp_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1, abytes: int = 2,
                         impl: ActivationImpl = TE, recompute: str = "none") -> float:
    """Bytes one multi-token-prediction module keeps per micro-batch (megatron
    ``transformer/multi_token_prediction.py`` ``MultiTokenPredictionLayer`` and ``GPTModel._postprocess``):
    ``enorm`` on the embedding of the shifted tokens and ``hnorm`` on the decoder's output (their inputs),
    ``eh_proj``'s input (the concatenation, ``2h``), a transformer layer of the decoder's last-layer kind,
    the final norm's input, one more ``a sb h`` because ``MultiTokenPredictionBlock`` concatenates the main
    and MTP hidden states along the sequence (both output-layer inputs become views of that copy), and
    the MTP loss's fp32 softmax ``4 sb V/t``.  ``recompute="full"``: the module is checkpointed
    (``_checkpointed_forward``) and keeps its two inputs; ``selective``: the layer's core attention."""
    sb, spd, h, v, stats = _head_dims(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, impl=impl)
    norm = impl.norm_bytes * sb * h / spd + stats
    last_moe = arch.is_moe_layer(arch.num_layers - 1)
    la = layer_activation_bytes(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, moe=last_moe, abytes=abytes, impl=impl)
    head = abytes * sb * h / spd + 4.0 * sb * v
    if recompute == "full":
        return 2 * abytes * sb * h / spd + head
    layer = la.full - (la.core_attention if recompute == "selective" else 0.0)
    return 3 * norm + abytes * sb * 2 * h / spd + layer + head
