"""Which core-attention backends a Megatron plan leaves Transformer Engine on NVIDIA GPUs.

Two layers decide it, both read at the Megatron-Bridge 26.04 / v0.4.2 pins (Megatron-LM 2edffadb =
megatron-core 0.17.1, Transformer Engine 366798ef = v2.14.1):

1. Megatron's ``--attention-backend`` opts TE's backends out through environment variables
   (``megatron/core/models/common/language_module/language_module.py`` ``_set_attention_backend``, the
   same in the installed megatron-core 0.16.1): ``auto`` leaves FlashAttention, FusedAttention (cuDNN) and
   UnfusedDotProductAttention on; ``flash`` / ``fused`` / ``unfused`` leave only that one; ``local``
   turns all three off and runs Megatron's own ``DotProductAttention``
   (``megatron/core/transformer/dot_product_attention.py``), which asserts ``context_parallel_size == 1``.
2. TE's ``get_attention_backend`` (``transformer_engine/pytorch/attention/dot_product_attention/utils.py``)
   filters what is left.  For BF16 / FP16 training in the BSHD / SBHD layouts Megatron uses (no FP8
   attention, the default ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=1``, cuDNN >= 9.13.1):

   - "Filter: Softmax type": ``softmax_type`` off-by-one / learnable (attention sinks) disables
     FlashAttention; with context parallelism FusedAttention only for ``cp_comm_type == "a2a"``
     (its table: "yes | learnable | FusedAttention");
   - "Filter: Context parallelism": UnfusedDotProductAttention does not support it;
   - of the survivors TE runs FlashAttention, else FusedAttention, else Unfused, except that from
     compute capability 9.0 FusedAttention wins over FlashAttention ("Select FusedAttention for
     performance"): with sinks and the default ``auto`` that is cuDNN's F16_arbitrary_seqlen, which the
     cost profile prices (``projection/cost/framework.py``).

   Not represented here: FP8 attention (``training.fp8_attention``; ``fp8_dpa`` turns off FlashAttention and
   Unfused, and before sm100 / cuDNN 9.21 FusedAttention for sinks and windows: ``cost/fp8_attention.py``), ``NVTE_ALLOW_NONDETERMINISTIC_ALGO=0`` (turns FusedAttention off for sinks: the
   Bridge perf launcher sets it for DeepSeek only, ``scripts/performance/perf_plugins.py``), the THD
   layout (sinks need cuDNN >= 9.18), and cuDNN < 9.13.1 (no sinks in FusedAttention: TE's
   ``common/fused_attn/fused_attn.cpp`` ``nvte_get_fused_attn_backend`` "9.13.1+: vanilla, off-by-one,
   learnable").  The Megatron-Bridge 26.04 image is built on ``nvcr.io/nvidia/pytorch:26.02-py3``
   (``docker/Dockerfile.ci`` @v0.4.2); cudnn-frontend's own sweeps of that month ran cuDNN 9.19.1.

AMD (TE-ROCm) has other backends (CK / aiter) and is not covered: :func:`te_backends` is for NVIDIA.
"""

from __future__ import annotations

TE_BACKENDS = ("flash", "fused", "unfused")

# Megatron --attention-backend -> the TE backends its environment variables leave on (module doc, item 1)
MEGATRON_ENABLED = {
    "auto": frozenset(TE_BACKENDS),
    "flash": frozenset({"flash"}),
    "fused": frozenset({"fused"}),
    "unfused": frozenset({"unfused"}),
    "local": frozenset(),
}


def te_backends(attention_backend: str, softmax_type: str, cp: int, cp_comm_type: str) -> frozenset[str]:
    """The core-attention backends left for a Megatron layer (module doc): a subset of
    :data:`TE_BACKENDS`, or ``{"local"}`` for Megatron's own attention; empty = none can run it (TE raises
    "No dot product attention backend is available", Megatron's local attention asserts CP 1)."""
    if attention_backend == "local":
        return frozenset({"local"}) if cp == 1 else frozenset()
    left = set(MEGATRON_ENABLED[attention_backend])
    if softmax_type != "vanilla":
        left.discard("flash")
        if cp > 1 and cp_comm_type != "a2a":
            left.discard("fused")
    if cp > 1:
        left.discard("unfused")
    return frozenset(left)

