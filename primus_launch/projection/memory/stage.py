"""One pipeline stage's memory assembled from its parts (shared by the Megatron and TorchTitan models).

``allocated = parameters + gradients + optimizer + activations + transient`` (what
``torch.cuda.memory_allocated`` shows at the peak); the caching allocator's reserved peak runs above it
by :data:`~primus_launch.projection.memory.band_data.RESERVED_OVER_ALLOCATED` of the allocated peak (the
median ``max reserved / max allocated - 1`` of published Megatron logs, :mod:`memory.band_data`); the
bytes outside the allocator (:mod:`memory.outside`) are added per plan by
:func:`estimate.estimate_memory`.  No margin is stacked on top: the error band
(:mod:`memory.verdict`) says how far the point estimate may be off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol

from primus_launch.projection.memory.activations import LayerActivations
from primus_launch.projection.memory.band_data import RESERVED_OVER_ALLOCATED
from primus_launch.projection.memory.inflight import in_flight_closed_form  # noqa: F401  (re-exported)
from primus_launch.projection.result import StageMemory

#: the caching allocator's reserved peak over its allocated peak, Megatron (fraction of the allocated peak).
#: Megatron-Bridge's recipes launch with ``expandable_segments:True`` (``COMMON_RECIPE_ENV_VARS``); under it an
#: out-of-memory retry unmaps every page inside a free block of every stream (``release_blocks`` -> ``unmap_block``):
#: of a reserved peak above this (Nemotron 3 Super on 64 H100: +17.5 / +21.1 %) only the partly used pages at free
#: blocks' ends are held when an allocation fails, so the verdict keeps this fraction (MEMORY.md round 34,
#: ``tests/caching_allocator.py`` ``releasable``)
ALLOCATOR_FRAGMENTATION = RESERVED_OVER_ALLOCATED
#: TorchTitan's model (memory.titan): the default stream's own fragmentation, 10 % of the dynamic (activation +
#: transient) memory -- a stated guess no source pins (the published rows leave default-stream gaps of a
#: fixed size between eager and compiled twins, scripts/validation/MEMORY.md round 10); FSDP2's side-stream
#: pools are added beside it (``side_pools``, memory.titan.fsdp2_stream_pools).  The verdict keeps all of it
#: (none released): the one published figure of what torch's caching allocator cannot release (an OOM message's
#: "reserved but unallocated", taken after ``release_cached_blocks``; Primus #349, ROCm, no expandable segments) is
#: 5.7 % of the dynamic bytes, and any held fraction below 10 % turns three DeepSeek-V3 B200 OOMs ``tight``
#: (MEMORY.md round 20, ``scripts/probe_unreleasable_frag.py``).  A replay of the traced step through torch's allocator
#: rules (``tests/caching_allocator.py``, MEMORY.md round 22, ``scripts/probe_allocator_replay.py``) finds that
#: fragmentation a few GiB whatever the depth, not a fraction of the activations; it fits the B200 rows better and the
#: H100 rows no better, so the guess stays.  The B200-high / H100-low split of the published reserved peaks is this
#: term's shape (measured reserved over allocated stays 8-13 GiB however large the activations), not the allocator
#: configuration: runs with expandable segments fall on both sides (MEMORY.md round 25,
#: ``scripts/probe_titan_launch_split.py``)
TITAN_DYNAMIC_FRAGMENTATION = 0.10


@dataclass(frozen=True)
class MeasuredActivations:
    """Per-GPU activation bytes of one micro-batch measured on real pieces
    (:mod:`primus_launch.projection.measure`), used in place of the tensor-list model's per-layer
    and output figures; stages, recompute, in-flight micro-batches and the rest as modelled."""

    dense: LayerActivations
    moe: Optional[LayerActivations]
    output: tuple[float, float]  # (kept, transient) of the final norm + output layer + loss
    note: str


class MeasuredTitanBlocks(Protocol):
    """What the TorchTitan model (:func:`memory.estimate.titan_stage_parts`) reads of measured activations
    (:class:`projection.measure.measured_memory.MeasuredTitanActivations`, not imported: the measured path imports
    this package): the blocks' kept bytes and the head's, in place of the modelled ones."""

    def titan_layers(self, layer_of: dict, ck_of: dict) -> tuple[dict, dict]:
        """The model's per-kind ``TitanLayer`` s (without / with checkpointing) with the measured kinds replaced."""

    def titan_head(self, hn: float, hin: float, logp: float) -> tuple[float, float, float]:
        """The model's (final-norm kept, lm_head input, log-probabilities) scaled to the measured total."""


