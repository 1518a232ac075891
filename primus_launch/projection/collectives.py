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
