"""The CPU allocator of a measuring process: freed memory kept, as CUDA's caching allocator keeps it.

PyTorch has no caching allocator on the CPU: every tensor is a glibc ``malloc``.  A block above
``M_MMAP_THRESHOLD`` (128 KiB at start, then raised by glibc's dynamic rule each time an mmapped
block is freed, up to 32 MiB) is mmapped afresh and its pages faulted in and zeroed by the kernel
on first touch; freed memory at the top of the heap goes back to the OS above ``M_TRIM_THRESHOLD``
(``mallopt(3)``, glibc ``malloc/malloc.c``).  How many of a layer's activations fault therefore
depends on what the process allocated before -- a fresh real-run rank, the long-lived measuring
process and a link worker each see different costs for the same layer, and the faults' system
time counts in the thread CPU time the pieces are timed in.  ``scripts/piece_conditions.py``
prints the figures on this machine: the validation's dense layer (hidden 256, sequence 256,
micro-batch 2) in a fresh process, per forward + backward, with glibc's defaults and with the
thresholds fixed here.

On a GPU none of this happens (the caching allocator reuses its blocks), so the CPU stand-in for
a GPU keeps freed memory too: :func:`keep_freed_memory` fixes ``M_MMAP_THRESHOLD`` at glibc's
largest value (which also turns the dynamic rule off) and ``M_TRIM_THRESHOLD`` at 1 GiB, in the
measuring process (:func:`~.upscale.measure_pieces` on the CPU) and in every process it compares
with (the real runs' ranks, :mod:`.realrun`; the link workers, :mod:`.localhw`).  The cost is
memory: up to the thresholds, freed blocks stay with the process instead of the OS.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache

#: ``mallopt`` parameters (glibc ``malloc.h``)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: glibc's largest accepted mmap threshold on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``: 4 MiB x sizeof(long))
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 1 << 30


#: glibc's initial thresholds (``DEFAULT_MMAP_THRESHOLD_MIN``, ``DEFAULT_TRIM_THRESHOLD``: 128 KiB)
GLIBC_INITIAL_BYTES = 128 << 10


def set_thresholds(mmap_bytes: int, trim_bytes: int) -> bool:
    """``mallopt(M_MMAP_THRESHOLD, mmap_bytes)`` and ``mallopt(M_TRIM_THRESHOLD, trim_bytes)`` for this
    process; either fixed value turns glibc's dynamic rule off (``mallopt(3)``).  True when both
    were accepted, False where the C library has no ``mallopt`` (not glibc) or refused them."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok_mmap = mallopt(M_MMAP_THRESHOLD, mmap_bytes) == 1
    ok_trim = mallopt(M_TRIM_THRESHOLD, trim_bytes) == 1
    return ok_mmap and ok_trim


@lru_cache(maxsize=1)
def keep_freed_memory() -> bool:
    """Fix glibc's ``M_MMAP_THRESHOLD`` (:data:`MMAP_THRESHOLD_BYTES`) and ``M_TRIM_THRESHOLD``
    (:data:`TRIM_THRESHOLD_BYTES`) for this process (module docstring, :func:`set_thresholds`);
    True when both were accepted.  Once per process."""
    return set_thresholds(MMAP_THRESHOLD_BYTES, TRIM_THRESHOLD_BYTES)
