"""Closed-form kernel time models; their constants are fitted to public kernel measurements.

The same functions are used by the dry-run (with the fitted constants of
:mod:`primus_launch.projection.cost.fitted`) and by ``scripts/fit_kernels.py`` (which fits those
constants to the records of ``projection/data/kernel_evidence.json`` and writes ``fitted/``), so a
curve is tested against exactly the records it was fitted to (``tests/test_kernel_curves.py``).

Dense GEMM ``C[M,N] = A[M,K] B[K,N]`` (``batch`` independent problems, e.g. a grouped GEMM), on a GPU
of dense peak ``P`` (for the GEMM's input format), ``U`` SMs / CUs, HBM rate ``B_hbm``:

    tiles = ceil(M/128) ceil(N/128) batch,   w = tiles / (ceil(tiles/U) U)     (wave quantisation)
    t     = max( 2MNK batch / (P E w) (1 + K0/K),  bytes / B_hbm ) + t0

``E`` (large-shape fraction of peak), ``K0`` (main-loop prologue/epilogue: small K runs below E) and
``t0`` (per-kernel fixed time) are one curve per (GPU architecture, library, input format).  A grouped
curve may carry ``K0_wgrad``: the ``K0`` of the library's K-grouped weight-gradient kernel (2D x 2D
grouped GEMM, ``dW[g] = dY[g]^T X[g]``, reducing over the ``K`` = tokens of each group), a different
kernel from the M-grouped forward / data-gradient one (2D x 3D); the caller names the weight gradient
(``compute.gemm_time(..., wgrad=True)``) and ``K0_wgrad`` replaces ``K0`` there (absent: ``K0``).

Fused attention (flash-style; no S x S matrix in HBM), FLOPs as FlashAttention's benchmarks count
them: forward ``2 b h_q s_q L (d_qk + d_v)`` with ``L`` keys per query (``s_kv`` non-causal;
``s_kv/2`` causal; a sliding window ``w`` caps it), backward 2.5x the forward:

    rate_fwd = P A_f g(d) S/(S + S0),   rate_bwd = P A_b g(d) S/(S + S0)
    g(d)     = (1 + (D0/d)^p)^(-1/p)
    t        = FLOPs / rate (1 + Tc/S if causal) + t0

with ``d = (d_qk + d_v)/2`` and ``S`` the key span a query block loops over (``s_kv``, or the window).
``g`` is the head-dim factor: the matrix units' work per score grows with ``d`` while the softmax's
(one exponential per score, on the SFUs) does not, so a small head dim runs below the large-``d`` rate;
``p = 1`` gives ``d/(d + D0)`` (the two costs add), a large ``p`` a soft ``min(1, d/D0)`` (they overlap
and the exponentials bound the rate below ``d = D0``: FlashAttention-4, arXiv 2603.05451, on Blackwell's
forward pass; FlashAttention-3, arXiv 2407.08608, on Hopper's).  ``A_f, A_b, S0, D0, Tc, t0, p`` are one curve
per (architecture, implementation: cuDNN fused attention via TE, FlashAttention-2/-3, AMD CK/aiter); ``p`` is
fitted where a curve's full-attention records span three head dims and Akaike's criterion keeps it (else 1;
``scripts/fit_kernels.py``).  The backward shares the forward's ``g``.

Memory-bound kernels: ``t = bytes / (B_hbm eta) + t_min`` (``eta`` per architecture from streaming
kernels; ``t_min`` the GPU-side floor of a tiny kernel).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace

TILE = 128


@dataclass(frozen=True)
class GemmCurve:
    """A fitted GEMM efficiency curve (module doc): ``eff``, ``k0``, ``t0`` and what it stands on."""

    eff: float
    k0: float
    t0: float
    records: tuple[str, ...] = ()
    rms: float = 0.0
    note: str = ""
    k0_wgrad: float | None = None   # K-grouped weight-gradient kernel's K0 (grouped curves; None: k0)

    def for_wgrad(self) -> "GemmCurve":
        """The curve of the K-grouped weight-gradient kernel (``k0_wgrad`` in place of ``k0``)."""
        return self if self.k0_wgrad is None else replace(self, k0=self.k0_wgrad)


@dataclass(frozen=True)
class AttnCurve:
    """A fitted attention curve (module doc)."""

    fwd: float
    bwd: float
    s0: float
    d0: float
    tc: float
    t0: float
    records: tuple[str, ...] = ()
    rms: float = 0.0
    note: str = ""
    dp: float = 1.0   # head-dim knee sharpness p of g(d) (module doc); 1: d/(d + D0)


def head_dim_factor(d: float, d0: float, dp: float = 1.0) -> float:
    """``g(d) = (1 + (D0/d)^p)^(-1/p)`` (module doc): the fraction of the large-head-dim rate at head dim ``d``."""
    if d0 <= 0:
        return 1.0
    return (1.0 + (d0 / d) ** dp) ** (-1.0 / dp)


def wave(tiles: int, units: int) -> float:
    """Wave quantisation: the fraction of the launched waves' tile slots that do work,
    ``tiles / (ceil(tiles / U) U)`` (1 = no quantisation loss; module doc, the GEMM curve's ``w``)."""
    if tiles <= 0:
        return 1.0
    waves = -(-tiles // units)
    return tiles / (waves * units)


def gemm_seconds(m: int, n: int, k: int, batch: int, peak: float, units: int, hbm_Bps: float, elem: float,
                 c: GemmCurve) -> float:
    """Seconds of ``batch`` GEMMs [m,k]x[k,n] (module doc)."""
    if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
        return 0.0
    tiles = -(-m // TILE) * -(-n // TILE) * batch
    flops = 2.0 * m * n * k * batch
    t_c = flops / (peak * c.eff * wave(tiles, units)) * (1.0 + c.k0 / k)
    t_m = (m * k + k * n + m * n) * batch * elem / hbm_Bps
    return max(t_c, t_m) + c.t0


def attention_keys(sq: int, skv: int, causal: bool, window: int | None) -> tuple[float, float]:
    """(mean keys per query, key span a query block loops over) of an attention of ``sq`` queries over
    ``skv`` keys; causal = lower-triangular over the whole ``skv`` (queries are the last ``sq`` of them
    when ``sq < skv`` is a load-balanced context-parallel chunk: half the keys on average)."""
    if window is not None and window < skv:
        w = float(window)
        if causal:  # query at position i sees min(i, w) keys
            keys = w - w * w / (2.0 * skv)
        else:
            keys = min(2.0 * w, float(skv))
        return keys, min(float(skv), 2.0 * w if not causal else w)
    return (skv / 2.0 if causal else float(skv)), float(skv)


def attention_flops(b: int, heads: int, sq: int, skv: int, dqk: int, dv: int, causal: bool,
                    window: int | None = None) -> float:
    """Forward FLOPs of attention as FlashAttention counts them: ``2 b heads sq keys (d_qk + d_v)`` (QK^T and
    AV), ``keys`` the keys a query sees (:func:`attention_keys`: causal = half the scores, a window at most
    its width)."""
    keys, _ = attention_keys(sq, skv, causal, window)
    return 2.0 * b * heads * sq * keys * (dqk + dv)


def attention_seconds(b: int, heads: int, sq: int, skv: int, dqk: int, dv: int, causal: bool,
                      window: int | None, peak: float, c: AttnCurve, backward: bool) -> float:
    """Seconds of the forward (``backward=False``) or backward pass of a fused attention (module doc)."""
    if b <= 0 or heads <= 0 or sq <= 0 or skv <= 0:
        return 0.0
    flops = attention_flops(b, heads, sq, skv, dqk, dv, causal, window) * (2.5 if backward else 1.0)
    _, span = attention_keys(sq, skv, causal, window)
    d = (dqk + dv) / 2.0
    a = c.bwd if backward else c.fwd
    rate = peak * a * head_dim_factor(d, c.d0, c.dp) * span / (span + c.s0)
    t = flops / rate
    if causal:
        t *= 1.0 + c.tc / span
    return t + c.t0


def stream_seconds(nbytes: float, hbm_Bps: float, t_min: float) -> float:
    """Seconds of a bandwidth-bound kernel moving ``nbytes`` at ``hbm_Bps`` (efficiency applied):
    ``nbytes / hbm_Bps + t_min`` (module doc, memory-bound kernels)."""
    if nbytes <= 0:
        return 0.0
    return nbytes / hbm_Bps + t_min


def log_rms(pairs: Iterable[tuple[float, float]]) -> float:
    """Root-mean-square of log(model / measured) over ``(model, measured)`` pairs."""
    pairs = [(a, b) for a, b in pairs if a > 0 and b > 0]
    if not pairs:
        return 0.0
    return math.sqrt(sum(math.log(a / b) ** 2 for a, b in pairs) / len(pairs))
