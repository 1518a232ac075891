"""Host (launch) work of a Megatron-Core MoE layer beyond its priced kernels: the router's, the token
dispatcher's and TE GroupedLinear's.

A Megatron MoE layer launches far more kernels than its few large ones: the router's score / top-k /
aux-loss chain, the dispatcher's token counting, split sizes, permutations and collectives, each one
op of PyTorch's dispatcher on the host (``framework.Profile.host_per_kernel`` apiece), plus, inside TE's
``GroupedLinear``, one cuBLASLt GEMM per local expert launched from a C++ loop.

1. Kernels per MoE layer outside the experts, per graph scope (``moe_router``: ``router.forward``;
   ``moe_preprocess``: ``token_dispatcher.dispatch_preprocess``; ``moe``: token dispatch,
   post-process, combine), forward and backward, counted by running megatron-core 0.16.1's own
   ``MoELayer`` under a ``TorchDispatchMode`` (``tests/moe_host_trace.py``; every non-view ATen op
   that is not an allocation is one launch; the TE kernels Megatron calls under
   ``--moe-router-fusion`` / ``--moe-permute-fusion`` are counted from TE 2.14.1's code: one ``tex``
   kernel per pass for the router functions, 3 Triton ``make_row_id_map`` passes + the permute kernel
   for ``moe_permute_with_probs``, one kernel for unpermute, two for the chunk sort).  The router
   counts include the gating GEMM (1 forward, 2 backward).  Components (traced, fused path):

   ==========================================  ==========  ===========
   router                                      forward     backward
   ==========================================  ==========  ===========
   gating GEMM + fused top-k (``none``)        2           6 (incl. the sum of the input's two grads)
   + aux loss (``aux_loss``: scores, sum,      +4          +6
     fused aux loss, scale)
   + fp32 router (``--moe-router-dtype``)      +2          +3
   + ``--moe-router-force-load-balancing``     +2          0
   unfused router (no ``--moe-router-fusion``) +18         +5
   ==========================================  ==========  ===========

   Dispatchers: :data:`DISPATCH_KERNELS`.  DeepEP and HybridEP run inside their libraries and cannot
   run on a CPU: their Python side is counted from megatron-core 0.16.1
   ``transformer/moe/token_dispatcher.py`` (``_HybridEPManager``: ``hybrid_ep_dispatch``,
   ``tokens_per_expert.sum()``, ``hybrid_ep_combine``; ``_DeepepManager``: ``torch.topk`` +
   ``masked_fill`` in ``setup_metadata``, ``fused_dispatch``, ``fused_indices_to_multihot``, the fused
   permute / unpermute, ``fused_combine``), each library call as one launch (their internal kernels
   are not counted).

2. TE ``GroupedLinear`` (``TEGroupedMLP``, TE 2.14.1 ``pytorch/module/grouped_linear.py`` ->
   ``cpp_extensions/gemm.py general_grouped_gemm`` -> ``nvte_multi_tensor_gemm`` ->
   ``common/gemm/cublaslt_gemm.cu multi_stream_cublas_gemm``): unless ``NVTE_USE_CUTLASS_GROUPED_GEMM``
   (Hopper only, opt-in) it launches ONE cuBLASLt GEMM PER LOCAL EXPERT over
   ``nvte_get_num_compute_streams()`` streams, each call creating its descriptors and querying
   ``cublasLtMatmulAlgoGetHeuristic`` (no cache): per linear ``E_local`` GEMMs forward, ``2 E_local``
   backward (dgrad, wgrad).  Host cost per such GEMM :data:`TE_GEMM_HOST_S` = 10 us (record
   ``raft1736-cublaslt-launch-host``: a cuBLASLt wrapper with per-call descriptors and heuristic query,
   host entry to kernel launch).  With FP8 / MXFP8 recipes ``tex.split_quantize``
   (``pytorch/csrc/extensions/cast.cpp`` -> ``multi_tensor_quantize_impl``) quantises each expert's
   input (forward) and output gradient (backward) one tensor at a time, except delayed scaling (one fused
   ``nvte_multi_cast_transpose`` for all experts): :data:`QUANT_KERNELS_PER_TENSOR` kernels per expert
   (current scaling, ``quantizer.cpp Float8CurrentScalingQuantizer::quantize_impl``: amax, scale from
   amax, cast = 3; MXFP8 / blockwise / NVFP4: 1), launched from C++ at
   :data:`calibration.KERNEL_LAUNCH_S` each.  No scale-swizzle kernels per expert GEMM: MXFP8 / NVFP4 GEMMs need
   their E8M0 scales in cuBLAS's swizzled layout, but TE 2.14.1's ``GroupedLinear`` sets ``optimize_for_gemm`` on
   its input and output-gradient quantizers (``module/grouped_linear.py`` lines 1229 / 1239), so the quantize
   kernel writes them swizzled (``tensor/mxfp8_tensor.py`` ``with_gemm_swizzled_scales``), and the grouped GEMM
   swizzles what is left (cached weights) in one ``multi_tensor_swizzle_scales_for_gemm`` launch per operand
   list (``csrc/extensions/gemm.cpp`` / ``swizzle.cpp``), not per expert.

   The same per-expert launch loop runs under TE-ROCm's ``GroupedLinear`` (hipBLASLt per expert,
   ROCm/TransformerEngine ``nvte_multi_stream_cublas_gemm``) and Megatron's legacy ``GroupedMLP``
   (``--moe-use-legacy-grouped-gemm``: the ``grouped_gemm`` library's ``cublasGemmEx`` / ``hipblasGemmEx`` per
   expert, fanshiqing/grouped_gemm ``CublasGroupedGemm``; BF16 only, so no quantize kernels), priced at the same
   :data:`TE_GEMM_HOST_S` per GEMM; Primus-Turbo's grouped GEMM (``training.moe_expert_gemm = turbo``) is one
   launch and adds nothing here.

   ROCm host path per expert GEMM, read at the versions of AMD's MoE-package rows (Primus 3aaf2d5f, image
   ``rocm/megatron-lm:v25.10``; Primus' and ROCm Megatron's Dockerfiles build ``caaatch22/grouped_gemm`` branch
   ``rocm``): (a) legacy ``grouped_gemm`` (@8a9b438 ``csrc/grouped_gemm.cu``, hipified): ``CublasGroupedGemm``
   calls ``hipblasGemmEx`` once per expert on 4 streams (``NUM_STREAM``), handles made once, no algorithm cache
   of its own; hipBLAS hands it to rocBLAS ``rocblas_gemm_ex`` -> ``runContractionProblem``
   (``library/src/tensile_host.cpp``), which runs either Tensile (``findBestSolution``) or, where
   ``useHipBLASLt`` holds (``ROCBLAS_USE_HIPBLASLT``, else the handle's default architectures: gfx1200/1201 in
   rocBLAS develop 2024-10, gfx950 among them in a later rocm-libraries ``handle.hpp``; which one the image's
   ROCm 7 build had was not read), ``runContractionProblemHipBlasLT`` (``hipblaslt_host.cpp``): a
   ``hipblaslt_ext::Gemm`` built and ``algoGetHeuristic`` (1 solution) called on every GEMM, then
   ``initialize`` and ``run``, no cache in rocBLAS.  (b) TE-ROCm ``GroupedLinear``: ``nvte_multi_stream_cublas_gemm``
   -> ``cublas_gemm`` -> ``hipblaslt_gemm`` (``common/gemm/rocm_gemm.cu``), whose ``GemmAlgoCache`` (since
   ROCm/TransformerEngine PR #39, 2024-05) is keyed on (device, types, m, n, k, ld, transposes, epilogue): a
   per-expert token count M never seen before misses once, then hits.  (c) PyTorch's Lt GEMM (``at::cuda::blas``,
   hipified on ROCm) queries the heuristic on every call and relies on the library's own cache (pytorch PR
   #191700, WIP 2026-07, proposes a PyTorch-side cache on CUDA: 'cuBLASLt has an internal heuristic cache').
   Beneath all three, hipBLASLt's TensileLite and rocBLAS's Tensile wrap every loaded solution library in a
   ``CachingLibrary`` (``Serialization/SolutionLibrary.hpp``; the cache of ``CachingLibrary.hpp`` keyed on the
   device and the problem: operation, tensor descriptors' sizes / strides / types, workspace size, not the data
   pointers, ``ContractionProblem_Detail.hpp``), so a repeated expert shape re-selects from the cache: the same
   hipBLASLt api-overhead client reads 7.8 us per ``hipblaslt_ext::algoGetHeuristic``
   (15.1 us C API) on a cached problem (record ``rocmlibs3103-api-overhead-hot``), while its 109.6 / 114.7 us of
   March 2025 (record ``hipblaslt1754-api-overhead-hot``) equal that build's ``getAllAlgos`` (114.3 us), the
   uncached enumeration.  A per-expert token count takes a bounded set of values over a run (each missed once,
   then cached at every layer and micro-batch after).  With ``ext::run`` at 8.6 us (same record) a cached
   per-GEMM host path is ~16 us plus rocBLAS / hipBLAS (not measured), within 2x of :data:`TE_GEMM_HOST_S`:
   TE-ROCm's ``GroupedLinear`` keeps that price (``tests/test_moe_host.py`` holds the sum to the records).

   The legacy library's own call structure (caaatch22/grouped_gemm ``rocm`` @8a9b438, ``grouped_gemm/ops.py`` and
   ``csrc/grouped_gemm.cu``), under Megatron's ``GroupedMLP`` (Megatron-LM 84778176, the Primus 3aaf2d5f submodule:
   ``gg.ops.gmm`` for FC1 and FC2, the token counts as the dispatcher's host tensor): ``GroupedGemm.forward`` runs one
   ``backend.gmm``, its backward two (dgrad with ``trans_b`` flipped, wgrad through ``CublasGroupedGemmVariableK``);
   each ``backend.gmm`` allocates its output once (``torch.empty``), requires ``batch_sizes`` on the host
   (``TORCH_CHECK(batch_sizes.is_cpu())``) and reads every expert's M or K from host memory, records one event on the
   current stream and makes the 4 BLAS streams wait on it, calls ``hipblasGemmEx`` once per local expert on handle /
   stream ``i % 4`` (handles, streams and events made once, ``cublas_handle_init``), then records 4 events and makes
   the current stream wait on them; its ``CopyToDevice`` (the only host-to-device copy) is never called, and nothing
   synchronises (the forward's ``torch.count_nonzero(batch_sizes)`` assertion reads the host tensor).  So 6 BLAS calls
   per local expert, layer and micro-batch (2 forward, 4 backward; :func:`legacy_gmm_calls`, checked against
   megatron-core 0.16.1's ``GroupedMLP`` in ``tests/test_moe_host.py``), and the host never waits for the GPU
   inside them: their host time is a floor the GPU hides under once its own work is longer.  AMD's MI355X
   DeepSeek-V2-Lite sweep has that shape (0.382 / 0.390 s per micro-batch at micro-batch 1 / 2, GPU-bound from 4).
   No public measurement times one ``hipblasGemmEx`` of this path on gfx950 (hipBLAS -> rocBLAS ``rocblas_gemm_ex``
   -> Tensile, or hipBLASLt with a ``hipblaslt_ext::Gemm`` built, a heuristic queried, initialised and run per call;
   rocBLAS's ``handle.hpp`` ``isDefaultHipBLASLtArch`` lists gfx950, not gfx942, at rocm-libraries 10599b8e; the
   ROCm 7.1 build's list was not read), so its host seconds are the one calibrated constant
   :data:`calibration.ROCM_LEGACY_GEMM_HOST_S`, on CDNA4 only (:data:`ROCM_LEGACY_HIPBLASLT_ARCHS`, the fitted
   row's architecture and the one rocBLAS sends to hipBLASLt by default; AMD's MI325X Figure 1 has the loop within
   0.99-1.94x of Turbo's one kernel, record ``primus-moe-blog-fig1-turbo-vs-hipblas-multistream``),
   fitted on the Lite micro-batch-1 row alone (``calibration.ROCM_LEGACY_GEMM_ROW``): ~182 us (196 before gafusion;
   174.5 on a refit once item 4 prices the all-to-all chunk sort apart; 148.7 once ``cost/manual_gc.py`` prices the
   row's gc.collect() every iteration, Primus ``manual_gc_interval: 1``; ``scripts/calibrate.py --rocm-legacy-only``),
   against the 110 us
   hot heuristic query plus 8.6 us launch of hipBLASLt's own March 2025 client (record
   ``hipblaslt1754-api-overhead-hot``).  The other MI355X rows judge it; the per-expert form carries over to
   DeepSeek-V2 (20 local experts against Lite's 8: its PP4 1F1B bar projects within 3 %; +6.8 % at the
   148.7 us refit), but not the ladder's
   DeepEP and sync-free steps, whose measured gains (1.107, 1.077) the host-bound model gives as 1.028 / 1.029
   (1.053 / 1.030 with item 4 and the refit: the chunk sort is part of what the DeepEP step removes;
   ``scripts/validation/README.md``, Known gaps, AMD multi-node).

3. Where the host is on the critical path (``host_sync.launch_bound_seconds``): Megatron's token dispatchers
   wait once per MoE layer forward for the routed-token counts (``token_dispatcher.py`` ``cuda_sync_point``;
   DeepEP's received-token counter; HybridEP's ``torch.cuda.current_stream().synchronize()`` in
   ``hybrid_ep_buffer.py`` dispatch without ``num_dispatched_tokens``).  From that sync to the next, the host
   launches the rest of the layer and the next layer up to its sync into an idle GPU; the forward is that
   period walked op by op (each op's GPU work starts when its first kernel is launched, ends no earlier than
   its last launch), so ``N`` small kernels after the sync cost ``N x t_launch`` of GPU idle where their GPU time
   is shorter.  CUDA graphs remove the captured scopes' launches (one replay per captured run); a whole-layer
   graph or Primus-Turbo's sync-free MoE (``training.moe_sync_free``) remove the sync.  The backward makes no
   such wait: ``_AllToAll.backward`` (``tensor_parallel/mappings.py``), the permutations and TE's GroupedLinear
   reuse the forward's host split sizes; traced for the all-to-all (EP 1 and 2, fused and unfused) and all-gather
   dispatchers (``tests/moe_host_trace.py`` ``syncs``: 1 forward, 0 backward).  DeepEP's and HybridEP's backward
   dispatch (the combine's backward) runs on the forward's handle (Megatron-LM 2edffadb ``moe/fused_a2a.py``):
   DeepEP busy-waits for its received-token counter only outside ``cached_mode`` (DeepEP cf78085
   ``csrc/deep_ep.cpp`` ``intranode_dispatch``), HybridEP synchronises only in ``metadata_preprocessing``, run when
   no handle is given (DeepEP hybrid-ep 94a9f8f ``csrc/hybrid_ep/executor/executor.cu``).  So the backward is
   ``max(GPU, host)``.

4. The all-to-all dispatcher's unfused chunk sort (``MoEAlltoAllTokenDispatcher`` at EP > 1 with more than one
   local expert and without ``--moe-permute-fusion``; megatron-core 0.16.1 ``transformer/moe/moe_utils.py``
   ``sort_chunks_by_idxs``, the same code at Megatron-LM 84778176, the submodule of AMD's 2025-12 MoE-package
   runs): the received tokens come rank-major and the experts want them expert-major, so ``dispatch_postprocess``
   splits the tokens and their probabilities into ``EP x E_local`` chunks (``torch.split`` on the host split
   sizes) and concatenates them in expert order, and ``combine_preprocess`` undoes it on the experts' output; the
   backward runs ``cat``'s and ``split``'s autograd over the same chunks.  The kernels are counted in
   ``roofline.py`` (one ``cat`` per sort and pass); what grows with the chunks is host work with no kernel: one
   view, one list entry and one autograd edge per chunk (160 chunks for DeepSeek-V2 at EP 8, 64 for
   DeepSeek-V2-Lite).  Priced at :data:`CHUNK_SORT_HOST_S` per chunk, megatron-core's own function timed on this
   repository's CPU (``scripts/amd_multinode_probe.py --chunk-sort``: tiny CPU tensors, so host work only; the
   in-situ cost of a PyTorch call is larger than a micro-benchmark's, ``framework.py``'s fitted launch cost, so it
   is a lower bound), scaled by the host CPU factor like the other host terms.  TE's fused sort
   (``--moe-permute-fusion``) is one kernel per call with no per-chunk host work; DeepEP / HybridEP return the tokens
   expert-major and have no such sort.  DeepSeek-V2's measured DeepEP step (Primus ``examples/moe_package``
   Figure 7: 1,989.6 -> 2,202.9 tokens/s/GPU, loss fusion -> Turbo DeepEP at 20 local experts, 1.107) removes it
   with the all-to-all; ``tests/test_moe_host.py`` checks the per-chunk structure against megatron-core's code.

The Python-level calls (the GroupedLinear module, its activation) are already counted as kernels by
the layer decomposition (``roofline.py``); these are the launches beneath them.
"""

