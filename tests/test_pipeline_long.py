"""Long schedules (issue 29): the makespan of a schedule too long to simulate whole is extrapolated
along its residue class (``pipeline.simulate`` module doc) and equals the full simulation's; the
activations in flight of a long schedule equal the full walk of its orders; the work done does not
grow with the micro-batch count; a 1,000-layer, 16,384-micro-batch plan projects with a bounded
number of simulated actions."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from primus_launch.projection.pipeline import simulate as sim
from primus_launch.projection.pipeline.orders import B, F, W, schedule_orders
from primus_launch.projection.pipeline.simulate import ChunkCost, activations_in_flight


def _costs(rng: random.Random, pp: int, vpp: int) -> list[list[ChunkCost]]:
    return [[ChunkCost(rng.uniform(0.5, 1.5), rng.uniform(0.5, 2.0), rng.uniform(0.2, 1.0)) for _ in range(vpp)]
            for _ in range(pp)]


SEEDS = range(6)   # fixed: the costs of every case, whatever PYTHONHASHSEED is
CASES = [("1f1b", 4, 1, None), ("interleaved_1f1b", 4, 3, None), ("interleaved_1f1b", 4, 2, 6),
         ("zb_h1", 5, 1, None), ("zbv", 3, 2, None), ("gpipe", 3, 1, None), ("1f1b", 1, 1, None)]


@pytest.mark.parametrize("schedule,pp,vpp,group", CASES, ids=lambda x: str(x))
def test_extrapolated_makespan_equals_the_full_simulation(monkeypatch, schedule, pp, vpp, group):
    """Random chunk costs and P2P times large enough to put the links on the steady state's critical
    path (where the compute-bound shortcut does not apply), m of several residues."""
    for seed in SEEDS:
        rng = random.Random(seed * 1_000 + zlib.crc32(repr((schedule, pp, vpp, group)).encode()) % 1_000)
        costs = _costs(rng, pp, vpp)
        p2p = [rng.uniform(0.0, 1.5) for _ in range(pp)]
        g = group or pp
        for m in (397, 402, 600):
            if schedule == "interleaved_1f1b" and 0 < m % g < pp:
                continue
            full = sim._simulate_plan(sim._plan(schedule, pp, vpp, m, group), costs, p2p, False)
            monkeypatch.setattr(sim, "FULL_SIMULATION_ACTIONS", 100)  # force the extrapolation
            got = sim.simulate(schedule, pp, vpp, m, costs, p2p, group=group)
            monkeypatch.undo()
            assert got.makespan_s == pytest.approx(full.makespan_s, rel=1e-9), (schedule, seed, m)
            assert got.stage_busy_s == pytest.approx(full.stage_busy_s, rel=1e-12)


def test_extrapolation_follows_the_busiest_rank_taking_over_late():
    """A ZB-V schedule whose settled early step is below its busiest rank's work per step: that rank
    idles in the warm-up and takes over after ~80 micro-batches (the early line would read 4.2 s short
    at m = 397); the extrapolation looks further until the step is the rank's, and equals the full
    simulation."""
    rng = random.Random(3)
    costs = _costs(rng, 4, 2)
    p2p = [rng.uniform(0.0, 1.5) for _ in range(4)]
    full = sim._simulate_plan(sim._plan("zbv", 4, 2, 397, None), costs, p2p, False)
    early = sim._simulate_plan(sim._plan("zbv", 4, 2, 40, None), costs, p2p, False)
    # the busiest rank still idles at 40 micro-batches: more than its work per micro-batch
    assert early.makespan_s - max(early.stage_busy_s) > max(full.stage_busy_s) / 397
    got = sim._extrapolated("zbv", 4, 2, 397, costs, p2p, None)
    assert got.makespan_s == pytest.approx(full.makespan_s, rel=1e-9)


def test_work_does_not_grow_with_the_microbatches(monkeypatch):
    """10^6 micro-batches: every simulated run and every walked order is short."""
    seen: list[int] = []
    real = sim._simulate_plan

    def spy(pl, costs, p2p, record):
        seen.append(pl.orders.m)
        return real(pl, costs, p2p, record)

    monkeypatch.setattr(sim, "_simulate_plan", spy)
    rng = random.Random(1)
    for schedule, pp, vpp, group in CASES:
        seen.clear()
        costs = _costs(rng, pp, vpp)
        r = sim.simulate(schedule, pp, vpp, 10**6 - 10**6 % (group or pp), costs, [1.0] * pp, group=group)
        assert r.num_microbatches == 10**6 - 10**6 % (group or pp) and np.isfinite(r.makespan_s)
        assert max(seen) <= 2_000, (schedule, seen)
        peak = activations_in_flight(schedule, pp, vpp, 10**6 - 10**6 % (group or pp), group=group)
        assert len(peak) == pp and all(np.isfinite(peak))
    seen.clear()
    r = sim.simulate("zbv", 4, 2, 10**6, _costs(rng, 4, 2), 0.1, record=True)
    assert r.timeline_microbatches < 10**6 and len(r.events) <= 3 * sim.TIMELINE_MAX_ACTIONS


def _walk(schedule: str, pp: int, vpp: int, m: int, release: str, group) -> list[float]:
    """The running count of stored forwards along each rank's order (independent of the module's walk)."""
    o = schedule_orders(schedule, pp, vpp, m, group)
    out = []
    for r in range(pp):
        run = peak = 0
        for a in o.orders[r]:
            kind = o.decode(a)[0]
            run += 1 if kind == F else (-1 if kind == (W if release == "W" and o.split_backward else B) else 0)
            peak = max(peak, run)
        out.append(float(peak))
    return out


@pytest.mark.parametrize("schedule,vpp,group", [("1f1b", 1, None), ("interleaved_1f1b", 2, None),
                                                ("interleaved_1f1b", 3, 6), ("zb_h1", 1, None),
                                                ("zbv", 2, None), ("gpipe", 1, None)])
def test_activations_in_flight_of_long_schedules_equal_the_walk(schedule, vpp, group):
    for pp in (2, 3, 4, 6):
        g = group or pp
        if group is not None and group < pp:
            continue
        for m in range(8 * pp + 1, 8 * pp + 3 * g + 2):
            if schedule == "interleaved_1f1b" and 0 < m % g < pp:
                continue
            for release in ("B", "W"):
                assert activations_in_flight(schedule, pp, vpp, m, release=release, group=group) == \
                    _walk(schedule, pp, vpp, m, release, group), (schedule, pp, m, release)


def test_a_thousand_layers_and_sixteen_thousand_microbatches(monkeypatch):
    """The issue's case: a bounded number of simulated micro-batches, finite figures."""
    from pathlib import Path

    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project

    plan = load_recipe(Path(__file__).resolve().parents[1] / "recipes" / "megatron" / "llama3.1_70b.sh")
    seen: list[int] = []
    real = sim._simulate_plan
    monkeypatch.setattr(sim, "_simulate_plan", lambda pl, *a: seen.append(pl.orders.m) or real(pl, *a))
    for schedule, vpp in (("interleaved_1f1b", 5), ("zbv", 2), ("1f1b", 1)):
        seen.clear()
        big = plan.with_changes(model={"num_layers": 1000}, parallel={"vpp": vpp},
                                training={"pipeline_schedule": schedule, "global_batch_size": 16384 * plan.dp})
        assert big.num_microbatches == 16384
        r = project(big, dry_run=True)
        assert np.isfinite(r.iteration_time_s) and r.iteration_time_s > 0 and np.isfinite(r.memory.peak_bytes_per_gpu)
        assert max(seen) <= 2_000, (schedule, seen)
