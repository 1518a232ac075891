"""Step 5: after the pipeline, per stage the DP gradient sync and the optimizer step
(``cost/dp_comm.py``, ``cost/optimizer.py``); the iteration time and its breakdown.

Iteration = pipeline makespan + max over stages of (exposed DP + optimizer).

Breakdown (exposed seconds, summing to the iteration time), on the busiest stage ``c``:
compute = its chunk costs without the communication parts; tp/cp/ep_comm = the exposed parts in
them; dp_comm = FSDP exposed + post-pipeline DP; pp_comm = the sends on the critical path (the first
forward wave's pp-1 links per chunk and the last backward wave's, 2 (pp-1) vpp sends, at most the
idle time of stage c; with the combined 1F1B each steady step's wait for its neighbours' sends too, which
is part of busy_c); bubble = makespan - busy_c - the waves' sends (the idle time of stage c not on them); optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass

from primus_launch.projection.cost.dp_comm import dp_grad_sync, embedding_grad_sync_s, held_parameters
from primus_launch.projection.cost.muon import muon_step_s
from primus_launch.projection.cost.optimizer import optimizer_step_s
from primus_launch.projection.cost.step_extras import step_extras_s
from primus_launch.projection.memory.params import stage_parameter_split
from primus_launch.projection.pipeline.simulate import PipelineResult
from primus_launch.projection.steps.setup import Setup
from primus_launch.projection.steps.stage import StageCosts


@dataclass(frozen=True)
class StageTail:
    """What one stage runs after the pipeline: exposed DP seconds (gradient sync + parameter
    all-gather) and the optimizer step."""

    dp_s: float
    optimizer_s: float


@dataclass(frozen=True)
class IterationCosts:
    """``tails`` per stage; ``tail_stage``: the stage whose tail is longest (it ends the iteration);
    ``iteration_s``; ``critical_stage``: the busiest stage of the pipeline, whose terms the
    ``breakdown`` (module doc) reports."""

    tails: tuple[StageTail, ...]
    tail_stage: int
    iteration_s: float
    critical_stage: int
    breakdown: dict[str, float]


def stage_tails(s: Setup, stages: StageCosts) -> list[StageTail]:
    """Per pipeline stage, what it runs after the pipeline (:class:`StageTail`): the exposed DP
    gradient sync behind its forward / backward windows (``cost/dp_comm.py``) and its optimizer step
    (``cost/optimizer.py``); stages 0 and ``pp - 1`` add Megatron's word-embedding gradient all-reduce
    (``cost/dp_comm.py`` ``embedding_grad_sync_s``); the optimizer term adds Megatron's per-iteration passes over
    the stage's gradient buffer and the step's scalar all-reduces (``cost/step_extras.py``).  The iteration is the
    makespan plus the longest of them."""
    plan, spec, lay = s.plan, s.spec, s.lay
    stage_params = stage_parameter_split(plan)
    post = []
    pp = plan.parallel.pp
    emb = embedding_grad_sync_s(plan, spec, lay)   # stages 0 and pp - 1: the word-embedding all-reduce
    for rank in range(pp):
        sp_ = stage_params[rank]
        row = stages.chunks[rank]
        fwd_win = sum(q.fwd for q in row)
        bwd_win = sum(q.bwd_input + q.bwd_weight for q in row)
        per_chunk = [(q.fwd, q.bwd_input + q.bwd_weight) for q in row]
        dp_s = dp_grad_sync(plan, spec, lay, sp_, fwd_win, bwd_win, rank, per_chunk)
        if rank in (0, pp - 1):
            dp_s += emb
        if plan.training.optimizer == "muon" and plan.framework == "megatron" and plan.parallel.dp_sharding == "none":
            opt_s = muon_step_s(plan, spec, lay, rank)   # cost/muon.py: Newton-Schulz, owners, all-gathers
        else:
            opt_s = optimizer_step_s(plan, spec, held_parameters(plan, lay, sp_), overlap_s=dp_s)
        # Megatron's passes over the stage's gradient buffer and the step's scalar all-reduces (cost/step_extras.py)
        opt_s += step_extras_s(plan, spec, lay, sp_.dense, sp_.expert, last_stage=rank == pp - 1)
        post.append(StageTail(dp_s, opt_s))
    return post


def iteration_costs(s: Setup, stages: StageCosts, pipe: PipelineResult) -> IterationCosts:
    """The :class:`IterationCosts` of ``s`` from its chunk costs and simulated schedule (module doc)."""
    plan, spec, lay = s.plan, s.spec, s.lay
    pp, vpp = plan.parallel.pp, plan.parallel.vpp
    nmb = plan.num_microbatches
    makespan = pipe.makespan_s
    post = stage_tails(s, stages)
    crit_post = max(range(pp), key=lambda i: post[i].dp_s + post[i].optimizer_s)
    dp_post, opt_s = post[crit_post].dp_s, post[crit_post].optimizer_s
    iteration = makespan + dp_post + opt_s

    busy = pipe.stage_busy_s
    c = max(range(pp), key=lambda i: busy[i])
    parts = stages.chunks[c]
    tp_c = nmb * sum(q.tp for q in parts)
    cp_c = nmb * sum(q.cp for q in parts)
    ep_c = nmb * sum(q.ep for q in parts)
    dpin_c = nmb * sum(q.dp for q in parts)
    ppin_c = nmb * sum(q.pp for q in parts)
    compute_c = busy[c] - tp_c - cp_c - ep_c - dpin_c - ppin_c
    # the sends on the critical path: the first forward wave crosses pp-1 links per model chunk and
    # the last backward wave crosses them back (the simulation hides the others behind compute);
    # with the combined 1F1B each steady step also waits for its neighbours' sends (ppin_c)
    # (ppin_c is inside busy[c] already: the bubble is the idle time less the waves' sends only)
    waves = min(max(0.0, makespan - busy[c]), 2 * (pp - 1) * vpp * stages.p2p_s)
    pp_comm = ppin_c + waves
    bubble = max(0.0, makespan - busy[c] - waves)
    breakdown = {"compute": compute_c, "tp_comm": tp_c, "cp_comm": cp_c, "ep_comm": ep_c,
                 "dp_comm": dpin_c + dp_post, "pp_comm": pp_comm, "bubble": bubble, "optimizer": opt_s}
    return IterationCosts(tails=tuple(post), tail_stage=crit_post, iteration_s=iteration, critical_stage=c,
                          breakdown=breakdown)
