"""The answer of a tune, chosen among its scored plans: the plans the memory rule admits (the ``band`` rule where
no point estimate fits), the fastest of them (ties in time by the space's order; a tie with the recipe's own plan
broken by a materially lower peak, :func:`materially_lower_peak`), the best plan or the recipe's own kept, the
top-N table with the same runs collapsed (:func:`same_runs_collapsed`) and which top plans the model's error
bands cannot rank apart (:func:`rank_bands`)."""

from __future__ import annotations

from typing import Optional

from primus_launch.plan import Plan
from primus_launch.projection.result import ProjectionResult
from primus_launch.tuner.engine import Memo, plan_changes
from primus_launch.tuner.memory_rule import readmitted
from primus_launch.tuner.result import Certificate, Trial, TuneResult, best_rank
from primus_launch.tuner.space import Knobs, Space, apply_knobs, validated


def admitted_fitting(memo: Memo, own: Knobs, baseline: ProjectionResult, rule: str,
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


def fastest_fitting(memo: Memo, sp: Space, fitting: list[Knobs], baseline: ProjectionResult,
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


def chosen_plan(plan: Plan, memo: Memo, own: Knobs, fitting: list[Knobs], bk: Optional[Knobs],
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


def top_table(plan: Plan, memo: Memo, rule: str, best_plan: Plan, top_n: int) -> tuple[list[Trial], int]:
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


def rank_bands(res: TuneResult) -> None:
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
