"""FP8 / MXFP8 core attention (Megatron ``fp8_dot_product_attention``, TE ``fp8_dpa``): the measured
FP8 / BF16 kernel-time ratio applied to the BF16 attention curve's time.

Model: ``t_fp8(pass) = r(arch, case, mask, format, pass, s) x t_bf16(pass)`` where ``t_bf16`` is
:func:`compute.attention_time` and ``r`` is the ratio of cudnn-frontend's FP8 (or MXFP8) time to its
BF16 time of the same case, interpolated linearly in log2(sequence) between the measured sequences
(2k-32k) and held at the ends.  Records: ``cfe26fp8-*`` in ``projection/data/kernel_evidence.json``,
from cudnn-frontend @3929da2 ``benchmark/sdpa_benchmark_training/results`` (cuDNN 9.22 on GB200 /
GB300, April 2026; cuDNN 9.19 on H200, February 2026; batch 2 (H200: 1), non-deterministic
backward; kernel time only: Q/K/V and dO are handed to cuDNN already quantised).  Cases:

- ``d128``: Llama-3.1 GQA (64 / 8 heads, head dim 128); used for head dims below 160;
- ``d192``: DeepSeek-V3 MLA shapes (128 heads, d_qk 192, d_v 128); used for d_qk >= 160
  (Kimi-K2.6's 64-head MLA records agree within a few percent: the test holds them);
- ``window``: GPT-OSS sliding window 128 (128 heads, d64).  The FP8 / MXFP8 backward does not skip
  the tiles outside the window: its time grows as s^2 (1.73 / 6.18 / 23.2 / 90.3 ms at 4k / 8k /
  16k / 32k on GB200) while BF16's grows as s, so the ratio is ~s / 128 / 8 (3.3-4.5x at 4k);
  another window ``w`` reads the table at the sequence ``s x 128 / w`` (the ratio follows
  s / w).  No cudnn-frontend record has attention sinks: a layer with sinks (GPT-OSS) takes the
  ratio of its mask (its sink itself is priced as BF16 prices it, i.e. not at all).

Where the records say nothing, or TE would not run FP8 attention, the layer keeps BF16 time
(:func:`fp8_attention_case` returns the reason).  TE's backend filter (``memory/fp8.py``
``te_fp8_attention``, which the saved tensors read too) (Transformer Engine d0067d0,
the 26.08 image's, and 366798ef = v2.14.1: ``attention/dot_product_attention/utils.py``
``get_attention_backend``, "Filter: Execution type"): FP8 attention runs only in FusedAttention
(cuDNN); FP8 current scaling (``tensorwise``) and MXFP8 need sm100+ (MXFP8 cuDNN >= 9.21);
Float8BlockScaling / NVFP4 disable it; sliding windows and sinks in FP8 need sm100+ with cuDNN >=
9.21 (d0067d0; 366798ef has no FP8 sinks).  Megatron-LM (``megatron/core/fp8_utils.py``) passes
``fp8_dpa`` to the delayed, tensorwise and MXFP8 recipes only.  On Hopper cudnn-frontend's H200
FP8 sliding-window runs fail (cuDNN 9.19), matching TE's filter.

Quantisation TE adds around the kernel (``backends.py`` ``FusedAttnFunc``): Q/K/V are quantised
(``combine_and_quantize``: read 2 B, write 1 B per element; MXFP8 also writes the columnwise copy
the backward's transposed GEMMs read: 2 B), the FP8 output is dequantised to BF16 for the output
projection (read 1 B, write 2 B per element), dO is quantised in the backward (as Q/K/V); priced
at the recipe's quantisation bandwidth (:func:`compute.quant_time`).
"""

from __future__ import annotations

import math

import numpy as np

from primus_launch.projection.memory.fp8 import FP8_DPA_FORMAT, te_fp8_attention

