"""Tensor-parallel communication of one transformer layer: raw seconds and what overlap leaves exposed.

Raw (:func:`tp_layer_comm`): every call of the layer's list (:mod:`cost.layer_collectives`), priced by
the collectives model on the TP group's placement.  With sequence parallelism 2 all-gathers + 2
reduce-scatters of the ``[T, h]`` activations in forward and as many in backward, + 2 all-gathers with
Megatron (it saves the sharded column-parallel input and all-gathers it again for the weight
gradient), else 2 all-reduces each way (Megatron ``ColumnParallel`` / ``RowParallelLinear``); with an
FP8 recipe Megatron + TE all-gathers quantised data (1 B per element per-tensor; MXFP8 the usages it
needs), reduce-scatters stay bf16 (:func:`sp_collectives`).

Exposed (:func:`tp_exposed`): ``tp_comm_overlap`` pipelines the collectives with the layer's GEMMs in
chunks (Megatron: TE userbuffers; TorchTitan: async TP): exposed = max(comm / tp, comm - e * GEMM
time), ``e`` = 1 for TE userbuffers (no figure of its overlap loss exists; the SMs its kernels hold
slow the GEMMs, ``cost/contention.py``) and the calibrated ``ASYNC_TP_OVERLAP`` for TorchTitan's
async TP; without it, Megatron still hides the column-parallel linears' backward re-all-gather behind
their dgrad GEMMs and their dgrad reduce-scatter (all-reduce) behind their wgrad GEMMs, unless the
1F1B all-to-all overlap's ``CUDA_DEVICE_MAX_CONNECTIONS`` > 1 takes that away (:func:`cdmc_unordered`).
Megatron's QKV sub-sharding all-gather and its backward reduce-scatter (:func:`qkv_subshard_comm`) are plain
NCCL calls on the compute stream between the QKV GEMM and the attention (neither userbuffers nor the
column-parallel linears' async backward take them): always exposed; so are torchtitan < 0.2.0's Qwen3 q / k
norm gathers (DTensor redistributes between the QKV GEMMs and SDPA, :mod:`cost.titan_qk_norm`).
"""

from __future__ import annotations

from primus_launch.plan import Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import contention as con
from primus_launch.projection.cost import layer_collectives as lc
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.hardware.placement import Layout
from primus_launch.projection.layer_times import LayerTimes


def sp_collectives(plan: Plan, spec: GPUSpec, lay: Layout) -> tuple[float, float, float, float]:
    """Seconds of one sequence-parallel all-gather of a layer GEMM's input (forward), of a
    row-parallel output gradient (backward), of Megatron's backward re-gather of the input (0 with
    TorchTitan, whose DTensor SP saves the gathered input), and of one reduce-scatter (always bf16);
    the gathered sizes, quantised under Megatron + TE FP8 recipes, from
    :func:`cost.layer_collectives.sp_gather_bytes`."""
    gpu = spec.name
    g_in, g_dy, g_re = lc.sp_gather_bytes(plan)
    rs = coll.reduce_scatter(float(lc.rank_tokens(plan) * plan.model.hidden_size * 2), lay.tp, gpu)
    regather = coll.all_gather(g_re, lay.tp, gpu) if plan.framework == "megatron" else 0.0
    return coll.all_gather(g_in, lay.tp, gpu), coll.all_gather(g_dy, lay.tp, gpu), regather, rs


def tp_layer_comm(plan: Plan, spec: GPUSpec, lay: Layout, moe: bool = False) -> tuple[float, float]:
    """Raw TP seconds of one layer (forward, backward), before any overlap (module doc); ``moe``:
    of a MoE layer (its own list where it has one, ``where="moe_layer"``)."""
    p = plan.parallel
    if p.tp <= 1:
        return 0.0, 0.0
    # the layer's calls (cost/layer_collectives.py): with SP 2 AG + 2 RS forward, backward 2 AG +
    # 2 RS and, with Megatron, the column-parallel linears' 2 re-all-gathers of their saved
    # sequence-sharded input (TorchTitan's DTensor SP saves the gathered input, and all-reduces its
    # replicated parameters' partial gradients); else 2 + 2 AR
    return lc.priced(lc.layer_calls(plan, moe), spec.name, {"tp": lay.tp})


