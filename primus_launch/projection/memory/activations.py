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
from primus_launch.projection.memory.fp8 import fp8_attention_saved_bytes, quantized_bytes


#: megatron TransformerConfig.min_offloaded_tensor_size (@d98e8a64dd): smaller saved tensors stay on the GPU
OFFLOAD_MIN_ELEMENTS = 1024 * 1024


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
    te_qkv_layout: bool = True  # TE's DotProductAttention (attention/dot_product_attention/utils.py
    #                             get_qkv_layout) finds no supported layout for the RoPE'd q, k beside v, a
    #                             strided view of the fused QKV output, and makes v contiguous: the QKV
    #                             output is then freed unless a q/k norm keeps a view of it (local: SDPA
    #                             saves the views, the QKV output stays)


TE = ActivationImpl()
MCORE_LOCAL = ActivationImpl(norm_bytes=8, rope_tables=True, mask_bytes=2, softmax_bytes=6, dropped_copy=False,
                             fused_norm_linear=False, te_qkv_layout=False)
KORTHIKANTI = ActivationImpl(flash_attention=False, dropout=True, attention_dropout=True, rope_copies=False,
                             norm_stats=False, te_qkv_layout=False)


def impl_for(arch: ModelArch, attention_backend: str = "auto", base: ActivationImpl = TE,
             rope_fusion: bool = True) -> ActivationImpl:
    """``base`` with the plan's dropout and attention backend: hidden dropout > 0 keeps two bool masks
    ``sbh/spd`` per layer (Megatron ``bias_dropout_add``); ``attention_backend`` unfused / local keeps
    the ``s x s`` softmax output ``a b (nq/t) s^2`` (megatron ``DotProductAttention``), and with
    attention dropout > 0 its bool mask and dropped copy; flash / fused attention drop in-kernel from
    the RNG state (nothing kept).  ``rope_fusion=False`` (``--no-rope-fusion``): megatron's eager
    ``_apply_rotary_pos_emb_bshd`` multiplies by ``cos`` / ``sin`` tables in the activation dtype, which
    autograd keeps for q and k in every layer (``4 a s d_rot``)."""
    import dataclasses

    return dataclasses.replace(base, dropout=arch.hidden_dropout > 0,
                               flash_attention=base.flash_attention and attention_backend not in ("unfused", "local"),
                               attention_dropout=arch.attention_dropout > 0,
                               rope_tables=base.rope_tables or not rope_fusion)


#: ``--recompute-modules`` entries whose tensors another entry's checkpoint already holds: ``moe`` runs the whole
#: MoE forward under ``tensor_parallel.checkpoint`` (megatron-core 0.16.1 ``moe/moe_layer.py``, no grad), so
#: the experts' ``moe_act`` and the ``shared_experts`` checkpoints inside it save nothing and drop nothing more
#: (``drops["moe"]`` has the experts' and the shared expert's tensors)
RECOMPUTE_INSIDE: dict[str, tuple[str, ...]] = {"moe": ("moe_act", "shared_experts")}

#: (``--recompute-modules`` entry, ``--offload-modules`` entry) pairs whose offload group still copies the bytes the
#: recompute frees: MLA's ``mla_up_proj`` discards q, k, v (``CheckpointWithoutOutput``, storage resized to 0)
#: after the core attention has saved them, so the ``core_attn`` group copies them to the host and back
#: (megatron-core 0.16.1 ``multi_latent_attention.py``, ``fine_grained_activation_offload.py``
#: ``bulk_offload_group`` / ``bulk_reload_group``) while freeing nothing more on the device; the other pairs of
#: ``offload_overlap`` (``core_attn`` / ``moe`` recompute) leave the group nothing to copy
OFFLOAD_COPIED_ANYWAY: frozenset[tuple[str, str]] = frozenset({("mla_up_proj", "core_attn")})


