"""Event simulation of pipeline-parallel schedules: makespan, per-stage busy time and bubbles.

Model (the one used by the zero-bubble paper's simulator, Qi et al. 2023, arXiv 2401.10241
sec. 3, and by Narayanan et al. 2021, arXiv 2104.04473 sec. 2.2):

- every pipeline rank executes its schedule's fixed action order
  (:mod:`primus_launch.projection.pipeline.orders`, equal to Megatron's / torch's orders);
- an action starts when its rank is free **and** its data dependency has finished, plus the
  P2P time when the dependency crosses ranks:
  ``F(g, mb)`` needs ``F(g-1, mb)``; ``B(g, mb)`` needs ``B(g+1, mb)`` (the last global stage's
  ``B`` needs its own ``F``); ``W(g, mb)`` needs ``B(g, mb)``;
- ``start = max(rank_free, dep_end + p2p)``, ``end = start + duration``; P2P transfers overlap
  with compute (they delay the consumer, not the producer);
- bubbles are what the simulation leaves idle: ``bubble_s = makespan - busy_s`` per stage.

Closed forms the simulation reproduces on uniform costs (tests check them):
1F1B ``(m + p - 1)(f + b)``; interleaved ``(m + (p - 1)/v) (f + b)`` for per-chunk ``f/v, b/v``;
ZB-H1 ``m (f + b + w) + (p - 1)(f + b - w)`` (arXiv 2401.10241 sec. 3.3).

Speed: per (schedule, pp, vpp, m), cached: the orders, one topological order of all actions
(found by sweeping the ranks' orders; a deadlocking order raises) and the number of micro-batch
rows whose end times are alive at once.  Each call is then one pass of plain float arithmetic
over that order with a table of those rows only, no per-event objects unless ``record=True``:
O(pp * vpp * m) time, flat per action in m (``scripts/bench_pipeline.py``).

Work that does not grow with the micro-batch count: a schedule of more than
:data:`FULL_SIMULATION_ACTIONS` actions is not simulated whole.  Its action orders repeat with a
period of ``d`` micro-batches (``pp``; ``lcm(pp, g)`` with Megatron's micro-batch group ``g``), so
the simulation is a max-plus linear system driven periodically, whose makespan becomes affine in
``m`` along each residue class mod ``d`` once the transient has passed (Baccelli et al.,
*Synchronization and Linearity*, 1992, ch. 3: cyclicity theorem).  :func:`simulate` simulates three
counts ``m1 < m2 < m3`` of ``m``'s residue class, ``s`` apart, and when the makespans step by the
same amount (to 1e-9) extrapolates ``T(m) = T(m3) + (m - m3) / s * (T(m3) - T(m2))``; otherwise it
moves the points further out (the transient lasts longer) and, past a budget of simulated actions,
extrapolates with the last step.  The busy time is exact (``m`` times the per-micro-batch work).
A timeline (``record=True``) of such a schedule is drawn for :data:`TIMELINE_MAX_ACTIONS` actions'
worth of micro-batches of the same residue class (``PipelineResult.timeline_microbatches``), the
makespan and busy times being those of the whole schedule.
"""

from __future__ import annotations

import json
import math
from array import array
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Optional, Sequence, Union

import numpy as np

from primus_launch.fileio import atomic_write_text
from primus_launch.plan import PlanError
from primus_launch.projection.pipeline.orders import (
    B, F, SCHEDULES, W, ScheduleOrders, schedule_orders,
)
from primus_launch.projection.result import TimelineEvent

__all__ = [
    "ChunkCost", "PipelineResult", "SCHEDULES", "SPLIT_BACKWARD", "makespan_lower_bound", "simulate", "activations_in_flight",
    "chrome_trace", "write_chrome_trace", "schedule_orders", "inflight_walk_count", "schedule_period", "same_class_count",
]

FULL_SIMULATION_ACTIONS = 50_000    # above this many actions a schedule is extrapolated (module doc)
EXTRAPOLATION_BUDGET_ACTIONS = 200_000   # the most actions one run of the extrapolation's points may take
TIMELINE_MAX_ACTIONS = 20_000       # a recorded timeline draws at most about this many actions


@dataclass(frozen=True)
class ChunkCost:
    """One micro-batch through one model chunk on one stage, seconds."""

    fwd_s: float
    bwd_input_s: float    # input-grad (B) part of backward
    bwd_weight_s: float   # weight-grad (W) part of backward


