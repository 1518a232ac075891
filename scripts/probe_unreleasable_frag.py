"""Probe (MEMORY.md round 20): the TorchTitan verdicts if less of the default stream's fragmentation were held.

The reserved estimate of a TorchTitan stage (``memory.stage.stage_report``) carries
``TITAN_DYNAMIC_FRAGMENTATION`` (10 %) of the stage's dynamic bytes (activations + transients, GEMM workspaces
excluded) as the default stream's fragmentation, and the verdict (``MemoryReport.oom_peak_bytes``, round 19) keeps
all of it: it releases only FSDP2's free side-stream pools.  torch's caching allocator, before it raises out of
memory, frees every free block that is not split and, with ``expandable_segments:True``, unmaps the free pages of
expandable segments (``c10/cuda/CUDACachingAllocator.cpp`` ``malloc`` -> ``release_cached_blocks``); what it still
holds is the gaps inside partly used segments, which the OOM message then prints as "reserved by PyTorch but
unallocated" (its figures are the stats' ``current`` values taken after that release and the last failed try).

This prints, for each held fraction ``f`` of the dynamic bytes (the rest of the 10 % counted released), every
judged TorchTitan item whose verdict differs from the report's, and the wrong count; nothing is written and the
reported reserved peak is unchanged.  Per stage: ``oom' = oom_peak - (1 - f / 0.10) x 0.10 x dynamic``.

    PYTHONPATH=. python scripts/probe_unreleasable_frag.py [f ...]   # default: 0.10 0.057 0.0
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import ALLOWED, collect  # noqa: E402

GiB = 1024**3


def held_at(st, f: float) -> float:
    """A stage's verdict bytes if ``f`` of its dynamic bytes (activations + transients less the GEMM workspaces,
    what ``memory.stage.stage_report`` takes 10 % of) were held and the rest of the 10 % released."""
    from primus_launch.projection.memory.stage import TITAN_DYNAMIC_FRAGMENTATION as F
    from primus_launch.projection.memory.stage import oom_peak

    dyn = st.activations_bytes + st.transient_bytes - st.workspace_bytes
    return oom_peak(st) - (1.0 - f / F) * F * max(0.0, dyn)


def verdicts(f: float, items=None) -> list[tuple[str, str, str, str, float, float, float]]:
    """Per judged TorchTitan item: (id, expected outcome, report's verdict, verdict at held fraction ``f``,
    report's verdict bytes, bytes at ``f``, capacity)."""
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.verdict import verdict

    out = []
    for it in items if items is not None else collect():
        if it.plan is None or it.plan.framework != "torchtitan":
            continue
        rep = estimate_memory(it.plan)
        st = max(rep.stages, key=lambda s: held_at(s, f))
        b = rep.band
        h = held_at(st, f)
        vd = verdict(int(h), rep.capacity_bytes, b.low, b.high, 0.0, outside=st.outside_allocator_bytes)
        out.append((it.id, it.expect, rep.verdict, vd, rep.oom_peak_bytes, h, rep.capacity_bytes))
    return out


def main(argv: list[str] | None = None) -> int:
    fractions = [float(a) for a in (argv if argv is not None else sys.argv[1:])] or [0.10, 0.057, 0.0]
    items = list(collect())
    for f in fractions:
        rows = verdicts(f, items)
        wrong = sum(vd not in ALLOWED[exp] for _, exp, _, vd, *_ in rows)
        print(f"held fraction {f:.3f} of the dynamic bytes: {wrong} wrong of {len(rows)} TorchTitan items")
        for iid, exp, old, vd, ob, h, cap in rows:
            ok = vd in ALLOWED[exp]
            if vd != old or not ok:
                print(f"  {iid[:62]:62s} {exp:8s} {old:12s} {ob / GiB:6.1f} -> {vd:12s} {h / GiB:6.1f} / "
                      f"{cap / GiB:6.1f}" + ("" if ok else "  WRONG"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
