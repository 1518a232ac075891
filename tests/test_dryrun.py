"""Dry-run projection: internal consistency, model identities, and published-run validation."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.dryrun import layer_times_roofline, project_dry_run
from primus_launch.projection.hardware import get_gpu
from primus_launch.projection.iteration import LayerTimes, PassTimes, assemble
from primus_launch.projection.pipeline import simulate, uniform_costs

ROOT = Path(__file__).resolve().parents[1]

LLAMA_70B = ModelArch(num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                      num_query_groups=8, vocab_size=128256, seq_length=8192)
DSV3 = ModelArch(num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, vocab_size=129280,
                 seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                 moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3, multi_latent_attention=True,
                 q_lora_rank=1536, kv_lora_rank=512)


def _llama_plan(**kw) -> Plan:
    par = dict(tp=8, pp=4, vpp=5, sequence_parallel=True, dp_sharding="optimizer")
    par.update(kw.pop("parallel", {}))
    tr = dict(global_batch_size=512, micro_batch_size=1, pipeline_schedule="interleaved_1f1b",
              overlap_grad_reduce=True, overlap_param_gather=True, recompute={"granularity": "selective"})
    tr.update(kw.pop("training", {}))
    return Plan(model=LLAMA_70B, parallel=Parallelism(**par), training=Training(**tr),
                cluster=Cluster(gpu="h100-sxm", num_nodes=kw.pop("nodes", 32)))


def _check_consistent(r, plan):
    assert sum(r.time_breakdown.values()) == pytest.approx(r.iteration_time_s, rel=1e-9)
    assert all(v >= -1e-12 for v in r.time_breakdown.values()), r.time_breakdown
    assert r.tokens_per_sec_per_gpu * r.num_gpus * r.iteration_time_s == pytest.approx(plan.tokens_per_iteration)
    assert 0 < r.mfu <= 1
    assert r.model_tflops_per_gpu * 1e12 == pytest.approx(r.mfu * get_gpu(plan.cluster.gpu).peak_flops(
        plan.training.precision))
    assert r.memory.peak_bytes_per_gpu > 0


def test_llama70b_consistent_breakdown():
    plan = _llama_plan()
    r = project_dry_run(plan, record_timeline=True)
    _check_consistent(r, plan)
    assert r.time_breakdown["bubble"] > 0 and r.time_breakdown["tp_comm"] > 0 and r.time_breakdown["pp_comm"] > 0
    kinds = {e.kind for e in r.timeline}
    assert {"F", "BW", "optimizer"} <= kinds
    assert max(e.end_s for e in r.timeline) == pytest.approx(r.iteration_time_s, rel=1e-9)


def test_deepseek_v3_moe_mla_consistent():
    plan = Plan(model=DSV3, parallel=Parallelism(tp=2, etp=1, pp=16, ep=64, sequence_parallel=True, dp_sharding="optimizer",
                                                 pipeline_layers_first_stage=2, pipeline_layers_last_stage=3),
                training=Training(global_batch_size=1024, pipeline_schedule="zb_h1", recompute={"granularity": "full"}),
                cluster=Cluster(gpu="h100-sxm", num_nodes=128))
    r = project_dry_run(plan)
    _check_consistent(r, plan)
    assert r.time_breakdown["ep_comm"] > 0
    lt = layer_times_roofline(plan)
    assert lt.moe_layer is not None and lt.moe_layer.fwd_s > 0


def test_layer_op_times_sum_to_layer_times():
    """scripts/explain_projection.py's per-kernel list is the same model as the layer times."""
    from primus_launch.projection.dryrun import layer_op_times

    plan = Plan(model=DSV3, parallel=Parallelism(tp=1, pp=4, ep=64, pipeline_layers_first_stage=14,
                                                 pipeline_layers_last_stage=15, dp_sharding="full"),
                training=Training(global_batch_size=512), cluster=Cluster(gpu="h100-sxm", num_nodes=32))
    lt, ops = layer_times_roofline(plan), layer_op_times(plan)
    for kind, pt in (("dense", lt.dense_layer), ("moe", lt.moe_layer), ("embedding", lt.embedding),
                     ("head", lt.head_loss)):
        assert sum(o[1] for o in ops[kind]) == pytest.approx(pt.fwd_s, rel=1e-9)
        assert sum(o[2] for o in ops[kind]) == pytest.approx(pt.bwd_input_s, rel=1e-9)
        assert sum(o[3] for o in ops[kind]) == pytest.approx(pt.bwd_weight_s, rel=1e-9)
    names = [o[0] for o in ops["moe"]]
    assert any(n.startswith("experts (grouped) FC1 [8192x4096x7168] x4") for n in names)   # 4096*64*8/256 tokens
    # permute / unpermute move each of the T*k routed copies once (read + write h bf16), and their
    # backward is the mirror gather / scatter of the same bytes
    from primus_launch.projection.compute import elementwise_time

    one = elementwise_time(2.0 * 4096 * 8 * 7168 * 2, "h100-sxm")
    for name, f, bi, bw in ops["moe"]:
        if name in ("permute", "unpermute + weighted combine"):
            assert (f, bi, bw) == pytest.approx((one, one, 0.0), rel=1e-12)


