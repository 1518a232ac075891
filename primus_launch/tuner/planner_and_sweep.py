"""The searches of a tune without the branch and bound's certificate: the space's size, legal fraction and
per-candidate costs from a stride sample (:class:`SpaceEstimate`), the planner's run (``planner.py``, with
optional language-model rounds, ``llm.py``) and the brute force's (``exhaustive.py``), each returning what
:func:`primus_launch.tuner.search.tune` reports (legal plans, whether the count is exact, the progress bar)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.engine import Engine, Exhausted, Memo
from primus_launch.tuner.planner import Planner, hierarchical
from primus_launch.tuner.result import Certificate
from primus_launch.tuner.seed import score_baseline
from primus_launch.tuner.space import Knobs, Space, apply_knobs

if TYPE_CHECKING:
    from primus_launch.executor import Executor
    from primus_launch.tuner.progress import Progress

EXACT_COUNT_LIMIT = 40_000   # planner: pre-filter the whole space up to this many candidates, else sample


SAMPLE_SIZE = 2_000          # stride sample of larger spaces (legal fraction, pre-filter cost)


DEFAULT_MAX_BUDGET = 1_000   # planner's default budget: 10% of the legal space, at most this many


INDEX_LIMIT = 400_000        # the planner indexes spaces up to this size whole; larger: sub-space rounds


class SpaceEstimate:
    """Size, legal fraction and per-candidate costs of a space, from a stride sample."""

    def __init__(self, space: Space, memo: Memo, sample: int):
        n = len(space)
        idx = range(n) if n <= sample else sorted({int(k * n / sample) for k in range(sample)})
        t = time.perf_counter()
        verdicts = []
        for i in idx:
            k = space[i]
            if k not in memo.reasons:
                try:
                    memo.reasons[k] = memo.prefilter_fn(apply_knobs(memo.plan, k))
                except Exception as e:  # a pre-filter bug must not kill the search
                    memo.reasons[k] = f"pre-filter error: {type(e).__name__}: {e}"
            verdicts.append((i, memo.reasons[k] is None))
        self.prefilter_s = (time.perf_counter() - t) / max(1, len(verdicts))
        self.exact = len(verdicts) == n
        ok = [i for i, v in verdicts if v]
        self.legal = len(ok) if self.exact else int(round(n * len(ok) / max(1, len(verdicts))))
        self.legal_sample = ok
        self.n = n
        self.score_s: Optional[float] = None

    def time_scoring(self, space: Space, memo: Memo, baseline_s: float, k: int = 3) -> float:
        """Seconds per scored candidate: the baseline's and up to ``k`` sampled legal candidates'
        scoring (their results are discarded: the search scores them again)."""
        times = [baseline_s]
        picks = self.legal_sample[:: max(1, len(self.legal_sample) // k)][:k] if self.legal_sample else []
        for i in picks:
            t = time.perf_counter()
            try:
                memo.score_fn(apply_knobs(memo.plan, space[i]))
            except Exception:
                continue
            times.append(time.perf_counter() - t)
        times.sort()
        self.score_s = times[len(times) // 2]
        return self.score_s

    def exhaustive_s(self, workers: int) -> float:
        """Seconds the brute force would take on ``workers`` processes: every candidate pre-filtered and every
        legal one scored, ``(n * prefilter_s + legal * score_s) / workers``, times 1.1 for the sweep's overhead
        (the sample's per-candidate costs, :meth:`time_scoring`'s median)."""
        score = self.score_s if self.score_s is not None else 0.0
        return (self.n * self.prefilter_s + self.legal * score) / max(1, workers) * 1.1


def estimate_and_baseline(plan: Plan, sp: Space, memo: Memo, own: Knobs,
                           exhaustive: Optional[bool]) -> tuple[SpaceEstimate, ProjectionResult]:
    """The planner's and the brute force's first step: the space's size and cost from a stride sample (exact,
    every candidate pre-filtered, when the planner runs on a space of at most :data:`EXACT_COUNT_LIMIT`), then
    the recipe's own plan scored (:func:`score_baseline`), its time the first sample of the scoring cost."""
    est = SpaceEstimate(sp, memo, EXACT_COUNT_LIMIT if exhaustive is False and len(sp) <= EXACT_COUNT_LIMIT
                    else SAMPLE_SIZE)
    tb = time.perf_counter()
    baseline = score_baseline(plan, sp, memo, own)
    est.time_scoring(sp, memo, time.perf_counter() - tb)
    return est, baseline


