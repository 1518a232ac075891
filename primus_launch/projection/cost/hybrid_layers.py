"""The layer kinds of a hybrid stack (``hybrid_pattern``: ``*`` attention, ``-`` MLP, ``E`` MoE, ``M`` Mamba), each
symbol a layer of its own, and the Mamba mixer.

Formulas: the attention / MLP / MoE parts as the matching parts of a GPT layer (``cost/attention_block.py``,
``cost/dense_layer.py``, ``cost/moe_layer.py``); the Mamba mixer as priced in ``cost/mamba.py`` (in_proj
[T, (2 d_i + 2GN + H)/t, h], layout copies, causal_conv1d, the SSD chunk scan from its H100 measurement, the gated
RMSNorm, out_proj [T, h, d_i/t]); where the backward does not re-run the dispatcher's sync, each kind's backward
host exposure is pooled over the stack (``cost/host_runahead.py``).
"""

from __future__ import annotations

from primus_launch.plan import ModelArch
from primus_launch.projection.cost import host_runahead
from primus_launch.projection.cost import mamba
from primus_launch.projection.cost.attention_block import attention_block
from primus_launch.projection.cost.bias_dropout_add import residual_bda
from primus_launch.projection.cost.dense_layer import dense_layer
from primus_launch.projection.cost.layer_context import LayerContext
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.cost.moe_layer import moe_layer
from primus_launch.projection.cost.stage_extras import ops_summary, stage_extras
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.layer_times import LayerTimes, PassTimes


