"""What Transformer Engine keeps in FP8 for backward and across micro-batches (Transformer Engine 2.9-2.13,
megatron-core 0.15.0-0.16.1: the same on every line cited below).

Bytes per element of one quantized copy, data + scales (:func:`quantized_bytes`):

- tensorwise (``delayed``: ``Float8Quantizer``; ``tensorwise``, megatron's name for current scaling:
  ``Float8CurrentScalingQuantizer``): 1 byte, one fp32 scale per tensor;
- ``mxfp8``: 1 byte + one e8m0 byte per 32 elements (``MXFP8Quantizer``): ``1 + 1/32``;
- ``blockwise``: 1 byte + one fp32 scale per 128 elements (1x128 blocks for activations): ``1 + 4/128``.

Which copies exist (``pytorch/csrc/quantizer.cpp``): a tensorwise tensor is its data ``[m, n]`` and, where
the device cannot run non-TN FP8 GEMMs, a transpose ``[n, m]`` for the columnwise uses
(``Float8Quantizer::create_tensor`` / ``Float8CurrentScalingQuantizer::create_tensor``, v2.13 lines 139 / 342:
``with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()``; ``tensor/storage/
float8_tensor_storage.py`` ``update_usage`` drops the transpose there).  ``nvte_is_non_tn_fp8_gemm_supported``
(``common/transformer_engine.cpp``, v2.13 line 1128) is
compute capability 10.x-11.x or >= 13.0: Blackwell data-centre parts (B200 / GB200 sm_100, B300 / GB300
sm_103) run every layout on the one copy; Hopper needs the transpose (:func:`non_tn_fp8_gemm`).  MXFP8 and
blockwise tensors keep separate rowwise and columnwise copies on every device (scales run along one
direction; an MXFP8 tensor cannot be transposed after quantisation).

Saved for backward, per module (``pytorch/module/*.py`` ``forward``):

- ``LayerNormLinear`` (QKV, dense fc1): the bf16 input (for the norm's backward), ``mu`` / ``rsigma``, and
  ``ln_out`` quantized with ``update_usage(rowwise_usage=False)`` (v2.13 lines 418-427): one copy (the columnwise one; under
  sequence parallelism a tensorwise ``ln_out`` keeps its rowwise copy instead, to all-gather it again);
- ``Linear`` (proj, dense fc2, shared experts): its input quantized, columnwise only (rowwise only under
  SP-gather for tensorwise; v2.13 lines 385-399), or the bf16 original with ``save_original_input``;
- ``GroupedLinear`` (routed experts fc1 / fc2): ``tex.split_quantize`` of the input, each split
  ``update_usage(rowwise_usage=False, columnwise_usage=True)`` (v2.13 lines 236-243); the bulk MXFP8 / blockwise allocations
  (``csrc/extensions/cast.cpp`` ``bulk_allocate_mxfp8_tensors``) put rowwise and columnwise data in two
  buffers, so dropping the rowwise views frees it; ``save_original_input`` keeps the bf16 input instead;
- the fused permute / sort-chunks (``pytorch/permutation.py`` ``_moe_permute_mask_map``, v2.13 line 300): the
  row-id map only; the fused unpermute: its input and the merging probs only when it merges with probs
  (lines 385-388);
- fused weighted SwiGLU (megatron ``fusions/fused_bias_swiglu.py``): its bf16 input (fc1's output) and the
  probs; its output is fc2's input, which fc2 keeps quantized;
- core attention (``fp8_dpa`` off): bf16 q, k, v, o as under bf16.  With ``fp8_dpa`` (megatron
  ``fp8_dot_product_attention``; Transformer Engine d0067d0 ``attention/dot_product_attention/backends.py``
  ``FusedAttnFunc.forward``, FP8 backward on by default, ``NVTE_FP8_DPA_BWD=1``): q, k, v are quantized by
  ``combine_and_quantize`` with the QKV quantizer's default usages (rowwise and columnwise: MXFP8 keeps
  both copies, ``1 + 1/32`` bytes each; a tensorwise tensor its data plus, without non-TN FP8 GEMMs, the
  transpose) and saved in place of the bf16 ones; O is saved in FP8 under ``delayed`` (the kernel's
  Float8Tensor output; the bf16 output handed on is dequantised from it) and in bf16 under current scaling
  (``NVTE_DPA_FP8CS_O_in_F16=1`` default) and MXFP8, where the saved O is the tensor handed to the
  projection (:func:`fp8_attention_saved_bytes`).

So a quantized saved input costs :func:`quantized_bytes` per element (one copy) on every device; what
megatron makes save the original (``set_save_original_input``, megatron-core 0.16.1): the attention
projection under every recipe but ``delayed`` (``transformer/attention.py``,
``multi_latent_attention.py``), shared experts' fc1 unless recomputed (``moe/shared_experts.py``), routed
experts' fc2 under ``moe_act`` recompute and fc1 under ``expert_fc1`` offloading (``moe/experts.py``), the
first linear after a recomputed norm (``transformer_layer.py``): :mod:`memory.activations` charges these.

Weights (:func:`weight_bytes_per_param`, ``module/base.py`` ``get_weight_workspace``): megatron passes
``is_first_microbatch``, so TE caches each linear's quantized weight across micro-batches with the usages
the forward and backward need (rowwise for fprop, columnwise for dgrad); an FP8 parameter
(``--fp8-param-gather``) is itself the rowwise copy and gets its columnwise usage added in place
(``update_usage`` keeps what it has).
"""

from __future__ import annotations

