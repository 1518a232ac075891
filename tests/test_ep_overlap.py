"""Megatron's 1F1B all-to-all overlap (cost/ep_overlap.py) against an event simulation written
separately from the issue order of megatron-core 0.16.1 ``TransformerLayerSchedulePlan.run``."""

from __future__ import annotations

import dataclasses
import random

import pytest

from primus_launch.projection.cost.ep_overlap import LayerPair, exposed_per_layer


def _dag_makespan(x: LayerPair, n: int) -> float:
    """List-schedule the nodes of ``n`` layer pairs: each stream runs its nodes in the order the host
    issues them (``run``'s code order), each node starts when its stream is free and its
    dependencies are done. Dependencies: a micro-batch's nodes chain through its one event
    (forward attn -> dispatch -> mlp -> combine -> next layer's attn; backward combine -> mlp ->
    dispatch -> attn -> next layer's combine); ``backward_dw`` takes no event."""
    issue = []  # (name, stream, duration, deps)
    for i in range(n):
        issue += [
            (f"cb{i}", "comm", x.combine_b, [f"ab{i - 1}"] if i else []),
            (f"af{i}", "comp", x.attn_f, [f"cf{i - 1}"] if i else []),
            (f"mb{i}", "comp", x.mlp_b, [f"cb{i}"]),
            (f"df{i}", "comm", x.dispatch_f, [f"af{i}"]),
            (f"mw{i}", "comp", x.mlp_w, []),
            (f"db{i}", "comm", x.dispatch_b, [f"mb{i}"]),
            (f"mf{i}", "comp", x.mlp_f, [f"df{i}"]),
            (f"cf{i}", "comm", x.combine_f, [f"mf{i}"]),
            (f"ab{i}", "comp", x.attn_b, [f"db{i}"]),
            (f"aw{i}", "comp", x.attn_w, []),
        ]
    end: dict[str, float] = {}
    free = {"comp": 0.0, "comm": 0.0}
    for name, stream, dur, deps in issue:
        start = max([free[stream]] + [end[d] for d in deps])
        end[name] = free[stream] = start + dur
    return max(end.values())


def _pair(rng: random.Random, comm_scale: float) -> LayerPair:
    c = [rng.uniform(0.2, 2.0) for _ in range(6)]
    m = [rng.uniform(0.0, 2.0) * comm_scale for _ in range(4)]
    return LayerPair(*c, *m)


@pytest.mark.parametrize("comm_scale", [0.0, 0.3, 1.0, 3.0])
def test_exposed_equals_event_simulation(comm_scale):
    rng = random.Random(int(comm_scale * 10) + 1)
    for _ in range(50):
        x = _pair(rng, comm_scale)
        want = (_dag_makespan(x, 32) - _dag_makespan(x, 16)) / 16 - x.compute_s
        assert exposed_per_layer(x) == pytest.approx(max(0.0, want), abs=1e-9)


def test_limits():
    # no communication: nothing exposed; no compute: the four all-to-alls in a row on one stream
    x = LayerPair(1.0, 2.0, 1.5, 2.5, 0.5, 0.7, 0.0, 0.0, 0.0, 0.0)
    assert exposed_per_layer(x) == pytest.approx(0.0, abs=1e-12)
    y = LayerPair(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0)
    assert exposed_per_layer(y) == pytest.approx(10.0)
    # communication far below every compute node it pairs with: hidden
    z = LayerPair(1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.01, 0.01, 0.01, 0.01)
    assert exposed_per_layer(z) == pytest.approx(0.0, abs=1e-12)


def test_delayed_wgrad_hides_more():
    """--delay-wgrad-compute lets dispatch_bwd start after the mlp's input gradient while its weight
    gradient runs: with the same total work, less stays exposed."""
    fused = LayerPair(1.0, 1.0, 2.0, 2.0, 0.0, 0.0, 1.2, 1.2, 1.2, 1.2)
    split = LayerPair(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.2, 1.2, 1.2, 1.2)
    assert fused.compute_s == split.compute_s
    assert exposed_per_layer(split) < exposed_per_layer(fused)


