"""FP8 / FP4 training recipes: which GEMM each recipe runs and the quantisation traffic it adds.

A low-precision GEMM ``Y[M,N] = X[M,K] W[K,N]`` needs quantised copies of its operands: the input
``X`` and the weight ``W`` in the forward pass, the output gradient ``dY`` in the backward pass, and
transposed / column-wise copies for the data-gradient (``W^T``) and weight-gradient (``X^T``, ``dY^T``)
GEMMs.  Bytes moved per quantised element (read bf16 = 2, each FP8 copy written = 1, an extra
read of the bf16 tensor for recipes that need its amax before casting = 2):

============  =======================================================  ===========  ==========
recipe        what the kernels do                                      Hopper/CDNA  Blackwell
============  =======================================================  ===========  ==========
delayed       cast + transpose in one pass, scale from the amax        2+1+1 = 4    2+1 = 3
              history (TE ``cast_transpose``; amax fused)
tensorwise    amax pass, then cast + transpose (TE current scaling,    2+2+1+1 = 6  2+2+1 = 5
              torchao tensorwise)
blockwise     one pass, 1x128 / 128x128 scales, row- and column-wise   2+1+1 = 4    (as mxfp8)
mxfp8         one pass, 1x32 E8M0 scales, row- and column-wise copies  n/a          2+1+1 = 4
rowwise       torchao: per-row amax pass and cast, per orientation      2x(2+2+1)=10 10
nvfp4         amax pass + cast, row- and column-wise (FP4: 1/2 byte)    n/a          2+2+.5+.5 = 5
============  =======================================================  ===========  ==========

(Blackwell's FP8 tensor cores take any operand layout, so per-tensor recipes need no transposed
copy; block / MX scaling is along K and needs a separately quantised column-wise copy.)
The achieved bandwidth of these kernels is fitted per recipe (``scripts/fit_kernels.py``,
``FITTED['fp8_quant']``) to Transformer Engine's own layer benchmark: autocast time minus the
pre-quantized GEMM time of the same layer (records ``te-{b300,h200}-layer-*``), over the operands
that benchmark quantises (each of its 12 GEMM shapes runs as its own forward ``te.Linear`` call that
quantises its input and weight: :func:`quant_bytes_te_layer`).

In a training step (Megatron-Core + TE): activations and output gradients are quantised for every
GEMM of every micro-batch; the inputs of QKV and FC1 come out of TE's fused LayerNorm+Linear
already quantised (the norm kernel writes the FP8 copies: no separate pass); weights are quantised
once per optimizer step (TE caches them across micro-batches, Megatron's ``is_first_microbatch``),
and not at all with ``fp8_param_gather`` (FP8 primary weights; the cast moves into the optimizer
step, on the rank's shard) -- except MXFP8 primary weights, which Megatron all-gathers in BF16 and casts
whole after the gather, once per step (:func:`mx_params_gathered_bf16`).  TorchTitan / torchao quantises weights on every micro-batch (unless the FSDP all-gather is in
FP8) and has no norm fusion; under ``torch.compile`` inductor fuses the first read of an activation's
or output gradient's quantisation into its producer, and the bytes left per element and role are
torchao's own roofline figures (:func:`torchao_compiled_bytes`), at streaming speed.
"""

from __future__ import annotations

from primus_launch.plan import Plan

# torch.compile (TorchTitan float8), recipes without a torchao roofline entry: amax and cast fuse into the
# producing kernels, leaving the writes of the row- and column-wise FP8 copies (1 + 1 B per element)
COMPILED_BYTES = 2.0

