"""The branch and bound's floor of fine-grained activation offloading (``tuner/bounds.py``
``BoundModel.offload_features`` / ``node_bounds``, ``cost/offload.py`` ``module_offload_floor``) never
exceeds what the projection charges: on plans drawn from the small MoE plan's full space (every node of a
structural candidate's table that offloads named modules, and the nodes whose floor is above zero), the
floor of each layer kind's exposed copy is at most the exposure ``steps/layer.py`` prices for the plan
(``LayerCosts.offload``), the node's bound at most the plan's projected iteration time, and the cached
pass times are the plan's own.  The independent truth is the projection itself; the floor must bite
somewhere (Qwen3-235B on 256 H100s offloading ``expert_fc1`` + ``moe_act``), so the test can fail."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tuner_helpers import small_moe_plan

from primus_launch.adapters import load_recipe
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.hardware.gpus import resolve_power_cap
from primus_launch.projection.steps.layer import layer_costs
from primus_launch.projection.steps.setup import setup
from primus_launch.tuner.bound_keys import F, NODE_FLAGS, VARIANT_FLAGS, pick
from primus_launch.tuner.bounds import BoundModel
from primus_launch.tuner.floors import X
from primus_launch.tuner.space import Knobs, Space, apply_knobs

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-9
SETTINGS = settings(max_examples=60, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def moe():
    """The small MoE plan's full space, its bound model and, on a stride of its structural candidates,
    the nodes that offload named modules (all, and those whose floor is above zero)."""
    plan = small_moe_plan()
    sp = Space(plan)
    bm = BoundModel(plan, sp)
    nodes, biting = [], []
    for s in range(0, len(sp.structs), max(1, len(sp.structs) // 100)):
        for nk in bm.table_nodes(sp.ctx[s]):
            if nk[-1] and not nk[-2]:
                nodes.append((s, nk))
                if bm.offload_features(s, nk).any():
                    biting.append((s, nk))
    return plan, sp, bm, nodes, biting


def _plans_of(sp: Space, s: int, nk: tuple) -> list[tuple]:
    return [f for f in sp.tables[sp.ctx[s]] if pick(f, NODE_FLAGS, F) == nk]


def _check(plan, sp: Space, bm: BoundModel, s: int, nk: tuple, pick_at: int) -> np.ndarray:
    """Floor <= the projection's exposure, node bound <= the iteration time, for one plan of node ``nk``."""
    h = sp.structs[s]
    fs = _plans_of(sp, s, nk)
    f = fs[pick_at % len(fs)]
    p = apply_knobs(plan, Knobs(*h, *f))
    run = resolve_power_cap(p)
    lt = layer_times_roofline(run)
    assert bm._pass_times(h, f) == lt   # the cache key holds what the layer times read
    off = layer_costs(setup(run, lt)).offload
    x = bm.offload_features(s, nk)
    for moe_, name in ((False, "off_d"), (True, "off_m")):
        got = off[moe_]
        assert x[X[name + "_f"]] <= got[0] and x[X[name + "_b"]] <= got[1], (Knobs(*h, *f), name, x, got)
    r = project_dry_run(p)
    bound = dict((k, b) for b, k in bm.node_bounds(s))[nk]
    assert bound <= r.iteration_time_s * (1 + TOL), (Knobs(*h, *f), bound, r.iteration_time_s)
    return x


@SETTINGS
@given(data=st.data())
def test_offload_floor_below_the_projection_on_any_module_node(moe, data):
    plan, sp, bm, nodes, _ = moe
    s, nk = nodes[data.draw(st.integers(0, len(nodes) - 1), label="node")]
    _check(plan, sp, bm, s, nk, data.draw(st.integers(0, 10_000), label="plan"))


@SETTINGS
@given(data=st.data())
def test_offload_floor_below_the_projection_where_it_bites(moe, data):
    plan, sp, bm, _, biting = moe
    assert biting, "no node of the sweep has a floor above zero: the test could not fail"
    s, nk = biting[data.draw(st.integers(0, len(biting) - 1), label="node")]
    x = _check(plan, sp, bm, s, nk, data.draw(st.integers(0, 10_000), label="plan"))
    assert x.any()


def test_node_bound_is_its_variants_with_the_floor_added():
    """Qwen3-235B-A22B on 256 H100s (the recipe whose tune stopped at the work limit): for the structural
    candidate of its tuned optimum, a node offloading ``expert_fc1`` + ``moe_act`` is bounded above its
    variant's refined bound (the copy, 3.7 ms a MoE layer over PCIe, outlasts the forward pass), every
    node at or above its variant's, and the node bounds stay below the projection of their plans."""
    plan = load_recipe(ROOT / "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml")
    sp = Space(plan)
    bm = BoundModel(plan, sp)
    want = dict(tp=1, pp=8, vpp=2, cp=2, ep=8, mbs=1, dp_sharding="optimizer", rc_granularity="none")
    from primus_launch.tuner.bound_keys import S

    s = next(i for i, h in enumerate(sp.structs) if all(h[S[k]] == v for k, v in want.items())
             and h[S["first_stage_layers"]] is not None)
    vref = dict(zip(bm.variants[sp.ctx[s]], bm.refined_variants(s).tolist()))
    nodes = bm.node_bounds(s)
    assert [b for b, _ in nodes] == sorted(b for b, _ in nodes)
    lifted = 0
    for b, nk in nodes:
        v = vref[nk[:len(VARIANT_FLAGS)]]
        assert b >= v
        if nk[-1] == ("expert_fc1", "moe_act"):
            assert b > v * 1.05, (nk, b, v)
            lifted += 1
            f = _plans_of(sp, s, nk)[0]
            assert b <= project_dry_run(apply_knobs(plan, Knobs(*sp.structs[s], *f))).iteration_time_s * (1 + TOL)
        elif not nk[-1]:
            assert b == v
    assert lifted


def test_pass_times_are_keyed_by_the_sharding_where_the_accumulation_is_unfused(moe):
    """Moving a Megatron plan onto Megatron-FSDP writes ``--no-gradient-accumulation-fusion``, whose copy into
    the gradient bucket the layer times price (``cost/wgrad_accumulation.py``): the pass-time cache was keyed
    without the sharding, so a plan under ``optimizer_grads`` read the cached times of its ``optimizer`` twin
    (the backward's weight pass short by the copy; the CI run of 2026-12-07 drew it).  Truth: the roofline
    layer times of each plan itself, read in the order that filled the cache wrongly."""
    plan, sp, _, _, _ = moe
    bm = BoundModel(plan, sp)  # a fresh cache
    at = Knobs._fields.index("dp_sharding")
    by_rest: dict[tuple, dict[str, int]] = {}
    for s, h in enumerate(sp.structs):
        by_rest.setdefault(h[:at] + h[at + 1:], {})[h[at]] = s
    pairs = [(d["optimizer"], d["optimizer_grads"]) for d in by_rest.values()
             if "optimizer" in d and "optimizer_grads" in d]
    assert pairs, "no structural pair differing only in the sharding: the test could not fail"
    checked = 0
    for s1, s2 in pairs[:5]:
        f = sp.tables[sp.ctx[s1]][0]
        if f not in sp.tables[sp.ctx[s2]]:
            continue
        for s in (s1, s2):  # s1 first: it fills the cache s2 must not read
            p = apply_knobs(plan, Knobs(*sp.structs[s], *f))
            assert bm._pass_times(sp.structs[s], f) == layer_times_roofline(resolve_power_cap(p))
        checked += 1
    assert checked
