"""Which memory verdicts may be the tune's answer (issue 27): the rule, and the score wrapper that applies it.

The projection's memory verdict (``projection/memory/verdict.py``) compares the peak ``P`` the allocator
cannot give back (``MemoryReport.oom_peak_bytes``) and its measured error band ``[P (1 + low), P (1 + high)]``
with the usable capacity ``C = capacity (1 - margin)``: ``fits`` (the band's top fits), ``tight`` (``C``
inside the band), ``does not fit`` (even the band's bottom does not).  A ``tight`` plan whose point
estimate is itself over ``C`` (``P > C``) is more likely to run out of memory than not; one under it more
likely to run.  The rules:

- ``point`` (the default): the answer is the fastest plan whose point estimate fits (``fits``, or
  ``tight`` with ``P <= C``); the ``tight`` plans over it are scored and kept in the top-N table, marked,
  but cannot be the answer;
- ``band``: no plan's point estimate fits, so the answer is the fastest ``tight`` plan, and the answer
  says so (the search ran under ``point``; with no plan admitted it bounded by time only plans whose memory
  floor puts their point estimate over the capacity and whose bound reaches a scored ``tight`` plan's time,
  ``branch_bound.py``'s second tier, so every faster ``tight`` plan was scored or left open by the work limit:
  the certificate holds for this rule too);
- ``certain`` (``--memory-certain``): only ``fits`` plans (the whole band under ``C``).

Every search path reads ``memory.fits`` of what it scores, so :func:`admitted` (``fits`` false for a plan
the rule keeps out) is the whole rule; the branch and bound's memory floors
(``memory_floors.MemoryFloors._memory_edge``) are held against the band's lower edge under ``point`` (a floor
that does not fit there is ``does not fit``, so over ``C`` at its point too: a valid, weaker bound that
lets the ``tight`` plans over ``C`` be scored for the table and for ``band``) and its upper edge under
``certain``.  The pre-filter (``projection/memory/legality.py``) rejects ``does not fit`` only, under
every rule.
"""

from __future__ import annotations

from typing import Callable, Literal

from primus_launch.plan import Plan
from primus_launch.projection.result import MemoryReport, ProjectionResult

MemoryRule = Literal["point", "band", "certain"]

#: what each rule admits, in the words of the answer's ``memory:`` line and the JSON's ``memory_rule_text``
RULE_TEXT: dict[str, str] = {
    "point": "the best is the fastest plan whose point estimate fits; tight plans over it are listed, marked "
             "'over' (more likely to run out of memory than not); --memory-certain: only plans that fit by "
             "their whole band",
    "band": "no plan's point estimate fits: the best is the fastest tight plan (the capacity lies in its "
            "peak's error band), more likely to run out of memory than not",
    "certain": "only plans that fit by their whole error band (--memory-certain)",
}

#: a trial's reason when the rule keeps it out of the answer (``result.scored_fields``)
OVER_REASON = "tight in memory, its point estimate over the usable capacity: kept out of the answer"
CERTAIN_REASON = "tight in memory, kept out by --memory-certain"


def usable_bytes(m: MemoryReport) -> float:
    """The usable capacity ``capacity (1 - margin)`` the verdict compares with."""
    return m.capacity_bytes * (1.0 - m.margin_fraction)


def over_capacity(m: MemoryReport) -> bool:
    """Whether the verdict's point estimate (``oom_peak_bytes``) exceeds the usable capacity: a ``tight``
    plan more likely to run out of memory than not (``does not fit`` ones are over it too)."""
    return m.verdict_peak_bytes > usable_bytes(m)


def admits(m: MemoryReport, rule: MemoryRule) -> bool:
    """Whether a plan of memory report ``m`` may be the answer under ``rule`` (module doc)."""
    if m.verdict == "does not fit":
        return False
    if rule == "certain":
        return m.verdict == "fits"
    if rule == "point":
        return m.verdict == "fits" or not over_capacity(m)
    return True


def admitted(fn: Callable[[Plan], ProjectionResult], rule: MemoryRule) -> Callable[[Plan], ProjectionResult]:
    """``fn`` whose results count as fitting (``memory.fits``) only where ``rule`` admits them."""

    def call(plan: Plan) -> ProjectionResult:
        r = fn(plan)
        if r.memory.fits and not admits(r.memory, rule):
            r = r.model_copy(update={"memory": r.memory.model_copy(update={"fits": False})})
        return r

    return call


def readmitted(r: ProjectionResult) -> ProjectionResult:
    """``r`` with ``memory.fits`` back to the verdict's own (true for ``fits`` and ``tight``): the ``band``
    rule's answer."""
    fits = r.memory.verdict != "does not fit"
    return r if r.memory.fits == fits else r.model_copy(update={"memory": r.memory.model_copy(update={"fits": fits})})


__all__ = ["CERTAIN_REASON", "OVER_REASON", "RULE_TEXT", "MemoryRule", "admits", "admitted", "over_capacity",
           "readmitted", "usable_bytes"]