def test_deepep_dispatcher_field():
    """``moe_token_dispatcher`` defaults to the per-expert all-to-all (unchanged projections); DeepEP's
    one-copy-per-rank/node dispatch cuts the EP time by the fan-out ratio of the routing."""
    from primus_launch.projection import collectives as coll
    from primus_launch.projection.iteration import _ep_times
    from primus_launch.projection.layout import layout
    from primus_launch.projection.moe_routing import expected_units_hit

    par = Parallelism(tp=1, pp=4, ep=64, pipeline_layers_first_stage=14, pipeline_layers_last_stage=15,
                      dp_sharding="full")
    base = Plan(model=DSV3, parallel=par, training=Training(global_batch_size=512),
                cluster=Cluster(gpu="h100-sxm", num_nodes=32))
    assert base.training.moe_token_dispatcher == "alltoall"
    lay = layout(base)
    a2a = coll.all_to_all(float(4096 * 8 * 7168 * 2), lay.ep, "h100-sxm")
    assert _ep_times(base, "h100-sxm", lay) == pytest.approx((2 * a2a, 2 * a2a), rel=1e-12)
    grouped = DSV3.model_copy(update={"moe_router_num_groups": 8, "moe_router_group_topk": 4})
    dee = base.with_changes(model=grouped.model_dump(), training={"moe_token_dispatcher": "deepep"})
    f, _ = _ep_times(dee, "h100-sxm", lay)
    # inter-node bound: per-expert copies leaving the node 8*56/64 = 7 vs DeepEP's distinct remote nodes
    d_remote = expected_units_hit(256, 8, 32, 8, 4) * 7 / 8
    g = get_gpu("h100-sxm")
    assert (f / 2 - 2 * g.inter_node_latency_s) / (a2a - 63 * g.inter_node_latency_s) == pytest.approx(
        d_remote / 7, rel=1e-9)
    r0, r1 = project_dry_run(base), project_dry_run(dee)
    _check_consistent(r1, dee)
    assert r1.time_breakdown["ep_comm"] < r0.time_breakdown["ep_comm"]
    assert r1.time_breakdown["compute"] == pytest.approx(r0.time_breakdown["compute"], rel=1e-12)
    for bad in ({"moe_router_num_groups": 8}, {"moe_router_num_groups": 8, "moe_router_group_topk": 9},
                {"moe_router_num_groups": 32, "moe_router_group_topk": 0}, {"moe_router_num_groups": 256,
                                                                            "moe_router_group_topk": 4}):
        with pytest.raises(ValueError):
            Plan(model={**DSV3.model_dump(), **bad}, parallel=par, training=Training(global_batch_size=512),
                 cluster=Cluster(gpu="h100-sxm", num_nodes=32))


def test_single_stage_equals_sum_of_layers():
    """pp=1, no communication: the iteration is m x (all layers + embedding + head) + optimizer."""
    plan = Plan(model=LLAMA_70B.model_copy(update={"num_layers": 4}), parallel=Parallelism(tp=1),
                training=Training(global_batch_size=4, micro_batch_size=1), cluster=Cluster(num_nodes=1, gpus_per_node=1))
    lt = layer_times_roofline(plan)
    r = assemble(plan, lt, "dry-run")
    per_mb = 4 * lt.dense_layer.total_s + lt.embedding.total_s + lt.head_loss.total_s
    assert r.time_breakdown["compute"] == pytest.approx(4 * per_mb, rel=1e-9)
    assert r.time_breakdown["bubble"] == pytest.approx(0.0, abs=1e-12)
    assert r.iteration_time_s == pytest.approx(4 * per_mb + r.time_breakdown["optimizer"], rel=1e-9)


