#!/usr/bin/env python
"""How much of a measured piece's spread is the machine's: per piece of tests/test_measure_matrix.py's
cases, the relative IQR of its samples (``total``), of the reference workload timed after every
sample (``reference``, the noise floor) and of the samples divided by the reference
(``vs_reference``: the common-mode slow-down removed), and whether it is within
``timing.within_bound`` -- with the load average.  ``--pin both`` / ``--reference both``
alternate runs with the measuring thread bound to rank 0's core (``measure_pieces``' default,
``cpu_pin``) and left where the OS places it, and with the noise floor blocking as often as the
sample before it (``TimingPolicy.probe_blocks``, the default) and never; ``--runs`` times each
setting, then a summary per piece and setting: the judged spread's median and largest, in how
many runs it was within its bound, and the median of the piece's fwd+bwd time.

    python scripts/measure_noise.py [--cases megatron/tied-tp2-pp1,torchtitan/fsdp] [--samples 10] [--sample-ms 10]
                                    [--runs 1] [--pin on|off|both] [--reference blocked|plain|both]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import replace
import warnings
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="megatron/tied-tp2-pp1,megatron/moe-ep1,torchtitan/fsdp,torchtitan/cp2")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--sample-ms", type=float, default=10.0)
    ap.add_argument("--bound", type=float, default=0.2, help="the target of within_bound (the matrix's SPREAD_BOUND)")
    ap.add_argument("--runs", type=int, default=1, help="measurements of each case (per pin setting)")
    ap.add_argument("--pin", choices=("on", "off", "both"), default="on",
                    help="the measuring thread bound to rank 0's core (on), where the OS places it (off), or both")
    ap.add_argument("--reference", choices=("blocked", "plain", "both"), default="blocked",
                    help="the noise floor blocking as often as the sample before it (blocked, the default policy), "
                         "never (plain), or both")
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
    pins = {"on": [True], "off": [False], "both": [True, False]}[args.pin]
    refs = {"blocked": [True], "plain": [False], "both": [True, False]}[args.reference]
    settings = [(pin, blocked) for pin in pins for blocked in refs]

    def label(pin: bool, blocked: bool) -> str:
        return f"{'on' if pin else 'off':3s} {'blocked' if blocked else 'plain':7s}"

    head = f"{'case':28s} {'pin':3s} {'ref':7s} {'piece':14s}"
    print(f"{head} {'total':>6s} {'ref':>6s} {'vs_ref':>6s} {'judged':>6s} {'bound':>6s} ok")
    seen: dict[tuple[str, str, bool, bool], list[tuple[float, bool, float]]] = {}
    for _ in range(args.runs):
        for case in args.cases.split(","):
            for pin, blocked in settings:
                meas = measure_pieces(plans[case], "cpu", measure_layers=1, pin=pin,
                                      policy=replace(pol, probe_blocks=blocked))
                for n, t in meas.timings.items():
                    sp = t.spread
                    ok = within_bound(sp, args.bound)
                    seen.setdefault((case, n, pin, blocked), []).append((judged_spread(sp), ok, t.fwd_s + t.bwd_s))
                    print(f"{case:28s} {label(pin, blocked)} {n:14s} {sp['total']:6.2f} {sp['reference']:6.2f} "
                          f"{sp['vs_reference']:6.2f} {judged_spread(sp):6.2f} {spread_bound(sp, args.bound):6.2f} {ok}")
    if args.runs > 1:
        print(f"\n{head} {'judged median':>13s} {'largest':>7s} {'within bound':>12s} {'time us':>8s}")
        for (case, n, pin, blocked), rows in sorted(seen.items(), key=lambda kv: (kv[0][0], kv[0][1], not kv[0][2],
                                                                                   not kv[0][3])):
            js = [j for j, _, _ in rows]
            within = f"{sum(ok for _, ok, _ in rows)}/{len(rows)}"
            print(f"{case:28s} {label(pin, blocked)} {n:14s} {statistics.median(js):13.2f} {max(js):7.2f} "
                  f"{within:>12s} {statistics.median(t for _, _, t in rows) * 1e6:8.0f}")
        for pin, blocked in settings:
            rows = [r for k, v in seen.items() if k[2:] == (pin, blocked) for r in v]
            print(f"all pieces, pin {label(pin, blocked)}: {sum(ok for _, ok, _ in rows)}/{len(rows)} within bound")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
