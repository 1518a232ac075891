"""The exhaustive sweep: every candidate of a space pre-filtered and every legal one scored, over
several processes, with a result that does not depend on how many.

The space is cut into contiguous index ranges that the workers of an
:class:`~primus_launch.executor.Executor` (default: a ``fork`` pool of local processes, which inherit
the plan, the space and the scoring function; or a Ray cluster, ``--ray-address``, to which they are
shipped once) pre-filter and score independently; the parent merges their rows in index order, so the trial record, the counts and the best (fastest that fits, ties
by index) are the same for any number of workers.  Rows carry the figures a trial records; the
best candidate is scored again in the parent for its full :class:`ProjectionResult` (the
projection is deterministic).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from primus_launch import interrupt
from primus_launch.executor import Executor, InProcess, LocalProcesses, in_order
from primus_launch.tuner.engine import Memo, plan_changes
from primus_launch.tuner.result import Trial, scored_fields
from primus_launch.tuner.space import Knobs, Space, apply_knobs

if TYPE_CHECKING:
    from primus_launch.tuner.progress import Progress

@dataclass
class SweepResult:
    """The counts of a brute-force sweep (:func:`sweep`)."""

    done: int          # candidates looked at
    legal: int         # passed the pre-filter
    scored_ok: int     # scored (the baseline counted once)
    failed: int        # legal but the projection refused them
    complete: bool     # every candidate looked at (no time limit hit)


def _row(plan, score, pf, i: int, k: Knobs) -> tuple:
    cand = apply_knobs(plan, k)
    try:
        why = pf(cand)
    except Exception as e:  # a pre-filter bug must not kill the search
        why = f"pre-filter error: {type(e).__name__}: {e}"
    changes = plan_changes(plan, cand)
    if why is not None:
        return (i, "rejected", why, changes, None)
    try:
        r = score(cand)
    except Exception as e:  # the projection refusing a plan is a rejection, not a crash
        return (i, "failed", f"projection failed: {type(e).__name__}: {e}", changes, None)
    return (i, "scored", None, changes, scored_fields(r))


def sweep_range(job: tuple, a: int, b: int) -> list[tuple]:
    """The rows of candidates ``a .. b-1`` (an executor's task: ``job`` is the sweep's shared
    ``(space, plan, score, prefilter, deadline)``, the deadline in ``time.time()`` seconds: a worker
    on another machine has its own monotonic clock)."""
    space, plan, score, pf, deadline = job
    rows = []
    for i, k in space.iter_range(a, b):
        if deadline is not None and time.time() >= deadline:
            break
        rows.append(_row(plan, score, pf, i, k))
    return rows


class _View:
    """What :class:`~primus_launch.tuner.progress.Progress` reads, during a sweep."""

    def __init__(self):
        self.scored = 0
        self.best_t: Optional[float] = None

    def best(self):
        return None if self.best_t is None else 0

    def time_of(self, _):
        return self.best_t


def sweep(space: Space, memo: Memo, workers: int, *, progress: Optional[Progress] = None, chunk: Optional[int] = None,
          executor: Optional[Executor] = None) -> SweepResult:
    """Pre-filter and score every candidate of ``space`` (the memo's plan, oracle, pre-filter and
    deadline); trials are appended to ``memo.trials`` in index order (the baseline already
    recorded is not repeated), and the best fitting candidate's full result is put in
    ``memo.results``, with that of the lowest-peak one of the same time (the tie-break's), and where none fits
    the fastest ``tight`` one's (``memory_rule.py``: the ``band`` rule's answer).  ``executor``: where the ranges run (default: ``workers`` local processes, this
    process alone for one)."""
    n = len(space)
    plan = memo.plan
    from primus_launch.tuner.space import knobs_of

    own = knobs_of(plan)
    own_i = space.index(own) if own in memo.results or own in memo.failed else None
    if executor is None:
        workers = max(1, min(workers, n or 1))
        executor = InProcess() if workers == 1 else LocalProcesses(workers)
    workers = executor.workers
    size = chunk or max(16, min(2_000, n // (workers * 8) or 1))
    ranges = [(a, min(n, a + size)) for a in range(0, n, size)]
    deadline = None if memo.deadline is None else time.time() + (memo.deadline - time.monotonic())
    view = _View()
    done = legal = scored = failed = 0
    best: Optional[tuple[float, int]] = None
    low: Optional[tuple[float, int, int]] = None  # fastest, then lowest peak: the tie-break's candidate
    tight: Optional[tuple[float, int]] = None  # fastest tight plan the memory rule kept out (memory_rule.py "band")
    if own in memo.results and memo.results[own].memory.fits:
        best = (memo.results[own].iteration_time_s, own_i)
        low = (best[0], memo.results[own].memory.peak_bytes_per_gpu, own_i)
    finished = False
    executor.start((space, plan, memo.score_fn, memo.prefilter_fn, deadline))
    try:
        for rows in in_order(executor, sweep_range, ranges):
            interrupt.check()  # a signal a library swallowed still ends the sweep here
            for i, status, reason, changes, fig in rows:
                done += 1
                if status != "rejected":
                    legal += 1
                if i == own_i:  # the seed trial already holds it
                    continue
                t = Trial(index=len(memo.trials), source="exhaustive", changes=changes,
                          status="rejected" if status != "scored" else "scored",
                          **(fig if status == "scored" else dict(reason=reason)))
                if status == "scored":
                    scored += 1
                    if t.fits and (best is None or (t.iteration_time_s, i) < best):
                        best = (t.iteration_time_s, i)
                    if t.fits and (low is None or (t.iteration_time_s, t.peak_memory_bytes, i) < low):
                        low = (t.iteration_time_s, t.peak_memory_bytes, i)
                    if not t.fits and t.verdict == "tight" and (tight is None or (t.iteration_time_s, i) < tight):
                        tight = (t.iteration_time_s, i)
                elif status == "failed":
                    failed += 1
                memo.trials.append(t)
            if progress is not None:  # the bar counts candidates looked at, of all
                view.scored = done
                view.best_t = best[0] if best is not None else None
                progress.update(view)
        finished = True
    finally:
        executor.stop(finished)
    memo.scored += scored
    # where nothing fits, the fastest tight plan's too: the answer if the memory rule falls back to "band"
    for i in {best[1] if best else None, low[2] if low else None, tight[1] if tight and not best else None} - {None, own_i}:
        k = space[i]  # the best's full result, and the lowest-peak plan of the best time (answer.py _tie_break)
        memo.results[k] = memo.score_fn(apply_knobs(plan, k))
    own_counts = 1 if own_i is not None and own in memo.results else 0
    return SweepResult(done=done, legal=legal, scored_ok=scored + own_counts, failed=failed, complete=done == n)
