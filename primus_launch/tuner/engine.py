"""The search's bookkeeping: the indexed space, the pre-filter cache, the scoring oracle with its
budget and time limit, and the record of every trial.

The planner (``planner.py``) and the LLM loop (``llm.py``) only ask this object to ``evaluate``
candidates; it never scores a candidate twice, never scores one the pre-filter rejects, and raises
:class:`Exhausted` when the budget or time limit is reached.  What is learnt lives in a
:class:`Memo` keyed by candidate, shared by every engine of one tune (the sub-spaces of the
hierarchical planner), which also holds the trial record and the budget.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.result import Trial, TrialSource, scored_fields
from primus_launch.tuner.space import AXES, Knobs, apply_knobs

if TYPE_CHECKING:
    from primus_launch.tuner.progress import Progress

Score = Callable[[Plan], ProjectionResult]
Prefilter = Callable[[Plan], Optional[str]]


class Exhausted(Exception):
    """The scoring budget or the time limit is spent."""


def flat_fields(d: dict, prefix: str = "") -> dict[str, object]:
    """A nested mapping flattened to dotted keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``)."""
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flat_fields(v, key + "."))
        else:
            out[key] = v
    return out


def plan_changes(original: Plan, plan: Plan, _cache: dict = {}) -> dict[str, object]:
    """Dotted fields of ``plan`` that differ from ``original`` (new values)."""
    key = id(original)
    hit = _cache.get(key)
    if hit is None or hit[0] is not original:
        if len(_cache) > 64:
            _cache.clear()
        hit = _cache[key] = (original, flat_fields(original.model_dump(include={"parallel", "training"})))
    a = hit[1]
    b = flat_fields(plan.model_dump(include={"parallel", "training"}))
    return {k: v for k, v in b.items() if a.get(k) != v}


class Memo:
    """What one tune has learnt, shared by every :class:`Engine` of it (the hierarchical planner
    builds several sub-spaces): pre-filter verdicts, results, the trial record, the scored count
    against the budget and the deadline."""

    def __init__(self, plan: Plan, *, score: Score, prefilter: Prefilter, budget: Optional[int],
                 time_limit_s: Optional[float], progress: Optional[Progress] = None):
        self.plan = plan
        self.score_fn = score
        self.prefilter_fn = prefilter
        self.budget = budget
        self.deadline = None if time_limit_s is None else time.monotonic() + time_limit_s
        self.progress = progress
        self.reasons: dict[Knobs, Optional[str]] = {}
        self.results: dict[Knobs, ProjectionResult] = {}
        self.failed: dict[Knobs, str] = {}
        self.rejected_seen: set[Knobs] = set()
        self.trials: list[Trial] = []
        self.scored = 0

    def spent(self) -> bool:
        """Whether the scoring budget is used up or the deadline has passed."""
        if self.budget is not None and self.scored >= self.budget:
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline

    def time_of(self, k: Optional[Knobs]) -> float:
        """The iteration time of scored candidate ``k`` where it fits; +inf otherwise (unscored, not fitting, None)."""
        r = self.results.get(k) if k is not None else None
        return r.iteration_time_s if r is not None and r.memory.fits else float("inf")

    def best(self) -> Optional[Knobs]:
        """The fastest scored candidate that fits (ties: the first scored)."""
        best_k, best_t = None, float("inf")
        for k, r in self.results.items():
            if r.memory.fits and r.iteration_time_s < best_t:
                best_k, best_t = k, r.iteration_time_s
        return best_k


class Engine:
    """Indexed candidate space + oracle (see module docstring)."""

    # cost of changing an axis as a side effect when moving to a neighbour (repair distance)
    WEIGHTS = dict(tp=8, pp=8, vpp=4, cp=8, ep=6, etp=3, sp=1, mbs=2, dp_sharding=3, dp_replicate=2,
                   rc_granularity=2, rc_method=1, rc_layers=1, rc_modules=1, schedule=1, overlap_grad_reduce=1,
                   overlap_param_gather=1, tp_comm_overlap=1, first_stage_layers=3, last_stage_layers=3,
                   acc_embedding=2, acc_loss=2, layout=3, cuda_graph_impl=1, cuda_graph_scope=1, dispatcher=2,
                   ep_overlap=1, delay_wgrad=1, compile=1, offload_layers=2, offload_modules=1,
                   optimizer_offload=2, precision=4, fp8_recipe=1, fp8_param_gather=1, moments=1)

    MAX_LAZY_CHECKS = 400  # pre-filter calls one neighbour query may spend when no mask is known

    def __init__(self, plan: Plan, space: Sequence[Knobs], *, score: Optional[Score] = None,
                 prefilter: Optional[Prefilter] = None, budget: Optional[int] = None,
                 time_limit_s: Optional[float] = None, progress: Optional[Progress] = None, memo: Optional[Memo] = None):
        self.plan = plan
        self.space = space
        self.index = {k: i for i, k in enumerate(space)}
        self.memo = memo if memo is not None else Memo(plan, score=score, prefilter=prefilter, budget=budget,
                                                       time_limit_s=time_limit_s, progress=progress)
        # integer codes per axis, for vectorised neighbour queries
        cols = []
        self.lookups: list[dict] = []
        for vals in (zip(*space) if len(space) else [()] * len(AXES)):
            lookup = {v: i for i, v in enumerate(dict.fromkeys(vals))}
            self.lookups.append(lookup)
            cols.append(np.fromiter(map(lookup.__getitem__, vals), dtype=np.int32, count=len(vals)))
        self.codes = np.stack(cols, axis=1) if space else np.zeros((0, len(AXES)), dtype=np.int32)
        self.weights = np.array([self.WEIGHTS[a] for a in AXES], dtype=np.float64)
        self._rows: dict[tuple[int, int], np.ndarray] = {}
        self._dist_base: Optional[int] = None
        self._dist = np.zeros(0)
        self.legal_mask: Optional[np.ndarray] = None  # set when the whole space was pre-filtered
        # what the memo already knows about this space's candidates
        m = self.memo
        self.reasons: dict[int, Optional[str]] = {}
        self.results: dict[int, ProjectionResult] = {}
        self.failed: dict[int, str] = {}
        self.rejected_seen: set[int] = set()
        if m.reasons or m.results:
            for i, k in enumerate(space):
                if k in m.reasons:
                    self.reasons[i] = m.reasons[k]
                if k in m.results:
                    self.results[i] = m.results[k]
                elif k in m.failed:
                    self.failed[i] = m.failed[k]
                if k in m.rejected_seen:
                    self.rejected_seen.add(i)

    # the shared record
    @property
    def trials(self) -> list[Trial]:
        """The tune's trial record (the shared memo's)."""
        return self.memo.trials

    @property
    def scored(self) -> int:
        """Candidates scored so far in the tune (the shared memo's count against the budget)."""
        return self.memo.scored

    @scored.setter
    def scored(self, v: int) -> None:
        self.memo.scored = v

    @property
    def budget(self) -> Optional[int]:
        """The tune's scoring budget (None: none)."""
        return self.memo.budget

    @budget.setter
    def budget(self, v: Optional[int]) -> None:
        self.memo.budget = v

    @property
    def progress(self) -> Optional[Progress]:
        """The progress bar the scorings advance (None: none shown)."""
        return self.memo.progress

    @progress.setter
    def progress(self, v: Optional[Progress]) -> None:
        self.memo.progress = v

    @property
    def score_fn(self) -> Score:
        """The tune's scoring oracle."""
        return self.memo.score_fn

    # ----- legality -----
    def reason(self, i: int) -> Optional[str]:
        """Pre-filter verdict for candidate ``i`` (cached): None when legal."""
        if i not in self.reasons:
            k = self.space[i]
            if k not in self.memo.reasons:
                try:
                    self.memo.reasons[k] = self.memo.prefilter_fn(apply_knobs(self.plan, k))
                except Exception as e:  # a pre-filter bug must not kill the search
                    self.memo.reasons[k] = f"pre-filter error: {type(e).__name__}: {e}"
            self.reasons[i] = self.memo.reasons[k]
        return self.reasons[i]

    def prefilter_all(self) -> np.ndarray:
        """Pre-filter every candidate of the space: the mask of the legal ones, kept as ``legal_mask``."""
        mask = np.fromiter((self.reason(i) is None for i in range(len(self.space))), dtype=bool,
                           count=len(self.space))
        self.legal_mask = mask
        return mask

    def is_legal(self, i: int) -> bool:
        """Whether candidate ``i`` passes the pre-filter (:meth:`reason` is None)."""
        return self.reason(i) is None

    # ----- scoring -----
    def spent(self) -> bool:
        """Whether the tune's budget or deadline is spent (:meth:`Memo.spent`)."""
        return self.memo.spent()

    def time_of(self, i: int) -> float:
        """Objective: iteration time of a scored candidate that fits; +inf otherwise."""
        r = self.results.get(i)
        if r is None or not r.memory.fits:
            return float("inf")
        return r.iteration_time_s

    def key(self, i: int) -> tuple[int, float]:
        """Search order: fitting candidates by time, then non-fitting ones by how far over memory
        they are (so a search that starts out of memory walks towards plans that fit)."""
        r = self.results.get(i)
        if r is None:
            return (2, float("inf"))
        if r.memory.fits:
            return (0, r.iteration_time_s)
        return (1, r.memory.peak_bytes_per_gpu / max(1, r.memory.capacity_bytes))

    def evaluate(self, i: int, source: TrialSource) -> float:
        """Score candidate ``i`` once (pre-filter first); returns its objective."""
        if i in self.results or i in self.failed or i in self.rejected_seen:
            return self.time_of(i)
        k = self.space[i]
        m = self.memo
        if k in m.results or k in m.failed or k in m.rejected_seen:  # learnt in another sub-space
            if k in m.results:
                self.results[i] = m.results[k]
            elif k in m.failed:
                self.failed[i] = m.failed[k]
            else:
                self.rejected_seen.add(i)
            return self.time_of(i)
        why = self.reason(i)
        cand = apply_knobs(self.plan, k)
        if why is not None:
            self.rejected_seen.add(i)
            m.rejected_seen.add(k)
            self.record(cand, source, reason=why)
            return float("inf")
        if self.spent():
            raise Exhausted
        try:
            res = m.score_fn(cand)
        except Exception as e:  # the projection refusing a plan is a rejection, not a crash
            self.failed[i] = m.failed[k] = f"projection failed: {type(e).__name__}: {e}"
            self.record(cand, source, reason=self.failed[i])
            return float("inf")
        self.scored += 1
        self.results[i] = m.results[k] = res
        self.record(cand, source, result=res)
        if self.progress is not None:
            self.progress.update(self)
        return self.time_of(i)

    def record(self, cand: Plan, source: TrialSource, *, result: Optional[ProjectionResult] = None,
               reason: Optional[str] = None) -> Trial:
        """Append the trial of ``cand`` (from ``source``) to the record: scored with ``result``'s figures, or
        rejected with ``reason``; its changes are those from the user's plan."""
        fields = scored_fields(result) if result is not None else dict(reason=reason)
        t = Trial(index=len(self.trials), source=source, changes=plan_changes(self.plan, cand),
                  status="scored" if result is not None else "rejected", **fields)
        self.trials.append(t)
        return t

    def best(self) -> Optional[int]:
        """Index of the fastest scored candidate that fits (ties: earliest in space order)."""
        best_i, best_t = None, float("inf")
        for i in sorted(self.results):
            t = self.time_of(i)
            if t < best_t:
                best_i, best_t = i, t
        return best_i

    # ----- neighbourhood -----
    def _distances(self, base: int) -> np.ndarray:
        """Weighted Hamming distance of every candidate to ``base`` (cached for the last base)."""
        if self._dist_base != base:
            d = np.zeros(len(self.space))
            row = self.codes[base]
            for j, w in enumerate(self.weights):
                d += w * (self.codes[:, j] != row[j])
            self._dist = d
            self._dist_base = base
        return self._dist

    def rows_with(self, col: int, code: int) -> np.ndarray:
        """Indices of the candidates whose axis column ``col`` holds value code ``code`` (cached)."""
        key = (col, code)
        if key not in self._rows:
            self._rows[key] = np.nonzero(self.codes[:, col] == code)[0]
        return self._rows[key]

    def nearest(self, base: int, fixed: dict[int, int], *, limit: int = 1, legal_only: bool = True) -> list[int]:
        """Candidates closest to ``base`` (weighted Hamming distance over the axes) among those whose
        axis columns equal ``fixed`` ({axis column: code}); stable order breaks ties.  With
        ``legal_only`` the pre-filter is consulted lazily (or the precomputed mask is used)."""
        if not fixed:
            rows = np.arange(len(self.space))
        else:
            items = sorted(fixed.items(), key=lambda kv: len(self.rows_with(*kv)))
            rows = self.rows_with(*items[0])
            for col, code in items[1:]:
                rows = rows[self.codes[rows, col] == code]
        if legal_only and self.legal_mask is not None:
            rows = rows[self.legal_mask[rows]]
        if rows.size == 0:
            return []
        dist = self._distances(base)[rows]
        order = rows[np.argsort(dist, kind="stable")] if limit > 1 or (legal_only and self.legal_mask is None) \
            else rows[[int(np.argmin(dist))]]  # argmin returns the first (lowest index) minimum
        out: list[int] = []
        for checked, i in enumerate(order):
            i = int(i)
            if checked >= self.MAX_LAZY_CHECKS:
                break
            if legal_only and self.legal_mask is None and not self.is_legal(i):
                continue
            out.append(i)
            if len(out) >= limit:
                break
        return out
