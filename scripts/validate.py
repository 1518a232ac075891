"""Validate the dry-run projection against published, measured training runs.

Runs :func:`primus_launch.projection.dryrun.project_dry_run` on every row of
``scripts/validation/runs.json`` (built by ``scripts/validation/build_runs.py``) and prints each
row's projected vs measured tokens/s/GPU and the error, then the median and worst absolute
percentage error of:

- the calibration rows (``scripts/calibrate.py`` fits the framework constants on them) and the
  judge rows of the shared set (older papers / benchmarks, NeMo FP8 and long-sequence rows,
  AutoModel MoE rows);
- the held-out current production rows (``current_runs.json``: judge only, never tuned);
- per group (dense BF16, dense FP8, MoE, long sequence / CP), per GPU family and per source, with
  each source's FLOP convention (how its TFLOP/s were turned into tokens/s).

Issue-15 targets: judge median |err| <= 7%, <= 10% in every group with >= 5 rows, no row beyond 25%.

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
GROUPS = ("dense_bf16", "dense_fp8", "moe", "long_seq_cp")


def load_rows(path: Path = RUNS) -> list[dict]:
    return json.loads(path.read_text())["rows"]


def evaluate(rows: list[dict]) -> list[dict]:
    """Project every row; returns dicts with id, role, groups, measured, projected, err (fraction)."""
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    out = []
    for row in rows:
        plan = Plan.model_validate(row["plan"])
        res = project_dry_run(plan)
        proj = res.tokens_per_sec_per_gpu
        meas = row["measured_tokens_per_sec_per_gpu"]
        g = row.get("groups") or {}
        out.append(dict(id=row["id"], role=row["role"], dense=row["dense"], group=row["source_group"],
                        primary=g.get("primary", "?"), family=g.get("gpu_family", "?"),
                        held_out=bool(row.get("held_out")), measured=meas, projected=proj,
                        err=(proj - meas) / meas, mfu=res.mfu, convention=row.get("flops_convention") or "",
                        comparison=row.get("comparison", "")))
    return out


def stats(sel: list[dict]) -> dict:
    errs = [abs(r["err"]) for r in sel]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median_abs_pct": 100 * statistics.median(errs), "worst_abs_pct": 100 * max(errs),
            "within_25pct": sum(e <= 0.25 for e in errs),
            "mean_signed_pct": 100 * statistics.mean(r["err"] for r in sel)}


def summary(results: list[dict]) -> dict:
    judge = [r for r in results if r["role"] == "judge" and not r["held_out"]]
    held = [r for r in results if r["held_out"]]
    out = {
        "calibration": stats([r for r in results if r["role"] == "calibration"]),
        "judge": stats(judge),
        "held_out_current": stats(held),
        "judge_all": stats(judge + held),
    }
    for g in GROUPS:
        out[f"judge:{g}"] = stats([r for r in judge if r["primary"] == g])
        out[f"held_out:{g}"] = stats([r for r in held if r["primary"] == g])
    for fam in sorted({r["family"] for r in results}):
        out[f"judge:{fam}"] = stats([r for r in judge if r["family"] == fam])
        out[f"held_out:{fam}"] = stats([r for r in held if r["family"] == fam])
    return out


def _line(name: str, v: dict) -> str:
    return (f"{name:26s} n={v['n']:3d}  median |err| {v['median_abs_pct']:5.1f}%  worst |err| {v['worst_abs_pct']:5.1f}%"
            f"  within 25%: {v['within_25pct']}/{v['n']}  mean {v['mean_signed_pct']:+5.1f}%")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write per-row results and the summary here")
    ap.add_argument("--quiet", action="store_true", help="summary only")
    args = ap.parse_args(argv)
    results = evaluate(load_rows())
    if not args.quiet:
        print(f"{'row':58s} {'role':5s} {'group':11s} {'family':9s} {'measured':>9s} {'projected':>9s} {'err%':>7s}")
        for r in results:
            role = "held" if r["held_out"] else r["role"][:5]
            print(f"{r['id'][:58]:58s} {role:5s} {r['primary']:11s} {r['family'][:9]:9s} {r['measured']:9.1f} "
                  f"{r['projected']:9.1f} {100 * r['err']:+7.1f}")
    s = summary(results)
    print()
    for k, v in s.items():
        if v["n"]:
            print(_line(k, v))
    print()
    print("per source (judge rows; FLOP convention of the source: how its figure became tokens/s)")
    for g in sorted({r["group"] for r in results}):
        sel = [r for r in results if r["group"] == g and r["role"] == "judge"]
        if not sel:
            continue
        conv = sel[0]["convention"].split(":")[0].split(";")[0][:70] or sel[0]["comparison"][:70]
        st = stats(sel)
        print(f"  {g:22s} n={st['n']:3d}  median {st['median_abs_pct']:5.1f}%  worst {st['worst_abs_pct']:5.1f}%  [{conv}]")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": results, "summary": s}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
