"""The tuner's search choice: the certified branch and bound by default (the brute force's best),
the same result for any number of worker processes, the memory basis in the pre-filter, and the
numerics-changing knobs only when allowed (and said so)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from tuner_helpers import small_dense_plan, small_moe_plan

from primus_launch.adapters import load_recipe
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.tuner.result import log_text
from primus_launch.tuner.search import default_prefilter, tune
from primus_launch.report.tune_text import render_tune_text
from primus_launch.tuner.space import Space, SpaceConfig, knobs_of

ROOT = Path(__file__).resolve().parents[1]
RESTRICTED = SpaceConfig.restricted()
# every axis of the restricted space at two values or more (the planner's pre-filter pass over it is the same code)
SMALL = SpaceConfig(max_cp=2, max_vpp=2, max_mbs=2, block_recompute_layers=(1,), max_dp_replicate_choices=2,
                    execution=False)


def _score(plan):
    return project_dry_run(plan, memory_margin=0.0)


def _key(res):
    return [(t.source, t.status, t.changes, t.iteration_time_s, t.reason) for t in res.trials]


def test_branch_and_bound_is_the_default_and_certifies_the_brute_force_best():
    plan = small_dense_plan()
    bb = tune(plan, space=RESTRICTED)
    assert bb.search == "branch-and-bound" and bb.certificate.certified
    c = bb.certificate
    assert c.text.startswith(f"best of all {c.plans:,} legal plans ({c.scored:,} scored, the rest bounded out")
    # scored counts the recipe's own plan (the baseline) once, also where it lies outside the space (tune11)
    own_in = Space(plan, RESTRICTED).index(knobs_of(plan)) is not None
    assert c.plans == bb.space_size and c.scored + c.bounded_time + c.bounded_memory == c.plans + (not own_in)
    assert c.scored == bb.scored and bb.legal_exact
    assert "best of all" in render_tune_text(bb)
    assert bb.to_log_dict()["certificate"]["certified"] is True
    ex = tune(plan, score=_score, space=RESTRICTED, exhaustive=True)
    assert ex.search == "exhaustive" and ex.certificate.certified and ex.legal_exact
    sp = Space(plan, RESTRICTED)
    n, own_in = len(sp), sp.index(knobs_of(plan)) is not None
    # every candidate looked at once; the recipe (the seed trial) scored apart when it is not in the space
    assert ex.space_size == n and len(ex.trials) == n + (not own_in) and ex.trials[0].source == "seed"
    assert ex.scored == ex.legal_candidates + (not own_in)
    fits = [t.iteration_time_s for t in ex.trials if t.status == "scored" and t.fits]
    assert ex.best.iteration_time_s == pytest.approx(min(fits), rel=1e-12)
    # the same best as the brute force, with fewer plans scored
    assert bb.best.iteration_time_s == pytest.approx(ex.best.iteration_time_s, rel=1e-9)
    assert bb.scored < ex.scored
    # the planner, asked for: no certificate
    res = tune(plan, score=_score, space=RESTRICTED, exhaustive=False)
    assert res.search == "planner" and res.certificate is None
    assert "no certificate" in render_tune_text(res)


def test_branch_and_bound_work_limit_is_a_count_not_a_time():
    """A tiny work limit stops the search at the same place on any machine: no certificate, the
    same trials and the same gap twice."""
    plan = small_moe_plan()
    a = tune(plan, space=RESTRICTED, max_work=30)
    b = tune(plan, space=RESTRICTED, max_work=30)
    assert not a.certificate.certified and a.certificate.open > 0 and "work limit" in a.certificate.text
    assert a.certificate.lower_bound_s <= a.best.iteration_time_s and a.certificate.gap >= 0
    assert _key(a) == _key(b) and a.certificate == b.certificate and a.best_plan == b.best_plan
    # expanded ahead on 2 local processes (primus_launch.executor) and replayed: the same stop, trials, gap
    c = tune(plan, space=RESTRICTED, max_work=30, workers=2)
    assert c.executor == "local processes (2 workers)"
    assert _key(c) == _key(a) and c.certificate == a.certificate and c.best_plan == a.best_plan


def test_exhaustive_result_does_not_depend_on_the_worker_count():
    plan = load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh")
    one = tune(plan, score=_score, space=RESTRICTED, exhaustive=True, workers=1)
    two = tune(plan, score=_score, space=RESTRICTED, exhaustive=True, workers=2)
    assert two.workers == 2 and one.workers == 1
    assert _key(one) == _key(two)
    assert one.best_plan == two.best_plan and one.certificate == two.certificate
    assert (one.scored, one.rejected, one.legal_candidates) == (two.scored, two.rejected, two.legal_candidates)


def test_memory_basis_reaches_the_prefilter_and_the_scores():
    """With a margin that puts the usable capacity between the two bases' error-band bottoms, the
    case-study reference fits on the allocated peak but not on the estimated reserved one."""
    from primus_launch.projection.memory.estimate import estimate_memory

    plan = load_recipe(ROOT / "recipes/megatron/mixtral_8x22b_mi355x_32gpu.sh")
    rep = estimate_memory(plan)
    mid = (rep.reserved_peak_bytes + rep.allocated_peak_bytes) / 2 * (1 + rep.band.low) + rep.outside_allocator_bytes
    margin = 1 - mid / rep.capacity_bytes
    assert default_prefilter(margin, "reserved")(plan) is not None
    assert default_prefilter(margin, "allocated")(plan) is None
    res = tune(plan, score=None, space=SMALL, memory_basis="allocated", memory_margin=margin, budget=3)
    # the verdict's (tight: the band's bottom fits; its point estimate over the usable capacity keeps it out of the
    # answer, tuner/memory_rule.py, so its ``fits`` is the rule's)
    assert res.baseline.memory.memory_basis == "allocated" and res.baseline.memory.verdict != "does not fit"
    assert res.trials[0].source == "seed" and res.trials[0].status == "scored"
    res = tune(plan, score=None, space=SMALL, memory_basis="reserved", memory_margin=margin, budget=3)
    assert not res.baseline.memory.fits and res.baseline.memory.verdict == "does not fit"


def test_numerics_knobs_need_allow_and_are_reported(tmp_path):
    plan = small_dense_plan()
    # TP up to 2 (the plan's own): 18,408 plans with fp8 allowed instead of 38,432, every knob family still there
    cfg = SpaceConfig(max_tp=2, max_mbs=1, max_cp=1, max_vpp=2, block_recompute_layers=())
    res = tune(plan, score=_score, space=cfg, exhaustive=False, budget=40)
    assert res.allowed == [] and not res.searched_knobs["fp8"] and res.searched_knobs["cuda_graph"]
    assert all("training.precision" not in t.changes for t in res.trials)
    assert "--allow fp8" in render_tune_text(res)
    res = tune(plan, score=_score, space=cfg, exhaustive=False, budget=40, allow=["fp8"])
    d = json.loads(log_text(res.to_log_dict(plan)))  # the CLI's --log (cli.py writes it)
    assert d["allowed"] == ["fp8"] and d["searched_knobs"]["fp8"] and not d["searched_knobs"]["moments"]
    assert d["space"]["allow"] == ["fp8"]
    with pytest.raises(Exception, match="allow"):
        tune(plan, score=_score, space=cfg, allow=["bogus"])


def test_cli_allow_and_search_flags(tmp_path, capsys):
    from primus_launch.cli import main

    recipe = ROOT / "recipes/megatron/tiny_gpt_cpu.sh"
    assert main(["--tune", str(recipe), "--dry-run", "--allow", "bogus"]) == 2
    assert "allow" in capsys.readouterr().err
    out = tmp_path / "t.sh"
    rc = main(["--tune", str(recipe), "--dry-run", "--planner", "--budget", "5", "--allow", "fp8",
               "--out", str(out), "--json"])
    d = json.loads(capsys.readouterr().out)
    assert rc == 0 and d["search"] == "planner" and d["allowed"] == ["fp8"] and out.exists()


def test_tight_plans_are_kept_marked_and_the_band_shown():
    """With a margin that puts the recipe's own peak inside its error band (verdict ``tight``), the
    tight plans stay candidates (the pre-filter rejects only 'does not fit'; the answer only where their point
    estimate fits), the branch and bound's
    best equals the brute force's under the same margin, and the top-N table marks them with their band."""
    from primus_launch.projection.hardware.gpus import get_gpu

    plan = small_dense_plan()
    band = project_dry_run(plan).memory.band
    cap = get_gpu(plan.cluster.gpu).hbm_bytes
    margin = 1.0 - (band.low_bytes + band.high_bytes) / 2 / cap
    own = project_dry_run(plan, memory_margin=margin)
    assert own.memory.verdict == "tight" and own.memory.fits
    bb = tune(plan, space=RESTRICTED, memory_margin=margin)
    ex = tune(plan, space=RESTRICTED, memory_margin=margin, exhaustive=True)
    assert bb.certificate.certified
    assert bb.best.iteration_time_s == pytest.approx(ex.best.iteration_time_s, rel=1e-9)
    tight = [t for t in ex.trials if t.verdict == "tight"]
    # candidates, scored; the answer's only where the point estimate fits (tuner/memory_rule.py "point")
    assert tight and all(t.fits == (not t.over_capacity) and t.peak_band_bytes[0] <= t.peak_memory_bytes
                         <= t.peak_band_bytes[1] for t in tight)
    assert bb.trials[0].source == "seed" and bb.trials[0].verdict == "tight"
    text = render_tune_text(bb)
    assert "GiB (band) verdict" in text and ("TIGHT" in text) == any(t.verdict == "tight" for t in bb.top)
    assert max(len(line) for line in text.splitlines()) <= 80  # the text answer's width


