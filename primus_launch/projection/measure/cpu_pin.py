"""Cores of a measuring process on the CPU: one set per rank, as the real runs bind their ranks.

The real 2-rank runs (:mod:`.realrun`, ``pin=True``) and the link workers (:mod:`.localhw`) bind
rank ``r`` to its own core(s), as ``torchrun``'s ``--local-ranks-filter`` / NUMA binding or
``numactl`` does on a GPU node, so a rank's thread resumes on the core it slept on.  The
world-size-1 measurement (:func:`~.upscale.measure_pieces`) is rank 0 of such a run and is pinned
the same way for the duration of the measurement (:func:`pinned`).

Why: on the CPU a piece blocks where its layer's collectives block (:mod:`.sync_points`, 2 ms
sleeps); unpinned, the thread wakes on whichever core is free and resumes with another core's
caches, which a real run's bound rank never does.  Binding alone did not remove the spread of
such pieces (``scripts/measure_noise.py --pin both``, RESULTS.md section of block
MEASURE_NOISE_FLOOR: 5 of the 11 out-of-bound measurements at 629feed were bound); the noise floor
that blocks as the piece does (``timing``, ``probe_blocks``) is what judges them.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator


def rank_cores(rank: int, threads: int = 1) -> set[int]:
    """The cores of rank ``rank`` running ``threads`` threads: the ``threads`` allowed cores
    after the first ``rank * threads`` (cyclic over the process's allowed set)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[(rank * threads + i) % len(cpus)] for i in range(max(1, threads))}


def pin_rank(rank: int, threads: int = 1) -> None:
    """Bind the calling thread (and the threads it starts later) to :func:`rank_cores`; no-op
    where the OS has no ``sched_setaffinity``."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, rank_cores(rank, threads))


@contextlib.contextmanager
def pinned(threads: int = 1) -> Iterator[None]:
    """The calling thread bound to rank 0's cores (:func:`pin_rank`) for the block, its affinity
    restored after."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    pin_rank(0, threads)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
