"""Memory from the measured pieces (step 4 of :mod:`.upscale`): the bytes each layer kind keeps for its
backward, its backward temporaries and the head's, measured at world size 1, upscaled by the memory model of
the plan's framework -- Megatron: :class:`memory.MeasuredActivations` in the tensor-list model's stage
structure (:func:`measured_activations`); TorchTitan: :class:`MeasuredTitanActivations` in
:mod:`memory.titan`'s FSDP2 walk (:func:`measured_titan_activations`) -- with weights, gradients and
optimizer state from the exact parameter counts.  :func:`memory_check` holds the measured and the analytic
reports and their difference; on a GPU the pieces' reserved bytes are upscaled too
(:func:`allocator_overhead`, :func:`measured_reserved`).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Optional

import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.piece import attn_core_dims
from primus_launch.projection.measure.timing import Measured, PieceTiming
from primus_launch.projection.memory.activations import ActivationImpl
from primus_launch.projection.memory.estimate import MeasuredActivations
from primus_launch.projection.memory.titan import TitanImpl, titan_ac_mode
from primus_launch.projection.result import MemoryCheck, MemoryReport, StageMemory


def _cp_standin_bytes(plan: Plan, abytes: int) -> float:
    """Bytes of the other context-parallel ranks' K and V that the emulated CP core concatenates
    and autograd keeps: (cp - 1) local K and V blocks.  A ring keeps only its own, so they are
    taken out of the measured kept bytes."""
    m, p, t = plan.model, plan.parallel, plan.training
    if p.cp <= 1:
        return 0.0
    sb = m.seq_length // p.cp * t.micro_batch_size
    _, kvh, dq, dv = attn_core_dims(plan)
    return (p.cp - 1) * abytes * sb * kvh * (dq + dv)


def _attn_io_bytes(plan: Plan, abytes: int) -> float:
    """Bytes of the attention core's q, k, v and output for one micro-batch on one rank."""
    m, p, t = plan.model, plan.parallel, plan.training
    sb = m.seq_length // p.cp * t.micro_batch_size
    heads, kvh, dq, dv = attn_core_dims(plan)
    return abytes * sb * (heads * dq + kvh * dq + kvh * dv + heads * dv)


def measured_implementation(device: str, plan: Optional[Plan] = None) -> tuple[str, ActivationImpl]:
    """The activation-model variant that describes the measured modules: megatron-core's local /
    torchtitan's torch modules on the CPU keep fp32 norm copies and unfused RoPE tables
    (``memory_activations.MCORE_LOCAL``); on a GPU the dry-run's (``TE``); with the plan's dropout
    masks and attention backend (``memory_activations.impl_for``)."""
    from primus_launch.projection.memory.activations import MCORE_LOCAL, TE, impl_for

    name, impl = ("MCORE_LOCAL", MCORE_LOCAL) if torch.device(device).type == "cpu" else ("TE", TE)
    if plan is not None:
        from primus_launch.projection.measure.build_mcore import uses_megatron_core_attention

        impl = impl_for(plan.model, plan.training.attention_backend if uses_megatron_core_attention(plan) else "auto",
                        impl)
    return name, impl