from __future__ import annotations

from primus_launch.projection.cost import calibration as cal

# per dispatcher: {scope: (forward, backward)} kernels outside the router and the experts (module doc);
# "ep1": the all-to-all dispatcher at EP 1 (no cross-rank token counts or collectives)
DISPATCH_KERNELS: dict[tuple[str, bool], dict[str, tuple[int, int]]] = {
    # (dispatcher, fused permutation)
    ("alltoall", True): {"moe_preprocess": (11, 2), "moe": (9, 6)},
    ("alltoall", False): {"moe_preprocess": (13, 4), "moe": (9, 7)},
    ("alltoall_ep1", True): {"moe_preprocess": (5, 2), "moe": (5, 3)},
    ("allgather", True): {"moe": (16, 9)},
    ("allgather", False): {"moe": (17, 9)},
    ("hybridep", True): {"moe": (3, 2)},
    ("deepep", True): {"moe_preprocess": (2, 3), "moe": (8, 5)},
}
ROUTER_BASE = (2, 6)
ROUTER_AUX = (4, 6)
ROUTER_FP32 = (2, 3)
ROUTER_FORCE = (2, 0)
ROUTER_UNFUSED = (18, 5)

# host seconds per cuBLASLt GEMM launched by TE's per-expert loop (record raft1736-cublaslt-launch-host)
TE_GEMM_HOST_S = 10e-6
# architectures whose legacy grouped_gemm loop is priced at calibration.ROCM_LEGACY_GEMM_HOST_S (module doc, item 2):
# CDNA4 (gfx950), the fitted row's, where rocBLAS takes its hipBLASLt route by default (handle.hpp
# isDefaultHipBLASLtArch), not CDNA3 (gfx942: Tensile)
ROCM_LEGACY_HIPBLASLT_ARCHS = frozenset({"cdna4"})
# host seconds per chunk of megatron-core's unfused all-to-all chunk sort (module doc, item 4), per MoE layer and
# micro-batch (its two sort_chunks_by_idxs calls together), (forward, backward): timed on CPU by
# `python scripts/amd_multinode_probe.py --chunk-sort` (160 chunks, least of 7 runs, two runs: 2.14 / 2.20 us and
# 3.07 / 3.19 us)
CHUNK_SORT_HOST_S = (2.2e-6, 3.1e-6)
# the dispatch sort's share of it (it splits and concatenates the tokens and their probabilities, the combine sort
# the tokens alone: 1.40 / 0.71 us forward, 2.02 / 1.10 us backward per chunk in the same timing)
CHUNK_SORT_DISPATCH_SHARE = 2.0 / 3.0
# kernels TE's split_quantize launches per expert tensor, by recipe (module doc, item 2); delayed scaling: one
# fused multi-tensor cast-transpose for all experts
QUANT_KERNELS_PER_TENSOR = {"tensorwise": 3, "mxfp8": 1, "blockwise": 1, "nvfp4": 1, "delayed": 0}


