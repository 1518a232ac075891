"""Measured figures the memory verdict stands on (data; regenerate, do not edit by hand).

``BANDS``: the spread of ``published / projected - 1`` over the published peak-memory measurements
that ``scripts/validate_memory.py`` compares (TorchTitan rows: max reserved; Megatron-LM functional
tests: max allocated of the last rank), per framework: the 10th and 90th percentiles (linear
interpolation), the rows' count, median and extremes.  ``RESERVED_OVER_ALLOCATED``: the median
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

#: framework -> (low, high, rows, median, min, max) of published / projected - 1
BANDS = {
    'megatron': (-0.0176, 0.1421, 11, 0.0312, -0.0232, 0.3152),
    'torchtitan': (-0.0416, 0.0701, 24, -0.0112, -0.0505, 0.1224),
    'all': (-0.0318, 0.088, 35, 0.0122, -0.0505, 0.3152),
}
