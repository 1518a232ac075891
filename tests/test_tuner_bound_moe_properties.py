"""The branch and bound's exact bound (``tuner/exact_bound.py``) is a true lower bound of the dry-run on MoE
plans of the tuner's own space, in either order of the two calls: plans drawn (hypothesis) across TP / PP /
VPP / EP / MBS and the rest of the knobs from a TorchTitan 0.3 qwen3 30B-A3B launch line and from a bundled
Megatron MoE recipe.  The independent truth is the projection itself (the bound must never exceed it); the
tolerance is float rounding only.

The space's plans are unvalidated copies (``tuner/knobs.py`` ``apply_knobs``).  A TorchTitan one with
``dp_sharding = "full"`` over one shard rank (TP 4 x PP 4 on 16 GPUs) is not in the plan's normal form
(``plan/normal_form.py``); the dry-run used to hand it to ``ProjectionResult``, whose re-run of the plan's
validator normalized the caller's plan in place -- so a bound taken after the projection was the bound of
another plan, above the projection (3.764 s vs 3.728 s).  The projection must leave its plan as it found it."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from primus_launch.adapters import load_recipe
from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.plan.normal_form import titan_shard_degree
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.tuner.exact_bound import exact_bound
from primus_launch.tuner.space import Knobs, Space, apply_knobs
from tune_lines import TITAN_QWEN3_MOE_LINE

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-9
TITAN_LINE = TITAN_QWEN3_MOE_LINE
MEGATRON_RECIPE = "recipes/megatron/mixtral_8x22b.sh"


@lru_cache(maxsize=None)
def _space(which: str):
    plan = plan_from_command(TITAN_LINE) if which == "titan" else load_recipe(ROOT / MEGATRON_RECIPE)
    return plan, Space(plan)


def _check(plan, sp: Space, s: int, j: int) -> None:
    k = Knobs(*sp.structs[s], *sp.tables[sp.ctx[s]][j])
    p = apply_knobs(plan, k)
    before = p.model_dump()
    e0 = exact_bound(p)
    r = project_dry_run(p).iteration_time_s
    assert p.model_dump() == before, k            # the projection leaves its plan as it found it
    e1 = exact_bound(p)
    assert e0 == e1, k
    assert e1 <= r * (1 + TOL), (k, e1, r)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(["titan", "megatron"]))
def test_exact_bound_below_the_projection_on_moe_plans(data, which):
    plan, sp = _space(which)
    s = data.draw(st.integers(0, len(sp.structs) - 1), label="struct")
    j = data.draw(st.integers(0, len(sp.tables[sp.ctx[s]]) - 1), label="flags")
    _check(plan, sp, s, j)


def test_titan_fsdp_over_one_shard_rank_bound_below_the_projection():
    """The reported case: TorchTitan 0.3 qwen3 30B-A3B, TP 4 x PP 4 (VPP 2) x EP 2 on 16 GPUs, FSDP knob over
    one shard rank -- every such plan of the space (its flag tables' first rows), in both call orders."""
    plan, sp = _space("titan")
    seen = 0
    for s, h in enumerate(sp.structs):
        k = Knobs(*h, *sp.tables[sp.ctx[s]][0])
        if (k.tp, k.pp, k.ep, k.dp_sharding) != (4, 4, 2, "full") or k.mbs > 2:
            continue
        p = apply_knobs(plan, k)
        assert p.parallel.dp_sharding == "full" and titan_shard_degree(p) == 1   # outside the normal form
        _check(plan, sp, s, 0)
        seen += 1
    assert seen > 0