# torchao under torch.compile: bytes per quantised element, (activation or output gradient, weight), from
# torchao's roofline (torchao/testing/training/roofline_utils.py @36027d82
# ``get_tensor_memory_traffic_ovhd_s``): activations and output gradients have a producer in the compiled
# graph, so their first read fuses into it (``fuse_with_prev=True``); weights are parameters (no producer):
# - tensorwise: act [amax fused 0] + [read 2, write dim0 1 + dim1 1] = 4; weight amax 2 + (2+1) + (2+1) = 8
# - rowwise: act [write fp8 dim0 1 + bf16 dim1 2] + [read 2, write 1] = 6 (the column-wise copy needs the
#   transposed bf16 tensor first); weight (2+1) + (2+2) + (2+1) = 10
# - rowwise_with_gw_hp: act [write dim0 1] = 1 (the weight-gradient GEMM stays bf16); weight (2+1) + (2+1) = 6
# - mxfp8 (dim0 and dim1 casts, not fused with each other): act 1 + (2+1) = 4; weight (2+1) + (2+1) = 6
# - nvfp4 (as torchao's mxfp4_cutlass: 0.5 B per element written): act 0.5 + 2.5 = 3; weight 2.5 + 2.5 = 5
TORCHAO_COMPILED_BYTES: dict[str, tuple[float, float]] = {
    "tensorwise": (4.0, 8.0),
    "rowwise": (6.0, 10.0),
    "rowwise_with_gw_hp": (1.0, 6.0),
    "mxfp8": (4.0, 6.0),
    "blockwise": (4.0, 6.0),
    "nvfp4": (3.0, 5.0),
}
# torchao MXFP8 linears, the dim1 (column-wise) casts of the backward (input, weight and output gradient, each
# read 2 + written 1 B per element): TorchTitan v0.1 / v0.2 override the recipe's CUDA kernel with their own
# ``mxfp8_dim1_cast_kernel_choice`` (v0.2.1 components/quantization/mx.py ``config.mxfp8_dim1_cast_kernel_choice =
# ...``; config/job_config.py default "triton"; v0.1.0 ``mx.use_fp8_dim1_cast_triton_kernel = True``).  On B200 the
# CUDA kernel runs at 5404.46 GB/s (16384 x 16384, floor scaling: torchao mx_formats README @4446ad91b, record
# ao-b200-cast-dim1_mxfp8_cuda_floor) and the Triton kernel "up to 3.9 TB/s" (the same README before it, e.g. @2f903f81a
# "to_mx cast across dim0 and dim1"); torchao PR #2513 / torchtitan PR #1427: CUDA "~1.4x faster than the existing
# Triton kernel or torch.compile", +1.5-2.5 % tokens/s for Llama 3 8B under torchtitan with FSDP 4 / 8.  The slower
# kernels are priced as extra streaming bytes: 3 B x (CUDA / Triton bandwidth - 1) per element cast along dim1.
MX_DIM1_CUDA_BPS = 5404.46e9
MX_DIM1_TRITON_BPS = 3.9e12
MX_DIM1_BYTES = 3.0


def mx_dim1_extra_bytes(kernel: str) -> float:
    """Extra streaming bytes per element cast along dim1 by ``kernel`` (``cuda`` | ``triton`` | ``torch``) over the
    CUDA kernel the roofline's casts stand for: ``3 x (MX_DIM1_CUDA_BPS / MX_DIM1_TRITON_BPS - 1)`` for triton and
    torch (the PR's "or torch.compile"), 0 for cuda (comment above)."""
    if kernel == "cuda":
        return 0.0
    return MX_DIM1_BYTES * (MX_DIM1_CUDA_BPS / MX_DIM1_TRITON_BPS - 1.0)


# tensorwise with FSDP float8 all-gather (``enable_fsdp_float8_all_gather`` +
# ``precompute_float8_dynamic_scale_for_fsdp``): each rank casts its own shard before the all-gather
# (torchao/float8/fsdp_utils.py ``fsdp_pre_all_gather``), so the per-micro-batch weight work is the
# column-wise copy of the gathered FP8 weight for the backward GEMMs: read 1 + write 1 = 2 B per element
TORCHAO_FP8_GATHER_WEIGHT_BYTES = 2.0
# torchao rowwise backward (torchao/float8/float8_ops.py ``addmm_float8_unwrapped``): the dgrad / wgrad GEMMs
# run without fast accumulation, where torchao calls the tensorwise cuBLAS kernel with unit scales and
# multiplies the output by the outer product of the row / column scales afterwards ("hoping Inductor will be
# able to fuse it").  The dgrad output's consumer is in the compiled backward graph (fused); the wgrad
# output goes to FSDP's reduce-scatter outside it: one pointwise pass, read 2 + write 2 B per weight element
ROWWISE_WGRAD_POSTSCALE_BYTES = 4.0


def torchao_compiled_bytes(recipe: str, fp8_gather: bool = False) -> tuple[float, float, float]:
    """(activation / output-gradient bytes, weight bytes, weight-gradient post-scale bytes) per element
    that torchao's quantisation moves through HBM under ``torch.compile`` (``TORCHAO_COMPILED_BYTES``;
    ``fp8_gather``: tensorwise weights arrive FP8 from the FSDP all-gather); recipes torchao's roofline does
    not list fall back to ``COMPILED_BYTES`` for both roles."""
    act, w = TORCHAO_COMPILED_BYTES.get(recipe, (COMPILED_BYTES, COMPILED_BYTES))
    if fp8_gather and recipe == "tensorwise":
        w = TORCHAO_FP8_GATHER_WEIGHT_BYTES
    return act, w, ROWWISE_WGRAD_POSTSCALE_BYTES if recipe == "rowwise" else 0.0

# bytes per quantised element, (hopper-like, blackwell)
RECIPE_BYTES: dict[str, tuple[float, float]] = {
    "delayed": (4.0, 3.0),
    "tensorwise": (6.0, 5.0),
    "blockwise": (4.0, 4.0),
    "mxfp8": (4.0, 4.0),
    "rowwise": (10.0, 10.0),
    "rowwise_with_gw_hp": (8.0, 8.0),   # the weight-gradient GEMM stays in bf16: no dY^T / X^T copies
    "nvfp4": (5.0, 5.0),
}


