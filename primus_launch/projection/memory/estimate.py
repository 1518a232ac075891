"""Per-GPU memory of a training plan, per pipeline stage, and the verdict against the device.

Megatron-Core plans: :mod:`memory.mcore` (weights, gradient buffer, optimizer state sharded over
dp x cp, activations walked over the schedule, transients); TorchTitan plans: :mod:`memory.titan` and
the FSDP2 walk below.  Each stage's allocated peak, the caching allocator's reserved peak above it
(:mod:`memory.stage`) and the bytes outside the allocator (CUDA context, NCCL communicators, DeepEP /
HybridEP buffers: :mod:`memory.outside`) make the point estimate; :mod:`memory.verdict` compares it,
with its measured error band, to the device's reported capacity (:mod:`hardware.gpus`) less the user's
``--memory-margin`` (default 0): ``fits``, ``tight`` or ``does not fit``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, Literal, Optional

from primus_launch.plan import (STATE_DTYPE_BYTES, Chunk, PipelineSchedule, Plan, Precision, RecomputeGranularity,
                                RecomputeMethod)
from primus_launch.projection.cost.offload import module_offload_inert
from primus_launch.projection.cost.titan_sac import op_sac_a2a_rows
from primus_launch.projection.hardware.gpus import GiB, get_gpu, gpu_arch
from primus_launch.projection.hardware.placement import scaleup_domain
from primus_launch.projection.memory.activations import TE, ActivationImpl
from primus_launch.projection.memory.fp8 import columnwise_copy, non_tn_fp8_gemm
from primus_launch.projection.memory.mcore import (  # noqa: F401  (re-exported)
    McoreOpts,
    cp_comm_bytes,
    linear_params,
    mcore_stage_memory,
    mcore_args,
    mcore_opts,
)
from primus_launch.projection.memory.outside import outside_allocator_bytes
from primus_launch.projection.memory.paged_stash import full_graph_note
from primus_launch.projection.memory.params import (
    ArchKey,
    arch_from_key,
    layer_params_for_key,
    arch_key,
)
from primus_launch.projection.memory.stage import (  # noqa: F401  (re-exported)
    ALLOCATOR_FRAGMENTATION,
    TITAN_DYNAMIC_FRAGMENTATION,
    MeasuredActivations,
    MeasuredTitanBlocks,
    in_flight_closed_form,
    oom_peak,
    stage_report,
    with_outside,
)
from primus_launch.projection.memory.titan import (
    TITAN,
    Fsdp2StreamPools,
    PPStage,
    TitanImpl,
    fsdp2_stream_pools,
    fsdp_groups,
    moe_backward_bytes,
    pp_rank_walk,
    reserved_peak_over_levels,
    stage_walk,
    titan_buffer_bytes,
    titan_ac_mode,
    titan_param_shapes,
    torch_pp_ops,
    unit_sharded,
    unit_unsharded,
)
from primus_launch.projection.memory.titan import head_kept_bytes as titan_head_bytes
from primus_launch.projection.memory.titan import layer_activation_bytes as titan_layer_bytes
from primus_launch.projection.memory.verdict import band_for, verdict
from primus_launch.projection.memory.workspaces import GemmWorkspaces, gemm_workspaces
from primus_launch.projection.result import MemoryBand, MemoryReport, StageMemory

MemoryBasis = Literal["reserved", "allocated"]


def stage_memory(plan: Plan, impl: ActivationImpl | None = None, titan_impl: TitanImpl = TITAN,
                 acts: Optional[MeasuredActivations] = None) -> list[StageMemory]:
    """Per PP rank, bytes on one GPU of that rank (Megatron: :mod:`memory.mcore`; TorchTitan plans:
    :mod:`memory.titan`), the memory outside the caching allocator included."""
    if plan.framework == "torchtitan":
        stages = titan_stage_memory(*titan_args(plan), titan_impl, measured=acts, gemm_ws=titan_gemm_workspaces(plan))
    else:
        stages = mcore_stage_memory(*mcore_args(plan, impl), acts=acts)
    outside = sum(plan_outside_bytes(plan).values())
    return [with_outside(st, outside) for st in stages]


def plan_outside_bytes(plan: Plan) -> dict[str, float]:
    """Bytes the plan's processes hold outside the caching allocator (:mod:`memory.outside`)."""
    m, p, t = plan.model, plan.parallel, plan.training
    moe = m.is_moe and p.ep * p.expert_tp > 1
    return outside_allocator_bytes(
        tp=p.tp, cp=p.cp, pp=p.pp, dp=plan.dp, ep=p.ep, etp=p.expert_tp, expert_dp=plan.expert_dp,
        dispatcher=t.moe_token_dispatcher, moe=moe, hidden=m.hidden_size,
        tokens=m.seq_length // p.cp * t.micro_batch_size / (p.tp if p.sequence_parallel else 1),
        local_experts=(m.num_experts or 1) // max(1, p.ep), nvlink_domain=scaleup_domain(plan) if moe else 8,
        ub_tokens=m.seq_length // p.cp * t.micro_batch_size if (t.tp_comm_overlap and plan.framework == "megatron")
        else 0.0, fp8=t.precision == "fp8")


