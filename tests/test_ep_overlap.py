"""Megatron's 1F1B all-to-all overlap (cost/ep_overlap.py) against an event simulation written
separately from the issue order of megatron-core 0.16.1 ``TransformerLayerSchedulePlan.run``."""

from __future__ import annotations

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
    from primus_launch.projection import iteration as it
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
    lt = layer_times_roofline(plan)
    raw = it._ep_times(plan, plan.cluster.gpu, layout(plan))
    f, b = it._ep_exposed(plan, raw, lt)
    assert 0.0 < f + b < sum(raw)
    u = it.ep_unpaired_fraction(plan)
    paired = walk(it._moe_layer_pair(plan, lt, *raw))
    assert f + b == pytest.approx(u * sum(raw) + (1 - u) * paired)
    off = plan.model_copy(update={"training": plan.training.model_copy(update={"overlap_moe_expert_parallel_comm": False})})
    assert it._ep_exposed(off, raw, lt) == raw
