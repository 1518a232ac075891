"""Branch and bound over a tuning space: the fastest plan that fits, with a proof.

The space (:class:`~primus_launch.tuner.space.Space`) is a product: structural candidates (parallel
degrees, micro-batch, sharding, recompute, schedule, pipeline split) times each one's table of legal
execution-flag tuples.  The search bounds the iteration time from below (:mod:`primus_launch.tuner.bounds`)
at three levels of nodes:

1. a structural candidate: its level-1 bound over its whole flag table (compute at the roofline
   floor, the bubble its schedule cannot avoid) and its memory floor (weights, gradients and
   optimizer state at its sharding);
2. a node of its table: a compute variant (precision, FP8 recipe, dispatcher, compile, TP / EP
   overlap) and its activation offloading: the same bound for that variant alone, plus the floor of
   the exposed copy of the modules the node offloads (``BoundModel.node_bounds``);
3. a plan: its exact chunk costs and post-pipeline tail, only the schedule's makespan bounded.

Structural candidates are taken best first (the lowest level-1 bound next, ties in the space's
order); a candidate's bound is first refined with the floor of what follows the pipeline
(``floors.tail_floor``, the DP sync paired with its stage: ``BoundModel.refined_variants``) and put
back in line; when it is again the lowest its nodes are met lowest bound first (``Order.step``): a node
whose bound is above the candidate's puts it back in line at that bound, else the node's memory groups
(the flags the memory model reads, ``bound_keys.memory_key``) are priced by the pre-filter's own bytes (one
pricing per group, counted as a pre-filter in the work) until one may fit, which expands the candidate;
a node whose groups are all ``does not fit`` is passed (every node passed: the candidate is bounded out
by memory).  So a plan that must offload modules to fit is bounded with its copy's exposure, and the
candidate needs the memory of only its nodes below the incumbent.  A node whose bound reaches the incumbent's time is bounded out with every plan below it; a
candidate whose memory floor does not fit is bounded out by memory.  Inside a candidate, the plans
left (their node's bound below the incumbent, their memory group not bounded out) are taken by their
level-3 bound, at least their node's bound (ties in the space's order); one whose ``exact_bound.exact_bound_key`` (what the iteration
time reads after the chunk costs) equals that of a plan of the candidate already scored that fits has
that plan's time and a later index, so it cannot win: it is bounded out (dominance); each other is
pre-filtered
(divisibility, memory verdict ``does not fit``) and scored with the projection; a scored plan that
fits (``memory.fits``: the memory rule's, ``memory_rule.py``: ``fits``, or ``tight`` with its point estimate
under the usable capacity; ``fits`` only under ``--memory-certain``) becomes the incumbent when it is faster
(the memory floors, held at the band's lower edge, stay below every plan the rule admits; ties: earlier in the
space's order).  The search ends when the lowest open bound reaches the incumbent, which is then the
best of all plans of the space: a :class:`Certificate`.

Warm start (``run(warm=..., warm_at=...)``, tune13): where the work reaches ``warm_at`` (a quarter of the limit
in a tune, ``certified_run.warm_start``) with no plan better than the one it started from (none, or the recipe's own),
the search is pricing the memory of many structures below its incumbent, or,
holding none, scoring plans the memory rule keeps out; the planner, called once there, returns the plans it
scored; those of structures not yet met join the scored (never bounded or scored again), the fastest usable
one the incumbent when faster.  It changes only how soon plans are bounded by time: each bound is still
against a scored plan's time, so the certificate stays exact (a plan of a structure already met was scored, or
bounded out against an incumbent no better, or by memory: never faster, dropped).  Its work (at most the search's
own so far, or ``certified_run.WARM_MIN_WORK``) is counted apart from the limit's (``Certificate.warm_work``): a better incumbent only bounds more,
so a search that ended within the limit without it still does, with the same or a better answer.

Second tier (``point`` rule, tune13): while no plan is admitted, the fastest scored plan that is ``tight`` or
``fits`` (:attr:`BranchBound.tight`) bounds, in an expansion, the plans whose memory floor held at the point (``BoundModel.point_out``) is over the
capacity and whose bound reaches its time: never the ``point`` answer (their point estimate is over), and never
faster than the ``band`` answer (the fastest tight plan, where no plan is admitted), so both rules' answers
and the certificate stand; it spares the scoring of the tight plans over the capacity where nothing fits by
its point estimate.  The executor's workers bound nothing by it (their replay, never worse, a subset).

Determinism: no wall clock enters the search.  The order depends only on the bounds and the space's
order; the optional ``max_work`` stops it after that many plan bounds + scorings, at a candidate's
end (a count, the same on any machine under any load), and the result then says how far the best may
be from the optimum (``gap``: best / lowest open bound - 1).

Parallel (``run(executor=...)``: local processes, ``--workers N``, or a Ray cluster,
``--ray-address``): the order of expansions (:class:`~primus_launch.tuner.candidate_order.Order`) does not depend on the incumbent, only
where the search stops does; so the structural candidates the search will expand next are sent to
the executor's workers ahead of time, each expanded there against the incumbent known when it was
sent (:func:`~primus_launch.tuner.expansion.expand_ahead`), and the search replays them here in its own order with the workers'
bounds, verdicts and scores (:class:`~primus_launch.tuner.expansion.Oracle`).  An incumbent known earlier is never better than the
one at replay, so a worker computes a superset of what the replay asks: the replay computes nothing
(``SearchResult.recomputed`` counts what it had to), and the plans, trials and certificate are the
sequential search's, whatever order the workers finish in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

import numpy as np
from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.result import Certificate
from primus_launch.tuner.bound_keys import F, NODE_FLAGS, pick
from primus_launch.tuner.bounds import BoundModel
from primus_launch.tuner.exact_bound import exact_bound_key
from primus_launch.tuner.candidate_order import Order
from primus_launch.tuner.expansion import Ahead, Oracle
from primus_launch.tuner.incumbent import Incumbent, SearchResult, counters, fits
from primus_launch.tuner.space import Space

if TYPE_CHECKING:
    from primus_launch.executor import Executor

Score = Callable[[Plan], ProjectionResult]
Prefilter = Callable[[Plan], Optional[str]]
#: a warm start (:meth:`BranchBound.run`): ``(incumbent's index (-1: none in the space), [(index, result)]
#: scored so far, its work cap: the search's work so far) -> ([(index, result)] it scored, its work in units of
#: this module)``
Warm = Callable[[int, list, int], tuple[list, int]]
#: work units of one step, roughly its cost in plan bounds (a plan's exact chunk costs take ~1 ms on
#: this project's 2-core machine, the memory pre-filter 1-10 ms, a scoring 3-18 ms): the work limit
#: counts these, never seconds
WORK_BOUND, WORK_PREFILTER, WORK_SCORE = 1, 5, 8
#: the default work limit of a tune: the largest bundled spaces (Qwen3-235B on 256 H100, 64-69M plans) stop
#: there after 35-47 s on this project's 2-core machine, at most 1.6 / 2.8 % from the optimum (40,000: 17-20 s,
#: 5.1 / 6.7 %; 160,000: ~69 s; ``scripts/tune_recipes.py``), inside the one-minute target every other space
#: certifies well under
DEFAULT_MAX_WORK = 80_000


class BranchBound:
    """One branch-and-bound search of ``space`` (module doc).  ``usable(result)``: whether a scored plan
    may be the answer (its memory verdict)."""

    def __init__(self, plan: Plan, space: Space, *, score: Score, prefilter: Prefilter,
                 usable: Callable[[ProjectionResult], bool] = fits, memory_margin: float = 0.0,
                 bound: Callable[[Plan], tuple[float, tuple]] = exact_bound_key, memory_certain: bool = False):
        self.plan, self.space = plan, space
        self.score, self.prefilter, self.usable, self.bound = score, prefilter, usable, bound
        self.bm = BoundModel(plan, space, memory_margin, memory_certain)
        self.memory_certain = memory_certain
        #: the second tier (``point`` rule only): the fastest scored plan whose verdict is ``tight`` or ``fits``
        #: (the ``band`` rule's answer were no plan admitted); it bounds the plans whose memory floor puts
        #: their point estimate over the capacity (``BoundModel.point_out``): never the ``point`` answer, and
        #: not faster than it, never the ``band`` one
        self.tight = Incumbent()

    def run(self, inc: Incumbent, *, max_work: Optional[int] = None,
            progress: Optional[Callable[[int, int, float], None]] = None,
            executor: Optional[Executor] = None, seed: Optional[tuple[int, ProjectionResult]] = None,
            warm: Optional[Warm] = None, warm_at: Optional[int] = None) -> SearchResult:
        """Branch and bound from the incumbent ``inc`` (the recipe's own plan when it may be the
        answer); ``progress(done, total, best_s)`` after each structural candidate.  ``executor``
        (:class:`primus_launch.executor.Executor`): expansions are computed ahead on its workers
        (:func:`~primus_launch.tuner.expansion.expand_ahead`) and replayed here in the search's order: the same result, plans and
        certificate as without it.  ``seed``: (index, result) of a plan of the space already scored (the
        recipe's own, the baseline): counted once among the scored, never bounded out or scored again.
        ``warm`` (a warm start, :data:`Warm`): called once when the work first reaches ``warm_at`` with the search
        not ended and its incumbent still ``inc`` (none, or the recipe's own plan: no expansion found a better
        one; a count: the same place on any machine), from the incumbent's index and the plans scored so
        far; the plans it scored (each a plan of the space, its score the search's own) join the scored and
        the fastest one ``usable`` becomes the incumbent when it is faster (:meth:`_warm_start`)."""
        sizes, n_total = self._seeded(seed)
        lb = self.bm.level1_all()
        od = Order(lb, self.bm)
        res = SearchResult(inc=inc)
        if seed is not None:
            res.scored.append(seed)
        c = counters()
        # the memory groups this search priced (the work counts each once, whatever the caches hold)
        priced: set[tuple] = set()
        c["priced"] = priced
        done = int(seed is not None)
        met: set[int] = set()   # structures whose plans are counted (scored, bounded out)
        warmed = warm is None or warm_at is None
        start = (inc.t, inc.idx)
        stopped = False
        ahead = None
        finished = False
        if executor is not None:
            executor.start(self)
            ahead = Ahead(self, od, executor, inc)
        try:
            while (h := od.head()) is not None:
                if not warmed and c["work"] >= warm_at:
                    warmed = True
                    if (inc.t, inc.idx) == start:   # no better plan found yet: the search is bounding by little
                        done += self._warm_start(warm, inc, res, c, sizes, met)
                        continue
                expand, bnd, s = h
                if inc.reached(bnd):
                    break
                if expand and max_work is not None and c["work"] >= max_work:
                    stopped = True
                    break
                if not self._advance(od, expand, s, inc, res, c, sizes, ahead):
                    continue
                met.add(s)
                done += int(sizes[s])
                if progress is not None:
                    progress(done, n_total, inc.t)
            finished = True
        finally:
            if ahead is not None:
                ahead.close()
                executor.stop(finished)
        res.certificate = self._certificate(od, lb, inc, res, c, sizes, n_total, stopped)
        if progress is not None:
            progress(n_total if not stopped else done, n_total, inc.t)
        return res

    def _seeded(self, seed: Optional[tuple[int, ProjectionResult]]) -> tuple[np.ndarray, int]:
        """The search's state reset for a run from ``seed`` (:meth:`run`): the second tier, :attr:`seed` and
        :attr:`skip` (the seed, never bounded or scored again); returns (plans to count in each structure --
        the seed's holds one fewer --, the plans in all, the seed counted once)."""
        sizes = np.diff(self.space.offsets).copy()
        self.tight = Incumbent()
        if seed is not None:
            self._second_tier(seed[1], seed[0])
        self.seed = seed[0] if seed is not None else None
        #: plans of the space scored before their structure was met (the seed, a warm start's): never again
        self.skip: set[int] = set()
        if self.seed is not None:   # its structure holds one plan fewer to bound
            self.skip.add(self.seed)
            sizes[self.space.struct_of(self.seed)] -= 1
        return sizes, int(sizes.sum()) + (seed is not None)

    def _advance(self, od: Order, expand: bool, s: int, inc: Incumbent, res: SearchResult, c: dict,
                 sizes: np.ndarray, ahead: Optional[Ahead]) -> bool:
        """One step of the order's head, structure ``s``: an expansion's next node taken (its memory groups priced
        and counted as work), the structure bounded out by memory, or expanded (:meth:`expand`, from a worker's
        expansion when ``ahead`` sent it); else its refined bound taken.  Returns whether ``s``'s plans are now
        all counted (False: it went back in line with its next bound)."""
        if expand:
            priced = c["priced"]
            n0 = len(priced)
            step = od.take(priced)
            c["work"] += (len(priced) - n0) * WORK_PREFILTER
            if step is False:   # its next node's bound: back in line
                return False
            if step:
                c["bounded_memory"] += int(sizes[s])
            else:
                known = ahead.get(s) if ahead is not None else None
                o = Oracle(self, s, known)
                self.expand(o, inc, res, c, od.node_map(s))
                res.recomputed += o.computed
        elif od.take():
            c["bounded_memory"] += int(sizes[s])
        else:   # refined: the floor of what follows the pipeline, then back in line
            return False
        return True

    def _certificate(self, od: Order, lb: np.ndarray, inc: Incumbent, res: SearchResult, c: dict,
                     sizes: np.ndarray, n_total: int, stopped: bool) -> Certificate:
        """The search's certificate once its loop is over: every plan not met is bounded out by time (the loop
        ended on a bound at the incumbent), or, ``stopped`` at the work limit, open, with the lowest open bound
        and the gap ``best / lowest open bound - 1``."""
        rest = od.rest()
        left = int(sizes[rest].sum()) if rest else 0
        open_lb = None
        if stopped:
            open_lb = min(float(lb[od.order[od.at]]) if od.at < len(od.order) else float("inf"),
                          od.pending[0][0] if od.pending else float("inf"))
        if not stopped:
            c["bounded_time"] += left
        best = inc.t if inc.t != float("inf") else None
        priced = c["priced"]
        cert = Certificate(
            certified=not stopped and c["violations"] == 0, plans=n_total, scored=len(res.scored),
            bounded_time=c["bounded_time"], bounded_memory=c["bounded_memory"] + len(res.rejected),
            open=left if stopped else 0, best_s=best, lower_bound_s=open_lb,
            gap=(best / open_lb - 1.0) if (best is not None and open_lb) else 0.0,
            work=c["work"] + c.get("warm_work", 0), warm_work=c.get("warm_work", 0),
            structs_expanded=c["expanded"], bound_violations=c["violations"],
            memory_groups=len(priced), memory_groups_fit=len((od.fit | c.get("fit", set())) & priced))
        cert.text = certificate_text(cert, self.memory_certain)
        return cert

    def _warm_start(self, warm: "Warm", inc: Incumbent, res: SearchResult, c: dict, sizes: np.ndarray,
                    met: set[int]) -> int:
        """Call ``warm`` (:meth:`run`) and take what it scored: its work into the count; each plan whose
        structure the search has not met yet joins the scored (one fewer plan to count there, never
        bounded or scored again: ``skip``), the fastest ``usable`` one the incumbent when it is faster.  A plan
        of a structure already met was scored, bounded out by time against an incumbent no better than this
        one's, or bounded out by memory (so not usable): never faster than the incumbent, dropped.  Returns
        the plans taken (the progress count)."""
        known = {i for i, _ in res.scored}
        new, work = warm(inc.idx, list(res.scored), int(c["work"]))
        c["warm_work"] = int(work)   # apart from the limit's count: a search that ended within it still does
        taken = 0
        for i, r in sorted(new, key=lambda x: x[0]):
            s = self.space.struct_of(i)
            if i in known or i in self.skip or s in met:
                continue
            self.skip.add(i)
            sizes[s] -= 1
            res.scored.append((i, r))
            taken += 1
            if self.usable(r) and inc.beaten_by(r.iteration_time_s, i):
                inc.t, inc.idx = r.iteration_time_s, i
            self._second_tier(r, i)
        return taken

    def _second_tier(self, r: ProjectionResult, i: int) -> None:
        """``r`` (plan ``i``), scored, the second tier (:attr:`tight`) when faster (``point`` rule only)."""
        if not self.memory_certain and r.memory.verdict != "does not fit" and self.tight.beaten_by(r.iteration_time_s, i):
            self.tight.t, self.tight.idx = r.iteration_time_s, i

    def expand(self, o: Oracle, inc: Incumbent, res: SearchResult, c: dict, vref: dict[tuple, float]) -> None:
        """Levels 2 and 3 of structural candidate ``o.s`` against the incumbent, which it improves;
        ``vref``: its nodes' bounds (``BoundModel.node_bounds``: a variant and its offloading)."""
        bm = self.bm
        s, table = o.s, o.table
        off = int(self.space.offsets[s])
        c["expanded"] += 1
        priced = c.setdefault("priced", set())
        n0 = len(priced)
        cands: list[tuple[float, int, tuple]] = []
        skip = getattr(self, "skip", ())
        for j, f in enumerate(table):
            if off + j in skip:   # scored already (the baseline, a warm start's): neither bounded nor scored again
                continue
            v = vref[pick(f, NODE_FLAGS, F)]
            if inc.reached(v):
                c["bounded_time"] += 1
                continue
            priced.update(bm.group_keys(s, f))
            if bm.group_out(s, f):   # the memory group's floor: a pre-filter's memory model, once per group
                c["bounded_memory"] += 1
                continue
            c.setdefault("fit", set()).update(bm.group_keys(s, f))
            # the same group's floor at the point, while no plan is admitted (else the table's tight rows stay)
            over = not self.memory_certain and inc.t == float("inf") and bm.point_out(s, f)
            if over and self.tight.reached(v):
                c["bounded_time"] += 1
                continue
            c["work"] += WORK_BOUND
            e, key = o.bound(j)
            cands.append((max(v, e), j, key, over))
        cands.sort(key=lambda t: t[:2])
        usable_keys: set[tuple] = set()
        for n, (e, j, key, over) in enumerate(cands):
            if inc.reached(e):
                c["bounded_time"] += len(cands) - n
                break
            if key in usable_keys:   # the time of a plan of this candidate already scored, that fits, earlier in order
                c["bounded_time"] += 1
                continue
            if over and self.tight.reached(e):   # not the point answer, not faster than the band's
                c["bounded_time"] += 1
                continue
            # the plan's memory group is priced (group_out above): its pre-filter finds the memory model
            # in its cache (~0.1 ms); the divisibility checks cost about a bound
            c["work"] += WORK_BOUND
            why = o.prefilter(j)
            if why is not None:
                res.rejected.append((off + j, why))
                continue
            c["work"] += WORK_SCORE
            r, failed = o.score(j)
            if r is None:
                res.rejected.append((off + j, failed))
                continue
            res.scored.append((off + j, r))
            if r.iteration_time_s < e * (1 - 1e-6):
                c["violations"] += 1
            if self.usable(r):
                usable_keys.add(key)
            if self.usable(r) and inc.beaten_by(r.iteration_time_s, off + j):
                inc.t, inc.idx = r.iteration_time_s, off + j
            self._second_tier(r, off + j)
        c["work"] += (len(priced) - n0) * WORK_PREFILTER


def certificate_text(cert: Certificate, memory_certain: bool = False) -> str:
    """The certificate's line: ``best of all N legal plans (M scored, the rest bounded out)``, or what
    stopped it."""
    if cert.certified:
        return (f"best of all {cert.plans:,} legal plans ({cert.scored:,} scored, the rest bounded out: "
                f"{cert.bounded_time:,} by time, {cert.bounded_memory:,} by memory)")
    if cert.bound_violations:
        return (f"no certificate: {cert.bound_violations} scored plan(s) fell below their own lower bound "
                f"(a bound is wrong; report it)")
    own = cert.work - cert.warm_work
    warm = f", and {cert.warm_work:,} of a warm start" if cert.warm_work else ""
    # the units spent, not the limit: "--max-work 5" read "the work limit (30 units ...)" (user14; a step may pass
    # the limit, and the warm start's work is apart from it)
    text = (f"no certificate: the work limit (--max-work) stopped the search after {own:,} units of bounding and "
            f"scoring{warm}, with {cert.open:,} of {cert.plans:,} plans open; " +
            (f"the best is at most {100 * cert.gap:.1f} % slower than the optimum" if cert.best_s is not None else
             "none of the plans scored is one the memory rule lets be the answer"))
    if cert.memory_groups and WORK_PREFILTER * cert.memory_groups >= own / 2:
        # tune13: where the work went to the memory of plans faster than the best, say so and what to do
        text += (f"; most of the work priced the memory of the plans below the best's time: {cert.memory_groups:,} "
                 f"groups, {cert.memory_groups_fit:,} of which may fit (faster plans mostly do not fit"
                 + (" by their whole band: drop --memory-certain, or" if memory_certain else ":") + " raise --max-work)")
    return text
