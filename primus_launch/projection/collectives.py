"""Collective communication times: latency + bandwidth (alpha-beta) models of NCCL/RCCL algorithms.

Conventions (NCCL ``doc/PERFORMANCE.md`` of NVIDIA/nccl-tests): ``S`` is the collective's buffer
size in bytes (all-reduce: the reduced tensor; all-gather: the gathered OUTPUT; reduce-scatter:
the INPUT; all-to-all: what one rank sends in total, its own share included). With ``n`` ranks,
``algbw = S / t`` and the bus bandwidth ``busbw`` relates to it by ``2(n-1)/n`` (all-reduce) and
``(n-1)/n`` (all-gather, reduce-scatter, all-to-all). Our models:

- ring all-reduce:   t = 2(n-1)/n * S / B + 2(n-1) * a
- ring all-gather / reduce-scatter:  t = (n-1)/n * S / B + (n-1) * a
- tree all-reduce (NCCL double binary tree, pipelined): t = 2(n-1)/n * S / B + 2 ceil(log2 n) * a
  (same bandwidth term as the ring at large S; logarithmic latency)
- hierarchical (2D) all-reduce over k members per node on m nodes: intra-node reduce-scatter,
  k parallel inter-node all-reduces on S/k each over each GPU's own NIC, intra-node all-gather:
  t = 2(k-1)/k * S / B_intra + 2(m-1)/m * (S/k) / B_nic + 2(k-1) a_intra + 2 ceil(log2 m) a_inter
- all-to-all: each rank sends S/n to each peer; the (k-1) peers on its node over the scale-up
  link, the (n-k) others over its NIC, both at once: t = max(S(k-1)/n / B_intra, S(n-k)/n / B_nic)
  + (n-1) a
- DeepEP dispatch / combine (normal kernels, deepseek-ai/DeepEP; Megatron ``--moe-token-dispatcher-type
  flex --moe-enable-deepep``): a token is sent ONCE per destination rank (not once per routed
  expert) and, across nodes, ONCE per destination node over RDMA (to the same-local-index GPU there),
  which forwards it over NVLink to the destination ranks of that node. Per rank, with T tokens of
  b bytes, D_node / D_rank the expected distinct nodes / ranks of a token's top-k
  (:mod:`primus_launch.projection.moe_routing`), m nodes and k ranks per node:
  t = max(T D_node (1 - 1/m) b / B_nic, T D_rank (1 - 1/k) b / B_intra) + 2 a  (size exchange,
  data); inside one node t = T D_rank (1 - 1/n) b / B_intra + 2 a. Combine is the same volume in
  reverse. Check: DeepEP's README (H800, CX7 400 Gb/s, 4096 tokens, h 7168, top-8 of 256 experts,
  4 of 8 groups, EP 64) reports 51 GB/s "RDMA bandwidth" counted over all (token, node) pairs,
  own node included; the model gives B_nic * D_node / (D_node (1 - 1/8)) = 45 * 8/7 = 51 GB/s.
- P2P: t = S / B + a.

``B`` is the group's bus bandwidth: scale-up (NVLink/xGMI) per GPU when the group is inside a node;
when it spans nodes, ``min(B_intra, k * B_nic)`` with ``k`` members per node (each GPU owns its NIC
share, :mod:`primus_launch.projection.layout`). Achievable fractions of the link rates (NCCL's
busbw vs. line rate) are the stated constants of :mod:`primus_launch.projection.calibration`.
``all_reduce`` etc. return the fastest algorithm, as NCCL's tuner picks.

On an xGMI full mesh (AMD), a group of k < 8 GPUs inside a node only uses the k-1 direct links
between its members: B = (k-1) * link_bw (AMD MI300X platform brief: 7 x 64 GB/s links per GPU).
"""

from __future__ import annotations

import math
from functools import lru_cache

from primus_launch.projection import calibration as cal
from primus_launch.projection.hardware import get_gpu
from primus_launch.projection.layout import GroupPlacement


@lru_cache(maxsize=4096)
def _links(gpu: str, per_node: int) -> tuple[float, float, float, float]:
    """(intra bus bw, NIC bw per GPU, intra latency, inter latency) with efficiency applied."""
    g = get_gpu(gpu)
    intra = g.intra_node_bw
    if g.intra_node_topology == "mesh" and g.intra_node_link_bw and per_node > 1:
        intra = min(intra, (per_node - 1) * g.intra_node_link_bw)
    return (intra * cal.INTRA_NODE_BW_EFFICIENCY, g.inter_node_bw * cal.INTER_NODE_BW_EFFICIENCY,
            g.intra_node_latency_s, g.inter_node_latency_s)


