"""Mamba-2 mixer layers of hybrid stacks (Nemotron-H, Nemotron 3): parameters, model FLOPs and the two kernels
that are not GEMMs (the causal depthwise conv1d and the SSD chunked scan).

Shapes (megatron-core 0.16.1 ``ssm/mamba_mixer.py`` ``MambaMixer``; h = hidden, P = ``mamba_head_dim``,
H = Mamba heads (``mamba_num_heads`` or 2h / P), d_i = H * P, G = ``mamba_num_groups``, N = ``mamba_state_dim``,
k = 4 the conv kernel (``d_conv``), t = TP):

- ``in_proj`` (TE ``LayerNormColumnParallelLinear``: the layer's RMSNorm fused): h -> (2 d_i + 2 G N + H) / t
  (z, x, B, C, dt), no bias;
- ``conv1d``: depthwise, kernel k, over the (d_i + 2 G N) / t channels of x, B, C, with bias;
- ``dt_bias``, ``A_log``, ``D``: H / t each (``D_has_hdim`` False); the gated RMSNorm weight d_i / t;
- ``out_proj`` (TE ``RowParallelLinear``): d_i / t -> h, no bias.

Parameters per GPU: ``h + h (2 d_i + 2GN + H)/t + (k + 1)(d_i + 2GN)/t + 3H/t + d_i/t + d_i h / t``
(:func:`mamba_layer_params`; RMSNorm weight h, LayerNorm 2h).

Model FLOPs (:func:`mamba_layer_flops`): Megatron-LM ``megatron/training/training.py``
``num_floating_point_operations`` ``mamba_layer_flops`` (mirror @d98e8a64, 2026-08-22) per token, forward:
``2 h (2 d_in + 2 G N + H) + 7 d_in N + 2 d_in h`` with ``d_in = 2h`` ALWAYS (the formula does not use
``mamba_num_heads * head_dim``; H is ``mamba_num_heads``); x 3 for forward + backward.

Kernel times (:func:`ssd_scan_seconds`, :func:`conv1d_bytes`): the forward runs mamba_ssm's
``mamba_split_conv1d_scan_combined`` (``use_mamba_mem_eff_path``, Megatron's default): causal_conv1d's
kernel, the Triton SSD chunk scan (``mamba_chunk_scan_combined``'s five kernels), the gated RMSNorm, then
``out_proj``.  The SSD scan is priced from a public measurement of mamba_ssm's Triton ``mamba_chunk_scan_combined``
forward on one H100 SXM (vLLM PR #27299, comment of 2025-10-25 by cyang49, "Original" column, granite-4.0-h-small
shapes: 128 heads, head dim 64, 1 group, state 128): 1.07e7 - 1.29e7 tokens/s for 8k - 262k tokens, i.e.
:data:`SSD_FWD_S_PER_TOKEN_HEAD` = 1 / (1.2e7 x 128) s per token and head at P = 64, N = 128; scaled by
P N / (64 x 128) for other sizes, and by the H100's HBM bandwidth over the GPU's (at that rate the kernels run
~60 TFLOP/s, 6 % of the H100's BF16 peak, but move ~1 KB per token and head -- x, out, the fp32 chunk states
written, passed and read back -- ~1.5 TB/s, half its HBM bandwidth).  The backward is priced from the structure of
mamba_ssm's ``MambaSplitConv1dScanCombinedFn.backward`` / ``_mamba_chunk_scan_combined_bwd`` (@e9594ce): it first
recomputes the forward's chunk cumsum, ``C B^T``, chunk states and state passing (~1x the forward), then runs the
gradient kernels (dz, dstates, state-passing backward, dx, dB, dC, dCB, ddA: each forward matmul's two gradient
matmuls, ~2x the forward): :data:`SSD_BWD_OVER_FWD` = 3, a structural ratio, NOT a measurement.  The same
backward recomputes causal_conv1d's forward before its backward kernel (read x and dy, write dx): 1 + 1.5 = 2.5x the
forward's bytes (:data:`CONV_BWD_OVER_FWD`).  megatron-core 0.16.1 ``MambaMixer._ssm_training`` copies ``in_proj``'s
output to batch-major (``rearrange(zxBCdt, "l b d -> b l d").contiguous()``) and the scan's output back
(``rearrange(y, "b l d -> l b d").contiguous()``), each copy's gradient copied back in the backward
(:func:`layout_copy_bytes`).  The gated RMSNorm is a bandwidth kernel (:func:`gated_norm_bytes`).

The record ran no ``z``: megatron-core's ``_ssm_training`` gates inside the scan (``rmsnorm_weight=None``), so the
forward also reads ``z`` and writes the ungated ``out_x``, and the backward runs ``_chunk_scan_bwd_dz`` (read
``dout``, ``out_x``, ``z``, ``x``; write ``dz``, ``dout_x``) first (:func:`ssd_gate_bytes`, priced as HBM bytes).
Counted from the code (mamba_ssm @e9594ce; megatron-core at Megatron-Bridge 26.06 / 26.08's Megatron-LM pins
d1410e15 / cd4afffa, the same ``_ssm_training`` but for cd4afffa's ``state_dtype`` argument, the params dtype bf16 by
default, as the kernels' own default): forward 5 SSD kernels + causal_conv1d + the layout copies + the
gated norm + ``A = -exp(A_log.float())`` (3 tiny); backward: causal_conv1d forward recomputed and its backward, the
4 recomputed state kernels and a ``dt`` clone, ``_chunk_scan_bwd_dz``, ``dstates``, state-passing backward, ``dx``,
``dB``, ``dC``, ``dCB``, 2 ``_bmm_chunk_bwd``, ``ddAcs_stable``, ``_chunk_cumsum_bwd`` and ~8 small torch ops (the
``dD`` / ``dcb`` sums, ``ddA_cumsum_prev`` update and its flip / cumsum / flip, ``ddA +=``), about 30 launches (the model counts 5 / 14 for the scan): under
the ``mamba`` CUDA-graph scope every Nemotron 3 recipe sets, no host cost, and a few microseconds of GPU each.  No TP
collective inside the mixer (``in_proj`` / ``out_proj`` carry TP as column- / row-parallel GEMMs); with context
parallelism the mixer's own all-to-alls (below, "Context parallelism").  What remains -- the SSD at training shapes and its backward -- is the one
calibrated constant ``calibration.MAMBA_SSD_TRAIN_FACTOR`` (fitted on the two H100 Nano rows,
``calibration.MAMBA_SSD_ROWS``; scripts/validation/README.md, Known gaps, ssd15), a multiplier on the record-priced
forward and backward.

Where a public kernel measurement bounds a GPU's SSD speed below the HBM ratio it caps it (:data:`SSD_SPEED_CAP`,
:func:`ssd_speed_over_h100`): the MI300X runs at most 1.05x the H100 (Zyphra's hand-written MI300X Mamba-2 backward
kernel: 1.04-1.06x an H100 at 2k-8k tokens), not 5.3 / 3.35 = 1.58x.  Not measured anywhere public (searched: the
state-spaces/mamba, causal-conv1d, flash-linear-attention, TileLang / TileOPs, vLLM, flashinfer and Megatron-LM
repositories and threads, the Mamba-2 paper, ROCm blogs; scripts/validation/README.md "Known gaps"): mamba_ssm's
Triton SSD forward or backward on B200 / GB200 / B300 / GB300 or MI300X, its backward anywhere as a number with
its shape, its speed at state sizes other than 128 (the ``P N`` scaling is a guess; the Mamba-2 paper's Figure 10
says SSD time grows little with N, which the ``--ssd-bytes`` what-if of ``scripts/hybrid_probe.py`` prices), and at
chunk 128 (the record ran 256).  causal_conv1d's backward kernel is checked against causal-conv1d PR #88 (RTX PRO
6000 Blackwell: 78-84 % of its bandwidth, a bandwidth-bound kernel as priced; ``tests/test_mamba_kernels.py``).

Context parallelism (megatron-core 0.16.1 ``ssm/mamba_context_parallel.py`` ``MambaContextParallel``, called by
``MambaMixer.forward`` / ``_ssm_training``; c = cp, T = b s / c the rank's tokens, g = ``ngroups_local_tpcp``):
``in_proj`` and ``out_proj`` run on the rank's T tokens; ``pre_conv_ssm`` splits ``in_proj``'s output into z, x,
B, C, dt, repeats B and C ``r = c / (G/t)`` times when G/t < c (``group_repeat_count``, one group per rank, g = 1;
else r = 1, g = G / (t c)) and sends each through its own all-to-all (``_all_to_all_cp2hp``: [T, b, w] ->
[c T, b, w / c]), 5 all-to-alls, then concatenates them and undoes the attention load-balancing order (a copy);
the conv and the SSD scan run on the FULL sequence c T for H / (t c) heads, d_i / (t c) channels and g groups;
``post_conv_ssm`` redoes the load-balancing order and sends the scan's output back (``_all_to_all_hp2cp``: [c T, b,
d_i / (t c)] -> [T, b, d_i / t]), 1 all-to-all, before the gated norm and ``out_proj``.  Each all-to-all is
``tensor_parallel.all_to_all`` (``_AllToAll``: its backward is the same all-to-all of the gradient), so 6 in the
forward and 6 in the backward, of :func:`cp_all_to_all_bytes` per rank each.  Per GPU the scan's tensors are c T
tokens over 1 / c of the channels -- the same bytes as T tokens over all of them but for B and C, which carry
``c g N`` features per token instead of ``G N / t`` (:func:`scan_width`, :func:`scan_conv_channels`): the saved
``zxbcdt`` / ``out_x``, the backward temporaries and the kernel bytes follow; the chunk states are ``c T / Q``
chunks of H / (t c) heads, again the same.  The copies CP adds (:func:`cp_copy_bytes`) and the backward moment of
the gradient's way back through the all-to-alls (:func:`mamba_backward_temp_bytes`) are priced too.  No saved
tensor is added: ``torch.split`` / ``torch.cat`` / ``_AllToAll`` keep only sizes for their backward.
"""

