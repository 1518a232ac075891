"""The tuner's driver: ``tune(plan) -> TuneResult``.

Search space (``space.py``), pre-filter (``primus_launch.projection.memory.legality.prefilter``:
divisibility + memory; never scored when it rejects), scoring oracle (the dry-run projection by
default, any ``Callable[[Plan], ProjectionResult]`` otherwise), and one of three searches:

- **branch and bound** (``branch_bound.py``, the default): every plan of the space scored or bounded
  out by a true lower bound on its time or memory (``bounds.py``), with a certificate "best of all N
  legal plans (M scored, the rest bounded out)".  No wall clock enters it: it stops only at the
  work limit ``max_work`` (a count of bound and scoring steps, :data:`branch_bound.DEFAULT_MAX_WORK`),
  so the answer is the same under any load; stopped early it says how far from the optimum it may be;
  at a quarter of its work limit, still without a plan better than the recipe's own, it is warm-started
  once by the planner (``_warm_start``: a better incumbent to bound by, found in a few dozen scorings);
- **exhaustive** (``exhaustive.py``, ``exhaustive=True``): every candidate pre-filtered and every legal
  one scored over all cores (a brute force: the check of the branch and bound);
- **planner** (``planner.py``, ``exhaustive=False``, a ``budget`` or an LLM), with optional LLM rounds
  (``llm.py``): the whole space indexed when it has at most :data:`INDEX_LIMIT` candidates, else
  block-coordinate rounds over sub-spaces around the incumbent (:func:`planner.hierarchical`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from primus_launch.plan import Plan, PlanError
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner import rules
from primus_launch.tuner.engine import Engine, Exhausted, Memo, Prefilter, plan_changes
from primus_launch.tuner.memory_rule import RULE_TEXT, admitted, readmitted
from primus_launch.tuner.planner import Planner, hierarchical
from primus_launch.tuner.result import Certificate, Trial, TuneResult, best_rank
from primus_launch.tuner.space import Knobs, Space, SpaceConfig, apply_knobs, knobs_of, searched_knobs, validated

if TYPE_CHECKING:
    from primus_launch.executor import Executor
    from primus_launch.tuner.progress import Progress

EXACT_COUNT_LIMIT = 40_000   # planner: pre-filter the whole space up to this many candidates, else sample
SAMPLE_SIZE = 2_000          # stride sample of larger spaces (legal fraction, pre-filter cost)
DEFAULT_MAX_BUDGET = 1_000   # planner's default budget: 10% of the legal space, at most this many
INDEX_LIMIT = 400_000        # the planner indexes spaces up to this size whole; larger: sub-space rounds


def default_workers() -> int:
    """CPU cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def default_score(memory_margin: float, memory_basis: str = "reserved") -> Callable[[Plan], ProjectionResult]:
    """The dry-run projection (``memory_basis``: what ``fits`` compares, as ``projection.api.project``)."""
    if memory_basis == "reserved":
        from primus_launch.projection.dryrun import project_dry_run

        def score(plan: Plan) -> ProjectionResult:
            return project_dry_run(plan, memory_margin=memory_margin, record_timeline=False)

        return score
    from primus_launch.projection.api import project

    def score_basis(plan: Plan) -> ProjectionResult:
        return project(plan, dry_run=True, memory_margin=memory_margin, memory_basis=memory_basis)

    return score_basis


def default_prefilter(memory_margin: float, memory_basis: str = "reserved") -> Prefilter:
    """The divisibility + memory pre-filter of :mod:`primus_launch.projection.memory.legality`, judging
    memory on the same ``memory_basis`` as the scoring."""
    from primus_launch.projection.memory.legality import prefilter

    def pf(plan: Plan) -> Optional[str]:
        return prefilter(plan, margin=memory_margin, memory_basis=memory_basis)

    return pf


def _stoppable(fn: Callable) -> Callable:
    """``fn`` behind :func:`primus_launch.interrupt.check`: a signal whose exception a library swallowed
    (an import's lock callback, a C extension) still stops the search at the next candidate."""
    from primus_launch import interrupt

    def call(plan: Plan):
        interrupt.check()
        return fn(plan)

    return call


def certain_only(fn: Callable[[Plan], ProjectionResult]) -> Callable[[Plan], ProjectionResult]:
    """``fn`` whose results count as fitting only with the memory verdict ``fits`` (``--memory-certain``):
    :func:`memory_rule.admitted` under the ``certain`` rule."""
    return admitted(fn, "certain")