def measured_activations(plan: Plan, meas: Measured, device: str) -> MeasuredActivations:
    """:class:`memory.MeasuredActivations` from the pieces: per layer kind the median bytes kept
    (``full``), the attention core's kept bytes beyond its q, k, v and output (what selective
    recompute drops), the backward temporaries (peak - kept - output); the head's kept bytes and
    transient.  Measured without sequence parallelism (world size 1): with SP the model's SP
    difference (same tensor list with and without SP) is added."""
    from primus_launch.projection.memory.activations import (
        LayerActivations,
        layer_activation_bytes,
        output_activation_bytes,
    )

    if plan.framework == "torchtitan":
        return measured_titan_activations(plan, meas, device)
    m, p, t = plan.model, plan.parallel, plan.training
    a = 4 if t.storage_precision == "fp32" else 2
    _, impl = measured_implementation(device, plan)
    kw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, ep=p.ep, etp=p.expert_tp, abytes=a,
              impl=impl)
    core_t = meas.timings.get("attn_core")
    standin = _cp_standin_bytes(plan, a)
    core = max(0.0, core_t.activation_bytes - _attn_io_bytes(plan, a) - standin) if core_t else 0.0

    def kind(prefix: str, moe: bool) -> Optional[LayerActivations]:
        kinds = (prefix, prefix.replace("_layer", "_window_layer"))
        ts = [tm for n, tm in meas.timings.items() if n.split("#")[0] in kinds]
        if not ts:
            return None
        kept = statistics.median(tm.activation_bytes for tm in ts) - standin
        trans = statistics.median(max(0, tm.peak_bytes - tm.activation_bytes - tm.output_bytes) for tm in ts)
        sp = layer_activation_bytes(m, sp=p.sequence_parallel, moe=moe, **kw)
        nosp = layer_activation_bytes(m, sp=False, moe=moe, **kw)
        return LayerActivations(full=kept + sp.full - nosp.full, core_attention=core, layer_input=sp.layer_input,
                                backward_temp=trans + sp.backward_temp - nosp.backward_temp)

    dense = kind("dense_layer", False)
    moe = kind("moe_layer", True)
    head = meas.timings["head_loss"]
    okw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, abytes=a, impl=impl)
    o_sp = output_activation_bytes(m, sp=p.sequence_parallel, **okw)
    o_nosp = output_activation_bytes(m, sp=False, **okw)
    out = (head.activation_bytes + o_sp[0] - o_nosp[0],
           max(0, head.peak_bytes - head.activation_bytes - head.output_bytes) + o_sp[1] - o_nosp[1])
    how = "CUDA allocator" if torch.device(device).type == "cuda" else "torch MemTracker"
    note = (f"activations measured per piece on {meas.device} ({how}: bytes each layer kind keeps for backward, "
            f"backward temporaries, head/loss), upscaled by layers per stage, recompute and micro-batches in flight"
            + ("; sequence parallel applied with the model's SP difference" if p.sequence_parallel else "")
            + ("; the stand-in K/V of the other CP ranks taken out (a ring keeps only its own)" if p.cp > 1 else ""))
    return MeasuredActivations(dense=dense or moe, moe=moe, output=out, note=note)


@dataclass(frozen=True)
class MeasuredTitanActivations(MeasuredActivations):
    """Measured pieces of a TorchTitan plan for its own memory model (:mod:`memory_titan`, through
    ``memory.titan_stage_memory``'s ``acts``): per block kind the bytes a block keeps without
    activation checkpointing and under the plan's (torchtitan's ``FullAC`` / ``SelectiveAC`` wrapped
    around the real block, memory-only), and the head's kept bytes.  The base fields carry the same
    figures in the Megatron shape (unused by the TorchTitan model)."""

    blocks: tuple = ()  # ((moe, TitanLayer without AC, TitanLayer under the plan's AC), ...)
    head_kept: Optional[float] = None  # final norm + lm_head input + fp32 log-probabilities

    def titan_layers(self, layer_of: dict, ck_of: dict) -> tuple[dict, dict]:
        """The model's per-kind ``TitanLayer`` s with the measured kinds replaced."""
        lo, co = dict(layer_of), dict(ck_of)
        for moe, full, ck in self.blocks:
            lo[moe], co[moe] = full, ck
        return lo, co

    def titan_head(self, hn: float, hin: float, logp: float) -> tuple[float, float, float]:
        """The model's (final-norm kept, lm_head input, log-probabilities) scaled to the measured total."""
        model = hn + hin + logp
        if self.head_kept is None or model <= 0:
            return hn, hin, logp
        r = self.head_kept / model
        return hn * r, hin * r, logp * r


def titan_implementation(device: str) -> tuple[str, TitanImpl]:
    """memory_titan's variant describing the measured kernels: ``TITAN_CPU`` on the CPU (composite
    RMSNorm keeping fp32 copies, the CPU SDPA kernel not on SelectiveAC's save list), else ``TITAN``."""
    from primus_launch.projection.memory.titan import TITAN, TITAN_CPU

    return ("TITAN_CPU", TITAN_CPU) if torch.device(device).type == "cpu" else ("TITAN", TITAN)


