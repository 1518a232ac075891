"""Dry-run projection: the roofline layer times (:mod:`primus_launch.projection.cost.roofline`) assembled
into an iteration (:func:`primus_launch.projection.iteration.assemble`), with the flags the model does
not price reported as warnings (:mod:`primus_launch.projection.cost.flags`). No torch, no GPU."""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.iteration import assemble
from primus_launch.projection.result import ProjectionResult


def project_dry_run(plan: Plan, *, memory_margin: float = 0.05, record_timeline: bool = False) -> ProjectionResult:
    """Dry-run projection of ``plan``: kernel-level layer times assembled into an iteration."""
    from primus_launch.projection.cost.flags import unmodelled_flags

    res = assemble(plan, layer_times_roofline(plan), "dry-run", record_timeline=record_timeline,
                   memory_margin=memory_margin)
    warn = unmodelled_flags(plan)
    if warn:
        res = res.model_copy(update={"warnings": list(res.warnings) + warn})
    return res
