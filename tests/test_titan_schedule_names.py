"""The TorchTitan writer names each pipeline schedule a plan can hold as torch names the same schedule, or refuses
it in one line; the tuner never proposes one torchtitan cannot run.

Independent truth: torch 2.13's own ``get_schedule_class`` registry and schedule classes (the torch that
torchtitan 0.3.0 runs): the written name must resolve there, be a ``PipelineScheduleSingle`` exactly at one stage
per rank (torchtitan 0.3.0 ``distributed/pipeline_parallel.py`` refuses the other stage counts), accept the
written micro-batch count (``local_batch_size / pipeline_parallel_microbatch_size``, one schedule step per
torchtitan's ``_build_pipeline_schedule``) and build, action for action, the order the pipeline simulator runs
for the plan (``projection/pipeline/orders.py``).  The plan's ``zb_h1`` (ZB-H1 at one stage per rank) has no
torch class torchtitan can run: ``ScheduleInterleavedZeroBubble`` is multi-stage (refused at one stage per rank)
and at two or more runs the interleaved ZB1P order, another schedule.  It used to be written as
``InterleavedZeroBubble`` at VPP >= 2 and refused at VPP 1 as a ``parallel.vpp`` problem."""

from __future__ import annotations

import tomllib
import typing
from functools import lru_cache
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.adapters.torchtitan import render_torchtitan
from primus_launch.fileio import read_recipe_text
from primus_launch.plan import Plan, PlanError, framework_problems
from primus_launch.plan.sections import PipelineSchedule
from primus_launch.projection.pipeline.orders import KIND_NAMES, schedule_orders
from primus_launch.tuner.space import Space

S = pytest.importorskip("torch.distributed.pipelining.schedules")

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/torchtitan/llama3.1_8b.toml"     # 8 GPUs, local batch 1, no PP
SCHEDULES = typing.get_args(PipelineSchedule)


class _MockStage:
    """What the torch schedules' constructors read from a stage (no process group needed)."""

    def __init__(self, idx: int, n: int, group_size: int):
        import torch
        self.stage_index, self.num_stages, self.group_size, self.group_rank = idx, n, group_size, 0
        self.is_first, self.is_last = idx == 0, idx == n - 1
        self.submod = torch.nn.Identity()


@lru_cache(maxsize=None)
def _base() -> Plan:
    return load_recipe(RECIPE)


def _held(pp: int, vpp: int, schedule: str, mbs: int = 1, gbs: int = 32) -> Plan | None:
    d = _base().model_dump()
    d["parallel"].update(pp=pp, vpp=vpp)
    d["training"].update(pipeline_schedule=schedule, micro_batch_size=mbs, global_batch_size=gbs)
    try:
        return Plan.model_validate(d)
    except Exception:   # the plan cannot hold this combination (its own legality): nothing to write
        return None


def _torch_orders(cls, pp: int, vpp: int, m: int) -> dict[int, list[str]]:
    n = pp * vpp
    if issubclass(cls, S.PipelineScheduleSingle):
        sch = cls(_MockStage(0, n, pp), m)
    elif cls in (S.ScheduleZBVZeroBubble, S.ScheduleDualPipeV):
        sch = cls([_MockStage(0, n, pp), _MockStage(n - 1, n, pp)], m)
    else:
        sch = cls([_MockStage(c * pp, n, pp) for c in range(vpp)], m)
    out = {r: [str(a) for a in acts if a is not None and a.computation_type.value in {"F", "B", "I", "W"}]
           for r, acts in sch.pipeline_order.items()}
    if cls is S.Schedule1F1B:   # torch 2.13 numbers the last rank's forwards from 1 (tests/test_pipeline.py)
        out[pp - 1] = [f"{pp - 1}F{int(a.split('F')[1]) - 1}" if "F" in a else a for a in out[pp - 1]]
    return out


def _our_orders(schedule: str, pp: int, vpp: int, m: int) -> dict[int, list[str]]:
    o = schedule_orders(schedule, pp, vpp, m)
    out = {}
    for r, order in enumerate(o.orders):
        acts = []
        for a in order:
            k, _, c, mb = o.decode(a)
            letter = "I" if KIND_NAMES[k] == "B" and o.split_backward else KIND_NAMES[k]
            acts.append(f"{o.global_stage(r, c)}{letter}{mb}")
        out[r] = acts
    return out


CASES = [(s, pp, vpp) for s in SCHEDULES for pp in (2, 4) for vpp in (1, 2, 4)]


