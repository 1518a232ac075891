"""Activation offloading: whole layers (``training.offload.activation_layers``: the first layers of
each chunk) or, fine-grained, the inputs of named modules of every layer
(``training.offload.activation_modules``, Megatron ``--fine-grained-activation-offloading
--offload-modules``).

Each offloaded layer's kept activations (:func:`memory.activations.layer_activation_bytes`, ``full``)
go to host memory in forward and come back in backward over ``GPUSpec.host_link_bw`` (PCIe /
NVLink-C2C), hidden behind the layer's compute where it is long enough:
exposed = max(0, bytes / host_link_bw - the layer's pass time), per pass.

Fine-grained offloading moves, per layer, what each named module's group copies
(``LayerActivations.copied``: the module's ``offloadable`` bytes less what a selective recompute leaves it
nothing of) the same way: megatron-core
``pipeline_parallel/fine_grained_activation_offload.py`` copies them on a dedicated device-to-host
stream during the forward and back on a host-to-device stream before the backward, the compute stream
waiting on the copies' events (Megatron-LM ``docs/user-guide/features/fine_grained_activation_offloading.md``:
"a tradeoff between memory savings and PCIe bandwidth overhead"), so one layer's copies hide behind
that layer's pass and the rest is exposed: exposed = max(0, sum of the modules' bytes /
host_link_bw - the layer's pass time), per pass and layer (:func:`module_offload_exposed`).

On a hybrid (Mamba) stack under Megatron, fine-grained offloading moves nothing (:func:`module_offload_inert`):
no bytes, no seconds, no GPU margin.

A floor of that exposure over plans that share the copied bytes (the same model, micro-batch, TP / CP /
EP sharding and named modules: :func:`module_offload_seconds`) but may differ in what sets the layer's
pass time (CUDA graphs, dispatcher, FP8 casts, ...): the exposure is non-increasing in the pass time,
so the least over those plans' pass times is the exposure at the longest pass
(:func:`module_offload_floor`; the tuner's branch and bound, ``tuner/bounds.py``, charges it to every
plan of a node that offloads those modules).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from primus_launch.plan import Plan
from primus_launch.projection.hardware.gpus import GPUSpec
from primus_launch.projection.layer_times import LayerTimes


def _copy_seconds(plan: Plan, spec: GPUSpec, moe: bool, moved) -> float:
    """Seconds of ``moved(la)`` bytes over the host link, ``la`` the layer kind's :class:`LayerActivations`."""
    from primus_launch.projection.memory.activations import layer_activation_bytes

    m, p, t = plan.model, plan.parallel, plan.training
    la = layer_activation_bytes(m, seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, sp=p.sequence_parallel,
                                cp=p.cp, moe=moe, ep=p.ep, etp=p.expert_tp)
    return moved(la) / spec.host_link_bw


def _past(secs: float, lt: LayerTimes, moe: bool) -> tuple[float, float]:
    """(forward, backward) seconds of a ``secs`` copy past the layer kind's pass (module doc)."""
    pt = (lt.moe_layer if moe else None) or lt.dense_layer
    return max(0.0, secs - pt.fwd_s), max(0.0, secs - pt.bwd_input_s - pt.bwd_weight_s)


def _exposed(plan: Plan, lt: LayerTimes, spec: GPUSpec, moe: bool, moved) -> tuple[float, float]:
    """(forward, backward) seconds of ``moved(la)`` bytes over the host link past the layer kind's pass
    (module doc), ``la`` the kind's :class:`LayerActivations`."""
    return _past(_copy_seconds(plan, spec, moe, moved), lt, moe)


