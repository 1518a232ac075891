"""Activations a pipeline rank holds at its peak, walked over the schedule's own order.

A forward adds the bytes its chunk keeps for one micro-batch, the backward that releases them subtracts
them (Megatron frees a micro-batch's activations after its backward); the peak of the running sum per
rank is the answer (:func:`stage_activation_peaks`).  The weights are per (rank, chunk), so pipeline
layouts whose chunks differ (the embedding or the loss counted as a layer, uneven first / last stages,
MTP on the last chunk) are walked as they are, not as an average chunk.

Orders (:mod:`primus_launch.projection.pipeline.orders`): Megatron's 1F1B and interleaved schedules
(``microbatch_group_size_per_vp_stage``), torch's GPipe, the zero-bubble schedules (released at their
weight-grad, an upper bound) and Megatron's combined 1F1B of ``--overlap-moe-expert-parallel-comm``
(``combined_1f1b_orders``: one more warm-up forward, then each steady (F, B) pair as one merged step
whose forward layers run interleaved with the backward's, megatron-core 0.16.1
``models/common/model_chunk_schedule_plan.py``: per layer, the forward's attention and MoE run while
the backward's MoE and attention are released).  During a merged step the rank holds what it held
before, plus the forward's chunk minus the backward's once both are through, plus at most one layer
of the forward beyond that: ``before + max(0, w_F - w_B) + layer_F``.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Sequence

import numpy as np

from primus_launch.projection.pipeline.orders import B, F, W, combined_1f1b_orders, schedule_orders
from primus_launch.projection.pipeline.simulate import (activations_in_flight, inflight_walk_count, same_class_count,
                                                        schedule_period)


@lru_cache(maxsize=4096)
def in_flight_closed_form(schedule: str, pp: int, vpp: int, m: int, group: int | None = None) -> tuple[float, ...]:
    """Chunk-micro-batches of activations alive at each rank's peak.

    Closed forms equal to :func:`pipeline.activations_in_flight`'s walk of the schedule order
    (``tests/test_memory.py`` checks them): 1F1B ``min(pp - r, m)``; interleaved (Megatron)
    ``min(2 (pp - r - 1) + (vpp - 1) g + 1, m vpp)`` with Megatron's micro-batch group ``g``
    (default pp: the warm-up of ``get_pp_rank_microbatches`` plus the one in its first 1F1B step);
    GPipe ``m vpp``.  Zero-bubble schedules
    are walked with ``release="W"``: the weight-gradient pass still needs the linears' inputs,
    so a micro-batch counts until its ``W`` (an upper bound).
    """
    if pp == 1:
        return (1.0,)
    if schedule == "1f1b" and vpp > 1:
        # Megatron runs its interleaved schedule whenever virtual stages are set
        # (get_forward_backward_func: forward_backward_pipelining_with_interleaving)
        schedule = "interleaved_1f1b"
    if schedule == "1f1b":
        return tuple(float(min(pp - r, m)) for r in range(pp))
    if schedule == "interleaved_1f1b":
        g = pp if group is None else group
        return tuple(float(min(2 * (pp - r - 1) + (vpp - 1) * g + 1, m * vpp)) for r in range(pp))
    if schedule == "gpipe":
        return tuple(float(m * vpp) for _ in range(pp))
    return tuple(activations_in_flight(schedule, pp, vpp, m, release="W"))


def _walked(schedule: str, pp: int, vpp: int, ep_overlap: bool) -> tuple[str, bool]:
    """The schedule whose orders the walks read, and whether they are Megatron's combined 1F1B (``ep_overlap``
    with PP 1 or virtual stages: ``combined_1f1b_orders``); Megatron runs the interleaved schedule whenever there
    are virtual stages."""
    if ep_overlap and (pp == 1 or vpp > 1):
        return ("interleaved_1f1b" if vpp > 1 else "1f1b"), True
    return ("interleaved_1f1b" if schedule == "1f1b" and vpp > 1 else schedule), False


def _orders(schedule: str, pp: int, vpp: int, m: int, group: int | None, ep_overlap: bool):
    """The walked orders of ``m`` micro-batches (:func:`_walked`) and whether they are the combined 1F1B's."""
    name, merged = _walked(schedule, pp, vpp, ep_overlap)
    return (combined_1f1b_orders(pp, vpp, m, group) if merged else schedule_orders(name, pp, vpp, m, group)), merged


