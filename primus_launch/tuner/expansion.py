"""One expansion of a structural candidate by the branch and bound, and the expansions computed ahead on an
executor's workers: what the expansion asks of each plan of the candidate's table (its level-3 bound, its
pre-filter verdict, its scoring: :class:`Oracle`), a worker's answers (:class:`Expansion`), the task a worker
runs (:func:`expand_ahead`) and the window of tasks sent ahead in the search's order (:class:`Ahead`).  The
search itself is ``branch_bound.py``'s ``BranchBound``; this module sees it through the :class:`Expander`
protocol (so neither file imports the other)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional, Protocol

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.candidate_order import Order
from primus_launch.tuner.incumbent import Incumbent, SearchResult, counters
from primus_launch.tuner.space import Knobs, Space, apply_knobs

if TYPE_CHECKING:
    from primus_launch.executor import Executor


class Expander(Protocol):
    """What an expansion reads of the search (``branch_bound.BranchBound``): the user's plan and the space,
    the plan's level-3 bound, pre-filter and scoring, the second tier's incumbent and the expansion itself."""

    plan: Plan
    space: Space
    tight: Incumbent

    def bound(self, plan: Plan) -> tuple[float, tuple]:
        """The plan's level-3 bound and its exact-bound key."""

    def prefilter(self, plan: Plan) -> Optional[str]:
        """The plan's pre-filter verdict (None: may fit)."""

    def score(self, plan: Plan) -> ProjectionResult:
        """The plan's projection."""

    def expand(self, o: "Oracle", inc: Incumbent, res: SearchResult, c: dict, vref: dict[tuple, float]) -> None:
        """Expand ``o``'s structural candidate against ``inc``, into ``res`` and the counters ``c``."""


class Oracle:
    """What the expansion of structural candidate ``s`` asks of plan ``j`` of its table: its level-3
    bound, its pre-filter verdict, its scoring -- computed here (the plan built once), or taken from
    ``known`` (a worker's answers for the same candidate, :func:`expand_ahead`), which this oracle
    also fills."""

    def __init__(self, bb: Expander, s: int, known: Optional["Expansion"] = None):
        self.bb, self.s = bb, s
        self.h = bb.space.structs[s]
        self.table = bb.space.tables[bb.space.ctx[s]]
        self.replay = known is not None
        self.known = known if known is not None else Expansion(s)
        self._plans: dict[int, Plan] = {}
        self.computed = 0  # answers a replay had to compute (0: the worker's superset held)

    def plan(self, j: int) -> Plan:
        """Plan ``j`` of the candidate's table, built once (a replay counts each call as computed)."""
        self.computed += self.replay
        if j not in self._plans:
            self._plans[j] = apply_knobs(self.bb.plan, Knobs(*self.h, *self.table[j]))
        return self._plans[j]

    def bound(self, j: int) -> tuple[float, tuple]:
        """Plan ``j``'s level-3 bound and its exact-bound key (the search's ``bound``), known or computed."""
        k = self.known.bounds
        if j not in k:
            k[j] = self.bb.bound(self.plan(j))
        return k[j]

    def prefilter(self, j: int) -> Optional[str]:
        """Plan ``j``'s pre-filter verdict (None: may fit; a pre-filter error is a rejection), known or computed."""
        k = self.known.why
        if j not in k:
            try:
                k[j] = self.bb.prefilter(self.plan(j))
            except Exception as ex:  # a pre-filter bug must not kill the search
                k[j] = f"pre-filter error: {type(ex).__name__}: {ex}"
        return k[j]

    def score(self, j: int) -> tuple[Optional[ProjectionResult], Optional[str]]:
        """Plan ``j``'s scoring (result, None) or its failure (None, why), known or computed."""
        k = self.known.scores
        if j not in k:
            try:
                k[j] = (self.bb.score(self.plan(j)), None)
            except Exception as ex:  # the projection refusing a plan is a rejection, not a crash
                k[j] = (None, f"projection failed: {type(ex).__name__}: {ex}")
        return k[j]


@dataclass
class Expansion:
    """A worker's answers for structural candidate ``s`` (plan index in its table -> level-3 bound,
    pre-filter verdict, scoring or its failure)."""

    s: int
    bounds: dict[int, tuple[float, tuple]] = field(default_factory=dict)
    why: dict[int, Optional[str]] = field(default_factory=dict)
    scores: dict[int, tuple[Optional[ProjectionResult], Optional[str]]] = field(default_factory=dict)


def expand_ahead(bb: Expander, s: int, vref: dict[tuple, float], inc_t: float, inc_idx: int) -> Expansion:
    """An executor's task: expand candidate ``s`` against the incumbent known when it was sent.  That
    incumbent is never better than the one the search holds when it replays ``s`` (it only improves,
    and the replay's includes every result before ``s``), and a bound reached by a worse incumbent is
    reached by a better one: so the worker bounds, pre-filters and scores every plan the replay will
    ask for (a superset), and the replay (:meth:`BranchBound.run`) takes its answers without
    computing; the search's result is the sequential one, whatever the order workers finish in."""
    o = Oracle(bb, s)
    bb.tight = Incumbent()   # the second tier bounds nothing ahead: the replay's, never worse, bounds a subset
    bb.expand(o, Incumbent(inc_t, inc_idx), SearchResult(inc=Incumbent()), counters(), vref)
    return o.known


class Ahead:
    """Sends the expansions the search will ask for next to an executor's workers, ``window`` at a
    time, each with the incumbent known when it is sent (:func:`expand_ahead`)."""

    def __init__(self, bb: Expander, order: Order, executor: "Executor", inc: Incumbent):
        self.bb, self.ex, self.inc = bb, executor, inc
        self.order = order.ahead()
        self.window = 2 * executor.workers
        self.sent: dict[int, object] = {}
        self.queue: list[int] = []
        self.done = False

    def fill(self) -> None:
        """Send the next expansions of the order run ahead until ``window`` are in flight."""
        while not self.done and len(self.queue) < self.window:
            s = self.order.next_expansion()
            if s is None:
                self.done = True
                break
            self.queue.append(s)
            self.sent[s] = self.ex.submit(expand_ahead, s, self.order.node_map(s), self.inc.t, self.inc.idx)

    def get(self, s: int) -> Optional[Expansion]:
        """The worker's expansion of ``s`` (None when ``s`` was not sent: the search computes it)."""
        self.fill()
        if s not in self.sent:
            return None
        while self.queue and self.queue[0] != s:  # never the case: both orders are the same
            self.queue.pop(0)
        self.queue.pop(0)
        out = self.ex.result(self.sent.pop(s))
        self.fill()
        return out

    def close(self) -> None:
        """Cancel what is still in flight."""
        self.ex.cancel(list(self.sent.values()))
        self.sent.clear()
