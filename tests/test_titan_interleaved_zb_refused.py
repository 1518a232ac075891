"""torchtitan's ``InterleavedZeroBubble`` is refused at read, in one line naming it: torch's
``ScheduleInterleavedZeroBubble`` is a ``PipelineScheduleMulti`` (torchtitan 0.3.0
``distributed/pipeline_parallel.py``: a multi-stage schedule "requires at least 2 stages per rank"), while the
pipeline simulator's ``zb_h1`` is ZB-H1 at one stage per rank (``projection/pipeline/orders.py``).  The reader
used to map it to ``zb_h1`` at VPP 2, and the projection refused it as "schedule zb_h1 needs vpp == 1"."""

from __future__ import annotations

import pytest

from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.plan import PlanError

pytest.importorskip("torchtitan")


def _line(schedule: str) -> list[str]:
    return ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3",
            "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree", "2",
            "--parallelism.tensor_parallel_degree", "4", "--parallelism.pipeline_parallel_degree", "2",
            "--parallelism.pipeline_parallel_schedule", schedule, "--training.local-batch-size=1",
            "--training.global_batch_size", "64", "--training.disable_cuda_graphs"]


def test_interleaved_zero_bubble_is_refused_by_name():
    from torch.distributed.pipelining.schedules import PipelineScheduleMulti, get_schedule_class

    assert issubclass(get_schedule_class("InterleavedZeroBubble"), PipelineScheduleMulti)
    with pytest.raises(PlanError) as e:
        plan_from_command(_line("InterleavedZeroBubble"))
    msg = str(e.value)
    assert "\n" not in msg and "InterleavedZeroBubble" in msg and "not modelled" in msg and "zb_h1" not in msg


@pytest.mark.parametrize("schedule,plan_schedule", [("Interleaved1F1B", "interleaved_1f1b"), ("ZBVZeroBubble", "zbv")])
def test_other_multi_stage_schedules_still_read(schedule, plan_schedule):
    p = plan_from_command(_line(schedule))
    assert (p.training.pipeline_schedule, p.parallel.vpp) == (plan_schedule, 2)
