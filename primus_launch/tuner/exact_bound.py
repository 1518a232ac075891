"""The branch and bound's level-2 time bound of one plan (``branch_bound.py``'s level 3 of nodes): the plan's
exact chunk costs (the projection's own typed steps: ``steps/setup.py``, ``steps/layer.py``, ``steps/stage.py``)
under the pipeline makespan's lower bound (:func:`~primus_launch.projection.pipeline.simulate.makespan_lower_bound`:
``max_r (head_r + m busy_r + tail_r)`` with the sends, a bound of the event simulation of the same schedule on the
same costs), plus the plan's exact post-pipeline tail (``steps/iteration.py`` ``stage_tails``: DP sync and
optimizer step).  Only the simulation of the schedule is bounded, so it is at most the dry-run's iteration time
of the plan (``tests/test_tuner_bounds.py`` checks it on sampled plans of every bundled recipe); its key names
everything the iteration time reads after the chunk costs, for the search's dominance test."""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.pipeline.simulate import makespan_lower_bound


def exact_bound(plan: Plan) -> float:
    """Level 2 (module doc): the makespan bound on ``plan``'s exact chunk costs plus its exact
    post-pipeline tail; at most the dry-run's iteration time of ``plan``."""
    return exact_bound_key(plan)[0]


def exact_bound_key(plan: Plan) -> tuple[float, tuple]:
    """:func:`exact_bound` and everything the dry-run's iteration time of ``plan`` reads after its chunk
    costs: the schedule, its degrees, micro-batches and groups, the chunk costs, the send and the
    post-pipeline tails (``steps/schedule.py``, ``steps/iteration.py``).  Two plans of one structural
    candidate with equal keys have equal iteration times (``tests/test_tuner_bounds.py``)."""
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.gpus import resolve_power_cap
    from primus_launch.projection.steps.iteration import stage_tails
    from primus_launch.projection.steps.layer import layer_costs
    from primus_launch.projection.steps.schedule import schedule_name
    from primus_launch.projection.steps.setup import setup
    from primus_launch.projection.steps.stage import stage_costs

    from primus_launch.plan.normal_form import normal_copy

    run = resolve_power_cap(normal_copy(plan))   # the normal form the dry-run prices (plan/normal_form.py)
    s = setup(run, layer_times_roofline(run))
    st = stage_costs(s, layer_costs(s))
    p = run.parallel
    costs = [[q.cost() for q in row] for row in st.chunks]
    ms = makespan_lower_bound(schedule_name(run), p.pp, p.vpp, run.num_microbatches, costs, st.p2p_s)
    tails = tuple((t.dp_s, t.optimizer_s) for t in stage_tails(s, st))
    key = (schedule_name(run), p.pp, p.vpp, run.num_microbatches, p.microbatch_group if run.framework == "megatron" else None,
           tuple(tuple((c.fwd_s, c.bwd_input_s, c.bwd_weight_s) for c in row) for row in costs), st.p2p_s, tails)
    return ms + max(a + b for a, b in tails), key
