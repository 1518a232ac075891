"""A dense decoder layer (attention block, pre-MLP norm, MLP, residual add) as one roofline layer kind.

Shapes and sources: ``cost/attention_block.py``, ``cost/mlp_block.py`` (FC1 [T, (2)f/t, h], FC2 [T, h, f/t]);
TorchTitan's per-op SAC share ``cost/titan_sac.py``.
"""

from __future__ import annotations

from primus_launch.projection.cost.attention_block import attention_block
from primus_launch.projection.cost.bias_dropout_add import residual_bda
from primus_launch.projection.cost.layer_context import LayerContext
from primus_launch.projection.cost.mlp_block import mlp
from primus_launch.projection.cost.titan_sac import op_sac_recompute_fwd
from primus_launch.projection.layer_times import PassTimes


def dense_layer(ctx: LayerContext, kind: str, window: int | None,
                attention: bool = True) -> tuple[PassTimes, PassTimes | None, int]:
    """(pass times, core-attention times or None, kernels) of a dense layer of kind ``kind`` (``window``: its
    sliding window; ``attention`` False: the MLP part alone, a hybrid stack's ``-`` layer)."""
    m, b, s, cp, tp, T, Tn, h = ctx.m, ctx.b, ctx.s, ctx.cp, ctx.tp, ctx.T, ctx.Tn, ctx.h
    bda_unfused, prof, shares = ctx.bda_unfused, ctx.prof, ctx.shares
    acc = ctx.new(kind)
    core = (attention_block(acc, m, b, s, cp, tp, T, Tn, window, ctx.cp_a2a, ctx.cp_type, bda_unfused) if attention
            else None)
    acc.scope = "mlp"
    acc.mods = ("layernorm",)
    acc.norm(Tn * h, m, "pre-MLP norm")
    acc.mods = ("mlp",)
    mlp(acc, m, T, m.ffn_hidden_size // tp, input_fused=ctx.fused_in, ub=True)
    acc.mods = ()
    residual_bda(acc, m, Tn, bda_unfused)
    acc.quant_flush()
    if "_" not in kind or kind.startswith("hybrid_"):   # per-module shares (selective recompute)
        acc.shares(kind, shares)
        if prof.name.startswith("torchtitan"):
            shares[f"{kind}:op_sac_mm"] = PassTimes(op_sac_recompute_fwd(acc, m, T, tp, False), 0.0, 0.0)
    return acc.times(ctx.host, ctx.graphs), core, acc.kernels()
