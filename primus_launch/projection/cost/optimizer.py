"""The optimizer step of one GPU, after the pipeline.

Memory-bound Adam streaming :func:`optimizer_bytes_per_param` bytes per parameter held (after
distributed-optimizer / FSDP sharding) at ``hbm_bw`` times the fitted HBM efficiency of the GPU's
architecture (``calibration.HBM_BW_EFFICIENCY`` without one): per parameter the gradient read twice,
the master weights and both moments read and written, the bf16 model weights written, in the state
dtypes of a precision-aware optimizer (34 B with fp32 states, ``calibration.ADAM_BYTES_PER_PARAM``; 38 in Megatron
without the precision-aware optimizer, below).
A fraction ``offload.optimizer_fraction`` runs on the host CPU at ``CPU_ADAM_BYTES_S``, with its
gradients down and parameters up the host link (6 B per parameter), whichever is slower.

The gradient-norm read is Megatron core_v0.16.1 ``clip_grads.get_grad_norm_fp32`` (``multi_tensor_l2norm`` over
the main gradients), run by ``MixedPrecisionOptimizer.step`` only when ``--clip-grad`` > 0 (``training.clip_grad``).
The bf16 write is the precision-aware optimizer's in-kernel one (TE ``FusedAdam`` with master weights); without it
Megatron copies the fp32 main parameters into the bf16 model / parameter buffer in a separate pass
(``distrib_optimizer.py`` / ``optimizer.py`` ``_copy_main_params_to_model_params``: the master read again, + 4 B).
The other per-iteration passes over the (unsharded) gradient buffer and the step's scalar collectives:
``cost/step_extras.py``.

Chunked optimizer-state offload (Megatron-LM dev ``--chunked-optimizer-state-offload``, fraction ``f`` =
``offload.optimizer_state_fraction``; ``memory/optimizer_offload.py`` for what moves): the step still runs on
the GPU, but the selected masters (``M = f x master bytes x held``) and moments (``S = f x moment bytes x
held``) come up the host link every step and go back down after it.  Megatron-LM dev d48bd6be
``chunked_optimizer_state_offload.py`` / ``training.py``: the H2D of every master and of the first state
chunk is enqueued when gradient finalization starts (overlapping the exposed DP tail, ``overlap_s``), the
step waits for all masters (``_wait_master_h2d``), then each chunk's update waits for its H2D while the next
chunk's H2D and the previous chunk's D2H run on their own streams; the D2H of the last chunks and of the
masters (after the parameter copy, into the next forward) is not waited for.  The host link runs both
directions at once (``host_link_bw`` is per direction), so the H2D stream is the critical path:
``offload_s = max(max(0, M / bw - overlap) + gpu_step, (M + S) / bw - overlap)``, replacing ``gpu_step``.
Not modelled: the chained dependency of a chunk's H2D on the D2H two chunks back (at most about half a
GPU chunk update per chunk more), and the master D2H's share of the host link with fine-grained activation
offloading during the next forward.

Megatron's per-iteration statistics, one more read of what the GPU holds each (:func:`stat_bytes_per_param`):
``--log-params-norm`` (Megatron-LM ``training.py`` calls ``calc_params_l2_norm`` every iteration, core_r0.16.0:
``multi_tensor_l2norm`` over the fp32 ``main_param`` copies -- the distributed optimizer's shards -- and a
one-element all-reduce) reads the main parameters; ``--log-num-zeros-in-grad`` (megatron-core 0.16.1
``optimizer.py`` ``count_zeros`` in every ``step``: ``clip_grads.count_zeros_fp32``, one ``count_nonzero`` per
gradient) reads the main gradients.  Their kernel launches (a few per parameter tensor) are not priced.
"""

from __future__ import annotations

from primus_launch.plan import STATE_DTYPE_BYTES, Plan
from primus_launch.projection.cost import calibration as cal
from primus_launch.projection.hardware.gpus import GPUSpec


def _state_bytes(plan: Plan, dtype_field: str) -> int:
    """Bytes per element of one optimizer state (``main_grads_dtype``, ``main_params_dtype``, ``exp_avg_dtype``,
    ``exp_avg_sq_dtype``): its dtype under the precision-aware optimizer, fp32 otherwise."""
    t = plan.training
    return STATE_DTYPE_BYTES[getattr(t, dtype_field)] if t.precision_aware_optimizer else 4


