"""Probe: TorchTitan's reserved peak from a replay of the traced step through a model of torch's caching allocator.

For every judged TorchTitan case of ``memory_cases.json`` with an exactly published reserved peak whose plan the
CPU trace can run (dense llama3 / qwen3, no PP / EP / CP, no float8), traces torchtitan 0.3.0's own step at full
depth on the meta device (``tests/titan_alloc_trace.py``: every allocation and free of rank 0, in order, with its
stream; eager: a compiled run's blocks are traced eager) and replays it through
:class:`caching_allocator.CachingAllocator` (tests/caching_allocator.py) (torch's ``DeviceCachingAllocator`` rules, expandable segments as
torchtitan's ``run_train.sh`` sets them).  Prints, GiB: measured reserved M, the model's allocated peak A and
reserved peak R (A + 10 % of the dynamic bytes + FSDP2's side-stream pools), the traced allocated peak a and the
replayed reserved peak r (expandable segments; ``r0`` without), and ``A + (r - a)``: the model's allocated peak
with the replay's reserve; then the reserve split: the default stream's fragmentation in the replay (``fd``: its
mapped bytes less its own allocated peak) beside the model's (``f10``: 10 % of the dynamic bytes), and the side
streams' mapped bytes in the replay (``sr``: FSDP2's copy-in and reduce-scatter streams) beside the model's
reserve beyond the default stream's (``sm``).  Nothing is written.

    PYTHONPATH=. python scripts/probe_allocator_replay.py [ID_SUBSTRING ...] [--layers N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests"))

GiB = 1024**3


def titan_case(plan, layers: int | None = None):
    """The :class:`titan_trace.TitanCase` of a TorchTitan plan, or None where the trace cannot run it."""
    from titan_trace import TitanCase

    m, p, t = plan.model, plan.parallel, plan.training
    name = m.name or ""
    if "-" not in name or p.pp > 1 or p.ep > 1 or p.cp > 1 or t.precision != "bf16" or p.dp_sharding != "full":
        return None
    module, flavor = name.split("-", 1)
    if module not in ("llama3", "qwen3"):
        return None
    gran = t.recompute.granularity if t.recompute is not None else None
    ac = {"op": "op", "full": "full", None: "none", "none": "none"}.get(gran)
    if ac is None or (gran == "full" and t.recompute.method != "uniform"):  # uniform: every block, torchtitan's full AC
        return None
    dp = plan.dp
    return TitanCase(model=module, flavor=flavor, layers=layers or m.num_layers, seq=m.seq_length,
                     mbs=t.micro_batch_size, dp_shard=dp // p.dp_replicate, dp_replicate=p.dp_replicate, tp=p.tp,
                     ac=ac, reshard_after_forward=p.fsdp_reshard_after_forward or "default", flash=True,
                     loss_chunks=t.loss_chunks, dtype="bfloat16" if t.main_params_dtype == "bf16" else "float32")


def _replay(alloc, events):
    """Replays ``events`` into ``alloc``; returns it and each stream's own allocated peak (block bytes)."""
    live, cur, peak = {}, {}, {}
    for ev in events:
        if ev[0] == "a":
            b = alloc.malloc(ev[2], ev[3])
            live[ev[1]] = (b, ev[3])
            cur[ev[3]] = cur.get(ev[3], 0) + b.size
            peak[ev[3]] = max(peak.get(ev[3], 0), cur[ev[3]])
        elif ev[0] == "f" and ev[1] in live:
            b, s = live.pop(ev[1])
            cur[s] -= b.size
            alloc.free(b)
    return alloc, peak


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("only", nargs="*")
    ap.add_argument("--layers", type=int, default=None, help="trace this many blocks instead of the model's")
    a = ap.parse_args(argv)
    from titan_alloc_trace import alloc_events
    from validate_memory import case_items, evaluate, load_gpus

    from caching_allocator import CachingAllocator, reserved_by_stream
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.stage import TITAN_DYNAMIC_FRAGMENTATION as F

    load_gpus()
    print(f"{'case':58s} {'M':>6s} {'A':>6s} {'R':>6s} {'a':>6s} {'r':>6s} {'r0':>6s} {'A+r-a':>6s} "
          f"{'R/M-1':>6s} {'(A+r-a)/M-1':>11s} {'(A+r0-a)/M-1':>12s} {'fd':>5s} {'f10':>5s} {'sr':>5s} {'sm':>5s}")
    for it in case_items():
        m = it.measured or {}
        if it.plan is None or it.plan.framework != "torchtitan" or m.get("basis") != "reserved" or m.get("approx") \
                or not m.get("gib") or (a.only and not any(s in it.id for s in a.only)):
            continue
        case = titan_case(it.plan, a.layers)
        if case is None:
            continue
        t0 = time.time()
        ev = alloc_events(case)
        rx, peaks = _replay(CachingAllocator(True), ev)
        r0, _ = _replay(CachingAllocator(False), ev)
        res = evaluate(it)
        A, R, M = res["allocated_gib"], res["reserved_gib"], float(m["gib"])
        al, r, rc = rx.allocated_peak / GiB, rx.reserved_peak / GiB, r0.reserved_peak / GiB
        by = reserved_by_stream(rx)
        fd = (by.get("default", 0) - peaks.get("default", 0)) / GiB
        sr = sum(v for k, v in by.items() if k != "default") / GiB
        st = max(estimate_memory(it.plan).stages, key=lambda s: s.total_bytes)
        f10 = F * (st.activations_bytes + st.transient_bytes - st.workspace_bytes) / GiB
        sm = st.allocator_reserve_bytes / GiB - f10
        print(f"{it.id[:58]:58s} {M:6.1f} {A:6.1f} {R:6.1f} {al:6.1f} {r:6.1f} {rc:6.1f} {A + r - al:6.1f} "
              f"{R / M - 1:+6.1%} {(A + r - al) / M - 1:+11.1%} {(A + rc - al) / M - 1:+12.1%} {fd:5.1f} {f10:5.1f} {sr:5.1f} {sm:5.1f}"
              f"  ({time.time() - t0:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