@dataclass(frozen=True)
class LayerActivations:
    """Bytes kept by one decoder layer for one micro-batch on one GPU."""

    full: float  # no recompute
    core_attention: float  # what selective recompute of the core attention drops
    layer_input: float  # what full recompute keeps (the checkpointed layer input)
    backward_temp: float  # activation-gradient temporaries of the layer's backward (MLP dominated)
    drops: tuple[tuple[str, float], ...] = ()  # bytes each --recompute-modules entry drops (selective)
    offloadable: tuple[tuple[str, float], ...] = ()  # bytes each --offload-modules entry moves to host
    experts: float = 0.0  # the routed experts' saved tensors (fc1 input, fc1 output, fc2 input) at the
    #                       balanced routed-token count: what --moe-paged-stash pages (memory.paged_stash)
    attention: float = 0.0  # of ``full``: the attention block's (input norm .. core-attention output), the part
    #                         ``--cuda-graph-modules attn`` captures (memory.te_graphs); the rest is the MLP / MoE's
    attention_backward: float = 0.0  # of ``backward_temp``: the unfused attention's two s x s gradients
    mlp_backward: float = 0.0  # of ``backward_temp``: the MLP / experts' activation gradients
    offload_overlap: tuple[tuple[str, str, float], ...] = ()  # (--recompute-modules entry, --offload-modules
    #                         entry, bytes of the offload group the selective recompute already drops or disables)

    def offloaded(self, modules: tuple[str, ...], recompute: tuple[str, ...] = ()) -> float:
        """Bytes ``--offload-modules modules`` moves to host per layer and micro-batch under selective
        ``--recompute-modules recompute``: each named module's ``offloadable`` bytes less what a recomputed
        module already drops or turns off (``offload_overlap``, built in :func:`layer_activation_bytes`), at
        least 0 per module.  Counting both made a layer keep negative bytes (``selective - offloaded < 0``)."""
        rc, mods = set(recompute), set(modules)
        out = 0.0
        for mod, b in self.offloadable:
            if mod in mods:
                out += max(0.0, b - sum(x for r, o, x in self.offload_overlap if o == mod and r in rc))
        return out

    def copied(self, modules: tuple[str, ...], recompute: tuple[str, ...] = ()) -> float:
        """Bytes the offload groups of ``modules`` copy to the host (and back) per layer and micro-batch under
        selective ``--recompute-modules recompute``: :meth:`offloaded` plus what a recomputed module frees but
        the group copies anyway (:data:`OFFLOAD_COPIED_ANYWAY`).  The time side (``cost/offload.py``) and the
        backward's reload transient read this; the kept bytes read :meth:`offloaded`."""
        rc, mods = set(recompute), set(modules)
        out = 0.0
        for mod, b in self.offloadable:
            if mod in mods:
                out += max(0.0, b - sum(x for r, o, x in self.offload_overlap
                                        if o == mod and r in rc and (r, o) not in OFFLOAD_COPIED_ANYWAY))
        return out

    def selective(self, modules: tuple[str, ...] = ("core_attn",)) -> float:
        """Bytes kept under ``--recompute-granularity selective --recompute-modules modules``: ``full`` less each
        module's ``drops``, but none for a module inside another's checkpoint (:data:`RECOMPUTE_INSIDE`)."""
        d = dict(self.drops) or {"core_attn": self.core_attention}
        mods = set(modules)
        inside = {x for r in mods for x in RECOMPUTE_INSIDE.get(r, ())}
        return self.full - sum(d.get(mod, 0.0) for mod in mods - inside)


