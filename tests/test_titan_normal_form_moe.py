"""A TorchTitan MoE plan and its normal form (``plan/normal_form.py``) project alike: the tuner's unvalidated
copies (``tuner/knobs.py`` ``apply_knobs``) of the qwen3 30B-A3B 0.3 launch line -- among them TP 4 x PP 4 x
EP 2 on 16 GPUs with ``dp_sharding = "full"`` over one shard rank, which validation rewrites to ``"none"`` --
have the time and memory of their validated plans, so the tuner's score is the projection of the plan it
renders (``tuner/answer.py`` ``chosen_plan``: ``validated(apply_knobs(...))``).  Before, that plan projected
3.652 s unvalidated and 3.691 s validated.

Independent truth: torchtitan 0.3.0 (installed) ``distributed/parallel_dims.py`` -- the routed experts' FSDP mesh
``efsdp = dp_shard * cp * tp // ep`` exists whenever ``ep > 1`` and ``apply_fsdp_to_decoder`` shards the experts
on it in both spellings (one TOML): the optimizer of a GPU updates ``dense + experts / efsdp``."""

from __future__ import annotations

import pytest

from primus_launch.plan import Plan
from primus_launch.plan.normal_form import titan_shard_degree
from primus_launch.projection.cost.dp_comm import held_parameters
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.hardware.placement import layout
from primus_launch.projection.memory.params import stage_parameter_split
from primus_launch.tuner.space import Knobs, apply_knobs
from test_tuner_bound_moe_properties import _space


def _one_rank_plans(limit: int = 6):
    plan, sp = _space("titan")
    out = []
    for s, h in enumerate(sp.structs):
        k = Knobs(*h, *sp.tables[sp.ctx[s]][0])
        if k.ep > 1 and k.dp_sharding == "full" and k.mbs == 1:
            p = apply_knobs(plan, k)
            if titan_shard_degree(p) == 1:
                out.append(p)
    assert out   # the reported TP 4 x PP 4 x EP 2 plans are in the space
    return out[:: max(1, len(out) // limit)][:limit]


def _sampled_plans(n: int = 6):
    plan, sp = _space("titan")
    step = max(1, len(sp.structs) // n)
    return [apply_knobs(plan, Knobs(*sp.structs[s], *sp.tables[sp.ctx[s]][0])) for s in range(0, len(sp.structs), step)][:n]


@pytest.mark.parametrize("p", _one_rank_plans() + _sampled_plans())
def test_unvalidated_copy_projects_as_its_validated_plan(p):
    before = p.model_dump()
    v = Plan.model_validate(before)
    a, b = project_dry_run(p), project_dry_run(v)
    assert p.model_dump() == before
    assert a.iteration_time_s == b.iteration_time_s
    assert a.memory.model_dump() == b.memory.model_dump()


def test_expert_optimizer_share_is_torchtitan_efsdp():
    from torchtitan.distributed.parallel_dims import ParallelDims

    seen = 0
    for p in _one_rank_plans():
        v = Plan.model_validate(p.model_dump())
        assert v.parallel.dp_sharding == "none"
        q = v.parallel
        pd = ParallelDims(dp_replicate=v.dp, dp_shard=-1, cp=q.cp, tp=q.tp, pp=q.pp, ep=q.ep, world_size=v.world_size)
        efsdp = pd.dp_shard * pd.cp * pd.tp // pd.ep
        seen += efsdp > 1
        lay = layout(v)
        sp_ = stage_parameter_split(v)[0]
        assert held_parameters(v, lay, sp_) == pytest.approx(sp_.dense + sp_.expert / efsdp)
    assert seen   # TP 4 x EP 2: the experts sharded over 2 ranks


def test_hsdp_expert_optimizer_share_is_torchtitan_efsdp():
    """HSDP (``dp_replicate > 1``): the experts' optimizer shard is ``efsdp`` (the mesh ``["dp_replicate",
    "efsdp"]`` replicates it over the replicas), not expert-DP with the replicas in it -- as memory's ``Se``."""
    from torchtitan.distributed.parallel_dims import ParallelDims

    plan, sp = _space("titan")
    seen = 0
    for s, h in enumerate(sp.structs):
        k = Knobs(*h, *sp.tables[sp.ctx[s]][0])
        if k.ep == 1 or k.dp_sharding != "full" or k.dp_replicate == 1 or k.mbs > 1:
            continue
        v = Plan.model_validate(apply_knobs(plan, k).model_dump())
        q = v.parallel
        pd = ParallelDims(dp_replicate=q.dp_replicate, dp_shard=-1, cp=q.cp, tp=q.tp, pp=q.pp, ep=q.ep,
                          world_size=v.world_size)
        efsdp = pd.dp_shard * pd.cp * pd.tp // pd.ep
        sp_ = stage_parameter_split(v)[0]
        lay = layout(v)
        assert held_parameters(v, lay, sp_) == pytest.approx(sp_.dense / (pd.dp_shard * pd.cp) + sp_.expert / efsdp)
        seen += 1
        if seen >= 4:
            break
    assert seen
