"""Step 1: what every step of the projection reads, resolved once."""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan
from primus_launch.projection.hardware.gpus import GPUSpec, get_gpu
from primus_launch.projection.hardware.placement import Layout, layout
from primus_launch.projection.layer_times import LayerTimes, PassTimes


@dataclass(frozen=True)
class Setup:
    """The plan (after ``resolve_power_cap``), its GPU spec (looked up once), the placement of its
    parallel groups on the scale-up domains, and the compute-only per-layer times of one micro-batch
    (``lt``; ``attn``: the core-attention share of a layer, zeros where there is none)."""

    plan: Plan
    spec: GPUSpec
    lay: Layout
    lt: LayerTimes
    attn: PassTimes


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
                 attn=attn or PassTimes(0.0, 0.0, 0.0))
