"""Collective times against alpha-beta closed forms and NCCL-tests' busbw definitions; rank layout."""

from __future__ import annotations

import math

import pytest

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training
from primus_launch.projection import calibration as cal
from primus_launch.projection import collectives as coll
from primus_launch.projection.hardware import get_gpu
from primus_launch.projection.layout import layout, place

H100 = get_gpu("h100-sxm")
B_NVL = H100.intra_node_bw * cal.INTRA_NODE_BW_EFFICIENCY
B_NIC = H100.inter_node_bw * cal.INTER_NODE_BW_EFFICIENCY
A_IN, A_OUT = H100.intra_node_latency_s, H100.inter_node_latency_s


def test_ring_all_reduce_intra_node_closed_form():
    n, S = 8, 1 << 30
    pl = place(n, 1, 8)
    ring = 2 * (n - 1) / n * S / B_NVL + 2 * (n - 1) * A_IN
    tree = 2 * (n - 1) / n * S / B_NVL + 2 * math.ceil(math.log2(n)) * A_IN
    t = coll.all_reduce(float(S), pl, "h100-sxm")
    assert t == pytest.approx(min(ring, tree), rel=1e-12)
    # NCCL-tests: busbw = algbw * 2(n-1)/n tends to the link bandwidth for large messages
    assert coll.busbw_all_reduce(S, t, n) == pytest.approx(B_NVL, rel=0.005)


def test_all_gather_reduce_scatter_busbw():
    n, S = 8, 1 << 33
    pl = place(n, 1, 8)
    t = coll.all_gather(float(S), pl, "h100-sxm")
    assert t == pytest.approx((n - 1) / n * S / B_NVL + (n - 1) * A_IN, rel=1e-12)
    assert coll.reduce_scatter(float(S), pl, "h100-sxm") == t
    assert coll.busbw_all_gather(S, t, n) == pytest.approx(B_NVL, rel=0.005)
    # all-reduce = reduce-scatter + all-gather in bandwidth
    ar = coll.all_reduce(float(S), pl, "h100-sxm")
    assert ar == pytest.approx(2 * t, rel=0.005)


def test_inter_node_one_gpu_per_node_uses_one_nic():
    """A DP group with TP=8 has one member per node: each GPU's own NIC carries the ring."""
    n, S = 16, 1 << 28
    pl = place(n, 8, 8)
    assert (pl.nodes, pl.per_node) == (16, 1)
    bw_term = 2 * (n - 1) / n * S / B_NIC
    expect = bw_term + min(2 * (n - 1), 2 * math.ceil(math.log2(n))) * A_OUT
    assert coll.all_reduce(float(S), pl, "h100-sxm") == pytest.approx(expect, rel=1e-12)


def test_hierarchical_all_reduce_for_full_nodes():
    """64 ranks, 8 per node: min of ring at min(NVLink, 8 NICs) and the 2D algorithm."""
    S = 1 << 30
    pl = place(64, 1, 8)
    assert (pl.nodes, pl.per_node) == (8, 8)
    k, m, n = 8, 8, 64
    ring_bw = min(B_NVL, k * B_NIC)
    ring = 2 * (n - 1) / n * S / ring_bw + 2 * (n - 1) * A_OUT
    tree = 2 * (n - 1) / n * S / ring_bw + 2 * 6 * A_OUT
    hier = 2 * (k - 1) / k * S / B_NVL + 2 * (m - 1) / m * (S / k) / B_NIC + 2 * (k - 1) * A_IN + 2 * 3 * A_OUT
    assert coll.all_reduce(float(S), pl, "h100-sxm") == pytest.approx(min(ring, tree, hier), rel=1e-12)


def test_all_to_all_and_p2p():
    S = 1 << 28
    intra = coll.all_to_all(float(S), place(8, 1, 8), "h100-sxm")
    assert intra == pytest.approx(S * 7 / 8 / B_NVL + 7 * A_IN, rel=1e-12)
    # EP=16 across two nodes: half of the traffic leaves the node through each GPU's NIC
    inter = coll.all_to_all(float(S), place(16, 1, 8), "h100-sxm")
    assert inter == pytest.approx(max(S * 7 / 16 / B_NVL, S * 8 / 16 / B_NIC) + 15 * A_OUT, rel=1e-12)
    assert inter > 4 * intra
    assert coll.p2p(float(S), True, "h100-sxm") == pytest.approx(S / B_NIC + A_OUT)
    assert coll.p2p(float(S), False, "h100-sxm") == pytest.approx(S / B_NVL + A_IN)


def test_xgmi_mesh_subgroup_uses_only_its_links():
    g = get_gpu("mi300x")
    t2 = coll.all_reduce(float(1 << 30), place(2, 1, 8), "mi300x")
    bw = g.intra_node_link_bw * cal.INTRA_NODE_BW_EFFICIENCY
    assert coll.busbw_all_reduce(1 << 30, t2, 2) == pytest.approx(bw, rel=0.005)


def _plan(tp=8, pp=4, cp=1, ep=1, nodes=64, moe=False):
    m = ModelArch(num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                  num_query_groups=8, vocab_size=128256, seq_length=8192,
                  num_experts=64 if moe else None, moe_ffn_hidden_size=2048 if moe else None)
    return Plan(model=m, parallel=Parallelism(tp=tp, pp=pp, cp=cp, ep=ep),
                training=Training(global_batch_size=1024), cluster=Cluster(num_nodes=nodes))