def _ep_routing(plan: Plan) -> bool:
    return plan.model.is_moe and plan.parallel.ep > 1


def estimate_memory(plan: Plan, margin: float = 0.0, impl: ActivationImpl | None = None,
                    memory_basis: MemoryBasis = "reserved",
                    acts: Optional[MeasuredActivations] = None) -> MemoryReport:
    """Peak bytes per GPU, the worst stage's breakdown and the verdict (:mod:`memory.verdict`).

    ``memory_basis="reserved"`` (default) compares the caching allocator's estimated reserved peak
    (allocated x (1 + :data:`ALLOCATOR_FRAGMENTATION`)) plus the memory outside the allocator with the
    device's capacity; ``"allocated"`` the allocated peak plus the same outside-allocator bytes.
    ``margin``: the user's ``--memory-margin`` (default 0), the only knob on top of the point estimate.
    ``acts``: measured per-layer activations instead of the model's (a TorchTitan plan:
    ``MeasuredTitanActivations`` feeding :mod:`memory_titan`'s model).
    """
    if memory_basis not in ("reserved", "allocated"):
        from primus_launch.plan import PlanError

        raise PlanError("memory_basis", memory_basis, "reserved or allocated")
    stages = stage_memory(plan, impl, acts=acts)
    worst = max(stages, key=lambda s: basis_peak(s, memory_basis))
    peak = basis_peak(worst, memory_basis)
    # the verdict's quantity (memory.verdict): what cannot be given back on a failed allocation
    held_st = max(stages, key=lambda s: verdict_peak(s, memory_basis))
    held = verdict_peak(held_st, memory_basis)
    cap = int(get_gpu(plan.cluster.gpu).hbm_bytes)
    titan = plan.framework == "torchtitan"
    outside = plan_outside_bytes(plan)
    low, high, rows, source = band_for(plan.framework)
    out_b = held_st.outside_allocator_bytes
    band = MemoryBand(low=low, high=high, rows=rows, source=source,
                      low_bytes=int((held - out_b) * (1 + low) + out_b), high_bytes=int((held - out_b) * (1 + high) + out_b))
    vd = verdict(held, cap, low, high, margin, outside=out_b)
    notes = [
        acts.note if acts is not None else
        ("activations: torchtitan modules (fused RMSNorm, flash SDPA, "
         f"{'compiled' if plan.training.compile else 'unfused'} SwiGLU, fp32 loss logits), FSDP2 walk of the "
         "backward (tests/titan_trace.py traces)" if titan else
         "activations: megatron-core 0.16.1 + Transformer Engine 2.13 saved tensors (fused attention, fused "
         "SwiGLU/RoPE)" + (", dropout masks" if plan.model.hidden_dropout or plan.model.attention_dropout
                           else ", no dropout")),
        f"memory basis {memory_basis}: allocated peak {worst.allocated_bytes / GiB:.1f} GiB, estimated reserved "
        f"{(worst.allocated_bytes + worst.allocator_reserve_bytes) / GiB:.1f} GiB ("
        + ("10 % of activations and transients + FSDP2's side-stream pools" if titan else
           f"+{ALLOCATOR_FRAGMENTATION:.1%}: the caching allocator's published max reserved / max allocated")
        + f"), + {out_b / GiB:.1f} GiB outside the allocator ("
        + ", ".join(f"{k} {v / GiB:.2f}" for k, v in outside.items() if v) + " GiB)",
        f"verdict {vd} on {held / GiB:.1f} GiB"
        + (f" (stage {held_st.stage}'s {basis_peak(held_st, memory_basis) / GiB:.1f} GiB less "
           f"{held_st.releasable_bytes / GiB:.1f} GiB of free cached segments the caching allocator releases before "
           "it raises out of memory: FSDP2's free side-stream pools)" if held != peak or held_st.releasable_bytes
           else "")
        + f": band {low:+.0%} / {high:+.0%} on the allocator's part, the {out_b / GiB:.1f} GiB outside it "
        f"as estimated: {band.low_bytes / GiB:.1f}-{band.high_bytes / GiB:.1f} GiB ({source})",
    ]
    t = plan.training
    if not titan:
        if t.recompute.granularity == "selective" and tuple(t.recompute.modules) != ("core_attn",):
            notes.append(f"selective recompute of {', '.join(t.recompute.modules)} (megatron-core checkpoints, measured)")
        if t.offload.activation_layers or (t.offload.activation_modules and not module_offload_inert(plan)):
            notes.append("activation offloading: offloaded activations counted on the host, one layer reloaded at a "
                         "time (stated model of TE cpu_offload / Megatron fine-grained offloading)")
        if t.offload.weights:
            notes.append("--cpu-offloading-weights: not modelled (weights counted on the GPU)")
        if t.cuda_graph_impl == "transformer_engine":
            notes.append("CUDA graphs (transformer_engine): the graphs' pool holds what the eager schedule holds (TE "
                         ">= 2.7 reuses static inputs / outputs by the schedule order, megatron cuda_graphs.py) plus "
                         "each in-flight graph's static attention mask, the static outputs eager would free (shared "
                         "expert output) and the chunk input beside its static copy"
                         + ("; captured before the first step (--cuda-graph-warmup-steps 0): the allocated peak is "
                            "the capture's or the replay's, the graphed layers' saved tensors allocated only at the "
                            "capture (replays write into the reserved pool), memory.te_graphs"
                            if t.cuda_graph_warmup_steps == 0 else
                            f"; the {t.cuda_graph_warmup_steps} eager warm-up steps before the capture set the "
                            "allocated peak"))
        elif t.cuda_graph_impl == "local" and "full_iteration" in t.cuda_graph_scope:
            notes.append(full_graph_note(bool(t.overlap_moe_expert_parallel_comm and plan.model.is_moe),
                                         bool(t.moe_paged_stash and plan.model.is_moe)))
        elif t.cuda_graph_impl == "local":
            notes.append("CUDA graphs (local): counted as the eager schedule")
        if plan.model.is_moe and t.moe_expert_rank_capacity_factor is not None:
            c = t.moe_expert_rank_capacity_factor
            notes.append(f"static-shape MoE (capacity factor {c:g}): dispatch buffers and the experts' gradients at "
                         f"{c:g} x the balanced routed tokens; "
                         + (f"paged stash buffer {abs(t.moe_paged_stash_buffer_factor):g} x the experts' saved tensors "
                            "in flight, one layer reloaded at the padded shape" if t.moe_paged_stash else
                            f"the experts' saved tensors at the padded shape")
                         + " (megatron main token_dispatcher.py / paged_stash.py)")
        elif plan.model.is_moe and t.moe_expert_capacity_factor is not None:
            f = t.moe_expert_capacity_factor
            notes.append(f"token drop (capacity factor {f:g}" + (", padded): the experts' inputs, saved tensors and "
                         f"gradients at {f:g} x the balanced routed tokens (megatron-core drop_and_pad)"
                         if t.moe_pad_expert_input_to_capacity else "): counted at the balanced routed tokens"))
        if t.overlap_moe_expert_parallel_comm and plan.model.is_moe:
            notes.append("EP overlap: megatron's combined 1F1B walked (one more warm-up forward, merged F/B steps "
                         "hold one more layer)")
        if plan.parallel.cp > 1:
            notes.append(f"context parallel {plan.parallel.cp_comm_type}: attention communication buffers as a stated "
                         "model of TE's context_parallel.py")
    if plan.training.precision == "fp8" and titan:
        notes.append("float8 (torchao Float8Linear, rowwise / tensorwise): bf16 weights and high-precision linear "
                     "inputs saved for backward, fp8 casts transient (traced: equal to bf16 at the peak)")
    elif plan.training.precision == "fp8":
        recipe = t.fp8_recipe or "delayed"
        one_copy = not columnwise_copy(recipe, non_tn=non_tn_fp8_gemm(gpu_arch(plan.cluster.gpu)))  # as mcore charges
        notes.append(f"fp8 ({recipe}, Transformer Engine 2.13 save lists): linears save one quantized copy of "
                     "their inputs, each keeps its quantized weight across micro-batches "
                     + ("(one copy: non-TN FP8 GEMMs on this GPU)" if one_copy else "(rowwise + columnwise)")
                     + (", fp8 parameters (--fp8-param-gather)" if t.fp8_param_gather else ""))
        if plan.bf16_layer_ids():
            notes.append(f"{len(plan.bf16_layer_ids())} decoder layers kept in BF16 (--first-last-layers-bf16: the "
                         f"first {t.bf16_layers_start}, the last {t.bf16_layers_end}): bf16 weights with no fp8 copies "
                         "and bf16 saved inputs on the stages holding them")
    elif plan.training.precision == "fp4" and titan and plan.training.recompute.granularity == "selective":
        n4 = sum(plan.training.fp4_layer_pattern or (1,) * plan.model.num_layers)
        notes.append(f"fp4 (torchao NVFP4 linears, {n4} of {plan.model.num_layers} layers): per-op SAC saves none of "
                     "their outputs (aten._scaled_mm_v2 is not on its save list); weights bf16, fp4 copies transient")
    elif plan.training.precision == "fp4":
        notes.append("fp4: counted as bf16 (NVFP4 weight/activation copies not modelled)")
    if titan and plan.training.compile:
        notes.append("torch.compile: norms fused and SwiGLU keeping w1/w3 outputs only: what inductor's partitioner "
                     "saves for the backward (dense and MoE blocks traced on the meta device, "
                     "tests/titan_trace.py compiled_block_saved_bytes)")
    if titan and acts is None:
        side = titan_stage_parts(*titan_args(plan))[worst.stage][1].get("side_pools_reserved", 0.0)
        notes.append(f"FSDP2 side streams (expandable segments are per stream): {side / GiB:.1f} GiB reserved beyond "
                     "the peak's allocation (all-gather copy-in buffers of two consecutive units, every unit's "
                     "fp32 sharded gradient on the reduce-scatter stream), in the reserved estimate; their free part "
                     "not in the verdict (torch's caching allocator releases every stream's free cached segments "
                     "and retries before it raises out of memory)")
    if worst.workspace_bytes:
        notes.append(f"GEMM workspaces {worst.workspace_bytes / 2**20:.0f} MiB in the allocated peak (torch's cuBLAS "
                     "workspace per thread and stream, Transformer Engine's own; memory.workspaces)")
    if _ep_routing(plan):
        notes.append("MoE: each EP rank assumed to receive the average number of routed tokens (balanced routing)")
    breakdown = {"parameters": worst.parameters_bytes, "gradients": worst.gradients_bytes,
                 "optimizer": worst.optimizer_bytes, "activations": worst.activations_bytes,
                 "transient": worst.transient_bytes - worst.workspace_bytes, "workspaces": worst.workspace_bytes,
                 "reserve": peak - worst.allocated_bytes}
    return MemoryReport(
        peak_bytes_per_gpu=peak, capacity_bytes=cap, margin_fraction=margin,
        fits=vd != "does not fit", worst_stage=worst.stage, breakdown=breakdown,
        stages=stages, notes=notes, memory_basis=memory_basis, allocated_peak_bytes=worst.allocated_bytes,
        reserved_peak_bytes=worst.allocated_bytes + worst.allocator_reserve_bytes,
        outside_allocator_bytes=worst.outside_allocator_bytes, verdict=vd, band=band,
        outside_allocator={k: int(v) for k, v in outside.items()}, oom_peak_bytes=int(held))