def module_offload_inert(plan: Plan) -> bool:
    """Whether ``--fine-grained-activation-offloading --offload-modules`` moves nothing for ``plan``: a Megatron
    hybrid (Mamba) stack.

    megatron-core 0.16.1 (the pinned version): the offload call sites in the attention (``transformer/
    attention.py`` qkv_linear / core_attn / attn_proj), the transformer layer (``transformer_layer.py``
    attn_norm / mlp_norm) and the MoE experts (``transformer/moe/experts.py`` expert_fc1 / moe_act) all go through
    ``pipeline_parallel/fine_grained_activation_offload.py``, whose ``fine_grained_offloading_group_start`` /
    ``group_commit`` return the tensor untouched and ``PipelineOffloadManager.__enter__`` returns without pushing
    the saved-tensor hooks while ``_cur_forward_chunk`` is None; only ``init_model_chunk_offload_handler``
    (``FineGrainedActivationOffloadingInterface.init_chunk_handler``) sets it, and only ``GPTModel.forward``
    (``preprocess_for_fine_grained_offloading``) calls that -- ``models/mamba/mamba_model.py`` and ``ssm/`` never
    do, so a hybrid model's attention / MoE layers (built from the same modules) offload nothing, keep every
    tensor on the GPU, and the post-warm-up margin (``post_warmup_callback``, run only when a chunk was cached)
    never arises.  The same at Megatron-LM 3758b54b2 (2026-03-27: only ``gpt_model.py`` calls
    ``init_chunk_handler``); Megatron-LM 92d5c1f4d1 (2026-04-09, #4173 "Fix: enable fine-grained activation
    offloading for Mamba model") added the call to ``MambaModel.forward`` -- a later Megatron-Core offloads."""
    return (plan.framework == "megatron" and plan.model.is_hybrid
            and bool(plan.training.offload.activation_modules))


def _module_bytes(plan: Plan):
    """The bytes function of ``plan``'s offloaded modules: what their groups copy under the plan's selective
    recompute (``LayerActivations.copied``; megatron-core 0.16.1: a ``core_attn`` recompute opens no core_attn
    group and a ``moe`` recompute runs the experts' groups without grad, so they copy nothing, while MLA's
    ``mla_up_proj`` leaves the core_attn group its q, k, v to copy)."""
    if module_offload_inert(plan):
        return lambda la: 0.0
    mods = tuple(plan.training.offload.activation_modules)
    r = plan.training.recompute
    rc = tuple(r.modules) if r.granularity == "selective" else ()
    return lambda la: la.copied(mods, rc)


def offload_exposed(plan: Plan, lt: LayerTimes, spec: GPUSpec, moe: bool) -> tuple[float, float]:
    """Host-link seconds left exposed per offloaded layer (forward D2H, backward H2D) (module doc)."""
    return _exposed(plan, lt, spec, moe, lambda la: la.full)


def module_offload_exposed(plan: Plan, lt: LayerTimes, spec: GPUSpec, moe: bool) -> tuple[float, float]:
    """Host-link seconds left exposed per layer by fine-grained module offloading (forward D2H,
    backward H2D) (module doc): the layer kind's ``offloadable`` bytes of the plan's modules."""
    return _exposed(plan, lt, spec, moe, _module_bytes(plan))


def module_offload_seconds(plan: Plan, spec: GPUSpec, moe: bool) -> float:
    """Seconds one layer of the kind copies over the host link per pass under fine-grained offloading of
    ``plan``'s modules (the bytes read only the model, micro-batch and TP / SP / CP / EP / expert-TP
    sharding: ``memory/activations.py`` ``layer_activation_bytes``)."""
    return _copy_seconds(plan, spec, moe, _module_bytes(plan))


def module_offload_floor(plan: Plan, lts: Iterable[LayerTimes], spec: GPUSpec,
                         kinds: Sequence[bool]) -> dict[bool, tuple[float, float]]:
    """Per layer kind in ``kinds`` (MoE or not), the least :func:`module_offload_exposed` (forward,
    backward) over layer times ``lts``, each of a plan with ``plan``'s copied bytes (module doc):
    ``max(0, copy - pass)`` is non-increasing in the pass, so this is the exposure at the longest of them,
    at most that of any plan whose layer times are in ``lts`` (the same expression: never above it by
    rounding).  ``lts`` is read only until every kind's floor is 0."""
    secs = {moe: module_offload_seconds(plan, spec, moe) for moe in kinds}
    out = {moe: (float("inf"), float("inf")) for moe in kinds}
    for lt in lts:
        for moe in kinds:
            f, b = _past(secs[moe], lt, moe)
            out[moe] = (min(out[moe][0], f), min(out[moe][1], b))
        if not any(f or b for f, b in out.values()):
            break
    return out
