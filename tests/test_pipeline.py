"""Pipeline simulator: orders vs torch / Megatron, closed forms, an independent reference
simulation, activation counts, Chrome trace."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from mcore_schedule_run import megatron_rank_order
from primus_launch.plan import PlanError
from primus_launch.projection.pipeline.simulate import (
    ChunkCost, PipelineResult, _build_plan, activations_in_flight, chrome_trace,
    simulate, uniform_costs, write_chrome_trace,
)
from primus_launch.projection.pipeline.orders import (
    KIND_NAMES, megatron_interleaved_warmup, megatron_schedule_table, rank_actions, schedule_orders,
)

ALL = [("1f1b", 1), ("gpipe", 1), ("interleaved_1f1b", 2), ("interleaved_1f1b", 3),
       ("zb_h1", 1), ("zbv", 2)]


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=1e-12)


# ---------------------------------------------------------------- orders vs torch.distributed.pipelining

@pytest.fixture(scope="module")
def torch_sched():
    import torch.distributed.pipelining.schedules as S
    return S


class _MockStage:
    """What the torch schedules' constructors read from a stage (no process group needed)."""

    def __init__(self, idx: int, n: int, group_size: int):
        self.stage_index, self.num_stages, self.group_size, self.group_rank = idx, n, group_size, 0
        self.is_first, self.is_last = idx == 0, idx == n - 1
        import torch
        self.submod = torch.nn.Identity()


def _torch_orders(S, schedule: str, pp: int, vpp: int, m: int) -> dict[int, list[str]]:
    n = pp * vpp
    if schedule in ("1f1b", "gpipe"):
        cls = S.Schedule1F1B if schedule == "1f1b" else S.ScheduleGPipe
        sch = cls(_MockStage(0, n, pp), m)
    elif schedule == "zbv":
        sch = S.ScheduleZBVZeroBubble([_MockStage(0, n, pp), _MockStage(n - 1, n, pp)], m)
    else:
        cls = S.ScheduleInterleaved1F1B if schedule == "interleaved_1f1b" else S.ScheduleInterleavedZeroBubble
        sch = cls([_MockStage(c * pp, n, pp) for c in range(vpp)], m)
    keep = {"F", "B", "I", "W"}
    out = {r: [str(a) for a in acts if a is not None and a.computation_type.value in keep]
           for r, acts in sch.pipeline_order.items()}
    if schedule == "1f1b":
        # torch 2.13 Schedule1F1B._get_pipeline_order numbers the last rank's forwards from 1 (it
        # starts `forward_mb` at 0 and increments before use when there is no warm-up forward);
        # its runtime `_step_microbatches` runs 0..m-1.  Undo that off-by-one before comparing.
        last = pp - 1
        out[last] = [f"{last}F{int(a.split('F')[1]) - 1}" if "F" in a else a for a in out[last]]
    return out


def _our_orders_as_torch(schedule: str, pp: int, vpp: int, m: int) -> dict[int, list[str]]:
    o = schedule_orders(schedule, pp, vpp, m)
    out = {}
    for r, ordr in enumerate(o.orders):
        acts = []
        for a in ordr:
            k, _, c, mb = o.decode(a)
            letter = KIND_NAMES[k]
            if letter == "B" and o.split_backward:
                letter = "I"        # torch's name for the input-grad backward
            acts.append(f"{o.global_stage(r, c)}{letter}{mb}")
        out[r] = acts
    return out


@pytest.mark.parametrize("schedule,vpp", [("1f1b", 1), ("gpipe", 1), ("interleaved_1f1b", 2),
                                           ("interleaved_1f1b", 4), ("zb_h1", 1), ("zbv", 2)])
