"""Step 4: the plan's pipeline schedule simulated on the chunk costs of :mod:`.stage`
(:func:`primus_launch.projection.pipeline.simulate.simulate`, one activation send as the P2P time)."""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.pipeline.simulate import PipelineResult, simulate
from primus_launch.projection.steps.setup import Setup
from primus_launch.projection.steps.stage import StageCosts


def schedule_name(plan: Plan) -> str:
    """The schedule the plan runs: ``training.pipeline_schedule``, 1F1B without PP."""
    return plan.training.pipeline_schedule if plan.parallel.pp > 1 else "1f1b"


def pipeline_schedule(s: Setup, stages: StageCosts, record: bool = False) -> PipelineResult:
    """The simulated schedule (``training.pipeline_schedule``; 1F1B without PP; Megatron's interleaved
    micro-batch groups, ``parallel.microbatch_group``); ``record``: keep the timeline's events."""
    plan = s.plan
    p = plan.parallel
    schedule = schedule_name(plan)
    group = p.microbatch_group if plan.framework == "megatron" else None  # Megatron's interleaved groups
    costs = [[q.cost() for q in row] for row in stages.chunks]
    return simulate(schedule, p.pp, p.vpp, plan.num_microbatches, costs, stages.p2p_s, record=record, group=group)
