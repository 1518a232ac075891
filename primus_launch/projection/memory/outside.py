"""Device memory a training process holds outside PyTorch's caching allocator, and the allocator's own
overhead: what an out-of-memory error counts beside ``memory_reserved()``.

- **CUDA / HIP context** with lazy module loading, cuBLAS / hipBLASLt handles: :data:`CONTEXT_BYTES`
  = 0.5 GiB, the non-PyTorch memory of single-GPU processes in published out-of-memory messages
  ("this process has X in use; Y allocated by PyTorch, Z reserved but unallocated": X - Y - Z = 0.74 GiB
  on a GH200, Lightning-AI/litgpt#1892; 0.35 GiB on a V100, meta-llama/llama#918).  The GEMM workspaces torch
  and Transformer Engine allocate through the caching allocator are in the allocated peak instead
  (:mod:`memory.workspaces`).
- **NCCL / RCCL communicators** of the groups the step communicates in: each ring / tree communicator
  keeps a send and a receive FIFO of ``NCCL_BUFFSIZE`` (4 MiB default, NVIDIA/nccl#285) per channel,
  and NCCL uses up to 32 channels on NVLink systems: :data:`NCCL_COMM_BYTES` = 2 x 4 MiB x 32 = 256 MiB
  per communicator (NVIDIA/nccl#864: "more communicators = more memory ... linearly tied to the number
  of channels"); point-to-point all-to-all (Megatron's alltoall EP dispatcher) connects every peer:
  :data:`NCCL_P2P_PEER_BYTES` = 2 directions x 2 channels x 4 MiB per peer.  A stated model of the
  defaults, not a measurement.
- **DeepEP** normal-mode buffers (deepseek-ai/DeepEP v1.2.1 ``csrc/config.hpp``
  ``Config::get_nvl_buffer_size_hint`` / ``get_rdma_buffer_size_hint`` with ``Buffer.get_dispatch_config`` /
  ``get_combine_config``; megatron-core 0.16.1 ``transformer/moe/fused_a2a.py`` ``get_buffer`` sizes them
  for ``hidden_bytes = 2 h`` over the ``etp x ep`` group with ``--moe-deepep-num-sms`` 20):
  :func:`deepep_buffer_bytes`.
- **TE userbuffers** of ``--tp-comm-overlap``: :func:`userbuffers_bytes`.
- **HybridEP** buffers (DeepEP ``hybrid-ep`` branch ``csrc/hybrid_ep/buffer/intranode.cu`` and
  ``internode_doca.cu``; megatron's ``init_hybrid_ep_buffer`` with the local token count as
  ``max_num_of_tokens_per_rank``): :func:`hybridep_buffer_bytes`.

The caching allocator's reserved peak runs above the allocated peak: :data:`RESERVED_OVER_ALLOCATED`
(band data, :mod:`memory.band_data`), the median of published Megatron ``report_memory`` lines
(``max reserved / max allocated - 1``).
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.projection.hardware.gpus import GiB
from primus_launch.projection.memory.band_data import RESERVED_OVER_ALLOCATED

MiB = 1024**2
CONTEXT_BYTES = 0.5 * GiB
NCCL_COMM_BYTES = 2 * 4 * MiB * 32
NCCL_P2P_PEER_BYTES = 2 * 2 * 4 * MiB

__all__ = ["CONTEXT_BYTES", "NCCL_COMM_BYTES", "NCCL_P2P_PEER_BYTES", "RESERVED_OVER_ALLOCATED",
           "deepep_buffer_bytes", "hybridep_buffer_bytes", "outside_allocator_bytes", "userbuffers_bytes"]

# DeepEP v1.2.1 deep_ep/buffer.py: (num_max_nvl_chunked_recv_tokens, num_max_rdma_chunked_send_tokens,
# num_max_rdma_chunked_recv_tokens) of the dispatch and combine configs by EP ranks
_DEEPEP_DISPATCH = {2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 20, 128),
                    24: (288, 32, 128), 32: (288, 32, 128), 64: (288, 28, 128), 128: (560, 32, 128),
                    144: (720, 12, 128), 160: (720, 12, 128)}
_DEEPEP_COMBINE = {2: (256, 6, 128), 4: (256, 6, 128), 8: (256, 6, 128), 16: (288, 12, 128),
                   24: (288, 8, 128), 32: (288, 8, 128), 64: (288, 20, 128), 128: (560, 12, 128),
                   144: (720, 8, 128), 160: (720, 8, 128)}


def _config(table: dict, ranks: int) -> tuple[int, int, int]:
    key = min((k for k in table if k >= ranks), default=max(table))
    return table[key]


def deepep_buffer_bytes(ranks: int, hidden: int, num_sms: int = 20) -> float:
    """NVLink + RDMA buffer bytes of DeepEP's normal-mode ``Buffer`` for ``ranks`` EP ranks.

    Per channel (``num_sms / 2``), per NVLink peer (``min(ranks, 8)``), per received-token slot:
    the token (``hidden_bytes``), its source meta (8 B), top-k indices (128 x int64), weights
    (128 x fp32) and scales (128 x fp32); RDMA (``ranks > 8``): the same per RDMA peer
    (``ranks / 8``), doubled for send and receive, plus an int4 per slot; the larger of the
    dispatch and combine configurations."""
    if ranks <= 1:
        return 0.0
    hb = 2 * hidden
    ch = num_sms // 2
    nvl, rdma = min(ranks, 8), max(ranks // 8, 1)
    slot = hb + 8 + 128 * 8 + 128 * 4 + 128 * 4
    nvl_b = rdma_b = 0.0
    for table in (_DEEPEP_DISPATCH, _DEEPEP_COMBINE):
        recv, _, rdma_recv = _config(table, ranks)
        nvl_b = max(nvl_b, ch * nvl * (2 * rdma + 3) * 4 + ch * nvl * recv * slot)
        if ranks > 8:
            rdma_b = max(rdma_b, ch * rdma * 18 * 2 * 4 + ch * rdma * rdma_recv * (slot + 16) * 2)
    return nvl_b + rdma_b


def hybridep_buffer_bytes(ranks: int, tokens: float, hidden: int, local_experts: int, nvlink_domain: int) -> float:
    """Bytes of HybridEP's buffers for a ``ranks``-rank group, ``tokens`` local tokens per rank.

    Intra-node (the dispatch and combine buffers share memory, ``use_shared_buffer=True``): for every
    token of the group (``tokens x ranks``) a bf16 token and fp32 probabilities of the NVLink domain's
    experts; across nodes (RDMA), per direction: the rank's tokens and probabilities of all experts, and
    the tokens and probabilities received from each other node."""
    if ranks <= 1:
        return 0.0
    per_node = max(1, min(ranks, nvlink_domain))
    nodes = max(1, ranks // per_node)
    ex_node = local_experts * per_node
    intra = tokens * ranks * (2 * hidden + 4 * ex_node)
    inter = 0.0
    if nodes > 1:
        one = tokens * (2 * hidden + 4 * ex_node * nodes) + tokens * (nodes - 1) * (2 * hidden + 4 * ex_node)
        inter = 2 * one
    return intra + inter


def userbuffers_bytes(tokens: float, hidden: int, fp8: bool) -> float:
    """TE userbuffers of ``--tp-comm-overlap`` (TE 2.13 ``module/base.py`` ``initialize_ub``, shape
    ``[seq x mbs / cp, hidden]`` as megatron passes it): one communication buffer per overlapped GEMM of
    the ring-exchange (qkv / fc1 fprop, proj / fc2 dgrad), pipeline (proj / fc2 fprop) and bulk (qkv / fc1
    dgrad and wgrad) methods; the all-gather ones (qkv / fc1 fprop and dgrad, proj / fc2 dgrad) in fp8
    under an fp8 recipe, the others in bf16 (the external wgrad overlaps reuse the dgrad buffers)."""
    ag, rs = 6, 4
    return tokens * hidden * (ag * (1 if fp8 else 2) + rs * 2)


@lru_cache(maxsize=4096)
def outside_allocator_bytes(*, tp: int, cp: int, pp: int, dp: int, ep: int, etp: int, expert_dp: int,
                            dispatcher: str = "alltoall", moe: bool = False, hidden: int = 0,
                            tokens: float = 0.0, local_experts: int = 0, nvlink_domain: int = 8,
                            deepep_sms: int = 20, ub_tokens: float = 0.0, fp8: bool = False) -> dict[str, float]:
    """Bytes outside the caching allocator by what holds them (``context``, ``nccl``, ``dispatcher``,
    ``userbuffers`` when ``ub_tokens`` (the full sequence tokens per rank) are given)."""
    comms = sum(1 for n in (tp, cp, pp, dp * cp) if n > 1)
    nccl = comms * NCCL_COMM_BYTES
    disp = 0.0
    if moe and ep * etp > 1:
        if expert_dp > 1:
            nccl += NCCL_COMM_BYTES  # expert-data-parallel gradient reduction
        if dispatcher == "deepep":
            disp = deepep_buffer_bytes(ep * etp, hidden, deepep_sms)
        elif dispatcher == "hybridep":
            disp = hybridep_buffer_bytes(ep * etp, tokens, hidden, local_experts, nvlink_domain)
        elif dispatcher == "alltoall":
            nccl += (ep - 1) * NCCL_P2P_PEER_BYTES
        else:  # allgather: ring collectives over the tp x ep group
            nccl += NCCL_COMM_BYTES
    ub = userbuffers_bytes(ub_tokens, hidden, fp8) if ub_tokens and tp > 1 else 0.0
    return {"context": CONTEXT_BYTES, "nccl": float(nccl), "dispatcher": float(disp), "userbuffers": ub}  # shared: read only
