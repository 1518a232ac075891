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