# (arch, case, mask, format, pass) -> ((sequence, fp8 time / bf16 time), ...): module doc; the test
# (tests/test_fp8_attention.py) recomputes each ratio from its cfe26fp8-* record.
RATIOS: dict[tuple[str, str, str, str, str], tuple[tuple[int, float], ...]] = {
    ('blackwell', 'd128', 'causal', 'fp8', 'bwd'):
        ((2048, 1.064), (4096, 0.974), (8192, 0.916), (16384, 0.814), (32768, 0.727)),
    ('blackwell', 'd128', 'causal', 'fp8', 'fwd'):
        ((2048, 0.776), (4096, 0.78), (8192, 0.769), (16384, 0.793), (32768, 0.738)),
    ('blackwell', 'd128', 'causal', 'mxfp8', 'bwd'):
        ((2048, 1.185), (4096, 1.089), (8192, 1.035), (16384, 0.925), (32768, 0.86)),
    ('blackwell', 'd128', 'causal', 'mxfp8', 'fwd'):
        ((2048, 0.824), (4096, 0.834), (8192, 0.827), (16384, 0.854), (32768, 0.793)),
    ('blackwell', 'd128', 'full', 'fp8', 'bwd'):
        ((2048, 0.926), (4096, 0.856), (8192, 0.792), (16384, 0.748), (32768, 0.692)),
    ('blackwell', 'd128', 'full', 'fp8', 'fwd'):
        ((2048, 0.76), (4096, 0.764), (8192, 0.79), (16384, 0.75), (32768, 0.735)),
    ('blackwell', 'd128', 'full', 'mxfp8', 'bwd'):
        ((2048, 1.052), (4096, 1.004), (8192, 0.939), (16384, 0.884), (32768, 0.853)),
    ('blackwell', 'd128', 'full', 'mxfp8', 'fwd'):
        ((2048, 0.818), (4096, 0.822), (8192, 0.852), (16384, 0.807), (32768, 0.79)),
    ('blackwell', 'd192', 'causal', 'fp8', 'bwd'):
        ((2048, 0.645), (4096, 0.624), (8192, 0.609), (16384, 0.576), (32768, 0.58)),
    ('blackwell', 'd192', 'causal', 'fp8', 'fwd'):
        ((2048, 0.645), (4096, 0.671), (8192, 0.661), (16384, 0.675), (32768, 0.712)),
    ('blackwell', 'd192', 'causal', 'mxfp8', 'bwd'):
        ((2048, 0.809), (4096, 0.774), (8192, 0.798), (16384, 0.731), (32768, 0.702)),
    ('blackwell', 'd192', 'causal', 'mxfp8', 'fwd'):
        ((2048, 0.698), (4096, 0.731), (8192, 0.714), (16384, 0.713), (32768, 0.749)),
    ('blackwell', 'd192', 'full', 'fp8', 'bwd'):
        ((2048, 0.58), (4096, 0.567), (8192, 0.53), (16384, 0.547), (32768, 0.562)),
    ('blackwell', 'd192', 'full', 'fp8', 'fwd'):
        ((2048, 0.685), (4096, 0.662), (8192, 0.681), (16384, 0.7), (32768, 0.677)),
    ('blackwell', 'd192', 'full', 'mxfp8', 'bwd'):
        ((2048, 0.696), (4096, 0.701), (8192, 0.67), (16384, 0.664), (32768, 0.696)),
    ('blackwell', 'd192', 'full', 'mxfp8', 'fwd'):
        ((2048, 0.74), (4096, 0.719), (8192, 0.731), (16384, 0.727), (32768, 0.733)),
    ('blackwell', 'window', 'causal', 'fp8', 'bwd'):
        ((2048, 2.262), (4096, 3.723), (8192, 6.779), (16384, 12.778), (32768, 24.471)),
    ('blackwell', 'window', 'causal', 'fp8', 'fwd'):
        ((2048, 0.927), (4096, 0.929), (8192, 0.93), (16384, 0.932), (32768, 0.58)),
    ('blackwell', 'window', 'causal', 'mxfp8', 'bwd'):
        ((2048, 2.709), (4096, 4.473), (8192, 8.153), (16384, 15.369), (32768, 29.353)),
    ('blackwell', 'window', 'causal', 'mxfp8', 'fwd'):
        ((2048, 1.0), (4096, 1.0), (8192, 1.007), (16384, 1.005), (32768, 0.621)),
    ('blackwell_ultra', 'd128', 'causal', 'fp8', 'bwd'):
        ((2048, 1.022), (4096, 0.895), (8192, 0.806), (16384, 0.74), (32768, 0.7)),
    ('blackwell_ultra', 'd128', 'causal', 'fp8', 'fwd'):
        ((2048, 0.7), (4096, 0.672), (8192, 0.641), (16384, 0.627), (32768, 0.628)),
    ('blackwell_ultra', 'd128', 'causal', 'mxfp8', 'bwd'):
        ((2048, 1.191), (4096, 1.093), (8192, 1.022), (16384, 0.964), (32768, 0.938)),
    ('blackwell_ultra', 'd128', 'causal', 'mxfp8', 'fwd'):
        ((2048, 0.79), (4096, 0.749), (8192, 0.722), (16384, 0.702), (32768, 0.701)),
    ('blackwell_ultra', 'd128', 'full', 'fp8', 'bwd'):
        ((2048, 0.871), (4096, 0.777), (8192, 0.725), (16384, 0.705), (32768, 0.655)),
    ('blackwell_ultra', 'd128', 'full', 'fp8', 'fwd'):
        ((2048, 0.664), (4096, 0.636), (8192, 0.638), (16384, 0.633), (32768, 0.602)),
    ('blackwell_ultra', 'd128', 'full', 'mxfp8', 'bwd'):
        ((2048, 1.042), (4096, 0.972), (8192, 0.936), (16384, 0.909), (32768, 0.863)),
    ('blackwell_ultra', 'd128', 'full', 'mxfp8', 'fwd'):
        ((2048, 0.743), (4096, 0.705), (8192, 0.702), (16384, 0.697), (32768, 0.653)),
    ('blackwell_ultra', 'd192', 'causal', 'fp8', 'bwd'):
        ((2048, 0.605), (4096, 0.577), (8192, 0.559), (16384, 0.53), (32768, 0.536)),
    ('blackwell_ultra', 'd192', 'causal', 'fp8', 'fwd'):
        ((2048, 0.56), (4096, 0.571), (8192, 0.583), (16384, 0.595), (32768, 0.592)),
    ('blackwell_ultra', 'd192', 'causal', 'mxfp8', 'bwd'):
        ((2048, 0.79), (4096, 0.751), (8192, 0.725), (16384, 0.706), (32768, 0.692)),
    ('blackwell_ultra', 'd192', 'causal', 'mxfp8', 'fwd'):
        ((2048, 0.619), (4096, 0.632), (8192, 0.645), (16384, 0.656), (32768, 0.673)),
    ('blackwell_ultra', 'd192', 'full', 'fp8', 'bwd'):
        ((2048, 0.532), (4096, 0.527), (8192, 0.519), (16384, 0.486), (32768, 0.505)),
    ('blackwell_ultra', 'd192', 'full', 'fp8', 'fwd'):
        ((2048, 0.58), (4096, 0.586), (8192, 0.594), (16384, 0.591), (32768, 0.57)),
    ('blackwell_ultra', 'd192', 'full', 'mxfp8', 'bwd'):
        ((2048, 0.671), (4096, 0.659), (8192, 0.642), (16384, 0.625), (32768, 0.64)),
    ('blackwell_ultra', 'd192', 'full', 'mxfp8', 'fwd'):
        ((2048, 0.642), (4096, 0.643), (8192, 0.65), (16384, 0.652), (32768, 0.626)),
    ('blackwell_ultra', 'window', 'causal', 'fp8', 'bwd'):
        ((2048, 2.057), (4096, 3.348), (8192, 6.02), (16384, 11.305), (32768, 21.67)),
    ('blackwell_ultra', 'window', 'causal', 'fp8', 'fwd'):
        ((2048, 0.827), (4096, 0.827), (8192, 0.824), (16384, 0.823), (32768, 0.512)),
    ('blackwell_ultra', 'window', 'causal', 'mxfp8', 'bwd'):
        ((2048, 2.559), (4096, 4.233), (8192, 7.712), (16384, 14.6), (32768, 28.091)),
    ('blackwell_ultra', 'window', 'causal', 'mxfp8', 'fwd'):
        ((2048, 0.885), (4096, 0.866), (8192, 0.861), (16384, 0.856), (32768, 0.532)),
    ('hopper', 'd128', 'causal', 'fp8', 'bwd'):
        ((2048, 0.942), (4096, 1.006), (8192, 1.258), (16384, 1.548), (32768, 1.569)),
    ('hopper', 'd128', 'causal', 'fp8', 'fwd'):
        ((2048, 0.69), (4096, 0.692), (8192, 0.668), (16384, 0.667), (32768, 0.66)),
    ('hopper', 'd128', 'full', 'fp8', 'bwd'):
        ((2048, 0.95), (4096, 0.932), (8192, 0.933), (16384, 0.928), (32768, 0.848)),
    ('hopper', 'd128', 'full', 'fp8', 'fwd'):
        ((2048, 0.728), (4096, 0.69), (8192, 0.675), (16384, 0.666), (32768, 0.652)),
}

