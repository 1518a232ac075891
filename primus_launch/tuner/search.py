"""The tuner's driver: ``tune(plan) -> TuneResult``.

Search space (``space.py``), pre-filter (``primus_launch.projection.legality.prefilter``:
divisibility + memory; never scored when it rejects), scoring oracle (the dry-run projection by
default, any ``Callable[[Plan], ProjectionResult]`` otherwise), seed planner (``planner.py``),
optional LLM rounds (``llm.py``), or an exhaustive sweep of the whole space.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Callable, Optional

from primus_launch.fileio import atomic_write_text
from primus_launch.plan import Plan, PlanError
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.engine import Engine, Exhausted, Prefilter, plan_changes
from primus_launch.tuner.planner import Planner
from primus_launch.tuner.result import TuneResult
from primus_launch.tuner.space import SpaceConfig, apply_knobs, enumerate_space, knobs_of, validated

EXACT_COUNT_LIMIT = 40_000   # pre-filter the whole space up to this many candidates, else sample
SAMPLE_SIZE = 4_000
DEFAULT_MAX_BUDGET = 1_000   # default budget: 10% of the legal space, at most this many


def default_score(memory_margin: float, memory_basis: str = "reserved") -> Callable[[Plan], ProjectionResult]:
    from primus_launch.projection.dryrun import project_dry_run

    def score(plan: Plan) -> ProjectionResult:
        result = project_dry_run(plan, memory_margin=memory_margin, record_timeline=False)
        if memory_basis != result.memory.memory_basis:
            from primus_launch.projection.memory import estimate_memory

            result = result.model_copy(update={"memory": estimate_memory(plan, margin=memory_margin,
                                                                         memory_basis=memory_basis)})
        return result

    return score


def default_prefilter(memory_margin: float, memory_basis: str = "reserved") -> Prefilter:
    """The divisibility + memory pre-filter of :mod:`primus_launch.projection.legality` on ``memory_basis``."""
    from primus_launch.projection.legality import prefilter

    def pf(plan: Plan) -> Optional[str]:
        return prefilter(plan, margin=memory_margin, memory_basis=memory_basis)

    return pf


def _count_legal(engine: Engine, exhaustive: bool) -> tuple[int, bool]:
    n = len(engine.space)
    if exhaustive or n <= EXACT_COUNT_LIMIT:
        return int(engine.prefilter_all().sum()), True
    stride = n / SAMPLE_SIZE
    idx = sorted({int(k * stride) for k in range(SAMPLE_SIZE)})
    ok = sum(engine.is_legal(i) for i in idx)
    return int(round(n * ok / len(idx))), False


def _write_json_atomic(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=1))


def tune(
    plan: Plan,
    *,
    score: Optional[Callable[[Plan], ProjectionResult]] = None,
    budget: Optional[int] = None,
    time_limit_s: Optional[float] = None,
    exhaustive: bool = False,
    llm_model: Optional[str] = None,
    memory_margin: float = 0.05,
    memory_basis: str = "reserved",
    progress: bool = False,
    log_path: Optional[Path] = None,
    top_n: int = 10,
    space: Optional[SpaceConfig] = None,
    prefilter: Optional[Prefilter] = None,
    llm_rounds: int = 3,
    llm_timeout_s: float = 5.0,
) -> TuneResult:
    """Search parallel configurations of ``plan`` (same model, cluster and global batch) for the
    shortest projected iteration time among those that fit in memory.

    ``space`` defaults to :class:`SpaceConfig` for the planner and to
    :meth:`SpaceConfig.restricted` for ``exhaustive`` (which scores every legal candidate).
    ``budget`` caps scored candidates (default: 10% of the legal space, at most
    ``DEFAULT_MAX_BUDGET``); ``time_limit_s`` stops the search early.
    """
    t0 = time.monotonic()
    if not 0.0 <= memory_margin < 1.0:
        raise PlanError("memory_margin", memory_margin, "a fraction in [0, 1)")
    if budget is not None and budget < 1:
        raise PlanError("budget", budget, "at least 1 scored candidate")
    warnings: list[str] = []
    if memory_basis not in ("reserved", "allocated"):
        raise PlanError("memory_basis", memory_basis, "reserved or allocated")
    score_fn = score or default_score(memory_margin, memory_basis)
    pf = prefilter or default_prefilter(memory_margin, memory_basis)
    cfg = space or (SpaceConfig.restricted() if exhaustive else SpaceConfig())
    cands = list(enumerate_space(plan, cfg))
    prog = None
    engine = Engine(plan, cands, score=score_fn, prefilter=pf, budget=None, time_limit_s=time_limit_s)
    legal, exact = _count_legal(engine, exhaustive)
    if budget is None and not exhaustive:
        budget = max(20, min(DEFAULT_MAX_BUDGET, math.floor(0.1 * legal)))
    engine.budget = budget
    if progress:
        from primus_launch.tuner.progress import Progress

        prog = Progress(total=budget if budget is not None else legal)
        engine.progress = prog

    # baseline: the user's plan as given (scored even when the pre-filter would reject it)
    own = knobs_of(plan)
    own_i = engine.index.get(own)
    baseline: Optional[ProjectionResult] = None
    if own_i is not None and engine.is_legal(own_i):
        try:
            engine.evaluate(own_i, "seed")
        except Exhausted:
            pass
        baseline = engine.results.get(own_i)
    if baseline is None:
        baseline = score_fn(plan)
        engine.scored += 1
        engine.record(plan, "seed", result=baseline)
    if prog is not None:
        prog.baseline_s = baseline.iteration_time_s
    if not baseline.memory.fits:
        warnings.append("the original plan does not fit in memory by the projection; gain is relative to it anyway")

    advisor = None
    try:
        if exhaustive:
            for i in range(len(cands)):
                engine.evaluate(i, "exhaustive")
        else:
            if llm_model:
                from primus_launch.tuner.llm import LLMAdvisor

                advisor = LLMAdvisor(llm_model, engine, rounds=llm_rounds, timeout_s=llm_timeout_s)
            Planner(engine).run(own, between=advisor.run if advisor is not None else None)
    except Exhausted:
        if budget is not None and engine.scored >= budget:
            warnings.append(f"stopped at the budget of {budget} scored candidates")
        else:
            warnings.append(f"stopped at the time limit of {time_limit_s} s")
    if advisor is not None:
        warnings.extend(advisor.warnings)
    if prog is not None:
        prog.close(engine)

    bi = engine.best()
    if bi is not None and (not baseline.memory.fits or engine.time_of(bi) < baseline.iteration_time_s):
        best_plan = validated(apply_knobs(plan, cands[bi]))
        best = engine.results[bi]
    else:
        best_plan, best = plan, baseline
        if bi is None:
            warnings.append("no candidate that fits was found; the original plan is kept")
    for w in warnings:
        print(f"primus-launch tune: warning: {w}", file=sys.stderr)
    scored_fit = [t for t in engine.trials if t.status == "scored" and t.fits]
    # ties in time: the chosen best first (engine.best breaks ties by space order, not search order)
    best_changes = plan_changes(plan, best_plan)
    top = sorted(scored_fit, key=lambda t: (t.iteration_time_s, t.changes != best_changes, t.index))[:top_n]
    res = TuneResult(
        best_plan=best_plan, best=best, baseline=baseline,
        gain=baseline.iteration_time_s / best.iteration_time_s - 1.0,
        top=top, trials=engine.trials, space_size=len(cands), legal_candidates=legal, legal_exact=exact,
        scored=engine.scored, rejected=sum(1 for t in engine.trials if t.status == "rejected"),
        elapsed_s=time.monotonic() - t0, exhaustive=exhaustive, llm_model=llm_model,
        space=dict(cfg.__dict__), warnings=warnings)
    if log_path is not None:
        d = res.to_json_dict()
        d["original_plan"] = plan.model_dump(mode="json")
        _write_json_atomic(Path(log_path), d)
    return res


def render_tune_text(res: TuneResult) -> str:
    """The CLI's text for a tune: verdict, counts and the top-N table."""
    from tabulate import tabulate

    b, o = res.best, res.baseline
    lines = [
        f"original: {o.iteration_time_s:.3f} s/iter, {o.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
        f"MFU {100 * o.mfu:.1f} %, {o.memory.peak_bytes_per_gpu / 2**30:.1f} GiB "
        f"({'fits' if o.memory.fits else 'DOES NOT FIT'})",
        f"best:     {b.iteration_time_s:.3f} s/iter, {b.tokens_per_sec_per_gpu:,.0f} tokens/s/GPU, "
        f"MFU {100 * b.mfu:.1f} %, {b.memory.peak_bytes_per_gpu / 2**30:.1f} GiB "
        f"({'fits' if b.memory.fits else 'DOES NOT FIT'})",
        f"gain:     {100 * res.gain:+.1f} %",
        f"searched: {res.scored} scored of {res.legal_candidates:,} legal candidates"
        f"{'' if res.legal_exact else ' (estimated)'} ({100 * res.scored_fraction:.1f} %), "
        f"{res.rejected} rejected by the pre-filter, {res.elapsed_s:.1f} s",
    ]
    from primus_launch.tuner.engine import plan_changes

    changes = plan_changes(res.baseline.plan, res.best_plan)
    if changes:
        lines.append("changes:  " + ", ".join(f"{k}={v}" for k, v in changes.items()))
    rows = []
    for rank, t in enumerate(res.top, 1):
        ch = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in t.changes.items()) or "(original)"
        rows.append((rank, f"{t.iteration_time_s:.3f}", f"{t.tokens_per_sec_per_gpu:,.0f}", f"{100 * (t.mfu or 0):.1f}",
                     f"{(t.peak_memory_bytes or 0) / 2**30:.1f}", t.source, ch))
    out = "\n".join(lines)
    if rows:
        out += "\n\n" + tabulate(rows, headers=["#", "s/iter", "tok/s/GPU", "MFU %", "GiB", "source", "changes"],
                                 tablefmt="simple")
    for w in res.warnings:
        out += f"\nwarning: {w}"
    return out