@lru_cache(maxsize=8192)
def stage_activation_peaks(schedule: str, pp: int, vpp: int, m: int, group: int | None,
                           chunk_bytes: tuple[tuple[float, ...], ...], ep_overlap: bool = False,
                           layer_bytes: tuple[tuple[float, ...], ...] = (),
                           retained: tuple[tuple[float, ...], ...] = (), retain_limit: int = 0,
                           flush: tuple[float, ...] = ()) -> tuple[float, ...]:
    """Per PP rank, the largest sum of kept activation bytes alive at once.

    ``chunk_bytes[r][c]``: bytes chunk ``c`` of rank ``r`` keeps per micro-batch; ``ep_overlap``: walk
    Megatron's combined 1F1B, ``layer_bytes[r][c]`` then being the largest single layer of that chunk.
    ``retained[r][c]``: bytes of those a backward of chunk ``c`` leaves allocated until the iteration's
    pipeline flush (the first ``retain_limit`` backwards of the chunk; 0 = all), and ``flush[r]`` more bytes
    allocated at the flush on top of everything retained (megatron's ``--defer-embedding-wgrad-compute``:
    :func:`memory.mcore.deferred_wgrad_bytes`).
    """
    if retained and any(any(row) for row in retained):
        return _walk_retained(schedule, pp, vpp, m, group, chunk_bytes, ep_overlap, layer_bytes, retained,
                              retain_limit, flush)
    if not ep_overlap and schedule in ("1f1b", "interleaved_1f1b", "gpipe"):
        if all(len(set(row)) <= 1 for row in chunk_bytes):
            # every chunk of a rank weighs the same: the closed forms of the walk (tests check them)
            return tuple(n * (row[0] if row else 0.0) for n, row in zip(in_flight_closed_form(schedule, pp, vpp, m, group),
                                                                       chunk_bytes))
    # a long schedule: its running sums repeat with the orders' period past the warm-up (pipeline.simulate
    # inflight_walk_count), so the walk's work does not grow with m
    o, merged = _orders(schedule, pp, vpp, inflight_walk_count(_walked(schedule, pp, vpp, ep_overlap)[0], pp, m, group),
                        group, ep_overlap)
    free_kind = W if o.split_backward else B
    out = []
    for r, order in enumerate(o.orders):
        a = np.asarray(order, dtype=np.int64)
        if not len(a):
            out.append(0.0)
            continue
        ci = a % o.stride
        kind = (ci // o.vpp) // o.pp
        c = ci % o.vpp
        w = np.asarray(chunk_bytes[r], dtype=float)[c]
        delta = np.where(kind == F, w, np.where(kind == free_kind, -w, 0.0))
        run = np.cumsum(delta)
        if not merged:
            out.append(float(max(0.0, run.max())))
            continue
        # steady (F, B) pairs: a forward directly followed by the backward of another micro-batch or
        # chunk (warm-up forwards are followed by forwards, cool-down backwards by backwards; a chunk's
        # backward right after its own forward -- one micro-batch, or the last of them -- runs after
        # it, not beside it: nothing is merged and the whole forward is alive at the backward's start)
        mb = a // o.stride
        pair = (kind[:-1] == F) & (kind[1:] == B) & ((mb[:-1] != mb[1:]) | (c[:-1] != c[1:]))
        layer = (np.asarray(layer_bytes[r], dtype=float)[c] if layer_bytes else w)[:-1]
        before = run[:-1] - delta[:-1]
        merged_peak = np.where(pair, before + np.maximum(0.0, delta[:-1] + delta[1:]) + layer, -np.inf)
        plain = run.copy()
        plain[:-1][pair] = -np.inf  # the pair's forward is not alone: its merged peak stands for it
        out.append(float(max(0.0, plain.max(), merged_peak.max() if len(merged_peak) else 0.0)))
    return tuple(out)


#: above this many micro-batches the retained walk is extrapolated along m's residue class (:func:`_walk_retained`)
RETAINED_FULL_WALK_MAX = 4096


def _walk_retained(schedule, pp, vpp, m, group, chunk_bytes, ep_overlap, layer_bytes, retained, retain_limit,
                   flush) -> tuple[float, ...]:
    """:func:`stage_activation_peaks` with bytes left behind by backwards until the flush: each rank's
    running sum over its schedule order, a backward of chunk ``c`` releasing ``chunk_bytes - retained`` for
    its first ``retain_limit`` micro-batches (0: all), then ``flush`` on top of the sum at the end.

    Work that does not grow with ``m``: past the warm-up the plain running sum repeats with the orders' period
    ``d`` and the retained sum grows by the same bytes every period until ``retain_limit`` backwards per chunk
    are held (then it stays), so each rank's peak is affine in ``m`` along ``m``'s residue class once ``m``
    exceeds ``8 pp + retain_limit``: above :data:`RETAINED_FULL_WALK_MAX` micro-batches it is walked at three
    counts of the class ``d`` apart and extrapolated when their steps agree (else at counts four times further,
    three times at most, then with the last step)."""
    if m > RETAINED_FULL_WALK_MAX:
        d = schedule_period(_walked(schedule, pp, vpp, ep_overlap)[0], pp, group)
        lo = 8 * pp + retain_limit + 2 * d
        for attempt in range(3):
            m1 = same_class_count(m, d, lo)
            if m1 + 2 * d >= m:
                break
            f = [_walk_retained(schedule, pp, vpp, k, group, chunk_bytes, ep_overlap, layer_bytes, retained,
                                retain_limit, flush) for k in (m1, m1 + d, m1 + 2 * d)]
            steps = [(c - b, b - a) for a, b, c in zip(*f)]
            settled = all(abs(s2 - s1) <= 1e-9 * max(abs(s2), 1.0) for s2, s1 in steps)
            if settled or attempt == 2 or lo * 4 + 2 * d >= m:
                return tuple(c + (m - m1 - 2 * d) / d * s2 for c, (s2, _) in zip(f[2], steps))
            lo *= 4
    o, _ = _orders(schedule, pp, vpp, m, group, ep_overlap)
    free_kind = W if o.split_backward else B
    base = stage_activation_peaks(schedule, pp, vpp, m, group, chunk_bytes, ep_overlap, layer_bytes)
    out = []
    for r, order in enumerate(o.orders):
        keep_row = np.asarray(retained[r] if r < len(retained) else (), dtype=float)
        if not len(order) or not keep_row.any():
            out.append(base[r])
            continue
        a = np.asarray(order, dtype=np.int64)
        ci = a % o.stride
        kind = (ci // o.vpp) // o.pp
        c = ci % o.vpp
        freed = kind == free_kind
        # k-th backward of each chunk (0-based): retained only while k < retain_limit (0 = every one)
        nth = np.zeros(len(a), dtype=np.int64)
        for ch in np.unique(c[freed]):
            sel = freed & (c == ch)
            nth[sel] = np.arange(int(sel.sum()))
        keep = np.where(freed & ((retain_limit == 0) | (nth < retain_limit)), keep_row[c], 0.0)
        run = np.cumsum(keep)
        # the walk without retention peaks at base[r]; retention only adds what backwards before a point left
        w = np.asarray(chunk_bytes[r], dtype=float)[c]
        plain = np.cumsum(np.where(kind == F, w, np.where(freed, -w, 0.0)))
        end = float(run[-1]) + (flush[r] if r < len(flush) else 0.0)
        out.append(float(max(base[r], (plain + run).max(), plain[-1] + end)))
    return tuple(out)


def chunk_micro_batches(schedule: str, pp: int, vpp: int, m: int, group: int | None = None,
                        ep_overlap: bool = False) -> tuple[float, ...]:
    """Per rank, the chunk-micro-batches alive at the peak (every chunk weighing one): the schedule walk of
    :func:`stage_activation_peaks` with unit weights."""
    ones = tuple(tuple(1.0 for _ in range(vpp)) for _ in range(pp))
    return stage_activation_peaks(schedule, pp, vpp, m, group, ones, ep_overlap,
                                  tuple(tuple(0.0 for _ in range(vpp)) for _ in range(pp)) if ep_overlap else ())


def as_weights(rows: Sequence[Sequence[float]]) -> tuple[tuple[float, ...], ...]:
    """Hashable per (rank, chunk) weights for :func:`stage_activation_peaks`."""
    return tuple(tuple(float(x) for x in row) for row in rows)
