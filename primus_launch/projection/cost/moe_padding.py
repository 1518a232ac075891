"""Quantisation padding of Megatron's grouped experts: where TE ``Fp8Padding`` copies the experts' tokens.

Megatron's ``TEGroupedMLP.forward`` (megatron-core 0.16.1 and 0.17.1 / Megatron-LM 2edffadb
``transformer/moe/experts.py``, dev @d48bd6be the same in its non-fused path) runs, whenever FP8 or FP4
is on::

    tokens_per_expert = tokens_per_expert.tolist()
    permuted_local_hidden_states, tokens_per_expert = self.quantization_padding(hidden, tokens_per_expert)
    permuted_probs, _ = self.quantization_padding(permuted_probs.unsqueeze(-1), actual_tokens_per_expert)
    ... linear_fc1 / activation / linear_fc2 ...
    output = self.quantization_unpadding(output, actual_tokens_per_expert)

``quantization_padding`` is TransformerEngine's ``Fp8Padding`` (v2.14.1
``pytorch/module/fp8_padding.py``): it rounds each expert's row count up to the recipe's alignment
(:func:`align_size`, megatron-core ``moe_utils.get_align_size_for_quantization``: 32 for MXFP8, 128 for
FP4, 16 for the other FP8 recipes) and, unless every count is already a multiple
(``if m_splits == padded_m_splits: return inp, m_splits``), copies the whole input into a new padded
buffer (``tex.fused_multi_row_padding``, one kernel; its backward ``fused_multi_row_unpadding`` copies
the gradient back).  ``Fp8Unpadding`` is the mirror (``fp8_unpadding.py``).  Per MoE layer and
micro-batch that is, with ``N`` routed tokens on the rank (``T_e k`` balanced) of hidden size ``h``
in BF16: forward a pad of the input and of the probabilities and an unpad of the output, backward
the two mirrored copies of the gradients (and of the probabilities' gradient) -- each full copy
reads and writes ``N h 2`` bytes:

    bytes (forward) = 2 x (2 N h 2) + 2 N 4 (probs, fp32)   and the same in the backward

Whether the counts arrive aligned depends on the dispatcher, read at the same versions:

- ``alltoall`` and ``allgather``: aligned only with ``--moe-router-padding-for-quantization`` (or its
  alias ``--moe-router-padding-for-fp8``), which pads the routing map before the dispatch
  (``MoEAlltoAllTokenDispatcher.dispatch_preprocess``: ``pad_routing_map`` / ``fused_pad_routing_map``);
  otherwise the counts of a dropless router are whatever the routing gives (forced balancing draws
  random logits), and ``N_e mod a == 0`` for all local experts has probability ~ ``a^-local``: the
  copies run.
- ``hybridep``: the dispatch is called with ``pad_multiple = get_align_size_for_quantization(config)``
  when FP8 / FP4 is on (``_HybridEPManager.dispatch``): aligned, no copy.
- ``deepep``: at megatron-core 0.17.1 (Megatron-LM 2edffadb) and dev @d48bd6be the fused permute is
  called with ``align_size`` and ``tokens_per_expert`` (``fused_permute_and_pad_with_probs``, TE >= 2.12):
  aligned, no copy.  At megatron-core 0.16.1 its permute takes no alignment, so the copies run there
  unless the router pads; the plan has no framework version, so DeepEP is priced as the current
  releases (aligned) -- known wrong for megatron-core <= 0.16 FP8 DeepEP recipes without router padding.

The padded rows themselves (at most ``a - 1`` per expert, ~(a-1)/2 on average: 1-2 % of Qwen3-235B's
2,048 tokens per expert at micro-batch 1) go through the expert GEMMs; they are not priced.  With
``--moe-router-padding-for-quantization`` the routing map carries up to ``a - 1`` padding tokens per
expert and source rank through the dispatch instead; not priced either.
"""

from __future__ import annotations

ALIGN_MX = 32
"""Rows per expert the MXFP8 GEMMs need (megatron-core 0.16.1 ``fp8_utils.get_fp8_align_size`` for ``mxfp8``)."""
ALIGN_FP4 = 128
"""Rows per expert Megatron pads FP4 experts to (``fp4_utils.get_fp4_align_size`` returns 128 at 0.16.1 and
0.17.1: 32 is the TMA minimum, 128 suits TE's grouped NVFP4 quantize + Hadamard kernels)."""
ALIGN_FP8 = 16
"""Rows per expert the other FP8 recipes need (``get_fp8_align_size``: delayed, tensorwise, blockwise)."""

PADDING_DISPATCHERS = frozenset({"alltoall", "allgather"})
"""Dispatchers that hand the experts unaligned per-expert counts unless the router pads (module doc)."""


TE_PADDING_TENSORS_PER_KERNEL = 64
"""Experts one ``fused_multi_row_padding`` / ``_unpadding`` launch covers (TE v2.14.1
``common/util/padding.cu`` ``kMaxTensorsPerKernel = 64``; one launch per 64 local experts)."""


def launches_per_copy(local_experts: int) -> int:
    """Kernel launches of one pad or unpad copy over ``local_experts`` splits (TE ``multi_padding``)."""
    return max(1, -(-local_experts // TE_PADDING_TENSORS_PER_KERNEL))


def align_size(recipe: str, precision: str) -> int:
    """Rows per expert the grouped GEMM of ``recipe`` needs (megatron-core
    ``moe_utils.get_align_size_for_quantization`` at 0.16.1 / 0.17.1)."""
    if precision == "fp4":
        return ALIGN_FP4
    if recipe == "mxfp8":
        return ALIGN_MX
    return ALIGN_FP8


def te_padding_copies(framework_profile: str, recipe: str | None, dispatcher: str, expert_gemm: str,
                      grouped: bool, router_padding: bool) -> bool:
    """Whether Megatron's ``TEGroupedMLP`` pads / unpads the experts' tokens with TE ``Fp8Padding``
    (module doc): the Megatron + TE profile, a low-precision recipe, TE GroupedLinear experts (the legacy
    ``GroupedMLP`` runs BF16; the TE op-fuser path and Primus-Turbo's grouped GEMM are other code),
    a dispatcher that leaves the counts unaligned and no router-side padding."""
    return (framework_profile == "megatron-te" and recipe is not None and grouped and expert_gemm == "te"
            and dispatcher in PADDING_DISPATCHERS and not router_padding)


def padding_copy_bytes(routed_tokens: int, hidden: int, act_bytes: int = 2) -> tuple[float, float]:
    """Forward bytes of (one full-activation pad or unpad copy, the probabilities' pad) for ``routed_tokens``
    rows of ``hidden`` elements: ``2 N h act_bytes`` (read + write) and ``2 N 4`` (fp32 probs, read + write)."""
    return 2.0 * routed_tokens * hidden * act_bytes, 2.0 * routed_tokens * 4.0
