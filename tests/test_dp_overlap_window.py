"""DP gradient reduction overlapped with the LAST micro-batch's backward (cost/dp_comm.py).

Megatron runs micro-batches 0 .. n-2 under DDP's ``no_sync`` and launches the bucket reduce-scatters in
the last one's backward (megatron/core/pipeline_parallel/schedules.py ``forward_backward_no_pipelining``):
the hiding window is one micro-batch's backward, the same for 1 or 8 micro-batches, and the exposed part
is ``max(one bucket, comm - window)`` (plus the SMs the hidden part takes from the kernels); each bucket is
one NCCL call and pays NCCL's per-call latency (``cost/collectives.py`` ``nccl_call_latency``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost.dp_comm import dp_grad_sync
from primus_launch.projection.cost.fsdp import fsdp_bytes
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.hardware.placement import layout as layout_of
from primus_launch.projection.memory.params import stage_parameter_split


def _plan(gbs: int) -> Plan:
    """NeMo 24.07's GPT3-20B on 64 H100s (TP 2, DP 32, distributed optimizer, overlapped grad reduce)."""
    rows = json.loads((Path(__file__).resolve().parents[1] / "scripts/validation/runs.json").read_text())["rows"]
    plan = Plan.model_validate(next(r for r in rows if r["id"] == "nemo2407_h100_fp8_GPT3-20B_64gpu")["plan"])
    return plan.with_changes(training={"global_batch_size": gbs, "overlap_grad_reduce": True,
                                       "overlap_param_gather": False})


@pytest.mark.parametrize("bwd_win", [0.05, 0.2])
def test_window_is_one_microbatch_backward(bwd_win):
    one, eight = _plan(64), _plan(512)   # micro-batch 2 x DP 32
    assert one.num_microbatches == 1 and eight.num_microbatches == 8
    spec = get_gpu("h100-sxm")
    out = []
    for plan in (one, eight):
        sp_ = stage_parameter_split(plan)[0]
        out.append(dp_grad_sync(plan, spec, layout_of(plan), sp_, 0.0, bwd_win))
    assert out[0] == pytest.approx(out[1], rel=1e-12)
    # exposed: max(one bucket, raw - window) + the SMs the hidden part holds; raw = the reduce-scatter of the
    # stage as one call + NCCL's per-call latency for each further bucket (one NCCL call per Megatron bucket);
    # the parameter all-gather (not overlapped here) likewise, added whole
    plan = eight
    sp_ = stage_parameter_split(plan)[0]
    lay, eb = layout_of(plan), fsdp_bytes(plan)
    buckets = max(1, -(-sp_.total // max(cal.GRAD_BUCKET_PARAMS, 1_000_000 * 32)))
    assert buckets > 100   # 10B parameters per GPU in 40M-parameter buckets
    rs = (coll.reduce_scatter(float(eb.grad * sp_.dense), lay.dp, "h100-sxm")
          + (buckets - 1) * coll.nccl_call_latency("reduce_scatter", lay.dp.size, lay.dp.nodes))
    ag = (coll.all_gather(float(eb.param * sp_.dense), lay.dp, "h100-sxm")
          + (buckets - 1) * coll.nccl_call_latency("all_gather", lay.dp.size, lay.dp.nodes))
    exposed = max(rs / buckets, rs - bwd_win)
    assert out[1] == pytest.approx(exposed + con.displaced(rs - exposed, con.NCCL_SMS, spec.num_sms, spec.arch) + ag,
                                   rel=1e-9)
    # without the overlap Megatron DDP keeps one bucket: one call each, no per-bucket latency
    raw = dp_grad_sync(plan.with_changes(training={"overlap_grad_reduce": False}), spec, lay, sp_, 0.0, bwd_win)
    assert raw == pytest.approx(coll.reduce_scatter(float(eb.grad * sp_.dense), lay.dp, "h100-sxm")
                                + coll.all_gather(float(eb.param * sp_.dense), lay.dp, "h100-sxm"), rel=1e-12)