def check_allow(allow: Iterable[str]) -> frozenset[str]:
    """The ``--allow`` names, blanks dropped; a name not in :data:`rules.ALLOWABLE` is a one-line
    :class:`PlanError` naming the field, the names and what is allowed."""
    out = frozenset(a.strip() for a in allow if a.strip())
    bad = sorted(out - set(rules.ALLOWABLE))
    if bad:
        raise PlanError("allow", ",".join(bad), "of " + ", ".join(rules.ALLOWABLE))
    return out


class _Estimate:
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
        score = self.score_s if self.score_s is not None else 0.0
        return (self.n * self.prefilter_s + self.legal * score) / max(1, workers) * 1.1


def tune(
    plan: Plan,
    *,
    score: Optional[Callable[[Plan], ProjectionResult]] = None,
    budget: Optional[int] = None,
    time_limit_s: Optional[float] = None,
    exhaustive: Optional[bool] = None,
    llm_model: Optional[str] = None,
    memory_margin: float = 0.0,
    memory_basis: str = "reserved",
    progress: bool = False,
    top_n: int = 5,
    space: Optional[SpaceConfig] = None,
    allow: Iterable[str] = (),
    prefilter: Optional[Prefilter] = None,
    llm_rounds: int = 3,
    llm_timeout_s: float = 5.0,
    workers: Optional[int] = None,
    max_work: Optional[int] = None,
    score_is_dry_run: bool = True,
    training_tokens: Optional[int] = None,
    gpu_hour_price: Optional[float] = None,
    executor: Optional["Executor"] = None,
    memory_certain: bool = False,
    no_reference: Optional[str] = None,
    echo_warnings: bool = True,
) -> TuneResult:
    """Search configurations of ``plan`` (same model, cluster and global batch) for the shortest
    projected iteration time among those that fit in memory.

    ``exhaustive``: True scores every legal candidate (brute force), False runs the planner, None
    (default) runs the certified branch and bound (``branch_bound.py``) unless ``budget`` or
    ``llm_model`` asks for the planner; ``max_work`` is its work limit (default
    :data:`branch_bound.DEFAULT_MAX_WORK`; a count, not a time: the answer does not depend on load).
    The bounds are of the dry-run projection: with a ``score`` that is not it (the measured path),
    pass ``score_is_dry_run=False`` and the default search is the planner.
    ``space`` defaults to :class:`SpaceConfig` (the full space); ``allow`` names the
    numerics-changing knob families to search (``fp8``, ``optimizer-dtypes``).  ``budget`` caps
    the planner's scored candidates (default: 10% of the legal space, at most
    ``DEFAULT_MAX_BUDGET``); ``time_limit_s`` stops the planner or the brute force (never the branch
    and bound).  ``workers``: processes of the
    exhaustive sweep (default: every core; the result does not depend on it); given and above 1 with
    the branch and bound, its expansions are computed ahead on that many local processes.
    ``executor`` (:class:`primus_launch.executor.Executor`, e.g. a Ray cluster's): where the search's
    shards run -- the branch and bound's expansions, computed ahead and replayed in its order, or the
    exhaustive sweep's index ranges (default: this process for the branch and bound, ``workers``
    local processes for the sweep); the plan and certificate do not depend on it.
    ``training_tokens`` (and ``gpu_hour_price``, USD per GPU-hour): the result's ``training_run``
    holds the whole run of that many tokens for the original and the best plan
    (:func:`primus_launch.projection.training_run.training_run`), in the trial log too.
    ``echo_warnings``: the search's warnings also on stderr as they arise (the CLI's text answer lists them
    itself: printed twice on a terminal, user12);
    ``memory_certain``: only plans whose memory verdict is ``fits`` may be the answer (the ``certain`` rule);
    default: the fastest whose point estimate fits (``point``: ``fits``, or ``tight`` under the usable capacity;
    the ``tight`` plans over it kept in ``top``, marked), else, where none does, the fastest ``tight`` one
    (``band``): :mod:`primus_launch.tuner.memory_rule`, ``res.memory_rule``.
    ``no_reference``: why the recipe's own plan is not legal on ``plan``'s cluster (``plan`` is then a legal
    seed, ``tuner/rebase.py``): the best plan found is the answer whatever the seed's time, with no gain
    claimed (``res.gain`` 0, ``res.no_reference`` the reason) and no tie-break against the seed.
    """
    t0 = time.monotonic()
    _check_tune_args(memory_margin, memory_basis, budget, workers, max_work)
    allowed = check_allow(allow)
    cfg = space or SpaceConfig()
    if allowed:
        cfg = dataclasses.replace(cfg, allow=cfg.allow | allowed)
    warnings: list[str] = []
    base_score = score or default_score(memory_margin, memory_basis)
    rule = "certain" if memory_certain else "point"
    score_fn = _stoppable(admitted(base_score, rule))
    pf = _stoppable(prefilter or default_prefilter(memory_margin, memory_basis))
    sp = Space(plan, cfg)
    n_workers = workers or default_workers()
    memo = Memo(plan, score=score_fn, prefilter=pf, budget=None, time_limit_s=time_limit_s)
    own = knobs_of(plan)

    bnb = exhaustive is None and budget is None and llm_model is None and score_is_dry_run
    est: Optional[_Estimate] = None
    est_s = why_not = None
    if bnb:
        baseline = _score_baseline(plan, sp, memo, own)
        exhaustive = False
    else:
        est, baseline = _estimate_and_baseline(plan, sp, memo, own, exhaustive)
        est_s = est.exhaustive_s(n_workers)
        exhaustive, why_not = _search_kind(exhaustive, score_is_dry_run)
    if no_reference is None:
        warnings.extend(_baseline_warnings(baseline, memory_certain))

    certificate = None
    # branch and bound counts its space exactly (its certificate bounds memory itself: no pre-filter count)
    legal, exact = (len(sp), True) if est is None else (est.legal, est.exact)
    prog = None
    if bnb:
        if executor is None and workers is not None and workers > 1:
            from primus_launch.executor import LocalProcesses

            executor = LocalProcesses(workers)
        certificate = _branch_and_bound(plan, sp, memo, own, baseline, memory_margin, max_work, progress, executor,
                                        memory_certain, start=t0)
    elif exhaustive:
        legal, exact, certificate, prog = _run_exhaustive(sp, memo, n_workers, baseline, warnings, progress=progress,
                                                          executor=executor, time_limit_s=time_limit_s, start=t0)
    else:
        legal, exact, prog = _run_planner(
            plan, sp, memo, own, baseline, warnings, legal=(legal, exact),
            budget=budget if budget is not None else max(20, min(DEFAULT_MAX_BUDGET, math.floor(0.1 * est.legal))),
            progress=progress, llm=(llm_model, llm_rounds, llm_timeout_s), time_limit_s=time_limit_s, start=t0)
    if prog is not None:
        prog.close(memo)

    # the best: fastest that fits; ties by the space's order (the recipe's own values first)
    fitting, rule, baseline = _admitted_fitting(memo, own, baseline, rule, warnings)
    bk, tie_note = _fastest_fitting(memo, sp, fitting, baseline, no_reference)
    best_plan, best = _answer(plan, memo, own, fitting, bk, baseline, tie_note=tie_note, no_reference=no_reference,
                              certificate=certificate, warnings=warnings)
    for w in warnings if echo_warnings and (bk is not None or baseline.memory.fits) else []:  # else kept in the result's
        print(f"primus-launch tune: warning: {w}", file=sys.stderr)
    top, same_runs = _top_table(plan, memo, rule, best_plan, top_n)
    res = TuneResult(
        best_plan=best_plan, best=best, baseline=baseline,
        gain=0.0 if no_reference else baseline.iteration_time_s / best.iteration_time_s - 1.0,
        no_reference=no_reference,
        top=top, trials=memo.trials, space_size=len(sp), legal_candidates=legal, legal_exact=exact,
        scored=memo.scored, rejected=sum(1 for t in memo.trials if t.status == "rejected"),
        elapsed_s=time.monotonic() - t0, exhaustive=bool(exhaustive), llm_model=llm_model,
        space=cfg.describe(), warnings=warnings,
        search="branch-and-bound" if bnb else "exhaustive" if exhaustive else "planner",
        certificate=certificate, allowed=sorted(cfg.allow), searched_knobs=searched_knobs(plan, cfg),
        workers=executor.workers if executor is not None else n_workers if exhaustive else 1,
        executor=executor.describe() if executor is not None else None,
        exhaustive_estimate_s=est_s, search_note=why_not, memory_certain=memory_certain, tie_note=tie_note,
        same_runs=same_runs, memory_rule=rule, memory_rule_text=RULE_TEXT[rule])
    _rank_bands(res)
    if training_tokens is not None:
        from primus_launch.projection.training_run import training_run

        res.training_run = {"original": training_run(baseline, training_tokens, gpu_hour_price),
                            "best": training_run(best, training_tokens, gpu_hour_price)}
    return res