def test_expanded_ahead_with_memory_bounded_groups_matches_one_process():
    """Regression (bad-input campaign): a worker's expansion that meets a memory group out of memory
    counted it in a dict without ``bounded_memory`` (KeyError, exit 70 on ``--tune --workers 2``).
    Llama-3.1-8B's default space bounds 234 plans by memory in its 3 expansions: expanded ahead on 2
    local processes, the same certificate and answer as in one."""
    plan = load_recipe(ROOT / "recipes/megatron/llama3.1_8b.sh")
    one = tune(plan, workers=1)
    two = tune(plan, workers=2)
    assert two.executor == "local processes (2 workers)"
    assert one.certificate.bounded_memory > 0 and one.certificate.structs_expanded > 0
    assert two.certificate == one.certificate and two.best_plan == one.best_plan


def test_memory_certain_keeps_tight_plans_out_and_its_bound_stays_exact():
    """``--memory-certain`` (issue 27: the tuner keeps ``tight`` plans unless the user asks for
    certainty): at a margin that puts the recipe's own plan inside its peak's error band, the
    brute force with certainty answers the fastest ``fits`` plan of the plain brute force's trials,
    and the branch and bound (its memory floors held at the band's upper edge) certifies the same."""
    plan, margin, score = _tight_at_band_middle()

    ex = tune(plan, score=score, space=RESTRICTED, exhaustive=True, memory_margin=margin)
    sure, bb = _tight_certain_runs()
    scored = [t for t in ex.trials if t.status == "scored"]
    assert ex.baseline.memory.verdict == "tight"
    assert {"tight", "fits"} <= {t.verdict for t in scored}
    best_fits = min(t.iteration_time_s for t in scored if t.verdict == "fits")
    assert ex.best.iteration_time_s <= best_fits
    assert sure.best.memory.verdict == "fits" and sure.memory_certain
    assert sure.best.iteration_time_s == pytest.approx(best_fits, rel=1e-12)
    assert any("kept out by --memory-certain" in w for w in sure.warnings)
    assert bb.certificate.certified and all(t.verdict == "fits" for t in bb.top)
    assert bb.best.iteration_time_s == pytest.approx(best_fits, rel=1e-9)
    assert "(--memory-certain)" in render_tune_text(bb)
    assert ex.memory_rule == "point" and sure.memory_rule == "certain"
    assert "the best is the fastest plan whose point estimate fits" in " ".join(render_tune_text(ex).split()) \
        or ex.best.memory.verdict == "fits"