def test_measured_layer_times_feed_the_same_assembly():
    """The hybrid path passes measured LayerTimes: uniform per-stage costs reproduce the pipeline
    simulator's makespan (1F1B) when communication is absent."""
    plan = Plan(model=LLAMA_70B.model_copy(update={"num_layers": 8}), parallel=Parallelism(tp=1, pp=4),
                training=Training(global_batch_size=16, micro_batch_size=1), cluster=Cluster(num_nodes=1, gpus_per_node=4))
    z = PassTimes(0.0, 0.0, 0.0)
    lt = LayerTimes(dense_layer=PassTimes(0.01, 0.012, 0.008), moe_layer=None, embedding=z, head_loss=z)
    r = assemble(plan, lt, "measured")
    makespan = simulate("1f1b", 4, 1, 16, uniform_costs(4, 1, 0.02, 0.024, 0.016), 0.0).makespan_s
    assert r.time_breakdown["compute"] + r.time_breakdown["bubble"] == pytest.approx(makespan, rel=1e-9)
    assert r.mode == "measured"
    # without an attention split, selective recompute is charged the roofline's attention share
    sel = plan.with_changes(training={"recompute": {"granularity": "selective"}})
    r_sel = assemble(sel, lt, "measured")
    roof = layer_times_roofline(sel)
    share = roof.attn_core.fwd_s / roof.dense_layer.total_s
    extra = 16 * 2 * share * lt.dense_layer.total_s          # 16 micro-batches x 2 layers per stage
    assert r_sel.time_breakdown["compute"] > r.time_breakdown["compute"]
    assert r_sel.time_breakdown["compute"] - r.time_breakdown["compute"] == pytest.approx(extra, rel=1e-9)


def test_recompute_and_overlap_move_time_the_right_way():
    base = project_dry_run(_llama_plan())
    full = project_dry_run(_llama_plan(training={"recompute": {"granularity": "full"}}))
    none = project_dry_run(_llama_plan(training={"recompute": {"granularity": "none"}}))
    assert none.iteration_time_s < base.iteration_time_s < full.iteration_time_s
    ovl = project_dry_run(_llama_plan(training={"tp_comm_overlap": True}))
    from primus_launch.projection import calibration as cal

    assert ovl.time_breakdown["tp_comm"] == pytest.approx((1 - cal.TP_OVERLAP_HIDDEN) * base.time_breakdown["tp_comm"])
    no_dp_ovl = project_dry_run(_llama_plan(training={"overlap_grad_reduce": False, "overlap_param_gather": False}))
    assert no_dp_ovl.time_breakdown["dp_comm"] > base.time_breakdown["dp_comm"]
    # model FLOPs do not count recompute
    assert full.model_flops_per_iteration == base.model_flops_per_iteration


# ---------------- validation against published runs (issue 3) ----------------

def _validation():
    sys.path.insert(0, str(ROOT / "scripts"))
    from validate import evaluate, load_rows

    return evaluate(load_rows())


@pytest.fixture(scope="module")
def validation_results():
    return _validation()


def test_judge_rows_within_issue_bound(validation_results):
    judge = {r["id"]: r for r in validation_results if r["role"] == "judge"}
    # a held-out row of each independent source family stays within the issue's 25 %
    for rid in ("korthikanti2022_175B_sp_selective", "narayanan2021_table1_145.6B",
                "llmfoundry_h100_80gb_large_mpt30b_seq2048_512gpu", "torchtitan_h100_70b_256gpu_asynctp",
                "torchtitan_a100_llama370b_64gpu_bs1_full"):
        assert abs(judge[rid]["err"]) <= 0.25, (rid, judge[rid])


def test_judge_median_dense_error(validation_results):
    dense = [abs(r["err"]) for r in validation_results if r["role"] == "judge" and r["dense"]]
    assert len(dense) >= 25
    assert statistics.median(dense) <= 0.10


def test_runs_file_is_complete():
    rows = json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]
    for r in rows:
        assert r["source"] and r["plan"]["cluster"]["gpu"] and r["measured_tokens_per_sec_per_gpu"] > 0
        assert r["role"] in ("calibration", "judge")


def test_reader_warnings_reach_the_result():
    """Flags a reader could not model (plan.source.unmodelled) come back in the result's warnings."""
    from primus_launch.plan import Source, UnmodelledFlag
    from primus_launch.projection.api import project

    w = UnmodelledFlag(flag="--some-flag", value="1", effect="time: something")
    plan = Plan(model=ModelArch(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                                vocab_size=32000, seq_length=2048),
                training=Training(global_batch_size=8), cluster=Cluster(gpus_per_node=8),
                source=Source(framework="megatron", unmodelled=[w]))
    assert project(plan).warnings == [w]
    assert project(plan.model_copy(update={"source": None})).warnings == []