def _check_tune_args(memory_margin: float, memory_basis: str, budget: Optional[int], workers: Optional[int],
                     max_work: Optional[int]) -> None:
    """The numeric and named arguments of :func:`tune` checked: a one-line :class:`PlanError` naming the field,
    the value and what is allowed (the memory verdict's two by ``projection.api.check_memory_args``, as ``project``)."""
    from primus_launch.projection.api import check_memory_args

    check_memory_args(memory_margin, memory_basis)
    if budget is not None and budget < 1:
        raise PlanError("budget", budget, "at least 1 scored candidate")
    if workers is not None and workers < 1:
        raise PlanError("workers", workers, "at least 1 process")
    if max_work is not None and max_work < 1:
        raise PlanError("max_work", max_work, "at least 1 work unit")


def _estimate_and_baseline(plan: Plan, sp: Space, memo: Memo, own: Knobs,
                           exhaustive: Optional[bool]) -> tuple[_Estimate, ProjectionResult]:
    """The planner's and the brute force's first step: the space's size and cost from a stride sample (exact,
    every candidate pre-filtered, when the planner runs on a space of at most :data:`EXACT_COUNT_LIMIT`), then
    the recipe's own plan scored (:func:`_score_baseline`), its time the first sample of the scoring cost."""
    est = _Estimate(sp, memo, EXACT_COUNT_LIMIT if exhaustive is False and len(sp) <= EXACT_COUNT_LIMIT
                    else SAMPLE_SIZE)
    tb = time.perf_counter()
    baseline = _score_baseline(plan, sp, memo, own)
    est.time_scoring(sp, memo, time.perf_counter() - tb)
    return est, baseline


