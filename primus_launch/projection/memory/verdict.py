"""The memory verdict: a point estimate with its measured error band, and three answers.

The band (:mod:`memory.band_data`) is the spread of ``published / projected - 1`` of the published
peak-memory measurements the validation compares, for the plan's framework (10th to 90th percentile):
the real peak of a run projected at ``P`` lies in ``[P (1 + low), P (1 + high)]`` as often as the
validation's runs did.  With ``C`` the device's capacity less the user's ``--memory-margin``:

- ``fits``: ``P (1 + high) <= C`` (even the band's top fits);
- ``does not fit``: ``P (1 + low) > C`` (even the band's bottom does not);
- ``tight``: the capacity lies inside the band.

The band scales the allocator's part of ``P``; the memory outside the allocator (CUDA context, NCCL,
DeepEP / HybridEP buffers, :mod:`memory.outside`) is added as estimated.

``P`` is what cannot be given back when an allocation fails (``MemoryReport.oom_peak_bytes``,
:func:`memory.stage.oom_peak`), not the reserved peak ``memory_stats`` reports (``peak_bytes_per_gpu``,
which the published reserved peaks and the band are measured on).  Torch's caching allocator raises out
of memory only after it has given back every free cached segment of every stream: ``DeviceCachingAllocator::
malloc`` (pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp``, read at 001074d2; torch >= 2.5 passes a
mempool id, ``release_cached_blocks(context, {0, 0})``, the same retry) tries ``get_free_block`` (the
requesting stream's own free blocks), then ``alloc_block`` (cudaMalloc, or with ``expandable_segments:True``
mapping pages into that stream's segment), then ``release_available_cached_blocks`` (oversize blocks,
a no-op at the default ``max_split_size``), then ``release_cached_blocks``: ``synchronize_and_free_events``
(blocks freed while another stream still used them), ``release_blocks`` over the large and small pools --
which hold every stream's blocks -- ``cudaFree``-ing each free block that is not split (a whole free
segment) and ``unmap_block``-ing the free pages of expandable segments, then a last ``alloc_block``; only
if that fails does it raise ("the only remaining cached memory is split from a larger block that is
partially in-use").  So the reserve that counts is the fragmentation inside partly used segments; free
cached segments, FSDP2's side-stream pools between their high-water marks (:func:`memory.titan.
fsdp2_stream_pools`: at the loss backward the reduce-scatter stream holds no gradient) among them, are
given back.  What the model releases (``StageMemory.releasable_bytes``): TorchTitan's free side-stream
pools; not its 10 % default-stream fragmentation (a stated guess that does not say which part is whole
free segments), nor Megatron's reserved-over-allocated ratio (published logs' reserved peaks, not split
into free segments and gaps), nor CUDA-graph private pools (released only once their graphs are
destroyed).  Holds with and without expandable segments (Primus c4c083de's launchers do not set
``PYTORCH_CUDA_ALLOC_CONF``; torchtitan's ``run_train.sh`` does): a stream's pool that holds no allocation
is whole free segments either way.

No margin is stacked on top of the point estimate; ``--memory-margin`` (default 0) is the user's only
knob.  ``fits`` in the report stays a bool: true for ``fits`` and ``tight``.
"""

from __future__ import annotations

from typing import Literal

from primus_launch.projection.memory.band_data import BANDS

Verdict = Literal["fits", "tight", "does not fit"]
MIN_ROWS = 5


def band_for(framework: str) -> tuple[float, float, int, str]:
    """(low, high, rows, source) of the error band for ``framework`` (the pooled band when the
    framework's own has fewer than :data:`MIN_ROWS` rows).  The source names the script that prints the band, not
    its ``--write`` form (band_data.COMMAND): a note in every answer told users to rewrite the installed data file."""
    key = framework if framework in BANDS and BANDS[framework][2] >= MIN_ROWS else "all"
    low, high, n = BANDS[key][:3]
    return low, high, n, f"{key}: {n} measured configurations, scripts/memory_band.py"


def verdict(peak: float, capacity: float, low: float, high: float, margin: float = 0.0,
            outside: float = 0.0) -> Verdict:
    """``fits`` / ``tight`` / ``does not fit`` of a projected ``peak`` (bytes compared with the capacity: the
    report's ``oom_peak_bytes``,
    of which ``outside`` lie outside the caching allocator: the band, measured on allocator peaks,
    scales the rest) against ``capacity (1 - margin)``."""
    usable = capacity * (1.0 - margin)
    inside = peak - outside
    if inside * (1.0 + high) + outside <= usable:
        return "fits"
    if inside * (1.0 + low) + outside > usable:
        return "does not fit"
    return "tight"
