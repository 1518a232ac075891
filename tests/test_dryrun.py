"""Dry-run projection: internal consistency, model identities, and published-run validation."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.iteration import assemble
from primus_launch.projection.layer_times import LayerTimes, PassTimes
from primus_launch.projection.pipeline.simulate import simulate, uniform_costs

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
    from primus_launch.projection.cost.roofline import layer_op_times

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
    # backward is the mirror gather / scatter of the same bytes; kernel times carry the framework's
    # in-situ efficiency (calibration.FRAMEWORK_EFF)
    from primus_launch.projection.cost import calibration as cal
    from primus_launch.projection.cost.compute import elementwise_time

    one = elementwise_time(2.0 * 4096 * 8 * 7168 * 2, "h100-sxm") / cal.framework_eff("megatron")
    for name, f, bi, bw, _ in ops["moe"]:
        if name in ("permute", "unpermute + weighted combine"):
            assert (f, bi, bw) == pytest.approx((one, one, 0.0), rel=1e-12)


def test_deepep_dispatcher_field():
    """``moe_token_dispatcher`` defaults to the per-expert all-to-all (unchanged projections); DeepEP's
    one-copy-per-rank/node dispatch cuts the EP time by the fan-out ratio of the routing."""
    from primus_launch.projection.cost import collectives as coll
    from primus_launch.projection.cost.ep_comm import ep_layer_comm
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.cost.moe_routing import expected_units_hit

    par = Parallelism(tp=1, pp=4, ep=64, pipeline_layers_first_stage=14, pipeline_layers_last_stage=15,
                      dp_sharding="full")
    base = Plan(model=DSV3, parallel=par, training=Training(global_batch_size=512),
                cluster=Cluster(gpu="h100-sxm", num_nodes=32))
    assert base.training.moe_token_dispatcher == "alltoall"
    lay = layout(base)
    a2a = coll.all_to_all(float(4096 * 8 * 7168 * 2), lay.ep, "h100-sxm")
    # megatron's alltoall dispatcher: the token-count all-gather (forward), the tokens' and their
    # probs' all-to-alls and the combine's (moe_dispatch module doc), each mirrored in backward
    cnt = coll.all_gather(float(64 * 256 * 8), lay.ep, "h100-sxm")
    pa2a = coll.all_to_all(float(4096 * 8 * 2), lay.ep, "h100-sxm")
    # priced for the busiest EP rank (cost/moe_imbalance.py: the default router's aux-loss spread)
    from primus_launch.projection.cost.moe_imbalance import plan_imbalance

    busiest = 1 + plan_imbalance(base).delta
    assert busiest > 1.0
    assert ep_layer_comm(base, get_gpu("h100-sxm"), lay) == pytest.approx(((cnt + 2 * a2a + pa2a) * busiest,
                                                                          (2 * a2a + pa2a) * busiest), rel=1e-12)
    grouped = DSV3.model_copy(update={"moe_router_num_groups": 8, "moe_router_group_topk": 4})
    dee = base.with_changes(model=grouped.model_dump(), training={"moe_token_dispatcher": "deepep"})
    f, _ = ep_layer_comm(dee, get_gpu("h100-sxm"), lay)
    # inter-node bound: per-expert copies leaving the node 8*56/64 = 7 vs DeepEP's distinct remote
    # nodes, each over the NIC at its fitted efficiency (NCCL all-to-all vs DeepEP's RDMA kernels)
    d_remote = expected_units_hit(256, 8, 32, 8, 4) * 7 / 8
    g = get_gpu("h100-sxm")
    fab = coll.fabric("h100-sxm")
    tok = 4096 * 7168 * 2
    assert f / 2 / (1 + plan_imbalance(dee).delta) == pytest.approx(
        tok * d_remote / (fab.e_rdma["deepep"] * g.inter_node_bw) + 2 * g.inter_node_latency_s + fab.l_a2a, rel=1e-9)
    assert a2a == pytest.approx(tok * 7 / (fab.e_nic_a2a * g.inter_node_bw) + fab.l_nic_a2a, rel=1e-9)
    r0, r1 = project_dry_run(base), project_dry_run(dee)
    _check_consistent(r1, dee)
    assert r1.time_breakdown["ep_comm"] < r0.time_breakdown["ep_comm"]
    # the all-to-all dispatcher also sorts the received tokens by local expert (and back): DeepEP's
    # kernels do not (Megatron token_dispatcher.py sort_chunks_by_idxs)
    from primus_launch.projection.cost.roofline import layer_op_times

    sort = sum(f + bi + bw for name, f, bi, bw, _ in layer_op_times(base)["moe"] if "sort chunks" in name)
    assert sort > 0 and not any("sort chunks" in o[0] for o in layer_op_times(dee)["moe"])
    assert r1.time_breakdown["compute"] < r0.time_breakdown["compute"]
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
    from primus_launch.projection.cost import collectives as coll

    p2p = coll.p2p(float(8192 * 8192 * 2), False, plan.cluster.gpu)
    makespan = simulate("1f1b", 4, 1, 16, uniform_costs(4, 1, 0.02, 0.024, 0.016), p2p).makespan_s
    bd = r.time_breakdown
    assert bd["compute"] + bd["bubble"] + bd["pp_comm"] == pytest.approx(makespan, rel=1e-9)
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
    # TE userbuffers pipeline the TP collectives with the layer's GEMMs: at least the first of tp
    # chunks stays exposed
    assert base.time_breakdown["tp_comm"] / 8 <= ovl.time_breakdown["tp_comm"] < base.time_breakdown["tp_comm"]
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


def test_judge_rows_meet_issue_15_targets(validation_results):
    """Issue 15 on the shared set's judge rows (older papers / benchmarks, NeMo FP8 and long-sequence,
    AutoModel): judge median <= 7%, dense BF16, dense FP8 and long-sequence / CP groups <= 10%, no
    judge row beyond 25% (the closest, AutoModel DeepSeek-V3 on 1,024 GPUs, reads about +25%: see
    scripts/validation/README.md for what of it is still unexplained)."""
    judge = [r for r in validation_results if r["role"] == "judge" and not r["held_out"]]
    assert len(judge) >= 80
    assert statistics.median(abs(r["err"]) for r in judge) <= 0.07
    for group, bound in (("dense_bf16", 0.10), ("dense_fp8", 0.10), ("long_seq_cp", 0.10)):
        sel = [abs(r["err"]) for r in judge if r["primary"] == group]
        assert len(sel) >= 5 and statistics.median(sel) <= bound, (group, statistics.median(sel))
    nemo = [r for r in judge if r["group"].startswith("nemo")]
    assert len(nemo) == 19   # every NeMo FP8 and long-sequence row is a judge row
    assert max(abs(r["err"]) for r in judge) <= 0.25


def test_held_out_rows_never_calibrate(validation_results):
    from primus_launch.projection.cost import calibration as cal

    held = {r["id"] for r in validation_results if r["held_out"]}
    assert held and not held & set(cal.CALIBRATION_ROWS)
    # the exceptions: the row each unstated power cap is fitted on (it fits that machine's cap only) and the row the
    # ROCm legacy grouped_gemm per-GEMM host cost is fitted on (that constant only) and the two H100 hybrid rows the
    # Mamba-2 SSD training factor is fitted on (that constant only)
    assert {r["id"] for r in validation_results if r["held_out"] and r["role"] != "judge"} == \
        set(cal.POWER_LIMIT_ROWS.values()) | {cal.ROCM_LEGACY_GEMM_ROW} | set(cal.MAMBA_SSD_ROWS)


def test_runs_file_is_complete():
    rows = json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]
    for r in rows:
        assert r["source"] and r["plan"]["cluster"]["gpu"] and r["measured_tokens_per_sec_per_gpu"] > 0
        assert r["role"] in ("calibration", "judge")
        assert r["groups"]["primary"] in ("dense_bf16", "dense_fp8", "moe", "long_seq_cp")


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


# ---------------- framework profile: host time, CUDA graphs, fusions (issue 15) ----------------

def _small_moe(**tr) -> Plan:
    """A small-expert MoE (Qwen3-30B-A3B-like width, 4 layers) on one B200: the experts' GEMMs are tiny."""
    m = ModelArch(num_layers=4, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32, num_query_groups=4,
                  head_dim=128, vocab_size=151936, seq_length=1024, num_experts=128, moe_router_topk=8,
                  moe_ffn_hidden_size=768)
    return Plan(model=m, parallel=Parallelism(ep=8), training=Training(global_batch_size=8, **tr),
                cluster=Cluster(gpu="b200", num_nodes=1))