def basis_peak(st: StageMemory, basis: str) -> int:
    """The reported peak: the basis peak plus the memory outside the allocator."""
    if basis == "allocated":
        return st.allocated_bytes + st.outside_allocator_bytes
    return st.total_bytes


def verdict_peak(st: StageMemory, basis: str) -> int:
    """Bytes the verdict compares with the capacity (:mod:`memory.verdict`): the basis peak less the free
    cached segments the caching allocator releases before it raises out of memory
    (:func:`memory.stage.oom_peak`); the allocated basis has none to release."""
    if basis == "allocated":
        return basis_peak(st, basis)
    return oom_peak(st)


# ---------------------------------------------------------------- TorchTitan
def titan_loss_bytes(*, sb: float, vocab: int) -> tuple[float, float]:
    """(kept, backward transient) of torchtitan's ``cross_entropy_loss`` torch.compile'd (inductor), traced
    in ``tests/test_memory_titan.py``: the forward reads the bf16 logits once and writes two fp32 values per
    token (the row max and log-sum-exp), so it keeps the logits it was given (``2 sb V``) and ``8 sb``; the
    backward writes the bf16 gradient of the logits (``2 sb V``), the upcast recomputed in the kernel."""
    return 2.0 * sb * vocab + 8.0 * sb, 2.0 * sb * vocab