def _titan_world1_delta(plan: Plan, impl: TitanImpl, what: str) -> float:
    """Bytes one TP rank of the plan keeps minus what the world-size-1 shard keeps, from
    memory_titan's terms (torchtitan runs TP with sequence parallelism; the shard measured at world
    size 1 has none): ``what="none"``: the block's two norms keep ``nb sb h / t + 4 sb / t`` each
    (the shard: at full sequence); ``"full"``: the checkpointed block input ``a sb h / t``;
    ``"op"``: that input, plus the reduce-scatter outputs of wo and w2 (``2 a sb h / t``) that
    SelectiveAC saves under TP; ``"head"``: the final norm."""
    m, p, t = plan.model, plan.parallel, plan.training
    tp = p.tp
    if tp == 1:
        return 0.0
    sb = m.seq_length // p.cp * t.micro_batch_size
    h, a = m.hidden_size, 2
    nb = 2 if t.compile else impl.norm_bytes
    shrink = 1.0 - 1.0 / tp
    if what == "none":
        return -2.0 * (nb * sb * h + 4.0 * sb) * shrink
    if what == "head":
        return -(nb * sb * h + 4.0 * sb) * shrink
    if what == "full":
        return -a * sb * h * shrink
    return -a * sb * h * shrink + 2.0 * a * sb * h / tp


def measured_titan_activations(plan: Plan, meas: Measured, device: str) -> MeasuredTitanActivations:
    """:class:`MeasuredTitanActivations` from the pieces (:func:`_titan_world1_delta` restores the
    plan's TP/SP; the emulated CP core's stand-in K/V of the other ranks are taken out as for
    Megatron)."""
    from primus_launch.projection.memory.activations import LayerActivations
    from primus_launch.projection.memory.titan import TitanLayer, head_kept_bytes
    from primus_launch.projection.memory.titan import layer_activation_bytes as titan_bytes

    m, p, t = plan.model, plan.parallel, plan.training
    _, impl = titan_implementation(device)
    ac = titan_ac_mode(plan.training.recompute.granularity)
    sb = m.seq_length // p.cp * t.micro_batch_size
    layer_input = 2.0 * sb * m.hidden_size / p.tp
    standin = _cp_standin_bytes(plan, 2)
    # a compiled plan measured on the CPU: its memory is the eager module's (MemTracker cannot run
    # inside compiled code): the TP terms of the eager module, then memory_titan's compiled / eager ratio
    eager_mem = any(sb_.what.startswith("memory measured on the eager module") for sb_ in meas.spec.substitutions)
    meas_plan = plan.with_changes(training={"compile": False}) if eager_mem else plan
    tkw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, impl=impl, ep=p.ep)
    blocks = []
    mega: dict[bool, LayerActivations] = {}
    for moe, prefix in ((False, "dense_layer"), (True, "moe_layer")):
        ts = [tm for n, tm in meas.timings.items() if n.startswith(prefix)]
        if not ts:
            continue
        full = statistics.median(tm.activation_bytes for tm in ts) - standin \
            + _titan_world1_delta(meas_plan, impl, "none")
        trans = statistics.median(max(0, tm.peak_bytes - tm.activation_bytes - tm.output_bytes) for tm in ts)
        kept = full
        eager = titan_bytes(m, ac=ac, moe=moe, compiled=False, **tkw)
        if ac != "none":
            key = f"kept_ac_{ac}"
            if all(key in tm.variant_bytes for tm in ts):  # the block under torchtitan's own AC wrapper
                kept = statistics.median(tm.variant_bytes[key] for tm in ts) + _titan_world1_delta(meas_plan, impl, ac)
            else:  # not measured (compiled blocks): the model's AC share of the measured block
                kept = full * eager.kept / eager.full if eager.full else full
        if eager_mem:
            comp = titan_bytes(m, ac=ac, moe=moe, compiled=True, **tkw)
            full, kept = full * comp.full / eager.full, kept * (comp.kept / eager.kept if eager.kept else 1.0)
        blocks.append((moe, TitanLayer(kept=full, full=full, layer_input=layer_input),
                       TitanLayer(kept=kept, full=full, layer_input=layer_input)))
        mega[moe] = LayerActivations(full=full, core_attention=0.0, layer_input=layer_input, backward_temp=trans)
    head = meas.timings["head_loss"]
    head_kept = head.activation_bytes + _titan_world1_delta(meas_plan, impl, "head")
    if eager_mem:
        hkw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, impl=impl)
        head_kept *= sum(head_kept_bytes(m, compiled=True, **hkw)) / sum(head_kept_bytes(m, compiled=False, **hkw))
    how = "CUDA allocator" if torch.device(device).type == "cuda" else "torch MemTracker"
    note = (f"activations measured per piece on {meas.device} ({how}: bytes each block kind keeps without "
            f"activation checkpointing and under torchtitan's {'FullAC' if ac == 'full' else 'SelectiveAC'} "
            f"wrapped around the real block, and the head/loss), in torchtitan's memory model (FSDP2 walk of the "
            f"backward, stages, micro-batches in flight)" if ac != "none" else
            f"activations measured per piece on {meas.device} ({how}: bytes each block kind keeps for backward, "
            f"the head/loss), in torchtitan's memory model (FSDP2 walk of the backward, stages, micro-batches in "
            f"flight)")
    if p.tp > 1:
        note += "; the plan's TP with sequence parallelism applied with the model's norm / input terms"
    if p.cp > 1:
        note += "; the stand-in K/V of the other CP ranks taken out"
    dense = mega.get(False) or mega.get(True)
    return MeasuredTitanActivations(dense=dense, moe=mega.get(True), output=(head_kept, 0.0), note=note,
                                    blocks=tuple(blocks), head_kept=head_kept)


