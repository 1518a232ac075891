"""The fewest nodes a recipe fits on, where the node count was the reader's choice.

A recipe that states no node count (a Primus experiment YAML, a TorchTitan job without a header or an explicit
shard degree: ``plan.source.nodes_fitted``) is projected on the fewest nodes its parallel degrees allow, which
ignores memory: DeepSeek-V3 671B on 1 node of 8 MI300X projects 1.4 TB per GPU and DOES NOT FIT, which does not
tell the user the scale the file is meant for.  :func:`search_nodes` re-projects the same recipe at more nodes and
returns the fewest on which it fits (:class:`~primus_launch.projection.result.NodeSearch`).

How the recipe grows with the node count is the framework's, not this module's: ``replan(n)`` gives the plan of
the same recipe on ``n`` nodes (the CLI re-reads the file with ``--nodes n``: TorchTitan's
``data_parallel_shard_degree = -1`` and ``global_batch_size = -1`` take what the world leaves, Megatron / Primus
``dp = world / (tp x cp x pp)`` with the written global batch).  Without ``replan`` the plan's own cluster is
changed (the global batch as written, :meth:`Plan.with_changes`).  A count at which the plan is illegal (a
``PlanError``: the global batch not divisible by the data-parallel size, a degree that does not divide the world)
is skipped, and said so in :attr:`NodeTry.skipped`.

Search (peak memory per GPU does not grow with the node count: FSDP / distributed-optimizer shards and the
micro-batches in flight per data-parallel rank only shrink): double from the projected count up to
``max_gpus`` GPUs until a count fits, then bisect between the last count that did not and the first that did (a run of
skipped counts above a midpoint sends the search below it)
(only the doubled counts are tried before a fit: a recipe whose global batch allows 3 or 6 nodes but not 8 is
answered "none of the counts tried", with the skipped counts named);
at most ``max_projections`` projections (doubling 1 -> 512 nodes is 9, bisecting the last octave 8 more), past
which the fewest count found is returned with ``exact = False``.
"""

from __future__ import annotations

from typing import Callable, Optional

from pydantic import ValidationError

from primus_launch.errors import UserError, one_line
from primus_launch.plan import Plan, PlanError
from primus_launch.projection.result import MemoryReport, NodeSearch, NodeTry, ProjectionResult

Replan = Callable[[int], Plan]
Project = Callable[[Plan], ProjectionResult]


def _tried(n: int, m: MemoryReport) -> NodeTry:
    """The try at ``n`` nodes projected to ``m``, with its largest term (what more nodes would have to shrink)."""
    largest = max(m.breakdown, key=lambda k: m.breakdown[k]) if m.breakdown else None
    return NodeTry(nodes=n, verdict=m.verdict, peak_bytes=m.verdict_peak_bytes, largest_term=largest)


def wants_search(plan: Plan, result: ProjectionResult) -> bool:
    """Whether :func:`search_nodes` applies: the reader fitted the node count and the plan does not fit."""
    return plan.source is not None and plan.source.nodes_fitted and result.memory.verdict == "does not fit"


def search_nodes(plan: Plan, result: ProjectionResult, project: Project, replan: Optional[Replan] = None,
                 max_gpus: int = 4096, max_projections: int = 16) -> NodeSearch:
    """The fewest nodes (``gpus_per_node`` each, up to ``max_gpus`` GPUs) on which the recipe of ``plan`` fits
    (verdict ``fits``), ``result`` being its projection on ``plan.cluster.num_nodes`` (module docstring).
    ``project``: the projection of a plan (the caller's options: margin, memory basis)."""
    gpn, n0 = plan.cluster.gpus_per_node, plan.cluster.num_nodes
    max_nodes = max(n0, max_gpus // gpn)
    tries: dict[int, NodeTry] = {n0: _tried(n0, result.memory)}
    budget = [max_projections]

    def at(n: int) -> NodeTry:
        if n in tries:
            return tries[n]
        try:
            p = replan(n) if replan is not None else plan.with_changes(cluster={"num_nodes": n})
        except (PlanError, UserError, ValidationError) as e:   # the recipe's own rule at this count
            tries[n] = NodeTry(nodes=n, skipped=one_line(e))
            return tries[n]
        budget[0] -= 1
        tries[n] = _tried(n, project(p).memory)
        return tries[n]

    lo, hi = n0, None   # lo: the largest count known not to fit (or the start); hi: the fewest known to fit
    n = n0
    while hi is None and n * 2 <= max_nodes and budget[0] > 0:
        n *= 2
        t = at(n)
        if t.verdict == "fits":
            hi = n
        elif t.verdict is not None:
            lo = n
    exact = True
    if hi is not None:
        top = hi   # the counts left to try: lo < n < top (none in [top, hi) is legal)
        while top - lo > 1:   # bisect; a skipped midpoint: the next legal count above it, below top
            if budget[0] <= 0:
                exact = False
                break
            mid = (lo + top) // 2
            m, t = mid, at(mid)
            while t.skipped is not None and m + 1 < top:
                m += 1
                t = at(m)
            if t.skipped is not None:   # no legal count in [mid, top): search below mid
                top = mid
            elif t.verdict == "fits":
                hi = top = m
            else:
                lo = m
    tight = [t.nodes for t in tries.values() if t.verdict == "tight" and (hi is None or t.nodes < hi)]
    return NodeSearch(from_nodes=n0, gpus_per_node=gpn, fits_from_nodes=hi, tight_from_nodes=min(tight, default=None),
                      exact=exact, max_nodes=max_nodes, tried=sorted(tries.values(), key=lambda t: t.nodes))


def with_node_search(plan: Plan, result: ProjectionResult, project: Project, replan: Optional[Replan] = None,
                     max_gpus: int = 4096, max_projections: int = 16) -> ProjectionResult:
    """``result`` with :func:`search_nodes`'s answer in ``memory.fits_from_nodes`` / ``memory.node_search`` where
    it applies (:func:`wants_search`), else ``result`` unchanged."""
    if not wants_search(plan, result):
        return result
    s = search_nodes(plan, result, project, replan, max_gpus, max_projections)
    mem = result.memory.model_copy(update={"fits_from_nodes": s.fits_from_nodes, "node_search": s})
    return result.model_copy(update={"memory": mem})