def qkv_subshard_comm(plan: Plan, spec: GPUSpec, lay: Layout) -> tuple[float, float]:
    """Seconds (forward, backward) of one layer's QKV sub-sharding collectives (megatron-core >= 0.16.0 with
    fewer query groups than TP ranks; :mod:`cost.layer_collectives`, ``where="qkv_gather"``): the all-gather of
    the full-width QKV output and its gradient's reduce-scatter, and torchtitan < 0.2.0's Qwen3 q / k norm
    gathers (``where="qk_norm_gather"``, :mod:`cost.titan_qk_norm`), by the collectives model on the TP group's
    placement; (0, 0) without either."""
    if plan.parallel.tp <= 1:
        return 0.0, 0.0
    calls = [c for c in lc.tp_calls(plan) if c.where in lc.ATTENTION_GATHERS]
    return lc.priced(calls, spec.name, {"tp": lay.tp}) if calls else (0.0, 0.0)


def tp_exposed(plan: Plan, raw: tuple[float, float], lt: LayerTimes, spec: GPUSpec,
               lay: Layout) -> tuple[float, float]:
    """TP seconds of one layer left exposed: the QKV sub-sharding collectives (:func:`qkv_subshard_comm`) in
    full, the rest by :func:`_exposed_linears`."""
    sub_f, sub_b = qkv_subshard_comm(plan, spec, lay)
    f, b = _exposed_linears(plan, (raw[0] - sub_f, raw[1] - sub_b), lt, spec, lay)
    return f + sub_f, b + sub_b


def _exposed_linears(plan: Plan, raw: tuple[float, float], lt: LayerTimes, spec: GPUSpec,
                     lay: Layout) -> tuple[float, float]:
    """TP seconds of the layer's linears' collectives left exposed (module doc).

    ``tp_comm_overlap`` pipelines them with the layer's GEMMs (TE userbuffers; TorchTitan async TP).
    Without it, Megatron's column-parallel linears (TE ``_LayerNormLinear`` / ``_Linear`` backward,
    Megatron ``LinearWithGradAccumulationAndAsyncCommunication``) still run two of their backward
    collectives asynchronously: the sequence-parallel re-all-gather of the input behind the dgrad GEMM
    and the dgrad reduce-scatter (all-reduce without SP) behind the wgrad GEMM; the row-parallel
    linears' all-gather of the output gradient and every forward collective stay exposed.  The hidden
    part holds NCCL's SMs (``cost/contention.py``)."""
    t, p = plan.training, plan.parallel
    tp = p.tp
    if tp <= 1:
        return raw
    f, b = raw
    if t.tp_comm_overlap:
        gemm = lt.part("dense", "gemm")
        e = cal.ASYNC_TP_OVERLAP if plan.framework == "torchtitan" else 1.0
        return (max(f / tp, f - e * gemm.fwd_s), max(b / tp, b - e * (gemm.bwd_input_s + gemm.bwd_weight_s)))
    if plan.framework != "megatron" or not t.tp_async_backward or not lt.parts:
        return raw
    if cdmc_unordered(plan, spec):
        return raw
    col = lt.part("dense", "tp_col")
    if p.sequence_parallel:
        _, ag_dy, regather, rs = sp_collectives(plan, spec, lay)
        exposed_b = 2 * ag_dy + max(0.0, 2 * regather - col.bwd_input_s) + max(0.0, 2 * rs - col.bwd_weight_s)
    else:
        exposed_b = max(0.0, b - col.bwd_weight_s)
    exposed_b += con.displaced(b - exposed_b, con.NCCL_SMS, spec.num_sms, spec.arch)
    return f, min(b, exposed_b)


def cdmc_unordered(plan: Plan, spec: GPUSpec) -> bool:
    """Whether the column-parallel linears' async backward collectives lose their head start over
    the GEMMs they should overlap: Megatron's 1F1B all-to-all overlap needs
    ``CUDA_DEVICE_MAX_CONNECTIONS`` > 1 (``megatron/core/transformer/moe/README.md``, "Requirements for
    EP A2A Overlap"), and before Blackwell that forfeits the launch-order guarantee TP's overlap
    relies on: Megatron-LM ``megatron/training/arguments.py`` (dev @d48bd6be, ``validate_args``) asks
    for ``CUDA_DEVICE_MAX_CONNECTIONS=1`` with TP/CP on devices of arch < 10 and, with
    ``--overlap-moe-expert-parallel-comm``, only warns "try not to use tensor model parallelism ...";
    with several hardware queues a GEMM launched after the NCCL kernel can take every SM first and
    the collective then runs after it (Transformer Engine's maintainer on pytorch/pytorch#143890:
    "GEMM might monopolize SMs and prevent a small NCCL kernel from starting").  The requirement
    "no longer exists since the Blackwell architecture" (same ``arguments.py`` comment)."""
    t = plan.training
    if plan.framework != "megatron" or not t.overlap_moe_expert_parallel_comm or plan.parallel.tp <= 1:
        return False
    return spec.arch in ("hopper", "ampere")