#: bytes per element of one quantized copy: data + scales (see the module docstring)
_QUANT_BYTES = {"delayed": 1.0, "tensorwise": 1.0, "mxfp8": 1.0 + 1.0 / 32, "blockwise": 1.0 + 4.0 / 128}
#: GPU kernel families (``GPUSpec.arch``) of compute capability 10.x (B200 / GB200 sm100, B300 / GB300 sm103): TE's
#: non-TN FP8 GEMMs (``nvte_is_non_tn_fp8_gemm_supported``), FP8 current-scaling / MXFP8 attention and FP8 windows /
#: sinks (:func:`te_fp8_attention`), the CuTeDSL fused grouped MLP (``cost/expert_gemm_backend.py`` ``cutedsl_grouped_mlp``)
SM100_ARCHS = frozenset({"blackwell", "blackwell_ultra"})
#: the FP8 recipes Megatron passes ``fp8_dpa`` to (``megatron/core/fp8_utils.py``) and the format of the attention
#: kernel each runs (``cost/fp8_attention.py``'s records); None is Megatron's default, delayed
FP8_DPA_FORMAT = {None: "fp8", "delayed": "fp8", "tensorwise": "fp8", "mxfp8": "mxfp8"}


def quantized_bytes(recipe: str) -> float:
    """Bytes per element of one quantized copy of a tensor under ``recipe`` (data + scales): 1 for the
    tensorwise recipes, ``1 + 1/32`` for MXFP8, ``1 + 4/128`` for blockwise; unknown recipes count 1
    (module doc: Transformer Engine 2.9-2.13's quantizers)."""
    return _QUANT_BYTES.get(recipe, 1.0)


def non_tn_fp8_gemm(gpu_arch: str) -> bool:
    """Whether TE runs FP8 GEMMs of every layout on a tensorwise tensor's one copy on this GPU family
    (``common/transformer_engine.cpp`` ``nvte_is_non_tn_fp8_gemm_supported``: compute capability 10.x,
    11.x, >= 13.0): NVIDIA Blackwell data-centre parts; Hopper, Ada, AMD (ROCm TE keeps its own transpose
    cache rule, ``fp8_weight_transpose_cache``) need the transpose."""
    return gpu_arch in SM100_ARCHS


def te_fp8_attention(arch: str, recipe: str | None, *, window_or_sinks: bool = False) -> str:
    """'' when Transformer Engine runs the core attention in FP8 under ``recipe`` on ``arch``, else why it keeps
    BF16 (TE d0067d0 ``attention/dot_product_attention/utils.py`` ``get_attention_backend``, "Filter: Execution
    type"): recipes other than those of :data:`FP8_DPA_FORMAT` turn it off; TE-ROCm has no FP8 fused attention
    (``attention.py`` ``get_attention_backend``: "rocm fused attention backends does not support fp8 yet");
    current scaling, MXFP8 and (``window_or_sinks``) sliding windows / sinks need sm100 (:data:`SM100_ARCHS`).
    What the time (``cost/fp8_attention.py`` ``fp8_attention_case``) and the saved tensors (``memory/mcore.py``
    ``mcore_opts``) both read."""
    if recipe not in FP8_DPA_FORMAT:
        return f"fp8 recipe {recipe}: TE runs attention in BF16 (FusedAttention off for it)"
    if arch.startswith("cdna"):
        return f"{arch}: TE-ROCm has no FP8 fused attention (priced as BF16)"
    if recipe in ("tensorwise", "mxfp8") and arch not in SM100_ARCHS:
        return f"{recipe} FP8 attention needs sm100 (TE disables FusedAttention): priced as BF16"
    if window_or_sinks and arch not in SM100_ARCHS:
        return "FP8 attention with a sliding window / sinks needs sm100 (TE): priced as BF16"
    return ""


def fp8_attention_saved_bytes(recipe: str, *, non_tn: bool) -> tuple[float, float | None]:
    """(bytes per element of the saved q / k / v, of the saved O or None where O stays the bf16 tensor
    the projection takes) under FP8 dot-product attention (module docstring, core attention)."""
    copies = 2 if columnwise_copy(recipe, non_tn=non_tn) else 1
    qkv = copies * quantized_bytes(recipe)
    return qkv, (copies * quantized_bytes(recipe) if recipe == "delayed" else None)


def columnwise_copy(recipe: str, *, non_tn: bool) -> bool:
    """Whether a quantized tensor's columnwise use needs a second copy: always for MXFP8 / blockwise,
    for the tensorwise recipes only where the device lacks non-TN FP8 GEMMs (the transpose; module doc: TE
    v2.13 ``quantizer.cpp`` ``with_transpose = columnwise_usage && !nvte_is_non_tn_fp8_gemm_supported()``)."""
    return recipe in ("mxfp8", "blockwise") or not non_tn


def weight_bytes_per_param(recipe: str, *, non_tn: bool, param_gather: bool, cache_columnwise: bool = True,
                           weight_bytes: int = 2) -> float:
    """Bytes one TE linear parameter holds on the GPU across the step under an FP8 recipe:

    ``(weight_bytes if not param_gather else 0) + q + (q if a columnwise copy exists and is cached)``,
    ``q`` = :func:`quantized_bytes`: the bf16 weight (none with ``--fp8-param-gather``, whose FP8 parameter
    is the rowwise copy), TE's rowwise workspace, and the columnwise one (MXFP8 / blockwise always; the
    tensorwise transpose only off Blackwell; ``cache_columnwise=False``: ROCm TE's
    ``keep_fp8_weight_transpose_cache=False``, made per backward instead)."""
    q = quantized_bytes(recipe)
    col = q if (columnwise_copy(recipe, non_tn=non_tn) and cache_columnwise) else 0.0
    return (0 if param_gather else weight_bytes) + q + col
