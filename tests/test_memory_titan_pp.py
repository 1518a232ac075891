"""TorchTitan pipeline parallelism: the memory model per stage and per term vs torchtitan 0.3.0's own
pipelined step traced on the CPU (:func:`titan_trace.trace_pp`: torchtitan's ``pipeline_llm`` with its
splitter, ``parallelize_llama`` per model part (FSDP2, AC), the torch.distributed.pipelining schedule
torchtitan builds, its loss; one process per PP rank on a fake process group, ``FakeTensorMode``).

Shapes: Llama 3 8B blocks at real sizes (h 4096, F 14336, vocab 128256), 2-6 blocks split by
torchtitan's splitter (embedding and norm + head weigh one block each), sequence 512, 3-6 micro-batches.
Per stage, at the traced peak of the second step, within 3 % each: the total, the fp32 parameter shards
(+ RoPE buffers), the optimizer states, the gradients (sharded + fp32 unsharded accumulated), the
unsharded bf16 parameters FSDP holds, the pipeline's receive buffers, and the rest (activations in flight
and the transients of the moment).  The model side is :func:`memory.titan_stage_parts` with
:data:`memory_titan.TITAN_CPU` (what the CPU kernels keep).
"""

from __future__ import annotations

import pytest

from titan_trace import TitanCase, trace_pp
from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.plan import Plan
from primus_launch.projection.memory.estimate import titan_args, titan_stage_parts
from primus_launch.projection.memory.titan import TITAN_CPU, torch_pp_ops

SCHED = {"1F1B": "1f1b", "GPipe": "gpipe", "Interleaved1F1B": "interleaved_1f1b"}


def pp_plan(c: TitanCase) -> Plan:
    """The plan of a traced case, its layers placed as torchtitan's splitter places them."""
    from torchtitan.distributed.pipeline_parallel import _generate_llm_fqn_per_model_part

    vpp = 2 if c.schedule == "Interleaved1F1B" else 1
    fqns = _generate_llm_fqn_per_model_part(c.pp * vpp, c.layers, 1, 1)
    layout = "|".join(("E" if "tok_embeddings" in ms else "") + "t" * sum(x.startswith("layers.") for x in ms)
                      + ("L" if "lm_head" in ms else "") for ms in fqns)
    arch = arch_from_flavor(c.model, c.flavor).model_copy(update=dict(num_layers=c.layers, seq_length=c.seq))
    rc = {"none": dict(granularity="none"), "full": dict(granularity="full", method="uniform", num_layers=1),
          "op": dict(granularity="op")}[c.ac]
    return Plan(model=arch,
                parallel=dict(pp=c.pp, vpp=vpp, dp_sharding="full", dp_replicate=c.dp_replicate, pipeline_layout=layout,
                              fsdp_reshard_after_forward=c.reshard_after_forward),
                training=dict(global_batch_size=c.mbs * c.nmb * c.dp_shard * c.dp_replicate, micro_batch_size=c.mbs,
                              recompute=rc, pipeline_schedule=SCHED[c.schedule], attention_backend="flash"),
                cluster=dict(gpus_per_node=c.world), source=dict(framework="torchtitan"))


CASES = {
    "1f1b-pp4": TitanCase(pp=4, dp_shard=2, layers=4, seq=512, nmb=4),
    "1f1b-pp2-ddp": TitanCase(pp=2, dp_shard=1, layers=2, seq=512, nmb=3),
    "1f1b-pp2-fullac": TitanCase(pp=2, dp_shard=2, layers=2, seq=512, nmb=3, ac="full"),
    "gpipe-pp2-opac": TitanCase(pp=2, dp_shard=2, layers=2, seq=512, nmb=3, ac="op", schedule="GPipe"),
    "1f1b-pp2-reshard-always": TitanCase(pp=2, dp_shard=2, layers=2, seq=512, nmb=3, reshard_after_forward="always"),
    "interleaved-pp2-vpp2": TitanCase(pp=2, dp_shard=2, layers=4, seq=512, nmb=4, schedule="Interleaved1F1B"),
}
MiB = 2**20


def terms_of_trace(res: dict) -> dict[str, float]:
    ap = res["at_peak"]
    t = {"total": res["peak"], "parameters": ap["sharded_params"] + ap["buffers"], "optimizer": ap["optimizer"],
         "gradients": ap["sharded_grads"] + ap["accumulated_grads"], "held": ap["unsharded_params"],
         "recv": ap["recv_buffers"]}
    t["rest"] = t["total"] - sum(t[k] for k in ("parameters", "optimizer", "gradients", "held", "recv"))
    return t


def terms_of_model(st, parts: dict) -> dict[str, float]:
    return {"total": st.allocated_bytes, "parameters": st.parameters_bytes, "optimizer": st.optimizer_bytes,
            "gradients": st.gradients_bytes, "held": parts["held"], "recv": parts["recv"],
            "rest": st.activations_bytes - parts["recv"] + st.transient_bytes - parts["held"]}


@pytest.mark.parametrize("name", list(CASES))
def test_pp_stage_per_term_within_3pct(name):
    c = CASES[name]
    model = titan_stage_parts(*titan_args(pp_plan(c)), TITAN_CPU)
    assert len(model) == c.pp
    for rank in range(c.pp):
        got = terms_of_trace(trace_pp(c, rank))
        want = terms_of_model(*model[rank])
        for term, v in got.items():
            assert want[term] == pytest.approx(v, rel=0.03, abs=MiB), (name, rank, term, want[term] / MiB, v / MiB)


def test_torch_pp_ops_match_torch_schedules():
    """The walk's per-rank action order equals torch's own ``pipeline_order`` / 1F1B / GPipe loops."""
    from torch.distributed.pipelining.schedules import ScheduleInterleaved1F1B, _ComputationType

    class _St:  # what the schedule reads of its stages when only computing the order
        def __init__(self, rank, pp):
            self.group_size, self.group_rank, self.stage_index = pp, rank, rank

    for pp, vpp, nmb in [(2, 2, 4), (4, 2, 8), (4, 3, 8), (2, 2, 6), (4, 2, 6)]:
        for rank in range(pp):
            sch = ScheduleInterleaved1F1B.__new__(ScheduleInterleaved1F1B)
            sch.pp_group_size, sch.n_local_stages, sch.rank, sch._n_microbatches = pp, vpp, rank, nmb
            sch.number_of_rounds = max(1, nmb // pp)
            sch.microbatches_per_round = nmb // sch.number_of_rounds
            ref = [("F" if a.computation_type == _ComputationType.FORWARD else "B", a.stage_index // pp, a.microbatch_index)
                   for a in sch._calculate_single_rank_operations(rank) if a is not None]
            assert torch_pp_ops("interleaved_1f1b", pp, vpp, nmb, rank) == ref, (pp, vpp, nmb, rank)
    # single-stage: 1F1B keeps min(nmb, pp - rank) forwards in flight, GPipe all
    ops = torch_pp_ops("1f1b", 4, 1, 8, 1)
    assert [o[0] for o in ops[:4]] == ["F", "F", "F", "B"] and len(ops) == 16
    assert torch_pp_ops("gpipe", 4, 1, 3, 0) == [("F", 0, i) for i in range(3)] + [("B", 0, i) for i in range(3)]
