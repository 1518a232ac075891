"""Probe (MEMORY.md round 17): the TorchTitan memory verdicts with and without FSDP2's side-stream pools.

The reserved estimate of a TorchTitan stage (``memory.stage.stage_report``) adds ``side_pools``: what FSDP2's
all-gather copy-in and reduce-scatter streams keep reserved beyond the peak's allocation
(``memory.titan.fsdp2_stream_pools``).  Those are free cached blocks that torch's caching allocator releases on a
failed allocation before it raises (``CUDACachingAllocator.cpp`` ``malloc``: ``release_cached_blocks``, then a retry),
so as a term of the fits verdict they err toward ``does not fit``.  This prints, for every judged TorchTitan item of
``scripts/validate_memory.py``, the verdict with the pools (today's model) and without them (the reported reserved
peak is what changes; nothing is written), and the items whose rightness changes.

    PYTHONPATH=. python scripts/probe_side_pools.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import collect, evaluate  # noqa: E402


def judged(without_pools: bool) -> dict[str, dict]:
    """Item id -> ``evaluate``'s result for the judged TorchTitan items, with or without the side pools."""
    import primus_launch.projection.memory.estimate as est
    from primus_launch.projection.memory import stage

    def report(*a, **k):
        k["side_pools"] = 0.0
        return stage.stage_report(*a, **k)

    est.stage_report = report if without_pools else stage.stage_report
    est.titan_stage_parts.cache_clear()
    est.titan_stage_memory.cache_clear()
    out = {}
    for it in collect():
        if it.plan is None or it.plan.framework != "torchtitan":
            continue
        out[it.id] = evaluate(it)
    est.stage_report = stage.stage_report
    return out


def main() -> int:
    with_pools, without = judged(False), judged(True)
    print(f"{'id':62s} {'expect':8s} {'with pools':22s} {'without':22s}")
    for i, a in with_pools.items():
        b = without[i]
        mark = "" if a["right"] == b["right"] else ("  <- right without" if b["right"] else "  <- wrong without")
        print(f"{i[:62]:62s} {a['expect']:8s} {a['verdict']:12s} {a['peak_gib']:7.1f}  {b['verdict']:12s} "
              f"{b['peak_gib']:7.1f}{mark}")
    print(f"wrong: with pools {sum(not r['right'] for r in with_pools.values())}, "
          f"without {sum(not r['right'] for r in without.values())} (of {len(with_pools)} TorchTitan items)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
