"""Probe (MEMORY.md rounds 17, 18): the TorchTitan memory verdicts on the reserved peak and on what cannot be released.

The reserved estimate of a TorchTitan stage (``memory.stage.stage_report``) adds ``side_pools``: what FSDP2's
all-gather copy-in and reduce-scatter streams keep reserved beyond the peak's allocation
(``memory.titan.fsdp2_stream_pools``).  Their free part is free cached segments that torch's caching allocator
releases on a failed allocation before it raises (``CUDACachingAllocator.cpp`` ``malloc``: ``release_cached_blocks``,
then a retry; ``memory.verdict``), so since round 19 the verdict compares ``MemoryReport.oom_peak_bytes`` (the
reserved peak less that free part, ``StageMemory.releasable_bytes``) and the reported reserved peak keeps them.
This prints, for every judged TorchTitan item of ``scripts/validate_memory.py``, the verdict the band gives on the
reserved peak (the basis up to round 17) and the report's verdict, and the items whose rightness differs.

    PYTHONPATH=. python scripts/probe_side_pools.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from validate_memory import ALLOWED, collect  # noqa: E402

GiB = 1024**3


def main() -> int:
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.verdict import verdict

    print(f"{'id':62s} {'expect':8s} {'on the reserved peak':22s} {'on what cannot be released':28s}")
    wrong_res = wrong_oom = n = 0
    for it in collect():
        if it.plan is None or it.plan.framework != "torchtitan":
            continue
        rep = estimate_memory(it.plan)
        b = rep.band
        old = verdict(rep.peak_bytes_per_gpu, rep.capacity_bytes, b.low, b.high, 0.0, outside=rep.outside_allocator_bytes)
        r_old, r_new = old in ALLOWED[it.expect], rep.verdict in ALLOWED[it.expect]
        n += 1
        wrong_res += not r_old
        wrong_oom += not r_new
        mark = "" if r_old == r_new else ("  <- right on the releasable basis" if r_new else "  <- wrong on it")
        print(f"{it.id[:62]:62s} {it.expect:8s} {old:12s} {rep.peak_bytes_per_gpu / GiB:7.1f}  {rep.verdict:12s} "
              f"{rep.oom_peak_bytes / GiB:7.1f}{mark}")
    print(f"wrong: on the reserved peak {wrong_res}, on what cannot be released {wrong_oom} (of {n} TorchTitan items)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