def test_top_plans_whose_time_bands_overlap_are_said_so():
    """Issue 28: the tuner ranks by the point estimate and says when the top plans lie inside one another's
    error bands.  Every scored trial carries its projection's iteration-time band (the brute force and the
    branch and bound alike); ``inside_best_band`` lists exactly the top rows whose band overlaps the best's
    (checked here against the ranges themselves), and the ``ranking:`` line names them."""
    from primus_launch.projection.band import ranges_overlap

    plan = small_dense_plan()
    for res in (tune(plan, space=RESTRICTED), tune(plan, space=RESTRICTED, exhaustive=True)):
        scored = [t for t in res.trials if t.status == "scored"]
        assert scored and all(t.iteration_band_s is not None for t in scored)
        # the band is the projection's own (the run's expected seconds around the point): the best's and the
        # original's trials against their ProjectionResults
        seed = next(t for t in res.trials if t.source == "seed")
        first = res.top[0]
        for t, r in ((first, res.best), (seed, res.baseline)):
            assert t.iteration_time_s == pytest.approx(r.iteration_time_s, rel=1e-12)
            assert t.iteration_band_s == pytest.approx(r.band.iteration_range(r.iteration_time_s), rel=1e-12)
        want = [k for k, t in enumerate(res.top[1:], 2)
                if max(first.iteration_band_s[0], t.iteration_band_s[0]) <= min(first.iteration_band_s[1],
                                                                                t.iteration_band_s[1])]
        assert res.inside_best_band == want
        text = render_tune_text(res)
        assert ("ranking:" in text) == bool(want or res.gain_inside_band)
        if want:
            assert "overlap in their error bands" in text and max(len(line) for line in text.splitlines()) <= 80
            b = res.best.band  # the band printed is the best's, and says so
            lo, hi = first.iteration_band_s  # in seconds, as the project answer gives it (user12)
            assert f"(#1: expected {lo:.3f} .. {hi:.3f} s)" in " ".join(text.split())
        o = res.baseline
        assert res.gain_inside_band == (None if res.best_plan == o.plan else ranges_overlap(
            res.best.iteration_time_s, res.best.band.iteration_range(res.best.iteration_time_s),
            o.iteration_time_s, o.band.iteration_range(o.iteration_time_s)))
    assert res.to_json_dict()["inside_best_band"] == want