def test_megatron_rank_layout():
    lay = layout(_plan(tp=8, pp=4, nodes=64))           # 512 GPUs: dp = 16
    assert lay.tp.nodes == 1 and lay.tp.per_node == 8   # TP=8 fills a node
    assert lay.dp.size == 16 and lay.dp.nodes == 16 and lay.dp.per_node == 1
    assert lay.pp.nodes == 2                            # PP neighbours are 128 ranks apart
    lay = layout(_plan(tp=2, pp=2, cp=2, nodes=4))      # 32 GPUs: dp = 4
    assert lay.cp.nodes == 1 and lay.cp.stride == 2     # CP next to TP, inside the node
    assert lay.dp.size == 8 and lay.dp.per_node == 4 and lay.dp.nodes == 2   # DP x CP: ranks 0,2,..,14
    lay = layout(_plan(tp=1, pp=1, ep=16, nodes=4, moe=True))
    assert lay.ep.nodes == 2 and lay.ep.per_node == 8   # EP 16 spans two nodes
    assert lay.expert_dp.size == 2 and lay.expert_dp.stride == 16


# ---------------- EP: routing fan-out and DeepEP dispatch ----------------

def _mc_units_hit(E, k, u, G, g, n=4000, seed=0):
    """Monte-Carlo reference of the routing model: g of G groups, then k of their experts."""
    import random

    rng = random.Random(seed)
    sg, s = E // G, 0
    for _ in range(n):
        pool = [e for grp in rng.sample(range(G), g) for e in range(grp * sg, (grp + 1) * sg)]
        s += len({e // u for e in rng.sample(pool, k)})
    return s / n


def test_expected_units_hit_closed_forms():
    from primus_launch.projection.moe_routing import expected_remote_units, expected_units_hit

    # no group limit: n (1 - C(E-u, k)/C(E, k)) units of u experts
    assert expected_units_hit(256, 8, 32) == pytest.approx(8 * (1 - math.comb(224, 8) / math.comb(256, 8)), rel=1e-12)
    assert expected_units_hit(64, 1, 4) == pytest.approx(1.0)            # top-1: always one unit
    assert expected_units_hit(256, 8, 256) == pytest.approx(1.0)         # one unit holds everything
    assert expected_units_hit(256, 8, 1) == pytest.approx(8.0)           # per expert: k distinct experts
    # k consecutive aligned experts (E/k groups, one per token): exactly k/u units when u divides k
    assert expected_units_hit(256, 8, 4, 32, 1) == pytest.approx(2.0)
    assert expected_units_hit(256, 8, 32, 32, 1) == pytest.approx(1.0)
    # DeepSeek-V3 group-limited routing (4 of 8 groups) vs sampling, nodes and ranks of EP 64
    for u in (32, 4, 24):
        assert expected_units_hit(256, 8, u, 8, 4) == pytest.approx(_mc_units_hit(256, 8, u, 8, 4), rel=0.03)
    assert expected_units_hit(256, 8, 32, 8, 4) <= 4.0
    assert expected_remote_units(256, 8, 32, 8, 4) == pytest.approx(expected_units_hit(256, 8, 32, 8, 4) * 7 / 8)


def test_deepep_dispatch_matches_deepep_readme():
    """DeepEP README (normal kernels, H800 + CX7 400 Gb/s = the H100's NIC; 4096 tokens, hidden 7168,
    top-8 of 256 experts, top-4 of 8 groups, FP8 dispatch): EP 64 dispatch 51 GB/s "RDMA bandwidth",
    which DeepEP's test counts over every (token, node) pair, the source node included."""
    from primus_launch.projection.moe_routing import expected_units_hit

    T, h = 4096, 7168
    tok = h + h // 128 * 4                     # fp8 values + one fp32 scale per 128
    pl = place(64, 1, 8)
    t = coll.deepep_dispatch(T, float(tok), pl, "h100-sxm", 256, 8, 8, 4)
    pairs = T * expected_units_hit(256, 8, 32, 8, 4)
    logical_bw = pairs * tok / t
    assert logical_bw == pytest.approx(51e9, rel=0.08)
    # closed form: the RDMA term bounds it
    assert t == pytest.approx(pairs * 7 / 8 * tok / B_NIC + 2 * A_OUT, rel=1e-12)
    # intra-node EP 8 (one copy per destination rank over NVLink)
    t8 = coll.deepep_dispatch(T, float(tok), place(8, 1, 8), "h100-sxm", 256, 8)
    d_rank = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert t8 == pytest.approx(T * d_rank * 7 / 8 * tok / B_NVL + 2 * A_IN, rel=1e-12)


def test_deepep_never_sends_more_than_alltoall():
    """DeepEP deduplicates copies per rank / node, so it never moves more than the per-expert
    all-to-all; with all k experts on one rank it sends 1/k of the bytes."""
    T, h = 4096, 7168
    for ep in (8, 16, 64):
        pl = place(ep, 1, 8)
        a2a = coll.all_to_all(float(T * 8 * h * 2), pl, "h100-sxm")
        dee = coll.deepep_dispatch(T, float(h * 2), pl, "h100-sxm", 256, 8)
        assert dee < a2a
    pl = place(8, 1, 8)
    local = coll.deepep_dispatch(T, float(h * 2), pl, "h100-sxm", 128, 8, 16, 1)   # 8 consecutive experts, 16/rank
    assert local - 2 * A_IN == pytest.approx((coll.all_to_all(float(T * 8 * h * 2), pl, "h100-sxm") - 7 * A_IN) / 8,
                                             rel=1e-12)
