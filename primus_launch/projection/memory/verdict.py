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

No margin is stacked on top of the point estimate; ``--memory-margin`` (default 0) is the user's only
knob.  ``fits`` in the report stays a bool: true for ``fits`` and ``tight``.
"""

from __future__ import annotations

from typing import Literal

from primus_launch.projection.memory.band_data import BANDS, COMMAND

Verdict = Literal["fits", "tight", "does not fit"]
MIN_ROWS = 5


def band_for(framework: str) -> tuple[float, float, int, str]:
    """(low, high, rows, source) of the error band for ``framework`` (the pooled band when the
    framework's own has fewer than :data:`MIN_ROWS` rows)."""
    key = framework if framework in BANDS and BANDS[framework][2] >= MIN_ROWS else "all"
    low, high, n = BANDS[key][:3]
    return low, high, n, f"{key}: {n} measured configurations ({COMMAND})"


def verdict(peak: float, capacity: float, low: float, high: float, margin: float = 0.0,
            outside: float = 0.0) -> Verdict:
    """``fits`` / ``tight`` / ``does not fit`` of a projected ``peak`` (bytes compared with the capacity,
    of which ``outside`` lie outside the caching allocator: the band, measured on allocator peaks,
    scales the rest) against ``capacity (1 - margin)``."""
    usable = capacity * (1.0 - margin)
    inside = peak - outside
    if inside * (1.0 + high) + outside <= usable:
        return "fits"
    if inside * (1.0 + low) + outside > usable:
        return "does not fit"
    return "tight"
