"""Chunked optimizer-state and master-weight offload (Megatron-LM dev ``--chunked-optimizer-state-offload``,
``--optimizer-state-offload-fraction f``, ``--optimizer-state-offload-chunk-size-mb C``; the deprecated
``--offload-optimizer-states`` = chunk 0, fraction 1).

Read from Megatron-LM dev 9050d4c5fb / d48bd6be ``megatron/core/optimizer/cpu_offloading/
chunked_optimizer_state_offload.py`` (``ChunkedOptimizerStateOffloader``), ``optimizer/optimizer.py``
(``ChainedOptimizer``) and ``training/training.py`` (``train_step``):

- **what leaves the GPU**: for the selected parameters (``_select_params_for_offload``: all at ``f = 1``,
  else optimizer parameters in order until ``f`` x the bundles' bytes, those with a master first) the master
  weight (MCore's fp32 ``main_param`` shard, or TE FusedAdam's ``state['master_param']`` incl. the int16
  remainders) and every optimizer tensor state shaped like the parameter (Adam ``exp_avg`` /
  ``exp_avg_sq``), kept in pinned host buffers between steps.  The bf16 / fp8 model weights and the
  gradient buffer stay.  Off the GPU: ``f x (master + moments) x local parameters``.
- **what comes back for the step** (``step``, after ``prefetch_for_step`` in gradient finalization): every
  selected master in one full window (``_schedule_master_h2d``: ``torch.empty_like`` per master, all
  children's at once -- ``ChainedOptimizer.prefetch_optimizer_state_for_gradient_finalization`` prefetches
  every child), and the moments chunk by chunk in two reusable staging slots per child
  (``_state_staging_slots``; ``_build_chunks`` fills a chunk greedily while its state bytes stay
  <= ``C`` MiB, a parameter larger than ``C`` alone; ``C = 0``: one chunk of all selected state).  Each
  child also prefetches its first chunk at finalization, so while child ``i`` steps (two slots) every later
  child holds one slot: staging = ``max_i [min(S_i, 2C) + sum_{j>i} min(S_j, C)]`` over the chain's
  children's selected state ``S`` (dense, then expert parameters for a MoE model: the Adam chain of
  ``get_megatron_optimizer``); the README's "about 2 x chunk per manager ... can approach 3 x chunk".
  The slots are released when a child's step ends (``_release_state_staging_slots``), the masters when
  their D2H copy has run (``offload_for_forward`` at the next ``train_step``: ``record_stream`` frees them
  after the copy, which the compute stream does not wait for).  So the step-time peak adds
  ``f x master x local + staging``, after the backward has freed the activations.

Not counted: the masters' GPU copies while their D2H copy runs during the first micro-batch's forward
(``copy time = masters / host link``, a few tens of ms) and the 256-byte alignment of each tensor in a
staging slot.
"""

from __future__ import annotations

from typing import Sequence

MIB = 1024 ** 2


def bundle_bytes(*, precision: str, optimizer: str, main_params: float, exp_avg: float,
                 exp_avg_sq: float) -> tuple[float, float]:
    """(master, moments) bytes per parameter of one offloadable bundle (module doc, "what leaves the GPU"):
    the master copy is ``main_params`` bytes (MCore's ``main_param`` or TE FusedAdam's ``master_param``; none
    in fp32 training, where the parameter is its own master), the moments every tensor state shaped like the
    parameter: Adam ``exp_avg`` + ``exp_avg_sq``, SGD its momentum buffer (``exp_avg`` bytes).  Both the step's
    memory (``memory.mcore``) and its host-link time (``cost.optimizer``) scale these by the offload fraction."""
    master = 0 if precision == "fp32" else main_params
    return master, exp_avg + (exp_avg_sq if optimizer == "adam" else 0)


def staging_bytes(child_state: Sequence[float], chunk_bytes: float) -> float:
    """Most GPU bytes of offloaded optimizer tensor state staged at once during a chained step (module doc):
    ``child_state`` the selected state bytes of each chained optimizer in step order, ``chunk_bytes`` the
    chunk target (0: one chunk of the whole selected state per child)."""
    def cap(s: float, k: int) -> float:
        return s if chunk_bytes <= 0 else min(s, k * chunk_bytes)

    return max((cap(s, 2) + sum(cap(t, 1) for t in child_state[i + 1:]) for i, s in enumerate(child_state)),
               default=0.0)


def step_restore_bytes(*, fraction: float, chunk_mb: int, master: float, moments: float,
                       local_params: Sequence[float]) -> float:
    """GPU bytes the chunked offload brings back for the optimizer step (module doc): the selected masters in
    full (``fraction x master x sum(local_params)``) plus the moments' staging (:func:`staging_bytes`) over
    the chain's children, ``local_params`` the parameters each child updates on this GPU (dense shard, expert
    shard), ``master`` / ``moments`` bytes per parameter."""
    if fraction <= 0:
        return 0.0
    state = [fraction * moments * n for n in local_params if n > 0]
    return fraction * master * sum(local_params) + staging_bytes(state, chunk_mb * MIB)