def framework_kernels(dispatcher: str, ep: int, fused: bool, aux_loss: bool, router_fp32: bool,
                      force_balance: bool, router_fused: bool | None = None) -> dict[str, tuple[int, int]]:
    """Kernels of one Megatron MoE layer outside its experts and its pre-MLP norm, per graph scope, as
    (forward, backward) (module doc, item 1).  ``fused``: ``--moe-permute-fusion`` (DeepEP / HybridEP:
    always fused); ``router_fused``: ``--moe-router-fusion`` (None: as ``fused``; the traces hold both
    on or both off, mixed settings add the router's and the dispatcher's parts).  DeepEP / HybridEP
    cast bf16 probs to fp32 in ``dispatch`` (``token_probs.float()``: +1 kernel each pass)."""
    rfu = fused if router_fused is None else router_fused
    parts = [ROUTER_BASE] + [c for c, on in ((ROUTER_AUX, aux_loss), (ROUTER_FP32, router_fp32),
                                              (ROUTER_FORCE, force_balance), (ROUTER_UNFUSED, not rfu)) if on]
    rf, rb = sum(c[0] for c in parts), sum(c[1] for c in parts)
    if dispatcher in ("deepep", "hybridep"):
        key = (dispatcher, True)
    elif dispatcher == "alltoall" and ep == 1:
        key = ("alltoall_ep1", True) if fused else ("alltoall", False)
    else:
        key = (dispatcher if dispatcher in ("alltoall", "allgather") else "alltoall", fused)
    out = {"moe_router": (rf, rb)}
    out.update(DISPATCH_KERNELS[key])
    if dispatcher in ("deepep", "hybridep") and not router_fp32:
        f, b = out["moe"]
        out["moe"] = (f + 1, b + 1)
    return out


