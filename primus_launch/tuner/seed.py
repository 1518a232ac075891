"""The recipe's own plan in a tune: scored first, as the ``seed`` trial (even where the pre-filter would reject
it), and the warning that it does not fit or is tight in memory (the gain is relative to it anyway).  Called by
:func:`primus_launch.tuner.search.tune` and the planner's and brute force's runs (``planner_and_sweep.py``)."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.engine import Engine, Memo
from primus_launch.tuner.space import Knobs, Space, apply_knobs


def baseline_warnings(baseline: Optional[ProjectionResult], memory_certain: bool) -> list[str]:
    """The warning (none, or one) that the recipe's own plan does not fit or is tight in memory: the gain is
    relative to it anyway."""
    if baseline is None or baseline.memory.fits:
        return []
    return [("the original plan is tight in memory (its peak's error band holds the capacity), kept out "
             "by --memory-certain" if memory_certain else
             "the original plan's point estimate of its peak is over the usable capacity (tight: more "
             "likely to run out of memory than not)") + "; gain is relative to it anyway"
            if baseline.memory.verdict == "tight" else
            "the original plan does not fit in memory by the projection; gain is relative to it anyway"]


def score_baseline(plan: Plan, sp: Space, memo: Memo, own: Knobs) -> ProjectionResult:
    """The user's plan as given, scored first (even when the pre-filter would reject it) and
    recorded as the ``seed`` trial."""
    if sp.index(own) is not None:
        if own not in memo.reasons:
            try:
                memo.reasons[own] = memo.prefilter_fn(apply_knobs(plan, own))
            except Exception as e:
                memo.reasons[own] = f"pre-filter error: {type(e).__name__}: {e}"
        if memo.reasons[own] is None:
            deadline, memo.deadline = memo.deadline, None  # the baseline is scored whatever the limit
            try:
                Engine(plan, [own], memo=memo).evaluate(0, "seed")
            finally:
                memo.deadline = deadline
            if own in memo.results:
                return memo.results[own]
    res = memo.score_fn(plan)
    memo.scored += 1
    Engine(plan, [], memo=memo).record(plan, "seed", result=res)
    return res
