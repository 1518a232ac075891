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