def legacy_gmm_calls(local_experts: int) -> dict[str, tuple[int, int]]:
    """Host calls of Megatron's legacy ``GroupedMLP`` experts through the ``grouped_gemm`` library (ROCm branch)
    per MoE layer and micro-batch, as (forward, backward) (module doc, item 2): ``gmm`` calls (FC1 and FC2; the
    backward's dgrad and wgrad), BLAS GEMMs (one per local expert per ``gmm``), stream events (1 record + 4 waits
    before the expert loop, 4 records + 4 waits after it), host-device syncs (none)."""
    e = max(1, local_experts)
    return {"gmm": (2, 4), "blas_gemm": (2 * e, 4 * e), "event_ops": (2 * 13, 4 * 13), "syncs": (0, 0)}


def expert_gemm_host_s(expert_gemm: str, arch: str) -> float:
    """Host seconds per expert GEMM of a per-expert launch loop (module doc, item 2): the legacy ``grouped_gemm``
    library on an architecture of :data:`ROCM_LEGACY_HIPBLASLT_ARCHS` (``expert_gemm == "legacy"``)
    :data:`calibration.ROCM_LEGACY_GEMM_HOST_S`; every other loop (TE / TE-ROCm ``GroupedLinear``, the legacy library
    on CUDA or on CDNA3) :data:`TE_GEMM_HOST_S`."""
    if expert_gemm == "legacy" and arch in ROCM_LEGACY_HIPBLASLT_ARCHS:
        return cal.ROCM_LEGACY_GEMM_HOST_S
    return TE_GEMM_HOST_S


