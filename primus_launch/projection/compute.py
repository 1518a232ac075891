"""Per-operation GPU time: GEMMs, attention cores and element-wise kernels, with a shape model.

GEMM ``C[M,N] = A[M,K] @ B[K,N]`` (``batch`` independent problems for grouped GEMMs):

    flops  = 2 * M * N * K * batch
    bytes  = (M*K + K*N + M*N) * batch * elem
    eff    = E_max(gpu, precision) * f_wave * f_k
    f_wave = tiles / (ceil(tiles / SMs) * SMs),  tiles = ceil(M/128) * ceil(N/128) * batch
             (wave quantisation of 128x128 output tiles over the SMs / CUs)
    f_k    = K / (K + K0)          (main-loop prologue/epilogue; small-K GEMMs do not reach peak)
    t      = max(flops / (peak * clock * eff), bytes / (hbm_bw * eta_hbm)) + t_launch

Attention core (FlashAttention-2/3 style, no S x S matrix in HBM; Dao 2023, arXiv 2307.08691):

    flops_fwd = 2 * b * heads * sq * skv_eff * (d_qk + d_v),  skv_eff = skv * c (c = causal
                fraction: (1 + 128/skv)/2 for a causal mask with 128-wide diagonal blocks)
    flops_bwd = 2.5 * flops_fwd   (5 GEMMs in backward vs 2 in forward)
    eff_fwd   = A_max(arch) * f_wave(b*heads*ceil(sq/128) tiles) * skv_eff / (skv_eff + S0)
    eff_bwd   = eff_fwd * BWD_REL

Element-wise / reduction kernels (norms, RoPE, SwiGLU, residual adds, softmax-cross-entropy,
permutation): ``t = bytes / (hbm_bw * eta_hbm) + t_launch``.

E_max, A_max (per GPU architecture), the FP8 factor and the sustained clock of power-capped SKUs are calibrated
(:mod:`primus_launch.projection.calibration`, script ``scripts/calibrate.py``); K0, S0, BWD_REL,
eta_hbm and t_launch are fixed, stated constants. All functions are ``lru_cache``-d on their
(hashable) shape arguments: the tuner asks for the same shapes thousands of times.
"""

from __future__ import annotations

from functools import lru_cache

from primus_launch.projection import calibration as cal
from primus_launch.projection.hardware import get_gpu

TILE = 128


def _wave(tiles: int, sms: int) -> float:
    if tiles <= 0:
        return 1.0
    waves = -(-tiles // sms)
    return tiles / (waves * sms)


def elem_bytes(precision: str) -> int:
    return {"fp8": 1, "fp32": 4}.get(precision, 2)


@lru_cache(maxsize=None)
def _gpu_consts(gpu: str, precision: str) -> tuple[float, float, int, float]:
    """(achievable tensor FLOP/s at E_max, effective HBM B/s, SMs, fp8-or-not peak)."""
    g = get_gpu(gpu)
    e_max = cal.gemm_efficiency(gpu)
    peak = g.peak_flops(precision) * cal.sustained_clock(gpu, g.sustained_clock_fraction)
    if precision == "fp8" and g.peak_flops_fp8 > g.peak_flops_bf16:
        e_max *= cal.FP8_GEMM_REL
    return peak * e_max, g.hbm_bw * cal.HBM_BW_EFFICIENCY, g.num_sms, peak


@lru_cache(maxsize=200_000)
def gemm_time(m: int, n: int, k: int, gpu: str, precision: str = "bf16", batch: int = 1) -> float:
    """Seconds for ``batch`` GEMMs of [m,k]x[k,n] on ``gpu`` in ``precision`` (module doc)."""
    if m <= 0 or n <= 0 or k <= 0 or batch <= 0:
        return 0.0
    rate, hbm, sms, _ = _gpu_consts(gpu, precision)
    tiles = -(-m // TILE) * -(-n // TILE) * batch
    eff = _wave(tiles, sms) * k / (k + cal.GEMM_K0)
    flops = 2.0 * m * n * k * batch
    nbytes = (m * k + k * n + m * n) * batch * elem_bytes(precision)
    return max(flops / (rate * eff), nbytes / hbm) + cal.KERNEL_LAUNCH_S


def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    return 2.0 * m * n * k * batch


@lru_cache(maxsize=200_000)
def attention_time(b: int, heads: int, sq: int, skv: int, d_qk: int, d_v: int, causal: bool,
                   gpu: str) -> tuple[float, float]:
    """(forward, backward) seconds of a flash-attention core; bf16 (FP8 recipes keep it bf16)."""
    if b <= 0 or heads <= 0 or sq <= 0 or skv <= 0:
        return 0.0, 0.0
    rate, _, sms, _ = _gpu_consts(gpu, "bf16")
    c = min(1.0, (1 + TILE / skv) / 2) if causal else 1.0
    skv_eff = skv * c
    flops = 2.0 * b * heads * sq * skv_eff * (d_qk + d_v)
    tiles = b * heads * -(-sq // TILE)
    eff = cal.attention_efficiency(gpu) / cal.gemm_efficiency(gpu) * _wave(tiles, sms) * skv_eff / (skv_eff + cal.ATTN_S0)
    fwd = flops / (rate * eff) + cal.KERNEL_LAUNCH_S
    bwd = 2.5 * flops / (rate * eff * cal.ATTN_BWD_REL) + cal.KERNEL_LAUNCH_S
    return fwd, bwd


def attention_flops(b: int, heads: int, sq: int, skv: int, d_qk: int, d_v: int, causal: bool) -> float:
    c = min(1.0, (1 + TILE / skv) / 2) if causal else 1.0
    return 2.0 * b * heads * sq * skv * c * (d_qk + d_v)


@lru_cache(maxsize=200_000)
def elementwise_time(nbytes: float, gpu: str) -> float:
    """Seconds for a bandwidth-bound kernel moving ``nbytes`` through HBM (read + write)."""
    if nbytes <= 0:
        return 0.0
    _, hbm, _, _ = _gpu_consts(gpu, "bf16")
    return nbytes / hbm + cal.KERNEL_LAUNCH_S


def clear_caches() -> None:
    """Forget cached results (after the calibration constants change)."""
    for f in (_gpu_consts, gemm_time, attention_time, elementwise_time):
        f.cache_clear()