def stage_report(rank: int, weights: float, grads: float, optim: float, activations: float, transient: float,
                 in_flight: int, nparams: float, framework: str = "torchtitan", side_pools: float = 0.0,
                 workspaces: float = 0.0, releasable: float = 0.0) -> StageMemory:
    """A stage's :class:`StageMemory`: allocated = the parts; reserved = allocated x (1 +
    :data:`ALLOCATOR_FRAGMENTATION`) for Megatron, allocated + :data:`TITAN_DYNAMIC_FRAGMENTATION` of the
    dynamic part for TorchTitan, plus ``side_pools``: bytes the allocator keeps reserved for other streams
    and not allocated at the peak (TorchTitan: FSDP2's all-gather copy-in and reduce-scatter streams,
    :func:`memory.titan.fsdp2_stream_pools`); the memory outside the allocator is added per plan
    (:func:`with_outside`); ``workspaces`` (GEMM workspaces in the allocator, :mod:`memory.workspaces`) are
    part of the allocated peak, reported inside ``transient_bytes`` and as ``workspace_bytes`` (outside
    TorchTitan's dynamic fragmentation: allocated once, at the first GEMM).

    ``releasable``: of that reserve, the bytes held as free cached segments that the caching allocator
    releases before it raises out of memory (:mod:`memory.verdict`; TorchTitan: the free part of FSDP2's
    side-stream pools, at most ``side_pools``), kept as ``releasable_bytes``: the verdict compares
    ``total_bytes - releasable_bytes`` (:func:`oom_peak`); the reported reserved peak keeps them."""
    transient = transient + workspaces
    allocated = weights + grads + optim + activations + transient
    if framework == "megatron":
        frag = ALLOCATOR_FRAGMENTATION * max(0.0, allocated)
    else:
        # the workspaces are allocated once and kept: not part of the dynamic pool that fragments
        frag = TITAN_DYNAMIC_FRAGMENTATION * max(0.0, activations + transient - workspaces)
    frag += max(0.0, side_pools)
    return StageMemory(
        stage=rank, parameters_bytes=int(weights), gradients_bytes=int(grads), optimizer_bytes=int(optim),
        activations_bytes=int(activations), transient_bytes=int(transient), reserve_bytes=int(frag),
        total_bytes=int(allocated + frag), microbatches_in_flight=in_flight, num_parameters=nparams,
        allocated_bytes=int(allocated), allocator_reserve_bytes=int(frag), outside_allocator_bytes=0,
        workspace_bytes=int(workspaces), releasable_bytes=int(min(max(0.0, releasable), max(0.0, side_pools))))


def oom_peak(st: StageMemory) -> int:
    """What the verdict compares with the capacity for one stage (:mod:`memory.verdict`): its reserved peak
    plus the memory outside the allocator (``total_bytes``) less the free cached segments the caching
    allocator gives back on a failed allocation (``releasable_bytes``)."""
    return st.total_bytes - st.releasable_bytes


def with_outside(st: StageMemory, outside: float) -> StageMemory:
    """``st`` with ``outside`` bytes held outside the caching allocator added to its reserve and total."""
    return st.model_copy(update=dict(outside_allocator_bytes=int(outside),
                                     reserve_bytes=st.allocator_reserve_bytes + int(outside),
                                     total_bytes=st.allocated_bytes + st.allocator_reserve_bytes + int(outside)))
