"""Collective communication times of NCCL / RCCL, with bus bandwidths fitted to nccl-tests records.

Conventions (NCCL ``doc/PERFORMANCE.md`` of NVIDIA/nccl-tests): ``S`` is the collective's buffer
size in bytes (all-reduce: the reduced tensor; all-gather: the gathered OUTPUT; reduce-scatter:
the INPUT; all-to-all: what one rank sends in total, its own share included). With ``n`` ranks the
*bus bytes* are ``2(n-1)/n S`` (all-reduce) and ``(n-1)/n S`` (all-gather, reduce-scatter,
all-to-all); busbw = bus bytes / time.

Where a group sits (:mod:`primus_launch.projection.hardware.placement`): ``k`` members in each of ``m``
*scale-up domains* (an NVLink / xGMI domain: a DGX node, or the 72 GPUs of a GB200/GB300 NVL72
rack, ``plan.cluster.nvlink_domain``).  Per architecture the fitted fabric (``FITTED['collectives']``,
``scripts/fit_kernels.py``) gives, for the scale-up link ``B_up`` (per GPU per direction; on an xGMI
mesh a group of ``k < 8`` uses only its ``k-1`` direct links: ``(k-1) B_link``), the achieved
fraction ``e_op`` of the link rate for large messages and a fixed latency ``l_op``, for op =
all-reduce (NCCL's default algorithm: NVLS on NVSwitch systems, so ``e`` can exceed 1), gather
(all-gather / reduce-scatter, ring) and all-to-all; and, for the scale-out NIC ``B_nic`` (per GPU),
``e_nic`` and ``l_nic``:

- inside one domain:      t = busbytes(op, S, n) / (e_op B_up) + l_op
- across domains, ring:   t = busbytes / min(e_g B_up, k e_nic B_nic) + l_nic + c (m-1) h_net
- hierarchical (2D) all-reduce / all-gather / reduce-scatter (reduce-scatter in the domain, the
  operation over each GPU's own NIC on S/k, all-gather in the domain):
  t = c (k-1)/k S / (e_g B_up) + c (m-1)/m (S/k) / (e_nic B_nic) + l_g + l_nic + c (m-1) h_net,
  c = 2 (all-reduce) or 1; an all-reduce takes the tree's 2 log2(m) h_net instead of the ring's 2 (m-1)
  h_net where that is shorter (NCCL's tuner picks the tree for latency-bound all-reduces).
  ``h_net`` (:data:`NCCL_NET_STEP_S`) is the latency of one inter-node step of NCCL's ring: NCCL's own
  cost model (``src/graph/tuning.cc``, ``hwLatencies[NET][RING][SIMPLE]`` = 14 us from 2.18 to 2.30.7,
  the tree's ``[NET][TREE][SIMPLE]`` 14 us at 2.30.7, 28 us at 2.21.5) prices a ring reduce-scatter /
  all-gather over ``m`` nodes at ``(m-1)`` such steps (``nInterSteps = nNodes - 1``; an all-reduce
  ``2 (nNodes - 1)``), a tree all-reduce at ``2 log2(m)``; NCCL's maintainers: "the ring latency is still
  very much linear, and the tree latency is logarithmic between nodes" (NVIDIA/nccl#757), "the latency of
  ring increases linearly with the communicator size" (NVIDIA/nccl#1712).  ``l_nic`` keeps the rest of a
  call's fixed cost (fitted with the step term on the records' 2-4 nodes).  Not priced: NCCL >= 2.23's
  PAT reduce-scatter / all-gather at one GPU per node (logarithmic latency, 0.75 of the ring's bandwidth
  in the same file): at Megatron's >= 40M-parameter buckets the ring's bandwidth wins.
- all-to-all across domains: the (k-1)/n share over the scale-up link and the (n-k)/n share over
  the NIC at once: t = max(S (k-1)/n / (e_a2a B_up), S (n-k)/n / (e'_nic B_nic)) + l'_nic, with
  the NIC's all-to-all efficiency e'_nic and latency l'_nic.  NCCL's alltoall is one ncclGroup of
  ncclSend / ncclRecv to every peer (S/n bytes each): each GPU's remote share leaves through its own
  NIC (with PXN a peer on another rail is reached over NVLink first, which adds at most (k-1)/k of
  the remote share to the scale-up term, a link 9-18x the NIC's), so it cannot aggregate the node's
  NICs (NVIDIA/nccl-tests#267, #130: busbw -> m/(m-1) x one NIC on m nodes).  l'_nic is ONE round of
  sends, not the all-reduce's ring / tree steps that l_nic holds: 30 us for 16 ranks over 400G IB
  (DeepEP#3; record deepep3-h100-a2a-r16-latency).  Records: nccl-tests alltoall_perf on 4-192
  GB200 / GB300 ranks (NVL72 and 2-3 racks), 8-16 B300, 4-32 H100 (docs/kernel-evidence.md)
- DeepEP / HybridEP dispatch and combine (normal kernels; Megatron flex dispatcher): a token goes
  ONCE to each destination rank and, across domains, ONCE to each destination domain over RDMA
  (forwarded inside it over NVLink). With T tokens of b bytes per rank and D_rank / D_dom the
  expected distinct ranks / domains of a token's top-k (:mod:`primus_launch.projection.cost.moe_routing`):
  t = max(T D_dom (1 - 1/m) b / (e_rdma B_nic), T D_rank (1 - 1/k) b / (e_nvl B_up)) + 2 l;
  ``e_rdma`` / ``e_nvl`` per library fitted to DeepEP's and HybridEP's published bandwidths; DeepEP's
  ``e_rdma`` (fitted to its isolated benchmark, kernel time) times ``FITTED['deepep']['deepep/insitu']``
  = 0.71: the same kernels inside DeepSeek-V3 pre-training, overlapped with compute, in DeepSeek's
  public profile (``scripts/deepep_insitu.py``: 8 dispatch + 8 combine kernels at EP64 on H800 + CX7
  against DeepEP's README of the same week).  HybridEP is priced the same way: ``e_rdma`` / ``e_nvl``
  fitted to the README's KERNEL-ONLY figures (records' ``shape.kernel_only_gbps``; the records' values
  are its torch-API figures; BF16 dispatch, Megatron's dtype, where the README gives it; the RDMA one per
  node count, :func:`hybridep_rdma_eff`), the RDMA one times the same in-situ fraction (RDMA dispatch / combine
  kernels beside a training step's compute: the one in-situ measurement there is), the NVLink one
  without (no in-situ measurement); plus, per call, the torch API's own time beyond the kernel
  (:func:`hybridep_api_overhead`: the README's torch-API minus kernel-only time of the same call,
  0.13-0.24 ms inside an NVLink domain, 0.33-1.1 ms across 2-8 IB-connected nodes -- the test's
  ``misc = device_sync, update_flag``: Megatron's HybridEP dispatch without a token budget synchronises
  with the device the same way, megatron-core ``token_dispatcher.py`` ``_HybridEPManager``; the forward
  dispatch's grows with its routing-map all-gather beyond the README's, :func:`hybridep_routing_map_s`), which a
  fixed per-call cost keeps at Megatron's payloads (a few MB per rank against the benchmark's 30-60
  MB) where a bandwidth fitted to the torch-API figures would scale it away; none where CUDA graphs
  capture the dispatcher (``moe`` scope, full iteration: Megatron then runs HybridEP sync-free with a
  static token budget); HybridEP's fp32 routing probabilities ride with each token copy of the calls that
  carry them (:func:`hybridep_probs_bytes`, priced against the README's own probs share,
  :data:`HYBRIDEP_README_PROBS_RATIO`); DeepEP V1's internode kernels (the ``deepep`` backend: ``deep_ep.Buffer``) are
  also bound by their own forwarding / receiving warps: every (token, destination node) pair, the own
  node's included, goes through the channel's RDMA buffer and its forwarder warps (DeepEP
  ``csrc/kernels/internode.cu``: the local node's share is copied into its own receive buffer, then
  forwarded like the remote ones), so t >= T D_rank b / R_fwd with ``R_fwd`` the kernel's receive rate
  (:func:`deepep_forward_bw`, ``FITTED['deepep']['deepep/forward']``: DeepEP#493, 2 x 8 H200 + CX7 400G,
  24 SMs: 134 / 145 GB/s NVL receive for BF16 dispatch / combine while the NIC carried ~20 GB/s and NVLink
  ran at a third), scaled by the recipe's SMs and, in a step, by the same in-situ fraction (the same
  kernels in DeepSeek's training, at 20 SMs).  It binds at 2 nodes (EP 16: the README's logical 43 GB/s
  against 58 / 51 at EP 32 / 64, on H800 and H200 alike), not from 4 nodes on, where the NIC does;
- P2P: t = S / (e B) + a, with ``a`` the spec's one-hop latency (no collective launch); ``e`` is
  ``e_p2p`` where one was measured, else ``e_g``.

``all_reduce`` etc. return the fastest algorithm, as NCCL's tuner picks.  A GPU without an
architecture (user files) uses the link efficiencies of
:mod:`primus_launch.projection.cost.calibration` and ring latencies of its spec (the alpha-beta model).
A GPU measured on this machine (``scripts/validation/gloo_lab/localhw.py``) registers its own
per-operation alpha-beta fits with ``hardware.fabric.register_fabric`` (a GPU file's
``[collectives.<gpu>]`` tables too): each op inside the domain is then
``t = busbytes(op, S, n) / (e_op B_up) + l_op`` with the op's own pair -- all-reduce (e_ar, l_ar),
all-gather (e_g, l_g), reduce-scatter (e_rs, l_rs: its own pair only there, else the gather pair),
all-to-all (e_a2a, l_a2a), p2p (e_p2p, a_up).  Where it also registered the measured points
(``points``: ``{op: ((S, t), ...)}``, timed with ``points_ranks`` ranks), a group of that size in
one domain is priced from them instead (:func:`measured_time`): piecewise linear in ``S`` between
two measured sizes, the smallest size's time below it, and beyond the largest its time plus the
remaining bus bytes at the op's fitted bandwidth.  Why: gloo's points do not lie on one line in
``S``, and a measured size is then priced by its own
measurement.  The line through 4 KiB .. 4 MiB had priced the EP=2 validation's 512 KiB
all-gathers at 1.0-1.5 ms where they took 1.9-2.1 (RESULTS.md at e25309d); their own 512 KiB
points priced them at 1.4-1.8 ms where they took 1.6-2.1 (RESULTS.md at db62a00).  On this VM the
two pricings gave validation errors within the run-to-run spread of each other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from functools import lru_cache

from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost.contention import DEEPEP_SMS
from primus_launch.projection.cost.hybridep_chunk import CHUNK_BASIS, combine_slowdown
from primus_launch.projection.hardware.fabric import Fabric, measured_fabric_fields, on_change
# the registry of measured fabrics lives with the hardware database; ``register_fabric`` and
# ``register_fabric_tables`` stay importable from here for the measured path
from primus_launch.projection.hardware.fabric import register_fabric, register_fabric_tables  # noqa: F401
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.hardware.placement import GroupPlacement


DEEPEP_INSITU_SMS = 20
"""SMs of the DeepEP kernels in DeepSeek's DeepSeek-V3 training profile that ``FITTED['deepep']['deepep/insitu']``
was measured on (records ``dsprofile-v3-train-h800-deepep-*``, ``shape.sms``; the README benchmark it is taken
against ran 24)."""
NCCL_NET_STEP_S = 14e-6
"""Seconds of one inter-node step of an NCCL ring (and hop of a tree) with the Simple protocol of large
messages: NVIDIA/nccl ``src/graph/tuning.cc`` ``ncclTunerConstantsDefaults.hwLatencies[NET]`` (module doc)."""
NCCL_BASE_S = 8.4e-6
"""NCCL's base latency of a ring / tree call with the Simple protocol (``tuning.cc`` ``baseLatencies``)."""
NCCL_INTRA_STEP_S = 3.4e-6
"""NCCL's latency of one NVLink step of a ring with the Simple protocol (``tuning.cc``
``hwLatencies[NVLINK][RING][SIMPLE]``; a multi-node ring takes the larger of it and 3 x the host's net
overhead, 1 us on Intel hosts: 3 us)."""
NCCL_INTRA_TREE_S = 4.0e-6
"""The same for a tree hop inside a node (``hwLatencies[NVLINK][TREE][SIMPLE]``)."""