def allocator_overhead(timings: dict[str, PieceTiming]) -> Optional[float]:
    """The caching allocator's measured cost on the pieces' dynamic memory: over the pieces measured
    on CUDA, (sum of the reserved bytes each forward + backward added) / (sum of their allocated
    peaks above the start) - 1, at least 0 -- the segments' rounding (2 MiB and up) and the blocks
    cached but not reusable for a request (``c10/cuda/CUDACachingAllocator.cpp``).  None when no
    piece has a reserved figure (the CPU has no caching allocator)."""
    pairs = [(t.reserved_bytes, t.peak_bytes) for t in timings.values() if t.reserved_bytes > 0 and t.peak_bytes > 0]
    if not pairs:
        return None
    return max(0.0, sum(r for r, _ in pairs) / sum(p for _, p in pairs) - 1.0)


def measured_reserved(stage: StageMemory, overhead: float) -> int:
    """A stage's reserved peak upscaled from the pieces: its allocated peak plus ``overhead``
    (:func:`allocator_overhead`) times its dynamic bytes (activations + transient), the part the
    allocator caches and splits; parameters, gradients and optimizer state are allocated once, in
    large blocks (the same structure as the memory model's allocator term, with the measured
    fraction in place of the assumed one); so are the GEMM workspaces (``workspace_bytes``, inside the
    transient: allocated at the first GEMM and kept, :mod:`memory.workspaces`)."""
    dynamic = stage.activations_bytes + stage.transient_bytes - stage.workspace_bytes
    return int(stage.allocated_bytes + overhead * max(0.0, dynamic))


