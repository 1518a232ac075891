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
  once by the planner (``certified_run.warm_start``: a better incumbent to bound by, found in a few dozen scorings);
- **exhaustive** (``exhaustive.py``, ``exhaustive=True``): every candidate pre-filtered and every legal
  one scored over all cores (a brute force: the check of the branch and bound);
- **planner** (``planner.py``, ``exhaustive=False``, a ``budget`` or an LLM), with optional LLM rounds
  (``llm.py``): the whole space indexed when it has at most :data:`planner_and_sweep.INDEX_LIMIT` candidates,
  else block-coordinate rounds over sub-spaces around the incumbent (:func:`planner.hierarchical`).

The steps live in modules of their own: the recipe's plan scored first (``seed.py``), the planner's and brute
force's runs (``planner_and_sweep.py``), the branch and bound's (``certified_run.py``) and the choice of the
answer among the scored plans with its top-N table (``answer.py``).
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
from primus_launch.tuner.answer import admitted_fitting, chosen_plan, fastest_fitting, rank_bands, top_table
from primus_launch.tuner.certified_run import run_branch_and_bound
from primus_launch.tuner.engine import Memo, Prefilter
from primus_launch.tuner.memory_rule import RULE_TEXT, admitted
from primus_launch.tuner.planner_and_sweep import (DEFAULT_MAX_BUDGET, SpaceEstimate, estimate_and_baseline,
                                                   run_exhaustive, run_planner)
from primus_launch.tuner.result import TuneResult
from primus_launch.tuner.seed import baseline_warnings, score_baseline
from primus_launch.tuner.space import Space, SpaceConfig, knobs_of, searched_knobs

if TYPE_CHECKING:
    from primus_launch.executor import Executor


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
    ``planner_and_sweep.DEFAULT_MAX_BUDGET``); ``time_limit_s`` stops the planner or the brute force (never the branch
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
    est: Optional[SpaceEstimate] = None
    est_s = why_not = None
    if bnb:
        baseline = score_baseline(plan, sp, memo, own)
        exhaustive = False
    else:
        est, baseline = estimate_and_baseline(plan, sp, memo, own, exhaustive)
        est_s = est.exhaustive_s(n_workers)
        exhaustive, why_not = _search_kind(exhaustive, score_is_dry_run)
    if no_reference is None:
        warnings.extend(baseline_warnings(baseline, memory_certain))

    certificate = None
    # branch and bound counts its space exactly (its certificate bounds memory itself: no pre-filter count)
    legal, exact = (len(sp), True) if est is None else (est.legal, est.exact)
    prog = None
    if bnb:
        if executor is None and workers is not None and workers > 1:
            from primus_launch.executor import LocalProcesses

            executor = LocalProcesses(workers)
        certificate = run_branch_and_bound(plan, sp, memo, own, baseline, memory_margin, max_work, progress, executor,
                                        memory_certain, start=t0)
    elif exhaustive:
        legal, exact, certificate, prog = run_exhaustive(sp, memo, n_workers, baseline, warnings, progress=progress,
                                                          executor=executor, time_limit_s=time_limit_s, start=t0)
    else:
        legal, exact, prog = run_planner(
            plan, sp, memo, own, baseline, warnings, legal=(legal, exact),
            budget=budget if budget is not None else max(20, min(DEFAULT_MAX_BUDGET, math.floor(0.1 * est.legal))),
            progress=progress, llm=(llm_model, llm_rounds, llm_timeout_s), time_limit_s=time_limit_s, start=t0)
    if prog is not None:
        prog.close(memo)

    # the best: fastest that fits; ties by the space's order (the recipe's own values first)
    fitting, rule, baseline = admitted_fitting(memo, own, baseline, rule, warnings)
    bk, tie_note = fastest_fitting(memo, sp, fitting, baseline, no_reference)
    best_plan, best = chosen_plan(plan, memo, own, fitting, bk, baseline, tie_note=tie_note, no_reference=no_reference,
                              certificate=certificate, warnings=warnings)
    for w in warnings if echo_warnings and (bk is not None or baseline.memory.fits) else []:  # else kept in the result's
        print(f"primus-launch tune: warning: {w}", file=sys.stderr)
    top, same_runs = top_table(plan, memo, rule, best_plan, top_n)
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
    rank_bands(res)
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


def _search_kind(exhaustive: Optional[bool], score_is_dry_run: bool) -> tuple[bool, Optional[str]]:
    """(brute force or not, why there is no certificate) of a search that is not the branch and bound:
    ``exhaustive`` None runs the planner (a budget, a language model or a score other than the dry-run's
    asked for it); the brute force runs to its end unless ``--time-limit`` stops it (no load-dependent
    cut-off)."""
    if exhaustive is None:
        return False, ("the planner searched: a scoring budget or a language model was given" if score_is_dry_run
                       else "the planner searched: the branch and bound's bounds are of the dry-run projection")
    return exhaustive, None if exhaustive else "the planner searched, as asked"


