"""Measured figures the memory verdict stands on (data; regenerate, do not edit by hand).

``BANDS``: the spread of ``published / projected - 1`` over the published peak-memory measurements
that ``scripts/validate_memory.py`` compares (TorchTitan rows: max reserved; Megatron-LM functional
tests: max allocated of the last rank), per framework, one error per measured configuration (rows of one
source that differ only in the number format or TP's overlap count once, at their median): the 10th and 90th
percentiles (linear interpolation), the configurations' count, median and extremes.  ``RESERVED_OVER_ALLOCATED``: the median
``max reserved / max allocated - 1`` of published Megatron ``report_memory`` lines
(``RESERVED_PAIRS``, "[Rank N] (after K iterations) memory (MB) | ... max allocated: A | ... |
max reserved: R", found in public repositories with the search ``memory (MB) | allocated:``).

Regenerate with::

    PYTHONPATH=. python scripts/memory_band.py --write
"""

COMMAND = "PYTHONPATH=. python scripts/memory_band.py --write"

#: (max allocated MB, max reserved MB) of published Megatron logs
RESERVED_PAIRS = ((3869.26, 4020.0), (44819.13, 45930.0), (2589.14, 2608.0), (85667.84, 89304.0),
                  (69454.76, 73472.0), (20931.01, 21534.0))
RESERVED_OVER_ALLOCATED = 0.0339

#: framework -> (low, high, configurations, median, min, max) of published / projected - 1
BANDS = {
    'megatron': (-0.0176, 0.0383, 135, 0.0114, -0.0598, 0.1053),
    'torchtitan': (-0.0699, 0.0753, 49, 0.0334, -0.1659, 0.2438),
    'all': (-0.0257, 0.0558, 184, 0.0156, -0.1659, 0.2438),
}
