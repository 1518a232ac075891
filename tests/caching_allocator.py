"""A Python model of torch's CUDA caching allocator, to replay one training step's allocations and frees.

Read from pytorch/pytorch ``c10/cuda/CUDACachingAllocator.cpp`` at 001074d2 (``DeviceCachingAllocator``), what
decides ``memory_stats()["reserved_bytes.all.peak"]`` (what torchtitan's ``DeviceMemoryMonitor`` logs):

- ``round_size``: requests below ``kMinBlockSize`` (512 B) take 512 B, others round up to a multiple of 512
  (``roundup_power2_divisions`` unset);
- ``get_pool``: rounded sizes ``<= kSmallSize`` (1 MiB) go to the small pool, the rest to the large pool; a
  pool's free blocks are ordered by ``(stream, size, address)`` (``BlockComparatorSize``), so a free block is
  reused only by its own stream;
- ``get_free_block``: best fit, the smallest free block of the stream with ``size >= request`` (the lowest
  address among equal sizes).  With expandable segments a block followed by unmapped address space ranks by
  the size it can grow to, so the free tail of a segment is taken only when no other free block fits;
- ``should_split``: with expandable segments (or in the small pool) the rest of a block is split off when it
  is ``>= 512`` B; otherwise when the request is below ``max_split_size`` (default: no limit) and the rest is
  ``> kSmallSize``;
- ``free_block`` / ``try_merge_blocks``: a freed block merges with its free neighbours of the same segment
  (same mapped state);
- ``get_allocation_size`` (no expandable segments): a new segment (``cudaMalloc``) of 2 MiB (``kSmallBuffer``)
  for small requests, 20 MiB (``kLargeBuffer``) for requests below 10 MiB (``kMinLargeAlloc``), else the
  request rounded up to 2 MiB (``kRoundLarge``); ``reserved_bytes`` grows by the segment;
- ``expandable_segments:True`` (``try_allocate_expandable_block``, ``find_expandable_block``, ``map_block``,
  ``ExpandableSegment``): one segment per stream and pool, a virtual range mapped in pages of 2 MiB (small
  pool) or 20 MiB (large pool, ``kLargeBuffer``); when no free block fits, the free block at the end of the
  mapped range (if any) is extended by mapping just enough pages after it (the request less that block,
  rounded up to pages); ``reserved_bytes`` grows by the pages mapped and does not shrink on free.

What an out-of-memory retry gives back (``releasable``, read-only): ``release_cached_blocks`` ->
``release_blocks`` per pool, every stream: a free block that is a whole ``cudaMalloc`` segment (no ``prev`` /
``next``) is freed; a free block of an expandable segment is ``unmap_block``-ed, and ``ExpandableSegment::unmap``
gives back the pages entirely inside it (``segmentRight(ptr)`` .. ``segmentLeft(ptr + size)``).  So with
expandable segments only the partly used pages at a free block's ends stay; without them a free block that
shares its segment with a live one stays whole.

Not modelled: performing releases (``release_cached_blocks`` / ``empty_cache`` / an OOM's retry: the replay
has no capacity), ``max_split_size`` below the default, ``roundup_power2_divisions``, ``record_stream`` events (FSDP2
keeps cross-stream tensors alive by reference until its events are waited on; the replay frees a block when
the traced storage dies), CUDA-graph private pools.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

K_MIN_BLOCK = 512
K_SMALL_SIZE = 1 << 20
K_SMALL_BUFFER = 2 << 20
K_LARGE_BUFFER = 20 << 20
K_MIN_LARGE_ALLOC = 10 << 20
K_ROUND_LARGE = 2 << 20


def round_size(size: int) -> int:
    """``round_size``: at least 512 B, then multiples of 512 B."""
    if size < K_MIN_BLOCK:
        return K_MIN_BLOCK
    return K_MIN_BLOCK * ((size + K_MIN_BLOCK - 1) // K_MIN_BLOCK)


def allocation_size(size: int) -> int:
    """``get_allocation_size`` of a rounded request (the ``cudaMalloc`` segment without expandable segments)."""
    if size <= K_SMALL_SIZE:
        return K_SMALL_BUFFER
    if size < K_MIN_LARGE_ALLOC:
        return K_LARGE_BUFFER
    return K_ROUND_LARGE * ((size + K_ROUND_LARGE - 1) // K_ROUND_LARGE)


@dataclass(eq=False)
class _Block:
    seg: "_Segment"
    ptr: int
    size: int
    allocated: bool = False
    mapped: bool = True
    prev: Optional["_Block"] = None
    next: Optional["_Block"] = None


@dataclass(eq=False)
class _Segment:
    stream: str
    small: bool
    base: int
    expandable: bool
    head: Optional[_Block] = None
    free: set = field(default_factory=set)  # free mapped blocks of this segment


class CachingAllocator:
    """Replays ``malloc(size, stream)`` / ``free(handle)`` as torch's ``DeviceCachingAllocator`` would, and keeps
    ``allocated`` / ``reserved`` bytes with their peaks (``allocated_bytes.all`` / ``reserved_bytes.all``)."""

    def __init__(self, expandable_segments: bool = True) -> None:
        self.expandable = expandable_segments
        self.segments: dict[tuple[str, bool], list[_Segment]] = {}
        self._next_base = 0
        self.allocated = self.reserved = 0
        self.allocated_peak = self.reserved_peak = 0

    # ------------------------------------------------------------------ search
    def _free_blocks(self, stream: str, small: bool) -> Iterable[_Block]:
        for seg in self.segments.get((stream, small), ()):
            yield from seg.free

    @staticmethod
    def _grow_size(b: _Block) -> float:
        """``expandable_size``: a free block before unmapped address space can grow without limit."""
        return float("inf") if (b.next is not None and not b.next.mapped) else b.size

    def _best_fit(self, size: int, stream: str, small: bool) -> Optional[_Block]:
        fits = sorted((b for b in self._free_blocks(stream, small) if b.size >= size), key=lambda b: (b.size, b.ptr))
        if not fits:
            return None
        i = 0
        if self.expandable:  # get_free_block's walk past blocks that rank larger by the size they can grow to
            while i + 1 < len(fits) and self._grow_size(fits[i + 1]) < self._grow_size(fits[i]):
                i += 1
        return fits[i]

    # ------------------------------------------------------------------ new memory
    def _new_segment(self, stream: str, small: bool, size: int) -> _Segment:
        seg = _Segment(stream=stream, small=small, base=self._next_base, expandable=self.expandable)
        self._next_base += 1 << 48
        if self.expandable:
            seg.head = _Block(seg, seg.base, 1 << 47, mapped=False)  # the unmapped address space
        else:
            seg.head = _Block(seg, seg.base, size)
            seg.free.add(seg.head)
            self._add_reserved(size)
        self.segments.setdefault((stream, small), []).append(seg)
        return seg

    def _add_reserved(self, n: int) -> None:
        self.reserved += n
        self.reserved_peak = max(self.reserved_peak, self.reserved)

    def _expand(self, size: int, stream: str, small: bool) -> _Block:
        """``try_allocate_expandable_block``: map pages after the free end of the stream's segment."""
        segs = self.segments.get((stream, small)) or [self._new_segment(stream, small, 0)]
        seg = segs[0]
        tail = seg.head
        while tail.next is not None:
            tail = tail.next
        page = K_SMALL_BUFFER if small else K_LARGE_BUFFER
        start = tail.prev if (tail.prev is not None and not tail.prev.allocated) else None
        have = start.size if start is not None else 0
        need = size - have
        mapped = page * ((need + page - 1) // page)
        self._add_reserved(mapped)
        new = _Block(seg, tail.ptr, mapped)
        new.prev, new.next = tail.prev, tail
        if tail.prev is not None:
            tail.prev.next = new
        else:
            seg.head = new
        tail.prev = new
        tail.ptr += mapped
        tail.size -= mapped
        if start is not None:  # merge the mapped pages into the free block before them
            seg.free.discard(start)
            start.size += new.size
            start.next = tail
            tail.prev = start
            return start
        return new

    # ------------------------------------------------------------------ public
    def malloc(self, nbytes: int, stream: str = "default") -> _Block:
        size = round_size(int(nbytes))
        small = size <= K_SMALL_SIZE
        b = self._best_fit(size, stream, small)
        if b is not None:
            b.seg.free.discard(b)
        elif self.expandable:
            b = self._expand(size, stream, small)
        else:
            b = self._new_segment(stream, small, allocation_size(size)).head
            b.seg.free.discard(b)
        rest = b.size - size
        split = rest >= K_MIN_BLOCK if (small or self.expandable) else rest > K_SMALL_SIZE
        if split:
            r = _Block(b.seg, b.ptr + size, rest)
            r.prev, r.next = b, b.next
            if b.next is not None:
                b.next.prev = r
            b.next = r
            b.size = size
            b.seg.free.add(r)
        b.allocated = True
        self.allocated += b.size
        self.allocated_peak = max(self.allocated_peak, self.allocated)
        return b

    def free(self, b: _Block) -> None:
        b.allocated = False
        self.allocated -= b.size
        seg = b.seg
        for nb in (b.prev, b.next):
            if nb is None or nb.allocated or not nb.mapped:
                continue
            seg.free.discard(nb)
            if nb is b.prev:
                b.ptr = nb.ptr
                b.prev = nb.prev
                if nb.prev is not None:
                    nb.prev.next = b
                else:
                    seg.head = b
            else:
                b.next = nb.next
                if nb.next is not None:
                    nb.next.prev = b
            b.size += nb.size
        seg.free.add(b)

    def releasable(self) -> int:
        """Bytes ``release_cached_blocks`` would give back now (module docstring): whole free ``cudaMalloc``
        segments, and of each free block of an expandable segment the pages entirely inside it."""
        n = 0
        for (_stream, small), segs in self.segments.items():
            page = K_SMALL_BUFFER if small else K_LARGE_BUFFER
            for seg in segs:
                for b in seg.free:
                    if seg.expandable:
                        lo = -(-(b.ptr - seg.base) // page)  # segmentRight(ptr)
                        hi = (b.ptr - seg.base + b.size) // page  # segmentLeft(ptr + size)
                        n += max(0, hi - lo) * page
                    elif b.prev is None and b.next is None:
                        n += b.size
        return n

    def reset_peak(self) -> None:
        """``reset_peak_stats``: the peaks restart from the current values."""
        self.allocated_peak, self.reserved_peak = self.allocated, self.reserved


def replay(events: Iterable[tuple], expandable_segments: bool = True) -> CachingAllocator:
    """Replays ``("a", key, nbytes, stream)`` / ``("f", key)`` events (and ``("reset",)`` to restart the peaks)
    through a :class:`CachingAllocator`; returns it (``reserved_peak``, ``allocated_peak``)."""
    alloc = CachingAllocator(expandable_segments)
    live: dict = {}
    for ev in events:
        if ev[0] == "a":
            live[ev[1]] = alloc.malloc(ev[2], ev[3])
        elif ev[0] == "f":
            blk = live.pop(ev[1], None)
            if blk is not None:
                alloc.free(blk)
        elif ev[0] == "reset":
            alloc.reset_peak()
    return alloc


def reserved_by_stream(alloc: CachingAllocator) -> dict[str, int]:
    """Mapped (expandable) or ``cudaMalloc``-ed bytes per stream, both pools together."""
    out: dict[str, int] = {}
    for (stream, _small), segs in alloc.segments.items():
        for seg in segs:
            b, n = seg.head, 0
            while b is not None:
                n += b.size if b.mapped else 0
                b = b.next
            out[stream] = out.get(stream, 0) + n
    return out