@dataclass
class PipelineResult:
    makespan_s: float                 # first F start to last backward/W end on any stage
    stage_busy_s: list[float]         # compute time per stage
    stage_bubble_s: list[float]       # idle time per stage within the makespan
    events: list[TimelineEvent] = field(default_factory=list)   # only when record=True
    schedule: str = ""
    num_microbatches: int = 0
    timeline_microbatches: int = 0    # micro-batches the events draw (< num_microbatches: a shortened run)


@dataclass(frozen=True)
class _Plan:
    """Cost-independent tables of one (schedule, pp, vpp, m).

    Per action slot ``ci``: the offset from an action id to its dependency's id (same
    micro-batch, so a slot offset; slots without a dependency point at the reserved slot, whose
    end time stays 0), the P2P link the dependency crosses (-1: same rank) and the slot's rank.
    ``seq`` is one topological order of all actions (each rank's order kept, every dependency
    before its consumer), found once per key by sweeping the ranks' orders; the costed
    simulation is then a single pass over it.  ``ring_seq`` is the same order with the
    micro-batch taken modulo ``ring`` (ids ``(mb % ring) * stride + slot``): end times then live in
    ``ring`` rows instead of ``m``, ``ring`` being the smallest row count for which no end time is
    overwritten before its last reader ran (a small, cache-friendly table; linear time in m).
    """

    orders: ScheduleOrders
    delta: tuple[int, ...]
    link: tuple[int, ...]
    rank: tuple[int, ...]
    seq: Sequence[int]
    ring: int
    ring_seq: Sequence[int]


def _ring_rows(S: np.ndarray, delta: Sequence[int], NS: int, m: int) -> int:
    """Smallest K such that writing action (mb + K, slot) never clobbers the end time of
    (mb, slot) before its last reader: per slot the actions run in micro-batch order, so K must
    exceed the number of later micro-batches of that slot written before (mb, slot)'s last read."""
    N = len(S)
    order = np.arange(N, dtype=np.int64)
    pos = np.full(NS * m, -1, dtype=np.int64)
    pos[S] = order
    last = np.full(NS * m, -1, dtype=np.int64)
    np.maximum.at(last, S + np.asarray(delta, dtype=np.int64)[S % NS], order)
    P = pos.reshape(m, NS).T            # [slot, mb] position of the write
    L = last.reshape(m, NS).T           # [slot, mb] position of the last read
    used = (P >= 0).all(axis=1)
    P, L = P[used], L[used]
    if not len(P):
        return 1
    if m > 1 and not (np.diff(P, axis=1) > 0).all():
        return m                        # not in micro-batch order: keep every row
    # first later micro-batch j written after the last read: searchsorted per slot row, done for
    # all rows at once by offsetting each row into its own range
    off = (np.arange(len(P), dtype=np.int64) * (N + 1))[:, None]
    j = np.searchsorted((P + off).ravel(), (L + off).ravel(), side="right").reshape(P.shape)
    j -= (np.arange(len(P), dtype=np.int64) * m)[:, None]
    K = int((j - np.arange(m, dtype=np.int64)[None, :]).max())
    return max(1, min(K, m))


def _link(p: int, a: int, b: int) -> int:
    if a == b:
        return -1
    if b == a + 1:
        return a
    if a == b + 1:
        return b
    return p - 1   # wrap-around p-1 <-> 0 (interleaved chunk boundary)


