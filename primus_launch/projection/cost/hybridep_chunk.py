"""HybridEP's combine chunk size: how much slower its combine kernel runs at fewer tokens per chunk.

HybridEP (DeepEP branch ``hybrid-ep``) splits each rank's tokens into chunks of
``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API`` tokens for its combine kernel (an environment variable DeepEP reads
itself, ``csrc/hybrid_ep/config.cuh`` ``Configurer`` / ``get_default_config``: ``get_env_int(...,
default_chunk_size)``; Megatron-core passes no chunk size, only the SMs, ``fused_a2a.HybridEPDispatch`` at
Megatron-LM dev @d98e8a64).  Its default was 128 tokens (``deep_ep/hybrid_ep_buffer.py`` before a0d27f1) and is
64 from DeepEP PR #588 (a0d27f1, 2026-03-31, "Add Permute/Unpermute Fusion Code Path"), dispatch and
preprocessing chunks too.  The model's HybridEP rates (``collectives.fabric``'s ``e_nvl`` / ``e_rdma``
``hybridep``) are the hybrid-ep README's kernel figures (last changed 7febc6e, 2026-02-09): 128-token chunks,
the basis :data:`CHUNK_BASIS`.

Measured (DeepEP PR #588, comment of 2026-04-14, 4 ranks inside one NVLink domain, unfused kernels): the
combine kernel 315.61 us at 128 tokens, 522.63 us at 64 (789.26 -> 476.63 GB/s NVL; ratio
:data:`NVL_RATIO_64` = 1.656); the dispatch kernel 287.36 / 287.26 us, unchanged.  Megatron-Bridge
797a11418 (2026-04-03; cherry-picked into v0.4.2) sets the chunk back to 128 on every HybridEP recipe for
this "~2x combine-kernel regression for unfused combine".  Across NVLink domains (RDMA-bound) no before /
after pair exists; the README's H100 kernel-only combine / dispatch-BF16 GB/s at 32 ranks, 8 SMs (56.40 /
54.50 = 1.035, 128-token chunks) against DeepEP PR #634's (2026-05-19, 4 nodes x 8 ranks, 64-token default,
non-fused: 105.41 / 110.54 = 0.954) bound the RDMA combine's slowdown at :data:`RDMA_RATIO_64` = 1.085
(different hardware, so an upper bound, taken as the factor).

Form: a combine of ``c``-token chunks costs, relative to 128-token chunks, ``f(c) = (2 - r) + (r - 1) 128 / c``
(a fixed part and a per-chunk part, through f(128) = 1 and f(64) = r), with ``r`` = :data:`NVL_RATIO_64` for the
NVLink stage and :data:`RDMA_RATIO_64` for the RDMA stage; ``c`` is held to [64, 128], the measured span (no
figure below 64 or above 128).  Only the unfused combine: Megatron-LM's ``--moe-permute-fusion-into-hybridep``
(default off) runs DeepEP's fused unpermute-combine, for which 64 is the tuned default (hybrid-ep
``docs/README_Hybrid-EP.md``); no recipe we read sets it and it is reported as not modelled.
"""

from __future__ import annotations

CHUNK_BASIS = 128          # tokens per combine chunk the model's HybridEP rates were measured at (README, 7febc6e)
DEFAULT_CHUNK = 64         # DeepEP hybrid-ep's default from a0d27f1 (2026-03-31) on
DEFAULT_CHUNK_BEFORE = 128  # before it (deep_ep/hybrid_ep_buffer.py)
NVL_COMBINE_US = {128: 315.61, 64: 522.63}   # DeepEP PR #588, comment of 2026-04-14
NVL_RATIO_64 = NVL_COMBINE_US[64] / NVL_COMBINE_US[128]
RDMA_RATIO_64 = (56.40 / 54.50) / (105.41 / 110.54)   # README H100 32 ranks / DeepEP PR #634 4 x 8 ranks


def _factor(ratio: float, chunk: int) -> float:
    c = min(max(chunk, 64), CHUNK_BASIS)
    return (2.0 - ratio) + (ratio - 1.0) * CHUNK_BASIS / c


def combine_slowdown(chunk: int) -> tuple[float, float]:
    """(NVLink, RDMA) factors by which an unfused HybridEP combine of ``chunk``-token chunks is slower than at the
    model's 128-token basis (module doc: ``f(c) = (2 - r) + (r - 1) 128 / c``, c held to [64, 128])."""
    return _factor(NVL_RATIO_64, chunk), _factor(RDMA_RATIO_64, chunk)


def effective_chunk(chunk: int | None) -> int:
    """The combine chunk a plan runs: its own, else DeepEP's current default (:data:`DEFAULT_CHUNK`)."""
    return DEFAULT_CHUNK if chunk is None else int(chunk)
