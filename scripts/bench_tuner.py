"""Benchmark of the tuner's certified branch and bound against a brute force, on every bundled
recipe and the case studies.

For each recipe, on the structural space (``SpaceConfig.restricted()``: the parallel degrees,
micro-batch, sharding, recompute, schedule, pipeline split; the execution flags kept as written),
which a brute force can finish in minutes:

1. bound-and-prune: ``tune(plan, space=restricted)`` (the default search: ``tuner/branch_bound.py``);
2. brute force: ``tune(plan, space=restricted, exhaustive=True)`` (every legal plan scored on every
   core), when its estimate (the space's size x the pre-filter and scoring cost of a sample, over the
   workers) is within ``--brute-limit`` seconds;

and prints both bests (they must be equal: the brute force is the optimum), the plans each scored
and the wall seconds of each.  With ``--full``, also the default tune of the FULL space (every knob
the recipe's format can express): its certificate (or the gap where the work limit stopped it) and
its wall seconds.  Usage: ``python scripts/bench_tuner.py [--only NAME] [--brute-limit S] [--full]``.
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


def brute_estimate_s(plan, cfg, workers: int, sample: int = 40) -> tuple[int, float]:
    """(plans, estimated seconds) of a brute force of ``plan``'s space ``cfg``: a stride sample's
    pre-filter + scoring cost per plan, times the plans, over the workers."""
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.memory.legality import prefilter
    from primus_launch.tuner.space import Space, apply_knobs

    sp = Space(plan, cfg)
    n = len(sp)
    if n == 0:
        return 0, 0.0
    idx = sorted({int(k * n / sample) for k in range(min(sample, n))})
    t = time.perf_counter()
    for i in idx:
        p = apply_knobs(plan, sp[i])
        if prefilter(p) is None:
            project_dry_run(p)
    return n, (time.perf_counter() - t) / len(idx) * n / workers


def main(argv=None) -> int:
    from primus_launch.adapters import load_recipe
    from primus_launch.tuner.search import default_workers, tune
    from primus_launch.tuner.space import SpaceConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--only")
    ap.add_argument("--brute-limit", type=float, default=180.0,
                    help="run the brute force when its estimated wall time is within this (s)")
    ap.add_argument("--full", action="store_true", help="also tune each recipe's full space (branch and bound)")
    a = ap.parse_args(argv)
    workers = default_workers()
    cfg = SpaceConfig.restricted()
    rows = []
    t_all = time.perf_counter()
    for rel in recipes():
        if a.only and a.only not in rel:
            continue
        try:
            plan = load_recipe(ROOT / rel)
        except Exception as e:  # a recipe the readers refuse here (e.g. a missing checkout)
            print(f"# {rel}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        t = time.perf_counter()
        bb = tune(plan, space=cfg)
        t_bb = time.perf_counter() - t
        n, est = brute_estimate_s(plan, cfg, workers)
        ex = t_ex = None
        if est <= a.brute_limit:
            t = time.perf_counter()
            ex = tune(plan, space=cfg, exhaustive=True, workers=workers)
            t_ex = time.perf_counter() - t
        full = t_full = None
        if a.full:
            t = time.perf_counter()
            full = tune(plan)
            t_full = time.perf_counter() - t
        rows.append((rel, n, bb, t_bb, ex, t_ex, est, full, t_full))
        print(f"{rel}: {n:,} plans; bound-and-prune {bb.best.iteration_time_s:.4f} s/iter "
              f"({bb.certificate.scored:,} scored, {t_bb:.1f} s, {'certified' if bb.certificate.certified else 'NOT certified'})"
              f"; brute force " + (f"{ex.best.iteration_time_s:.4f} ({ex.scored:,} scored, {t_ex:.1f} s)" if ex is not None
                                   else f"not run (estimated {est:,.0f} s on {workers} workers)"), flush=True)
    print()
    print(f"{'recipe':55s} {'plans':>9s} {'B&B s/iter':>10s} {'brute s/iter':>12s} {'equal':>5s} "
          f"{'B&B scored':>10s} {'brute scored':>12s} {'B&B s':>6s} {'brute s':>7s}"
          + (f" {'full plans':>12s} {'full cert':>14s} {'full s':>6s}" if a.full else ""))
    agree = ran = 0
    for rel, n, bb, t_bb, ex, t_ex, est, full, t_full in rows:
        eq = "-"
        if ex is not None:
            ran += 1
            same = abs(bb.best.iteration_time_s - ex.best.iteration_time_s) <= 1e-9 * ex.best.iteration_time_s
            agree += same
            eq = "yes" if same else "NO"
        line = (f"{rel:55s} {n:9,d} {bb.best.iteration_time_s:10.4f} "
                f"{(f'{ex.best.iteration_time_s:.4f}' if ex is not None else '-'):>12s} {eq:>5s} "
                f"{bb.certificate.scored:10,d} {(f'{ex.scored:,}' if ex is not None else '-'):>12s} {t_bb:6.1f} "
                f"{(f'{t_ex:.1f}' if t_ex is not None else f'~{est:,.0f}'):>7s}")
        if full is not None:
            c = full.certificate
            line += (f" {c.plans:12,d} {('certified' if c.certified else f'gap {100 * c.gap:.1f} %'):>14s} "
                     f"{t_full:6.1f}")
        print(line)
    print(f"\nbound-and-prune equals the brute force on {agree} of {ran} spaces the brute force finished "
          f"(within {a.brute_limit:.0f} s estimated on {workers} workers); {time.perf_counter() - t_all:.0f} s in all")
    return 0 if agree == ran else 1


if __name__ == "__main__":
    raise SystemExit(main())