def recipe_of(plan: Plan) -> str:
    """The quantisation recipe a low-precision plan runs: ``fp8_recipe`` / ``fp4_recipe`` or the
    framework's default (Megatron ``--fp8-recipe`` default ``delayed``; TorchTitan ``float8``
    default tensorwise)."""
    t = plan.training
    if t.precision == "fp4":
        return t.fp4_recipe or "nvfp4"
    if t.fp8_recipe:
        return t.fp8_recipe
    return "tensorwise" if plan.framework == "torchtitan" else "delayed"


def mx_params_gathered_bf16(plan: Plan) -> bool:
    """Whether the plan's FP8 primary weights are MXFP8 ones that Megatron gathers in BF16 and casts after the
    gather: Megatron (and Bridge) with ``fp8_param_gather`` under the MXFP8 recipe.

    Megatron-core 0.15.0 (what Bridge 25.11 ran; the same at 0.16.0 and d98e8a6): MXFP8 parameters cannot be mapped
    into the DDP parameter buffer, so ``--reuse-grad-buf-for-mxfp8-param-ag`` (which Megatron recommends with a
    warning otherwise, ``optimizer_config.py``, and Bridge's MXFP8 recipes set) makes the distributed optimizer's
    parameter all-gather run in the gradient buffer viewed as BF16 (``param_and_grad_buffer.py``: "For MXFP8
    param: Create a shared buffer for param AG and grad RS", ``param_data`` BF16, half the buffer when the
    gradients are FP32), the optimizer copying its FP32 main shard into it (``distrib_optimizer.py``
    ``_copy_main_params_to_param_buffer``); after the gather every rank copies each gathered parameter into its
    MXFP8 weight (``param.data.copy_(param_slice)``: "The parameters are cast from bf16 to MXFP8 during copy",
    ``distributed_data_parallel.py`` ``start_param_sync`` / ``finish_param_sync``), a row- and column-wise
    quantisation of the whole weight once per step.  Per-tensor FP8 weights gather their FP8 bytes (1 B) and the
    optimizer casts only its shard.  So: the parameter all-gather at 2 B per element (:mod:`cost.fsdp`
    ``fsdp_bytes``) and the weights quantised once per step (``roofline._cfg``), as without ``fp8_param_gather``."""
    t = plan.training
    return (plan.framework == "megatron" and t.precision == "fp8" and bool(t.fp8_param_gather)
            and recipe_of(plan) == "mxfp8")


def gemm_format(recipe: str, arch: str) -> str:
    """The GEMM curve a recipe runs on an architecture (``FITTED['gemm']`` key suffix)."""
    if recipe == "nvfp4":
        return "fp4"
    if recipe in ("mxfp8",):
        return "mxfp8" if arch.startswith("blackwell") else ("fp8_block" if arch == "hopper" else "fp8")
    if recipe == "blockwise":
        return "fp8_block" if arch in ("hopper", "cdna4") else ("mxfp8" if arch.startswith("blackwell") else "fp8")
    return "fp8"


def bytes_per_element(recipe: str, arch: str) -> float:
    """HBM bytes the quantisation kernels of ``recipe`` move per quantised element on ``arch``
    (:data:`RECIPE_BYTES`, the module doc's table: bf16 read 2 + amax read 2 where the recipe needs it +
    1 per FP8 copy written; Blackwell needs no transposed per-tensor copy); tensorwise's for an unknown recipe."""
    hop, bw = RECIPE_BYTES.get(recipe, RECIPE_BYTES["tensorwise"])
    return bw if arch.startswith("blackwell") else hop


def quant_bytes_te_layer(recipe: str, tokens: int, hidden: int, ffn: int, blackwell: bool) -> float:
    """Quantisation bytes of TE's layer benchmark in autocast mode.

    ``benchmarks/gemm/benchmark_gemm.py`` (TE @d0067d0, model-config mode) times each of the layer's 12
    GEMM shapes (fprop ``(M, K, N)``, dgrad ``(M, N, K)``, wgrad ``(K, M, N)`` of QKV, out-proj, FC1,
    FC2; ``compute_gemm_shapes``) as its own forward ``te.Linear(K, N)(x[M, K])`` under ``te.autocast``
    (``benchmark_fp8_current`` etc.): every call quantises its input ``[M, K]`` and its weight ``[K, N]``
    (no weight caching: ``is_first_microbatch`` is None; both usages, grad enabled).  Summed over the 12
    calls that is twice the fprop inputs + output gradients + weights of the layer."""
    t, h, f = tokens, hidden, ffn
    fprop = [(t, h, 3 * h), (t, h, h), (t, h, f), (t, f, h)]          # (M, K, N)
    calls = ([(m, k, n) for m, k, n in fprop] + [(m, n, k) for m, k, n in fprop]
             + [(k, m, n) for m, k, n in fprop])
    elems = sum(m * k + k * n for m, k, n in calls)
    return bytes_per_element(recipe, "blackwell" if blackwell else "hopper") * elems