def test_projection_uses_it():
    """A Megatron MoE plan: the overlap leaves at most the raw dispatcher time exposed, and the
    exposed time of the paired passes is the walk's."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.cost import ep_comm as it
    from primus_launch.projection.cost.ep_overlap import exposed_per_layer as walk
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.hardware.placement import layout

    plan = Plan(model=ModelArch(num_layers=8, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32,
                                num_query_groups=8, vocab_size=32000, seq_length=4096, num_experts=64,
                                moe_router_topk=8, moe_ffn_hidden_size=1536),
                parallel=Parallelism(ep=16),
                training=Training(global_batch_size=256, micro_batch_size=1, moe_token_dispatcher="alltoall",
                                  moe_grouped_gemm=True, overlap_moe_expert_parallel_comm=True),
                cluster=Cluster(num_nodes=2, gpus_per_node=8), source=Source(framework="megatron"))
    from primus_launch.projection.cost import contention as con
    from primus_launch.projection.cost.ep_overlap import exposed_per_step
    from primus_launch.projection.hardware.gpus import get_gpu

    lt = layer_times_roofline(plan)
    spec = get_gpu(plan.cluster.gpu)
    raw = it.ep_layer_comm(plan, spec, layout(plan))
    f, b = it.ep_exposed(plan, raw, lt, spec)
    assert 0.0 < f + b < sum(raw)
    u = it.ep_unpaired_fraction(plan)
    c = con.lost_fraction(con.ep_sms("alltoall"), spec.num_sms, spec.arch)
    pair = it.moe_layer_pair(plan, lt, *raw)
    n = it.moe_layers_per_step(plan)
    assert n == 8   # no pipelining: the whole model is one combined step
    paired = max(walk(pair, c=c), exposed_per_step(pair, n, c) / n) - it.permutes_on_comm(plan, lt)
    # the all-to-all dispatcher's unpermute runs in the combine node (communication stream, whole GPU)
    uf, ub = lt.part("moe", "moe_unpermute").fwd_s, lt.part("moe", "moe_unpermute").bwd_input_s
    assert it.permutes_on_comm(plan, lt) == pytest.approx(uf + ub) and uf > 0
    assert (pair.whole[1], pair.whole[3]) == pytest.approx((uf, ub))
    assert f + b == pytest.approx(u * sum(raw) + (1 - u) * paired)
    off = plan.model_copy(update={"training": plan.training.model_copy(update={"overlap_moe_expert_parallel_comm": False})})
    assert it.ep_exposed(off, raw, lt, spec) == raw


def _dag_makespan_shared(x: LayerPair, n: int, c: float) -> float:
    """Fluid event simulation of the two streams where every compute node runs at ``1 - c`` of its
    rate while any communication node runs (written separately from ``ep_overlap._walk``): at each
    step advance both running nodes to the next start or finish."""
    comp_q, comm_q = [], []
    for i in range(n):
        comp_q += [(f"af{i}", x.attn_f, [f"cf{i - 1}"] if i else []), (f"mb{i}", x.mlp_b, [f"cb{i}"]),
                   (f"mw{i}", x.mlp_w, []), (f"mf{i}", x.mlp_f, [f"df{i}"]),
                   (f"ab{i}", x.attn_b, [f"db{i}"]), (f"aw{i}", x.attn_w, [])]
        for name, dur, deps in ((f"cb{i}", x.combine_b, [f"ab{i - 1}"] if i else []),
                                (f"df{i}", x.dispatch_f, [f"af{i}"]), (f"db{i}", x.dispatch_b, [f"mb{i}"]),
                                (f"cf{i}", x.combine_f, [f"mf{i}"])):
            # the node's whole-GPU seconds first (compute stalls beside them), then the SM-light rest
            w = dict(zip(("df", "cf", "db", "cb"), x.whole))[name[:2]]
            comm_q += [(name + "_gpu", w, deps), (name, dur - w, [])]
    done: dict[str, float] = {}
    t = 0.0
    run = {"comp": None, "comm": None}   # [name, work left]
    queues = {"comp": comp_q, "comm": comm_q}
    while queues["comp"] or queues["comm"] or run["comp"] or run["comm"]:
        for k in ("comp", "comm"):
            while run[k] is None and queues[k] and all(d in done for d in queues[k][0][2]):
                name, w, _ = queues[k].pop(0)
                if w <= 0:
                    done[name] = t
                    continue
                run[k] = [name, w]
        lost = (1.0 if run["comm"][0].endswith("_gpu") else c) if run["comm"] else 0.0
        rate = {"comp": 1.0 - lost, "comm": 1.0}
        dts = [run[k][1] / rate[k] for k in run if run[k] and rate[k] > 0]
        if not dts:
            raise AssertionError("deadlock")
        dt = min(dts)
        t += dt
        for k in ("comp", "comm"):
            if run[k]:
                run[k][1] -= dt * rate[k]
                if run[k][1] <= 1e-12:
                    done[run[k][0]] = t
                    run[k] = None
    return t


@pytest.mark.parametrize("c", [0.0, 0.15, 0.4125])
def test_contention_walk_equals_fluid_simulation(c):
    """The walk with SM contention (compute nodes at 1 - c beside a dispatch / combine) against a
    separately written fluid simulation of the same DAG."""
    from primus_launch.projection.cost.ep_overlap import _walk

    rng = random.Random(7 + int(100 * c))
    for i in range(40):
        x = _pair(rng, rng.choice([0.3, 1.0, 3.0]))
        if i % 2:   # half of the pairs with whole-GPU seconds in their dispatch / combine (HybridEP, permutes)
            x = dataclasses.replace(x, whole=tuple(rng.uniform(0.0, 0.8) * d for d in
                                                   (x.dispatch_f, x.combine_f, x.dispatch_b, x.combine_b)))
        for n in (1, 3):
            assert _walk(x, n, c) == pytest.approx(_dag_makespan_shared(x, n, c), rel=1e-9, abs=1e-9)


def test_contention_closed_form():
    """One layer pair with only combine_bwd (1 s) and attn_fwd (2 s): attn_fwd runs its first second
    at half rate, then the remaining 1.5 s alone: 2.5 s."""
    from primus_launch.projection.cost.ep_overlap import _walk

    x = LayerPair(2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    assert _walk(x, 1, 0.5) == pytest.approx(2.5)
    assert _walk(x, 1, 0.0) == pytest.approx(2.0)
    # a communication-bound pair is not slowed by the contention: its compute fits under the comm
    y = LayerPair(0.1, 0.1, 0.1, 0.1, 0.0, 0.0, 5.0, 5.0, 5.0, 5.0)
    assert _walk(y, 4, 0.4) == pytest.approx(_walk(y, 4, 0.0))


def test_step_startup():
    """A combined step starts with both streams empty (Megatron joins them at each chunk's end):
    per layer, a step of few layers exposes at least the steady state, and one of many layers
    approaches it."""
    from primus_launch.projection.cost.ep_overlap import exposed_per_step

    rng = random.Random(3)
    for _ in range(30):
        x = _pair(rng, 1.0)
        ss = exposed_per_layer(x)
        assert exposed_per_step(x, 2) / 2 >= ss - 1e-9
        assert exposed_per_step(x, 64) / 64 == pytest.approx(ss, abs=0.1 * max(1.0, x.compute_s))
    # closed form: one layer, comm only combine_bwd (1 s) before an mlp_bwd that waits for it
    x = LayerPair(0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    assert exposed_per_step(x, 1) == pytest.approx(0.5)   # attn_fwd covers 0.5 of the 1 s combine


def test_moe_layers_per_step_reads_the_layout():
    """Layers per combined step = one model chunk: Qwen3-235B on PP8 x VPP4 with embedding and loss
    as layer slots (Megatron's account-for-embedding/loss-in-pipeline-split): (94 + 2) / 32 = 3."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.cost import ep_comm as it

    plan = Plan(model=ModelArch(num_layers=94, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=64,
                                num_query_groups=4, vocab_size=151936, seq_length=4096, num_experts=128,
                                moe_router_topk=8, moe_ffn_hidden_size=1536),
                parallel=Parallelism(tp=2, etp=1, pp=8, vpp=4, ep=32, sequence_parallel=True,
                                     account_for_embedding_in_pipeline_split=True,
                                     account_for_loss_in_pipeline_split=True),
                training=Training(global_batch_size=2048, micro_batch_size=1, moe_token_dispatcher="alltoall",
                                  moe_grouped_gemm=True, overlap_moe_expert_parallel_comm=True),
                cluster=Cluster(num_nodes=32, gpus_per_node=8), source=Source(framework="megatron"))
    assert it.moe_layers_per_step(plan) == 3


def test_whole_gpu_communication_serialises_the_streams():
    """A dispatch / combine that holds the whole GPU for all its seconds (``whole`` = its seconds: HybridEP's
    108-block preprocessing and ``sm_count * 16``-block permutes, cost/ep_overlap.py) leaves a compute
    node beside it no progress: every communication second is exposed, whatever ``c``; a share ``g``
    of it exposes at least ``g`` of each node."""
    x = LayerPair(1.0, 1.2, 1.5, 1.1, 0.4, 0.6, 0.7, 0.8, 0.9, 1.0, whole=(0.7, 0.8, 0.9, 1.0))
    comm = x.dispatch_f + x.combine_f + x.dispatch_b + x.combine_b
    for c in (0.0, 0.14, 0.41):
        assert exposed_per_layer(x, c=c) == pytest.approx(comm)
    half = dataclasses.replace(x, whole=(0.35, 0.4, 0.45, 0.5))
    assert 0.5 * comm - 1e-9 <= exposed_per_layer(half, c=0.14) < comm
    assert exposed_per_layer(dataclasses.replace(x, whole=(0.0,) * 4), c=0.14) < exposed_per_layer(half, c=0.14)


def test_overlap_gain_matches_bridge_5094_ab():
    """Megatron-Bridge PR #5094 switched only ``overlap_moe_expert_parallel_comm`` on Qwen3-30B-A3B, 16 H100
    (EP 16 over 2 nodes, HybridEP, MBS 1, GBS 1024, TE graphs moe_router / moe_preprocess, no delayed
    wgrad): 24.714 -> 20.992 s per iteration (records mbridge5094-*).  The dry-run's on / off ratio of the
    same plan must be within 0.03 of the measured 0.849 (the walk without HybridEP's whole-GPU share gave
    0.745: it hid the preprocessing / sync as if it were SM-light communication)."""
    import sys
    from pathlib import Path

    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.dryrun import project_dry_run

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from moe_probe import bridge5094_plans

    off_rec, on_rec = (ev.record(f"mbridge5094-h100-qwen3-30b-a3b-hybridep-overlap-{k}-step") for k in ("off", "on"))
    off, on = bridge5094_plans()
    sh = on_rec["shape"]
    assert (on.world_size, on.parallel.ep, on.parallel.tp, on.model.num_experts) == (sh["gpus"], sh["ep"], 1, 128)
    assert (on.training.moe_token_dispatcher, on.training.overlap_moe_expert_parallel_comm,
            off.training.overlap_moe_expert_parallel_comm, on.training.delay_wgrad_compute) == ("hybridep", True,
                                                                                               False, False)
    ratio = project_dry_run(on).iteration_time_s / project_dry_run(off).iteration_time_s
    assert ratio == pytest.approx(on_rec["value"] / off_rec["value"], abs=0.03)


def test_tp_collectives_sit_in_the_attn_node():
    """Megatron's attn node runs ``layer._forward_attention`` (``fine_grained_callables.submodule_attn_forward``),
    sequence-parallel all-gather / reduce-scatter included, on the compute stream: the layer pair carries the
    exposed TP seconds in ``attn_f`` / ``attn_b`` and nowhere else."""
    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.cost import ep_comm as it
    from primus_launch.projection.cost.roofline import layer_times_roofline

    plan = Plan(model=ModelArch(num_layers=8, hidden_size=4096, ffn_hidden_size=12288, num_attention_heads=32,
                                num_query_groups=8, vocab_size=32000, seq_length=4096, num_experts=64,
                                moe_router_topk=8, moe_ffn_hidden_size=1536),
                parallel=Parallelism(tp=2, ep=8, sequence_parallel=True),
                training=Training(global_batch_size=256, micro_batch_size=1, moe_token_dispatcher="alltoall",
                                  moe_grouped_gemm=True, overlap_moe_expert_parallel_comm=True),
                cluster=Cluster(num_nodes=2, gpus_per_node=8), source=Source(framework="megatron"))
    lt = layer_times_roofline(plan)
    a = it.moe_layer_pair(plan, lt, 1e-3, 1e-3)
    b = it.moe_layer_pair(plan, lt, 1e-3, 1e-3, (2e-4, 3e-4))
    assert (b.attn_f - a.attn_f, b.attn_b - a.attn_b) == pytest.approx((2e-4, 3e-4))
    assert (b.mlp_f, b.mlp_b, b.attn_w, b.mlp_w, b.dispatch_f, b.combine_b) == (a.mlp_f, a.mlp_b, a.attn_w, a.mlp_w,
                                                                               a.dispatch_f, a.combine_b)


def test_hybridep_sms_follow_its_configurer_defaults():
    """HybridEP's dispatch / combine kernels take 24 SMs inside one NVLink domain and 8 across domains
    (DeepEP hybrid-ep @cf78085 ``config.cuh`` ``Configurer``; Megatron-LM dev @d48bd6be passes None):
    the walk's contention of a B200 plan reads them by the EP group's domain count."""
    from primus_launch.projection.cost import contention as con

    assert (con.ep_sms("hybridep", 1), con.ep_sms("hybridep", 2), con.ep_sms("hybridep", 8)) == (24, 8, 8)
    assert con.ep_sms("deepep", 4) == con.DEEPEP_SMS == 20
    assert con.lost_fraction(con.ep_sms("hybridep", 1), 148, "blackwell") == pytest.approx(24 / 148)


def test_dispatcher_sms_reach_the_walk():
    """--moe-deepep-num-sms / --moe-flex-dispatcher-num-sms reach ``training.moe_dispatcher_num_sms`` (an explicit
    flex count wins over the deprecated per-backend one, as megatron's ``TransformerConfig.__post_init__`` routes
    them) and set the SMs the walk's compute loses beside DeepEP on Blackwell (n / 148)."""
    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.cost import ep_comm as it
    from primus_launch.projection.hardware.gpus import get_gpu

    base = ("torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 2048 "
            "--num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
            "--global-batch-size 64 --tokenizer-type GPT2BPETokenizer --bf16 --num-experts 64 --moe-router-topk 8 "
            "--expert-model-parallel-size 16 --moe-grouped-gemm --moe-token-dispatcher-type flex "
            "--moe-flex-dispatcher-backend deepep --overlap-moe-expert-parallel-comm").split()
    p0 = plan_from_argv(base)
    p1 = plan_from_argv(base + ["--moe-deepep-num-sms", "32"])
    p2 = plan_from_argv(base + ["--moe-deepep-num-sms", "32", "--moe-flex-dispatcher-num-sms", "12"])
    assert (p0.training.moe_dispatcher_num_sms, p1.training.moe_dispatcher_num_sms,
            p2.training.moe_dispatcher_num_sms) == (None, 32, 12)
    b200 = get_gpu("b200")
    for p in (p0, p1, p2):
        p.cluster.gpu = "b200"
    assert [it.walk_contention(p, b200) for p in (p0, p1, p2)] == pytest.approx([20 / 148, 32 / 148, 12 / 148])


def test_per_layer_probe_inverts_the_iteration_time():
    """``moe_probe --per-layer`` (the x86 DGX Blackwell Qwen3-235B cases of issue 28): seconds per (layer x micro-batch)
    times m x L / PP x the interleaved bubble (1 + (PP - 1) / (VPP m)) gives back the iteration time of GBS x seq
    tokens at the given tokens/s/GPU (closed form), and the line fit is exact on two points.  The cases read the
    configurations of their sources: Bridge's B200 preset (v0.4.2: TP 1 / PP 8 / EP 8, MBS 1, NCCL all-to-all, no
    1F1B overlap) and its B300 preset at MBS 2, with the all-to-all at 26.04 and HybridEP at 26.04.01."""
    import copy
    import json
    import sys
    from pathlib import Path

    from primus_launch.plan import Plan

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from moe_probe import PER_LAYER_CASES, RUNS, _fit, per_layer_mb_seconds

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    plans = []
    for _label, rid, sw, meas, _src in PER_LAYER_CASES:
        d = copy.deepcopy(rows[rid]["plan"])
        for k, v in sw.items():
            sec, f = k.split(".")
            d[sec][f] = v
        plan = Plan.model_validate(d)
        plans.append(plan)
        s, tokens = per_layer_mb_seconds(plan, meas)
        t, p = plan.training, plan.parallel
        m = plan.num_microbatches
        it = t.global_batch_size * plan.model.seq_length / (meas * plan.world_size)
        assert s * m * plan.model.num_layers / p.pp * (1 + (p.pp - 1) / (p.vpp * m)) == pytest.approx(it)
        assert tokens == t.micro_batch_size * plan.model.seq_length / p.tp
    b200, _, b300_a2a, b300_hep = plans[:4]
    assert (b200.parallel.tp, b200.parallel.pp, b200.parallel.vpp, b200.parallel.ep, b200.training.micro_batch_size,
            b200.training.moe_token_dispatcher, b200.training.overlap_moe_expert_parallel_comm) == (
        1, 8, 1, 8, 1, "alltoall", False)
    assert (b300_a2a.training.micro_batch_size, b300_a2a.training.moe_token_dispatcher,
            b300_hep.training.moe_token_dispatcher) == (2, "alltoall", "hybridep")
    a, b = _fit([(4096.0, 11.0e-3), (8192.0, 17.0e-3)])
    assert (a, b) == (pytest.approx(5.0e-3), pytest.approx(6.0e-3 / 4096))


def test_qwen30_probe_converts_the_public_figures():
    """``moe_probe --qwen30`` (issue 28's GB200 Qwen3-30B-A3B rows): a case's TFLOP/s become tokens/s/GPU with the row's
    own tokens per TFLOP, i.e. Megatron-LM's FLOP formula at seq 4096 (23.006 GFLOP per token, the rows'
    ``derived_fields``): the README's 514 gives the row's 22,341.7 and Megatron-LM PR #5728's 480.3 gives 20,877;
    seconds per (layer x micro-batch) times L x m gives back GBS x seq / (tokens/s x GPUs) (PP 1: no bubble term);
    every A/B pair names two cases; every switch names a plan field that exists."""
    import json
    import sys
    from pathlib import Path

    from primus_launch.plan import Plan

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    from moe_probe import QWEN30_CASES, QWEN30_PAIRS, QWEN30_SWITCHES, RUNS, per_layer_mb_seconds, \
        qwen30_measured_tokens

    rows = {r["id"]: r for r in json.loads(RUNS.read_text())["rows"]}
    labels = {c[0] for c in QWEN30_CASES}
    for label, rid, tflops, _src in QWEN30_CASES:
        row = rows[rid]
        tok = qwen30_measured_tokens(row, tflops)
        if tflops is None:
            assert tok == row["measured_tokens_per_sec_per_gpu"]
        elif rid.startswith("mlm_"):
            assert tok == pytest.approx(tflops * 1e12 / 23.006e9, rel=1e-3)
        plan = Plan.model_validate(row["plan"])
        s, _ = per_layer_mb_seconds(plan, tok)
        assert plan.parallel.pp == 1
        assert s * plan.model.num_layers * plan.num_microbatches == pytest.approx(
            plan.training.global_batch_size * plan.model.seq_length / (tok * plan.world_size))
    mxfp8 = rows["mlm_moe_qwen3_30b_gb200_mxfp8_16gpu_tp1pp1ep16_partial_cg"]
    assert qwen30_measured_tokens(mxfp8, 514.0) == pytest.approx(22341.7, abs=0.1)
    assert qwen30_measured_tokens(mxfp8, 480.3) == pytest.approx(20877, abs=1)
    assert all(a in labels and b in labels for a, b in QWEN30_PAIRS)
    for _label, sw in QWEN30_SWITCHES:
        for k in sw:
            sec, f = k.split(".")
            assert f in mxfp8["plan"][sec]
