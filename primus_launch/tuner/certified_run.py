"""A tune's certified search: the branch and bound (``branch_bound.py``) run from the recipe's own plan as the
incumbent, with the planner's one warm start (:func:`warm_start`), its scored and rejected plans recorded in
the tune's memo as trials, and its certificate's count of scored plans made the tune's."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.engine import Engine, Exhausted, Memo, flat_fields
from primus_launch.tuner.planner import Planner, hierarchical
from primus_launch.tuner.planner_and_sweep import INDEX_LIMIT
from primus_launch.tuner.result import Certificate
from primus_launch.tuner.space import Knobs, Space, apply_knobs

if TYPE_CHECKING:
    from primus_launch.executor import Executor


def run_branch_and_bound(plan: Plan, sp: Space, memo: Memo, own: Knobs, baseline: ProjectionResult,
                      memory_margin: float, max_work: Optional[int], progress: bool,
                      executor: Optional["Executor"] = None, memory_certain: bool = False,
                      start: Optional[float] = None) -> Certificate:
    """Run the certified search (``branch_bound.py``) from the recipe's own plan as the incumbent
    (when it fits), its expansions computed ahead on ``executor``'s workers when one is given; its
    scored plans go into ``memo`` as trials (source ``branch-and-bound``)."""
    from primus_launch.tuner.branch_bound import DEFAULT_MAX_WORK, BranchBound, certificate_text
    from primus_launch.tuner.incumbent import Incumbent

    own_i = sp.index(own)
    inc = Incumbent()
    if baseline.memory.fits:
        inc = Incumbent(baseline.iteration_time_s, own_i if own_i is not None else -1)
    bar = None
    if progress:
        from primus_launch.tuner.progress import Progress

        bar = Progress(total=len(sp), baseline_s=baseline.iteration_time_s, unit="plans", start=start)

    def tick(done: int, total: int, best_s: float) -> None:
        if bar is not None:
            bar.advance_to(done, best_s, force=done >= total)

    bb = BranchBound(plan, sp, score=memo.score_fn, prefilter=memo.prefilter_fn, memory_margin=memory_margin,
                     memory_certain=memory_certain)
    try:
        # the baseline is one of the space's plans, scored already: the search counts it once among the scored
        seed = (own_i, memo.results[own]) if own_i is not None and own in memo.results else None
        limit = DEFAULT_MAX_WORK if max_work is None else max_work
        out = bb.run(inc, max_work=limit, progress=tick, executor=executor, seed=seed,
                     warm=warm_start(plan, sp, memo, own), warm_at=int(WARM_AT * limit))
    finally:
        if bar is not None:
            bar.close()
    rec = Engine(plan, [], memo=memo)
    for i, why in out.rejected:
        k = sp[i]
        memo.reasons[k] = why
        memo.rejected_seen.add(k)
        rec.record(apply_knobs(plan, k), "branch-and-bound", reason=why)
    for i, r in sorted(out.scored, key=lambda x: x[0]):
        k = sp[i]
        if k in memo.results:
            continue
        memo.results[k] = r
        memo.scored += 1
        rec.record(apply_knobs(plan, k), "branch-and-bound", result=r)
    cert = out.certificate
    if cert.scored != memo.scored:   # the recipe's own plan lies outside the space: scored too, once
        cert.scored = memo.scored
        text = certificate_text(cert, memory_certain)
        why = _outside_settings(plan, sp, own)
        cert.text = (text[:-1] + f"; the recipe's own plan, outside the space, among the scored: outside by {why})"
                     if cert.certified else text)
    return cert


def _outside_settings(plan: Plan, sp: Space, own: Knobs) -> str:
    """The recipe's settings (plan field names, ``name=value``) that differ from the space's candidate
    nearest its own plan (:meth:`Space.nearest`): what puts the recipe's plan outside the space."""
    near = sp.nearest(own)
    if near is None:
        return "its settings"
    a, b = (flat_fields(apply_knobs(plan, k).model_dump(include={"parallel", "training"})) for k in (own, near))
    diff = [f"{key}={a[key]}" for key in a if a[key] != b.get(key)]
    return ", ".join(diff) or "its settings"


#: the branch and bound's warm start (``warm_start``) runs when this fraction of its work limit is spent
WARM_AT = 0.25


#: the scorings a warm start may spend
WARM_SCORINGS = 48


#: the work a warm start may spend at least (units of ``branch_bound.WORK_*``; else the search's own so far):
#: about one planner round's sweeps around the recipe's plan
WARM_MIN_WORK = 2_000


def warm_start(plan: Plan, sp: Space, memo: Memo, own: Knobs) -> Callable[[int, list, int], tuple[list, int]]:
    """The branch and bound's warm start (``branch_bound.BranchBound.run``'s ``warm``): a search whose work
    reached :data:`WARM_AT` of its limit without a plan better than the recipe's own (or, that kept out, any) is pricing the memory of many structures below its incumbent (or,
    with none, scoring plans none of which the memory rule admits; tune13: DeepSeek-V3 FP8 on 1024 H100 with
    ``--allow fp8,optimizer-dtypes --memory-certain`` priced 16,000 memory groups, all out, and stopped with
    its recipe's plan 6 % slower than one the planner finds in 87 scorings).  The deterministic planner
    (``planner.py``: single-axis sweeps and local search around the incumbent, the recipe's plan without
    one; :func:`planner.hierarchical` for spaces too big to index) runs on a memo of its own, knowing
    what the search scored, for at most :data:`WARM_SCORINGS` scorings and ``cap`` units of work (the search's
    own so far, at least :data:`WARM_MIN_WORK`; counted apart from the search's limit); it returns what it scored and its work (scorings and pre-filter
    calls, ``branch_bound.WORK_*``).  Sound for the certificate: a plan it
    finds is a scored plan of the space, and the search only bounds by a scored plan's time."""
    from primus_launch.tuner.branch_bound import WORK_PREFILTER, WORK_SCORE

    def warm(inc_idx: int, scored: list, cap: int) -> tuple[list, int]:
        calls = [0]
        cap = max(cap, WARM_MIN_WORK)

        def pf(p: Plan) -> Optional[str]:   # the pre-filter, counted; past the work cap every plan is out
            if calls[0] * WORK_PREFILTER + tmp.scored * WORK_SCORE >= cap:
                tmp.budget = tmp.scored   # and no more scoring: the planner stops at its next one
                return "the warm start's work is spent"
            calls[0] += 1
            return memo.prefilter_fn(p)

        tmp = Memo(plan, score=memo.score_fn, prefilter=pf, budget=WARM_SCORINGS, time_limit_s=None)
        for i, r in scored:
            tmp.results[sp[i]] = r
            tmp.reasons[sp[i]] = None
        before = set(tmp.results)
        start = sp[inc_idx] if inc_idx >= 0 else own
        try:
            if len(sp) <= INDEX_LIMIT:
                Planner(Engine(plan, list(sp), memo=tmp)).run(start)
            else:
                hierarchical(sp, tmp, start)
        except Exhausted:
            pass
        new = [(sp.index(k), r) for k, r in tmp.results.items() if k not in before and sp.index(k) is not None]
        return new, tmp.scored * WORK_SCORE + calls[0] * WORK_PREFILTER

    return warm