def _mamba_mixer(acc: LayerOps, m: ModelArch, t: int, T: int, Tn: int, gpu: str, bda_unfused: bool,
                 cp: int = 1) -> None:
    """A Mamba layer (``cost/mamba.py``): the input norm fused into ``in_proj`` [T, (2 d_i + 2GN + H)/t, h],
    megatron-core's two layout copies, causal_conv1d over the x / B / C channels, the SSD chunk scan (priced from its
    H100 measurement), the gated RMSNorm, ``out_proj`` [T, h, d_i/t] and the residual add.  With context
    parallelism (``cp`` > 1) the conv and scan run over the c T tokens of the full sequence for 1 / c of the
    channels (``mamba.scan_width``; the all-to-alls are communication, ``cost/cp_comm.py`` ``mamba_cp_comm``) and
    the copies around the all-to-alls are added (``mamba.cp_copy_bytes``)."""
    h = m.hidden_size
    acc.scope = "mamba"
    acc.mods = ("layernorm",)
    acc.norm(Tn * h, m, "Mamba input norm")
    acc.mods = ()
    acc.gemm(T, max(1, mamba.in_proj_width(m) // t), h, name="Mamba in_proj", input_fused=acc.prof.norm_linear,
             ub="fc1", col=True)
    if cp > 1:
        acc.elem(mamba.cp_copy_bytes(m, T, t, cp), "Mamba CP copies (all-to-all split / cat, load-balance reorder)",
                 1.0, (9, 9))
    acc.elem(mamba.layout_copy_bytes(m, T, t, cp), "Mamba layout copies (zxBCdt to b-l-d, y back to l-b-d)", 1.0,
             (2, 2))
    acc.elem(mamba.conv1d_bytes(m, T, t, cp), "causal_conv1d (x, B, C) + SiLU (backward: forward recomputed)",
             mamba.CONV_BWD_OVER_FWD, (1, 2))
    spec = get_gpu(gpu)
    f, bi = mamba.ssd_scan_seconds(m, T, t, spec.hbm_bw, spec.name)
    acc.add(f, bi, 0.0, "non_matmul")
    acc.count(5, 14)
    acc.record("SSD chunk scan (mamba_chunk_scan_combined)", f * acc.slow, bi * acc.slow, 0.0,
               ("kernel", mamba.SSD_SOURCE, 0.0, 0.0))
    gf, gb = mamba.ssd_gate_bytes(m, T, t)
    acc.elem(gf, "SSD z gate (read z, write out_x; backward _chunk_scan_bwd_dz)", gb / gf, (0, 1))
    acc.elem(mamba.gated_norm_bytes(m, T, t), "gated RMSNorm (norm(y) * silu(z))", 2.0, (1, 2))
    acc.gemm(T, h, max(1, m.mamba_d_inner // t), name="Mamba out_proj", ub="fc2")
    acc.scope = "other"
    residual_bda(acc, m, Tn, bda_unfused)


HYBRID_ACC = {"*": "hybrid_attn", "-": "hybrid_mlp", "E": "hybrid_moe", "M": "hybrid_mamba"}


def _pool_hybrid_backward(m: ModelArch, kinds: dict[str, PassTimes], made: dict[str, LayerOps]) -> None:
    """Replace each hybrid layer kind's backward host exposure by its share of the stack's pooled one
    (cost/host_runahead.py; layers counted in ``hybrid_pattern`` plus ``mtp_num_layers`` x ``hybrid_mtp_pattern``)."""
    pat = (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or "") * (m.mtp_num_layers or 0)
    items = {}
    for sym, t in kinds.items():
        acc = made[HYBRID_ACC[sym]]
        hb, x, _ = acc.hbx
        items[sym] = (pat.count(sym), PassTimes(t.fwd_s, acc.bi, acc.bw), hb, x)
    for sym, bi in host_runahead.pooled_backward(items).items():
        kinds[sym] = made[HYBRID_ACC[sym]].pool_backward(kinds[sym], bi)


def hybrid_layers(ctx: LayerContext) -> LayerTimes:
    """The layer kinds of a hybrid stack (``hybrid_pattern``): each symbol is a layer of its own, priced as the
    matching part of a GPT layer -- ``*`` the attention block (norm, QKV, core attention, out-proj, residual), ``-``
    the MLP (norm, FC1, activation, FC2, residual), ``E`` the MoE part (norm, router, dispatch, experts, shared
    experts, residual) -- or :func:`_mamba_mixer`; returned in ``LayerTimes.hybrid`` by symbol (``dense_layer`` is
    the attention layer's, ``moe_layer`` the MoE layer's)."""
    m, tp, T, Tn, gpu, host, graphs, made = ctx.m, ctx.tp, ctx.T, ctx.Tn, ctx.gpu, ctx.host, ctx.graphs, ctx.made
    new, shares = ctx.new, ctx.shares
    kinds: dict[str, PassTimes] = {}
    attn = None
    pat = (m.hybrid_pattern or "") + ((m.hybrid_mtp_pattern or "") if m.mtp_num_layers else "")
    if "*" in pat:
        acc = new("hybrid_attn")
        attn = attention_block(acc, m, ctx.b, ctx.s, ctx.cp, tp, T, Tn, None, ctx.cp_a2a, ctx.cp_type, ctx.bda_unfused)
        acc.quant_flush()
        acc.shares("hybrid_attn", shares)
        kinds["*"] = acc.times(host, graphs)
    if "-" in pat:
        kinds["-"] = dense_layer(ctx, "hybrid_mlp", None, attention=False)[0]
    if "E" in pat:
        kinds["E"] = moe_layer(ctx, "hybrid_moe", None, attention=False)[0]
    if "M" in pat:
        acc = new("hybrid_mamba")
        _mamba_mixer(acc, m, tp, T, Tn, gpu, ctx.bda_unfused, ctx.cp)
        acc.quant_flush()
        kinds["M"] = acc.times(host, graphs)
    if not ctx.bwd_sync and host > 0:
        _pool_hybrid_backward(m, kinds, made)
    # an MTP depth's own modules; its layers are priced by symbol (steps/stage.py)
    emb, head, mtp = stage_extras(ctx)
    ops_summary(ctx.ops, made, host, graphs)
    first = next(iter(kinds.values()))
    return LayerTimes(dense_layer=kinds.get("*", first), moe_layer=kinds.get("E"), embedding=emb, head_loss=head,
                      attn_core=attn, parts=shares, hybrid=kinds, mtp_extra=mtp)

