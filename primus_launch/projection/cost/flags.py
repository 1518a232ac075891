"""Plan settings that change time but that the dry-run cost model does not (fully) model.

Each becomes an :class:`~primus_launch.plan.UnmodelledFlag` in ``ProjectionResult.warnings``
(never silently ignored).  Settings modelled elsewhere are listed in the modules' docstrings.
"""

from __future__ import annotations

from primus_launch.plan import Plan, UnmodelledFlag
from primus_launch.projection.cost.offload import module_offload_inert
from primus_launch.projection.cost.recompute import full_recompute_inert


def unmodelled_flags(plan: Plan) -> list[UnmodelledFlag]:
    """The plan's settings the dry-run does not model, one warning each."""
    t, p, m = plan.training, plan.parallel, plan.model
    out: list[UnmodelledFlag] = []

    def add(flag: str, value: object, effect: str) -> None:
        out.append(UnmodelledFlag(flag=flag, value=str(value), effect=effect))

    if t.offload.weights:
        add("training.offload.weights", True, "time: weight offload transfers not priced")
    if t.optimizer == "muon" and (plan.framework != "megatron" or p.dp_sharding != "none"):
        # cost/muon.py and memory/muon.py price Megatron's Muon, which refuses the distributed optimizer / FSDP
        add("training.optimizer", f"muon with dp_sharding {p.dp_sharding}",
            "time, memory: Megatron's Muon runs without the distributed optimizer or FSDP; priced as a sharded "
            "one-moment optimizer, without the Newton-Schulz step")
    if p.cp_comm_type == "a2a+p2p":
        add("parallel.cp_comm_type", "a2a+p2p", "time: hierarchical CP priced as the p2p ring")
    if t.precision == "fp8" and t.fp8_recipe in ("rowwise", "rowwise_with_gw_hp"):
        add("training.fp8_recipe", t.fp8_recipe, "time: rowwise-scaled GEMMs run on the per-tensor FP8 curve "
            "(no rowwise GEMM figures); only their extra quantisation traffic is priced")
    if m.softmax_type != "vanilla":
        window = " and sliding window" if m.window_size is not None and m.num_window_layers > 0 else ""
        if plan.framework == "torchtitan":
            add("model.softmax_type", m.softmax_type,
                f"time: attention sinks{window} not modelled: torchtitan rescales the attention output by "
                "sigmoid(lse - sinks) after the kernel (0.3 models/gpt_oss/model.py apply_attention_sink_rescale); "
                "that pass and the sinks' gradient are not priced, the kernel is priced on its vanilla-softmax "
                "curve (no public measurement of it with sinks)")
        else:
            add("model.softmax_type", m.softmax_type,
                f"time: attention sinks{window} not modelled: they run on TE's cuDNN fused attention "
                "(FlashAttention is disabled for them), priced on its vanilla-softmax curve with the window's key "
                "span (the sink adds one logit per query row and, for dSink, one pointwise + row reduction beside "
                "the backward's dO.O row sum: cudnn-frontend scaled_dot_product_flash_attention.h); no public cuDNN "
                "training measurement with sinks (a fused Triton kernel's backward with sinks is within 1% of "
                "without, ROCm/aiter PR 1576)")
    if full_recompute_inert(plan):
        add("training.recompute.granularity", "full",
            "time, memory: a hybrid (Mamba) stack recomputes no layer under full granularity in megatron-core 0.16.1 "
            "(ssm/mamba_block.py MambaStack has no checkpointed forward): priced as no recompute; Megatron-LM "
            "118933a859 (2026-05-14) and later recompute it")
    if module_offload_inert(plan):
        add("training.offload.activation_modules", ",".join(t.offload.activation_modules),
            "time, memory: a hybrid (Mamba) stack offloads nothing in megatron-core 0.16.1 (models/mamba/mamba_model.py "
            "never opens a fine-grained offload chunk): priced as no offloading; Megatron-LM 92d5c1f4d1 (2026-04-09) "
            "and later offload it")
    if t.recompute.granularity == "op" and plan.framework != "torchtitan":
        add("training.recompute.granularity", "op", "time: per-op SAC priced as re-running the non-matmul ops")
    if m.is_moe and t.moe_expert_rank_capacity_factor is not None:
        add("training.moe_expert_rank_capacity_factor", t.moe_expert_rank_capacity_factor,
            "time: the static-budget HybridEP path (no per-layer device sync, grouped GEMMs over capacity-padded "
            "buffers) priced as the dropless dispatcher unless CUDA graphs capture it; the paged stash's copies "
            "not priced")
    if m.is_moe and not t.moe_router_force_load_balancing:
        pass  # balanced routing is the model's assumption (stated in moe_routing / dryrun docs)
    return out


def unmodelled_memory_flags(plan: Plan) -> list[UnmodelledFlag]:
    """The plan's settings the memory model (``projection/memory/estimate.py``) does not model, one
    warning each, for the dry run and the measured path alike (the memory notes say the same)."""
    t = plan.training
    out: list[UnmodelledFlag] = []
    if plan.framework != "torchtitan" and t.cuda_graph_impl == "local" and "full_iteration" in t.cuda_graph_scope:
        out.append(UnmodelledFlag(flag="training.cuda_graph_scope", value="full_iteration",
                                  effect="memory: blocks the caching allocator cannot reuse inside the capture "
                                         "(freed with another stream's use pending) not counted "
                                         "(memory.paged_stash)"))
    elif plan.framework != "torchtitan" and t.cuda_graph_impl != "none":
        # the graphs' pools are counted as the eager schedule holds (memory.mcore: TE >= 2.7 reuses the static
        # inputs / outputs by the schedule order); what is not counted is the pools kept beside the step
        out.append(UnmodelledFlag(flag="training.cuda_graph_impl", value=t.cuda_graph_impl,
                                  effect="memory: graph pools counted as the eager schedule's activations; "
                                         "the pools kept through the optimizer step not counted"))
    if plan.framework != "torchtitan" and t.offload.weights:
        out.append(UnmodelledFlag(flag="training.offload.weights", value="True",
                                  effect="memory: offloaded weights still counted on the GPU"))
    if t.precision == "fp4":
        out.append(UnmodelledFlag(flag="training.precision", value="fp4",
                                  effect="memory: NVFP4 weight / activation copies counted as bf16"))
    return out
