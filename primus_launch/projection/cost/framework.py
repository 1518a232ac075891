"""The training framework as its own cost profile: fusions, attention kernel, host (launch) time.

The same model costs different kernels in different frameworks.  A profile says, per framework
(``plan.framework``) and mode (``plan.training.compile``), which kernels run and what each costs the
host:

==================  ==========================  ==========================  ===========================
                    megatron (Megatron-Core+TE) torchtitan (eager)          torchtitan (torch.compile)
==================  ==========================  ==========================  ===========================
norm                one fused kernel (TE /      RMSNorm: torch >= 2.9 one   fused by inductor
                    apex); TE LayerNormLinear   fused ATen kernel (4 B/elem (one kernel)
                    writes the FP8 copies of    fwd, 10 B bwd), older torch
                    the QKV / FC1 inputs        the composite (float, pow,
                                                mean, rsqrt, mul, cast, mul:
                                                6 kernels, ~36 B/elem),
                                                cost/torch_rmsnorm.py;
                                                LayerNorm: one ATen kernel
SwiGLU / GeLU       fused (bias_swiglu /        silu + mul (2 kernels,      fused
                    bias_gelu fusion)           10 B/elem); gelu 1 kernel
RoPE                fused (apply_rope_fusion)   complex multiply in fp32    fused
                                                (3 kernels, ~20 B/elem)
cross-entropy       vocab-parallel fp32 (14 B   fp32 upcast + log_softmax   as eager (graph break at
                    / 6 B per logit), or fused  + nll (18 B / 22 B per      the loss)
                    (--cross-entropy-loss-      logit)
                    fusion: 4 B / 4 B)
MoE permute         fused (--moe-permute-       index ops (several kernels) as eager
                    fusion) or index ops
attention           TE: cuDNN fused attention   SDPA: FlashAttention-2      SDPA: FlashAttention-2
                    (Hopper / Blackwell), FA2   (NVIDIA), CK (AMD)
                    (Ampere), CK (AMD);
                    --attention-backend picks
weights, FP8        quantised once per step     quantised every micro-batch as eager
                    (TE weight caching)         (torchao)
==================  ==========================  ==========================  ===========================

Host time: every launched kernel costs the CPU ``t_launch`` (PyTorch's eager dispatch, autograd
and Python; the GPU starts it when both are ready), so a layer pass takes ``max(GPU time, kernels x
t_launch)``: small layers on fast GPUs come out host-bound.  ``t_launch`` for eager and compiled
PyTorch is fitted to the ml-engineering benchmark of Llama-3.2-1B (batch 1, sequence 512, B200)
that measured eager, ``torch.compile`` and CUDA-graph steps (records
``mle-b200-compile-Llama-3.2-1B-forward+backward``): the CUDA-graph step is the GPU time; eager and
compiled are host-bound, so ``t_launch = step time / kernels launched`` with the kernels counted by
this module's own decomposition (``cost/host_fit.py`` ``host_fit_workload``).  Megatron-Core's TE modules run in
eager PyTorch: they use the eager ``t_launch`` (no public Megatron per-kernel host figure exists).  That
``t_launch`` is per kernel of this decomposition, not per ATen op: the fitted HF step launches 1.86 ATen ops per
decomposition kernel, so Megatron's MoE router / dispatcher ops, counted as traced ATen ops (``cost/moe_host.py``),
are priced at 1.86x HF's host time per ATen op; ``scripts/host_overhead_ratio.py`` measures megatron-core 0.16.1's
MoE layer at 1.15-2.2x HF's host time per ATen op (CPU, tiny shapes), so no further Megatron factor is applied.
CUDA graphs (Megatron ``--cuda-graph-impl`` local / transformer_engine, ``--cuda-graph-scope``) replace
the host time of the captured part of a layer by one graph launch per pass (record
``pt114860-cudagraph-single-op``: 27 us per replay through ``cudagraphify``).

The host CPU sets ``t_launch`` too: the fit above ran on an x86 B200 server; a Grace host (GB200 / GB300
NVL72 trays, ``GPUSpec.host_cpu = "grace"``) spends :data:`HOST_CPU_FACTOR` times as long per PyTorch
call (records ``te2053-torch-linear-cpu-*``, TransformerEngine issue #2053: one ``torch.nn.Linear``
forward takes 37.08 us of CPU on GB200, 33.17 us on GH200 and 13.48 us on a DGX H100's Xeon 8480C).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from primus_launch.plan import Plan

# one CUDA-graph replay (record pt114860-cudagraph-single-op: 27.0 us through cudagraphify_impl)
GRAPH_LAUNCH_S = 27e-6
# host time per PyTorch call relative to the x86 server the launch cost was fitted on (module doc; records
# te2053-torch-linear-cpu-gb200 / -h100-sxm: 37.08 us / 13.48 us per Linear forward)
HOST_CPU_FACTOR = {"x86": 1.0, "grace": 37.08 / 13.48}


@dataclass(frozen=True)
class Profile:
    """What a framework runs for each op of a layer (module doc)."""

    name: str
    fused_norm: bool
    norm_linear: bool
    fused_act: bool
    fused_rope: bool
    ce: str                  # "megatron" | "fused" | "torch"
    fused_permute: bool
    weight_quant_per_microbatch: bool
    host_per_kernel: float
    attention: str           # implementation key of FITTED['attention'] or "unfused"
    host_cpu_factor: float = 1.0   # HOST_CPU_FACTOR of the GPU's host (already in host_per_kernel)
    # the all-to-all dispatcher sorts the received tokens chunk by chunk on the host when unfused (Megatron's
    # sort_chunks_by_idxs: split / cat per EP x local-expert chunk, cost/moe_host.py item 4); TorchTitan 0.3.0
    # permutes with one index gather whatever the chunk count (models/common/token_dispatcher.py _permute)
    sorts_per_chunk: bool = False
    # eager nn.RMSNorm runs PyTorch's fused _fused_rms_norm kernel (torch >= 2.9, plan.software.torch;
    # cost/torch_rmsnorm.py), else the ATen composite; moot where fused_norm (TE / inductor) is set
    torch_fused_rms: bool = True
    # torchtitan < 0.2.0's Qwen3 TP plan replicates q / k after their norms (cost/titan_qk_norm.py): the forward
    # RoPE runs on every head, its backward on the rank's heads
    qk_replicated: bool = False


def _host_constants() -> dict:
    """``FITTED['host']``: the eager and compiled ``t_launch`` (step time / kernels launched) that
    ``scripts/fit_kernels.py`` fits on the host-bound B200 records (module doc)."""
    from primus_launch.projection.cost.fitted import FITTED

    return FITTED.get("host", {})


def _eager_t_launch() -> float:
    """The eager ``t_launch`` of :func:`_host_constants` (20 us where none was fitted)."""
    return _host_constants().get("eager", {}).get("t_launch", 20e-6)


def profile_of(plan: Plan, arch: str) -> Profile:
    """The cost profile of ``plan`` (module doc)."""
    t = plan.training
    eager = _eager_t_launch()
    compiled = _host_constants().get("compile", {}).get("t_launch", eager)
    fac = host_cpu_factor(plan.cluster.gpu)
    from primus_launch.projection.cost.torch_rmsnorm import torch_fuses_rms_norm

    from primus_launch.projection.cost.titan_qk_norm import qk_norm_gathers

    prof = _profile(plan.framework, t.compile, t.attention_backend, arch, t.cross_entropy_loss_fusion,
                    t.moe_permute_fusion, eager * fac, compiled * fac, t.rope_fusion,
                    plan.model.softmax_type != "vanilla", fac, torch_fuses_rms_norm(plan.software.torch))
    return replace(prof, qk_replicated=True) if qk_norm_gathers(plan) else prof


def eager_host_per_kernel(prof: Profile) -> float:
    """Host seconds per kernel of eager PyTorch on ``prof``'s host CPU (the eager ``t_launch`` fit of the module
    doc times the host factor): what an op left outside ``torch.compile`` costs the CPU under a compiled profile."""
    return _eager_t_launch() * prof.host_cpu_factor


def host_cpu_factor(gpu: str) -> float:
    """:data:`HOST_CPU_FACTOR` of the host CPU of ``gpu``'s reference system (1 for unknown GPUs)."""
    from primus_launch.projection.hardware.gpus import get_gpu

    try:
        return HOST_CPU_FACTOR.get(get_gpu(gpu).host_cpu, 1.0)
    except Exception:   # noqa: BLE001 - a GPU the database does not hold
        return 1.0


