"""What the branch and bound's expansions read and write (``branch_bound.py``, ``expansion.py``): the
incumbent (the best plan so far, and when a bound reaches it, :data:`EPS`), the search's result so far
(:class:`SearchResult`), the default test of a usable answer (:func:`fits`) and an expansion's counters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.result import Certificate

#: a bound counts as reaching the incumbent when ``bound * (1 - EPS) >= incumbent``: the bounds are
#: sums of the projection's own numbers in another order, equal to it up to rounding
EPS = 1e-9


@dataclass
class Incumbent:
    """The best plan so far: its iteration time and space index (-1: the recipe's plan, outside)."""

    t: float = float("inf")
    idx: int = -1

    def beaten_by(self, t: float, idx: int) -> bool:
        """Whether a plan of time ``t`` and index ``idx`` replaces this incumbent: faster, ties by the space's order."""
        return (t, idx) < (self.t, self.idx) if self.t != float("inf") else True

    def reached(self, lb: float) -> bool:
        """Whether a lower bound ``lb`` reaches the incumbent's time (up to the rounding :data:`EPS`): every plan
        below it is bounded out."""
        return lb * (1 - EPS) >= self.t


@dataclass
class SearchResult:
    """What a branch-and-bound search found: its incumbent, the plans it scored and rejected (space index and
    result or reason), its certificate, and the plans a replay had to compute itself."""

    inc: Incumbent
    scored: list[tuple[int, ProjectionResult]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    certificate: Optional[Certificate] = None
    #: plans whose bound, verdict or score a replay of a worker's expansion computed itself
    recomputed: int = 0


def fits(r: ProjectionResult) -> bool:
    """The default ``usable``: the memory verdict lets the plan be the answer."""
    return r.memory.fits


def counters() -> dict[str, int]:
    """The counts one expansion adds to (:meth:`BranchBound.expand`): the search's own and a worker's
    throw-away copy (:func:`expand_ahead`) start from the same keys."""
    return dict(bounded_time=0, bounded_memory=0, work=0, expanded=0, violations=0)