def test_small_moe_is_host_bound_and_cuda_graphs_remove_it():
    """Eager launches (t_launch fitted to the B200 eager / CUDA-graph benchmark) exceed the GPU time
    of a small MoE layer, so the layer takes kernels x t_launch; CUDA graphs replace that by one
    graph launch per pass; one GEMM per expert (moe_grouped_gemm off) launches more kernels."""
    from primus_launch.projection.cost.framework import GRAPH_LAUNCH_S, profile_of
    from primus_launch.projection.cost.roofline import layer_op_times

    eager = _small_moe()
    ops = layer_op_times(eager)
    gpu_f = sum(o[1] for o in ops["moe"] if o[4][0] != "host")
    kf, kb = ops["_kernels"]["moe"]
    t_launch = profile_of(eager, "blackwell").host_per_kernel
    lt = layer_times_roofline(eager)
    assert kf * t_launch > gpu_f                               # host-bound forward
    # host = kernels x t_launch + TE GroupedLinear's per-expert cuBLASLt launches (cost/moe_host.py)
    from primus_launch.projection.cost import moe_host
    host_f = ops["_host"]["moe"][0]
    assert host_f == pytest.approx(kf * t_launch + moe_host.grouped_linear_host(128 // 8, None)[0], rel=1e-12)
    # + the token dispatcher's host-device sync (host_sync.launch_bound_seconds): the host wakes (one launch) and
    # walks the period launch by launch; host-bound throughout, the GPU ends one small kernel after the last launch
    from primus_launch.projection.cost.compute import KERNEL_MIN_S
    assert host_f + t_launch <= lt.moe_layer.fwd_s <= host_f + t_launch + 2 * KERNEL_MIN_S
    graphs = layer_times_roofline(_small_moe(cuda_graph_impl="transformer_engine"))
    assert graphs.moe_layer.fwd_s == pytest.approx(max(gpu_f, GRAPH_LAUNCH_S), rel=1e-12)
    r_e, r_g = project_dry_run(eager), project_dry_run(_small_moe(cuda_graph_impl="transformer_engine"))
    assert r_g.tokens_per_sec_per_gpu > 1.15 * r_e.tokens_per_sec_per_gpu
    # scope "attn" only: the MoE part stays on the host's clock
    part = layer_times_roofline(_small_moe(cuda_graph_impl="transformer_engine", cuda_graph_scope=("attn",)))
    assert graphs.moe_layer.fwd_s < part.moe_layer.fwd_s < lt.moe_layer.fwd_s
    per_expert = layer_op_times(_small_moe(moe_grouped_gemm=False))["_kernels"]["moe"]
    assert per_expert[0] > kf + 2 * (128 // 8 - 1)


def test_torchtitan_eager_vs_compile_profiles():
    """TorchTitan eager runs composite SwiGLU / RoPE (more bytes, more kernels) and FA2, and RMSNorm as PyTorch's
    composite before torch 2.9 (one fused ``_fused_rms_norm`` kernel from 2.9: cost/torch_rmsnorm.py);
    torch.compile fuses them; Megatron-Core + TE runs fused kernels and cuDNN attention on Hopper."""
    from primus_launch.plan import Software, Source
    from primus_launch.projection.cost.roofline import layer_op_times

    m = LLAMA_70B.model_copy(update={"num_layers": 2})

    def plan(fw, torch=None, **tr):
        return Plan(model=m, parallel=Parallelism(tp=8, sequence_parallel=True), training=Training(global_batch_size=8, **tr),
                    cluster=Cluster(gpu="h100-sxm", num_nodes=1), source=Source(framework=fw),
                    software=Software(torch=torch))
    eager, comp, meg = plan("torchtitan"), plan("torchtitan", compile=True), plan("megatron")
    old = plan("torchtitan", torch="2.8.0")
    ke, kc, km = (layer_op_times(p)["_kernels"]["dense"] for p in (eager, comp, meg))
    assert sum(ke) > sum(kc)

    def norm(p):
        return sum(o[1] for o in layer_op_times(p)["dense"] if "norm" in o[0])
    assert norm(old) > 3 * norm(comp)  # the composite: 6 kernels, 36 B / element against the fused 4 (cost/torch_rmsnorm.py)
    assert norm(eager) < norm(old) / 3  # torch >= 2.9's fused kernel
    names = [o[0] for o in layer_op_times(eager)["dense"]] + [o[0] for o in layer_op_times(meg)["dense"]]
    assert any("(fa2)" in n for n in names) and any("(cudnn)" in n for n in names)
    del km


def test_mtp_window_and_unfused_attention():
    """An MTP module adds a decoder layer, its norms / embedding / eh_proj and an output head; a
    sliding window shortens the attention of the windowed layers; the unfused backend materialises
    the s x s scores (slower than the fused kernel)."""
    from primus_launch.projection.cost.roofline import layer_op_times

    base = _llama_plan(parallel={"pp": 1, "vpp": 1}, training={"pipeline_schedule": "1f1b", "global_batch_size": 256})
    mtp = base.with_changes(model={"mtp_num_layers": 1})
    r0, r1 = project_dry_run(base), project_dry_run(mtp)
    lt = layer_times_roofline(mtp)
    assert lt.mtp_extra is not None and any("eh_proj" in o[0] for o in layer_op_times(mtp)["mtp"])
    extra = r1.time_breakdown["compute"] - r0.time_breakdown["compute"]
    per_mb = lt.dense_layer.total_s + lt.mtp_extra.total_s + lt.head_loss.total_s
    assert extra == pytest.approx(mtp.num_microbatches * per_mb, rel=0.02)
    win = base.with_changes(model={"window_size": 1024, "window_layer_pattern": tuple([1, 0] * 40)})
    lw = layer_times_roofline(win)
    assert lw.dense_window_layer.fwd_s < lw.dense_layer.fwd_s
    assert project_dry_run(win).iteration_time_s < r0.iteration_time_s
    unf = layer_times_roofline(base.with_changes(training={"attention_backend": "unfused"}))
    assert unf.attn_core.fwd_s > layer_times_roofline(base).attn_core.fwd_s


def test_cp_comm_types_and_ep_overlap():
    from primus_launch.projection.cost.cp_comm import cp_layer_comm
    from primus_launch.projection.hardware.placement import layout

    p = _llama_plan(parallel={"cp": 4, "pp": 2, "vpp": 1}, training={"pipeline_schedule": "1f1b"})
    lay = layout(p)
    h100 = get_gpu("h100-sxm")
    ring = cp_layer_comm(p, h100, lay)
    a2a = cp_layer_comm(p.with_changes(parallel={"cp_comm_type": "a2a"}), h100, lay)
    ag = cp_layer_comm(p.with_changes(parallel={"cp_comm_type": "allgather"}), h100, lay)
    assert ring[0] > 0 and a2a[0] > 0 and ag[0] > 0 and ag[1] > ag[0]
    assert project_dry_run(p.with_changes(parallel={"cp_comm_type": "a2a+p2p"})).warnings  # priced as p2p: says so
    # PP 4 with a virtual pipeline: megatron-core asserts one for the EP overlap at PP > 1 (the 61 layers as
    # 8 / 8 / 8 / 8 | 8 / 7 / 7 / 7 per chunk, a Megatron layout string)
    moe = Plan(model=DSV3, parallel=Parallelism(tp=1, pp=4, vpp=2, ep=64, pipeline_layout="Et*8|t*8|t*8|t*8|t*8|t*7|t*7|t*7L",
                                                dp_sharding="optimizer"),
               training=Training(global_batch_size=512, pipeline_schedule="interleaved_1f1b"),
               cluster=Cluster(gpu="h100-sxm", num_nodes=32))
    e0 = project_dry_run(moe).time_breakdown["ep_comm"]
    e1 = project_dry_run(moe.with_changes(training={"overlap_moe_expert_parallel_comm": True})).time_breakdown["ep_comm"]
    e2 = project_dry_run(moe.with_changes(training={"moe_shared_expert_overlap": True})).time_breakdown["ep_comm"]
    assert e1 < e0 and e2 < e0


def test_precision_aware_optimizer_and_offload():
    from primus_launch.projection.cost.optimizer import optimizer_bytes_per_param

    p = _llama_plan()
    # 34 B + the master read of Megatron's separate main-to-model copy (core_v0.16.1 _copy_main_params_to_model_params)
    assert p.framework == "megatron" and optimizer_bytes_per_param(p) == 38
    pa = p.with_changes(training={"precision_aware_optimizer": True, "exp_avg_dtype": "bf16", "exp_avg_sq_dtype": "bf16"})
    assert optimizer_bytes_per_param(pa) == 26
    off = p.with_changes(training={"offload": {"optimizer_fraction": 1.0}})
    assert project_dry_run(off).time_breakdown["optimizer"] > project_dry_run(p).time_breakdown["optimizer"]
    act = p.with_changes(training={"offload": {"activation_layers": 2}})
    assert project_dry_run(act).iteration_time_s > project_dry_run(p).iteration_time_s   # PCIe slower than the layer


def test_memory_terms_not_modelled_are_warnings():
    """CUDA graphs' pools kept through the optimizer step (Megatron) are not in the memory model: the
    result says so in its warnings (once), besides the memory note, without contradicting the note (the
    pools themselves are counted as the eager schedule); TorchTitan plans carry no such flag."""
    from primus_launch.plan import Source
    from primus_launch.projection.api import project

    plan = Plan(model=ModelArch(num_layers=4, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                                vocab_size=32000, seq_length=2048),
                training=Training(global_batch_size=8, cuda_graph_impl="transformer_engine"),
                cluster=Cluster(gpus_per_node=8), source=Source(framework="megatron"))
    res = project(plan)
    graph = [w for w in res.warnings if w.flag == "training.cuda_graph_impl"]
    assert len(graph) == 1 and graph[0].effect.startswith("memory:")
    assert any("CUDA graphs" in n for n in res.memory.notes)
    # the warning names only what the memory model leaves out: the pools ARE counted as the eager schedule
    # (memory note "the graphs' pool holds what the eager schedule holds"), so it must not say they are not
    note = next(n for n in res.memory.notes if "CUDA graphs" in n)
    assert "eager schedule holds" in note and "counted as the eager schedule" in graph[0].effect
    assert "static input/output buffers" not in graph[0].effect
    plain = plan.model_copy(update={"training": plan.training.model_copy(update={"cuda_graph_impl": "none"})})
    assert not [w for w in project(plain).warnings if w.flag == "training.cuda_graph_impl"]