def grouped_linear_host(local_experts: int, recipe: str | None,
                        gemm_host_s: float = TE_GEMM_HOST_S) -> tuple[float, float]:
    """Host seconds (forward, backward) TE's ``GroupedLinear`` spends beneath its Python call for the
    two expert linears (FC1, FC2) of one MoE layer (module doc, item 2); ``recipe``: the low-precision
    recipe (``fp8.recipe_of``) or None for BF16; ``gemm_host_s``: host seconds per expert GEMM
    (:func:`expert_gemm_host_s`)."""
    e = max(1, local_experts)
    f = 2 * e * gemm_host_s
    b = 4 * e * gemm_host_s
    if recipe:
        per = QUANT_KERNELS_PER_TENSOR.get(recipe, 1)
        q = 2 * (e * per if per else 1) * cal.KERNEL_LAUNCH_S   # FC1 and FC2 inputs / output grads
        f += q
        b += q
    return f, b


def chunk_sort_host(dispatcher: str, ep: int, local_experts: int, fused_permute: bool) -> tuple[float, float]:
    """Host seconds (forward, backward) of the all-to-all dispatcher's unfused chunk sort per MoE layer and
    micro-batch (module doc, item 4): ``EP x local experts`` chunks at :data:`CHUNK_SORT_HOST_S` each; 0 where
    Megatron does not split (another dispatcher, EP 1, one local expert) or sorts with TE's fused kernel
    (``--moe-permute-fusion``); the dispatch sort's share is :data:`CHUNK_SORT_DISPATCH_SHARE`."""
    if dispatcher != "alltoall" or ep <= 1 or local_experts <= 1 or fused_permute:
        return 0.0, 0.0
    n = ep * local_experts
    return n * CHUNK_SORT_HOST_S[0], n * CHUNK_SORT_HOST_S[1]