def _search_kind(exhaustive: Optional[bool], score_is_dry_run: bool) -> tuple[bool, Optional[str]]:
    """(brute force or not, why there is no certificate) of a search that is not the branch and bound:
    ``exhaustive`` None runs the planner (a budget, a language model or a score other than the dry-run's
    asked for it); the brute force runs to its end unless ``--time-limit`` stops it (no load-dependent
    cut-off)."""
    if exhaustive is None:
        return False, ("the planner searched: a scoring budget or a language model was given" if score_is_dry_run
                       else "the planner searched: the branch and bound's bounds are of the dry-run projection")
    return exhaustive, None if exhaustive else "the planner searched, as asked"


def _baseline_warnings(baseline: Optional[ProjectionResult], memory_certain: bool) -> list[str]:
    """The warning (none, or one) that the recipe's own plan does not fit or is tight in memory: the gain is
    relative to it anyway."""
    if baseline is None or baseline.memory.fits:
        return []
    return [("the original plan is tight in memory (its peak's error band holds the capacity), kept out "
             "by --memory-certain" if memory_certain else
             "the original plan's point estimate of its peak is over the usable capacity (tight: more "
             "likely to run out of memory than not)") + "; gain is relative to it anyway"
            if baseline.memory.verdict == "tight" else
            "the original plan does not fit in memory by the projection; gain is relative to it anyway"]


