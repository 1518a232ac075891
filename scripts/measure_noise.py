#!/usr/bin/env python
"""How much of a measured piece's spread is the machine's: per piece of tests/test_measure_matrix.py's
cases, the relative IQR of its samples (``total``), of the reference workload timed after every
sample (``reference``, the noise floor) and of the samples divided by the reference
(``vs_reference``: the common-mode slow-down removed), and whether it is within
``timing.within_bound`` -- with the load average.

    python scripts/measure_noise.py [--cases megatron/tied-tp2-pp1,torchtitan/fsdp] [--samples 10] [--sample-ms 10]
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="megatron/tied-tp2-pp1,megatron/moe-ep1,torchtitan/fsdp,torchtitan/cp2")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--sample-ms", type=float, default=10.0)
    ap.add_argument("--bound", type=float, default=0.2, help="the target of within_bound (the matrix's SPREAD_BOUND)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import test_measure_matrix as tm

    from primus_launch.projection.measure.timing import TimingPolicy, judged_spread, spread_bound, within_bound
    from primus_launch.projection.measure.upscale import measure_pieces

    plans = tm._plans()
    pol = TimingPolicy(min_repeats=args.samples, max_repeats=args.samples, min_sample_s=args.sample_ms / 1e3,
                       target_spread=0.0)
    print(f"load average {os.getloadavg()[0]:.1f}; {args.samples} samples of >= {args.sample_ms:g} ms per piece")
    print(f"{'case':28s} {'piece':14s} {'total':>6s} {'ref':>6s} {'vs_ref':>6s} {'judged':>6s} {'bound':>6s} ok")
    for case in args.cases.split(","):
        meas = measure_pieces(plans[case], "cpu", measure_layers=1, policy=pol)
        for n, t in meas.timings.items():
            sp = t.spread
            print(f"{case:28s} {n:14s} {sp['total']:6.2f} {sp['reference']:6.2f} {sp['vs_reference']:6.2f} "
                  f"{judged_spread(sp):6.2f} {spread_bound(sp, args.bound):6.2f} {within_bound(sp, args.bound)}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