def test_work_limit_stop_without_a_fitting_candidate_says_the_search_stopped():
    """user12: a tune the work limit stopped (DeepSeek-V3 FP8 with --memory-certain: 1 scored, 1.5G plans open)
    warned "no candidate that fits was found", read as "none exists".  Every candidate but the recipe's own is made
    not to fit here; stopped with plans open, the warning says the search stopped and how to go further."""
    base = small_moe_plan()

    def score(p):
        r = _score(p)
        if p == base:
            return r
        return r.model_copy(update={"memory": r.memory.model_copy(update={"verdict": "does not fit", "fits": False})})

    res = tune(base, score=score, space=RESTRICTED, max_work=30)
    assert res.best_plan == base and not res.certificate.certified and res.certificate.open > 0
    (w,) = [w for w in res.warnings if w.startswith("no candidate")]
    assert f"before the work limit stopped the search ({res.certificate.open:,} plans open: raise --max-work)" in w



def test_top_zero_lists_every_scored_plan():
    """user12: ``--top 0`` was accepted (0 .. 10000) with no word of what it does: it lists every scored plan
    (the help and the README say so now); ``--top 2`` two rows."""
    from types import SimpleNamespace as NS

    from primus_launch.cli_flags import parser as _parser
    from primus_launch.tuner.answer import same_runs_collapsed

    assert "0: every scored plan" in " ".join(_parser().format_help().split())
    ranked = [NS(iteration_time_s=1.0 + k, tokens_per_sec_per_gpu=100.0 - k, peak_memory_bytes=k, changes={"tp": k})
              for k in range(7)]
    assert same_runs_collapsed(small_dense_plan(), ranked, 0) == ranked
    assert same_runs_collapsed(small_dense_plan(), ranked, 2) == ranked[:2]


