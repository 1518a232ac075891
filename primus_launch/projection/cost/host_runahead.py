"""The backward pass's host run-ahead across layers: host launch time is exposed per pass, not per layer.

Between two host-device syncs the CPU only queues work: kernel launches return before the kernel runs (CUDA C
Programming Guide, "Asynchronous Concurrent Execution"), up to a driver queue of about 1,024 pending launches (not
a documented figure: the one commonly reported; the host blocks in ``cudaLaunchKernel`` once it is full), and a
CUDA-graph replay is one launch whatever it runs.  The backward of a
Megatron-Core MoE stack has no such sync: the token dispatcher's device-to-host wait (``tokens_per_expert``
``.cpu()`` / ``.tolist()``, HybridEP's ``num_permuted_tokens is None`` "will cause a CPU sync",
Megatron-LM d98e8a64 ``transformer/moe/token_dispatcher.py`` ``_HybridEPManager.setup_metadata``) runs in the
forward only; the backward reuses the split sizes kept on the host (TE ``GroupedLinear`` saves ``m_splits``;
the all-to-all / HybridEP combine's backward is a dispatch with the forward's handle).  So in the backward the
host runs ahead through a GPU-heavy layer (a CUDA-graphed Mamba or attention layer: one launch, milliseconds of
GPU work) and banks launches for the host-heavy MoE layer after it (backward order ``E M E M ...`` of a forward
``... M E M E``): over the pass the GPU waits only for ``max(0, sum_l n_l H_l - sum_l n_l G_l)`` (the
:func:`launch_bound_seconds <primus_launch.projection.cost.host_sync.launch_bound_seconds>` recurrence over a
whole pass whose layers alternate, the queue never full: a MoE layer's backward launches a few hundred kernels),
not ``sum_l n_l max(0, H_l - G_l)`` (each layer on its own, the host work added where the neighbouring layers'
GPU is busy anyway).  ``n_l``: layers of kind ``l`` in the stack (the hybrid pattern and its MTP depths),
``H_l`` / ``G_l``: host / GPU seconds of one backward of it.

The pooled excess goes back to the layer kinds in proportion to their own excess ``n_l max(0, H_l - G_l)``,
so each kind's backward stays >= its GPU work and the stack's sum is the pooled one.  Not pooled (the
per-layer form kept) where the backward does run a sync: the MoE forward re-run in the backward (full
recompute, or ``moe`` among the selective-recompute modules: the recomputed dispatch waits on the host again)
and Megatron's 1F1B EP overlap (``--overlap-moe-expert-parallel-comm``: a forward with its sync interleaved
with each backward).  The forward is not pooled: its sync drains the queue once per MoE layer and the
host-heavy expert launches come right after it (:meth:`layer_ops.LayerOps.times`).  Under PP the stack's mix
stands for each stage's (the hybrid rows measured are PP 1).

Checked against Megatron-Bridge PR #6056 (Nemotron 3 Super BF16 on 64 B300, ranks on the 4.6 GHz priority
cores vs unpinned at the 2.3 GHz base: 744 / 684 TFLOP/s/GPU, 1.088): ``scripts/b300_super_probe.py --section
host``."""

from __future__ import annotations

from primus_launch.projection.layer_times import PassTimes


def pooled_backward(kinds: dict[str, tuple[int, PassTimes, float, float]]) -> dict[str, float]:
    """Per layer kind, its backward input-grad seconds with the host exposure pooled over the pass.

    ``kinds``: kind -> (layers of that kind ``n``, its GPU-only pass times, its backward host seconds ``H``,
    the backward host excess it was charged alone ``x = max(0, H - G)`` with ``G = bwd_input_s + bwd_weight_s``).
    Returns kind -> ``bwd_input_s + x r`` with ``r = max(0, sum n H - sum n G) / sum n x`` (0 when no kind is host-bound)."""
    total_x = sum(n * x for n, _, _, x in kinds.values())
    if total_x <= 0:
        return {k: t.bwd_input_s + x for k, (_, t, _, x) in kinds.items()}
    pooled = max(0.0, sum(n * (h - t.bwd_input_s - t.bwd_weight_s) for n, t, h, _ in kinds.values()))
    r = pooled / total_x
    return {k: t.bwd_input_s + x * r for k, (_, t, _, x) in kinds.items()}