def _bus_bw(gpu: str, pl: GroupPlacement) -> tuple[float, float]:
    """(bus bandwidth, per-step latency) of a ring over the group."""
    bi, bn, ai, an = _links(gpu, pl.per_node)
    if pl.nodes <= 1:
        return bi, ai
    return (min(bi, pl.per_node * bn) if pl.per_node > 1 else bn), an


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


@lru_cache(maxsize=65536)
def all_reduce(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds for an all-reduce of ``nbytes`` over the group (best of ring/tree/hierarchical)."""
    n = pl.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    B, a = _bus_bw(gpu, pl)
    bw_term = 2 * (n - 1) / n * nbytes / B
    ring = bw_term + 2 * (n - 1) * a
    tree = bw_term + 2 * _log2(n) * a
    best = min(ring, tree)
    if pl.nodes > 1 and pl.per_node > 1:
        bi, bn, ai, an = _links(gpu, pl.per_node)
        k, m = pl.per_node, pl.nodes
        hier = (2 * (k - 1) / k * nbytes / bi + 2 * (m - 1) / m * (nbytes / k) / bn
                + 2 * (k - 1) * ai + 2 * _log2(m) * an)
        best = min(best, hier)
    return best


def _gather_like(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    n = pl.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    B, a = _bus_bw(gpu, pl)
    ring = (n - 1) / n * nbytes / B + (n - 1) * a
    if pl.nodes > 1 and pl.per_node > 1:
        bi, bn, ai, an = _links(gpu, pl.per_node)
        k, m = pl.per_node, pl.nodes
        hier = ((k - 1) / k * nbytes / bi + (m - 1) / m * (nbytes / k) / bn
                + (k - 1) * ai + _log2(m) * an)
        return min(ring, hier)
    return ring


@lru_cache(maxsize=65536)
def all_gather(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds to all-gather an OUTPUT buffer of ``nbytes`` (each rank contributes nbytes/n)."""
    return _gather_like(nbytes, pl, gpu)


@lru_cache(maxsize=65536)
def reduce_scatter(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds to reduce-scatter an INPUT buffer of ``nbytes`` (each rank keeps nbytes/n)."""
    return _gather_like(nbytes, pl, gpu)


@lru_cache(maxsize=65536)
def all_to_all(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds for an all-to-all where each rank sends ``nbytes`` in total (S/n to each rank)."""
    n = pl.size
    if n <= 1 or nbytes <= 0:
        return 0.0
    bi, bn, ai, an = _links(gpu, pl.per_node)
    k = min(pl.per_node, n) if pl.nodes > 1 else n
    t_intra = nbytes * (k - 1) / n / bi
    t_inter = nbytes * (n - k) / n / bn if n > k else 0.0
    return max(t_intra, t_inter) + (n - 1) * (an if n > k else ai)


@lru_cache(maxsize=65536)
def deepep_dispatch(tokens: int, token_bytes: float, pl: GroupPlacement, gpu: str, num_experts: int, topk: int,
                    num_groups: int = 1, group_topk: int = 1) -> float:
    """Seconds of one DeepEP dispatch (or combine) of ``tokens`` tokens of ``token_bytes`` per rank
    over the EP group ``pl`` (module doc)."""
    from primus_launch.projection.moe_routing import expected_units_hit

    n = pl.size
    if n <= 1 or tokens <= 0:
        return 0.0
    bi, bn, ai, an = _links(gpu, pl.per_node)
    per_rank = max(1, num_experts // n)
    d_rank = expected_units_hit(num_experts, topk, per_rank, num_groups, group_topk)
    if pl.nodes <= 1:
        return tokens * d_rank * (1 - 1 / n) * token_bytes / bi + 2 * ai
    k, m = pl.per_node, pl.nodes
    d_node = expected_units_hit(num_experts, topk, per_rank * k, num_groups, group_topk)
    t_rdma = tokens * d_node * (1 - 1 / m) * token_bytes / bn
    t_nvl = tokens * d_rank * (1 - 1 / k) * token_bytes / bi
    return max(t_rdma, t_nvl) + 2 * an


@lru_cache(maxsize=65536)
def p2p(nbytes: float, inter_node: bool, gpu: str) -> float:
    """Seconds for one point-to-point send of ``nbytes`` (intra- or inter-node)."""
    if nbytes <= 0:
        return 0.0
    bi, bn, ai, an = _links(gpu, 2)
    return nbytes / bn + an if inter_node else nbytes / bi + ai


def busbw_all_reduce(nbytes: float, seconds: float, n: int) -> float:
    """NCCL-tests bus bandwidth of an all-reduce: algbw * 2(n-1)/n."""
    return nbytes / seconds * 2 * (n - 1) / n


def busbw_all_gather(nbytes: float, seconds: float, n: int) -> float:
    """NCCL-tests bus bandwidth of an all-gather / reduce-scatter: algbw * (n-1)/n."""
    return nbytes / seconds * (n - 1) / n
