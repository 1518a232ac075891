"""Every floor of the branch and bound (``tuner/bounds.py``, ``tuner/memory_floors.py``, ``tuner/exact_bound.py``) is
at or below the projection of the plan's normal-form copy (``plan/normal_form.py`` ``normal_copy``: what the
dry-run prices), for time and memory, on plans drawn (hypothesis) from the tuner's own spaces of a TorchTitan and a
Megatron recipe, each dense and MoE.  Half the TorchTitan draws come from the structural candidates outside the
normal form (FSDP over a shard group of one), whose unvalidated copies (``apply_knobs``) spell the job another way.

The floors are taken from one :class:`BoundModel` per space in the order the draws come, as the search takes them
(a cache key that misses a field shows as a floor of another plan).  Two defects it found: the post-pipeline
floor was cached without the schedule, so a ZB-V candidate's tail (its V placement puts the embedding and the
output layer on rank 0) stood for an interleaved candidate's of the same split (TorchTitan Llama 3.1 8B, PP 8 x VPP
2: 1.8821 s bound vs 1.8814 s projected); and the floors read the plan as ``apply_knobs`` spells it, not its
normal form (their tails were lower there, so still floors, but of another plan).

The independent truth is the projection itself: ``project_dry_run`` for time, ``memory/legality.py``
``memory_peak`` (the pre-filter's and the verdict's model) for memory, both on ``normal_copy``."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from primus_launch.adapters import load_recipe
from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.plan.normal_form import normal_copy
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.memory.legality import memory_peak
from primus_launch.tuner.bound_keys import F, NODE_FLAGS, VARIANT_FLAGS, pick
from primus_launch.tuner.bounds import BoundModel
from primus_launch.tuner.exact_bound import exact_bound
from primus_launch.tuner.memory_floors import whole_space_floor
from primus_launch.tuner.space import Knobs, Space, apply_knobs
from tune_lines import TITAN_QWEN3_MOE_LINE

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-9
TITAN_MOE = TITAN_QWEN3_MOE_LINE
SPACES = {"titan-dense": "recipes/torchtitan/llama3.1_8b.toml", "titan-moe": None,
          "megatron-dense": "recipes/megatron/llama3.1_8b.sh", "megatron-moe": "recipes/megatron/mixtral_8x22b.sh"}


@lru_cache(maxsize=None)
def _space(which: str):
    plan = plan_from_command(TITAN_MOE) if SPACES[which] is None else load_recipe(ROOT / SPACES[which])
    sp = Space(plan)
    bm = BoundModel(plan, sp)
    outside = [s for s, h in enumerate(sp.structs)
               if normal_copy(apply_knobs(plan, Knobs(*h, *sp.tables[sp.ctx[s]][0]))) is not
               apply_knobs(plan, Knobs(*h, *sp.tables[sp.ctx[s]][0]))] if plan.framework == "torchtitan" else []
    return plan, sp, bm, bm.level1_all(), outside


def check_floors(plan, sp: Space, bm: BoundModel, l1_all, s: int, j: int) -> None:
    """Every floor of structural candidate ``s`` / flag row ``j`` at or below the normal form's projection."""
    h, f = sp.structs[s], sp.tables[sp.ctx[s]][j]
    p = apply_knobs(plan, Knobs(*h, *f))
    q = normal_copy(p)
    t = project_dry_run(q).iteration_time_s
    v = pick(f, VARIANT_FLAGS, F)
    l1 = dict(zip(bm.variants[sp.ctx[s]], bm.level1_variants(s).tolist()))[v]
    refined = dict(zip(bm.variants[sp.ctx[s]], bm.refined_variants(s).tolist()))[v]
    node = dict((nk, b) for b, nk in bm.node_bounds(s))[pick(f, NODE_FLAGS, F)]
    times = {"level1_all": float(l1_all[s]), "level1": l1, "level1+tail": l1 + bm.tail(s), "refined": refined,
             "node": node, "exact": exact_bound(p)}
    for name, b in times.items():
        assert b <= t * (1 + TOL), (name, b, t, Knobs(*h, *f))
    # memory: the pre-filter's model (both bases: the floors take the least) on the normal form
    peak_r, _, outside = memory_peak(q, "reserved")
    peak_a, _, _ = memory_peak(q, "allocated")
    inside = min(peak_r, peak_a) - outside
    mem = {"whole_space": whole_space_floor(plan), "static": bm.static_floor(h, f), "inside": bm.inside_floor(h, f)}
    for name, b in mem.items():
        assert b <= inside * (1 + TOL), (name, b, inside, Knobs(*h, *f))
    assert bm.outside_floor(s) <= outside * (1 + TOL), ("outside", bm.outside_floor(s), outside, Knobs(*h, *f))


@settings(max_examples=48, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), which=st.sampled_from(sorted(SPACES)), off_form=st.booleans())
def test_every_floor_below_the_normal_forms_projection(data, which, off_form):
    plan, sp, bm, l1_all, outside = _space(which)
    pool = outside if off_form and outside else range(len(sp.structs))
    s = data.draw(st.sampled_from(list(pool)), label="struct")
    j = data.draw(st.integers(0, len(sp.tables[sp.ctx[s]]) - 1), label="flags")
    check_floors(plan, sp, bm, l1_all, s, j)


def test_tail_floor_key_holds_the_schedule():
    """The reported case: TorchTitan Llama 3.1 8B, PP 8 x VPP 2, FSDP over one shard rank, interleaved 1F1B after
    the ZB-V candidate of the same split has been bounded (its tail then stood for this one's)."""
    plan, sp, _, _, _ = _space("titan-dense")
    bm = BoundModel(plan, sp)
    pair = {}
    for s, h in enumerate(sp.structs):
        k = Knobs(*h, *sp.tables[sp.ctx[s]][0])
        if (k.tp, k.pp, k.vpp, k.cp, k.dp_sharding, k.layout, k.first_stage_layers) == (1, 8, 2, 1, "full", None, None):
            pair.setdefault(k.schedule, s)
    assert set(pair) >= {"zbv", "interleaved_1f1b"}
    bm.tail(pair["zbv"])
    bm.level1_all()
    check_floors(plan, sp, bm, bm.level1_all(), pair["interleaved_1f1b"], 0)