def titan_args(plan: Plan) -> tuple:
    """The cached positional arguments of :func:`titan_stage_parts` (and :func:`titan_stage_memory`) for a
    TorchTitan plan, up to ``state_bytes``."""
    m, p, t = plan.model, plan.parallel, plan.training
    r = t.recompute
    # FSDP shard group dp_shard = dp / dp_replicate; DDP (dp_sharding "none"): torchtitan 0.3.0's
    # fully_shard with a shard group of one (its mixed-precision policy), i.e. all DP ranks replicate
    shard = plan.dp // max(1, p.dp_replicate) if p.dp_sharding == "full" else 1
    return (arch_key(m), p.tp, p.expert_tp, p.ep, p.pp, p.vpp, p.cp, shard, 1, plan.chunk_layout(),
            t.pipeline_schedule, t.micro_batch_size, plan.num_microbatches, t.precision, r.granularity, r.method,
            r.num_layers, t.compile, p.fsdp_reshard_after_forward, titan_attention(plan), t.compile_loss,
            t.loss_chunks, STATE_DTYPE_BYTES[t.main_params_dtype],
            (STATE_DTYPE_BYTES[t.exp_avg_dtype] + STATE_DTYPE_BYTES[t.exp_avg_sq_dtype]) / 2.0,
            op_sac_a2a_rows(plan),
            (t.fp4_layer_pattern or (1,) * m.num_layers) if t.precision == "fp4" and t.fp4_recipe == "nvfp4" else None)


