"""An MoE decoder layer as one roofline layer kind, in the order its kernels run: attention block, pre-MLP norm,
router, dispatch preprocess (latent projection, permute), the chunk sort and the dispatcher's host-device sync, the
experts (TE padding, grouped or per-expert GEMMs, bias, unpadding), the chunk unsort, the busiest rank's routing
imbalance, the combine, the latent / shared experts and the residual add.

Shapes (module doc of ``cost/roofline.py``): router [Tn, E, h] (bf16) + softmax / top-k (fp32, 12 B per score);
permute and unpermute + weighted combine each move every routed copy once (``2 T_e k h A`` bytes; unfused
permutation: index kernels moving 3x that); ``T_e = T et / t`` tokens per GPU entering the experts; experts as
one grouped GEMM or one GEMM per local expert of ``M = ceil(T_e ep k / E)`` tokens (balanced routing):
FC1 [M, (2)f_e/et, h], FC2 [M, h, f_e/et].  Launch counts traced from megatron-core 0.16.1's MoELayer
(``cost/moe_host.py``), TorchTitan's eager glue (``cost/titan_moe.py``), TE's padding (``cost/moe_padding.py``),
the imbalance (``cost/moe_imbalance.py``).
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import moe_host
from primus_launch.projection.cost import moe_imbalance as mib
from primus_launch.projection.cost import moe_padding
from primus_launch.projection.cost import titan_moe
from primus_launch.projection.cost.attention_block import attention_block
from primus_launch.projection.cost.compute import KERNEL_MIN_S, arch_of
from primus_launch.projection.cost.elementwise_bytes import A, EXPERT_BIAS_BYTES, EXPERT_BIAS_BYTES_FP32_PROBS
from primus_launch.projection.cost.expert_gemm_backend import cutedsl_grouped_mlp
from primus_launch.projection.cost.framework import eager_host_per_kernel
from primus_launch.projection.cost.layer_context import LayerContext
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.cost.mlp_block import mlp
from primus_launch.projection.cost.titan_sac import op_sac_recompute_fwd
from primus_launch.projection.layer_times import PassTimes


def moe_layer(ctx: LayerContext, kind: str, window: int | None, attention: bool = True) -> tuple[PassTimes, int]:
    """(pass times, kernels) of an MoE layer of kind ``kind`` (``window``: its sliding window; ``attention`` False:
    the MoE part alone, a hybrid stack's ``E`` layer), its steps in the order of the module doc."""
    m, tp, T, Tn, h = ctx.m, ctx.tp, ctx.T, ctx.Tn, ctx.h
    acc = ctx.new(kind)
    if attention:
        attention_block(acc, m, ctx.b, ctx.s, ctx.cp, tp, T, Tn, window, ctx.cp_a2a, ctx.cp_type, ctx.bda_unfused)
    mfk = _router(ctx, acc)
    Te = max(1, T * ctx.etp // tp)
    perm = _dispatch_preprocess(ctx, acc, Te, mfk)
    local = max(1, m.num_experts // ctx.ep)
    acc.scope = "moe"   # after the dispatch (token_dispatcher dispatch_postprocess)
    e0 = (acc.f, acc.bi, acc.bw)   # the receiving rank's expert work starts here (routing imbalance)
    cs_f, cs_b = _sort_chunks(ctx, acc, Te, local)
    _dispatcher_sync(ctx, acc)
    if ctx.titan_glue:   # ExpertParallel._token_dispatch: _permute after the all-to-all (and its host sync)
        _titan_glue(acc, m, Te, "permute", ctx)
    _experts(ctx, acc, Te, local)
    if ctx.dispatcher == "alltoall" and ctx.ep > 1 and local > 1 and not ctx.titan_glue:
        acc.elem(2 * Te * m.moe_router_topk * m.expert_hidden * A, "unsort chunks", 1.0, (2, 2))
        if cs_f or cs_b:   # the combine sort's share (cost/moe_host.py item 4)
            sh = 1.0 - moe_host.CHUNK_SORT_DISPATCH_SHARE
            acc.host(sh * cs_f, sh * cs_b)
    router = ctx.router
    if not router[4]:   # Primus-Turbo's forced round robin: every expert the same count (cost/moe_imbalance.py)
        E, k, ep = m.num_experts, m.moe_router_topk, ctx.ep
        _routing_imbalance(acc, e0, mib.capped(mib.rank_imbalance(E, k, ep, Te * ep, mib.mode_of(*ctx.router_mode)),
                                               router[5], router[6]))
    _combine(ctx, acc, Te, local, perm, mfk)
    _latent_and_shared_experts(ctx, acc)
    acc.scope = "other"
    acc.mods = ()
    acc.elem(6.0 * Tn * h, "residual add", 1.0, (1, 0))
    acc.quant_flush()
    if "_" not in kind or kind.startswith("hybrid_"):   # per-module shares (selective recompute)
        acc.shares(kind, ctx.shares)
        if ctx.prof.name.startswith("torchtitan"):
            ctx.shares[f"{kind}:op_sac_mm"] = PassTimes(op_sac_recompute_fwd(acc, m, T, tp, True), 0.0, 0.0)
    return acc.times(ctx.host, ctx.graphs), acc.kernels()


def _router(ctx: LayerContext, acc: LayerOps) -> dict:
    """Pre-MLP norm, the router GEMM [Tn, E, h] (bf16, no main_grad fusion) and its fp32 score / top-k / aux-loss
    row (12 B per score); returns Megatron's traced launches per scope (``moe_host.framework_kernels``; ``{}``
    for other frameworks)."""
    m, prof, Tn, h, router = ctx.m, ctx.prof, ctx.Tn, ctx.h, ctx.router
    acc.scope = "moe_router"
    acc.mods = ("layernorm",)
    acc.norm(Tn * h, m, "pre-MLP norm")
    acc.mods = ("moe",)
    E = m.num_experts
    acc.gemm(Tn, E, h, lowp=False, name="router", main_grad=False)
    # Megatron's traced launches per scope (cost/moe_host.py); the router's beyond its GEMM (1 fwd, 2 bwd)
    # are the score / top-k / aux-loss row's
    mfk = {}
    rk = (4, 4)
    if prof.name == "megatron-te":
        force_balance, router_fused, aux_loss, router_fp32 = router[:4]
        mfk = moe_host.framework_kernels(ctx.dispatcher, ctx.ep, prof.fused_permute, aux_loss, router_fp32,
                                         force_balance, router_fused)
        rk = (max(1, mfk["moe_router"][0] - 1), max(1, mfk["moe_router"][1] - 2))
        what = ("fused " if router_fused else "") + "top-k" + (" / aux loss" if aux_loss else "")
    else:
        what = "softmax / top-k / aux loss"
    acc.elem(Tn * E * 4 * 3, f"router {what} (fp32; {rk[0]} / {rk[1]} launches)", 2.0, rk)
    return mfk


def _dispatch_preprocess(ctx: LayerContext, acc: LayerOps, Te: int, mfk: dict) -> tuple[tuple[int, int], float]:
    """A latent MoE's ``fc1_latent_proj`` and the permute (or TorchTitan's eager pre-dispatch glue) with Megatron's
    traced preprocess launches beyond it; returns the permutes' (kernels, byte multiplier): fused (1, 1) x1,
    unfused index kernels (6, 6) x3."""
    m, prof = ctx.m, ctx.prof
    k = m.moe_router_topk
    acc.scope = "moe_preprocess"
    # a latent MoE (moe_latent_size l): fc1_latent_proj h -> l on the layer's tokens before the dispatch
    # (megatron-core moe/moe_layer.py preprocess; TELinear parallel_mode "duplicated": whole on each TP rank);
    # the permutes, dispatch, experts and combine then move l-wide tokens
    hx = m.expert_hidden
    if m.moe_latent_size:
        acc.gemm(ctx.Tn, hx, ctx.h, name="fc1_latent_proj (h -> latent)")
    perm_k = (1, 1) if prof.fused_permute else (6, 6)
    perm_x = 1.0 if prof.fused_permute else 3.0
    held = acc.mods   # the permutes' own shares (cost/ep_comm.py: which stream runs them under the EP overlap)
    acc.mods = held + ("moe_permute",)
    if ctx.titan_glue:
        _titan_glue(acc, m, Te, "pre", ctx)
    else:
        acc.elem(perm_x * 2 * Te * k * hx * A, "permute" + ("" if prof.fused_permute else " (unfused index ops)"),
                 1.0, perm_k)
    acc.mods = held
    if mfk:
        _host_ops(acc, mfk.get("moe_preprocess", (0, 0)), perm_k, "dispatch preprocess")
    return perm_k, perm_x


def _sort_chunks(ctx: LayerContext, acc: LayerOps, Te: int, local: int) -> tuple[float, float]:
    """The all-to-all dispatcher's "sort chunks by local expert" (EP > 1, several local experts) and the unfused
    sort's per-chunk host work (``moe_host.chunk_sort_host``, item 4); returns that host work (forward, backward
    seconds, both sorts), its dispatch share charged here.  Not under TorchTitan v0.2's eager glue: there the
    rank-major -> expert-major sort after the all-to-all is ``_permute``'s one padded gather and its inverse
    ``_unpermute``'s one scatter, already glue rows (pytorch/torchtitan 36a4b6942, PR #2107,
    ``distributed/expert_parallel.py`` ``ExpertParallel._token_dispatch`` / ``_token_combine``; v0.2.1 the same;
    ``cost/titan_moe.py``), so a generic sort / unsort beside them would count both twice."""
    m, prof, ep, dispatcher = ctx.m, ctx.prof, ctx.ep, ctx.dispatcher
    cs_f = cs_b = 0.0
    if dispatcher == "alltoall" and ep > 1 and local > 1 and not ctx.titan_glue:
        acc.elem(2 * Te * m.moe_router_topk * m.expert_hidden * A, "sort chunks by local expert", 1.0, (2, 2))
        # the unfused sort's per-chunk host work (cost/moe_host.py item 4): the dispatch sort's share here,
        # the combine sort's at the unsort below
        # only where the framework sorts per chunk (Profile.sorts_per_chunk: Megatron, not TorchTitan)
        cs_f, cs_b = (prof.host_cpu_factor * x for x in
                      moe_host.chunk_sort_host(dispatcher, ep, local, prof.fused_permute)) \
            if prof.sorts_per_chunk else (0.0, 0.0)
        if cs_f or cs_b:
            sh = moe_host.CHUNK_SORT_DISPATCH_SHARE
            acc.host(sh * cs_f, sh * cs_b)
            acc.record(f"unfused chunk sort host: {1e3 * cs_f:.3f} / {1e3 * cs_b:.3f} ms ({ep * local} chunks, "
                       "both sorts)", 0.0, 0.0, 0.0,
                       ("host_ops", f"cost/moe_host.py item 4: {1e6 * moe_host.CHUNK_SORT_HOST_S[0]:.1f} / "
                                    f"{1e6 * moe_host.CHUNK_SORT_HOST_S[1]:.1f} us per chunk (megatron-core "
                                    "sort_chunks_by_idxs timed on CPU, scripts/amd_multinode_probe.py "
                                    "--chunk-sort); on the critical path where the layer is host-bound", 0.0, 0.0),
                       close=False)
    return cs_f, cs_b


def _dispatcher_sync(ctx: LayerContext, acc: LayerOps) -> None:
    """Whether the token dispatcher's host-device sync splits the forward (``host_sync.SYNC_BEFORE``), with its
    row: the host wakes after the D2H wait (one launch's time)."""
    prof, host, router = ctx.prof, ctx.host, ctx.router
    # the dispatcher's host-device sync (SYNC_BEFORE): Megatron always (split sizes of the
    # grouped GEMM / all-to-all, or DeepEP / HybridEP counts); TorchTitan only with EP
    # (torch._grouped_mm takes device offsets)
    # (a whole-layer CUDA graph needs static expert shapes: no sync to split it)
    # (a whole-layer CUDA graph needs static expert shapes: no sync to split it; Primus-Turbo's sync-free
    # MoE keeps the token counts on the device)
    # (the alltoall dispatcher's drop_and_pad, --moe-pad-expert-input-to-capacity: static counts, preprocess
    # returns before the D2H copy, cost/moe_imbalance.py)
    padded = router[6] and router[5] is not None and ctx.dispatcher == "alltoall" and prof.name == "megatron-te"
    acc.sync = ((prof.name == "megatron-te" or ctx.ep > 1) and host > 0 and "moe" not in ctx.graphs
                and not ctx.sync_free and not padded)
    if acc.sync:
        acc.record("token dispatcher host-device sync (host wakes after the D2H wait)", host, 0.0,
                   0.0, ("host", f"host_sync.launch_bound_seconds: 1 x host launch {1e6 * host:.1f} us; the ops "
                                 "after the sync and the next layer's up to it launched into an idle GPU", 0.0, 0.0))


def _experts(ctx: LayerContext, acc: LayerOps, Te: int, local: int) -> None:
    """The ``local`` experts on ``m_e = ceil(Te ep k / E)`` tokens each: TE's Fp8Padding, the MLP (grouped GEMM or
    one GEMM per expert; TE GroupedLinear's per-expert host loop, :func:`_expert_host`), torchao's MXFP8
    weight-gradient scale rearrange, TEGroupedMLP's bias x probs, TE's Fp8Unpadding."""
    m, prof, recipe, fmt, grouped, expert_gemm = ctx.m, ctx.prof, ctx.recipe, ctx.fmt, ctx.grouped, ctx.expert_gemm
    E, k, hx = m.num_experts, m.moe_router_topk, m.expert_hidden
    m_e = max(1, -(-Te * ctx.ep * k // E))
    # legacy GroupedMLP (grouped_gemm's gmm) runs its experts in BF16 whatever the recipe (experts.py
    # GroupedMLP.forward: "Currently GroupedMLP for MoE only supports bf16"; gmm takes bf16 only)
    legacy = grouped and prof.name == "megatron-te" and expert_gemm == "legacy"
    # training.bf16_linears "experts": the recipe converts the linears only (torchtitan v0.2.1 / 0.3.0
    # components/quantization: the float8 / MX linear converters swap nn.Linear modules; the experts' 3-D
    # weights run torch._grouped_mm in BF16 unless a grouped-experts converter is listed), so the experts'
    # GEMMs and their (absent) quantize kernels are priced as the BF16 plan's
    bf16_experts = "experts" in acc.bf16
    # Megatron's TE op-fuser grouped MLP (moe_expert_gemm = te_fused): experts.py _fused_forward returns before
    # the per-expert _apply_bias loop (FC2's bias is scaled by the probabilities inside TE's op); TE fuses
    # GroupedLinear + activation + GroupedLinear into cudnn-frontend's CuTeDSL grouped GEMMs only for MXFP8 /
    # NVFP4 on sm100 (ops/fused/grouped_mlp.py fuse_grouped_mlp_ops: the activation in their epilogues, one
    # kernel over all experts, mlp_block.mlp); otherwise the basic ops run: TE's per-expert grouped GEMM and one
    # fused scaled (clamped) activation kernel
    fused_mlp = grouped and prof.name == "megatron-te" and expert_gemm == "te_fused"
    cutedsl = fused_mlp and cutedsl_grouped_mlp(expert_gemm, fmt, arch_of(ctx.gpu))
    per_expert = grouped and prof.name == "megatron-te" and expert_gemm != "turbo" and not cutedsl
    # TEGroupedMLP's TE Fp8Padding / Fp8Unpadding around the experts (cost/moe_padding.py)
    te_pad = moe_padding.te_padding_copies(prof.name, recipe, ctx.dispatcher, expert_gemm, grouped, ctx.router_pad)
    if te_pad:
        pad_b, probs_b = moe_padding.padding_copy_bytes(m_e * local, hx, A)
        npk = moe_padding.launches_per_copy(local)
        al = moe_padding.align_size(recipe, ctx.prec)
        acc.elem(pad_b + probs_b, f"TE Fp8Padding: experts' input and probs padded to {al}-row multiples "
                 "(TEGroupedMLP)", 1.0, (2 * npk, 2 * npk))
    host = _expert_host(ctx, local, legacy) if per_expert else None
    mlp(acc, m, m_e, m.expert_ffn // ctx.etp, batch=local,
        name="experts (grouped)" if grouped else "experts (one GEMM per expert)", separate=not grouped,
        grouped_kernel=grouped and prof.name.startswith("torchtitan"), lowp=not (legacy or bf16_experts),
        host_each=host[0] if host else None, epilogue_act=cutedsl, clamp_fused=fused_mlp, width=hx)
    if grouped and prof.name.startswith("torchtitan") and recipe == "mxfp8" and fmt == "mxfp8" and not bf16_experts:
        _torchao_mx_rearrange(acc, m, m_e)
    if host:
        _expert_host_row(acc, host, local, recipe, legacy)
    if ctx.bda_unfused and not fused_mlp:
        if ctx.dispatcher in ("deepep", "hybridep"):   # fp32 probs (EXPERT_BIAS_BYTES_FP32_PROBS)
            (fb, bb), kern, pd = EXPERT_BIAS_BYTES_FP32_PROBS, (2 * local + 2, 8 * local + 3), "fp32"
        else:
            (fb, bb), kern, pd = EXPERT_BIAS_BYTES, (2 * local + 1, 6 * local + 2), "bf16"
        acc.elem(fb * m_e * local * hx, f"experts FC2 bias x probs (TEGroupedMLP._apply_bias: {local} experts, "
                 f"{pd} probs)", bb / fb, kern)
    if te_pad:
        acc.elem(pad_b, "TE Fp8Unpadding: experts' output unpadded (TEGroupedMLP)", 1.0, (npk, npk))


def _expert_host(ctx: LayerContext, local: int,
                 legacy: bool) -> tuple[tuple[float, float, int], float, float, float]:
    """TE GroupedLinear's (or the legacy grouped_gemm's) host loop of one BLAS GEMM per local expert
    (``moe_host.grouped_linear_host`` at ``moe_host.expert_gemm_host_s`` per GEMM): ((forward, backward host
    seconds, launches) each linear adds before its GEMMs, forward and backward host seconds of both linears,
    the host seconds per GEMM)."""
    prof = ctx.prof
    gemm_host = moe_host.expert_gemm_host_s(ctx.expert_gemm, arch_of(ctx.gpu))
    hf_, hb_ = (prof.host_cpu_factor * x for x in
                moe_host.grouped_linear_host(local, None if legacy else ctx.recipe, gemm_host))
    return (hf_ / 2, hb_ / 2, local), hf_, hb_, gemm_host


def _expert_host_row(acc: LayerOps, host: tuple[tuple[float, float, int], float, float, float], local: int,
                     recipe: str | None, legacy: bool) -> None:
    """The op row naming :func:`_expert_host`'s host seconds and their source (no GPU time)."""
    _, hf_, hb_, gemm_host = host
    what = "legacy grouped_gemm (BF16)" if legacy else "TE GroupedLinear"
    acc.record(f"{what} host: {1e3 * hf_:.3f} / {1e3 * hb_:.3f} ms ({local} BLAS GEMMs per linear "
               "and pass" + (", per-expert quantize" if recipe and not legacy else "") + ")", 0.0, 0.0, 0.0,
               ("host_ops", f"cost/moe_host.py: {1e6 * gemm_host:.0f} us per GEMM ("
                            + ("calibration.ROCM_LEGACY_GEMM_HOST_S: the legacy grouped_gemm on ROCm, fitted "
                               f"on {cal.ROCM_LEGACY_GEMM_ROW}" if gemm_host != moe_host.TE_GEMM_HOST_S
                               else "record raft1736-cublaslt-launch-host")
                            + "); on the critical path where the layer is host-bound (host launch-bound row)",
                0.0, 0.0), close=False)


def _torchao_mx_rearrange(acc: LayerOps, m: ModelArch, m_e: int) -> None:
    """torchao's MXFP8 grouped GEMM: the weight gradient's two K-groups scale rearranges per grouped GEMM, a serial
    loop of one iteration per 128 tokens of a group (``titan_moe.k_groups_rearrange_seconds``: records
    ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-*); TorchTitan's experts run w1, w3 and w2 as three
    grouped GEMMs (models/moe/moe.py _run_experts_grouped_mm)."""
    calls = 3 if m.swiglu else 2
    tb = titan_moe.k_groups_rearrange_seconds(m_e, calls)
    acc.add(0.0, 0.0, tb, "non_matmul")
    acc.count(0, calls * titan_moe.K_GROUPS_PER_GEMM)
    acc.record(f"torchao MXFP8 wgrad scale rearrange ({calls * titan_moe.K_GROUPS_PER_GEMM} x 2d K-groups, "
               f"{-(-m_e // titan_moe.TOKENS_PER_ITER)} serial iterations each)", 0.0, 0.0, tb * acc.slow,
               ("serial", "cost/titan_moe.py k_groups_rearrange_seconds: records "
                          "ao-b200-moe-wgrad-triton_mx_block_rearrange_2d_K_groups-*", 0.0, 0.0))


def _combine(ctx: LayerContext, acc: LayerOps, Te: int, local: int, perm: tuple[tuple[int, int], float],
             mfk: dict) -> None:
    """Unpermute + weighted combine (or TorchTitan's eager combine glue) and Megatron's traced dispatch / combine
    launches beyond the priced rows."""
    m, ep, dispatcher = ctx.m, ctx.ep, ctx.dispatcher
    perm_k, perm_x = perm
    k, hx = m.moe_router_topk, m.expert_hidden
    held = acc.mods
    acc.mods = held + ("moe_unpermute",)
    if ctx.titan_glue:
        _titan_glue(acc, m, Te, "combine", ctx)
    else:
        acc.elem(perm_x * 2 * Te * k * hx * A, "unpermute + weighted combine", 1.0, perm_k)
    acc.mods = held
    if mfk:
        sorts = 4 if dispatcher == "alltoall" and ep > 1 and local > 1 else 0
        _host_ops(acc, mfk["moe"], (perm_k[0] + sorts, perm_k[1] + sorts), "token dispatch / combine")


def _latent_and_shared_experts(ctx: LayerContext, acc: LayerOps) -> None:
    """A latent MoE's ``fc2_latent_proj`` [Tn, h, l] after the combine (moe_layer.py postprocess) and the shared
    experts as a dense MLP of size f_s."""
    m, h, hx = ctx.m, ctx.h, ctx.m.expert_hidden
    if m.moe_latent_size:   # fc2_latent_proj l -> h after the combine (moe_layer.py postprocess)
        acc.scope = "moe"
        acc.gemm(ctx.Tn, h, hx, name="fc2_latent_proj (latent -> h)")
    if m.moe_shared_expert_intermediate_size:
        acc.scope = "mlp"
        acc.mods = ("shared_experts",)
        mlp(acc, m, ctx.T, m.moe_shared_expert_intermediate_size // ctx.tp, name="shared expert",
            input_fused=ctx.fused_in)


def _host_ops(acc: LayerOps, traced: tuple[int, int], counted: tuple[int, int], what: str) -> None:
    """The launches Megatron's MoE code makes in the current scope beyond the ``counted`` ones of the priced
    rows (``traced``: :func:`moe_host.framework_kernels`), each a tiny kernel of ``KERNEL_MIN_S`` on the GPU
    (all-to-all launches included: their transfer is priced in the iteration)."""
    nf, nb = max(0, traced[0] - counted[0]), max(0, traced[1] - counted[1])
    if nf == 0 and nb == 0:
        return
    f, b = nf * KERNEL_MIN_S, nb * KERNEL_MIN_S
    acc.add(f, b, 0.0, "non_matmul")
    acc.count(nf, nb)
    acc.record(f"{what}: small ops ({nf} fwd / {nb} bwd launches beyond the rows above)", f * acc.slow,
               b * acc.slow, 0.0,
               ("host_ops", f"cost/moe_host.py: {traced[0]} / {traced[1]} launches in scope {acc.scope}, traced "
                            "from megatron-core 0.16.1 MoELayer (tests/moe_host_trace.py)", 0.0, 0.0))


def _routing_imbalance(acc: LayerOps, start: tuple[float, float, float], imb: mib.Imbalance) -> None:
    """Charge the busiest EP rank's routed-token excess (``cost/moe_imbalance.py``, ``imb``) on the receiving
    rank's expert work since ``start`` (the accumulator's totals where it began: sort, expert GEMMs,
    activation, bias, unsort) as its own row."""
    if imb.delta == 0.0:   # negative: padded to a capacity factor below 1 (every rank computes less)
        return
    d = [imb.delta * (now - was) for now, was in zip((acc.f, acc.bi, acc.bw), start)]
    if not any(d):
        return
    mods = acc.mods
    acc.mods = mods + ("moe",) if "moe" not in mods else mods
    acc.add(d[0] / acc.slow, d[1] / acc.slow, d[2] / acc.slow, "gemm")
    acc.mods = mods
    acc.record(f"routing imbalance: {imb.text()}", d[0], d[1], d[2],
               ("imbalance", "cost/moe_imbalance.py: busiest rank = mean x (1 + sigma g(ep)); "
                             + ("sampling of forced-balance routing" if imb.mode == "forced" else
                                "sampling + learned-router spread c from shawntan/scattermoe#10 counts"), 0.0, 0.0))


def _glue_ops(ctx: LayerContext, m: ModelArch) -> tuple[titan_moe.GlueOp, ...]:
    """The eager glue of the layer's dispatcher: TorchTitan's DeepEP path (``titan_moe.deepep_glue_ops``, the
    received tokens per layer token = the distinct EP ranks a token's top-k hits: ``moe_routing``, the round robin
    under forced balance) or its all-to-all path (``titan_moe.glue_ops``)."""
    k, E = m.moe_router_topk, m.num_experts
    if ctx.dispatcher != "deepep":
        return titan_moe.glue_ops(bool(m.moe_score_before_experts), k)
    from primus_launch.projection.cost.moe_routing import expected_units_hit, round_robin_units_hit

    u = max(1, E // max(1, ctx.ep))
    d = (round_robin_units_hit(E, k, u) if ctx.router[4]
         else expected_units_hit(E, k, u, m.moe_router_num_groups or 1, m.moe_router_group_topk or 1))
    return titan_moe.deepep_glue_ops(bool(m.moe_score_before_experts), d)


def _titan_glue(acc: LayerOps, m: ModelArch, Te: int, stage: str, ctx: LayerContext) -> None:
    """TorchTitan's eager MoE glue (v0.2 all-to-all path, or the DeepEP path of :func:`_glue_ops`) at one point of
    the layer (``stage`` "pre": routing gather and score
    multiply, before the dispatch; "permute": ``_permute`` after the all-to-all; "combine": ``_unpermute``,
    unsort, top-k combine, shared + routed add), one row per
    op group at the bytes and launches ``cost/titan_moe.py`` counts from torchtitan v0.2.1's code; each launch
    costs the host eager PyTorch's ``t_launch`` (the ops are outside the compiled submodules)."""
    k, h = m.moe_router_topk, m.hidden_size
    for o in _glue_ops(ctx, m):
        if o.stage != stage:
            continue
        f = (o.fwd_routed * Te * k + o.fwd_token * Te) * h
        b = (o.bwd_routed * Te * k + o.bwd_token * Te) * h
        # eager ATen dispatch on the host, not the compiled graph's launch cost (cost/framework.py)
        extra = eager_host_per_kernel(acc.prof) - acc.prof.host_per_kernel
        if extra > 0:
            acc.host(o.kernels[0] * extra, o.kernels[1] * extra)
        acc.elem(f, f"{o.name} (eager)", b / f if f else 0.0, o.kernels)

