"""The tuner's tie-break (answer.py ``_tie_break``): a plan with the same projected time as the recipe's own
replaces it only when its peak memory is materially lower (beyond the memory error band), and the text says
why; otherwise the original is kept.  The times are made equal by the test's score (no timing asserted)."""

from __future__ import annotations

import pytest

from tuner_helpers import small_dense_plan

from primus_launch.projection.dryrun import project_dry_run
from primus_launch.tuner.answer import materially_lower_peak
from primus_launch.tuner.search import tune
from primus_launch.report.tune_text import render_tune_text
from primus_launch.tuner.space import SpaceConfig

RESTRICTED = SpaceConfig.restricted()


_DRY: dict[str, object] = {}


@pytest.fixture(scope="module", autouse=True)
def _dry_runs_shared():
    """The two brute forces below score every plan of the same space: each plan's dry run is computed once
    (the scores only copy it, ``model_copy``) and dropped when the file ends."""
    yield
    _DRY.clear()


def _dry(plan):
    key = plan.model_dump_json()
    if key not in _DRY:
        _DRY[key] = project_dry_run(plan, memory_margin=0.0)
    return _DRY[key]


def _flat_time(plan):
    """The dry-run projection with every plan's iteration time set to 1 s: all plans tie."""
    return _dry(plan).model_copy(update={"iteration_time_s": 1.0})


def _flat_time_and_memory(plan):
    r = _flat_time(plan)
    return r.model_copy(update={"memory": r.memory.model_copy(update={"peak_bytes_per_gpu": 40 * 2**30,
                                                                      "band": None})})


def test_a_tied_plan_with_a_materially_lower_peak_is_chosen_and_said_why():
    plan = small_dense_plan()
    res = tune(plan, score=_flat_time, space=RESTRICTED, exhaustive=True, score_is_dry_run=False, workers=1)
    assert res.best_plan != plan and res.tie_note is not None
    assert materially_lower_peak(res.best, res.baseline)
    assert res.best.memory.peak_bytes_per_gpu == min(t.peak_memory_bytes for t in res.trials
                                                     if t.status == "scored" and t.fits)
    assert "same projected time as the original" in render_tune_text(res)


def test_a_tie_without_a_material_memory_gain_keeps_the_original():
    plan = small_dense_plan()
    res = tune(plan, score=_flat_time_and_memory, space=RESTRICTED, exhaustive=True, score_is_dry_run=False, workers=1)
    assert res.best_plan == plan and res.tie_note is None
    assert "same projected time" not in render_tune_text(res)


def test_materially_lower_peak_reads_the_band_or_a_tenth():
    r = project_dry_run(small_dense_plan(), memory_margin=0.0)
    m, gib = r.memory.model_copy(update={"band": None}), 2 ** 30

    def at(peak):
        return r.model_copy(update={"memory": m.model_copy(update={"peak_bytes_per_gpu": peak})})

    assert materially_lower_peak(at(35 * gib), at(40 * gib))
    assert not materially_lower_peak(at(37 * gib), at(40 * gib))
    assert not materially_lower_peak(at(40 * gib), at(40 * gib))