def test_warm_start_finds_the_optimum_a_work_limit_left_unfound():
    """tune13: with the recipe's own plan kept out by ``--memory-certain`` (no incumbent) and a work limit the
    search reaches before any plan it scores is admitted, the search answered no plan at all.  The warm start
    (``certified_run.warm_start``: the planner, once, at ``WARM_AT`` of the limit) gives it a scored incumbent: the
    answer is then the brute force's (every legal plan scored), the lower bound it states lies under it, and
    the certificate's counts still add up to the space.  Without a work limit nothing changes: certified,
    the brute force's best, the warm start never called."""
    plan, margin, score = _tight_at_band_middle()

    ex, full = _tight_certain_runs()
    assert ex.baseline.memory.verdict == "tight" and ex.best.memory.verdict == "fits"
    assert full.certificate.certified and full.certificate.work < 20_000  # below the warm start (WARM_AT of the limit)
    assert full.best.iteration_time_s == pytest.approx(ex.best.iteration_time_s, rel=1e-9)
    outside = Space(plan, RESTRICTED).index(knobs_of(plan)) is None
    res = tune(plan, space=RESTRICTED, memory_margin=margin, memory_certain=True, max_work=400)
    c = res.certificate
    assert res.best.memory.verdict == "fits" and res.best_plan != plan   # before tune13: the tight original
    assert c.warm_work > 0
    assert res.best.iteration_time_s == pytest.approx(ex.best.iteration_time_s, rel=1e-9)
    assert not c.certified and c.lower_bound_s <= res.best.iteration_time_s and c.best_s == res.best.iteration_time_s
    assert c.scored + c.bounded_time + c.bounded_memory + c.open == c.plans + outside and c.scored == res.scored
    assert len({repr(t.changes) for t in res.trials if t.status == "scored"}) == res.scored
    # the warm start's work apart from the limit's: its better incumbent lets the search end within the limit
    res = tune(plan, space=RESTRICTED, memory_margin=margin, memory_certain=True, max_work=1_600)
    c = res.certificate
    assert c.certified and c.work - c.warm_work <= 1_600 and c.scored == res.scored
    assert res.best.iteration_time_s == pytest.approx(ex.best.iteration_time_s, rel=1e-9)
    assert c.scored + c.bounded_time + c.bounded_memory == c.plans + outside


@functools.cache
def _tight_certain_runs():
    """The brute force and the branch and bound with ``--memory-certain`` at :func:`_tight_at_band_middle`'s
    margin, run once for the two tests that read them (neither changes a result)."""
    plan, margin, score = _tight_at_band_middle()
    ex = tune(plan, score=score, space=RESTRICTED, exhaustive=True, memory_margin=margin, memory_certain=True)
    bb = tune(plan, space=RESTRICTED, memory_margin=margin, memory_certain=True)
    return ex, bb


def _tight_at_band_middle():
    """The small dense plan with a memory margin that puts its band's middle on the capacity (its verdict
    ``tight``), that margin, and a score at it."""
    from primus_launch.projection.memory.verdict import band_for

    plan = small_dense_plan()
    low, high = band_for("megatron")[:2]
    m = project_dry_run(plan).memory
    inside = m.peak_bytes_per_gpu - m.outside_allocator_bytes
    margin = 1.0 - (inside * (1.0 + (low + high) / 2) + m.outside_allocator_bytes) / m.capacity_bytes

    def score(p):
        return project_dry_run(p, memory_margin=margin)

    return plan, margin, score