def _run_exhaustive(sp: Space, memo: Memo, n_workers: int, baseline: ProjectionResult, warnings: list[str], *,
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


def _run_planner(plan: Plan, sp: Space, memo: Memo, own: Knobs, baseline: ProjectionResult, warnings: list[str], *,
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


def _admitted_fitting(memo: Memo, own: Knobs, baseline: ProjectionResult, rule: str,
                      warnings: list[str]) -> tuple[list[Knobs], str, ProjectionResult]:
    """(the scored knobs that fit, the memory rule, the baseline) once the search is over: under the ``point``
    rule with no plan fitting, the recipe's own neither, and a ``tight`` one among them, the ``band`` rule
    (:func:`_band_rule`) re-admits the tight plans, the baseline too, and drops the point-estimate warning."""
    fitting = [k for k, r in memo.results.items() if r.memory.fits]
    if not fitting and not baseline.memory.fits and rule == "point" and (
            baseline.memory.verdict == "tight" or any(r.memory.verdict == "tight" for r in memo.results.values())):
        rule = _band_rule(memo, warnings)
        warnings[:] = [w for w in warnings if not w.startswith("the original plan's point estimate")]
        baseline = memo.results.get(own, readmitted(baseline)) if baseline.memory.verdict == "tight" else baseline
        fitting = [k for k, r in memo.results.items() if r.memory.fits]
    return fitting, rule, baseline


def _fastest_fitting(memo: Memo, sp: Space, fitting: list[Knobs], baseline: ProjectionResult,
                     no_reference: Optional[str]) -> tuple[Optional[Knobs], Optional[str]]:
    """(the fastest fitting knobs, the tie-break's note): ties in time by the space's order (the recipe's own
    values first); one that ties the recipe's own plan goes through :func:`_tie_break` (not with
    ``no_reference``)."""
    order = {k: (sp.index(k) if sp.index(k) is not None else -1) for k in fitting}
    bk = min(fitting, key=lambda k: (memo.results[k].iteration_time_s, order[k]), default=None)
    tie_note = None
    if bk is not None and baseline.memory.fits and memo.results[bk].iteration_time_s == baseline.iteration_time_s \
            and no_reference is None:
        bk, tie_note = _tie_break(baseline, {k: memo.results[k] for k in fitting}, order)
    return bk, tie_note


def _answer(plan: Plan, memo: Memo, own: Knobs, fitting: list[Knobs], bk: Optional[Knobs],
            baseline: ProjectionResult, *, tie_note: Optional[str], no_reference: Optional[str],
            certificate: Optional[Certificate], warnings: list[str]) -> tuple[Plan, ProjectionResult]:
    """(best plan, its projection): the fastest fitting plan ``bk`` where it beats the recipe's own (or that
    does not fit, or the tie-break chose it, or there is no reference), else the recipe's own plan, with a
    warning where no plan that fits was found or none fits at all."""
    if bk is not None and (not baseline.memory.fits or memo.results[bk].iteration_time_s < baseline.iteration_time_s
                           or tie_note is not None or no_reference is not None):
        return validated(apply_knobs(plan, bk)), memo.results[bk]
    if bk is None and baseline.memory.fits:
        # said only where it is so: the original kept as the fastest of several fitting plans (the tie-break
        # returns no plan) or as proven best (every other plan bounded out) is the answer, not a failure
        if not any(k != own for k in fitting) and not (certificate is not None and certificate.certified):
            # stopped at the work limit with plans open, "no candidate ... found" read as "none exists" (user12)
            stopped = (f" before the work limit stopped the search ({certificate.open:,} plans open: raise "
                       "--max-work)" if certificate is not None and certificate.open else "")
            warnings.append(f"no candidate that fits was found{stopped}; the original plan is kept")
    elif bk is None:  # no answer at all: the caller says so (the CLI: one line, nothing written)
        warnings.append("no plan fits in memory" if no_reference else
                        "no plan fits in memory, the recipe's own neither")
    return plan, baseline


def _top_table(plan: Plan, memo: Memo, rule: str, best_plan: Plan, top_n: int) -> tuple[list[Trial], int]:
    """(the answer's table, the plans dropped from it as the same run): the scored plans the rule admits (under
    ``point`` the tight ones over the capacity too, marked), fastest first, ties in time with the chosen best
    first, the same runs collapsed (:func:`same_runs_collapsed`); where more tight-over-capacity rows than the
    table holds precede the answer, the answer takes the last row."""
    scored_fit = [t for t in memo.trials if t.status == "scored" and (t.fits or rule == "point" and t.verdict == "tight")]
    best_changes = plan_changes(plan, best_plan)
    ranked = sorted(scored_fit, key=lambda t: (t.iteration_time_s, t.changes != best_changes, t.index))
    top = same_runs_collapsed(plan, ranked, top_n)
    same_runs = len(ranked[:ranked.index(top[-1]) + 1]) - len(top) if top else 0
    answer = next((t for t in ranked if t.changes == best_changes), None)
    if top and answer is not None and answer not in top:
        top = top[:-1] + [answer]
    return top, same_runs


def _band_rule(memo: Memo, warnings: list[str]) -> str:
    """No plan's point estimate fits (the ``point`` rule admitted none): every ``tight`` result and trial
    re-admitted (:func:`memory_rule.readmitted`), the ``band`` rule, said in a warning."""
    for k, r in memo.results.items():
        memo.results[k] = readmitted(r)
    for t in memo.trials:
        if t.status == "scored" and t.verdict == "tight":
            t.fits, t.reason = True, None
    warnings.append("no plan's point estimate of its peak fits the usable capacity: the best is the fastest tight "
                    "plan, more likely to run out of memory than not")
    return "band"


#: without a memory error band, a tied plan's peak must be this fraction below the original's to replace it
TIE_MEMORY_FRACTION = 0.10


def materially_lower_peak(cand: ProjectionResult, orig: ProjectionResult) -> bool:
    """Whether ``cand``'s peak memory is lower than ``orig``'s by more than the projection can tell apart:
    with both memory error bands (``MemoryReport.band``, the measured band of scripts/validate_memory.py),
    ``cand``'s band top lies below ``orig``'s band bottom (the ranges do not overlap); without them, the
    point peak is more than :data:`TIE_MEMORY_FRACTION` lower.  A plan that is lower by that is strictly
    safer against an out-of-memory at the same projected time."""
    c, o = cand.memory, orig.memory
    if c.band is not None and o.band is not None and c.band.high_bytes and o.band.low_bytes:
        return c.band.high_bytes < o.band.low_bytes
    return c.peak_bytes_per_gpu < (1.0 - TIE_MEMORY_FRACTION) * o.peak_bytes_per_gpu


def _tie_break(baseline: ProjectionResult, fitting: dict, order: dict) -> tuple[Optional[Knobs], Optional[str]]:
    """The tie-break when the fastest plans found project the same iteration time as the recipe's own
    (exactly equal: the projection is deterministic, so equal times are the same modelled cost): the
    original is kept (``(None, None)``: no change for nothing) unless a tied plan has a materially lower
    peak (:func:`materially_lower_peak`); then the tied plan of lowest peak (ties: the space's order),
    and a note saying why it was chosen."""
    t = baseline.iteration_time_s
    tied = [k for k, r in fitting.items() if r.iteration_time_s == t]
    k = min(tied, key=lambda k: (fitting[k].memory.peak_bytes_per_gpu, order[k]), default=None)
    if k is None or not materially_lower_peak(fitting[k], baseline):
        return None, None
    gib = 2 ** 30
    saved = (baseline.memory.peak_bytes_per_gpu - fitting[k].memory.peak_bytes_per_gpu) / gib
    return k, (f"same projected time as the original, {saved:.1f} GiB lower peak per GPU "
               f"({fitting[k].memory.peak_bytes_per_gpu / gib:.1f} vs {baseline.memory.peak_bytes_per_gpu / gib:.1f}"
               " GiB, beyond the memory error band): chosen as the safer plan")


def _rank_bands(res: TuneResult) -> None:
    """Which top plans the model cannot rank apart (issue 28: the tuner ranks by the point estimate and says
    when the top plans lie inside one another's bands): ``res.inside_best_band`` and ``res.gain_inside_band``
    from each projection's error band (:func:`projection.band.ranges_overlap`: the expected ranges overlap,
    so either run could be the faster)."""
    from primus_launch.projection.band import bands_overlap, ranges_overlap

    one = best_rank(res.top)   # the best's row (rows over the capacity may precede it)
    first = res.top[one - 1] if one else None
    if first is not None and first.iteration_band_s is not None:
        res.inside_best_band = [k for k, t in enumerate(res.top, 1)
                                if t is not first and t.iteration_band_s is not None
                                and ranges_overlap(first.iteration_time_s, first.iteration_band_s,
                                                   t.iteration_time_s, t.iteration_band_s)]
    b, o = res.best, res.baseline
    if b.band is not None and o.band is not None and res.best_plan != o.plan and not res.no_reference:
        res.gain_inside_band = bands_overlap(b.band, b.iteration_time_s, o.band, o.iteration_time_s)


#: knobs that change nothing without data-parallel communication (DP x CP of 1, and expert DP of 1): the
#: distributed optimizer shards over one rank, no gradient or parameter crosses a DP group to overlap
INERT_AT_DP1 = frozenset({"parallel.dp_sharding", "training.overlap_grad_reduce", "training.overlap_param_gather"})


def _no_dp_comm(plan: Plan, changes: dict) -> bool:
    """Whether ``plan`` with ``changes`` (a trial's dotted fields) has DP x CP of 1 and expert DP of 1."""
    p = plan.parallel
    tp, cp, pp, ep = (changes.get(f"parallel.{k}", getattr(p, k)) for k in ("tp", "cp", "pp", "ep"))
    etp = changes.get("parallel.etp", p.etp) or tp
    world = plan.world_size
    return world == tp * cp * pp and (not plan.model.is_moe or world == etp * ep * pp)


def same_runs_collapsed(plan: Plan, ranked: list[Trial], n: int) -> list[Trial]:
    """The first ``n`` of ``ranked`` with the plans that are the same run dropped: equal projected figures
    (iteration time, tokens/s, peak memory) and changes that differ only in knobs inert without
    data-parallel communication (:data:`INERT_AT_DP1`, at DP x CP = 1): the first of each such group stays."""
    out: list[Trial] = []
    for t in ranked:
        same = False
        for u in out:
            if (t.iteration_time_s, t.tokens_per_sec_per_gpu, t.peak_memory_bytes) != \
                    (u.iteration_time_s, u.tokens_per_sec_per_gpu, u.peak_memory_bytes):
                continue
            keys = {k for k in set(t.changes) | set(u.changes) if t.changes.get(k) != u.changes.get(k)}
            if keys <= INERT_AT_DP1 and _no_dp_comm(plan, t.changes) and _no_dp_comm(plan, u.changes):
                same = True
                break
        if not same:
            out.append(t)
            if len(out) == n:
                break
    return out


def _branch_and_bound(plan: Plan, sp: Space, memo: Memo, own: Knobs, baseline: ProjectionResult,
                      memory_margin: float, max_work: Optional[int], progress: bool,
                      executor: Optional["Executor"] = None, memory_certain: bool = False,
                      start: Optional[float] = None) -> Certificate:
    """Run the certified search (``branch_bound.py``) from the recipe's own plan as the incumbent
    (when it fits), its expansions computed ahead on ``executor``'s workers when one is given; its
    scored plans go into ``memo`` as trials (source ``branch-and-bound``)."""
    from primus_launch.tuner.branch_bound import DEFAULT_MAX_WORK, BranchBound, Incumbent, certificate_text

    own_i = sp.index(own)
    inc = Incumbent()
    if baseline.memory.fits:
        inc = Incumbent(baseline.iteration_time_s, own_i if own_i is not None else -1)
    bar = None
    if progress:
        from primus_launch.tuner.progress import Progress

        bar = Progress(total=len(sp), baseline_s=baseline.iteration_time_s, unit="plans", start=start)

    def tick(done: int, total: int, best_s: float) -> None:
        if bar is not None:
            bar.advance_to(done, best_s, force=done >= total)

    bb = BranchBound(plan, sp, score=memo.score_fn, prefilter=memo.prefilter_fn, memory_margin=memory_margin,
                     memory_certain=memory_certain)
    try:
        # the baseline is one of the space's plans, scored already: the search counts it once among the scored
        seed = (own_i, memo.results[own]) if own_i is not None and own in memo.results else None
        limit = DEFAULT_MAX_WORK if max_work is None else max_work
        out = bb.run(inc, max_work=limit, progress=tick, executor=executor, seed=seed,
                     warm=_warm_start(plan, sp, memo, own), warm_at=int(WARM_AT * limit))
    finally:
        if bar is not None:
            bar.close()
    rec = Engine(plan, [], memo=memo)
    for i, why in out.rejected:
        k = sp[i]
        memo.reasons[k] = why
        memo.rejected_seen.add(k)
        rec.record(apply_knobs(plan, k), "branch-and-bound", reason=why)
    for i, r in sorted(out.scored, key=lambda x: x[0]):
        k = sp[i]
        if k in memo.results:
            continue
        memo.results[k] = r
        memo.scored += 1
        rec.record(apply_knobs(plan, k), "branch-and-bound", result=r)
    cert = out.certificate
    if cert.scored != memo.scored:   # the recipe's own plan lies outside the space: scored too, once
        cert.scored = memo.scored
        text = certificate_text(cert, memory_certain)
        cert.text = text[:-1] + "; the recipe's own plan, outside the space, among the scored)" if cert.certified else text
    return cert


#: the branch and bound's warm start (``_warm_start``) runs when this fraction of its work limit is spent
WARM_AT = 0.25
#: the scorings a warm start may spend
WARM_SCORINGS = 48
#: the work a warm start may spend at least (units of ``branch_bound.WORK_*``; else the search's own so far):
#: about one planner round's sweeps around the recipe's plan
WARM_MIN_WORK = 2_000


def _warm_start(plan: Plan, sp: Space, memo: Memo, own: Knobs) -> Callable[[int, list, int], tuple[list, int]]:
    """The branch and bound's warm start (``branch_bound.BranchBound.run``'s ``warm``): a search whose work
    reached :data:`WARM_AT` of its limit without a plan better than the recipe's own (or, that kept out, any) is pricing the memory of many structures below its incumbent (or,
    with none, scoring plans none of which the memory rule admits; tune13: DeepSeek-V3 FP8 on 1024 H100 with
    ``--allow fp8,optimizer-dtypes --memory-certain`` priced 16,000 memory groups, all out, and stopped with
    its recipe's plan 6 % slower than one the planner finds in 87 scorings).  The deterministic planner
    (``planner.py``: single-axis sweeps and local search around the incumbent, the recipe's plan without
    one; :func:`planner.hierarchical` for spaces too big to index) runs on a memo of its own, knowing
    what the search scored, for at most :data:`WARM_SCORINGS` scorings and ``cap`` units of work (the search's
    own so far, at least :data:`WARM_MIN_WORK`; counted apart from the search's limit); it returns what it scored and its work (scorings and pre-filter
    calls, ``branch_bound.WORK_*``).  Sound for the certificate: a plan it
    finds is a scored plan of the space, and the search only bounds by a scored plan's time."""
    from primus_launch.tuner.branch_bound import WORK_PREFILTER, WORK_SCORE

    def warm(inc_idx: int, scored: list, cap: int) -> tuple[list, int]:
        calls = [0]
        cap = max(cap, WARM_MIN_WORK)

        def pf(p: Plan) -> Optional[str]:   # the pre-filter, counted; past the work cap every plan is out
            if calls[0] * WORK_PREFILTER + tmp.scored * WORK_SCORE >= cap:
                tmp.budget = tmp.scored   # and no more scoring: the planner stops at its next one
                return "the warm start's work is spent"
            calls[0] += 1
            return memo.prefilter_fn(p)

        tmp = Memo(plan, score=memo.score_fn, prefilter=pf, budget=WARM_SCORINGS, time_limit_s=None)
        for i, r in scored:
            tmp.results[sp[i]] = r
            tmp.reasons[sp[i]] = None
        before = set(tmp.results)
        start = sp[inc_idx] if inc_idx >= 0 else own
        try:
            if len(sp) <= INDEX_LIMIT:
                Planner(Engine(plan, list(sp), memo=tmp)).run(start)
            else:
                hierarchical(sp, tmp, start)
        except Exhausted:
            pass
        new = [(sp.index(k), r) for k, r in tmp.results.items() if k not in before and sp.index(k) is not None]
        return new, tmp.scored * WORK_SCORE + calls[0] * WORK_PREFILTER

    return warm


def _score_baseline(plan: Plan, sp: Space, memo: Memo, own: Knobs) -> ProjectionResult:
    """The user's plan as given, scored first (even when the pre-filter would reject it) and
    recorded as the ``seed`` trial."""
    if sp.index(own) is not None:
        if own not in memo.reasons:
            try:
                memo.reasons[own] = memo.prefilter_fn(apply_knobs(plan, own))
            except Exception as e:
                memo.reasons[own] = f"pre-filter error: {type(e).__name__}: {e}"
        if memo.reasons[own] is None:
            deadline, memo.deadline = memo.deadline, None  # the baseline is scored whatever the limit
            try:
                Engine(plan, [own], memo=memo).evaluate(0, "seed")
            finally:
                memo.deadline = deadline
            if own in memo.results:
                return memo.results[own]
    res = memo.score_fn(plan)
    memo.scored += 1
    Engine(plan, [], memo=memo).record(plan, "seed", result=res)
    return res
