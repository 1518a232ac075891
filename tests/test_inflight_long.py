"""The memory walk of activations in flight does not grow with the micro-batch count
(``memory/inflight.py``): a long schedule is walked at a short count of its residue class
(``pipeline.simulate.inflight_walk_count``), and a walk with bytes retained until the flush
(``--defer-embedding-wgrad-compute``) is extrapolated along that class; both equal the full walk.
Found by ``scripts/bad_input_campaign.py --seed 17``: a global batch of 10^9 walked 62.5M micro-batches."""

from __future__ import annotations

import random

import pytest

from primus_launch.projection.memory import inflight as inf
from primus_launch.projection.pipeline import orders as po

CASES = [("1f1b", 4, 1, None, True), ("1f1b", 1, 1, None, True), ("interleaved_1f1b", 4, 2, None, True),
         ("interleaved_1f1b", 4, 3, 6, True), ("interleaved_1f1b", 4, 2, None, False), ("zb_h1", 4, 1, None, False),
         ("zbv", 4, 2, None, False), ("1f1b", 3, 1, None, False)]


def _bytes(rng, pp, vpp):
    cb = tuple(tuple(rng.uniform(1, 3) for _ in range(vpp)) for _ in range(pp))
    return cb, tuple(tuple(x / 3 for x in row) for row in cb)


@pytest.mark.parametrize("sched,pp,vpp,group,ep", CASES)
def test_short_walk_equals_the_full_walk(monkeypatch, sched, pp, vpp, group, ep):
    rng = random.Random(pp * 100 + vpp * 10 + int(ep))
    for m in (41, 64, 97, 130):
        g = group or pp
        if sched == "interleaved_1f1b" and 0 < m % g < pp:
            continue
        cb, lb = _bytes(rng, pp, vpp)
        got = inf.stage_activation_peaks.__wrapped__(sched, pp, vpp, m, group, cb, ep, lb if ep else ())
        monkeypatch.setattr(inf, "inflight_walk_count", lambda s, p, n, g=None: n)
        full = inf.stage_activation_peaks.__wrapped__(sched, pp, vpp, m, group, cb, ep, lb if ep else ())
        monkeypatch.undo()
        assert got == pytest.approx(full, rel=1e-12), (sched, m)


@pytest.mark.parametrize("sched,pp,vpp,group,ep", CASES[:1] + CASES[2:])
def test_retained_walk_extrapolates_to_the_full_walk(monkeypatch, sched, pp, vpp, group, ep):
    """Retained bytes on the last rank (all backwards, 3, 50 of them): extrapolated from three counts
    of the residue class, equal to the full walk; the retained bytes grow the peak with m when all are kept."""
    rng = random.Random(7 + pp + vpp)
    for m in (397, 600):
        g = group or pp
        if (sched == "interleaved_1f1b" or vpp > 1) and 0 < m % g < pp:
            continue
        for limit in (0, 3, 50):
            cb, lb = _bytes(rng, pp, vpp)
            keep = tuple(tuple(rng.uniform(0.1, 0.5) if r == pp - 1 else 0.0 for _ in range(vpp)) for r in range(pp))
            flush = tuple(rng.uniform(0, 1) for _ in range(pp))
            args = (sched, pp, vpp, m, group, cb, ep, lb if ep else (), keep, limit, flush)
            monkeypatch.setattr(inf, "RETAINED_FULL_WALK_MAX", 10**9)
            full = inf._walk_retained(*args)
            monkeypatch.setattr(inf, "RETAINED_FULL_WALK_MAX", 100)
            got = inf._walk_retained(*args)
            monkeypatch.undo()
            assert got == pytest.approx(full, rel=1e-9), (sched, m, limit)
            if limit == 0:
                half = inf._walk_retained(sched, pp, vpp, m // 2 - (m // 2) % (group or pp), group, cb, ep,
                                          lb if ep else (), keep, 0, flush)
                assert full[-1] > half[-1]


def test_walk_work_is_bounded_at_a_million_micro_batches(monkeypatch):
    """10^9 micro-batches of Megatron's combined 1F1B (EP overlap) with retained bytes: every order built
    is short."""
    seen: list[int] = []
    real = po.combined_1f1b_orders

    def spy(pp, vpp, m, group=None):
        seen.append(m)
        return real(pp, vpp, m, group)

    monkeypatch.setattr(inf, "combined_1f1b_orders", spy)
    cb, lb = _bytes(random.Random(1), 4, 2)
    keep = tuple(tuple(0.2 if r == 3 else 0.0 for _ in range(2)) for r in range(4))
    inf.stage_activation_peaks.__wrapped__("interleaved_1f1b", 4, 2, 10**6, None, cb, True, lb)
    inf._walk_retained("interleaved_1f1b", 4, 2, 10**6, None, cb, True, lb, keep, 16, (0.0, 0.0, 0.0, 1.0))
    assert seen and max(seen) <= 1000, max(seen)
