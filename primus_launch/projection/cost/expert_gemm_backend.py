"""Which kernel the MoE experts' GEMMs run as: TorchTitan's ``torch._grouped_mm``, TE / TE-ROCm ``GroupedLinear``
(or the legacy ``grouped_gemm`` library: one BLAS GEMM per local expert over four streams, ``cost/grouped_gemm.py``),
or one grouped kernel (Primus-Turbo's CK / hipBLASLt grouped GEMM, the CuTeDSL grouped GEMMs of Megatron's TE
op-fuser MLP); each backend is priced on its own curve (``compute.gemm_time``'s ``grouped`` argument).
"""

from __future__ import annotations

from primus_launch.projection.memory.fp8 import SM100_ARCHS


def grouped_backend(profile: str, expert_gemm: str, fmt: str, arch: str) -> str:
    """The grouped-GEMM curve family of a grouped GEMM under framework profile ``profile``: ``"torch"`` for
    TorchTitan (``torch._grouped_mm``); ``"te"`` for Megatron with TE / TE-ROCm GroupedLinear or the legacy
    grouped_gemm library (one BLAS GEMM per expert on four streams, ``cost/grouped_gemm.py``); else ``"any"``
    (a single grouped kernel: Primus-Turbo's ``moe_expert_gemm = turbo``, or the CuTeDSL grouped GEMM of
    :func:`cutedsl_grouped_mlp`)."""
    if profile.startswith("torchtitan"):
        return "torch"
    if profile == "megatron-te" and expert_gemm != "turbo" and not cutedsl_grouped_mlp(expert_gemm, fmt, arch):
        return "te"
    return "any"


def cutedsl_grouped_mlp(expert_gemm: str, fmt: str, arch: str) -> bool:
    """Whether Megatron's TE op-fuser grouped MLP (``moe_expert_gemm == "te_fused"``) runs as cudnn-frontend's CuTeDSL
    grouped GEMMs with the activation in their epilogues: TE ``fuse_grouped_mlp_ops`` fuses only under an MXFP8 /
    NVFP4 recipe (GEMM format ``mxfp8`` / ``fp4``) where ``ops/fused/grouped_mlp.py`` (Transformer Engine d0067d0)
    finds ``get_device_compute_capability()[0] == 10`` (``memory/fp8.py`` :data:`SM100_ARCHS`; TE-ROCm has no such
    kernels); elsewhere TE's basic ops run (per-expert GEMMs, one activation kernel)."""
    return expert_gemm == "te_fused" and fmt in ("mxfp8", "fp4") and arch in SM100_ARCHS