@lru_cache(maxsize=256)
def _profile(framework: str, compile_: bool, backend: str, arch: str, ce_fusion: bool, permute_fusion: bool,
             eager: float, compiled: float, rope_fusion: bool = True, sinks: bool = False,
             fac: float = 1.0, torch_fused_rms: bool = True) -> Profile:
    amd = arch.startswith("cdna")
    if framework == "torchtitan":
        attn = "ck" if amd else "fa2"
        if backend == "unfused":
            attn = "unfused"
        if compile_:
            return Profile("torchtitan-compile", True, False, True, True, "torch", False, True, compiled, attn, fac)
        return Profile("torchtitan-eager", False, False, False, False, "torch", False, True, eager, attn, fac,
                       torch_fused_rms=torch_fused_rms)
    # Megatron-Core (+ Transformer Engine on NVIDIA, TE-ROCm / Primus on AMD)
    if backend in ("unfused", "local"):
        attn = "unfused"
    elif amd:
        attn = "ck"
    elif sinks:
        # softmax_type off-by-one / learnable (attention sinks): TE disables FlashAttention and keeps
        # FusedAttention (cuDNN F16_arbitrary_seqlen, cuDNN >= 9.13.1) or the unfused path
        # (TE 2.14.1 = Megatron-Bridge 26.04 pin: transformer_engine/pytorch/attention/dot_product_attention/
        # utils.py get_attention_backend "Filter: Softmax type"; common/fused_attn/fused_attn.cpp
        # nvte_get_fused_attn_backend "softmax type ... 9.13.1+: vanilla, off-by-one, learnable"); auto and
        # fused leave FusedAttention, flash leaves no backend (a plan error: plan/te_attention.py te_backends)
        attn = "cudnn"
    elif backend == "flash":
        attn = "fa2" if arch == "ampere" else "fa3"
    elif arch == "ampere":
        attn = "fa2"   # TE prefers FlashAttention on sm80
    else:
        attn = "cudnn"
    return Profile("megatron-te", True, True, True, rope_fusion, "fused" if ce_fusion else "megatron", permute_fusion,
                   False, eager, attn, fac, sorts_per_chunk=True)


def graph_scopes(plan: Plan) -> frozenset[str]:
    """Parts of a layer captured by CUDA graphs: ``{"attn", "mlp", "moe_router", "moe_preprocess",
    "moe"}`` (whole layer when the scope list is empty), empty without CUDA graphs."""
    t = plan.training
    if t.cuda_graph_impl == "none":
        return frozenset()
    sc = set(t.cuda_graph_scope)
    if not sc or "full_iteration" in sc:
        return frozenset({"attn", "mlp", "moe_router", "moe_preprocess", "moe", "other"})
    return frozenset(sc)


def clear_caches() -> None:
    """Forget the cached profiles (after the host constants change)."""
    _profile.cache_clear()
