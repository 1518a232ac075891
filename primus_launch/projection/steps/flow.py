"""The steps of :mod:`primus_launch.projection.steps` run in order, and their results turned into the
:class:`~primus_launch.projection.result.ProjectionResult` of one iteration."""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.plan import Plan
from primus_launch.projection.cost.flops import model_flops_per_iteration
from primus_launch.projection.layer_times import LayerTimes
from primus_launch.projection.memory.estimate import estimate_memory
from primus_launch.projection.pipeline.simulate import PipelineResult
from primus_launch.projection.result import ProjectionResult, TimelineEvent
from primus_launch.projection.steps.iteration import IterationCosts, iteration_costs
from primus_launch.projection.steps.layer import LayerCosts, layer_costs
from primus_launch.projection.steps.schedule import pipeline_schedule, schedule_name
from primus_launch.projection.steps.setup import Setup, setup
from primus_launch.projection.steps.stage import StageCosts, stage_costs


@dataclass(frozen=True)
class Steps:
    """Every step's result for one plan and its layer times."""

    setup: Setup
    layer: LayerCosts
    stages: StageCosts
    pipeline: PipelineResult
    iteration: IterationCosts


def run_steps(plan: Plan, layer_times: LayerTimes, record_timeline: bool = False) -> Steps:
    """Layer costs -> stage costs -> pipeline schedule -> iteration for ``plan`` (after
    ``resolve_power_cap``) with ``layer_times``; ``record_timeline``: keep the schedule's events."""
    s = setup(plan, layer_times)
    layer = layer_costs(s)
    stages = stage_costs(s, layer)
    pipe = pipeline_schedule(s, stages, record_timeline)
    return Steps(s, layer, stages, pipe, iteration_costs(s, stages, pipe))


def projection_result(st: Steps, mode: str, record_timeline: bool = False,
                      memory_margin: float = 0.0) -> ProjectionResult:
    """The :class:`ProjectionResult` of ``st``: the iteration's time, throughput, FLOPs (Megatron's
    ``num_floating_point_operations``, ``cost/flops.py``), MFU on the GPU's peak of the plan's precision,
    memory (``memory/estimate.py``), breakdown, timeline and notes."""
    plan, spec = st.setup.plan, st.setup.spec
    it, pipe = st.iteration, st.pipeline
    pp = plan.parallel.pp
    nmb = plan.num_microbatches
    iteration = it.iteration_s
    makespan = pipe.makespan_s
    world = plan.world_size
    flops = model_flops_per_iteration(plan)
    tflops = flops / (iteration * world) / 1e12
    timeline: list[TimelineEvent] = []
    # stages are numbered from 0 as in the memory's "worst stage" and --json's memory.stages ("critical stage 3 of
    # 4" read as the third of four where it was the last)
    mbs = f"{nmb} micro-batch{'es' if nmb != 1 else ''}; schedule {pipe.schedule or schedule_name(plan)}"
    notes = [f"time breakdown of pipeline stage {it.critical_stage} (the busiest; stages 0-{pp - 1}); {mbs}"
             if pp > 1 else mbs]
    ids16 = sorted(plan.bf16_layer_ids()) if st.setup.lt_bf16 is not None else []
    if ids16:  # the per-op tables of --explain price the FP8 / FP4 layers; say where the BF16 ones went
        notes.append(f"{len(ids16)} decoder layer{'s' if len(ids16) != 1 else ''} (ids {', '.join(map(str, ids16))}) "
                     f"timed in BF16 (--first-last-layers-bf16: out of the {plan.training.precision.upper()} "
                     "context): their GEMMs at the BF16 peak, on the stages holding them; the per-layer tables "
                     f"below are the {plan.training.precision.upper()} layers'")
    if record_timeline:
        timeline = list(pipe.events)
        end = makespan
        if pipe.timeline_microbatches < nmb:  # a long schedule, drawn for fewer micro-batches (pipeline.simulate)
            end = max((e.end_s for e in timeline), default=0.0)
            notes.append(f"timeline: drawn for {pipe.timeline_microbatches:,} of the {nmb:,} micro-batches (the same "
                         f"steady state; the figures are the whole iteration's)")
        for rank in range(pp):
            g, o = it.tails[rank].dp_s, it.tails[rank].optimizer_s
            if g > 0:
                timeline.append(TimelineEvent(stage=rank, kind="dp_comm", start_s=end, end_s=end + g))
            timeline.append(TimelineEvent(stage=rank, kind="optimizer", start_s=end + g, end_s=end + g + o))
    return ProjectionResult(
        mode=mode, iteration_time_s=iteration,
        tokens_per_sec_per_gpu=plan.tokens_per_iteration / (iteration * world),
        model_tflops_per_gpu=tflops, mfu=tflops * 1e12 / spec.peak_flops(plan.training.precision), num_gpus=world,
        model_flops_per_iteration=flops, time_breakdown=it.breakdown,
        memory=estimate_memory(plan, margin=memory_margin), plan=plan, timeline=timeline, notes=notes)