@pytest.mark.parametrize("schedule,pp,vpp", CASES)
def test_written_schedule_is_torchs_same_schedule_or_refused(schedule, pp, vpp):
    plan = _held(pp, vpp, schedule)
    if plan is None:
        pytest.skip("the plan cannot hold it")
    try:
        text = render_torchtitan(plan, read_recipe_text(RECIPE))
    except PlanError as e:
        msg = str(e)
        assert "\n" not in msg
        if schedule == "zb_h1":
            assert e.field == "training.pipeline_schedule" and e.value == "zb_h1"
            assert "InterleavedZeroBubble" in msg and "not modelled" in msg
        else:    # torch has the schedule only at the other stage count
            assert e.field == "parallel.vpp" and e.value == vpp
            cls = S.get_schedule_class(msg.split("torchtitan's ")[1].split()[0])
            assert issubclass(cls, S.PipelineScheduleSingle) == (vpp != 1)
        assert framework_problems(plan)      # the tuner's filter refuses the plan too
        return
    assert schedule != "zb_h1"
    job = tomllib.loads(text)
    par, trn = job["parallelism"], job["training"]
    name = par.get("pipeline_parallel_schedule", "1F1B")
    cls = S.get_schedule_class(name)
    assert issubclass(cls, S.PipelineScheduleSingle) == (vpp == 1)
    m = trn["local_batch_size"] // par.get("pipeline_parallel_microbatch_size", 1)
    assert m == plan.num_microbatches        # one torchtitan schedule step runs the plan's micro-batches
    torch_orders = _torch_orders(cls, pp, vpp, m)   # torch's constructor accepts the count
    try:
        ours = _our_orders(schedule, pp, vpp, m)
    except PlanError:   # gpipe at vpp > 1 (LoopedBFS): written, but the simulator has no order for it
        assert schedule == "gpipe" and vpp > 1 and cls is S.ScheduleLoopedBFS
        return
    assert ours == torch_orders


@pytest.mark.parametrize("pp,mbs", [(4, 2), (4, 4), (2, 2)])
def test_1f1b_below_pp_micro_batches_refused(pp, mbs):
    """torch's ``Schedule1F1B`` refuses fewer micro-batches than stages: such a plan is a torchtitan problem."""
    plan = _held(pp, 1, "1f1b", mbs=mbs, gbs=8)
    assert plan is not None and plan.num_microbatches < pp
    with pytest.raises(ValueError):
        S.Schedule1F1B(_MockStage(0, pp, pp), plan.num_microbatches)
    fields = [f for f, _, _ in framework_problems(plan)]
    assert "training.global_batch_size" in fields
    with pytest.raises(PlanError):
        render_torchtitan(plan, read_recipe_text(RECIPE))


def test_unchanged_pipeline_keeps_the_jobs_local_batch():
    """Only a changed pipeline or batch rewrites ``local_batch_size``: an unchanged plan renders byte for byte."""
    text = read_recipe_text(RECIPE)
    assert render_torchtitan(_base(), text) == text


@pytest.mark.parametrize("line", [
    ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "qwen3",
     "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree", "2",
     "--parallelism.tensor_parallel_degree", "4", "--training.disable_cuda_graphs",
     "--parallelism.pipeline_parallel_degree", "2", "--parallelism.pipeline_parallel_schedule",
     "Interleaved1F1B", "--training.local-batch-size=1", "--training.global_batch_size", "64"],
])
def test_tuner_space_proposes_only_what_torchtitan_runs(line):
    """Every pipeline structure of the tuner's space on a TorchTitan plan has a torch schedule of the same name
    that accepts its stage and micro-batch counts (the plan's own rules hold them: no framework problem)."""
    from primus_launch.adapters.command_recipe import plan_from_command
    from primus_launch.plan.torchtitan_split import titan_schedule
    from primus_launch.tuner.space import Knobs, apply_knobs

    plan = plan_from_command(line)
    sp = Space(plan)
    seen = 0
    for s, h in enumerate(sp.structs):
        k = Knobs(*h, *sp.tables[sp.ctx[s]][0])
        if k.pp == 1:
            continue
        p = apply_knobs(plan, k)
        name = titan_schedule(p.training.pipeline_schedule, p.parallel.vpp)
        cls = S.get_schedule_class(name)
        assert issubclass(cls, S.PipelineScheduleSingle) == (p.parallel.vpp == 1), k
        if cls is S.Schedule1F1B:
            assert p.num_microbatches >= p.parallel.pp, k
        seen += 1
    assert seen > 0
