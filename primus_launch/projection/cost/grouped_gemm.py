"""Transformer Engine's ``GroupedLinear`` on NVIDIA GPUs: one cuBLASLt GEMM per local expert over four streams.

Source: TE @d0067d0 ``common/gemm/cublaslt_gemm.cu`` ``multi_stream_cublas_gemm`` (GEMM ``i`` on compute
stream ``i % num_streams``) and ``common/util/multi_stream.cpp`` (``num_compute_streams = 4``): every
expert's GEMM is its own kernel, with its own tile waves and its own fixed time, and up to four run at
once.  With ``e`` experts of one shape, ``U`` SMs and ``tiles`` = ceil(M/128) ceil(N/128) output
tiles of one expert's GEMM, the ``min(S, e)`` streams keep ``u`` of the GPU busy:

    u = min(1, min(S, e) tiles / U),   S = 4 streams
    t = e t_full / u + e t0 / min(S, e)

``t_full`` is one expert's GEMM at the large-shape rate of the dense curve (:mod:`cost.kernels`: ``E``,
``K0``; no wave loss: the other streams fill each kernel's last wave) or its HBM time, ``t0`` the
curve's per-kernel fixed time, overlapped across the streams.  Experts of a few thousand tokens
(``tiles >= U / S``) cost their FLOPs at the large-shape rate, as one grouped kernel would; small
ones (a few hundred tokens: ``tiles < U / S``) leave SMs idle -- at most four kernels share the GPU --
where a single grouped kernel (DeepGEMM, CUTLASS, torch ``_grouped_mm``) would fill it.  The host's
launches (one cuBLASLt call per expert) are :mod:`cost.moe_host`'s.
"""

from __future__ import annotations

from primus_launch.projection.cost.kernels import TILE, GemmCurve

TE_STREAMS = 4


def te_multistream_seconds(m: int, n: int, k: int, experts: int, peak: float, units: int, hbm_Bps: float,
                           elem: float, c: GemmCurve, streams: int = TE_STREAMS) -> float:
    """Seconds of ``experts`` GEMMs [m,k]x[k,n] run as TE's multi-stream grouped GEMM (module doc)."""
    if m <= 0 or n <= 0 or k <= 0 or experts <= 0:
        return 0.0
    s_eff = float(min(streams, experts))
    tiles = -(-m // TILE) * -(-n // TILE)
    u = min(1.0, s_eff * tiles / units)
    full = max(2.0 * m * n * k / (peak * c.eff) * (1.0 + c.k0 / k), (m * k + k * n + m * n) * elem / hbm_Bps)
    return experts * full / u + experts * c.t0 / s_eff