def memory_check(plan: Plan, meas: Measured, device: str, margin: float,
                 memory_basis: str = "reserved") -> tuple[MemoryReport, MemoryCheck]:
    """(measured MemoryReport, MemoryCheck against the analytic model)."""
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.activations import TE, impl_for, layer_activation_bytes

    acts = measured_activations(plan, meas, device)
    measured = estimate_memory(plan, margin, memory_basis=memory_basis, acts=acts)
    analytic = estimate_memory(plan, margin, memory_basis=memory_basis)
    m, p, t = plan.model, plan.parallel, plan.training
    a = 4 if t.storage_precision == "fp32" else 2
    impl_name, impl = measured_implementation(device, plan)
    kw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, sp=p.sequence_parallel, cp=p.cp, ep=p.ep,
              etp=p.expert_tp, abytes=a)
    per_layer: dict[str, dict[str, float]] = {}
    titan = isinstance(acts, MeasuredTitanActivations)
    if titan:
        from primus_launch.projection.memory.titan import TITAN
        from primus_launch.projection.memory.titan import layer_activation_bytes as titan_bytes

        impl_name, impl = titan_implementation(device)
        ac = titan_ac_mode(plan.training.recompute.granularity)
        tkw = dict(seq=m.seq_length, mbs=t.micro_batch_size, tp=p.tp, cp=p.cp, compiled=t.compile, ep=p.ep)
        for moe, full, ck in acts.blocks:
            model = titan_bytes(m, ac=ac, moe=moe, impl=impl, **tkw)
            per_layer["moe_layer" if moe else "dense_layer"] = {
                "measured": float(full.full), f"model_{impl_name}": model.full,
                "model_TITAN": titan_bytes(m, ac="none", moe=moe, impl=TITAN, **tkw).full,
                f"measured_ac_{ac}": float(ck.kept), f"model_{impl_name}_ac_{ac}": model.kept}
    for kind, la, moe in (("dense_layer", acts.dense, False), ("moe_layer", acts.moe, True)):
        if titan or la is None or (kind == "dense_layer" and not any(
                n.split("#")[0] in ("dense_layer", "dense_window_layer") for n in meas.timings)):
            continue
        per_layer[kind] = {"measured": float(la.full),
                           f"model_{impl_name}": layer_activation_bytes(m, moe=moe, impl=impl, **kw).full,
                           "model_TE": layer_activation_bytes(m, moe=moe, impl=impl_for(m, t.attention_backend, TE),
                                                              **kw).full}
    w_m = measured.stages[measured.worst_stage]
    w_a = analytic.stages[analytic.worst_stage]
    comps = {}
    for c in ("parameters", "gradients", "optimizer", "activations", "transient", "reserve", "total"):
        comps[c] = {"measured": int(getattr(w_m, f"{c}_bytes")), "analytic": int(getattr(w_a, f"{c}_bytes"))}
    notes = []
    overhead = allocator_overhead(meas.timings)
    if overhead is not None:  # a GPU measurement: the reserved bytes upscaled like the allocated ones
        comps["reserved"] = {"measured": measured_reserved(w_m, overhead), "analytic": int(analytic.reserved_peak_bytes)}
        for kind, v in per_layer.items():
            ts = [tm for n, tm in meas.timings.items() if n.split("#")[0].replace("_window", "") == kind]
            if ts:
                v["measured_peak"] = float(statistics.median(tm.peak_bytes for tm in ts))
                v["measured_reserved"] = float(statistics.median(tm.reserved_bytes for tm in ts))
        notes.append(f"reserved memory from the measured pieces: the caching allocator added {overhead:.1%} over their "
                     f"allocated peaks; worst stage reserved {comps['reserved']['measured'] / 2**30:.2f} GiB "
                     f"(model {comps['reserved']['analytic'] / 2**30:.2f} GiB)")
    diff = measured.peak_bytes_per_gpu / analytic.peak_bytes_per_gpu - 1.0 if analytic.peak_bytes_per_gpu else 0.0
    check = MemoryCheck(
        measured_peak_bytes_per_gpu=measured.peak_bytes_per_gpu,
        analytic_peak_bytes_per_gpu=analytic.peak_bytes_per_gpu, relative_difference=diff,
        analytic_model=("projection.memory.estimate.estimate_memory (TorchTitan: memory_titan's model traced against "
                        "torchtitan's own step, GPU kernels)" if titan else
                        "projection.memory.estimate.estimate_memory (the dry-run's tensor-list model, TE implementation)"),
        components=comps, per_layer=per_layer, analytic=analytic,
        notes=[f"measured activations / analytic: worst stage {comps['activations']['measured'] / max(1, comps['activations']['analytic']):.2f}x; "
               f"peak per GPU {diff:+.1%}"] + notes)
    return measured, check