def _build_plan(o: ScheduleOrders) -> _Plan:
    pp, vpp, m = o.pp, o.vpp, o.m
    S = pp * vpp
    NS = o.stride
    zero = NS - 1
    delta = [0] * NS
    link = [-1] * NS
    rank = [0] * NS
    for r in range(pp):
        for c in range(vpp):
            g = o.global_stage(r, c)
            for k in (F, B, W):
                rank[(k * pp + r) * vpp + c] = r
            # forward: previous global stage's forward
            ci = (F * pp + r) * vpp + c
            if g == 0:
                delta[ci] = zero - ci
            else:
                r2, c2 = o.rank_chunk(g - 1)
                delta[ci] = (F * pp + r2) * vpp + c2 - ci
                link[ci] = _link(pp, r2, r)
            # backward (input-grad or fused): next stage's backward, or own forward at the end
            ci = (B * pp + r) * vpp + c
            if g == S - 1:
                delta[ci] = (F * pp + r) * vpp + c - ci
            else:
                r2, c2 = o.rank_chunk(g + 1)
                delta[ci] = (B * pp + r2) * vpp + c2 - ci
                link[ci] = _link(pp, r2, r)
            # weight-grad: own input-grad
            ci = (W * pp + r) * vpp + c
            delta[ci] = (B * pp + r) * vpp + c - ci

    # topological order: sweep the ranks forward then backward, each rank advancing while its
    # next action's dependency is done; no progress in a full sweep = the orders deadlock
    done = bytearray(NS * m)
    for mb in range(m):
        done[mb * NS + zero] = 1
    orders = o.orders
    ptr = [0] * pp
    lens = [len(x) for x in orders]
    remaining = sum(lens)
    seq: list[int] = []
    app = seq.append
    fwd = list(range(pp))
    sweep = fwd + fwd[::-1][1:-1] if pp > 2 else fwd
    while remaining:
        progress = 0
        for r in sweep:
            ordr = orders[r]
            i0 = i = ptr[r]
            n = lens[r]
            while i < n:
                a = ordr[i]
                if not done[a + delta[a % NS]]:
                    break
                done[a] = 1
                app(a)
                i += 1
            if i != i0:
                ptr[r] = i
                progress += i - i0
        if not progress:
            raise RuntimeError(f"pipeline schedule {o.schedule} (pp={pp}, vpp={vpp}, m={m}) deadlocks: "
                               "an action waits on one its order never reaches")
        remaining -= progress
    seq_arr = array("q", seq)            # 8 bytes per action in the cache
    S = np.frombuffer(seq_arr, dtype=np.int64)
    K = _ring_rows(S, delta, NS, m)
    ring_seq = array("q")
    ring_seq.frombytes((S % (K * NS)).tobytes())   # (mb % K) * NS + slot
    return _Plan(orders=o, delta=tuple(delta), link=tuple(link), rank=tuple(rank), seq=seq_arr,
                 ring=K, ring_seq=ring_seq)


@lru_cache(maxsize=32)
def _plan(schedule: str, pp: int, vpp: int, m: int, group: int | None = None) -> _Plan:
    return _build_plan(schedule_orders(schedule, pp, vpp, m, group))


def _link_times(p2p_s: Union[float, Sequence[float]], pp: int) -> list[float]:
    """Per link: index r = rank r <-> r+1, index pp-1 = wrap-around pp-1 <-> 0."""
    if not hasattr(p2p_s, "__len__"):          # a number (also numpy scalars)
        return [float(p2p_s)] * max(pp, 1)
    vals = [float(x) for x in p2p_s]
    if len(vals) == pp:
        return vals
    if len(vals) == pp - 1:
        # no wrap-around time given: assume the slowest given link (only interleaved uses it)
        return vals + [max(vals) if vals else 0.0]
    raise PlanError("p2p_s", len(vals), f"a float or a sequence of pp-1={pp - 1} or pp={pp} link times")


#: schedules whose backward is split into input-gradient and weight-gradient actions (``orders.py``)
SPLIT_BACKWARD = ("zb_h1", "zbv")


def makespan_lower_bound(schedule: str, pp: int, vpp: int, num_microbatches: int,
                         costs: Sequence[Sequence[ChunkCost]], p2p_s: float = 0.0) -> float:
    """A lower bound of :func:`simulate`'s makespan that needs no simulation (the tuner's bound).

    Every rank runs its actions one after another, so rank ``r`` is busy for ``busy_r = m *
    sum_c (f + b + w)_{r,c}``.  Its first action is a forward of one of its stages, the lowest of which
    is global stage ``r`` (chunk 0: stage ``c * pp + r`` interleaved, ``r`` and ``2 pp - 1 - r`` in
    ZB-V), and a forward needs the forward of every earlier stage of its micro-batch, each a send
    ``p2p_s`` away: rank ``r`` starts no earlier than ``head_r = sum_{r' < r} (f_{r',0} + p2p_s)``.
    In the fused-backward schedules (1F1B, interleaved, GPipe) its last action is the backward of a
    stage ``g >= r``, after which the backwards of the chunks 0 of ranks ``r - 1 .. 0`` still run:
    ``tail_r = sum_{r' < r} (b_{r',0} + w_{r',0} + p2p_s)`` (zero-bubble schedules may end on a
    weight-gradient, which nothing waits for: no tail).  So

        makespan >= max_r (head_r + busy_r + tail_r),

    equal to the closed forms on uniform costs (1F1B ``(m + p - 1)(f + b)``); ``tests/test_tuner_bounds.py``
    checks it below :func:`simulate` on the sampled plans of the bundled recipes.  (After the previous
    tuner branch's ``makespan_lower_bound``, re-derived here.)"""
    fused = pp <= 1 or schedule not in SPLIT_BACKWARD
    m = num_microbatches
    best = head = tail = 0.0
    for r in range(pp):
        busy = m * sum(c.fwd_s + c.bwd_input_s + c.bwd_weight_s for c in costs[r])
        best = max(best, head + busy + (tail if fused else 0.0))
        c0 = costs[r][0]
        head += c0.fwd_s + p2p_s
        tail += c0.bwd_input_s + c0.bwd_weight_s + p2p_s
    return best


