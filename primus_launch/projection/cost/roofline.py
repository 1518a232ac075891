"""The roofline layer costing of the dry run: the kernels of each layer on one GPU, timed from kernel-level
evidence.

:func:`layer_times_roofline` lists the kernels of one micro-batch through each kind of decoder
layer on ONE GPU with the plan's TP / CP / EP / expert-TP sharding applied (communication excluded:
that is :func:`primus_launch.projection.iteration.assemble`'s job) and times each with
:mod:`primus_launch.projection.cost.compute` (curves fitted to public kernel measurements) under the
framework's profile (:mod:`primus_launch.projection.cost.framework`: which kernels run, fused or
eager, and the host time of launching them).  Notation: b = micro-batch, s = sequence, t = TP,
T = b*s/cp tokens on this CP rank (GEMMs see all T after the SP all-gather), Tn = T/t with
sequence parallel else T (norms, residuals), h = hidden, a/g = query/KV heads, d = head dim,
f = FFN size, E/k = experts/top-k, A = 2 (bf16 bytes).

Forward kernels per dense layer (GEMM [M, N, K]):
  input norm (Tn*h elements), QKV [T, (a+2g)d/t, h], qk-norm, RoPE on q,k, core attention
  (b, a/t heads, s/cp queries x s keys, causal, sliding window where ``is_window_layer``;
  ``cp_comm_type = a2a``: s x s with a/(t cp) heads; ring CP (p2p, TorchTitan's rotations): one
  kernel per step at its own shape plus the framework's per-step helpers,
  ``cost/context_parallel.py``), out-proj [T, h, a*d/t], residual add
  (bias-dropout-add; +1 B mask per element with hidden dropout), pre-MLP norm,
  FC1 [T, (2 if gated else 1)*f/t, h], SwiGLU / GeLU, FC2 [T, h, f/t], residual add.
MLA attention (DeepSeek-V2/V3, Megatron ``MLASelfAttention``): q-down [T, r_q, h] (replicated
  over TP), q-norm, q-up [T, a(d_qk+d_r)/t, r_q] (or q [T, a(d_qk+d_r)/t, h]), kv-down
  [T, r_kv+d_r, h] (replicated), kv-norm, kv-up [T, a(d_qk+d_v)/t, r_kv], core attention with
  d_qk + d_r keys and d_v values, out-proj [T, h, a*d_v/t].
Unfused attention (``attention_backend`` unfused / local, e.g. Megatron 2021-22): QK^T as a
  batched GEMM [s/cp, s, d] x b*a/t, the fused scale-mask-softmax over the materialised s x s
  scores (2 B read + 2 B write per score; dropout mask +1 B), AV [s/cp, d, s]; backward 4 batched
  GEMMs and the softmax backward (6 B per score); causal masking saves nothing.
MoE layer: attention as above; router [Tn, E, h] (bf16) + softmax / top-k (fp32); permute and
  unpermute + weighted combine, each moving every routed copy once (2*T_e*k*h B; unfused
  permutation: index kernels moving 3x that), with the all-to-all dispatcher and several local
  experts a second "sort chunks by expert" permute; T_e = T*et/t tokens per GPU entering the
  experts; experts as one grouped GEMM (``moe_grouped_gemm``; the grouped-GEMM curve of the
  architecture where one was fitted) or one GEMM per local expert (E/ep GEMMs of M = T_e*ep*k/E
  tokens, balanced routing): FC1 [M, (2)f_e/et, h], FC2 [M, h, f_e/et]; shared experts as a dense
  MLP of size f_s.
Megatron paths a model's flags switch on (sources and traced byte / kernel counts at the constants of
``cost/elementwise_bytes.py``):
  YaRN with mscale != 1 runs Megatron's own unfused RoPE (``ROPE_MEGATRON_UNFUSED``); experts with
  biases (``add_bias_linear``, TEGroupedMLP) run the per-expert FC2 bias x probs chain
  (``EXPERT_BIAS_BYTES``, fp32 with DeepEP / HybridEP probs) and force every bias-dropout-add unfused;
  a clamped gated activation (``activation_clamp``) runs an unfused clamp + cat before the fused
  quick-GeGLU (``ACT_CLAMP``, recomputed with ``moe_act``).
Embedding (first stage): gather 4*T*h B forward; backward scatter-add into fp32 grads (weight-grad).
Head + loss (last stage): final norm, output GEMM [T, V/t, h] in bf16, cross-entropy over the logits
  (bytes per logit by profile: Megatron's vocab-parallel fp32 14 / 6, fused 4 / 4, torch 18 / 22).
MTP (per ``mtp`` layer, Megatron ``MultiTokenPredictionLayer``): enorm + hnorm (T*h each), the
  embedding gather of the shifted tokens, eh_proj [T, h/t, 2h]; its transformer layer and its
  output head + loss are priced as a decoder layer and a head (:mod:`iteration`).

Backward of a GEMM [M, N, K]: input-grad [M, K, N] (``bwd_input``) and weight-grad [K, N, M]
(``bwd_weight``).  Low-precision GEMMs run on the recipe's GEMM curve (``cost/fp8.py``) and add its
quantisation traffic: the inputs (X) in the forward pass (none for QKV / FC1 when TE's
LayerNormLinear writes them), the output gradients (dY) in the backward pass, and the weights once
per optimizer step (Megatron, TE weight caching: / micro-batches; none with ``fp8_param_gather``, but for
MXFP8 weights, cast whole after their BF16 all-gather: ``cost/fp8.py`` ``mx_params_gathered_bf16``)
or per micro-batch (torchao).  Element-wise kernels cost twice their forward bytes in backward
(permutes: once); attention backward is the fused-attention backward curve.

Host time: each op launches kernels (counts by profile); a pass of a layer takes
``max(GPU time, kernels x t_launch)``, minus what CUDA graphs capture (``cost/framework.py``; ``t_launch``
scaled by the host CPU, Grace vs x86); an MoE layer's forward between two token-dispatcher host-device syncs
(``host_sync.SYNC_BEFORE``) is walked op by op from an idle GPU (``host_sync.launch_bound_seconds``: the ops
after the sync, then the next layer's up to its sync), plus the host's wake-up after the wait.  A Megatron MoE layer also
launches its router's, dispatcher's and the grouped experts' small kernels (``cost/moe_host.py``: counts traced
from megatron-core's own MoELayer; TE / TE-ROCm GroupedLinear and the legacy grouped_gemm library launch one BLAS
GEMM per local expert, ``training.moe_expert_gemm``, at ``moe_host.expert_gemm_host_s`` each (the legacy library on
CDNA4 at its calibrated cost), Primus-Turbo's grouped GEMM one kernel; the all-to-all dispatcher's unfused chunk
sort host work per chunk, ``moe_host.chunk_sort_host``): rows "small ops"
(``KERNEL_MIN_S`` each on the GPU) and "... host" (host seconds only, before each linear's GEMMs).

Where each part is priced (this module builds the layer kinds and holds the entry points):
``layer_ops.py`` (the per-layer accumulator: GEMMs, element-wise ops, FP8 quantisation, host time of a pass),
``elementwise_bytes.py`` (bytes and kernel counts of the element-wise ops), ``attention_kernels.py`` /
``attention_block.py`` (core attention; the attention block), ``mlp_block.py``, ``bias_dropout_add.py``,
``dense_layer.py``, ``moe_layer.py``, ``expert_gemm_backend.py``, ``hybrid_layers.py`` (hybrid stacks and the Mamba
mixer), ``stage_extras.py`` (embedding, head + loss, MTP), ``titan_sac.py`` (TorchTitan's per-op SAC),
``host_sync.py`` (the dispatcher's sync and the launch-bound walk), ``layer_context.py`` (what every layer kind of
one build reads).
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import fp8 as fp8m
from primus_launch.projection.cost import moe_imbalance as mib
from primus_launch.projection.cost import wgrad_accumulation as wacc
from primus_launch.projection.cost.compute import arch_of
from primus_launch.projection.cost.dense_layer import dense_layer
from primus_launch.projection.cost.framework import graph_scopes, profile_of
from primus_launch.projection.cost.host_sync import backward_syncs
from primus_launch.projection.cost.hybrid_layers import hybrid_layers
from primus_launch.projection.cost.layer_context import LayerContext
from primus_launch.projection.cost.moe_layer import moe_layer
from primus_launch.projection.cost.stage_extras import ops_summary, stage_extras
from primus_launch.projection.layer_times import LayerTimes
from primus_launch.projection.memory.params import arch_key


@lru_cache(maxsize=65536)
def _layer_times(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, gpu: str, cfg: tuple) -> LayerTimes:
    return _build_layers(key, tp, cp, ep, etp, sp, b, gpu, cfg, None)


def _cfg(plan: Plan) -> tuple:
    """The plan settings, besides shapes and sharding, that change kernel times (hashable)."""
    t, p = plan.training, plan.parallel
    arch = arch_of(plan.cluster.gpu)
    prof = profile_of(plan, arch)
    lowp = t.precision in ("fp8", "fp4")
    recipe = fp8m.recipe_of(plan) if lowp else None
    fmt = fp8m.gemm_format(recipe, arch) if recipe else "bf16"
    if recipe and prof.weight_quant_per_microbatch:
        wq_div = 1.0
    elif recipe and t.fp8_param_gather and not fp8m.mx_params_gathered_bf16(plan):
        wq_div = float("inf")
    else:
        wq_div = float(max(1, plan.num_microbatches))
    host = prof.host_per_kernel
    ub = tuple(t.tp_comm_overlap_cfg) if t.tp_comm_overlap and p.tp > 1 and plan.framework == "megatron" else None
    return (prof, recipe, fmt, wq_div, host, graph_scopes(plan), t.moe_grouped_gemm, t.moe_token_dispatcher,
            p.cp_comm_type, t.precision, cal.framework_eff(plan.framework), ub,
            (t.moe_router_force_load_balancing, t.moe_router_fusion, t.moe_router_aux_loss, t.moe_router_fp32,
             mib.forced_round_robin(plan), t.moe_expert_capacity_factor, t.moe_pad_expert_input_to_capacity),
            (t.moe_expert_gemm, t.moe_sync_free, bool(t.moe_glue_eager), bool(t.moe_router_padding_for_quantization),
             # read only by a hybrid stack's pooled backward host time (hybrid_layers.py, host > 0): False elsewhere,
             # so plans that differ only in recompute / EP overlap share one entry of the layer-times cache
             backward_syncs(plan) if plan.model.is_hybrid and host > 0 else False),
            bool(t.fp8_param_gather),
            frozenset(t.bf16_linears), bool(t.fp8_attention) and recipe is not None and plan.framework == "megatron",
            t.mx_dim1_cast_kernel if recipe == "mxfp8" and plan.framework == "torchtitan" else "cuda",
            (t.loss_impl, t.loss_chunks if t.loss_impl == "fla_linear" else 1),
            wacc.bytes_per_weight_element(plan))


def _build_layers(key: tuple, tp: int, cp: int, ep: int, etp: int, sp: bool, b: int, gpu: str, cfg: tuple,
                  ops: dict | None) -> LayerTimes:
    """The kernels of each layer kind (module doc); with ``ops`` a dict, each kind's op list is
    stored in it under ``dense`` / ``moe`` / ``dense_window`` / ``moe_window`` / ``embedding`` /
    ``head`` / ``mtp``."""
    ctx = LayerContext.build(key, tp, cp, ep, etp, sp, b, gpu, cfg, ops)
    m = ctx.m
    if m.is_hybrid:
        return hybrid_layers(ctx)
    dense, attn, _ = dense_layer(ctx, "dense", None)
    window = m.window_size
    has_window = window is not None and m.num_window_layers > 0
    dense_w = dense_layer(ctx, "dense_window", window)[0] if has_window else None
    moe = moe_w = None
    if m.is_moe:
        moe = moe_layer(ctx, "moe", None)[0]
        if has_window:
            moe_w = moe_layer(ctx, "moe_window", window)[0]

    emb, head, mtp = stage_extras(ctx)
    ops_summary(ops, ctx.made, ctx.host, ctx.graphs)
    return LayerTimes(dense_layer=dense, moe_layer=moe, embedding=emb, head_loss=head, attn_core=attn,
                      dense_window_layer=dense_w, moe_window_layer=moe_w, mtp_extra=mtp, parts=ctx.shares)


def clear_caches() -> None:
    """Forget every cached time (after calibration constants change)."""
    from primus_launch.projection.cost import collectives, compute
    from primus_launch.projection.cost import framework

    compute.clear_caches()
    collectives.clear_caches()
    framework.clear_caches()
    _layer_times.cache_clear()


def layer_times_roofline(plan: Plan) -> LayerTimes:
    """Compute-only times of one micro-batch per layer kind on one GPU (module doc)."""
    p, t = plan.parallel, plan.training
    return _layer_times(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel,
                        t.micro_batch_size, plan.cluster.gpu, _cfg(plan))


def floor_cfg(plan: Plan) -> tuple:
    """:func:`_cfg` of ``plan`` at the floor of the settings that only add time: no host launch time
    (``host_per_kernel`` 0, so no CUDA-graph scope matters: ``LayerOps.times`` returns the GPU work),
    no TE userbuffers slowdown (its factors are >= 1, ``cost/contention.py``) and the FP8 weights
    quantised zero times per micro-batch (``wq_div`` = inf, as with FP8 parameter all-gather), no unfused
    ``main_grad`` accumulation (``cost/wgrad_accumulation.py``: the tuner turns the fusion off with FSDP).  Plans
    that differ only in ``tp_comm_overlap``, ``fp8_param_gather``, CUDA graphs and the micro-batch count
    share it (the tuner's bound key)."""
    c = list(_cfg(plan))
    c[3], c[4], c[5], c[11] = float("inf"), 0.0, frozenset(), None   # wq_div, host, graphs, ub
    c[13] = (*c[13][:-1], False)   # the backward's host sync: read only with host time (hybrid_layers.py), 0 here
    c[14] = False   # fp8_param_gather only changes the per-step weight casts, zero at wq_div = inf
    c[-1] = 0.0     # the unfused main_grad accumulation (>= 0 s; follows dp_sharding: tuner/knobs.py apply_knobs)
    return tuple(c)


def layer_times_floor(plan: Plan) -> LayerTimes:
    """A floor of :func:`layer_times_roofline` over the plans that differ from ``plan`` only in TP
    communication overlap, FP8 parameter all-gather, CUDA graphs and the number of micro-batches:
    the same kernels' GPU seconds at :func:`floor_cfg` (a pass is ``max(GPU, host)``, the userbuffers
    factors are >= 1, the per-step weight casts >= 0).  The lower bounds of the tuner's
    branch-and-bound search (``tuner/bounds.py``) stand on it; ``tests/test_tuner_bounds.py`` checks
    every pass time below the roofline's on sampled plans of the bundled recipes."""
    p, t = plan.parallel, plan.training
    return _layer_times(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel,
                        t.micro_batch_size, plan.cluster.gpu, floor_cfg(plan))


def layer_op_times(plan: Plan) -> dict[str, list[tuple[str, float, float, float, tuple]]]:
    """Per layer kind (``dense``, ``moe``, ``dense_window``, ``moe_window``, ``embedding``, ``head``,
    ``mtp``), the ops of one micro-batch on one GPU as ``(name, forward s, input-grad s, weight-grad
    s, info)``; their GPU times sum to :func:`layer_times_roofline` unless the layer is host-bound.
    ``"_kernels"``: per kind, the (forward, backward) kernels launched."""
    p, t = plan.parallel, plan.training
    ops: dict = {}
    _build_layers(arch_key(plan.model), p.tp, p.cp, p.ep, p.expert_tp, p.sequence_parallel, t.micro_batch_size,
                  plan.cluster.gpu, _cfg(plan), ops)
    return ops


def kernels_per_step(plan: Plan) -> int:
    """Kernels one GPU launches in one iteration (every decoder layer, recomputed forwards, embedding,
    head + loss), by the profile's decomposition; used to fit the host launch cost
    (``cost/framework.py``).  Counts plain dense / MoE stacks (the fit's Llama workload): a stack with other
    layer kinds (hybrid mixers, sliding-window layers, MTP depths) raises ValueError naming them."""
    n = layer_op_times(plan)["_kernels"]
    other = sorted(set(n) - {"dense", "moe", "embedding", "head"})
    if other:
        raise ValueError(f"kernels_per_step counts dense / MoE stacks; this plan also has {', '.join(other)}")
    m, t = plan.model, plan.training
    n_moe = m.num_moe_layers
    n_dense = m.num_layers - n_moe
    per_mb = n_dense * sum(n["dense"]) + n_moe * sum(n.get("moe", (0, 0)))
    if t.recompute.granularity == "full":
        per_mb += n_dense * n["dense"][0] + n_moe * n.get("moe", (0, 0))[0]
    per_mb += sum(n["embedding"]) + sum(n["head"])
    return per_mb * plan.num_microbatches
