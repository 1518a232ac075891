"""`--tune --dry-run` of every bundled recipe, as a user runs it: one row each (the table in
RESULTS.md) with the search's certificate, the best plan's gain (and whether it lies inside the original's
and the best's iteration-time error bands: ``gain_inside_band``) and the command's wall time.

    python scripts/tune_recipes.py [--only SUBSTRING]

Each tune is the CLI in its own process (``python -m primus_launch --tune R --dry-run --json --out
...``), so the wall time includes the interpreter's start and the recipe's read; the tuned recipes go
to a temporary folder.  The issue's target: every row certified, each in under 60 s on the 2-core
development machine.  The search stops at a work limit, never at a wall time, so the plans and the
certificates do not depend on the machine's load; the times do.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tabulate import tabulate

ROOT = Path(__file__).resolve().parents[1]


def recipes() -> list[Path]:
    """The bundled recipes: the list of ``scripts/project_recipes.py`` and the Primus experiments."""
    return sorted((ROOT / "recipes").glob("*/*.sh")) + sorted((ROOT / "recipes").glob("*/*.yaml")) \
        + sorted((ROOT / "recipes").glob("*/*.toml")) + sorted((ROOT / "recipes").glob("*.primus.toml")) \
        + sorted((ROOT / "recipes").glob("primus/*/*.yaml"))


def tune_row(recipe: Path, out_dir: Path) -> tuple:
    """(recipe, legal plans, scored, certified or the stated gap, gain %, gain inside the bands, wall s) of
    one CLI tune."""
    out = out_dir / ("tuned-" + recipe.name)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "primus_launch", "--tune", str(recipe), "--dry-run", "--json",
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    wall = time.monotonic() - t0
    name = str(recipe.relative_to(ROOT))
    if p.returncode != 0:
        return (name, "-", "-", f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1][:60]}", "-", "-",
                f"{wall:.1f}")
    res = json.loads(p.stdout)
    c = res.get("certificate") or {}
    state = ("certified" if c.get("certified") else
             f"work limit: at most {100 * c['gap']:.1f} % from the optimum" if c.get("gap") is not None
             else "no certificate")
    inside = {True: "yes", False: "no"}.get(res.get("gain_inside_band"), "-")
    return (name, f"{c.get('plans', 0):,}", f"{c.get('scored', 0):,}", state, f"{100 * res['gain']:+.1f}", inside,
            f"{wall:.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="tune only the recipes whose path contains this")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for r in recipes():
            if args.only in str(r.relative_to(ROOT)):
                rows.append(tune_row(r, Path(d)))
                print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    print(tabulate(rows, headers=["recipe", "legal plans", "scored", "search", "gain %", "in bands", "wall s"],
                   tablefmt="github", disable_numparse=True))
    done = sum(r[3] == "certified" for r in rows)
    slowest = max((float(r[6]) for r in rows), default=0.0)
    inside = sum(r[5] == "yes" for r in rows)
    print(f"\n{done} of {len(rows)} certified; the slowest took {slowest:.1f} s; {inside} gains lie inside the "
          "original's and the best's error bands ('in bands': either could run faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