def optimizer_bytes_per_param(plan: Plan) -> float:
    """Bytes the Adam step streams per (sharded) parameter (module doc; 34 with fp32 states): one gradient read
    fewer with ``--clip-grad 0`` (no norm), one more master read in Megatron without the precision-aware optimizer
    (its separate main-to-model copy: 38)."""
    t = plan.training
    if t.optimizer != "adam":
        return 14.0
    g, mp, m1, m2 = (_state_bytes(plan, f) for f in ("main_grads_dtype", "main_params_dtype", "exp_avg_dtype",
                                                      "exp_avg_sq_dtype"))
    norm = g if t.clip_grad > 0 else 0
    copy = mp if plan.framework == "megatron" and not t.precision_aware_optimizer else 0
    return g + norm + 2 * mp + 2 * m1 + 2 * m2 + 2 + copy


def stat_bytes_per_param(plan: Plan) -> float:
    """Bytes per held parameter that ``--log-params-norm`` / ``--log-num-zeros-in-grad`` read each iteration
    (module doc): the main parameter and the main gradient, in the precision-aware optimizer's dtypes (fp32
    otherwise)."""
    t = plan.training
    return (_state_bytes(plan, "main_params_dtype") * t.log_params_norm
            + _state_bytes(plan, "main_grads_dtype") * t.log_num_zeros_in_grad)


def state_offload_bytes(plan: Plan) -> tuple[float, float]:
    """(master, moment) bytes per held parameter that chunked optimizer-state offload moves up the host link
    each step (module doc): ``optimizer_state_fraction`` x the master copy (``memory.mcore`` ``mcore_opts``:
    its ``main_params`` bytes) and x the moments, split by ``memory.optimizer_offload.bundle_bytes``."""
    from primus_launch.projection.memory.mcore import mcore_opts
    from primus_launch.projection.memory.optimizer_offload import bundle_bytes

    t = plan.training
    f = t.offload.optimizer_state_fraction
    if f <= 0:
        return 0.0, 0.0
    o = mcore_opts(plan)
    master, moments = bundle_bytes(precision=t.precision, optimizer=t.optimizer, main_params=o.main_params,
                                   exp_avg=o.exp_avg, exp_avg_sq=o.exp_avg_sq)
    return f * master, f * moments


def stream_bw(spec: GPUSpec) -> float:
    """Bytes per second a memory-bound pass over a buffer streams on ``spec`` (module doc): ``hbm_bw`` times the
    fitted HBM efficiency of its architecture (``compute.hbm_eta``), ``calibration.HBM_BW_EFFICIENCY`` without one."""
    from primus_launch.projection.cost.compute import hbm_eta

    return spec.hbm_bw * (hbm_eta(spec.arch)[0] if spec.arch else cal.HBM_BW_EFFICIENCY)


def optimizer_step_s(plan: Plan, spec: GPUSpec, held: float, overlap_s: float = 0.0) -> float:
    """Seconds of the optimizer step on ``held`` parameters of one GPU (module doc); ``overlap_s``: the
    exposed DP tail before it, which the chunked offload's first host-to-device copies overlap."""
    t = plan.training
    opt_bytes = optimizer_bytes_per_param(plan) if t.optimizer == "adam" else 14
    hbm = stream_bw(spec)
    off = t.offload.optimizer_fraction
    opt = held * (1 - off) * opt_bytes / hbm + held * stat_bytes_per_param(plan) / hbm
    if off > 0:   # host-side Adam on the offloaded share; grads down, params up the host link
        opt += held * off * max(opt_bytes / cal.CPU_ADAM_BYTES_S, 6.0 / spec.host_link_bw)
    mb, sb = state_offload_bytes(plan)
    if mb or sb:  # chunked state offload: the H2D stream ahead of the GPU step (module doc)
        m_s, s_s = held * mb / spec.host_link_bw, held * sb / spec.host_link_bw
        opt = max(max(0.0, m_s - overlap_s) + opt, m_s + s_s - overlap_s)
    return opt
