"""Benchmark of the tuner on every bundled recipe and the case studies: the planner against the
optimum of the FULL space (``SpaceConfig()``, every knob the recipe's format can express).

For each recipe:

1. planner: ``tune(plan, exhaustive=False)`` with its default budget (10% of the legal space, at
   most 1,000 scored);
2. full-space optimum: ``tune(plan, exhaustive=True)`` on every core, when its estimated wall time
   (the planner run's estimate: candidates x pre-filter cost + legal x scoring cost, over the
   workers) is within ``--exhaustive-limit`` seconds; else the estimate is printed and the ratio is
   left out (the space is too large to score whole on this machine);
3. the default search ``tune(plan)`` would choose: exhaustive (a certificate) when the estimate fits
   the 120 s default time limit, else the planner.

Prints planner best / full-space best iteration time (1.0000 = the planner found the optimum; it
cannot be below 1), scored / legal, and wall seconds.  Usage:
``python scripts/bench_tuner.py [--only NAME] [--exhaustive-limit S] [--skip-exhaustive]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CASE_STUDIES = ("recipes/megatron/mixtral_8x22b_mi355x_32gpu.sh", "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml",
                "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml")


def recipes() -> list[str]:
    """Every bundled recipe (native files and wrappers), the case studies last."""
    out = []
    for p in sorted((ROOT / "recipes").rglob("*")):
        rel = str(p.relative_to(ROOT))
        if p.is_file() and p.suffix in (".sh", ".yaml", ".yml", ".toml") and rel not in CASE_STUDIES:
            out.append(rel)
    return out + list(CASE_STUDIES)


def main(argv=None) -> int:
    from primus_launch.adapters import load_recipe
    from primus_launch.tuner.search import DEFAULT_TIME_LIMIT_S, default_workers, tune

    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--exhaustive-limit", type=float, default=600.0,
                    help="score the full space when its estimated wall time is within this (s)")
    ap.add_argument("--skip-exhaustive", action="store_true")
    a = ap.parse_args(argv)
    workers = default_workers()
    rows = []
    for rel in recipes():
        if a.only and a.only not in rel:
            continue
        try:
            plan = load_recipe(ROOT / rel)
        except Exception as e:  # a recipe the readers refuse here (e.g. a missing checkout)
            print(f"# {rel}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        t = time.perf_counter()
        pl = tune(plan, exhaustive=False)
        t_pl = time.perf_counter() - t
        est = pl.exhaustive_estimate_s or 0.0
        ex = t_ex = None
        if not a.skip_exhaustive and est <= a.exhaustive_limit:
            t = time.perf_counter()
            ex = tune(plan, exhaustive=True, time_limit_s=4 * a.exhaustive_limit)
            t_ex = time.perf_counter() - t
        default = "exhaustive" if est <= DEFAULT_TIME_LIMIT_S else "planner"
        ratio = pl.best.iteration_time_s / ex.best.iteration_time_s if ex is not None and ex.certificate else None
        rows.append((rel, pl, t_pl, ex, t_ex, est, ratio, default))
        print(f"{rel}: {pl.space_size:,} candidates, {'' if pl.legal_exact else '~'}{pl.legal_candidates:,} legal; "
              f"baseline {pl.baseline.iteration_time_s:.4f} s/iter; planner {pl.best.iteration_time_s:.4f} "
              f"({pl.scored} scored, {t_pl:.0f} s); full space "
              + (f"{ex.best.iteration_time_s:.4f} ({ex.scored:,} scored, {t_ex:.0f} s)" if ex is not None
                 else f"not scored (estimated {est:,.0f} s on {workers} workers)"), flush=True)
    print()
    print(f"{'recipe':55s} {'candidates':>13s} {'legal':>12s} {'planner/optimum':>15s} {'scored':>7s} "
          f"{'planner s':>9s} {'full s':>9s} {'default':>10s}")
    for rel, pl, t_pl, ex, t_ex, est, ratio, default in rows:
        full = f"{t_ex:.0f}" if t_ex is not None else f"~{est:,.0f}"
        print(f"{rel:55s} {pl.space_size:13,d} {('' if pl.legal_exact else '~') + f'{pl.legal_candidates:,}':>12s} "
              f"{(f'{ratio:.4f}' if ratio is not None else '-'):>15s} {pl.scored:7d} {t_pl:9.0f} {full:>9s} "
              f"{default:>10s}")
    n_ex = sum(r[6] is not None for r in rows)
    n_opt = sum(r[6] is not None and r[6] <= 1 + 1e-9 for r in rows)
    print(f"\nplanner found the full-space optimum in {n_opt} of {n_ex} recipes scored whole; "
          f"{sum(r[7] == 'exhaustive' for r in rows)} of {len(rows)} default tunes are exhaustive "
          f"(certificate) at the {DEFAULT_TIME_LIMIT_S:.0f} s default time limit on {workers} workers; "
          f"full spaces scored when estimated within {a.exhaustive_limit:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
