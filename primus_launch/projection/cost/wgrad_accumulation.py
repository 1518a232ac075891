"""Megatron's weight-gradient accumulation without fusion (``--no-gradient-accumulation-fusion``,
``training.gradient_accumulation_fusion = False``): its time per micro-batch and its gradient transient.

With the fusion (Megatron's default where APEX's ``fused_weight_gradient_mlp_cuda`` or Transformer Engine is
installed), a linear's weight-gradient GEMM accumulates straight into the fp32 (or bf16) ``main_grad`` buffer:
megatron-core 0.16.1 ``tensor_parallel/layers.py``
``LinearWithGradAccumulationAndAsyncCommunication.backward`` calls ``wgrad_gemm_accum_fp32`` /
``wgrad_gemm_accum_fp16`` (GEMM with beta = 1) and hands autograd a dummy gradient
(``grad_added_to_main_grad = True``); Transformer Engine's modules do the same under
``fuse_wgrad_accumulation=config.gradient_accumulation_fusion`` (``extensions/transformer_engine.py``
``TELinear`` / ``TELayerNormColumnParallelLinear`` / ``TEGroupedLinear``).  Without it the GEMM writes a fresh
gradient in the parameter's dtype, and the backward hook moves it into ``main_grad``:

- Megatron DDP (``distributed/distributed_data_parallel.py`` ``_make_backward_post_hook``):
  ``param.main_grad.add_(param.grad.data); param.grad = None`` -- one kernel per weight and micro-batch
  reading the gradient (``A`` bytes per element) and reading + writing ``main_grad`` (``2 G``);
- Megatron-FSDP with sharded gradients (``optim_grads`` / ``optim_grads_params``;
  ``distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py`` ``_grad_acc``, ``gbuf.is_data_distributed``):
  ``param.main_grad.copy_(param.grad)`` into the bucket about to be reduce-scattered -- ``A + G`` bytes
  (the fused path's GEMM overwrites that bucket, ``overwrite_main_grad = True``);
- torch FSDP2 (``--use-torch-fsdp2``, which ``megatron/training/arguments.py`` validate_args allows only without
  the fusion, core_v0.16.1): FSDP2 reduce-scatters the fresh gradients themselves, nothing added here.

:func:`bytes_per_weight_element` is that traffic per weight element, ``A`` = 4 for fp32 parameters else 2,
``G`` = the gradient buffer's element (4 with ``grad_reduce_in_fp32``, else 2); the roofline
(``cost/layer_ops.py`` ``LayerOps.gemm``) prices it per weight GEMM of every micro-batch as a bandwidth-bound kernel
(``cost/compute.py`` ``elementwise_time``, the elementwise HBM efficiency of the rest of the model) in the
weight-gradient pass, one kernel per weight (per local expert of a grouped GEMM: one parameter each).
The MoE router's gate (``moe/moe_utils.py`` ``router_gating_linear``, a plain autograd function) and the
norms never run the fused path: their ``add_`` is the same with and without the flag and is not priced here.

The memory side (:func:`grad_dtype_bytes`): the fresh gradient of a module's weights lives from its
weight-gradient GEMM to the hook, one module at a time, on top of the layer's backward temporaries
(``memory/mcore.py`` transients); the fused path hands autograd TE's shared dummy
(``get_dummy_wgrad``) instead.  TorchTitan has no such flag (FSDP2 reduce-scatters fresh gradients):
nothing here applies to it.
"""

from __future__ import annotations

from primus_launch.plan import Plan


def unfused(plan: Plan) -> bool:
    """True where ``plan`` runs Megatron's linears without gradient-accumulation fusion."""
    return plan.framework == "megatron" and not plan.training.gradient_accumulation_fusion


def grad_dtype_bytes(plan: Plan) -> int:
    """Bytes per element of the fresh weight gradient the unfused wgrad GEMM writes (the parameter's
    dtype: 4 for fp32 training, else 2); 0 with the fusion or outside Megatron."""
    if not unfused(plan):
        return 0
    return 4 if plan.training.precision == "fp32" else 2


def bytes_per_weight_element(plan: Plan) -> float:
    """HBM bytes per weight element per micro-batch of the unfused accumulation (module doc):
    ``A + 2 G`` (DDP's ``main_grad.add_``) or ``A + G`` (Megatron-FSDP's ``main_grad.copy_`` into a
    sharded-gradient bucket); 0 with the fusion or outside Megatron."""
    a = grad_dtype_bytes(plan)
    if a == 0:
        return 0.0
    t, p = plan.training, plan.parallel
    g = 4 if (t.grad_reduce_in_fp32 or t.precision == "fp32") else 2
    from primus_launch.plan.legality import effective_fsdp_impl

    if p.dp_sharding == "full" and effective_fsdp_impl(plan) == "torch_fsdp2":
        return 0.0  # torch FSDP2 reduce-scatters the fresh gradients themselves (Megatron requires the flag there)
    sharded = p.dp_sharding in ("full", "optimizer_grads")
    return float(a + (g if sharded else 2 * g))