def layer_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1,
                           moe: bool = False, ep: int = 1, etp: int | None = None, abytes: int = 2,
                           impl: ActivationImpl = TE, fp8: str | None = None, fp8_dpa: bool = False,
                           fp8_non_tn: bool = False) -> LayerActivations:
    """Activation bytes of one decoder layer (see the module docstring for the tensor list).

    ``seq`` is the full sequence length (CP divides it here); ``abytes`` the activation dtype size.
    MoE layers (megatron allgather dispatcher; measured at EP = TP = 1 in the tests): the routing
    state ``sb (20 topk + 3 E)`` bytes; each GPU keeps, for the ``sb * topk`` (token, expert)
    pairs it receives on average (exact at EP 1; balanced routing assumed for EP > 1), the
    permuted input ``h``, fc1's output ``2 Fe / etp`` and fc2's input ``Fe / etp`` (and the activation's output
    where no fused weighted kernel applies the routing probabilities: :func:`weighted_activation_bytes`); shared
    experts count as a dense MLP of their size.  ``fp8_dpa`` (with ``fp8``): TE's FP8 fused attention saves
    its q / k / v (and under ``delayed`` its O) quantized in place of the bf16 tensors
    (:func:`memory.fp8.fp8_attention_saved_bytes`; ``fp8_non_tn``: the GPU needs no FP8 transpose).
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
    rope = arch.position_embedding in ("rope", "yarn")

    def norm(n: int, shard: int = spd) -> float:
        return impl.norm_bytes * sb * n / shard + (stats if shard == spd else 0.0)

    def mask(n: float) -> float:
        return impl.mask_bytes * n if impl.dropout else 0.0

    # bytes per element of a linear's saved input: TE keeps one quantized copy under fp8 in place of the bf16
    # tensor (the columnwise one; memory.fp8: data + scales, MXFP8 one e8m0 per 32, blockwise one fp32 per 128)
    qb = a if not fp8 else quantized_bytes(fp8)
    # megatron (attention.py, moe/shared_experts.py) has the linears that take a tensor kept anyway save
    # the original instead of a second, quantized copy, except under the delayed recipe
    extra_q = qb if fp8 == "delayed" else 0.0
    T = sb / spd  # tokens of this rank's sequence-parallel shard

    # ---- attention ----
    mla = arch.multi_latent_attention
    n_down = (2 if arch.q_lora_rank else 1) if mla else 1
    # input norm + QKV (or q/kv down) input: TE's LayerNormLinear keeps its input and its normalised
    # output (ln_out, quantized under fp8); MLA's separate input norm feeds the down projections, each of
    # which quantizes and keeps its own copy under fp8
    attn = norm(h) + (a * T * h if not fp8 else n_down * qb * T * h if mla else qb * T * h)
    if mla:
        dn, dr, dv = arch.qk_head_dim, arch.qk_pos_emb_head_dim, arch.v_head_dim
        kvl = arch.kv_lora_rank
        # the down projections run on the (sequence-parallel) hidden states, so under SP the latents
        # are sequence-sharded: their norms and the up projections' saved inputs divide by t (measured)
        if arch.q_lora_rank:
            ql = arch.q_lora_rank
            attn += norm(ql) + qb * T * ql  # q_layernorm input, q_up input
        attn += norm(kvl) + qb * T * kvl  # kv_layernorm input, kv_up input
        attn += a * sb * nq * (dn + dr) / t * 2  # query and key after RoPE concat
        attn += a * sb * nq * dv / t  # V (a contiguous copy: kv_up's output is freed)
        attn += 4.0 * s * dr  # MLA computes its fp32 RoPE frequencies in every layer
        o = a * sb * nq * dv / t
    else:
        d, nkv = arch.kv_channels, arch.kv_heads
        qkv = a * sb * (nq + 2 * nkv) * d / t  # the fused QKV output
        if impl.te_qkv_layout:
            attn += _te_qkv_kept(arch, sb=sb, tp=t, a=a, qkv=qkv)
        elif nkv < t:
            # QKV sub-sharding (_te_qkv_kept): the views keep the all-gathered full-width QKV output; RoPE copies
            # q (nq / t heads) and k (one head)
            attn += a * sb * (nq + 2 * nkv) * d
            if rope and impl.rope_copies:
                attn += a * sb * (nq / t + 1) * d
        else:
            attn += qkv  # fused QKV output (V view; Q, K views w/o RoPE)
            if rope and impl.rope_copies:
                attn += a * sb * (nq + nkv) * d / t
        o = a * sb * nq * d / t
    if rope and impl.rope_tables:
        attn += 4 * a * s * (arch.qk_pos_emb_head_dim if mla else arch.kv_channels)
    attn += o + extra_q * o / a  # core-attention output = projection input (+ its fp8 copy, delayed)
    if fp8_dpa and fp8 and impl.flash_attention:
        # FP8 attention (memory.fp8): q / k / v saved quantized in place of the bf16 ones, O in fp8 under delayed
        qkv_b, o_b = fp8_attention_saved_bytes(fp8, non_tn=fp8_non_tn)
        qkv_elems = (sb * nq * (2 * (arch.qk_head_dim + arch.qk_pos_emb_head_dim) + arch.v_head_dim) / t if mla
                     else sb * (nq / t + 2 * max(1.0, arch.kv_heads / t)) * arch.kv_channels)
        attn += qkv_elems * (qkv_b - a)
        if o_b is not None:
            attn += o / a * (o_b - a)
    if impl.flash_attention:
        core = 4.0 * mbs * nq / t * s  # fp32 log-sum-exp
    else:
        core = (impl.softmax_bytes if a == 2 else a) * mbs * nq / t * s * s
        if impl.attention_dropout:
            core += (impl.mask_bytes + (a if impl.dropped_copy else 0)) * mbs * nq / t * s * s  # mask + dropped probs
    attn += core + mask(sb * h / spd)
    # unfused attention's backward (megatron / TE ``bmm -> scale-mask-softmax -> bmm``): the gradients of
    # the probabilities and of the scores, two ``s x s`` tensors per head at once; flash / fused
    # attention recompute the scores in tiles
    attn_bwd = 0.0 if impl.flash_attention else 2.0 * a * mbs * nq / t * s * s

    # ---- MLP ----
    g = 2 if arch.swiglu else 1
    mlp = norm(h)
    # backward temporaries (measured on megatron-core, tests/test_memory.py): the gradients of
    # fc1's output (gF), of fc2's input (F) and one more F-sized gradient, plus the layer's
    # output gradient: a sb ((g + 2) F / t + h / spd)
    largest = 0.0
    shared = 0.0
    experts = 0.0
    if moe:
        E, k, fe = arch.num_experts or 1, arch.moe_router_topk, arch.expert_ffn
        # router / dispatcher input (the pre-MLP norm's output, kept by the router's gating GEMM); routing
        # state per routed token: top-k indices (int64), probs (fp32), sorted indices (int64) per
        # (token, expert) pair, routing map (bool) and probs (bf16) per expert
        routing = T * (20 * k + 3 * E)
        mlp += a * T * h + routing
        pairs = moe_pairs(arch, sb=sb, tp=t, sp=sp, etp=etp)
        hx = arch.expert_hidden   # a latent MoE's experts see l-wide tokens (moe_latent_size)
        experts = pairs * (qb * hx + a * g * fe / etp + qb * fe / etp)  # fc1 input, fc1 out (act input), fc2 input
        mlp += experts + weighted_activation_bytes(arch, pairs=pairs, etp=etp, a=a)
        if arch.moe_latent_size:
            # fc2_latent_proj's input (the combined l-wide output; megatron-core moe/moe_layer.py postprocess);
            # fc1_latent_proj's input is the pre-MLP norm output the router already keeps
            mlp += qb * T * hx
        largest = pairs * a * (g + 2) * fe / etp
        if arch.moe_shared_expert_intermediate_size:
            fs = arch.moe_shared_expert_intermediate_size
            shared = a * sb * g * fs / t + qb * sb * fs / t + extra_q * T * h
            mlp += shared
    else:
        f = arch.ffn_hidden_size
        mlp += qb * T * h + a * sb * g * f / t + qb * sb * f / t  # fc1 ln_out, fc1 out, fc2 input
        largest = a * sb * (g + 2) * f / t
    mlp += mask(sb * h / spd)
    full = attn + mlp
    # --recompute-modules (megatron transformer_layer.py, attention.py, mlp.py, moe/{moe_layer,experts,
    # shared_experts}.py, multi_latent_attention.py): what each drops from ``full``
    # - layernorm (output-discarding CheckpointWithoutOutput on each separate norm): the norm's saved
    #   internals beyond its input (stats; torch's fp32 copies) and its output, the next linear's input
    #   (under fp8 megatron has those linears save the original, so their quantized copies go too);
    # - mlp (dense layers, a checkpoint of the MLP): fc1's output and fc2's input, and with TE's fused
    #   LayerNormMLP the norm's stats and output too (the checkpoint keeps the residual input);
    # - moe (a checkpoint of the MoE layer, which keeps its input): routing state, permuted tokens,
    #   the experts' and the shared expert's tensors; shared_experts: the shared expert's;
    # - moe_act (grouped GEMM, output-discarding): the experts' activation output (fc2's input);
    # - mla_up_proj (output-discarding): the up projections' outputs, query / key after RoPE and V.
    norm_internal = (impl.norm_bytes * sb * h / spd if impl.norm_bytes != a else 0.0) + stats
    sep_in = not impl.fused_norm_linear or mla
    sep_mlp = not impl.fused_norm_linear or moe
    in_out = (n_down * qb if (fp8 and mla) else a) * T * h  # what the input norm's output costs when kept
    mlp_out = (a + extra_q) * T * h if moe else a * T * h
    drops = {"core_attn": core,
             "layernorm": sep_in * (norm_internal + in_out) + sep_mlp * (norm_internal + mlp_out)}
    if not moe:
        fused_ln = 0.0 if sep_mlp else norm_internal + qb * T * h
        drops["mlp"] = a * sb * g * arch.ffn_hidden_size / t + qb * sb * arch.ffn_hidden_size / t + fused_ln
    else:
        drops["moe"] = routing + experts + shared + weighted_activation_bytes(arch, pairs=pairs, etp=etp, a=a)
        drops["shared_experts"] = shared
        drops["moe_act"] = pairs * qb * fe / etp + weighted_activation_bytes(arch, pairs=pairs, etp=etp, a=a)
    if mla:
        drops["mla_up_proj"] = (a * sb * arch.num_attention_heads * (2 * (arch.qk_head_dim + arch.qk_pos_emb_head_dim)
                                                                      + arch.v_head_dim) / t)
    # --offload-modules (fine-grained activation offloading, megatron transformer_config.offload_modules:
    # "offload the input of the specified modules"): the bytes each moves to host.  The module runs inside
    # the offload manager's saved_tensors_hooks (pipeline_parallel/fine_grained_activation_offload.py
    # @d98e8a64dd, ``tensor_push`` / ``tensor_need_offloading_checker``), so every tensor autograd saves in it
    # of at least ``min_offloaded_tensor_size`` (1024 x 1024) elements moves, not only its input: for the core
    # attention also the unfused path's s x s softmax output (and dropout mask / dropped copy); flash's fp32
    # log-sum-exp ``b (nq / t) s`` moves only where it reaches that size.
    d_att = arch.kv_channels if not mla else arch.qk_head_dim + arch.qk_pos_emb_head_dim
    n_kv = arch.kv_heads if not mla else nq
    core_elems = mbs * nq / t * s * (1 if impl.flash_attention else s)
    off = {"attn_norm": norm(h), "qkv_linear": a * T * h,
           "core_attn": a * sb * (nq + n_kv) * d_att / t + a * sb * n_kv * (arch.v_head_dim if mla
                                                                              else arch.kv_channels) / t
           + (core if core_elems >= OFFLOAD_MIN_ELEMENTS else 0.0),
           "attn_proj": o, "mlp_norm": norm(h)}
    if moe:
        off["expert_fc1"] = pairs * qb * arch.expert_hidden
        off["moe_act"] = pairs * a * g * arch.expert_ffn / etp
    # what a selective recompute already takes of an offload group (megatron-core 0.16.1):
    # - core_attn: ``attention.py`` / ``multi_latent_attention.py`` open the core_attn offload group only on the
    #   path without ``checkpoint_core_attention`` (the checkpoint's saved q, k, v stay: ``core_attn`` drops
    #   the scores only), so the group moves nothing;
    # - moe: the whole MoE forward runs under ``tensor_parallel.checkpoint`` (no grad: the experts' offload
    #   groups see no saved tensor; Megatron-LM d98e8a64dd ``transformer_config.py`` asserts against the pair,
    #   "offloading activations inside it is redundant"), its bytes already among ``drops["moe"]``;
    # - mla_up_proj: ``CheckpointWithoutOutput`` discards q, k, v (storage ``resize_(0)``) right after the core
    #   attention, which saved views of those same storages: the core_attn group copies them to the host
    #   (:data:`OFFLOAD_COPIED_ANYWAY`) but frees nothing the recompute does not (its ``forced_released_tensors``
    #   are q, k, v again); the scores the unfused path saves are the group's own (a CPU trace of megatron-core
    #   0.16.1's MLA, tests/test_fine_grained_offload.py).
    overlap = [("core_attn", "core_attn", off["core_attn"])]
    if moe:
        overlap += [("moe", "expert_fc1", off["expert_fc1"]), ("moe", "moe_act", off["moe_act"])]
    if mla:
        overlap += [("mla_up_proj", "core_attn", drops["mla_up_proj"])]  # q, k, v: freed once
    return LayerActivations(full=full, core_attention=core, layer_input=a * sb * h / spd,
                            backward_temp=max(largest, attn_bwd) + a * sb * h / spd, drops=tuple(drops.items()),
                            offloadable=tuple(off.items()), offload_overlap=tuple(overlap), experts=experts,
                            attention=attn,
                            attention_backward=attn_bwd, mlp_backward=largest)


def weighted_activation_bytes(arch: ModelArch, *, pairs: float, etp: int, a: int) -> float:
    """Bytes the experts' routing-probability multiply keeps beyond fc1's output and fc2's input, per layer and
    micro-batch: the activation's output ``a x pairs x Fe / etp`` where Megatron has no fused weighted kernel.

    megatron-core 0.16.1 ``transformer/moe/experts.py`` (``TEGroupedMLP`` ``bias_act_func``) and
    ``transformer/mlp.py`` (``SequentialMLP``'s experts, ``per_token_scale``): with ``bias_activation_fusion`` a
    gated silu / quick-GeGLU runs ``weighted_bias_swiglu_impl`` / ``weighted_bias_quick_geglu_impl``, which save
    the input and the probabilities only; every other activation (plain GeLU, which Megatron cannot fuse without
    a bias -- the functional tests' ``--no-bias-gelu-fusion`` --, squared ReLU without
    ``--use-fused-weighted-squared-relu``, ReLU) computes ``act(x)`` and then ``act(x) * probs``, whose backward
    keeps ``act(x)`` (bf16) beside fc2's saved input, the product.  With ``--use-fused-weighted-squared-relu``
    (``model.moe_fused_weighted_squared_relu``; ``experts.py`` ``weighted_squared_relu_impl``, whose
    ``WeightedSquaredReLUFunction`` saves ``(input, weights)``) an ungated squared ReLU keeps nothing more.  A gated
    activation with ``--no-bias-swiglu-fusion`` takes the unfused path (not a plan field: Megatron-LM's default
    fusion is assumed)."""
    fused = (arch.swiglu and arch.activation in ("silu", "quick_gelu")) or (
        not arch.swiglu and arch.activation == "squared_relu" and arch.moe_fused_weighted_squared_relu)
    return 0.0 if fused else a * pairs * arch.expert_ffn / etp


def moe_pairs(arch: ModelArch, *, sb: float, tp: int, sp: bool, etp: int) -> float:
    """(token, expert) pairs one GPU's experts process per micro-batch, balanced routing.

    megatron-core 0.16.1 ``transformer/moe/token_dispatcher.py``: every dispatcher routes the tokens of
    the rank's sequence-parallel shard (``sb / tp`` under SP; MoE with TP > 1 requires SP in training,
    ``moe_layer.py``) and hands each local expert all tokens routed to it from the ``etp x ep``
    dispatch group, each expert-TP rank holding ``Fe / etp`` of it (the dispatchers' ``tp_size`` is the
    expert-TP size, ``pg_collection.expt_tp``): ``sb / tp * topk * etp`` on average, ``sb * topk``
    when ``etp = tp`` (Megatron's default)."""
    return sb / (tp if sp else 1) * arch.moe_router_topk * etp


def _te_qkv_kept(arch: ModelArch, *, sb: float, tp: int, a: int, qkv: float) -> float:
    """Bytes megatron-core 0.16.1's ``SelfAttention`` keeps between its QKV linear and the core attention
    with Transformer Engine (``transformer/attention.py`` ``get_query_key_value_tensors``, TE 2.13
    ``attention/dot_product_attention/utils.py`` ``get_qkv_layout``):

    - the query is a view of the QKV output when one query group sits on the rank or the attention is
      multi-head, else ``reshape`` copies it (``[sq, b, ng, np/ng*hn] -> [sq, b, np, hn]``);
    - with RoPE (fused or not, neither saves its input) the attention gets new ``q``, ``k`` beside ``v``,
      a strided view of the QKV output: ``get_qkv_layout`` finds no supported layout and makes all
      three contiguous, so the fused attention saves ``q``, ``k``, a copy of ``v`` (``(nq + 2 nkv) d``)
      and the QKV output is freed;
    - ``--qk-layernorm`` (TENorm on q and k) saves its inputs: the query copy (or the QKV output when
      the query is a view) and the key view, which keeps the QKV output alive, plus fp32 ``rsigma`` per
      head row;
    - without RoPE the views form a supported layout (``sbh3d`` / ``sbhd_sbh2d``): the QKV output (and
      a query copy) is what the attention keeps.

    Fewer query groups than TP ranks (megatron-core >= 0.16.0, f7dfb99795 'QKV activation sub-sharding';
    ``get_query_key_value_tensors``): the rank's QKV output (``(nq + 2 nkv) d / t`` wide, freed) is
    all-gathered to the full ``(nq + 2 nkv) d`` width (``all_gather_last_dim_from_tensor_parallel_region``),
    the rank's group is sliced out and its query heads indexed (``nq / t`` heads, views: one group per
    rank, no reshape copy); the core attention is built with ``num_query_groups = tp`` (one key / value
    head per rank).  With RoPE the attention keeps contiguous ``q`` (``nq / t`` heads), ``k`` and ``v``
    (one head each); ``--qk-layernorm`` saves its inputs, views of the gathered tensor, which keeps the
    full-width QKV output alive (plus fp32 ``rsigma`` of ``nq / t + 1`` head rows); without either, the
    views keep it."""
    nq, nkv, d, t = arch.num_attention_heads, arch.kv_heads, arch.kv_channels, tp
    rope = arch.position_embedding in ("rope", "yarn")
    if nkv < t:
        gathered = a * sb * (nq + 2 * nkv) * d
        if not rope and not arch.qk_layernorm:
            return gathered
        kept = a * sb * (nq / t + 2) * d
        if arch.qk_layernorm:
            kept += gathered + 4.0 * sb * (nq / t + 1)
        return kept
    ng_local = max(1, nkv // t)
    q_copy = a * sb * nq * d / t if (ng_local > 1 and nq != nkv) else 0.0
    if not rope and not arch.qk_layernorm:
        return qkv + q_copy
    kept = a * sb * (nq + 2 * nkv) * d / t  # q, k (RoPE or norm outputs) and v's contiguous copy
    if arch.qk_layernorm:
        kept += qkv + q_copy + 4.0 * sb * (nq + nkv) / t
    return kept


def _head_dims(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int,
               impl: ActivationImpl) -> tuple[int, int, int, float, float]:
    """(tokens ``sb`` per rank, SP divisor, hidden, vocab shard ``V/t``, norm-statistics bytes) shared by
    the output layer's and the MTP module's activations: ``sb = s/cp * b``; the norm keeps fp32 mean and
    rstd (layernorm, 8 B/token) or rstd (RMSNorm, 4 B/token) per token when the implementation does."""
    sb = seq // cp * mbs
    spd = tp if sp else 1
    stats = (8 if arch.normalization == "layernorm" else 4) * sb / spd if impl.norm_stats else 0.0
    return sb, spd, arch.hidden_size, arch.padded_vocab_size(tp) / tp, stats


CrossEntropy = str  # "unfused" | "native" | "te" | "fla_linear" | "fla" (Plan.training.loss_impl)

#: flash-linear-attention's commit the FLA loss models are read from (fla/modules/fused_linear_cross_entropy.py,
#: fla/modules/fused_cross_entropy.py)
FLA_COMMIT = "bc3b101dcb713ddc5bd8924b66754eb68b5ccf89"


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def fla_linear_chunk(n: int, h: int, v: int, chunks: int) -> tuple[int, int]:
    """(rows per chunk ``C``, chunks ``NC``) FLA's ``fused_linear_cross_entropy_forward`` runs ``n`` tokens in
    (fused_linear_cross_entropy.py @bc3b101 l. 303-309): ``NC = min(chunks, ceil(V / h))``,
    ``C = next_power_of_2(ceil(n / NC))``, then ``NC = ceil(n / C)``; ``C`` capped at ``n`` (one chunk)."""
    nc = max(1, min(chunks, -(-v // max(1, h))))
    c = _next_pow2(-(-n // nc))
    return min(c, n), -(-n // c)


def fla_linear_loss_bytes(n: int, h: int, v: int, chunks: int, abytes: int = 2) -> tuple[float, float]:
    """(saved for backward, forward peak) bytes of FLA's ``FusedLinearCrossEntropyLoss`` on ``n`` tokens
    ``[n, h]``, output weight ``[v, h]`` in ``abytes`` (fla @bc3b101 ``fla/modules/fused_linear_cross_entropy.py``,
    ``accumulate_grad_in_fp32`` True, no bias, no L2Warp).  The forward computes the loss and both gradients
    chunk by chunk (``C`` rows, :func:`fla_linear_chunk`); the backward only scales them in place
    (``elementwise_mul_kernel``, l. 413-454):

    - saved (l. 536-541): ``dx`` ``[n, h]`` (``zeros_like(x)``, l. 312) and the weight gradient cast to the
      weight's dtype (``dw.to(weight)``, l. 406-407): ``a (n h + v h)``;
    - forward peak on top of the inputs, the larger of
      the loop (l. 327-400; at the ``addmm`` into ``dw``): ``dx`` + the fp32 ``dw`` accumulator (l. 319) + the
      fp32 per-token loss (l. 323) + the chunk's logits ``a C v`` (``F.linear``, the Triton cross-entropy kernel
      writes their gradient into them) + their transposed fp32 copy ``c_logits.t().to(fp32)`` ``4 C v`` (l. 397) +
      the fp32 copy of the chunk's input ``4 C h`` (l. 334-335) + its fp32 log-sum-exp ``4 C`` (l. 339), i.e.
      ``a n h + 4 v h + 4 n + (a + 4) C v + 4 C h + 4 C``; and the end (l. 405-407): ``dx`` + fp32 ``dw`` + its
      cast ``a v h`` + the last chunk's logits, input copy and log-sum-exp still referenced.  With fp32 weights
      (``a`` = 4) the two casts are no-ops.  Checked against a torch re-statement of the chunk loop
      (tests/test_fla_fused_loss.py).
    FLOPs: ``2 n v h`` (logits) + ``2 n h v`` (dx) + ``2 v h n`` (dw, an fp32 GEMM), all in the forward."""
    c, nc = fla_linear_chunk(n, h, v, chunks)
    last = n - (nc - 1) * c
    cast = 4.0 if abytes < 4 else 0.0
    saved = float(abytes) * (n * h + v * h)
    base = abytes * n * h + 4.0 * v * h + 4.0 * n
    loop = base + (abytes + cast) * c * v + cast * c * h + 4.0 * c
    end = base + abytes * v * h + abytes * last * v + cast * last * h + 4.0 * last
    return saved, max(loop, end)


def output_activation_bytes(arch: ModelArch, *, seq: int, mbs: int, tp: int, sp: bool, cp: int = 1,
                            abytes: int = 2, impl: ActivationImpl = TE,
                            ce: CrossEntropy = "unfused", loss_chunks: int = 1) -> tuple[float, float]:
    """(kept, transient) bytes of the last stage's final norm, output layer and loss.

    Kept until backward: final-norm input, output-layer input and the loss's saved tensor:

    - ``unfused`` (megatron ``tensor_parallel/cross_entropy.py``) and ``native``
      (``--cross-entropy-loss-fusion``, ``fusions/fused_cross_entropy.py``, torch.compile'd: the
      compiled subtraction and exp write into their input, checked in tests/test_memory.py): the fp32
      softmax ``4 sb V/t``, computed in place of the logits' fp32 copy; transient on top of it: in the
      loss forward the logits ``a sb V/t`` in the activation dtype, alive until the loss returns; in
      its backward, unfused: the gradient computed in place in the softmax, cast to the logits' dtype
      (``a sb V/t``); native: the compiled ``calculate_gradients`` cannot write into the saved softmax
      and computes into a new fp32 buffer before the cast (``(4 + a) sb V/t``, traced in
      tests/test_memory.py);
    - ``te`` (``--cross-entropy-fusion-impl te``, TE 2.13 ``pytorch/cross_entropy.py``
      ``CrossEntropyFunction``: the Triton forward writes the gradient into the logits and saves them,
      the backward scales them in place): the logits ``a sb V/t``, nothing more.

    fp32 logits (``abytes`` 4: fp32 parameters, or fp8 GEMMs over them): ``logits.float()`` returns the logits
    themselves (megatron-core 0.16.1 ``VocabParallelCrossEntropy.calculate_logits_max``), so the softmax is
    computed in them, and the backward's cast to their dtype is a no-op: no logits copy beside the softmax
    (unfused: nothing transient; native: the new fp32 gradient buffer ``4 sb V/t`` alone).

    Also transient: the output layer's input at full sequence length (and under SP one more sequence
    shard), measured in tests/test_memory.py.  ``V`` = padded vocabulary.

    FLA's losses in Primus's ``MambaModel`` (Primus fd1eeabb ``patches/mamba_fused_ce_patches.py`` l. 78-103;
    ``training.loss_impl``, adapters/primus_fla.py):

    - ``fla_linear`` (``FusedLinearCrossEntropyLoss``, ``loss_chunks`` asked): the output layer is not called;
      the final norm's output ``[s/t, b, h]`` (the SP shard: no gather) goes ``permute(1, 0, 2).reshape`` --
      a copy when ``b`` > 1 -- into FLA with the vocabulary-shard weight; kept: the final-norm input and
      :func:`fla_linear_loss_bytes`' saved ``dx`` and bf16 ``dw`` (in place of the output-layer input and the
      softmax); transient: the norm output, its copy, and the loss's forward peak beyond what it saves;
    - ``fla`` (``FusedCrossEntropyLoss(inplace_backward=True)``, fla/modules/fused_cross_entropy.py
      ``CrossEntropyLossFunction``: saves the logits, writes the gradient into them): the logits ``a sb V/t``
      kept, as ``te``; ``permute(1, 0, 2).reshape`` copies them when ``b`` > 1, so the output layer's logits
      are alive beside the copy in the forward (and the output layer's backward makes the permuted gradient
      contiguous): ``a sb V/t`` more transient.
    """
    sb, spd, h, v, stats = _head_dims(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, impl=impl)
    if ce == "fla_linear":
        n = int(sb // spd)
        saved, peak = fla_linear_loss_bytes(n, h, int(v), loss_chunks, abytes)
        kept = impl.norm_bytes * n * h + stats + saved
        x = abytes * n * h * (2.0 if mbs > 1 else 1.0)   # the norm output (+ its [b s, h] copy)
        return kept, x + peak - saved
    kept = impl.norm_bytes * sb * h / spd + stats + abytes * sb * h / spd
    if ce == "fla":
        return kept + abytes * sb * v, (abytes * sb * v if mbs > 1 else 0.0) + abytes * sb * h * (
            1 + (1 / spd if sp else 0))
    kept += abytes * sb * v if ce == "te" else 4.0 * sb * v
    copy = abytes if abytes < 4 else 0.0  # the logits beside their fp32 copy (none when they are fp32)
    loss = {"te": 0.0, "native": 4.0 + copy}.get(ce, copy) * sb * v
    transient = loss + abytes * sb * h * (1 + (1 / spd if sp else 0))
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
    (``_checkpointed_forward``) and keeps its two inputs; ``selective``: the layer's core attention (the stage
    estimate, ``memory/mcore.py``, instead takes from ``none`` what the plan's --recompute-modules and
    --offload-modules take from a decoder layer: the module's TransformerLayer reads the same config)."""
    sb, spd, h, v, stats = _head_dims(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, impl=impl)
    norm = impl.norm_bytes * sb * h / spd + stats
    last_moe = arch.is_moe_layer(arch.num_layers - 1)
    la = layer_activation_bytes(arch, seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, moe=last_moe, abytes=abytes, impl=impl)
    head = abytes * sb * h / spd + 4.0 * sb * v
    if recompute == "full":
        return 2 * abytes * sb * h / spd + head
    layer = la.full - (la.core_attention if recompute == "selective" else 0.0)
    if arch.is_hybrid and arch.hybrid_mtp_pattern:
        # a hybrid MTP depth's layers (hybrid_mtp_pattern): '*' a GPT layer's attention block, '-' / 'E' the rest of
        # a dense / MoE GPT layer (as memory/mcore.py hybrid_layer_bytes prices the decoder's symbols)
        kw = dict(seq=seq, mbs=mbs, tp=tp, sp=sp, cp=cp, abytes=abytes, impl=impl)
        dense = layer_activation_bytes(arch, moe=False, **kw)
        moe = layer_activation_bytes(arch, moe=True, **kw) if arch.is_moe else dense
        if "M" in arch.hybrid_mtp_pattern:
            raise ValueError("a Mamba layer in hybrid_mtp_pattern: refused by cost/mamba.py hybrid_unmodelled")
        layer = sum(dense.attention if c == "*" else (moe.full - moe.attention) if c == "E"
                    else (dense.full - dense.attention) for c in arch.hybrid_mtp_pattern)
    return 3 * norm + abytes * sb * 2 * h / spd + layer + head
