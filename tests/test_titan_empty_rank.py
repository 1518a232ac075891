"""A TorchTitan placement that leaves one PP rank no module (user20).

torchtitan 0.3.0 builds a model part from the module names it is given (``module_fqns_per_model_part``,
``distributed/pipeline_parallel.py`` ``_split_module``): a part with none keeps no parameter, so that rank holds
no weights, gradients, optimizer state nor activations.  The tuner's nearest first/last placement of
torchtitan's ZB-V split of gpt-oss-20b's 24 layers over 8 x 2 stages (``plan_layout`` -> first 0, last 0)
leaves rank 7 both its chunks empty; its memory walk had no level and ``--tune`` of
``torchtitan.train --module gpt_oss --config gpt_oss_20b`` on 32 GPUs ended in an internal error.
"""

from __future__ import annotations

from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.plan import Plan
from primus_launch.plan.layout import virtual_stages
from primus_launch.projection.memory.estimate import stage_memory


def _zbv_plan(first: int, last: int) -> Plan:
    arch = arch_from_flavor("llama3", "8B").model_copy(update=dict(num_layers=8, seq_length=2048))
    return Plan(model=arch,
                parallel=dict(pp=4, vpp=2, dp_sharding="full", pipeline_layers_first_stage=first,
                              pipeline_layers_last_stage=last),
                training=dict(global_batch_size=16, micro_batch_size=1, pipeline_schedule="zbv",
                              recompute=dict(granularity="none"), attention_backend="flash"),
                cluster=dict(gpus_per_node=8), source=dict(framework="torchtitan"))


def test_rank_without_module_holds_no_model_state():
    plan = _zbv_plan(0, 0)
    stages = virtual_stages(plan)
    # ZB-V: rank 3 runs virtual stages 3 and 4 (layout.stage_position): both empty at first = last = 0
    assert stages[3] == "" and stages[4] == ""
    mem = stage_memory(plan)
    assert len(mem) == 4
    empty = mem[3]
    assert empty.parameters_bytes == 0 and empty.gradients_bytes == 0 and empty.optimizer_bytes == 0
    assert empty.activations_bytes == 0
    # the ranks with layers hold what a rank holds (the walk over their modules is unchanged)
    assert all(m.parameters_bytes > 0 and m.activations_bytes > 0 for m in mem[:3])
    assert empty.total_bytes < min(m.total_bytes for m in mem[:3])
