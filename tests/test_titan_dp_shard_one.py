"""A tuned TorchTitan TOML whose TP x CP x PP takes every GPU re-reads as the plan the tuner scored.

Independent truth: torchtitan 0.3.0's own ``ParallelDims`` (installed package): ``dp_shard = -1`` resolves to
``world // (dp_replicate * cp * tp * pp)`` and ``fsdp_enabled`` is ``dp_shard > 1 or cp > 1``; at a shard
group of one ``fully_shard`` shards nothing (``models/llama3/parallelize.py``), the job a DDP plan
(``dp_sharding = "none"``) describes.  The TOMLs are shaped like LambdaLabsML/torchtitan 0768f5d
``configs/llama3_70b-8xb200-128k.toml`` (TP 4 x FSDP 2) and ``llama3_405b-16xgb300-8k.toml`` (TP 1 with
``enable_async_tensor_parallel = true``), whose tuned copies did not re-read the same.
"""

from __future__ import annotations

import tomllib

import pytest

from primus_launch.adapters.torchtitan import plan_from_text, render_torchtitan
from primus_launch.plan import Cluster, Plan
from primus_launch.projection.api import project

CLUSTER = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)

TOML = """[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
seq_len = 8192
steps = 10

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = {shard}
tensor_parallel_degree = {tp}
enable_async_tensor_parallel = {async_tp}
pipeline_parallel_degree = 1
context_parallel_degree = 1

[activation_checkpoint]
mode = "full"

[compile]
enable = true
components = ["model", "loss"]
"""


def _titan_fsdp(text: str, world: int) -> bool:
    """torchtitan 0.3.0 ``ParallelDims.fsdp_enabled`` of the TOML's ``[parallelism]`` on ``world`` GPUs."""
    from torchtitan.distributed import ParallelDims

    par = tomllib.loads(text)["parallelism"]
    pd = ParallelDims(dp_replicate=par.get("data_parallel_replicate_degree", 1),
                      dp_shard=par.get("data_parallel_shard_degree", -1), cp=par.get("context_parallel_degree", 1),
                      tp=par.get("tensor_parallel_degree", 1), pp=par.get("pipeline_parallel_degree", 1),
                      ep=par.get("expert_parallel_degree", 1), world_size=world, spmd_backend="partial_dtensor")
    return pd.fsdp_enabled


def _same(a: Plan, b: Plan) -> bool:
    return a.model_dump(exclude={"source"}) == b.model_dump(exclude={"source"})


def _round_trip(plan: Plan, tuned: Plan, text: str) -> tuple[str, Plan]:
    out = render_torchtitan(tuned, text)
    back = plan_from_text(out, CLUSTER)
    return out, back


@pytest.mark.parametrize("shard", [2, -1])
def test_tp_over_every_gpu_leaves_fsdp_over_one_rank_as_torchtitan_runs_it(shard):
    text = TOML.format(shard=shard, tp=4, async_tp="true")
    plan = plan_from_text(text, CLUSTER)
    assert plan.parallel.dp_sharding == "full" and _titan_fsdp(text, 8)
    tuned = plan.with_changes(parallel={"tp": 8, "sequence_parallel": True})
    out, back = _round_trip(plan, tuned, text)
    # the plan says what torchtitan runs: FSDP iff ParallelDims.fsdp_enabled of the TOML written for it
    assert (tuned.parallel.dp_sharding == "full") == _titan_fsdp(out, 8) is False
    assert tuned.training.overlap_param_gather is False and tuned.parallel.dp_replicate == 1
    assert _same(back, tuned)
    a, b = project(tuned), project(back)
    assert (a.iteration_time_s, a.memory.peak_bytes_per_gpu) == (b.iteration_time_s, b.memory.peak_bytes_per_gpu)


def test_full_over_one_rank_projects_as_the_none_plan_it_becomes():
    """The normal form changes neither memory nor time: a plan built without validation (the tuner's
    ``apply_knobs``: ``model_copy``) saying FSDP over one rank projects as its normal form."""
    text = TOML.format(shard=-1, tp=8, async_tp="false")
    plan = plan_from_text(text, CLUSTER)
    assert plan.parallel.dp_sharding == "none" and not _titan_fsdp(text, 8)
    raw = plan.model_copy(update={"parallel": plan.parallel.model_copy(update={"dp_sharding": "full"}),
                                  "training": plan.training.model_copy(update={"overlap_param_gather": True})})
    norm = Plan.model_validate(raw.model_dump())
    assert _same(norm, plan)
    a, b = project(raw), project(norm)
    assert (a.iteration_time_s, a.memory.peak_bytes_per_gpu) == (b.iteration_time_s, b.memory.peak_bytes_per_gpu)


def test_fsdp_over_cp_is_kept():
    """CP > 1 is an FSDP mesh of cp ranks (ParallelDims.fsdp_enabled = ... or cp > 1): no rewrite."""
    text = TOML.format(shard=-1, tp=4, async_tp="false").replace("context_parallel_degree = 1",
                                                                  "context_parallel_degree = 2")
    plan = plan_from_text(text, CLUSTER)
    assert plan.dp == 1 and plan.parallel.dp_sharding == "full" and _titan_fsdp(text, 8)


@pytest.mark.parametrize("want", [False, True])
def test_async_tp_inert_at_tp1_is_written_for_tp2(want):
    """``enable_async_tensor_parallel = true`` at TP 1 reads as no async TP (nothing to overlap); the tuned
    TP 2 copy re-reads with the async TP the tuned plan has, on or off."""
    text = TOML.format(shard=-1, tp=1, async_tp="true")
    plan = plan_from_text(text, CLUSTER)
    assert plan.training.tp_comm_overlap is False
    tuned = plan.with_changes(parallel={"tp": 2, "sequence_parallel": True}, training={"tp_comm_overlap": want})
    out, back = _round_trip(plan, tuned, text)
    assert tomllib.loads(out)["parallelism"]["enable_async_tensor_parallel"] is want
    assert _same(back, tuned)


def test_megatron_fsdp_at_dp1_stays_full():
    """Megatron-FSDP / torch FSDP2 at DP 1 still build their own buffers (a different job from DDP): the
    normal form leaves Megatron plans as written."""
    text = TOML.format(shard=-1, tp=8, async_tp="false")
    titan = plan_from_text(text, CLUSTER)
    data = titan.model_dump()
    data["source"] = None  # a plan of no recipe is a Megatron plan
    data["parallel"]["dp_sharding"] = "full"
    data["training"]["overlap_param_gather"] = True
    mega = Plan.model_validate(data)
    assert mega.framework == "megatron" and mega.dp == 1 and mega.parallel.dp_sharding == "full"