def test_orders_equal_torch(torch_sched, schedule, vpp):
    for pp in (2, 3, 4, 8):
        for m in sorted({pp, 2 * pp, 3 * pp, 2 * pp + 1, 17}):
            if schedule == "interleaved_1f1b" and m % pp:
                continue   # Megatron's classic interleaving needs m % pp == 0 (torch's flex one does not)
            if schedule == "zb_h1" and m % max(1, m // pp):
                continue   # torch's ZB class wants m % rounds == 0 (irrelevant with one chunk per rank)
            assert _our_orders_as_torch(schedule, pp, vpp, m) == _torch_orders(torch_sched, schedule, pp, vpp, m), \
                (schedule, pp, vpp, m)


def test_zbv_small_m_equals_torch(torch_sched):
    for pp, m in [(4, 1), (4, 3), (4, 6), (8, 5)]:   # fewer than 2p-1 micro-batches: torch trims
        assert _our_orders_as_torch("zbv", pp, 2, m) == _torch_orders(torch_sched, "zbv", pp, 2, m)


# ---------------------------------------------------------------- Megatron's interleaved bookkeeping

def test_megatron_table_and_warmup():
    from types import SimpleNamespace

    from megatron.core.pipeline_parallel import schedules as ms

    for m, v, g in [(8, 2, 4), (10, 2, 4), (16, 3, 8), (12, 5, 4), (9, 2, 3), (7, 4, 7)]:
        assert megatron_schedule_table(m, v, g) == ms.get_schedule_table(m, v, g)

    class _Group:
        def __init__(self, n, r):
            self.n, self.r = n, r

        def size(self):
            return self.n

        def rank(self):
            return self.r

    for pp, v, m in [(4, 2, 8), (4, 3, 4), (8, 5, 16), (2, 2, 2), (8, 2, 64)]:
        for r in range(pp):
            comm = SimpleNamespace(pp_group=_Group(pp, r), virtual_pipeline_model_parallel_size=v)
            _, _, warm, _ = ms.get_pp_rank_microbatches(m, v, pp, p2p_communicator=comm)
            assert megatron_interleaved_warmup(pp, v, m, r) == warm


def test_orders_equal_megatron_schedules(monkeypatch):
    cases = [("1f1b", pp, 1, m) for pp in (2, 4, 8) for m in (1, 3, pp, 2 * pp + 1)]
    cases += [("interleaved_1f1b", pp, v, m) for pp in (2, 4) for v in (2, 3) for m in (pp, 2 * pp, 3 * pp)]
    cases += [("interleaved_1f1b", 8, 5, 16)]
    for schedule, pp, vpp, m in cases:
        for r in range(pp):
            ours = rank_actions(schedule_orders(schedule, pp, vpp, m), r)
            assert ours == megatron_rank_order(monkeypatch, pp, vpp, m, r), (schedule, pp, vpp, m, r)


# (pp, vpp, m, group): Megatron-LM's functional test gpt3_mcore_te_tp1_pp4_vp1_tunable_overlap runs
# pp=4, vpp=3, 5 micro-batches in a group of 5; the others cover a remainder group >= pp and g = m
MB_GROUPS = [(4, 3, 5, 5), (2, 2, 5, 5), (4, 2, 10, 5), (2, 3, 8, 3), (4, 2, 8, 8), (3, 2, 7, 4)]


@pytest.mark.parametrize("pp,vpp,m,group", MB_GROUPS)
def test_microbatch_group_orders_equal_megatron(monkeypatch, pp, vpp, m, group):
    """--microbatch-group-size-per-virtual-pipeline-stage: our interleaved order == the order
    Megatron's own schedule executes, rank by rank."""
    for r in range(pp):
        ours = rank_actions(schedule_orders("interleaved_1f1b", pp, vpp, m, group), r)
        assert ours == megatron_rank_order(monkeypatch, pp, vpp, m, r, group), (pp, vpp, m, group, r)


@pytest.mark.parametrize("pp,vpp,m,group", [(4, 2, 6, 4), (4, 2, 7, 5), (2, 2, 4, 6), (4, 2, 8, 3)])
def test_microbatch_group_illegal_where_megatron_refuses(monkeypatch, pp, vpp, m, group):
    """Group outside [pp, m] or a last group of fewer than pp micro-batches: Megatron raises, and so
    do the orders and the plan's legality check (same field named)."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, PlanError, Training

    with pytest.raises((ValueError, RuntimeError)):  # range: ValueError; last group < pp: RuntimeError
        megatron_rank_order(monkeypatch, pp, vpp, m, 0, group)
    with pytest.raises(PlanError):
        schedule_orders("interleaved_1f1b", pp, vpp, m, group)
    with pytest.raises(ValueError, match=r"parallel\.microbatch_group=|training\.global_batch_size="):
        Plan(model=ModelArch(name="t", num_layers=pp * vpp, hidden_size=64, ffn_hidden_size=128,
                             num_attention_heads=4, vocab_size=128, seq_length=32),
             parallel=Parallelism(pp=pp, vpp=vpp, microbatch_group=group),
             training=Training(micro_batch_size=1, global_batch_size=m, pipeline_schedule="interleaved_1f1b"),
             cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=pp))


@pytest.mark.parametrize("pp,vpp,m,group", MB_GROUPS)
def test_microbatch_group_engine_equals_reference(pp, vpp, m, group):
    rng = random.Random(pp * 1000 + vpp * 100 + m * 10 + group)
    costs = [[ChunkCost(rng.uniform(0.5, 2), rng.uniform(0.5, 2), rng.uniform(0.2, 1.5))
              for _ in range(vpp)] for _ in range(pp)]
    p2p = [rng.uniform(0, 0.4) for _ in range(pp)]
    got = simulate("interleaved_1f1b", pp, vpp, m, costs, p2p, group=group)
    assert got.makespan_s == approx(_reference("interleaved_1f1b", pp, vpp, m, costs, p2p, group))
    if group == pp:
        assert got.makespan_s == approx(simulate("interleaved_1f1b", pp, vpp, m, costs, p2p).makespan_s)


# ---------------------------------------------------------------- closed forms (uniform costs)

@pytest.mark.parametrize("p,m", [(2, 2), (4, 8), (4, 5), (8, 32), (3, 1), (16, 64)])
@pytest.mark.parametrize("f,bi,bw", [(1.0, 1.0, 1.0), (0.7, 0.9, 0.6), (2.0, 0.5, 1.5)])
def test_1f1b_and_gpipe_makespan(p, m, f, bi, bw):
    # Narayanan et al. 2021 (arXiv 2104.04473) sec. 2.2.1: (m + p - 1)(t_f + t_b), bubble (p-1)/m
    c = uniform_costs(p, 1, f, bi, bw)
    want = (m + p - 1) * (f + bi + bw)
    r = simulate("1f1b", p, 1, m, c)
    assert r.makespan_s == approx(want)
    assert r.stage_bubble_s[0] / r.stage_busy_s[0] == approx((p - 1) / m)
    assert simulate("gpipe", p, 1, m, c).makespan_s == approx(want)


@pytest.mark.parametrize("p,v,m", [(2, 2, 4), (4, 2, 8), (4, 3, 12), (8, 4, 16), (8, 5, 64), (4, 2, 4)])
def test_interleaved_makespan(p, v, m):
    # arXiv 2104.04473 sec. 2.2.2: with per-chunk times t_f/v, t_b/v the bubble is (p-1)(t_f+t_b)/v,
    # i.e. bubble fraction (p-1)/(v m)
    f, b = 1.0, 2.0
    r = simulate("interleaved_1f1b", p, v, m, uniform_costs(p, v, f / v, b / v * 0.5, b / v * 0.5))
    assert r.makespan_s == approx((m + (p - 1) / v) * (f + b))
    assert r.stage_bubble_s[0] / r.stage_busy_s[0] == approx((p - 1) / (v * m))
    assert r.makespan_s < simulate("1f1b", p, 1, m, uniform_costs(p, 1, f, b / 2, b / 2)).makespan_s


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 16), (8, 8), (8, 32), (3, 7)])
@pytest.mark.parametrize("f,b,w", [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8), (1.0, 2.0, 1.0), (2.0, 1.0, 1.0),
                                   (1.0, 1.0, 0.5)])
def test_zb_h1_bubble(p, m, f, b, w):
    # Qi et al. 2023 (arXiv 2401.10241) sec. 3.3: ZB-H1 bubble (p-1)(T_F + T_B - T_W) vs 1F1B's
    # (p-1)(T_F + T_B + T_W), for T_W <= T_F, T_B (W fits the freed slots)
    r = simulate("zb_h1", p, 1, m, uniform_costs(p, 1, f, b, w))
    assert r.makespan_s == approx(m * (f + b + w) + (p - 1) * (f + b - w))
    assert all(x == approx((p - 1) * (f + b - w)) for x in r.stage_bubble_s)


@pytest.mark.parametrize("p,m", [(2, 4), (4, 8), (4, 16), (8, 16), (8, 64), (3, 9)])
def test_zbv_only_fill_bubble(p, m):
    # ZB-V (arXiv 2401.10241 sec. 6) with T_F = T_B = T_W and m >= 2p: no bubble beyond the
    # unavoidable pipeline fill - the last rank cannot start before p-1 chunk forwards - so the
    # makespan meets the lower bound (p-1) t_chunk + per-rank work.
    t = 0.5
    r = simulate("zbv", p, 2, m, uniform_costs(p, 2, t, t, t))
    assert r.makespan_s == approx((p - 1) * t + 6 * t * m)
    h1 = simulate("zb_h1", p, 1, m, uniform_costs(p, 1, 2 * t, 2 * t, 2 * t))
    one = simulate("1f1b", p, 1, m, uniform_costs(p, 1, 2 * t, 2 * t, 2 * t))
    assert r.stage_busy_s == h1.stage_busy_s == one.stage_busy_s
    assert max(r.stage_bubble_s) < 0.6 * max(h1.stage_bubble_s) < 0.6 * max(one.stage_bubble_s)


def test_single_microbatch_critical_path_with_p2p():
    # one micro-batch: the makespan is the chain F_0..F_{p-1}, B_{p-1}..B_0 with 2(p-1) transfers
    p, c = 6, 0.3
    costs = [[ChunkCost(1.0 + 0.1 * s, 1.5 + 0.1 * s, 0.7)] for s in range(p)]
    chain = sum(cc[0].fwd_s + cc[0].bwd_input_s for cc in costs) + 2 * (p - 1) * c
    assert simulate("1f1b", p, 1, 1, costs, c).makespan_s == approx(chain + p * 0.7)  # fused B+W
    assert simulate("zb_h1", p, 1, 1, costs, c).makespan_s == approx(chain + 0.7)  # stage 0's W ends last


# ---------------------------------------------------------------- independent reference simulation

def _reference(schedule, pp, vpp, m, costs, p2p, group=None):
    """A plain event-driven simulation written separately from the engine: repeatedly run the
    ready action with the earliest start time."""
    o = schedule_orders(schedule, pp, vpp, m, group)
    S = pp * vpp
    if o.v_shape:
        gs = lambda r, c: r if c == 0 else 2 * pp - 1 - r          # noqa: E731
    else:
        gs = lambda r, c: c * pp + r                              # noqa: E731
    where = {gs(r, c): r for r in range(pp) for c in range(vpp)}
    acts = [[o.decode(a) for a in ordr] for ordr in o.orders]
    done: dict[tuple, float] = {}
    ptr, free = [0] * pp, [0.0] * pp
    links = p2p if isinstance(p2p, list) else [p2p] * pp

    def lat(r1, r2):
        if r1 == r2:
            return 0.0
        lo, hi = min(r1, r2), max(r1, r2)
        return links[lo] if hi == lo + 1 else links[pp - 1]

    while any(ptr[r] < len(acts[r]) for r in range(pp)):
        best = None
        for r in range(pp):
            if ptr[r] == len(acts[r]):
                continue
            k, _, c, mb = acts[r][ptr[r]]
            g = gs(r, c)
            if k == 0:
                dep = None if g == 0 else ("F", g - 1, mb)
            elif k == 1:
                dep = ("F", g, mb) if g == S - 1 else ("B", g + 1, mb)
            else:
                dep = ("B", g, mb)
            if dep is not None and dep not in done:
                continue
            ready = 0.0 if dep is None else done[dep] + lat(where[dep[1]], r)
            start = max(free[r], ready)
            if best is None or start < best[0]:
                best = (start, r, k, c, mb, g)
        assert best is not None, "deadlock"
        start, r, k, c, mb, g = best
        cc = costs[r][c]
        d = cc.fwd_s if k == 0 else (cc.bwd_weight_s if k == 2 else
                                     cc.bwd_input_s + (0.0 if o.split_backward else cc.bwd_weight_s))
        free[r] = start + d
        done[("FBW"[k], g, mb)] = start + d
        ptr[r] += 1
    return max(free)


@pytest.mark.parametrize("schedule,vpp", ALL)
def test_engine_equals_reference_on_random_costs(schedule, vpp):
    rng = random.Random(sum(map(ord, schedule)) * 10 + vpp)
    for pp, m in [(2, 4), (4, 8), (3, 9), (4, 12), (4, 1), (3, 30)] * 2:
        if schedule == "interleaved_1f1b" and m % pp:
            continue
        costs = [[ChunkCost(rng.uniform(0.5, 2), rng.uniform(0.5, 2), rng.uniform(0.2, 1.5))
                  for _ in range(vpp)] for _ in range(pp)]
        p2p = [rng.uniform(0, 0.4) for _ in range(pp)]
        got = simulate(schedule, pp, vpp, m, costs, p2p)
        assert got.makespan_s == approx(_reference(schedule, pp, vpp, m, costs, p2p))
        # the ring table (no timeline; long schedules extrapolated from their steady state) and the
        # full table (timeline) give the same times (to rounding)
        assert simulate(schedule, pp, vpp, m, costs, p2p, record=True).makespan_s == pytest.approx(got.makespan_s, rel=1e-12)
        serial = sum(got.stage_busy_s) + sum(p2p) * 2 * m * vpp
        assert max(got.stage_busy_s) * (1 - 1e-12) <= got.makespan_s <= serial
        for busy, bub in zip(got.stage_busy_s, got.stage_bubble_s):
            assert busy + bub == approx(got.makespan_s)


def test_recorded_events_obey_dependencies():
    pp, vpp, m, c = 4, 2, 8, 0.05
    rng = random.Random(3)
    costs = [[ChunkCost(rng.uniform(0.5, 1), rng.uniform(0.5, 1), rng.uniform(0.3, 0.6))
              for _ in range(vpp)] for _ in range(pp)]
    for schedule in ("interleaved_1f1b", "zbv"):
        r = simulate(schedule, pp, vpp, m, costs, c, record=True)
        o = schedule_orders(schedule, pp, vpp, m)
        comp = [e for e in r.events if e.kind in ("F", "B", "W", "BW")]
        assert len(comp) == sum(len(x) for x in o.orders)
        by = {(e.kind[0], o.global_stage(e.stage, e.chunk), e.microbatch): e for e in comp}
        for (k, g, mb), e in by.items():
            if k == "F" and g > 0:
                d = by[("F", g - 1, mb)]
            elif k == "B":
                d = by[("F", g, mb)] if g == 2 * pp - 1 else by[("B", g + 1, mb)]
            elif k == "W":
                d = by[("B", g, mb)]
            else:
                continue
            gap = c if d.stage != e.stage else 0.0
            assert e.start_s >= d.end_s + gap - 1e-12
        assert max(e.end_s for e in comp) == approx(r.makespan_s)


# ---------------------------------------------------------------- activations in flight

def test_activations_in_flight():
    for p, m in [(4, 8), (8, 3), (8, 64), (1, 4)]:
        one = activations_in_flight("1f1b", p, 1, m)
        assert one == [min(p - s, m) for s in range(p)]
        assert activations_in_flight("gpipe", p, 1, m) == [m] * p
        assert activations_in_flight("zb_h1", p, 1, m) == one
        # ZB-H1 keeps W's inputs longer but its peak stays at 1F1B's p micro-batches (sec. 3.3)
        assert max(activations_in_flight("zb_h1", p, 1, m, release="W")) == min(p, m)
    for p, v, m in [(4, 2, 8), (4, 2, 4), (8, 5, 16), (8, 3, 8), (2, 4, 2)]:
        got = activations_in_flight("interleaved_1f1b", p, v, m)
        # megatron schedules.py get_pp_rank_microbatches: warm-up + 1 (the steady state's F comes
        # before its B); everything in warm-up when that reaches m*v
        for s in range(p):
            warm = (p - s - 1) * 2 + (v - 1) * p
            assert got[s] == (m * v if warm >= m * v else warm + 1)
    for p, m in [(4, 8), (8, 16), (8, 64)]:
        # ZB-V: 2p chunk-micro-batches = p stage-micro-batches, 1F1B's peak (arXiv 2401.10241 sec. 6)
        assert activations_in_flight("zbv", p, 2, m) == [2 * p] * p
    assert activations_in_flight("1f1b", 4, 1, 8, chunk_weights=[[0.5], [1], [2], [4]]) == [2, 3, 4, 4]
    base = activations_in_flight("interleaved_1f1b", 4, 2, 8)
    assert activations_in_flight("interleaved_1f1b", 4, 2, 8, chunk_weights=[[3.0, 3.0]] * 4) == [3 * x for x in base]
    with pytest.raises(PlanError):
        activations_in_flight("1f1b", 4, 1, 8, release="X")


# ---------------------------------------------------------------- trace, errors, engine guard

def test_chrome_trace(tmp_path):
    pp, vpp, m = 4, 2, 8
    r = simulate("interleaved_1f1b", pp, vpp, m, uniform_costs(pp, vpp, 1e-3, 1e-3, 1e-3), 1e-4, record=True)
    path = tmp_path / "t.json"
    write_chrome_trace(r, str(path), title="test")
    data = json.loads(path.read_text())
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    compute = [e for e in xs if e["tid"] == 0]
    assert {e["pid"] for e in compute} == set(range(pp))
    assert len(compute) == 2 * pp * vpp * m
    names = {e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"}
    assert names == {f"stage {s}" for s in range(pp)}
    for s in range(pp):
        ev = sorted((e for e in compute if e["pid"] == s), key=lambda e: e["ts"])
        for a, b in zip(ev, ev[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6
    assert {e["name"][0] for e in compute} == {"F", "B"}
    assert max(e["ts"] + e["dur"] for e in compute) == pytest.approx(r.makespan_s * 1e6)
    assert any(e["tid"] == 1 for e in xs)    # P2P sends on their own track
    assert chrome_trace(PipelineResult(0.0, [], []))["traceEvents"] == []


def test_errors():
    c = uniform_costs(4, 1, 1, 1, 1)
    with pytest.raises(PlanError, match="num_microbatches"):
        simulate("interleaved_1f1b", 4, 2, 6, uniform_costs(4, 2, 1, 1, 1))
    with pytest.raises(PlanError, match="vpp"):
        simulate("zbv", 4, 1, 8, c)
    with pytest.raises(PlanError, match="pipeline_schedule"):
        simulate("dualpipe", 4, 1, 8, c)
    with pytest.raises(PlanError, match="costs"):
        simulate("1f1b", 4, 1, 8, c[:3])
    with pytest.raises(PlanError, match="p2p_s"):
        simulate("1f1b", 4, 1, 8, c, [0.1])
    with pytest.raises(PlanError, match="costs"):
        simulate("1f1b", 4, 1, 8, uniform_costs(4, 1, 1, -1, 1))
    # a broken order (last stage's first backward before its forward) is caught, not mis-simulated
    o = schedule_orders("1f1b", 2, 1, 2)
    bad = dataclasses.replace(o, orders=(o.orders[0], tuple(reversed(o.orders[1]))))
    _build_plan(o)
    with pytest.raises(RuntimeError, match="deadlock"):
        _build_plan(bad)


def test_degenerate_pp1():
    c = [[ChunkCost(1.0, 2.0, 0.5)]]
    for s in ("1f1b", "gpipe", "zb_h1", "zbv", "interleaved_1f1b"):
        r = simulate(s, 1, 1, 5, c)
        assert r.makespan_s == approx(5 * 3.5) and r.stage_bubble_s == [0.0]