from __future__ import annotations

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost import calibration

#: MambaMixer's fixed depthwise conv kernel (megatron-core 0.16.1 ``MambaMixer(d_conv=4)``, never overridden by
#: ``MambaLayer``)
D_CONV = 4
#: seconds of mamba_chunk_scan_combined's forward per token and head at head dim 64, state 128 on an H100 SXM
#: (vLLM PR #27299, H100 microbenchmark, mamba_ssm Triton kernels: ~1.2e7 tokens/s at 128 heads)
SSD_FWD_S_PER_TOKEN_HEAD = 1.0 / (1.2e7 * 128)
#: the H100 SXM's HBM bandwidth the measurement ran at (bytes/s)
SSD_REF_HBM_BW = 3.35e12
#: backward / forward of the SSD scan: the forward's states recomputed (1) + two gradient matmuls per forward matmul
#: (2); mamba_ssm ssd_combined.py backward's structure, not a measurement
SSD_BWD_OVER_FWD = 3.0
#: causal_conv1d backward bytes / forward bytes: the forward recomputed (1) + the backward kernel (read x, dy; write
#: dx: 1.5)
CONV_BWD_OVER_FWD = 2.5
#: public kernel measurements that bound the SSD scan's speed over the H100's below the HBM ratio, by GPU:
#: (times the H100's speed, source).  MI300X: Zyphra's hand-written HIP Mamba-2 backward kernel runs 1.04 / 1.05 /
#: 1.06x an H100 at 2k / 4k / 8k tokens (Zyphra "Training transformers and hybrid models on AMD MI300X", 2024, the
#: same text in ROCm/rocm-blogs PR #25, blogs/artificial-intelligence/mamba2-flash-attention-kernels); Primus runs
#: mamba_ssm's Triton kernels on ROCm (AMD-AGI/Primus ``patches/mamba_rocm_patches.py``), and the blog calls its
#: kernel the first MI300X Mamba-2 backward to surpass an H100, so 1.05 bounds the speed, not the HBM ratio 1.58
SSD_SPEED_CAP: dict[str, tuple[float, str]] = {
    "mi300x": (1.05, "Zyphra MI300X Mamba-2 backward kernel: 1.04-1.06x H100 at 2k-8k tokens (ROCm/rocm-blogs PR #25)"),
}
SSD_SOURCE = ("vLLM PR #27299 (H100 SXM, mamba_ssm Triton mamba_chunk_scan_combined forward, 1.2e7 tokens/s at "
              "128 heads x P 64 x N 128), scaled by HBM bandwidth (MI300X capped at 1.05x the H100: Zyphra's MI300X "
              "Mamba-2 kernel); backward 3x forward (recomputed states + gradient "
              "matmuls, mamba_ssm ssd_combined.py structure, not measured); x calibration.MAMBA_SSD_TRAIN_FACTOR "
              "(training shapes and backward, fitted on the two H100 Nemotron 3 Nano rows)")


