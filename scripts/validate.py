"""Validate the dry-run projection against published, measured training runs.

Runs :func:`primus_launch.projection.dryrun.project_dry_run` on every row of
``scripts/validation/runs.json`` (built by ``scripts/validation/build_runs.py``) and prints each
row's projected vs measured tokens/s/GPU and the error, then the median and worst absolute
percentage error, separately for the calibration rows and the judge rows (and dense-only).
Issue-3 targets: median |err| <= 10% on dense models, no case beyond 25%.

    python scripts/validate.py [--json out.json] [--quiet]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "scripts" / "validation" / "runs.json"


def load_rows(path: Path = RUNS) -> list[dict]:
    return json.loads(path.read_text())["rows"]


def evaluate(rows: list[dict]) -> list[dict]:
    """Project every row; returns dicts with id, role, measured, projected, err (fraction)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    out = []
    for row in rows:
        plan = Plan.model_validate(row["plan"])
        res = project_dry_run(plan)
        proj = res.tokens_per_sec_per_gpu
        meas = row["measured_tokens_per_sec_per_gpu"]
        out.append(dict(id=row["id"], role=row["role"], dense=row["dense"], group=row["source_group"],
                        measured=meas, projected=proj, err=(proj - meas) / meas, mfu=res.mfu))
    return out


def summary(results: list[dict]) -> dict:
    def stats(sel):
        errs = [abs(r["err"]) for r in sel]
        if not errs:
            return {"n": 0}
        return {"n": len(errs), "median_abs_pct": 100 * statistics.median(errs), "worst_abs_pct": 100 * max(errs),
                "within_25pct": sum(e <= 0.25 for e in errs)}
    return {
        "calibration": stats([r for r in results if r["role"] == "calibration"]),
        "judge": stats([r for r in results if r["role"] == "judge"]),
        "judge_dense": stats([r for r in results if r["role"] == "judge" and r["dense"]]),
        "judge_moe": stats([r for r in results if r["role"] == "judge" and not r["dense"]]),
        "all": stats(results),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write per-row results and the summary here")
    ap.add_argument("--quiet", action="store_true", help="summary only")
    args = ap.parse_args(argv)
    results = evaluate(load_rows())
    if not args.quiet:
        print(f"{'row':58s} {'role':5s} {'measured':>9s} {'projected':>9s} {'err%':>7s}")
        for r in results:
            print(f"{r['id'][:58]:58s} {r['role'][:5]:5s} {r['measured']:9.1f} {r['projected']:9.1f} {100 * r['err']:+7.1f}")
    s = summary(results)
    print()
    for k, v in s.items():
        if v["n"]:
            print(f"{k:12s} n={v['n']:3d}  median |err| {v['median_abs_pct']:5.1f}%  worst |err| {v['worst_abs_pct']:5.1f}%"
                  f"  within 25%: {v['within_25pct']}/{v['n']}")
    groups = sorted({r["group"] for r in results})
    print()
    for g in groups:
        sel = [abs(r["err"]) for r in results if r["group"] == g and r["role"] == "judge"]
        if sel:
            print(f"judge {g:18s} n={len(sel):3d}  median |err| {100 * statistics.median(sel):5.1f}%  worst {100 * max(sel):5.1f}%")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": results, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
