"""Branch and bound over a tuning space: the fastest plan that fits, with a proof.

The space (:class:`~primus_launch.tuner.space.Space`) is a product: structural candidates (parallel
degrees, micro-batch, sharding, recompute, schedule, pipeline split) times each one's table of legal
execution-flag tuples.  The search bounds the iteration time from below (:mod:`primus_launch.tuner.bounds`)
at three levels of nodes:

1. a structural candidate: its level-1 bound over its whole flag table (compute at the roofline
   floor, the bubble its schedule cannot avoid) and its memory floor (weights, gradients and
   optimizer state at its sharding);
2. a compute variant of its table (precision, FP8 recipe, dispatcher, compile): the same bound for
   that variant alone;
3. a plan: its exact chunk costs and post-pipeline tail, only the schedule's makespan bounded.

Structural candidates are taken best first (the lowest level-1 bound next, ties in the space's
order); a candidate's bound is first refined with the floor of what follows the pipeline
(``bounds.tail_floor``) and put back in line, then expanded when it is again the lowest, unless every one of its memory groups (the flags the memory
model reads, ``bounds.memory_key``) is ``does not fit`` by the pre-filter's own bytes (one pricing per
group, counted as a pre-filter in the work).  A node whose bound reaches the incumbent's time is bounded out with every plan below it; a
candidate whose memory floor does not fit is bounded out by memory.  Inside a candidate, the plans
left (their memory group not bounded out) are taken by their level-3 bound, at least their variant's
refined bound (ties in the space's order); one whose ``bounds.exact_bound_key`` (what the iteration
time reads after the chunk costs) equals that of a plan of the candidate already scored that fits has
that plan's time and a later index, so it cannot win: it is bounded out (dominance); each other is pre-filtered
(divisibility, memory verdict ``does not fit``) and scored with the projection; a scored plan that
fits (verdict ``fits`` or ``tight``) becomes the incumbent when it is faster (ties: earlier in the
space's order).  The search ends when the lowest open bound reaches the incumbent, which is then the
best of all plans of the space: a :class:`Certificate`.

Determinism: no wall clock enters the search.  The order depends only on the bounds and the space's
order; the optional ``max_work`` stops it after that many plan bounds + scorings, at a candidate's
end (a count, the same on any machine under any load), and the result then says how far the best may
be from the optimum (``gap``: best / lowest open bound - 1).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np
from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.result import Certificate
from primus_launch.tuner.bounds import F, VARIANT_FLAGS, BoundModel, pick, exact_bound_key
from primus_launch.tuner.space import Knobs, Space, apply_knobs

Score = Callable[[Plan], ProjectionResult]
Prefilter = Callable[[Plan], Optional[str]]
#: a bound counts as reaching the incumbent when ``bound * (1 - EPS) >= incumbent``: the bounds are
#: sums of the projection's own numbers in another order, equal to it up to rounding
EPS = 1e-9
#: work units of one step, roughly its cost in plan bounds (a plan's exact chunk costs take ~1 ms on
#: this project's 2-core machine, the memory pre-filter 1-10 ms, a scoring 3-18 ms): the work limit
#: counts these, never seconds
WORK_BOUND, WORK_PREFILTER, WORK_SCORE = 1, 5, 8
#: the default work limit of a tune: about a minute on one core of this project's CI machine
DEFAULT_MAX_WORK = 40_000


@dataclass
class Incumbent:
    """The best plan so far: its iteration time and space index (-1: the recipe's plan, outside)."""

    t: float = float("inf")
    idx: int = -1

    def beaten_by(self, t: float, idx: int) -> bool:
        return (t, idx) < (self.t, self.idx) if self.t != float("inf") else True

    def reached(self, lb: float) -> bool:
        return lb * (1 - EPS) >= self.t


@dataclass
class SearchResult:
    inc: Incumbent
    scored: list[tuple[int, ProjectionResult]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    certificate: Optional[Certificate] = None


class BranchBound:
    """One branch-and-bound search of ``space`` (module doc).  ``usable(result)``: whether a scored plan
    may be the answer (its memory verdict)."""

    def __init__(self, plan: Plan, space: Space, *, score: Score, prefilter: Prefilter,
                 usable: Callable[[ProjectionResult], bool] = lambda r: r.memory.fits, memory_margin: float = 0.0,
                 bound: Callable[[Plan], tuple[float, tuple]] = exact_bound_key):
        self.plan, self.space = plan, space
        self.score, self.prefilter, self.usable, self.bound = score, prefilter, usable, bound
        self.bm = BoundModel(plan, space, memory_margin)

    def run(self, inc: Incumbent, *, max_work: Optional[int] = None,
            progress: Optional[Callable[[int, int, float], None]] = None) -> SearchResult:
        """Branch and bound from the incumbent ``inc`` (the recipe's own plan when it may be the
        answer); ``progress(done, total, best_s)`` after each structural candidate."""
        sp, bm = self.space, self.bm
        sizes = np.diff(sp.offsets)
        n_total = int(sizes.sum())
        lb = bm.level1_all()
        order = np.lexsort((np.arange(len(lb)), lb))
        res = SearchResult(inc=inc)
        c = dict(bounded_time=0, bounded_memory=0, work=0, expanded=0, violations=0)
        pending: list[tuple[float, int]] = []   # structural candidates with their refined bound (+ tail floor)
        done = 0
        at = 0
        stopped = False
        while at < len(order) or pending:
            nxt = (float(lb[order[at]]), int(order[at])) if at < len(order) else (float("inf"), -1)
            if pending and pending[0] <= nxt:
                r, s = heapq.heappop(pending)
                if inc.reached(r):
                    heapq.heappush(pending, (r, s))
                    break
                if max_work is not None and c["work"] >= max_work:
                    heapq.heappush(pending, (r, s))
                    stopped = True
                    break
                before = bm.priced
                out = bm.memory_scan(s)
                c["work"] += (bm.priced - before) * WORK_PREFILTER
                if out:
                    c["bounded_memory"] += int(sizes[s])
                else:
                    self._expand(s, inc, res, c)
            else:
                s = nxt[1]
                if inc.reached(nxt[0]):
                    break
                at += 1
                if bm.memory_out(s):
                    c["bounded_memory"] += int(sizes[s])
                else:   # refine: with the floor of what follows the pipeline, then back in line
                    heapq.heappush(pending, (max(nxt[0], float(bm.refined_variants(s).min())), s))
                    continue
            done += int(sizes[s])
            if progress is not None:
                progress(done, n_total, inc.t)
        rest = [int(x) for x in order[at:]] + [s for _, s in pending]
        left = int(sizes[rest].sum()) if rest else 0
        open_lb = None
        if stopped:
            open_lb = min(float(lb[order[at]]) if at < len(order) else float("inf"),
                          pending[0][0] if pending else float("inf"))
        if not stopped:
            c["bounded_time"] += left
        best = inc.t if inc.t != float("inf") else None
        cert = Certificate(
            certified=not stopped and c["violations"] == 0, plans=n_total, scored=len(res.scored),
            bounded_time=c["bounded_time"], bounded_memory=c["bounded_memory"] + len(res.rejected),
            open=left if stopped else 0, best_s=best, lower_bound_s=open_lb,
            gap=(best / open_lb - 1.0) if (best is not None and open_lb) else 0.0,
            work=c["work"], structs_expanded=c["expanded"], bound_violations=c["violations"])
        cert.text = certificate_text(cert)
        res.certificate = cert
        if progress is not None:
            progress(n_total if not stopped else done, n_total, inc.t)
        return res

    def _expand(self, s: int, inc: Incumbent, res: SearchResult, c: dict) -> None:
        """Levels 2 and 3 of structural candidate ``s`` against the incumbent, which it improves."""
        sp, bm = self.space, self.bm
        h = sp.structs[s]
        table = sp.tables[sp.ctx[s]]
        off = int(sp.offsets[s])
        c["expanded"] += 1
        vnames = list(bm.variants[sp.ctx[s]])
        vlb = dict(zip(vnames, bm.refined_variants(s).tolist()))
        cands: list[tuple[float, int, tuple]] = []
        before = bm.priced
        for j, f in enumerate(table):
            v = vlb[pick(f, VARIANT_FLAGS, F)]
            if inc.reached(v):
                c["bounded_time"] += 1
                continue
            if bm.group_out(s, f):   # the memory group's floor: a pre-filter's memory model, once per group
                c["bounded_memory"] += 1
                continue
            c["work"] += WORK_BOUND
            e, key = self.bound(apply_knobs(self.plan, Knobs(*h, *f)))
            cands.append((max(v, e), j, key))
        cands.sort(key=lambda t: t[:2])
        usable_keys: set[tuple] = set()
        for n, (e, j, key) in enumerate(cands):
            if inc.reached(e):
                c["bounded_time"] += len(cands) - n
                break
            if key in usable_keys:   # the time of a plan of this candidate already scored, that fits, earlier in order
                c["bounded_time"] += 1
                continue
            cand = apply_knobs(self.plan, Knobs(*h, *table[j]))
            # the plan's memory group is priced (group_out above): its pre-filter finds the memory model
            # in its cache (~0.1 ms); the divisibility checks cost about a bound
            c["work"] += WORK_BOUND
            try:
                why = self.prefilter(cand)
            except Exception as ex:  # a pre-filter bug must not kill the search
                why = f"pre-filter error: {type(ex).__name__}: {ex}"
            if why is not None:
                res.rejected.append((off + j, why))
                continue
            c["work"] += WORK_SCORE
            try:
                r = self.score(cand)
            except Exception as ex:  # the projection refusing a plan is a rejection, not a crash
                res.rejected.append((off + j, f"projection failed: {type(ex).__name__}: {ex}"))
                continue
            res.scored.append((off + j, r))
            if r.iteration_time_s < e * (1 - 1e-6):
                c["violations"] += 1
            if self.usable(r):
                usable_keys.add(key)
            if self.usable(r) and inc.beaten_by(r.iteration_time_s, off + j):
                inc.t, inc.idx = r.iteration_time_s, off + j
        c["work"] += (bm.priced - before) * WORK_PREFILTER


def certificate_text(cert: Certificate) -> str:
    """The certificate's line: ``best of all N legal plans (M scored, the rest bounded out)``, or what
    stopped it."""
    if cert.certified:
        return (f"best of all {cert.plans:,} legal plans ({cert.scored:,} scored, the rest bounded out: "
                f"{cert.bounded_time:,} by time, {cert.bounded_memory:,} by memory)")
    if cert.bound_violations:
        return (f"no certificate: {cert.bound_violations} scored plan(s) fell below their own lower bound "
                f"(a bound is wrong; report it)")
    return (f"no certificate: the work limit ({cert.work:,} units of bounding and scoring) stopped the search with "
            f"{cert.open:,} of {cert.plans:,} plans open; the best is at most {100 * cert.gap:.1f} % slower than the optimum")
