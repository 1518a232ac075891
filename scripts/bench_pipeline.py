#!/usr/bin/env python
"""Per-call time of the pipeline simulator across micro-batch counts (one core, CPU time).

Prints, per schedule/(pp, vpp) and m = 16..512: actions simulated, cold time (orders and tables
built, i.e. the first call for a new (schedule, pp, vpp, m)), warm time (cached orders), and
warm time / m normalised to m = 16 - flat means linear in the number of micro-batches.
Times are process CPU time (``time.process_time``), the best of ``--repeat`` calls, so that other
jobs sharing the machine's cores do not inflate them; ``warm wall`` is the wall clock of that call.

    python scripts/bench_pipeline.py [--repeat N]
"""

from __future__ import annotations

import argparse
import time

from primus_launch.projection.pipeline.simulate import _plan, simulate, uniform_costs
from primus_launch.projection.pipeline.orders import schedule_orders

CASES = [("1f1b", 8, 1), ("interleaved_1f1b", 8, 5), ("zb_h1", 16, 1), ("zbv", 16, 2),
         ("interleaved_1f1b", 16, 5)]
MS = [16, 32, 64, 128, 256, 512]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="warm calls per point (median taken)")
    args = ap.parse_args()
    print(f"{'schedule':18s} {'pp':>3s} {'vpp':>3s} {'m':>4s} {'actions':>7s} {'cold ms':>8s} "
          f"{'warm ms':>8s} {'wall ms':>8s} {'ns/action':>9s} {'(t/m)/(t/m)@16':>15s}")
    for sched, pp, vpp in CASES:
        costs = uniform_costs(pp, vpp, 1e-3 / vpp, 1e-3 / vpp, 0.8e-3 / vpp)
        base = None
        for m in MS:
            _plan.cache_clear()
            schedule_orders.cache_clear()
            t0 = time.process_time()
            simulate(sched, pp, vpp, m, costs, 5e-5)
            cold = time.process_time() - t0
            warm_runs = []
            for _ in range(args.repeat):
                t0, w0 = time.process_time(), time.perf_counter()
                simulate(sched, pp, vpp, m, costs, 5e-5)
                warm_runs.append((time.process_time() - t0, time.perf_counter() - w0))
            warm, wall = min(warm_runs)
            n = sum(len(x) for x in schedule_orders(sched, pp, vpp, m).orders)
            per_m = warm / m
            base = base or per_m
            print(f"{sched:18s} {pp:3d} {vpp:3d} {m:4d} {n:7d} {cold * 1e3:8.2f} {warm * 1e3:8.2f} "
                  f"{wall * 1e3:8.2f} {warm / n * 1e9:9.0f} {per_m / base:15.2f}")


if __name__ == "__main__":
    main()
