"""The caching-allocator model (tests/caching_allocator.py) against torch's stated allocator behaviour, and the replay
of a traced torchtitan step against torch's own memory tracker.

Independent sources: the behaviour pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp`` (001074d2) states in its
header comment and Note [Expandable Segments] ("Small requests are packed into 2MB buffers", "requests between 1MB
and 10MB will allocate and split a 20MB block", "Once freed, blocks can be re-allocated on the same stream, but not
on any other stream", "we use 2MiB pages for our small pool and 20MiB pages for our large pool", "one segment (per
stream) that grows as necessary"); torch's ``FSDPMemTracker`` on torchtitan 0.3.0's own step.
"""

from __future__ import annotations

import pytest

from caching_allocator import CachingAllocator, replay, reserved_by_stream

MiB = 1 << 20


def test_small_requests_share_a_2mib_segment():
    a = CachingAllocator(expandable_segments=False)
    blocks = [a.malloc(100_000) for _ in range(20)]  # 20 x 100000 B rounded to 512 B: 1.95 MiB
    assert a.reserved == 2 * MiB
    assert a.allocated == 20 * 100_352
    a.malloc(100_000)  # the 21st no longer fits: a second 2 MiB buffer
    assert a.reserved == 4 * MiB
    del blocks


def test_mid_requests_split_a_20mib_segment_and_large_ones_round_to_2mib():
    a = CachingAllocator(expandable_segments=False)
    a.malloc(5 * MiB)
    a.malloc(5 * MiB)
    a.malloc(5 * MiB)
    assert a.reserved == 20 * MiB  # three 5 MiB requests packed into one 20 MiB block
    a.malloc(15 * MiB + 1)  # >= 10 MiB: its own segment, rounded up to 2 MiB
    assert a.reserved == 20 * MiB + 16 * MiB


def test_blocks_are_reused_by_their_own_stream_only():
    a = CachingAllocator(expandable_segments=True)
    b = a.malloc(100 * MiB, "s1")
    a.free(b)
    a.malloc(100 * MiB, "s1")
    assert a.reserved == 100 * MiB
    a.malloc(100 * MiB, "s2")  # the other stream grows its own segment
    assert a.reserved == 200 * MiB
    assert reserved_by_stream(a) == {"s1": 100 * MiB, "s2": 100 * MiB}


def test_expandable_segment_maps_20mib_pages_and_grows_its_free_end():
    a = CachingAllocator(expandable_segments=True)
    x = a.malloc(30 * MiB)
    assert a.reserved == 40 * MiB  # two 20 MiB pages of the large pool
    y = a.malloc(30 * MiB)  # 10 MiB free at the end: mapped 20 MiB more after it, one contiguous block
    assert a.reserved == 60 * MiB
    a.free(x)
    a.free(y)  # freed neighbours merge: a 60 MiB request fits without mapping more
    a.malloc(60 * MiB)
    assert a.reserved == 60 * MiB
    s = a.malloc(4096)  # the small pool has its own segment of 2 MiB pages
    assert a.reserved == 62 * MiB and s.size == 4096


def test_best_fit_leaves_a_hole_that_costs_reserved_memory():
    """Best fit takes the smallest free block that fits; a larger request than any hole maps new pages at the end,
    so the reserved peak exceeds the allocated peak (the fragmentation the replay measures)."""
    a = CachingAllocator(expandable_segments=True)
    b1, b2, b3 = a.malloc(40 * MiB), a.malloc(40 * MiB), a.malloc(40 * MiB)
    a.free(b1)
    a.free(b3)  # holes of 40 MiB at the start and (free end) 40 MiB at the end
    big = a.malloc(60 * MiB)  # fits no interior hole: the free end grows by one 20 MiB page
    assert a.reserved == 140 * MiB
    assert a.allocated == 100 * MiB
    del b2, big


def _fragmenting_step(a: CachingAllocator) -> list:
    """Long-lived blocks around a freed transient, then a larger transient that fits no hole."""
    keep = [a.malloc(30 * MiB)]
    tmp = a.malloc(100 * MiB)
    keep.append(a.malloc(5 * MiB))
    a.free(tmp)
    keep.append(a.malloc(120 * MiB))
    return keep


def test_expandable_free_pages_are_given_back_before_an_oom():
    """release_blocks -> unmap_block -> ExpandableSegment::unmap: every 20 MiB page entirely inside a free block is
    unmapped (segmentRight(ptr) .. segmentLeft(ptr + size)); only the partly used pages at its ends stay reserved."""
    a = CachingAllocator(expandable_segments=True)
    _fragmenting_step(a)
    # pages: 30 MiB -> [0, 40) (A [0, 30)); 100 MiB grows the free 10 at 30 by 90 -> 100 more mapped, [30, 130);
    # 5 MiB at [130, 135); the freed [30, 130) cannot take 120 MiB: the free end [135, 140) grows to [135, 260)
    assert a.reserved == 260 * MiB and a.allocated == 155 * MiB
    # free [30, 130): pages 2..5 (40-120 MiB) unmapped; free [255, 260): no whole page
    assert a.releasable() == 80 * MiB
    assert a.reserved - a.releasable() - a.allocated == (10 + 10 + 5) * MiB


def test_split_cudamalloc_segments_keep_their_free_part():
    """Without expandable segments release_blocks frees only free blocks with no prev / next (whole segments): a
    segment split between a live and a free block keeps the free part reserved."""
    a = CachingAllocator(expandable_segments=False)
    _fragmenting_step(a)
    # own segments of 30, 100 (freed whole), 20 (5 MiB split off a 20 MiB block), 120 MiB
    assert a.reserved == (30 + 100 + 20 + 120) * MiB and a.allocated == 155 * MiB
    assert a.releasable() == 100 * MiB
    x = a.malloc(100 * MiB)  # reuses the freed 100 MiB segment, then a 60 MiB live block splits it
    a.free(x)
    y, z = a.malloc(60 * MiB), a.malloc(30 * MiB)
    a.free(y)  # [0, 60) free beside the live z at [60, 90): nothing of that segment is released
    assert a.releasable() == 0
    assert a.reserved - a.allocated == (15 + 60 + 10) * MiB
    del z


def test_replay_of_events():
    ev = [("a", 1, 30 * MiB, "default"), ("a", 2, 10 * MiB, "copy_in"), ("f", 1), ("reset",), ("a", 3, 20 * MiB, "default")]
    a = replay(ev)
    assert a.reserved_peak == 40 * MiB + 20 * MiB
    assert a.allocated_peak == 30 * MiB  # since the reset: 10 (copy_in) + 20


@pytest.mark.slow
def test_traced_step_replays_to_torchs_tracked_peak():
    """The allocation sequence of torchtitan 0.3.0's own step (tests/titan_alloc_trace.py) reaches the same allocated
    peak as torch's FSDPMemTracker on that step (to the allocator's 512 B rounding), and the replay's reserved peak
    holds it."""
    from titan_alloc_trace import alloc_events
    from titan_trace import TitanCase, trace

    c = TitanCase(model="llama3", flavor="debugmodel", layers=1, seq=512, mbs=2, dp_shard=8, ac="op", flash=True)
    tracked = trace(c)["peak"]
    a = replay(alloc_events(c))
    assert a.allocated_peak == pytest.approx(tracked, rel=0.01)
    assert a.reserved_peak >= a.allocated_peak