def _norm(m: ModelArch, n: int) -> int:
    return n if m.normalization == "rmsnorm" else 2 * n


def in_proj_width(m: ModelArch) -> int:
    """``in_proj``'s output features before TP: ``2 d_i + 2 G N + H`` (z, x, B, C, dt)."""
    return 2 * m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim + m.mamba_heads


def conv_channels(m: ModelArch) -> int:
    """conv1d's channels before TP: ``d_i + 2 G N`` (x, B, C)."""
    return m.mamba_d_inner + 2 * m.mamba_num_groups * m.mamba_state_dim


def mamba_layer_params(m: ModelArch, tp: int) -> int:
    """Parameters of one Mamba layer on one GPU (module doc; megatron-core 0.16.1 ``MambaMixer.__init__``)."""
    h, H, di = m.hidden_size, m.mamba_heads, m.mamba_d_inner
    return (_norm(m, h) + h * in_proj_width(m) // tp + (D_CONV + 1) * conv_channels(m) // tp
            + 3 * H // tp + di // tp + di * h // tp)


def mamba_layer_flops(m: ModelArch) -> float:
    """Megatron-LM's forward model FLOPs of one Mamba layer per token (module doc; ``d_in = 2h`` as Megatron)."""
    h, N, G = m.hidden_size, m.mamba_state_dim, m.mamba_num_groups
    d_in = 2 * h
    H = m.mamba_num_heads or d_in // m.mamba_head_dim
    return 2.0 * h * (2 * d_in + 2 * G * N + H) + 7.0 * d_in * N + 2.0 * d_in * h


def ssd_speed_over_h100(gpu: str, hbm_bw: float) -> float:
    """How many times faster than the H100 measurement the SSD scan runs on ``gpu``: the HBM bandwidth ratio
    ``hbm_bw / 3.35 TB/s``, capped by :data:`SSD_SPEED_CAP` where a public kernel measurement bounds it (MI300X:
    1.05, module doc)."""
    speed = hbm_bw / SSD_REF_HBM_BW
    cap = SSD_SPEED_CAP.get(gpu)
    return min(speed, cap[0]) if cap else speed


def ssd_record_seconds(m: ModelArch, tokens: int, tp: int, hbm_bw: float, gpu: str = "") -> tuple[float, float]:
    """(forward, backward) seconds of the SSD chunked scan of ``tokens`` tokens over the H / t heads of one GPU as
    its public record prices it (module doc: the H100 inference forward scaled by head size, state size and
    :func:`ssd_speed_over_h100`; the backward :data:`SSD_BWD_OVER_FWD` times the forward)."""
    heads = m.mamba_heads // tp
    size = (m.mamba_head_dim * m.mamba_state_dim) / (64 * 128)
    f = tokens * heads * SSD_FWD_S_PER_TOKEN_HEAD * size / ssd_speed_over_h100(gpu, hbm_bw)
    return f, SSD_BWD_OVER_FWD * f


def ssd_scan_seconds(m: ModelArch, tokens: int, tp: int, hbm_bw: float, gpu: str = "") -> tuple[float, float]:
    """(forward, backward) seconds of the SSD chunked scan in a training step: :func:`ssd_record_seconds` times the
    training factor ``calibration.MAMBA_SSD_TRAIN_FACTOR`` (fitted on ``calibration.MAMBA_SSD_ROWS``, module doc)."""
    f, b = ssd_record_seconds(m, tokens, tp, hbm_bw, gpu)
    k = calibration.MAMBA_SSD_TRAIN_FACTOR
    return k * f, k * b


def ssd_gate_bytes(m: ModelArch, tokens: int, tp: int) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the ``z`` gate megatron-core's ``_ssm_training`` leaves inside the scan
    (``rmsnorm_weight=None``: ``MambaSplitConv1dScanCombinedFn`` passes ``z`` to ``_mamba_chunk_scan_combined_fwd``),
    which the H100 record (no ``z``) does not carry, bf16 over the d_i / t channels of one GPU (mamba_ssm @e9594ce
    ``ops/triton/ssd_chunk_scan.py``):

    - forward, inside ``_chunk_scan_fwd_kernel`` (``HAS_Z``): it also reads ``z`` and writes the ungated ``out_x``
      beside ``out``: ``2 x 2 B x T d_i / t``, no extra kernel;
    - backward, ``_chunk_scan_bwd_dz`` (its own kernel, first after the recomputed states): reads ``dout``,
      ``out_x``, ``z`` and ``x`` (for ``dD``), writes ``dz`` and the ungated ``dout_x``: ``6 x 2 B x T d_i / t``."""
    per = 2.0 * tokens * m.mamba_d_inner / max(1, tp)
    return 2.0 * per, 6.0 * per


def cp_groups(m: ModelArch, tp: int, cp: int = 1) -> int:
    """Mamba groups of one GPU's scan, ``ngroups_local_tpcp`` (megatron-core 0.16.1 ``MambaContextParallel``):
    G / t at cp 1; with cp = c, 1 when G / t < c (each group's state repeated over c / (G/t) ranks), else
    G / (t c)."""
    g, c = m.mamba_num_groups // max(1, tp), max(1, cp)
    return g if c == 1 else (1 if g < c else g // c)


def scan_width(m: ModelArch, tp: int, cp: int = 1) -> float:
    """Features per token of the scan's input ``zxBCdt`` on one GPU, over the c T tokens of the full sequence:
    ``(2 d_i + H) / (t c) + 2 g N`` (:func:`cp_groups`; at cp 1 ``in_proj``'s width over t)."""
    c = max(1, cp)
    return (2 * m.mamba_d_inner + m.mamba_heads) / (max(1, tp) * c) + 2 * cp_groups(m, tp, c) * m.mamba_state_dim


def scan_conv_channels(m: ModelArch, tp: int, cp: int = 1) -> float:
    """conv1d's channels on one GPU (``MambaContextParallel.conv1d_channels``): ``d_i / (t c) + 2 g N``."""
    c = max(1, cp)
    return m.mamba_d_inner / (max(1, tp) * c) + 2 * cp_groups(m, tp, c) * m.mamba_state_dim


def cp_all_to_all_bytes(m: ModelArch, tokens: int, tp: int, cp: int) -> list[float]:
    """Bytes each rank puts into each of the Mamba mixer's forward all-to-alls with context parallelism c > 1
    (module doc; bf16, ``tokens`` = T = b s / c): ``pre_conv_ssm``'s z and x ``2 T d_i / t`` each, B and C after
    their repeat ``2 T c g N`` each (``G/t x r = c g`` groups), dt ``2 T H / t``; ``post_conv_ssm``'s output
    ``2 T d_i / t``.  The backward runs the same six on the gradients.  Empty at cp 1."""
    if cp <= 1:
        return []
    t = max(1, tp)
    zx = 2.0 * tokens * m.mamba_d_inner / t
    bc = 2.0 * tokens * cp * cp_groups(m, tp, cp) * m.mamba_state_dim
    return [zx, zx, bc, bc, 2.0 * tokens * m.mamba_heads / t, zx]


def cp_copy_bytes(m: ModelArch, tokens: int, tp: int, cp: int) -> float:
    """Forward HBM bytes (read + write, bf16) of the copies context parallelism adds to one Mamba layer (module
    doc): in ``_all_to_all_cp2hp`` each of the 5 parts' ``torch.split`` + ``torch.cat`` along the tokens, the
    ``torch.cat`` of the 5 received parts and ``_undo_attention_load_balancing``'s chunk + cat: 3 x ``4 c T W'``
    (W' = :func:`scan_width`); B / C's repeat when r > 1 (read ``2 T G N / t``, write ``2 T c N`` each);
    ``_redo_attention_load_balancing`` and ``_all_to_all_hp2cp``'s split + cat of the output: 2 x ``4 T d_i / t``.
    The backward's split / chunk backwards (``torch.cat``) and the all-to-alls' ``contiguous`` mirror them (1x).
    0 at cp 1."""
    if cp <= 1:
        return 0.0
    t = max(1, tp)
    out = 12.0 * tokens * cp * scan_width(m, tp, cp) + 8.0 * tokens * m.mamba_d_inner / t
    g = m.mamba_num_groups // t
    if g < cp:   # group_repeat_count > 1: einops.repeat materialises B and C
        out += 2 * (2.0 * tokens * g * m.mamba_state_dim + 2.0 * tokens * cp * m.mamba_state_dim)
    return out


def conv1d_bytes(m: ModelArch, tokens: int, tp: int, cp: int = 1) -> float:
    """Forward bytes of causal_conv1d over the x, B, C channels of one GPU: read the bf16 input, write the bf16
    SiLU output (the kernel taps stay in registers): ``2 x 2 B x c tokens x`` :func:`scan_conv_channels`
    (``2 x 2 B x tokens x (d_i + 2GN) / t`` at cp 1)."""
    return 4.0 * tokens * max(1, cp) * scan_conv_channels(m, tp, cp)


def layout_copy_bytes(m: ModelArch, tokens: int, tp: int, cp: int = 1) -> float:
    """Forward bytes of ``MambaMixer._ssm_training``'s two layout copies (read + write, bf16) over the c T tokens of
    the scan: ``in_proj``'s output ``4 c T W'`` (:func:`scan_width`; ``4 T (2 d_i + 2GN + H)/t`` at cp 1) and the
    scan's output ``4 T d_i / t``; the backward copies their gradients back (1x)."""
    return 4.0 * tokens * (max(1, cp) * scan_width(m, tp, cp) + m.mamba_d_inner / max(1, tp))


def gated_norm_bytes(m: ModelArch, tokens: int, tp: int) -> float:
    """Forward bytes of mamba_ssm's gated RMSNorm (``norm(y) * silu(z)``): read y and z, write the output, bf16:
    ``3 x 2 B x tokens x d_i / t``."""
    return 6.0 * tokens * m.mamba_d_inner / tp


def mamba_activation_bytes(m: ModelArch, tokens: int, tp: int, sp: bool, cp: int = 1) -> float:
    """Bytes one Mamba layer keeps for its backward per micro-batch on one GPU (``tokens`` = b s / cp), bf16
    tensors, from the code that saves them (with context parallelism ``zxbcdt`` and ``out_x`` are over the c T
    tokens of the full sequence and 1 / c of the features: ``2 c T W'``, :func:`scan_width`, and ``2 T d_i / t``;
    the all-to-alls keep nothing -- module doc):

    - TE ``LayerNormColumnParallelLinear`` (``in_proj``): the norm's input ``2 Tn h`` and fp32 rstd ``4 Tn``, its
      output (the GEMM input) ``2 Tn h`` (Tn = tokens / t with sequence parallel);
    - mamba_ssm ``MambaSplitConv1dScanCombinedFn.forward`` (``ops/triton/ssd_combined.py`` @e9594ce,
      ``ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, ...)``; megatron-core 0.16.1
      ``MambaMixer._ssm_training`` passes no rmsnorm / out_proj weight): ``zxbcdt`` ``2 T (2 d_i + 2GN + H)/t`` and
      the ungated scan output ``out_x`` ``2 T d_i / t`` (the conv output and the chunk states are recomputed in
      the backward);
    - the mixer's ``RMSNormGated`` (``self.norm``): its input ``2 T d_i / t`` and an fp32 rstd per group ``4 T G/t``;
    - TE ``RowParallelLinear`` (``out_proj``): its input ``2 T d_i / t``.
    """
    t = max(1, tp)
    tn = tokens / t if sp else tokens
    h, di = m.hidden_size, m.mamba_d_inner
    return (4.0 * tn * h + 4.0 * tn + 2.0 * tokens * max(1, cp) * scan_width(m, tp, cp) + 6.0 * tokens * di / t
            + 4.0 * tokens * m.mamba_num_groups / t)


def hybrid_unmodelled(plan: Plan) -> list[tuple[str, object, str]]:
    """What the projection does not model of a hybrid Mamba / attention plan, as (field, value, what is allowed):
    per-op recompute and whole-layer offloading (selective recompute is priced per symbol:
    memory/mcore.py ``hybrid_layer_bytes``, cost/recompute.py; fine-grained module offloading moves nothing on a
    hybrid stack, cost/offload.py ``module_offload_inert``; context parallelism is priced, module doc), full
    sharding (FSDP units are GPT layers), MTP
    without its depth's pattern or with Mamba layers in it (a depth of ``*`` / ``-`` / ``E`` layers is priced symbol
    by symbol, projection/steps/stage.py) and TorchTitan (no hybrid Mamba models)."""
    m, p, t = plan.model, plan.parallel, plan.training
    if not m.is_hybrid:
        return []
    why = "not modelled for hybrid Mamba stacks"
    out: list[tuple[str, object, str]] = []
    if plan.framework != "megatron":
        out.append(("source.framework", plan.framework, f"{why}: Megatron-LM / Megatron-Bridge only"))
    if t.recompute.granularity == "op":
        out.append(("training.recompute.granularity", t.recompute.granularity, f"{why}: none, full or selective"))
    if t.offload.activation_layers:
        out.append(("training.offload.activation_layers", t.offload.activation_layers, f"{why}: 0"))
    if p.dp_sharding == "full":
        out.append(("parallel.dp_sharding", "full", f"{why}: none, optimizer or optimizer_grads"))
    if m.mtp_num_layers and not m.hybrid_mtp_pattern:
        out.append(("model.mtp_num_layers", m.mtp_num_layers, f"{why} without its layers' pattern (Megatron "
                                                              "--hybrid-layer-pattern '<main>/<mtp>'): 0"))
    if m.mtp_num_layers and m.hybrid_mtp_pattern and "M" in m.hybrid_mtp_pattern:
        out.append(("model.hybrid_mtp_pattern", m.hybrid_mtp_pattern, f"{why}: MTP depths of *, - and E layers"))
    return out


#: the SSD chunk length (megatron-core 0.16.1 ``MambaMixer(chunk_size=128)``; Megatron-Bridge HybridModelProvider
#: ``mamba_chunk_size`` 128)
CHUNK = 128


def mamba_backward_temp_bytes(m: ModelArch, tokens: int, tp: int, sp: bool = False, cp: int = 1) -> float:
    """Bytes a Mamba layer's backward holds at once on one GPU beyond the saved tensors (``tokens`` = b s / cp,
    Q = :data:`CHUNK`, W = ``in_proj`` width, C = conv channels, c = T / Q chunks; all over t), read from the code
    (mamba_ssm @e9594ce ``ops/triton/ssd_combined.py`` ``MambaSplitConv1dScanCombinedFn.backward`` and
    ``_mamba_chunk_scan_combined_bwd``, with megatron-core 0.16.1's ``rmsnorm_weight=None``, i.e. ``z`` gated in
    the scan; Python keeps every local of ``_mamba_chunk_scan_combined_bwd`` until it returns):

    - always: the layer's output gradient ``2 Tn h`` (as :class:`LayerActivations` ``backward_temp``); the scan's
      incoming gradient ``dout`` ``2 T d_i``; ``dzxbcdt`` ``2 T W``; the recomputed conv output and ``dxBC``
      ``2 x 2 T C``; ``_chunk_scan_bwd_dz``'s ``dout_x`` ``2 T d_i``; the ``dt`` clone ``2 T H``;
      ``_chunk_cumsum_fwd``'s fp32 ``dA_cumsum`` and ``dt`` ``8 T H``; ``C B^T`` fp32 ``4 T G Q``;
    - then the largest of three moments: ``_state_passing_bwd`` (fp32 recomputed states and ``dstates`` and their
      bf16 outputs, ``12 c H P N``); ``_chunk_scan_bwd_dcb`` (bf16 states / dstates ``4 c H P N``, fp32 ``ddt``,
      ``ddA_next``, ``ddA_cumsum_prev`` ``12 T H``, fp32 ``dB`` / ``dC`` ``8 T G N`` (one split at training
      sizes: ``nheads_per_program`` = H / G), ``dcb`` before and after its ``sum(2)`` ``8 T G Q``);
      ``_chunk_scan_bwd_ddAcs_stable`` (the same less the first ``dcb``, plus ``ddA_prev`` and the kernel's
      ``4 T H ceil(Q / 32)`` partial sums, ``4 T H`` each).

    Context parallelism ``cp`` = k > 1 (megatron-core 0.16.1 ``ssm/mamba_context_parallel.py``, module doc): the
    scan's terms over the k T tokens of the full sequence with H / (t k) heads, d_i / (t k) channels, W' =
    :func:`scan_width` and g = :func:`cp_groups` groups (the same bytes as at cp 1 but for B / C's repeated
    groups); the layer's output gradient stays ``2 Tn h``.  After the scan returns, its gradient goes back through
    ``_undo_attention_load_balancing``'s and the 5 all-to-alls' backwards: held at once at most the received
    gradient ``2 k T W'`` (its narrowed parts keep it until the last part's all-to-all has run), the parts already
    sent back (< ``2 T W / t``) and the largest part's ``contiguous`` copy and all-to-all output (z / x: 2 x
    ``2 T d_i / t``) -- a third moment, beside the scan's, that the larger of sets the peak."""
    t, k = max(1, tp), max(1, cp)
    tn = tokens / t if sp else tokens
    H, P, N, di = m.mamba_heads / (t * k), m.mamba_head_dim, m.mamba_state_dim, m.mamba_d_inner / (t * k)
    G = float(cp_groups(m, tp, k))
    T, Q = float(tokens * k), CHUNK
    chunks = -(-(tokens * k) // Q)
    fixed = (2.0 * tn * m.hidden_size + 2.0 * T * di + 2.0 * T * scan_width(m, tp, k)
             + 4.0 * T * scan_conv_channels(m, tp, k) + 2.0 * T * di + 2.0 * T * H + 8.0 * T * H + 4.0 * T * G * Q)
    states = chunks * H * P * N
    passing = 12.0 * states
    dcb = 4.0 * states + 12.0 * T * H + 8.0 * T * G * N + 8.0 * T * G * Q
    ddacs = 4.0 * states + 12.0 * T * H + 8.0 * T * G * N + 4.0 * T * G * Q + 4.0 * T * H + 4.0 * T * H * -(-Q // 32)
    scan = fixed + max(passing, dcb, ddacs)
    if k == 1:
        return scan
    back = (2.0 * tn * m.hidden_size + 2.0 * T * scan_width(m, tp, k) + 2.0 * tokens * in_proj_width(m) / t
            + 2 * 2.0 * tokens * m.mamba_d_inner / t)
    return max(scan, back)