def nccl_call_latency(op: str, size: int, nodes: int) -> float:
    """NCCL's own latency of one ``op`` call on ``size`` ranks over ``nodes`` scale-up domains with the Simple
    protocol (NVIDIA/nccl ``src/graph/tuning.cc`` ``ncclTopoTuneModel``, the model its tuner picks algorithms
    by): ring ``base + (nsteps - nInterSteps) intra + nInterSteps net`` with ``nsteps = n-1`` (reduce-scatter,
    all-gather) or ``2(n-1)`` (all-reduce) and ``nInterSteps = c (m-1)``; an all-reduce takes the tree's
    ``base + 2 ((n/m - 1) intra_tree + log2(m) net)`` where shorter.  What a call pays when it follows another
    on the same stream (its launch hidden behind the previous kernel): :func:`primus_launch.projection.cost.
    dp_comm.dp_grad_sync`'s second and later gradient buckets."""
    n, m = size, max(1, nodes)
    if n <= 1:
        return 0.0
    c = 2 if op == "all_reduce" else 1
    inter = c * (m - 1)
    ring = NCCL_BASE_S + (c * (n - 1) - inter) * NCCL_INTRA_STEP_S + inter * NCCL_NET_STEP_S
    if op != "all_reduce":
        return ring
    tree = NCCL_BASE_S + 2 * ((n // m - 1) * NCCL_INTRA_TREE_S + _log2(m) * NCCL_NET_STEP_S)
    return min(ring, tree)


def net_step_latency(op: str, nodes: int) -> float:
    """Seconds of the inter-node steps of one NCCL ``op`` across ``nodes`` scale-up domains (module doc):
    ring reduce-scatter / all-gather ``(m-1) h``; all-reduce the shorter of the ring's ``2 (m-1) h`` and
    the tree's ``2 ceil(log2 m) h``."""
    if nodes <= 1:
        return 0.0
    if op == "all_reduce":
        return min(2 * (nodes - 1), 2 * _log2(nodes)) * NCCL_NET_STEP_S
    return (nodes - 1) * NCCL_NET_STEP_S


def fabric_arch(arch: str) -> str:
    """The architecture whose fitted fabric curves ``arch`` uses (Blackwell Ultra: Blackwell's;
    CDNA4: CDNA3's)."""
    return {"blackwell_ultra": "blackwell", "cdna4": "cdna3"}.get(arch, arch)


@lru_cache(maxsize=256)
def fabric(gpu: str) -> Fabric:
    """The fitted fabric of ``gpu`` (its architecture's curves; module doc), with the fields
    :func:`register_fabric` measured for it, if any."""
    base = _fabric(gpu)
    over = measured_fabric_fields(gpu)
    return dataclasses.replace(base, **over) if over else base


def _fabric(gpu: str) -> Fabric:
    from primus_launch.projection.cost.fitted import FITTED

    g = get_gpu(gpu)
    link = g.intra_node_link_bw if g.intra_node_topology == "mesh" and g.intra_node_link_bw else 0.0
    curves = FITTED.get("collectives", {})
    a = fabric_arch(g.arch)
    fab = curves.get(f"{a}/fabric")
    dee = FITTED.get("deepep", {})
    e_rdma = {lib: dee.get(f"{lib}/rdma", {}).get("eff", cal.INTER_NODE_BW_EFFICIENCY) for lib in ("deepep", "hybridep")}
    # DeepEP's and HybridEP's RDMA kernels inside a training step run at deepep/insitu of their isolated
    # benchmarks (module doc)
    for lib in e_rdma:
        if f"{lib}/rdma" in dee:
            e_rdma[lib] *= dee.get("deepep/insitu", {}).get("eff", 1.0)
    e_nvl = {lib: dee.get(f"{lib}/nvlink", {}).get("eff", cal.INTRA_NODE_BW_EFFICIENCY) for lib in ("deepep", "hybridep")}
    if not g.arch or fab is None:
        ei, en = cal.INTRA_NODE_BW_EFFICIENCY, cal.INTER_NODE_BW_EFFICIENCY
        return Fabric(g.intra_node_bw, link, ei, ei, ei, 0.0, 0.0, 0.0, g.inter_node_bw, en, en, 0.0,
                      g.intra_node_latency_s, g.inter_node_latency_s, e_rdma, e_nvl, False)
    return Fabric(g.intra_node_bw, link, fab["e_ar"], fab["e_g"], fab["e_a2a"], fab["l_ar"], fab["l_g"], fab["l_a2a"],
                  g.inter_node_bw, fab["e_nic"], fab["e_nic_a2a"], fab["l_nic"], g.intra_node_latency_s,
                  g.inter_node_latency_s,
                  e_rdma, e_nvl, True, l_nic_a2a=fab.get("l_nic_a2a"))


def bus_bytes(op: str, nbytes: float, n: int) -> float:
    """NCCL-tests bus bytes of a collective on ``n`` ranks (busbw = bus bytes / time): all-reduce
    ``2(n-1)/n S``; all-gather, reduce-scatter, all-to-all ``(n-1)/n S``."""
    if n <= 1:
        return 0.0
    return (2.0 if op == "all_reduce" else 1.0) * (n - 1) / n * nbytes


def measured_time(points: Iterable[tuple[float, float]], nbytes: float, tail_s_per_byte: float) -> float:
    """Seconds of a call of ``nbytes`` from measured ``(S, t)`` points: linear in ``S`` between the
    two measured sizes around it; the smallest size's time below it (a call that small is its
    fixed cost); beyond the largest, its time plus ``(nbytes - S_max) x tail_s_per_byte`` (the
    op's fitted bandwidth, per byte of ``S``)."""
    pts = sorted((float(s), float(t)) for s, t in points)
    if nbytes <= pts[0][0]:
        return pts[0][1]
    for (s0, t0), (s1, t1) in zip(pts, pts[1:]):
        if nbytes <= s1:
            return t0 + (t1 - t0) * (nbytes - s0) / (s1 - s0)
    s_max, t_max = pts[-1]
    return t_max + (nbytes - s_max) * tail_s_per_byte


def _log2(n: int) -> int:
    return max(1, math.ceil(math.log2(n))) if n > 1 else 0


def _steps_latency(f: Fabric, n: int, inter: bool, ring_steps: int) -> float:
    """Latency of the unfitted alpha-beta model (ring steps x per-step latency)."""
    return ring_steps * (f.a_nic if inter else f.a_up)


def collective_time(op: str, nbytes: float, size: int, nodes: int, per_node: int, f: Fabric) -> float:
    """Seconds of ``op`` (all_reduce | all_gather | reduce_scatter | all_to_all) over a group of
    ``size`` ranks, ``per_node`` in each of ``nodes`` scale-up domains (module doc)."""
    n = size
    if n <= 1 or nbytes <= 0:
        return 0.0
    kind = "all_reduce" if op == "all_reduce" else ("all_to_all" if op == "all_to_all" else "gather")
    c = 2.0 if op == "all_reduce" else 1.0
    k, m = (n, 1) if nodes <= 1 else (per_node, nodes)
    bw_up = f.up(k)
    if m == 1:
        e = {"all_reduce": f.e_ar, "gather": f.e_g, "all_to_all": f.e_a2a}[kind]
        lat = {"all_reduce": f.l_ar, "gather": f.l_g, "all_to_all": f.l_a2a}[kind]
        if op == "reduce_scatter":
            e = f.e_rs if f.e_rs is not None else e
            lat = f.l_rs if f.l_rs is not None else lat
        bb = bus_bytes(op, nbytes, n)
        if f.points and op in f.points and n == f.points_ranks:
            return measured_time(f.points[op], nbytes, bus_bytes(op, 1.0, n) / (e * bw_up))
        if not f.fitted:
            ring = bb / (e * bw_up) + _steps_latency(f, n, False, int(c) * (n - 1))
            if op == "all_reduce":
                return min(ring, bb / (e * bw_up) + 2 * _log2(n) * f.a_up)
            return ring
        return bb / (e * bw_up) + lat
    nic = f.e_nic * f.nic_bw
    if kind == "all_to_all":
        t_up = nbytes * (k - 1) / n / (f.e_a2a * bw_up) if k > 1 else 0.0
        t_out = nbytes * (n - k) / n / (f.e_nic_a2a * f.nic_bw)
        lat = (f.l_nic if f.l_nic_a2a is None else f.l_nic_a2a) if f.fitted else (n - 1) * f.a_nic
        return max(t_up, t_out) + lat
    bb = bus_bytes(op, nbytes, n)
    ring_bw = min(f.e_g * bw_up, k * nic) if k > 1 else nic
    steps = net_step_latency(op, m) if f.fitted else 0.0
    if f.fitted:
        ring = bb / ring_bw + f.l_nic + steps
    else:
        ring = bb / ring_bw + int(c) * (n - 1) * f.a_nic
        if op == "all_reduce":  # tree: same bandwidth term, logarithmic latency
            ring = min(ring, bb / ring_bw + 2 * _log2(n) * f.a_nic)
    if k <= 1:
        return ring
    hier = c * (k - 1) / k * nbytes / (f.e_g * bw_up) + c * (m - 1) / m * (nbytes / k) / nic
    hier += (f.l_g + f.l_nic + steps) if f.fitted else (c * (k - 1) * f.a_up + c * _log2(m) * f.a_nic)
    return min(ring, hier)


@lru_cache(maxsize=65536)
def all_reduce(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds for an all-reduce of ``nbytes`` over the group (best of ring / tree / NVLS / 2D).
    Priced by :func:`collective_time` on the GPU's fitted fabric (module doc: nccl-tests bus-bytes
    conventions, NCCL ``tuning.cc`` latencies, curves fitted to nccl-tests records)."""
    return collective_time("all_reduce", nbytes, pl.size, pl.nodes, pl.per_node, fabric(gpu))


@lru_cache(maxsize=65536)
def all_gather(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds to all-gather an OUTPUT buffer of ``nbytes`` (each rank contributes nbytes/n).
    Priced by :func:`collective_time` on the GPU's fitted fabric (module doc: nccl-tests bus-bytes
    conventions, NCCL ``tuning.cc`` latencies, curves fitted to nccl-tests records)."""
    return collective_time("all_gather", nbytes, pl.size, pl.nodes, pl.per_node, fabric(gpu))


@lru_cache(maxsize=65536)
def reduce_scatter(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds to reduce-scatter an INPUT buffer of ``nbytes`` (each rank keeps nbytes/n).
    Priced by :func:`collective_time` on the GPU's fitted fabric (module doc: nccl-tests bus-bytes
    conventions, NCCL ``tuning.cc`` latencies, curves fitted to nccl-tests records)."""
    return collective_time("reduce_scatter", nbytes, pl.size, pl.nodes, pl.per_node, fabric(gpu))


@lru_cache(maxsize=65536)
def all_to_all(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds for an all-to-all where each rank sends ``nbytes`` in total (S/n to each rank).
    Priced by :func:`collective_time` on the GPU's fitted fabric (module doc: nccl-tests bus-bytes
    conventions, NCCL ``tuning.cc`` latencies, curves fitted to nccl-tests records)."""
    return collective_time("all_to_all", nbytes, pl.size, pl.nodes, pl.per_node, fabric(gpu))


HYBRIDEP_README_TOKENS = 4096
"""Tokens per rank of DeepEP hybrid-ep's README benchmark (``docs/README_Hybrid-EP.md`` @94a9f8f, its H100 figures
from 1dddd19 ``tests/test_hybrid_ep.py``), whose per-call API times ``FITTED['deepep']['hybridep/api']`` holds."""
HYBRIDEP_README_LOCAL_EXPERTS = 8
"""Experts per rank of the same benchmark (``Local Experts: 8``: ``8 n`` experts over ``n`` ranks)."""
HYBRIDEP_README_PROBS_RATIO = {"rdma": 0.017857, "nvlink": 0.064644}
"""The README benchmark's fp32 probability bytes per token copy over its token bytes, by the fit's bound, which the
kernel-only efficiencies ``FITTED['deepep']['hybridep/{rdma,nvlink}']`` absorbed (the test's bandwidth counts token
bytes only -- ``dispatched_hidden.numel() * 2``, ``num_rdma * HIDDEN_DIM * 2`` -- while its dispatch passes
``topk_weights`` and its combine ``probs``, so both kernels moved the probs too; :func:`hybridep_probs_bytes`):
``rdma``: the H100 records, 2-8 DGX nodes, 64 experts per node, 256 B against a 14,336 B BF16 token = 256 / 14,336;
``nvlink``: exp(mean ln(1 + p / b)) over its 10 B200 / GB200 records (8-36 ranks: 256-1,152 B against 7,392 B FP8
or 14,336 B BF16 tokens; ``tests/test_hybridep_probs.py`` recomputes both from the evidence)."""


def hybridep_probs_bytes(num_experts: int, ranks: int, ranks_per_domain: int) -> float:
    """Bytes of fp32 routing probabilities HybridEP sends with each token copy of a dispatch that carries probs:
    ``4 (E / n) k`` -- the probabilities of every expert of the destination NVLink domain (``E / n`` experts per
    rank x ``k`` ranks in the domain), once per (token, destination domain) over RDMA and once per (token,
    destination rank) over NVLink.  DeepEP hybrid-ep @94a9f8f ``csrc/hybrid_ep/backend/hybrid_ep_backend.cuh``:
    the forward dispatch (``FORWARD_DISPATCH``, ``with_probs=probs is not None``) stages ``float
    intra_node_prob_buffer[NUM_OF_EXPERTS_PER_RANK * NUM_OF_RANKS_PER_NODE]`` per token and TMA-stores it to each
    destination rank (``remote_expert_output_prob``), and its RDMA warp puts ``prob_per_token =
    NUM_OF_EXPERTS_PER_RANK * NUM_OF_RANKS_PER_NODE`` floats per token to each remote node; a combine given probs
    (``BACKWARD_COMBINE``) loads and reduces the same vector per source copy (``intra_node_prob_G2S_buffer``) and
    puts it over RDMA; ``docs/Hybrid-EP_Implementation.md`` sizes ``prob_buffer`` / ``rdma_prob_buffer`` alike.
    Megatron (megatron-core ``fused_a2a.py`` ``HybridEPDispatch``) passes fp32 probs to the forward dispatch
    (``_HybridEPManager``: "HybridEP only supports float32 probs") and their gradient to the backward's combine
    (``combine_with_unpermute(hidden=grad_x, probs=grad_probs, ...)``); the forward combine and the backward's
    dispatch (``HybridEPCombine``) carry none, and no FP8 scaling factors travel (``fp8_dispatch = False``,
    ``scaling_factor=None``).  Nemotron 3 Super at EP 64 over 8 nodes: 4 x 8 x 8 = 256 B per copy of a 2,048 B
    latent token."""
    if ranks <= 0 or num_experts <= 0:
        return 0.0
    return 4.0 * max(1, num_experts // ranks) * ranks_per_domain


def _gather_bytes_s(nbytes: float, pl: GroupPlacement, gpu: str) -> float:
    """Seconds of an all-gather's bytes (gathered OUTPUT ``nbytes``) over the EP group: :func:`all_gather` less its
    fixed latency (the same call at one byte per rank); 0 for a group of one."""
    if pl.size <= 1 or nbytes <= 0:
        return 0.0
    return max(0.0, all_gather(float(nbytes), pl, gpu) - all_gather(float(pl.size), pl, gpu))


def hybridep_routing_map_s(tokens: int, num_experts: int, pl: GroupPlacement, gpu: str) -> float:
    """Seconds the forward dispatch's routing-map all-gather adds over the README benchmark's on the same group:
    ``g(n T E) - g(n T_R 8 n)``, ``g`` the all-gather's bytes time (:func:`_gather_bytes_s`: bus bytes over the
    fabric's NVLink / NIC rate, module doc), ``T_R`` = :data:`HYBRIDEP_README_TOKENS`, ``8 n`` the README's experts
    (:data:`HYBRIDEP_README_LOCAL_EXPERTS` per rank).  DeepEP hybrid-ep @94a9f8f ``executor.cu``
    ``allgather_routing_map`` (called by ``metadata_preprocessing`` when the dispatch has no handle; at the README's
    1dddd19 ``hybrid_ep_buffer.py`` the same call): ``all_gather_into_tensor`` of the ``[T, E]`` bool map over the
    EP group into ``[T n, E]`` -- ``T E`` bytes per rank, ``n T E`` gathered (NCCL; the custom intra-node
    all-gather is off by default since #682).  The README's dispatch API time (``hybridep/api``) holds the
    benchmark's own all-gather (2 MB per rank at 64 ranks: 4,096 x 512), so the README's shape adds 0 and the
    kernel-latency part stays the fitted constant; Nemotron 3 Super (8,192 tokens x 512 experts: 4 MB per rank)
    adds the bytes time of the extra half."""
    n = pl.size
    if n <= 1 or tokens <= 0 or num_experts <= 0:
        return 0.0
    own = _gather_bytes_s(float(n) * tokens * num_experts, pl, gpu)
    readme = _gather_bytes_s(float(n) * HYBRIDEP_README_TOKENS * HYBRIDEP_README_LOCAL_EXPERTS * n, pl, gpu)
    return own - readme


def hybridep_api_overhead(op: str, nodes: int, ranks: int, map_s: float = 0.0) -> float:
    """Seconds HybridEP's torch API spends per ``op`` call (dispatch / combine) beyond its kernel (module doc):
    the fitted points (``FITTED['deepep']['hybridep/api']``) by node count across NVLink domains (``nodes >
    1``), by rank count inside one; linear between points, the end points' values beyond them.  ``"dispatch"``
    is the forward's, which builds the routing metadata (the README times its dispatch without a handle);
    ``"combine"`` runs on the handle.  A dispatch on a cached handle (``moe_dispatch.HANDLE_DISPATCH``, the
    backward's) does the README dispatch's work less the metadata step (no routing-map all-gather, no
    preprocessing kernel), so it takes at most the dispatch's time, and where the dispatch's exceeds the
    combine's -- across IB, by 0.2-0.9 ms at 2-8 nodes, where that all-gather crosses the NIC -- the combine's,
    the other call on the handle: ``min(dispatch, combine)``.  ``map_s``: what the forward dispatch's routing-map
    all-gather takes beyond the README benchmark's (:func:`hybridep_routing_map_s`), added to ``"dispatch"`` only
    (never below 0 in all: a smaller map than the README's saves at most its bytes time)."""
    if op not in ("dispatch", "combine"):   # the backward's handle-path dispatch
        return min(hybridep_api_overhead("dispatch", nodes, ranks), hybridep_api_overhead("combine", nodes, ranks))
    from primus_launch.projection.cost.fitted import FITTED

    pts = FITTED.get("deepep", {}).get("hybridep/api", {}).get("points", {})
    where, x = ("rdma", nodes) if nodes > 1 else ("nvlink", ranks)
    p = pts.get(where, {}).get(op)
    if not p:
        return 0.0
    extra = map_s if op == "dispatch" else 0.0
    return max(0.0, measured_time(p, x, 0.0) + extra)


def hybridep_rdma_eff(nodes: int) -> float | None:
    """HybridEP's kernel-only RDMA efficiency (of the NIC rate) across ``nodes`` NVLink domains, from the points
    ``FITTED['deepep']['hybridep/rdma']['points']`` fitted per node count on the README's H100 BF16 dispatch and
    combine figures (``[nodes, eff]``: ~0.71 / 0.84 / 0.89 at 2 / 4 / 8 nodes, DeepEP hybrid-ep
    ``docs/README_Hybrid-EP.md`` @94a9f8f); linear between points, the end points' values beyond them.  None
    without points (then the one-number ``eff`` of the fabric prices it)."""
    from primus_launch.projection.cost.fitted import FITTED

    p = FITTED.get("deepep", {}).get("hybridep/rdma", {}).get("points")
    if not p or nodes <= 1:
        return None
    return measured_time(p, nodes, 0.0)


def deepep_forward_bw(op: str, num_sms: int, insitu: bool = True) -> float:
    """Bytes/s of token copies one rank's DeepEP V1 internode dispatch (``op`` = dispatch) or combine can
    receive through its forwarding warps with ``num_sms`` SMs (module doc); 0 without a fit.  The kernel
    runs ``num_sms / 2`` channels, each one RDMA-sender SM and one forwarder SM, so the bound scales with
    the SMs: isolated, the fitted BF16 rate at the benchmark's 24 SMs (``FITTED['deepep']['deepep/forward']``,
    DeepEP#493) x ``num_sms / 24``; in a training step (``insitu``), that rate x the in-situ fraction x
    ``num_sms /`` :data:`DEEPEP_INSITU_SMS` -- the in-situ fraction is DeepSeek's 20-SM kernels in training
    over the 24-SM benchmark, so it already holds the step from 24 to 20 SMs.  No Blackwell figure exists:
    a Blackwell SM is taken at the Hopper SM's rate."""
    from primus_launch.projection.cost.fitted import FITTED

    dee = FITTED.get("deepep", {})
    fit = dee.get("deepep/forward", {})
    r = fit.get("combine" if op == "combine" else "dispatch")
    if not r or num_sms <= 0:
        return 0.0
    if insitu:
        return float(r) * dee.get("deepep/insitu", {}).get("eff", 1.0) * num_sms / DEEPEP_INSITU_SMS
    return float(r) * num_sms / fit["sms"]


def dispatch_time(tokens: float, token_bytes: float, size: int, nodes: int, per_node: int, f: Fabric,
                  d_rank: float, d_dom: float, lib: str = "deepep", api_s: float = 0.0,
                  fwd_bw: float = 0.0) -> float:
    """Seconds of one DeepEP / HybridEP dispatch (or combine) per rank (module doc); ``api_s``: the library
    API's own seconds per call beyond the kernel (HybridEP: :func:`hybridep_api_overhead`); ``fwd_bw``: the
    receive rate of DeepEP V1's internode forwarding warps (bytes/s, :func:`deepep_forward_bw`; 0: none)."""
    if size <= 1 or tokens <= 0:
        return 0.0
    nvl = f.e_nvl.get(lib, cal.INTRA_NODE_BW_EFFICIENCY) * f.up(per_node if nodes > 1 else size)
    lat = 2 * (f.l_a2a if f.fitted else f.a_up)
    if nodes <= 1:
        return tokens * d_rank * (1 - 1 / size) * token_bytes / nvl + lat + api_s
    k, m = per_node, nodes
    rdma = f.e_rdma.get(lib, cal.INTER_NODE_BW_EFFICIENCY) * f.nic_bw
    t_rdma = tokens * d_dom * (1 - 1 / m) * token_bytes / rdma
    t_nvl = tokens * d_rank * (1 - 1 / k) * token_bytes / nvl
    t_fwd = tokens * d_rank * token_bytes / fwd_bw if fwd_bw > 0 else 0.0
    return max(t_rdma, t_nvl, t_fwd) + 2 * f.a_nic + lat / 2 + api_s


@lru_cache(maxsize=65536)
def deepep_dispatch(tokens: int, token_bytes: float, pl: GroupPlacement, gpu: str, num_experts: int, topk: int,
                    num_groups: int = 1, group_topk: int = 1, lib: str = "deepep", insitu: bool = True,
                    op: str = "dispatch", api: bool = True, num_sms: int = 0, forward: bool = True,
                    round_robin: bool = False, combine_chunk: int = 128, probs: bool = False) -> float:
    """Seconds of one DeepEP (``lib="deepep"``) or HybridEP ``op`` (dispatch / combine) of ``tokens``
    tokens of ``token_bytes`` per rank over the EP group ``pl`` (module doc); ``insitu=False``: at the
    isolated benchmark's RDMA rate (what the in-situ fraction adds, for the explanation); ``api=False``:
    without HybridEP's per-call torch-API time (a dispatcher inside CUDA graphs; the explanation's share);
    ``num_sms``: the SMs DeepEP runs on (0: :data:`cost.contention.DEEPEP_SMS`, DeepEP's and Megatron's
    default 20); ``forward=False``: without DeepEP V1's internode forwarder bound (:func:`deepep_forward_bw`;
    the explanation's share); ``round_robin``: Primus-Turbo's forced round-robin routing
    (:func:`cost.moe_routing.round_robin_units_hit`) instead of random top-k; ``combine_chunk``: the tokens per
    chunk of HybridEP's (unfused) combine, its NVLink / RDMA rates divided by
    :func:`cost.hybridep_chunk.combine_slowdown` (128, the rates' basis: unchanged).  HybridEP: ``probs``: the call
    carries fp32 routing probabilities (Megatron's forward dispatch and backward combine), each token copy then
    ``b + p`` bytes (:func:`hybridep_probs_bytes`), and every call is priced at ``(b + p) / (1 + r_R)`` bytes per
    copy, ``r_R`` the README's probs ratio its fitted efficiencies absorbed (:data:`HYBRIDEP_README_PROBS_RATIO`,
    ``rdma`` across NVLink domains, ``nvlink`` inside one), so a README-shaped call prices as before and a call
    without probs 1 / (1 + r_R) of it; the forward dispatch's API time grows with its routing-map all-gather
    (:func:`hybridep_routing_map_s`)."""
    from primus_launch.projection.cost.moe_routing import expected_units_hit, round_robin_units_hit

    n = pl.size
    if n <= 1 or tokens <= 0:
        return 0.0
    per_rank = max(1, num_experts // n)

    def hit(unit: int) -> float:
        return (round_robin_units_hit(num_experts, topk, unit) if round_robin
                else expected_units_hit(num_experts, topk, unit, num_groups, group_topk))

    d_rank = hit(per_rank)
    d_dom = hit(per_rank * pl.per_node) if pl.nodes > 1 else 1.0
    fab = fabric(gpu)
    # HybridEP across NVLink domains: its per-node-count efficiency, unless a GPU file registered its own e_rdma
    own = "e_rdma" in (measured_fabric_fields(gpu) or {})
    e_node = hybridep_rdma_eff(pl.nodes) if lib == "hybridep" and fab.fitted and not own else None
    if e_node is not None or (not insitu and lib in fab.e_rdma):
        from primus_launch.projection.cost.fitted import FITTED

        f_in = FITTED.get("deepep", {}).get("deepep/insitu", {}).get("eff", 1.0)
        iso = e_node if e_node is not None else fab.e_rdma[lib] / f_in
        fab = dataclasses.replace(fab, e_rdma={**fab.e_rdma, lib: iso * (f_in if insitu else 1.0)})
    if lib == "hybridep" and op == "combine" and combine_chunk != CHUNK_BASIS:
        f_nvl, f_rdma = combine_slowdown(combine_chunk)
        fab = dataclasses.replace(
            fab, e_nvl={**fab.e_nvl, lib: fab.e_nvl.get(lib, cal.INTRA_NODE_BW_EFFICIENCY) / f_nvl},
            e_rdma={**fab.e_rdma, lib: fab.e_rdma.get(lib, cal.INTER_NODE_BW_EFFICIENCY) / f_rdma})
    api_s = 0.0
    if lib == "hybridep" and fab.fitted:
        p_b = hybridep_probs_bytes(num_experts, n, pl.per_node if pl.nodes > 1 else n) if probs else 0.0
        token_bytes = (token_bytes + p_b) / (1.0 + HYBRIDEP_README_PROBS_RATIO["rdma" if pl.nodes > 1 else "nvlink"])
        if api:
            map_s = hybridep_routing_map_s(tokens, num_experts, pl, gpu) if op == "dispatch" else 0.0
            api_s = hybridep_api_overhead(op, pl.nodes, n, map_s)
    fwd_bw = 0.0
    if lib == "deepep" and forward and pl.nodes > 1 and fab.fitted:
        fwd_bw = deepep_forward_bw(op, num_sms or DEEPEP_SMS, insitu)
    return dispatch_time(tokens, token_bytes, n, pl.nodes, pl.per_node, fab, d_rank, d_dom, lib, api_s, fwd_bw)


@lru_cache(maxsize=65536)
def p2p(nbytes: float, inter_node: bool, gpu: str) -> float:
    """Seconds for one point-to-point send of ``nbytes`` (across scale-up domains or inside one): across,
    ``S / (e_nic B_nic) + a_nic``; inside, ``S / (e_p2p B_up(2)) + a_up`` (``e_g`` where the fabric has no
    p2p fit), or the fabric's measured p2p points where it has them (module doc, ``FITTED['collectives']``)."""
    if nbytes <= 0:
        return 0.0
    f = fabric(gpu)
    if inter_node:
        return nbytes / (f.e_nic * f.nic_bw) + f.a_nic
    e = f.e_p2p if f.e_p2p is not None else f.e_g
    if f.points and "p2p" in f.points:
        return measured_time(f.points["p2p"], nbytes, 1.0 / (e * f.up(2)))
    return nbytes / (e * f.up(2)) + f.a_up


def busbw_all_reduce(nbytes: float, seconds: float, n: int) -> float:
    """NCCL-tests bus bandwidth of an all-reduce: algbw * 2(n-1)/n."""
    return nbytes / seconds * 2 * (n - 1) / n


def busbw_all_gather(nbytes: float, seconds: float, n: int) -> float:
    """NCCL-tests bus bandwidth of an all-gather / reduce-scatter: algbw * (n-1)/n."""
    return nbytes / seconds * (n - 1) / n


def clear_caches() -> None:
    """Forget every cached fabric and collective time (a fabric was registered or dropped)."""
    for fn in (fabric, all_reduce, all_gather, reduce_scatter, all_to_all, deepep_dispatch, p2p):
        fn.cache_clear()


on_change(clear_caches)
