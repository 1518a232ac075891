"""Step 1: what every step of the projection reads, resolved once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection.hardware.gpus import GPUSpec, get_gpu
from primus_launch.projection.hardware.placement import Layout, layout
from primus_launch.projection.layer_times import LayerTimes, PassTimes


@dataclass(frozen=True)
class Setup:
    """The plan (after ``resolve_power_cap``), its GPU spec (looked up once), the placement of its
    parallel groups on the scale-up domains, and the compute-only per-layer times of one micro-batch
    (``lt``; ``attn``: the core-attention share of a layer, zeros where there is none); ``lt_bf16``: the times of
    the same layers run in BF16 (:func:`bf16_layer_times`), for the decoder layers the plan keeps out of the FP8 /
    FP4 context (``Plan.bf16_layer_ids``); None when there are none."""

    plan: Plan
    spec: GPUSpec
    lay: Layout
    lt: LayerTimes
    attn: PassTimes
    lt_bf16: Optional[LayerTimes] = None


def setup(plan: Plan, layer_times: LayerTimes) -> Setup:
    """The :class:`Setup` of ``plan`` with ``layer_times`` (roofline or measured).  Measured layer
    times without an attention split, where selective recompute or CP need one, take the roofline's
    core-attention share of a dense layer, scaled to the measured dense layer."""
    t, p = plan.training, plan.parallel
    lt = layer_times
    attn = lt.attn_core
    if attn is None and (t.recompute.granularity == "selective" or p.cp > 1):
        from primus_launch.projection.cost.roofline import layer_times_roofline

        roof = layer_times_roofline(plan)
        ra = roof.attn_core or PassTimes(0.0, 0.0, 0.0)
        k = lt.dense_layer.total_s / roof.dense_layer.total_s if roof.dense_layer.total_s > 0 else 0.0
        attn = PassTimes(ra.fwd_s * k, ra.bwd_input_s * k, 0.0)
        lt = LayerTimes(**{**{f: getattr(lt, f) for f in ("dense_layer", "moe_layer", "embedding", "head_loss",
                                                          "dense_window_layer", "moe_window_layer", "mtp_extra",
                                                          "parts", "hybrid")}, "attn_core": attn})
    return Setup(plan=plan, spec=get_gpu(plan.cluster.gpu), lay=layout(plan), lt=lt,
                 attn=attn or PassTimes(0.0, 0.0, 0.0), lt_bf16=bf16_layer_times(plan, lt))


def bf16_plan(plan: Plan) -> Plan:
    """``plan`` with every decoder layer in BF16: precision bf16 and the FP8 / FP4 fields cleared (what a layer
    outside the FP8 / FP4 context runs: megatron-core 0.16.1 ``fp8_utils.py`` ``get_fp8_context`` returns
    ``nullcontext()`` for it, so Transformer Engine's linears run their BF16 GEMMs without quantize / amax /
    transpose kernels, attention in BF16 whatever ``fp8_dot_product_attention`` says, and ``fp8_model_init`` is
    not entered at build time: BF16 weights even with ``--fp8-param-gather``)."""
    return plan.with_changes(training={"precision": "bf16", "fp8_recipe": None, "fp8_param_gather": False,
                                       "fp8_attention": False, "fp4_recipe": None, "fp4_layer_pattern": None,
                                       "bf16_layers_start": 0, "bf16_layers_end": 0})


def bf16_layer_times(plan: Plan, lt: LayerTimes) -> Optional[LayerTimes]:
    """The per-layer times of ``plan``'s layers run in BF16, for its ``bf16_layer_ids`` (None when it keeps none):
    the roofline's times of :func:`bf16_plan`, each pass of each layer kind scaled by ``lt`` / the roofline's
    times of ``plan`` (1 when ``lt`` is the roofline's; a measured ``lt`` keeps its measured-to-roofline ratio)."""
    if not plan.bf16_layer_ids():
        return None
    from primus_launch.projection.cost.roofline import layer_times_roofline

    roof, roof16 = layer_times_roofline(plan), layer_times_roofline(bf16_plan(plan))

    def scaled(x: Optional[PassTimes], r: Optional[PassTimes], b: Optional[PassTimes]) -> Optional[PassTimes]:
        if x is None or r is None or b is None:
            return b
        k = [xa / ra if ra > 0 else 1.0 for xa, ra in ((x.fwd_s, r.fwd_s), (x.bwd_input_s, r.bwd_input_s),
                                                      (x.bwd_weight_s, r.bwd_weight_s))]
        return PassTimes(b.fwd_s * k[0], b.bwd_input_s * k[1], b.bwd_weight_s * k[2])

    kinds = ("dense_layer", "moe_layer", "dense_window_layer", "moe_window_layer")
    hyb = {sym: scaled(lt.layer(sym), roof.layer(sym), t) for sym, t in (roof16.hybrid or {}).items()} \
        if roof16.hybrid else None
    return LayerTimes(**{f: scaled(getattr(lt, f), getattr(roof, f), getattr(roof16, f)) for f in kinds},
                      embedding=lt.embedding, head_loss=lt.head_loss, attn_core=lt.attn_core, mtp_extra=lt.mtp_extra,
                      parts=lt.parts, hybrid=hyb)