def titan_gemm_workspaces(plan: Plan) -> GemmWorkspaces:
    """The GEMM workspaces of a TorchTitan plan (:func:`memory.workspaces.gemm_workspaces` without Transformer
    Engine): every GEMM is torch's, so each stage holds torch's cuBLAS workspace for the forward's (main thread)
    and the backward's (autograd device thread) pair on the default stream, ``TORCH_PAIRS x
    TORCH_WORKSPACE[arch]`` (2 x 32 MiB on sm90 / Blackwell).  Keyword of :func:`titan_stage_parts`
    (``gemm_ws``), left out by the CPU-trace comparisons (a CPU run allocates no cuBLAS workspace)."""
    return gemm_workspaces(gpu_arch(plan.cluster.gpu), te=False)


def titan_attention(plan: Plan) -> str:
    """torchtitan's attention module for a plan: ``flex`` (0.3.0's llama3/qwen3/deepseek default
    ``attn_backend="flex"``; context parallelism all-gathers K and V), ``sdpa`` (0.3.0 with
    ``attention_backend`` flash / fused: ``enable_gqa``) or ``sdpa_repeat_kv`` (the v0.1 / v0.2 TOML
    configs, which ran SDPA -- with torch's ring attention under CP -- on K and V expanded to the query
    heads by ``repeat_kv``, torchtitan up to ff0829c10; :func:`memory.titan.layer_activation_bytes`).
    The plan carries no torchtitan version: v0.2.2's TOMLs (2026-02-20, after ff0829c10: ``enable_gqa``) are
    counted with the copies too, over by ``2 x seq x 2 x (heads - kv_heads) x head_dim`` bytes per layer and
    micro-batch (the side that errs toward ``does not fit``)."""
    t = plan.training
    toml = bool(plan.source and plan.source.format == "torchtitan-toml")
    if t.attention_backend == "auto" and not toml:
        return "flex"
    return "sdpa_repeat_kv" if toml else "sdpa"


def _most_in_flight(ops: list[tuple[str, int, int]]) -> int:
    """The most chunk-micro-batches a rank holds at once over its schedule's ops (forwards done minus
    backwards done, at every prefix)."""
    level = most = 0
    for kind, _, _ in ops:
        level += 1 if kind == "F" else -1
        most = max(most, level)
    return most


@lru_cache(maxsize=65536)
def titan_stage_memory(*args: Any, measured: Optional[MeasuredTitanBlocks] = None,
                       gemm_ws: GemmWorkspaces | None = None) -> tuple[StageMemory, ...]:
    """TorchTitan stages (:mod:`memory.titan`): FSDP2 over ``S = dp_shard x cp``, the backward walk;
    ``args``: the positional arguments of :func:`titan_stage_parts` (:func:`titan_args`), whose
    :class:`StageMemory` column this is."""
    return tuple(st for st, _ in titan_stage_parts(*args, measured=measured, gemm_ws=gemm_ws))