RECORD_GPU = {"blackwell": "gb200", "blackwell_ultra": "gb300", "hopper": "h200"}
RECORD_MODEL = {"d128": "llama3.1", "d192": "dsv3", "window": "gpt_oss"}
WINDOW_RECORDED = 128
def fp8_attention_case(arch: str, recipe: str | None, d_qk: int, causal: bool, window: int | None,
                       sinks: bool) -> tuple[tuple[str, str, str, str] | None, str]:
    """((arch, case, mask, format) of :data:`RATIOS`, "") when TE runs this attention in FP8
    (``memory/fp8.py`` :func:`te_fp8_attention`) and the records cover it; (None, reason) when the layer keeps BF16 time."""
    why = te_fp8_attention(arch, recipe, window_or_sinks=bool(window or sinks))
    if why:
        return None, why
    if arch not in RECORD_GPU:
        return None, f"{arch or 'this GPU'}: no FP8 attention record (priced as BF16)"
    fmt = FP8_DPA_FORMAT[recipe]
    if window:
        case = "window"
    else:
        case = "d192" if d_qk >= 160 else "d128"
    key = (arch, case, "causal" if causal or window else "full", fmt)
    if key + ("fwd",) not in RATIOS:
        return None, f"no FP8 attention record for {key}: priced as BF16"
    return key, ""


def ratio(key: tuple[str, str, str, str], pas: str, seq: int, window: int | None = None) -> float:
    """FP8 / BF16 time of ``key``'s records for pass ``pas`` at ``seq`` keys (module doc: log2
    interpolation, held at the ends; a window other than 128 reads the table at seq x 128 / window)."""
    pts = RATIOS[key + (pas,)]
    s = float(seq) * (WINDOW_RECORDED / window if window else 1.0)
    return float(np.interp(math.log2(max(s, 1.0)), [math.log2(p[0]) for p in pts], [p[1] for p in pts]))


def quant_bytes(fmt: str, q_elems: float, kv_elems: float, o_elems: float) -> tuple[float, float]:
    """(forward, backward) HBM bytes of TE's quantise / dequantise kernels around FP8 attention
    (module doc): Q/K/V quantised (3 B per element, MXFP8 4 B with the columnwise copy) and O
    dequantised (3 B) in the forward, dO quantised in the backward."""
    qb = 4.0 if fmt == "mxfp8" else 3.0
    return qb * (q_elems + kv_elems) + 3.0 * o_elems, qb * o_elems