def run_exhaustive(sp: Space, memo: Memo, n_workers: int, baseline: ProjectionResult, warnings: list[str], *,
                    progress: bool, executor: Optional["Executor"], time_limit_s: Optional[float],
                    start: float) -> tuple[int, bool, Optional[Certificate], Optional["Progress"]]:
    """The brute force (``exhaustive.py``): every candidate pre-filtered and every legal one scored on
    ``n_workers`` processes or ``executor``'s.  Returns (legal plans, whether that count is exact, the
    certificate when it ran to its end, the progress bar to close); stopped at ``time_limit_s`` it adds a
    warning instead of a certificate."""
    from primus_launch.tuner.exhaustive import sweep

    prog = None
    if progress:
        from primus_launch.tuner.progress import Progress

        prog = Progress(total=len(sp), baseline_s=baseline.iteration_time_s, start=start)
    out = sweep(sp, memo, n_workers, progress=prog, executor=executor)
    certificate = None
    if out.complete:
        text = (f"best of all {out.scored_ok:,} legal plans (every one of the {len(sp):,} candidates "
                f"pre-filtered, {out.scored_ok:,} scored")
        text += f", {out.failed:,} the projection could not score)" if out.failed else ")"
        certificate = Certificate(certified=True, plans=len(sp), scored=out.scored_ok,
                                  bounded_memory=len(sp) - out.scored_ok, text=text)
    else:
        warnings.append(f"stopped at the time limit of {time_limit_s} s after {out.done:,} of {len(sp):,} "
                        "candidates: best of those, not of the whole space")
    return out.legal, out.complete, certificate, prog


def run_planner(plan: Plan, sp: Space, memo: Memo, own: Knobs, baseline: ProjectionResult, warnings: list[str], *,
                 legal: tuple[int, bool], budget: int, progress: bool, llm: tuple[Optional[str], int, float],
                 time_limit_s: Optional[float], start: float) -> tuple[int, bool, Optional["Progress"]]:
    """The planner (``planner.py``) from the recipe's own knobs, for at most ``budget`` scorings: the whole
    space indexed up to :data:`INDEX_LIMIT` candidates (and pre-filtered whole, for an exact legal count, up
    to :data:`EXACT_COUNT_LIMIT`), else :func:`planner.hierarchical`; with ``llm`` = (model, rounds,
    timeout s) an :class:`LLMAdvisor` between its rounds.  Returns (legal plans, whether exact -- ``legal``,
    the estimate's, unless counted here -- and the progress bar to close); where the budget or the time
    limit stopped it, a warning says which."""
    legal_n, exact = legal
    memo.budget = budget
    prog = None
    if progress:
        from primus_launch.tuner.progress import Progress

        prog = Progress(total=budget, baseline_s=baseline.iteration_time_s, start=start)
        memo.progress = prog
    llm_model, llm_rounds, llm_timeout_s = llm
    advisor = None
    if llm_model:
        from primus_launch.tuner.llm import LLMAdvisor

        advisor = LLMAdvisor(llm_model, None, rounds=llm_rounds, timeout_s=llm_timeout_s)
    try:
        if len(sp) <= INDEX_LIMIT:
            engine = Engine(plan, list(sp), memo=memo)
            if len(sp) <= EXACT_COUNT_LIMIT:
                legal_n, exact = int(engine.prefilter_all().sum()), True
            Planner(engine).run(own, between=advisor.run if advisor is not None else None)
        else:
            hierarchical(sp, memo, own, between=advisor.run if advisor is not None else None)
    except Exhausted:
        if memo.budget is not None and memo.scored >= memo.budget:
            warnings.append(f"stopped at the budget of {budget} scored candidates")
        else:
            warnings.append(f"stopped at the time limit of {time_limit_s} s")
    if advisor is not None:
        warnings.extend(advisor.warnings)
    return legal_n, exact, prog