@lru_cache(maxsize=4096)
def titan_stage_parts(key: ArchKey, tp: int, etp: int, ep: int, pp: int, vpp: int, cp: int, dp: int,
                      dp_replicate: int, layout: tuple[tuple[Chunk, ...], ...], schedule: PipelineSchedule, mbs: int,
                      nmb: int, precision: Precision, gran: RecomputeGranularity, method: RecomputeMethod,
                      rnum: Optional[int], compiled: bool, reshard: str, attn: str = "flex",
                      loss_compiled: bool = False, loss_chunks: int = 1, param_bytes: float = 4.0,
                      state_bytes: float = 4.0, a2a_rows: Optional[float] = None, fp4_layers: Optional[tuple[int, ...]] = None,
                      impl: TitanImpl = TITAN, measured: Optional[MeasuredTitanBlocks] = None,
                      gemm_ws: GemmWorkspaces | None = None) -> tuple[tuple[StageMemory, dict[str, float]], ...]:
    """Per PP rank (:class:`StageMemory`, the walk's breakdown at the peak: ``held`` unsharded parameters,
    ``recv`` buffers, ``accumulated`` unsharded gradients inside the transient / activations / gradients).

    The loss (torchtitan ``components/loss.py`` ``cross_entropy_loss``: ``F.cross_entropy(pred.float(), ...)``)
    eager keeps its fp32 log-probabilities ``4 sb V`` and its backward holds two fp32 logits-sized tensors
    (three with loss-parallel TP); compiled (``loss_compiled``, TP 1: :func:`titan_loss_bytes`) it keeps the
    bf16 logits it was given and two fp32 values per token, and its backward writes the bf16 gradient.

    ``loss_chunks``: the chunked loss (torchtitan 0.3.0 ``ChunkedLossWrapper``, :func:`memory.titan.stage_walk`):
    one chunk's log-probabilities and logits gradients at a time, its buffers beside them; under PP the
    last stage's loss terms are divided the same way (its buffers not counted).

    ``param_bytes`` / ``state_bytes``: bytes per element of the FSDP2 sharded parameters and of each AdamW
    state (torchtitan 0.3.0 ``config/configs.py`` ``TrainingConfig.dtype``: "float32" keeps fp32 parameters
    as the master copy, fp32 states; "bfloat16" -- ``trainer.py`` builds the model under
    ``set_default_dtype`` -- puts "all parameters, gradients, and optimizer states in bfloat16": 2 and 2, and
    FSDP2 casts each reduced gradient to the parameter's dtype, so the sharded gradients are 2 bytes too).

    ``reshard`` ``never`` without PP: every unit's unsharded bf16 parameters kept from its forward to its
    post-backward (:func:`memory.titan.stage_walk` ``held_units``); "default" without PP reshards (torchtitan
    ``get_fsdp_reshard_after_forward_policy``: True unless PP).

    ``fp4_layers``: per decoder layer, 1 where torchao's NVFP4 linears run it (``training.fp4_layer_pattern``;
    all layers under an NVFP4 converter without layer fqns): under per-op SAC such a block keeps no linear output
    (:func:`memory.titan.layer_activation_bytes` ``mm_saved=False``).

    ``a2a_rows``: the rows of ``h`` per token of an EP rank that per-op SAC keeps from an MoE block's two EP token
    exchanges (:func:`projection.cost.titan_sac.op_sac_a2a_rows`: 0, ``2 k`` for all-to-all, DeepEP's destination
    ranks + 1; ``None``: ``2 k``; :func:`memory.titan.layer_activation_bytes` ``a2a_rows``).

    ``gemm_ws`` (:func:`titan_gemm_workspaces`; ``None`` = none, as on the CPU) adds torch's cuBLAS
    workspaces to each stage's allocated peak (:func:`memory.stage.stage_report` ``workspaces``)."""
    m = arch_from_key(key)
    S = max(1, dp // max(1, dp_replicate)) * cp
    # torchtitan 0.3.0 efsdp = dp_shard * cp * tp / ep (v0.2: / (etp * ep)); without EP the experts
    # share the fsdp mesh and are TP-sharded
    Se = max(1, S * tp // (max(1, ep) * (etp if ep > 1 and etp > 1 else 1)))
    seq = m.seq_length
    sb = seq // cp * mbs
    h = m.hidden_size
    flight = in_flight_closed_form(schedule, pp, vpp, nmb)
    ac = titan_ac_mode(gran)
    kw = dict(seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl, ep=ep, attn=attn, a2a_rows=a2a_rows)
    layer_of = {moe: titan_layer_bytes(m, ac="none", moe=moe, **kw) for moe in {False, m.is_moe}}
    ck_of = {moe: titan_layer_bytes(m, ac="full" if ac == "full" else "op", moe=moe, **kw) for moe in {False, m.is_moe}}
    ck_fp4 = ({moe: titan_layer_bytes(m, ac="op", moe=moe, mm_saved=False, **kw) for moe in {False, m.is_moe}}
              if ac == "op" and fp4_layers and any(fp4_layers) else None)
    if measured is not None:  # measured blocks (projection.measure.measured_memory.MeasuredTitanActivations)
        layer_of, ck_of = measured.titan_layers(layer_of, ck_of)
    V = m.vocab_size
    E = m.num_experts or 1

    def groups_of(part: str) -> tuple:
        return fsdp_groups(titan_param_shapes(m, part, tp=tp, ep=ep, etp=etp), S=S, Se=Se, ep=ep, num_experts=E)

    emb_g, head_g = groups_of("emb"), groups_of("head")
    # a dense block's backward temporaries (measured, module docstring); an MoE block's (moe_backward_bytes)
    g_ = 2 if m.swiglu else 1
    layer_bwd = 2.0 * sb * ((g_ + 2) * m.ffn_hidden_size / tp + h)
    moe_bwd = moe_backward_bytes(m, seq=seq, mbs=mbs, tp=tp, cp=cp, ep=ep) if m.is_moe else (0.0, 0.0)
    block_g = {moe: groups_of("moe" if moe else "dense") for moe in {False, m.is_moe}}
    out = []
    for rank in range(pp):
        units: list[tuple] = []
        dense_p = expert_p = 0.0
        n_layers = 0
        buffers = 0.0
        has_emb = any(c.embedding for c in layout[rank])
        has_loss = any(c.loss for c in layout[rank])
        for chunk in layout[rank]:
            if chunk.embedding:
                units.append(("emb", emb_g, 0.0, 0.0, 0.0, id(chunk)))
                dense_p += V / tp * h
            for j, i in enumerate(chunk.layers):
                moe = m.is_moe_layer(i)
                lp = layer_params_for_key(key, tp, etp if ep > 1 else tp, ep, moe, "te")
                dense_p += lp.dense
                expert_p += lp.expert
                n_layers += 1
                buffers += titan_buffer_bytes(m, seq=seq, moe=moe)
                full = layer_of[moe]
                if ac == "full" and method == "every_n":
                    ck = (j + 1) % (rnum or 1) == 0
                elif ac == "full":
                    ck = True
                else:
                    ck = ac == "op"
                kept = ck_of[moe].kept if ck else full.full
                if ck and ck_fp4 is not None and fp4_layers[i]:
                    kept = ck_fp4[moe].kept
                rebuilt = full.full - kept if ck else 0.0
                units.append(("moe" if moe else "layer", block_g[moe], kept, rebuilt,
                              moe_bwd if moe else layer_bwd, id(chunk)))
        if has_loss:
            dense_p += V / tp * h + h
        shard_p = sum(unit_sharded(u[1]) for u in units) + (unit_sharded(head_g) if has_loss else 0.0)
        # fp32 padded shards (FSDP2 keeps them as the master copy) + each block's buffers
        weights = param_bytes * shard_p + buffers
        optim = 2.0 * state_bytes * shard_p  # AdamW exp_avg + exp_avg_sq, shaped like the (rank-0) shards
        static = weights + optim
        # the rank's gradients as FSDP2 leaves them: fp32 reduce-scatter outputs (after the step's reduce)
        # and, under PP, the fp32 unsharded gradients accumulated across micro-batches
        all_groups = [g for u in units for g in u[1]] + (list(head_g) if has_loss else [])
        grad_terms = {"grads_sharded": param_bytes * shard_p,
                      "grads_unsharded": 4.0 * sum(g.grad_elems for g in all_groups)}
        # FSDP2's all-gather copy-in and reduce-scatter streams, units in forward order (memory.titan)
        pools = fsdp2_stream_pools([u[1] for u in units] + ([head_g] if has_loss else []),
                                   master_bytes=param_bytes, all_reduce=dp_replicate > 1 or S == 1)
        # torch's cuBLAS workspaces, allocated at the first GEMM and kept (memory.workspaces)
        ws = gemm_ws.stage_bytes(layers=n_layers > 0, loss=has_loss,
                                 moe=any(u[0] == "moe" for u in units)) if gemm_ws is not None else 0.0
        if pp > 1 and schedule in ("1f1b", "gpipe", "interleaved_1f1b"):
            # torch.distributed.pipelining + FSDP2, walked over the rank's schedule (memory_titan)
            a_sbh = 2.0 * sb * h / tp
            stages = []
            for chunk in layout[rank]:
                cu = [u for u in units if u[5] == id(chunk)]
                punits = [(k, U, 8.0 * sb if k == "emb" else kept, rb, bw) for (k, U, kept, rb, bw, _) in cu]
                extra = a_sbh
                lg = lk = lp = 0.0
                if chunk.loss:
                    hn, hin, lp = titan_head_bytes(m, seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl)
                    punits.append(("head", head_g, hn + hin, 0.0, 0.0))
                    lk = 2.0 * sb * V / tp
                    lg = (2 if tp == 1 else 3) * 4.0 * sb * V / tp
                    if loss_compiled and tp == 1:  # the logits (lk) are what it keeps, beside 8 bytes per token
                        kept_l, lg = titan_loss_bytes(sb=sb, vocab=V)
                        lp = kept_l - lk
                    if loss_chunks > 1:  # one sequence chunk's logits, log-probabilities and their gradients
                        lk, lg, lp = lk / loss_chunks, lg / loss_chunks, lp / loss_chunks
                    extra = lp + lk
                stages.append(PPStage(units=tuple(punits), extra_kept=extra, first=chunk.embedding, last=chunk.loss,
                                      boundary=a_sbh, loss_grads=lg, logits_kept=lk, log_probs=lp))
            ops = torch_pp_ops(schedule, pp, vpp, nmb, rank)
            pp_levels: list[tuple[float, dict[str, float]]] = []
            peak, parts = pp_rank_walk(static=static, stages=stages, ops=ops, nmb=nmb,
                                       held=reshard != "always", levels_out=pp_levels)
            w = _most_in_flight(ops)
            # as without PP: the side pools keep last step's high-water marks, so an earlier level (a backward
            # before this rank's perform_reduce_grad, no sharded gradient allocated) may hold the reserved peak
            side = max(_side_pools_reserved(pools, parts),
                       reserved_peak_over_levels(pp_levels, pools, TITAN_DYNAMIC_FRAGMENTATION)
                       - peak - TITAN_DYNAMIC_FRAGMENTATION * (parts["activations"] + parts["transient"]))
            out.append((stage_report(rank, weights, parts["gradients"], optim, parts["activations"],
                                     parts["transient"], w, int(dense_p + expert_p), side_pools=side,
                                     workspaces=ws, releasable=_releasable(peak, parts, side, pp_levels)),
                        {**parts, **grad_terms, "side_pools_reserved": side}))
            continue
        # activations: every chunk-micro-batch in flight keeps its blocks; the loss's once
        units_in_flight = flight[rank] / max(1, len(layout[rank])) if pp > 1 else 1.0
        scaled = [(k, U, kept * units_in_flight, rb, bw) for (k, U, kept, rb, bw, _) in units]
        emb_ids = 8.0 * sb * units_in_flight if has_emb else 0.0
        head = None
        loss_grads = held = 0.0
        if has_loss:
            hn, hin, logp = titan_head_bytes(m, seq=seq, mbs=mbs, tp=tp, cp=cp, compiled=compiled, impl=impl)
            if measured is not None:
                hn, hin, logp = measured.titan_head(hn, hin, logp)
            loss_grads = (2 if tp == 1 else 3) * 4.0 * sb * V / tp
            if loss_compiled and tp == 1 and measured is None:
                logp, loss_grads = titan_loss_bytes(sb=sb, vocab=V)
            head = (hn, hin, logp, head_g)
            if reshard != "always":
                held = 2.0 * unit_unsharded(head_g) if S > 1 else 0.0
        pp_extra = 0.0
        if pp > 1 and reshard != "always":
            # unsharded bf16 parameters kept from the first forward + fp32 unsharded gradients
            # accumulated across micro-batches (no gradient sync until the last)
            held_all = sum(unit_unsharded(u[1]) for u in units) + (unit_unsharded(head_g) if has_loss else 0.0)
            pp_extra = 2.0 * held_all + grad_terms["grads_unsharded"] - (held if has_loss else 0.0)
        levels: list[tuple[float, dict[str, float]]] = []
        # the chunked loss's fp32 GradAccumulator of the (TP-replicated) hidden states' gradient and, above one
        # sequence per micro-batch, the chunks' contiguous copies (torch.split along the sequence)
        loss_buffer = (4.0 + (2.0 if mbs > 1 else 0.0)) * sb * h if (has_loss and loss_chunks > 1) else 0.0
        if loss_buffer and not (loss_compiled and tp == 1):
            # eager, the chunk's bf16 logits stay referenced by the loop (``logits = lm_head(h_chunk)``) through
            # its backward; the compiled loss's kept bytes already hold them (titan_loss_bytes)
            loss_buffer += 2.0 * sb * V / tp / loss_chunks
        peak, parts = stage_walk(static=static, units=scaled, head=head, emb_ids=emb_ids,
                                 loss_grads=loss_grads, held_head=held, pp_extra=pp_extra, in_grad=2.0 * sb * h / tp,
                                 mb_scale=units_in_flight, loss_chunks=loss_chunks, loss_buffer=loss_buffer,
                                 held_units=pp == 1 and reshard == "never", grad_bytes=param_bytes,
                                 levels_out=levels)
        acts = parts["activations"]
        # reserved beyond the allocated peak's own: the pools there, or more where an earlier level (the loss
        # backward, before any gradient) holds the reserved peak (memory.titan.reserved_peak_over_levels)
        side = max(_side_pools_reserved(pools, parts),
                   reserved_peak_over_levels(levels, pools, TITAN_DYNAMIC_FRAGMENTATION)
                   - peak - TITAN_DYNAMIC_FRAGMENTATION * (acts + parts["transient"]))
        out.append((stage_report(rank, weights, parts["gradients"], optim, acts, parts["transient"],
                                 int(math.ceil(units_in_flight)), int(dense_p + expert_p), side_pools=side,
                                 workspaces=ws, releasable=_releasable(peak, parts, side, levels)),
                    {**parts, **grad_terms, "side_pools_reserved": side}))
    return tuple(out)


def _releasable(peak: float, parts: dict[str, float], side: float,
                levels: list[tuple[float, dict[str, float]]]) -> float:
    """Of a TorchTitan stage's reserved estimate (``peak`` allocated + :data:`TITAN_DYNAMIC_FRAGMENTATION` of
    its activations and transients + ``side``, FSDP2's side-stream pools beyond the allocation), the bytes
    torch's caching allocator gives back before it raises out of memory (:mod:`memory.verdict`): the
    reserved estimate less the most any level of the step holds unreleasably, ``max over levels (allocated +
    the fragmentation term)``.  The side pools' free part is that; a level holding less allocation but more
    fragmentation than the allocated peak (the loss backward: no gradient yet, every activation alive) keeps
    its own.  The fragmentation term stays whole (free segments of the default stream are given back too,
    but the 10 % does not say which part; kept on the side of ``does not fit``)."""
    f = TITAN_DYNAMIC_FRAGMENTATION
    at_peak = peak + f * (parts["activations"] + parts["transient"])
    held = max([at_peak] + [a + f * (p.get("activations", 0.0) + p.get("transient", 0.0)) for a, p in levels])
    return max(0.0, at_peak + side - held)


def _side_pools_reserved(pools: Fsdp2StreamPools, parts: dict[str, float]) -> float:
    """Reserved bytes of FSDP2's side streams beyond what the peak's breakdown already counts there
    (``side_pools``: the sharded gradients reduced so far, the prefetched unit's all-gather output)."""
    return max(0.0, pools.copy_in + pools.reduce_scatter - parts.get("side_pools", 0.0))
