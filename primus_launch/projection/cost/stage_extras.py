"""A pipeline stage's parts outside its decoder layers: the embedding (first stage), the output head + loss (last
stage) and one MTP depth's own modules; and the per-kind summary of a build's op lists.

Formulas: embedding gather ``4 T h`` bytes forward, its gradient scatter-add into fp32 ``T h (A + 4 + 4)`` bytes
(weight-grad); head: final norm, the bf16 output GEMM [T, V/t, h], cross-entropy at ``T V/t`` x
:data:`~primus_launch.projection.cost.elementwise_bytes.CE_BYTES` (``training.loss_impl`` fla: FLA's
``FusedCrossEntropyLoss``, one Triton kernel a pass, the ``fused`` row; fla_linear: no output GEMM here,
:mod:`~primus_launch.projection.cost.fla_loss` prices FLA's fused linear cross-entropy); MTP (megatron-core
``MultiTokenPredictionLayer``, ``multi_token_prediction.py``): enorm + hnorm, the shifted tokens' embedding gather,
``eh_proj`` [T, h/t, 2h].
"""

from __future__ import annotations

from primus_launch.projection.cost.compute import elementwise_time
from primus_launch.projection.cost.elementwise_bytes import A, CE_BYTES
from primus_launch.projection.cost.fla_loss import fla_linear_head
from primus_launch.projection.cost.layer_context import LayerContext
from primus_launch.projection.cost.layer_ops import LayerOps
from primus_launch.projection.layer_times import PassTimes


def stage_extras(ctx: LayerContext) -> tuple[PassTimes, PassTimes, PassTimes | None]:
    """(embedding, output head + loss, one MTP depth's own modules or None) of a stage, GPT and hybrid stacks alike:
    the embedding gather (``4 T h`` bytes forward) and its gradient scatter-add (``T h (A + 4 + 4)``); the final
    norm, the bf16 output GEMM [T, V/t, h] and the cross-entropy's ``T V/t`` x :data:`CE_BYTES` traffic; MTP's
    enorm / hnorm, embedding gather and ``eh_proj`` [T, h/t, 2h] (megatron-core ``multi_token_prediction.py``)."""
    new, m, T, Tn, tp, gpu, host, graphs = ctx.new, ctx.m, ctx.T, ctx.Tn, ctx.tp, ctx.gpu, ctx.host, ctx.graphs
    h = m.hidden_size
    acc = new("embedding")
    acc.f += elementwise_time(4.0 * T * h, gpu) * acc.slow
    acc.bw += elementwise_time(float(T * h * (A + 4 + 4)), gpu) * acc.slow
    acc.count(1, 2)
    acc.record("embedding gather / grad scatter-add", acc.f, 0.0, acc.bw, ("elementwise", "hbm", 0.0, 0.0))
    emb = acc.times(host, frozenset())

    acc = new("head")
    V = m.padded_vocab_size(tp) // tp
    acc.norm(Tn * h, m, "final norm")
    impl, chunks = ctx.loss
    if impl == "fla_linear":   # FLA's fused linear cross-entropy on the SP shard, no output layer (cost/fla_loss.py)
        fla_linear_head(acc, Tn, V, h, chunks, gpu)
        head = acc.times(host, frozenset())
        return emb, head, _mtp(ctx)
    acc.gemm(T, V, h, lowp=False, name="output layer (bf16)")
    ce = "fused" if impl == "fla" else acc.prof.ce   # FLA's FusedCrossEntropyLoss: one Triton kernel a pass
    fb, bb, kf, kb = CE_BYTES[ce]
    f0, bi0 = acc.f, acc.bi
    acc.f += elementwise_time(float(T * V * fb), gpu) * acc.slow
    acc.bi += elementwise_time(float(T * V * bb), gpu) * acc.slow
    acc.count(kf, kb)
    acc.record(f"cross-entropy ({ce})", acc.f - f0, acc.bi - bi0, 0.0, ("elementwise", "hbm", 0.0, T * V * fb))
    head = acc.times(host, frozenset())
    return emb, head, _mtp(ctx)


def _mtp(ctx: LayerContext) -> PassTimes | None:
    """One MTP depth's own modules (module doc), None without MTP."""
    m, T, Tn, tp = ctx.m, ctx.T, ctx.Tn, ctx.tp
    if not m.mtp_num_layers:
        return None
    h = m.hidden_size
    acc = ctx.new("mtp")
    acc.norm(Tn * h, m, "MTP enorm")
    acc.norm(Tn * h, m, "MTP hnorm")
    acc.elem(4.0 * T * h, "MTP embedding gather", 1.0, (1, 1))
    acc.gemm(T, max(1, h // tp), 2 * h, name="MTP eh_proj")
    acc.quant_flush()
    return acc.times(ctx.host, ctx.graphs)


def ops_summary(ops: dict | None, made: dict[str, LayerOps], host: float, graphs: frozenset) -> None:
    """Store each layer kind's kernel counts and host summary in ``ops`` (``_kernels``, ``_host``)."""
    if ops is not None:
        ops["_kernels"] = {k: (sum(a.kf.values()), sum(a.kb.values())) for k, a in made.items()}
        ops["_host"] = {k: a.host_summary(host, graphs if k not in ("embedding", "head") else frozenset())
                        for k, a in made.items()}