def simulate(schedule: str, pp: int, vpp: int, num_microbatches: int,
             costs: Sequence[Sequence[ChunkCost]],
             p2p_s: Union[float, Sequence[float]] = 0.0,
             record: bool = False, group: int | None = None) -> PipelineResult:
    """Simulate one iteration's pipeline schedule.

    ``costs[r][c]`` is model chunk ``c`` on pipeline rank ``r`` (``len == pp``, each ``len == vpp``):
    for the interleaved schedule chunk c of rank r is Megatron's virtual stage ``c * pp + r``; for
    ZB-V chunk 1 of rank r is the V's return leg, global stage ``2 * pp - 1 - r``.
    ``p2p_s``: time of one activation/gradient send between adjacent ranks, a float or per link
    (index r for ranks r <-> r+1, optional index pp-1 for the wrap-around pp-1 <-> 0).
    ``group``: Megatron's micro-batch group of the interleaved schedule (None = pp).
    In fused schedules (1f1b, interleaved_1f1b, gpipe) one backward costs
    ``bwd_input_s + bwd_weight_s``.

    Without a timeline, long schedules (m > 8 pp) are first simulated at 4 pp and 8 pp
    micro-batches: when the makespan grows between them by exactly the busiest rank's work per
    micro-batch (a compute-bound steady state: that rank never idles, so each added micro-batch adds
    its work and nothing else), the makespan at m is extrapolated along that line -- the number the
    full simulation gives (``tests/test_pipeline.py``) at a fraction of the cost; otherwise (e.g. P2P
    on the steady state's critical path) the full schedule is simulated.
    """
    m = num_microbatches
    if record and _actions(schedule, pp, vpp, m) > TIMELINE_MAX_ACTIONS:
        # the numbers of the whole schedule; the events of a shorter run of the same residue class
        res = simulate(schedule, pp, vpp, m, costs, p2p_s, False, group)
        m_draw = _same_class(m, _period(schedule, pp, group), max(1, TIMELINE_MAX_ACTIONS // _actions(schedule, pp, vpp, 1)))
        drawn = _simulate_plan(_plan(schedule, pp, vpp, m_draw, group), costs, p2p_s, True)
        res.events, res.timeline_microbatches = drawn.events, m_draw
        return res
    if not record and pp > 1 and m > 8 * pp and schedule in ("1f1b", "interleaved_1f1b", "zb_h1", "gpipe") \
            and group in (None, pp):
        m1, m2 = 4 * pp, 8 * pp
        r1 = _simulate_plan(_plan(schedule, pp, vpp, m1), costs, p2p_s, False)
        r2 = _simulate_plan(_plan(schedule, pp, vpp, m2), costs, p2p_s, False)
        per_mb = max(r2.stage_busy_s) / m2
        inc = (r2.makespan_s - r1.makespan_s) / (m2 - m1)
        if per_mb > 0 and abs(inc - per_mb) <= 1e-9 * per_mb:
            makespan = r2.makespan_s + (m - m2) * per_mb
            busy = [b / m2 * m for b in r2.stage_busy_s]
            return PipelineResult(makespan_s=makespan, stage_busy_s=busy,
                                  stage_bubble_s=[max(0.0, makespan - b) for b in busy],
                                  schedule=r2.schedule, num_microbatches=m)
    if not record and _actions(schedule, pp, vpp, m) > FULL_SIMULATION_ACTIONS:
        return _extrapolated(schedule, pp, vpp, m, costs, p2p_s, group)
    res = _simulate_plan(_plan(schedule, pp, vpp, num_microbatches, group), costs, p2p_s, record)
    if record:
        res.timeline_microbatches = m
    return res


def _actions(schedule: str, pp: int, vpp: int, m: int) -> int:
    """Actions of a schedule: F and B (and W in the zero-bubble ones) per micro-batch and chunk."""
    return (3 if schedule in ("zb_h1", "zbv") else 2) * pp * vpp * m


def _period(schedule: str, pp: int, group: int | None) -> int:
    """Micro-batches after which the schedule's orders repeat (module doc)."""
    return math.lcm(pp, group) if schedule == "interleaved_1f1b" and group else pp


def _same_class(m: int, d: int, at_least: int) -> int:
    """The smallest count >= ``at_least`` (and >= 2 d) congruent to ``m`` mod ``d``, at most ``m``:
    it keeps Megatron's last micro-batch group (``m mod g``) and the schedule's phase."""
    lo = max(at_least, 2 * d)
    if m <= lo:
        return m
    return lo + (m - lo) % d


def _cyclicity_run(schedule: str, pp: int, vpp: int, group: int | None) -> int:
    """Micro-batches of :func:`_cyclicity`'s run: whole periods of the orders, at least ``8 pp`` and six times the
    longest period it looks for (``2 pp vpp + 2``)."""
    d = _period(schedule, pp, group)
    return d * math.ceil(max(8 * pp, 6 * (2 * pp * vpp + 2)) / d)


def _cyclicity(schedule: str, pp: int, vpp: int, costs: Sequence[Sequence[ChunkCost]],
               p2p_s: Union[float, Sequence[float]], group: int | None) -> Optional[int]:
    """The period ``c`` (in micro-batches) after which the steady state repeats shifted in time:
    from one run long enough to hold the transient and several periods, the smallest ``c`` for
    which rank 0's forward end times step by the same amount every ``c`` micro-batches over the
    run's second half (a forward's end depends only on what precedes it, so the run's own cool-down
    does not touch them); None when none up to ``2 pp vpp + 2`` does."""
    cmax = 2 * pp * vpp + 2
    m = _cyclicity_run(schedule, pp, vpp, group)
    pl = _plan(schedule, pp, vpp, m, group)
    end, _, _, _ = _run(pl, costs, p2p_s, True)
    NS = pl.orders.stride
    x = [end[k * NS + F * pp * vpp] for k in range(m)]    # rank 0, chunk 0, forward
    k0 = m // 2
    for c in range(1, cmax + 1):
        ref = x[k0 + c] - x[k0]
        tol = 1e-9 * max(abs(x[-1]), 1e-300)
        if all(abs(x[k + c] - x[k] - ref) <= tol for k in range(k0, m - c)):
            return c
    return None


def _extrapolated(schedule: str, pp: int, vpp: int, m: int, costs: Sequence[Sequence[ChunkCost]],
                  p2p_s: Union[float, Sequence[float]], group: int | None) -> PipelineResult:
    """The makespan of a long schedule from three shorter runs of ``m``'s residue class modulo a
    step that is a multiple of the orders' period and of the steady state's cyclicity (module doc).

    A settled step is the growth rate of the cycle that dominates so far, not always of the one that
    dominates at ``m``: the busiest rank's own work per step (``rank_step``: ``step`` times its work per
    micro-batch, a cycle of the max-plus system: the rank runs its actions one after another) may exceed it
    while that rank still idles --
    zero-bubble orders (ZB-V) and Megatron's micro-batch groups hand a rank slack in the warm-up that the
    steady state eats at ``rank_step - b`` per step, so the rank takes over after a transient that is
    long when the two rates are close (Baccelli et al. 1992, ch. 3: the cycle of the largest mean
    dominates in the end).  A settled step below ``rank_step`` therefore moves the three points to twice
    as far and settles again, until the step is the rank's or the points reach ``m`` (then ``m`` is
    simulated whole) or the budget; past the budget the makespan is the early line, held at least at
    :func:`makespan_lower_bound` (the busiest rank's work with its unavoidable head and tail)."""
    d = _period(schedule, pp, group)
    run = _cyclicity_run(schedule, pp, vpp, group)
    if m <= run and _actions(schedule, pp, vpp, run) > EXTRAPOLATION_BUDGET_ACTIONS:
        # the cyclicity's own run is longer than the schedule and past the budget (PP 4,096 x 128 micro-batches: a
        # 49,164-micro-batch run, 400M actions, never ended): the schedule simulated whole, exact and shorter
        return _simulate_plan(_plan(schedule, pp, vpp, m, group), costs, p2p_s, False)
    c = _cyclicity(schedule, pp, vpp, costs, p2p_s, group) or 1
    unit = math.lcm(d, c)
    step = unit * max(1, math.ceil(4 * pp / unit))
    start = 8 * pp
    budget = EXTRAPOLATION_BUDGET_ACTIONS
    rank_mb = max(_busy(costs, pp, vpp, 1))   # the busiest rank's work per micro-batch
    res = None
    while True:
        m1 = _same_class(m, step, start)
        m3 = m1 + 2 * step
        if m3 >= m:
            return _simulate_plan(_plan(schedule, pp, vpp, m, group), costs, p2p_s, False)
        t = [_simulate_plan(_plan(schedule, pp, vpp, k, group), costs, p2p_s, False) for k in (m1, m1 + step, m3)]
        a, b = t[1].makespan_s - t[0].makespan_s, t[2].makespan_s - t[1].makespan_s
        res = t[2]
        settled = abs(b - a) <= 1e-9 * max(abs(b), 1e-300)
        if settled and b < rank_mb * step * (1 - 1e-9):
            # the busiest rank still idles and will take over: look twice as far
            if _actions(schedule, pp, vpp, min(m, 2 * m3 + 2 * step)) > budget:
                break
            start = 2 * m3
            continue
        if settled or _actions(schedule, pp, vpp, 2 * (m3 + 2 * step)) > budget:
            break
        start, step = 4 * m1, 2 * step
    p2p_min = min(p2p_s) if isinstance(p2p_s, (list, tuple)) and p2p_s else float(p2p_s or 0.0)
    floor = makespan_lower_bound(schedule, pp, vpp, m, costs, p2p_min)
    makespan = max(res.makespan_s + (m - m3) / step * b, floor)
    busy = _busy(costs, pp, vpp, m)
    return PipelineResult(makespan_s=makespan, stage_busy_s=busy,
                          stage_bubble_s=[max(0.0, makespan - x) for x in busy],
                          schedule=res.schedule, num_microbatches=m)


def _simulate_plan(pl: _Plan, costs: Sequence[Sequence[ChunkCost]],
                   p2p_s: Union[float, Sequence[float]], record: bool) -> PipelineResult:
    o = pl.orders
    pp, vpp, m = o.pp, o.vpp, o.m
    end, free, dur, lat = _run(pl, costs, p2p_s, record)
    makespan = max(free) if free else 0.0
    busy = _busy(costs, pp, vpp, m)
    res = PipelineResult(makespan_s=makespan, stage_busy_s=busy,
                         stage_bubble_s=[max(0.0, makespan - b) for b in busy],
                         schedule=o.schedule, num_microbatches=m)
    if record:
        res.events = _events(pl, end, dur, lat)
    return res


def _run(pl: _Plan, costs: Sequence[Sequence[ChunkCost]], p2p_s: Union[float, Sequence[float]],
         all_rows: bool) -> tuple[list[float], list[float], list[float], list[float]]:
    """One pass over the schedule: (end time per action id -- every micro-batch's row with
    ``all_rows``, else the ring of live rows --, each rank's last end, duration and P2P latency per
    slot)."""
    o = pl.orders
    pp, vpp, m = o.pp, o.vpp, o.m
    if len(costs) != pp or any(len(row) != vpp for row in costs):
        raise PlanError("costs", f"{len(costs)}x{[len(r) for r in costs]}",
                        f"one ChunkCost per (stage, chunk): {pp} rows of {vpp}")
    links = _link_times(p2p_s, pp)
    NS = o.stride
    dur = [0.0] * NS
    lat = [0.0] * NS
    split = o.split_backward
    for r in range(pp):
        for c in range(vpp):
            cc = costs[r][c]
            dur[(F * pp + r) * vpp + c] = cc.fwd_s
            dur[(B * pp + r) * vpp + c] = cc.bwd_input_s if split else cc.bwd_input_s + cc.bwd_weight_s
            dur[(W * pp + r) * vpp + c] = cc.bwd_weight_s
    for ci, lk in enumerate(pl.link):
        if lk >= 0:
            lat[ci] = links[lk]
    low = min(min(cc.fwd_s, cc.bwd_input_s, cc.bwd_weight_s) for row in costs for cc in row)
    if low < 0.0:
        raise PlanError("costs", low, "chunk times must be >= 0")
    if min(links) < 0.0:
        raise PlanError("p2p_s", min(links), "P2P times must be >= 0")

    # start = max(rank free, dependency end + p2p); end = start + duration.  ``seq`` is
    # topological, so every dependency's end is final when read; reserved slots stay 0.0.
    # Without a timeline only the ring of live rows is kept (same arithmetic, smaller table).
    seq, rows = (pl.seq, m) if all_rows else (pl.ring_seq, pl.ring)
    end = [0.0] * (NS * rows)
    free = [0.0] * pp
    delta, rank = pl.delta, pl.rank
    for a in seq:
        ci = a % NS
        r = rank[ci]
        e = end[a + delta[ci]] + lat[ci]
        t = free[r]
        if e > t:
            t = e
        t += dur[ci]
        end[a] = t
        free[r] = t
    return end, free, dur, lat


def _busy(costs: Sequence[Sequence[ChunkCost]], pp: int, vpp: int, m: int) -> list[float]:
    """Compute time per stage: every chunk's forward and backward, ``m`` times."""
    busy = []
    for r in range(pp):
        s = 0.0
        for c in range(vpp):
            cc = costs[r][c]
            s += cc.fwd_s + cc.bwd_input_s + cc.bwd_weight_s
        busy.append(s * m)
    return busy


def _events(pl: _Plan, end: list[float], dur: list[float], lat: list[float]) -> list[TimelineEvent]:
    o = pl.orders
    NS = o.stride
    ev: list[TimelineEvent] = []
    fused_kind = "B" if o.split_backward else "BW"
    for r, ordr in enumerate(o.orders):
        for a in ordr:
            kind, _, c, mb = o.decode(a)
            ci = a % NS
            e = end[a]
            name = "F" if kind == F else ("W" if kind == W else fused_kind)
            ev.append(TimelineEvent(stage=r, kind=name, microbatch=mb, chunk=c,
                                    start_s=e - dur[ci], end_s=e))
    # P2P transfers: from the producer's end, on the producer's stage, for cross-rank edges
    for r, ordr in enumerate(o.orders):
        for a in ordr:
            ci = a % NS
            lk = pl.link[ci]
            if lk < 0 or lat[ci] <= 0.0:
                continue
            d = a + pl.delta[ci]
            kind, r2, c2, mb = o.decode(d)
            ev.append(TimelineEvent(stage=r2, kind="send", microbatch=mb, chunk=c2,
                                    start_s=end[d], end_s=end[d] + lat[ci]))
    ev.sort(key=lambda x: (x.stage, x.start_s))
    return ev


def schedule_period(schedule: str, pp: int, group: int | None = None) -> int:
    """Micro-batches after which a schedule's orders repeat (``pp``; ``lcm(pp, g)`` under Megatron's
    micro-batch group ``g`` of the interleaved schedule)."""
    return _period(schedule, pp, group)


def same_class_count(m: int, period: int, at_least: int) -> int:
    """The smallest count >= ``at_least`` (and >= 2 ``period``) congruent to ``m`` modulo ``period``, at most
    ``m``: a shorter schedule with ``m``'s last micro-batch group and phase."""
    return _same_class(m, period, at_least)


def inflight_walk_count(schedule: str, pp: int, num_microbatches: int, group: int | None = None) -> int:
    """The micro-batch count a walk of the activations in flight needs to find the peak of ``m`` micro-batches:
    ``m`` itself up to ``8 pp`` (and for GPipe, whose peak is every forward); beyond, the smallest count of
    ``m``'s residue class modulo the orders' period above ``4 pp`` -- the running sum repeats with that
    period once past the warm-up, the peak reached by ``2 pp - 1`` micro-batches (:func:`activations_in_flight`)."""
    m = num_microbatches
    if m > 8 * pp and schedule in SCHEDULES and schedule != "gpipe":
        return _same_class(m, _period(schedule, pp, group), 4 * pp)
    return m


def activations_in_flight(schedule: str, pp: int, vpp: int, num_microbatches: int,
                          chunk_weights: Optional[Sequence[Sequence[float]]] = None,
                          release: str = "B", group: int | None = None) -> list[float]:
    """Peak stored forward activations per stage, from the schedule's own order.

    Walks each rank's order: a forward adds its chunk's activations, the backward that releases
    them subtracts; the peak of the running sum is returned.  Unit: one chunk's activations of one
    micro-batch (``chunk_weights[r][c]`` scales chunk c of rank r instead, e.g. by its layers).
    ``release="B"`` frees at the (input-grad) backward, as Megatron frees a micro-batch's
    activations after its backward; in the zero-bubble schedules the inputs of the weight GEMMs
    stay until ``W``: ``release="W"`` counts a micro-batch until its weight-grad (upper bound).
    1F1B: stage s -> ``min(pp - s, m)``; interleaved: Megatron warm-up + 1 (capped at ``m*vpp``).

    Work that does not grow with ``m``: GPipe's peak is every forward, ``m`` times the chunks'
    weights; every other schedule's running sum repeats with the orders' period once past the
    warm-up (the peak is reached by ``2 pp - 1`` micro-batches, ZB-V's warm-up being the longest),
    so a long schedule is walked at the smallest count of ``m``'s residue class above ``4 pp``
    (``tests/test_pipeline.py`` checks the peaks equal the full walk's).
    """
    if release not in ("B", "W"):
        raise PlanError("release", release, "B or W")
    sched = "1f1b" if schedule == "interleaved_1f1b" and vpp == 1 else schedule
    if sched == "gpipe" and chunk_weights is None:
        schedule_orders(schedule, pp, vpp, min(num_microbatches, 1), group)  # the same errors
        return [float(num_microbatches * vpp)] * pp
    if sched == "gpipe":
        schedule_orders(schedule, pp, vpp, min(num_microbatches, 1), group)
        return [float(num_microbatches * sum(float(w) for w in chunk_weights[r])) for r in range(pp)]
    m = inflight_walk_count(sched, pp, num_microbatches, group)
    o = schedule_orders(schedule, pp, vpp, m, group)
    free_kind = W if (release == "W" and o.split_backward) else B
    out: list[float] = []
    for r, ordr in enumerate(o.orders):
        a = np.asarray(ordr, dtype=np.int64)
        ci = a % o.stride
        kind = (ci // o.vpp) // o.pp
        c = ci % o.vpp
        wgt = np.ones(len(a)) if chunk_weights is None else np.asarray(chunk_weights[r], dtype=float)[c]
        delta = np.where(kind == F, wgt, np.where(kind == free_kind, -wgt, 0.0))
        run = np.cumsum(delta)
        out.append(float(max(0.0, run.max())) if len(run) else 0.0)
    return out


_TID = {"F": 0, "B": 0, "W": 0, "BW": 0, "bubble": 0, "optimizer": 0,
        "send": 1, "recv": 1, "dp_comm": 2}
_TID_NAMES = {0: "compute", 1: "p2p", 2: "dp comm"}


def chrome_trace(result: Union[PipelineResult, Sequence[TimelineEvent]], title: str = "") -> dict:
    """Chrome / Perfetto trace JSON (``traceEvents``, "X" complete events in microseconds).

    One process per pipeline stage (pid = stage), thread 0 = compute (F/B/W/BW), thread 1 = P2P
    sends, thread 2 = data-parallel communication; event names like ``F3`` / ``B3.c1`` (kind,
    micro-batch, chunk when there are several) with microbatch and chunk in ``args``.
    """
    events = result.events if isinstance(result, PipelineResult) else list(result)
    multi_chunk = any(e.chunk for e in events)
    trace: list[dict] = []
    tids: dict[int, set[int]] = {}  # each stage's threads, in one pass (one pass per stage: PP 4,096 never ended)
    for e in events:
        tids.setdefault(e.stage, set()).add(_TID.get(e.kind, 0))
    for s in sorted(tids):
        trace.append({"name": "process_name", "ph": "M", "pid": s, "tid": 0,
                      "args": {"name": f"stage {s}"}})
        trace.append({"name": "process_sort_index", "ph": "M", "pid": s, "tid": 0,
                      "args": {"sort_index": s}})
        for tid in sorted(tids[s]):
            trace.append({"name": "thread_name", "ph": "M", "pid": s, "tid": tid,
                          "args": {"name": _TID_NAMES[tid]}})
    for e in events:
        name = e.kind
        if e.microbatch >= 0:
            name += str(e.microbatch)
            if multi_chunk:
                name += f".c{e.chunk}"
        trace.append({"name": name, "cat": e.kind, "ph": "X", "pid": e.stage,
                      "tid": _TID.get(e.kind, 0), "ts": e.start_s * 1e6,
                      "dur": (e.end_s - e.start_s) * 1e6,
                      "args": {"microbatch": e.microbatch, "chunk": e.chunk}})
    out = {"traceEvents": trace, "displayTimeUnit": "ms"}
    if title:
        out["otherData"] = {"title": title}
    return out


def write_chrome_trace(result: Union[PipelineResult, Sequence[TimelineEvent]], path: str,
                       title: str = "") -> None:
    """Write :func:`chrome_trace` JSON atomically (primus_launch.fileio); opens in ui.perfetto.dev."""
    atomic_write_text(path, json.dumps(chrome_trace(result, title)))


def uniform_costs(pp: int, vpp: int, fwd_s: float, bwd_input_s: float,
                  bwd_weight_s: float) -> list[list[ChunkCost]]:
    """The same :class:`ChunkCost` on every (stage, chunk)."""
    cc = ChunkCost(fwd_s, bwd_input_s, bwd_weight_s)
    return [[cc] * vpp for _ in range(pp)]


