"""Dry-run projection of every bundled recipe: one row each (the table in RESULTS.md).

    python scripts/project_recipes.py
"""

from __future__ import annotations

import sys
from pathlib import Path

from tabulate import tabulate

from primus_launch.adapters import load_recipe
from primus_launch.projection.api import project

ROOT = Path(__file__).resolve().parents[1]
GiB = 1024**3


def recipe_files() -> list[Path]:
    """Every bundled recipe: the Megatron and TorchTitan files, the wrappers and the Primus experiments
    (``recipes/primus/GPU/*.yaml``, one level deeper than the others)."""
    return sorted((ROOT / "recipes").glob("*/*.sh")) + sorted((ROOT / "recipes").glob("*/*.yaml")) \
        + sorted((ROOT / "recipes").glob("*/*.toml")) + sorted((ROOT / "recipes").glob("*.primus.toml")) \
        + sorted((ROOT / "recipes").glob("primus/*/*.yaml"))


def main() -> int:
    rows = []
    for f in recipe_files():
        r = project(load_recipe(f), dry_run=True)
        p = r.plan
        rows.append((str(f.relative_to(ROOT)), f"{r.num_gpus} x {p.cluster.gpu}", p.parallel_summary(),
                     f"{r.iteration_time_s:.2f}", f"{r.tokens_per_sec_per_gpu:,.0f}",
                     f"{r.model_tflops_per_gpu:.0f}", f"{100 * r.mfu:.1f}",
                     f"{r.memory.peak_bytes_per_gpu / GiB:.1f}", "yes" if r.memory.fits else "NO"))
    print(tabulate(rows, headers=["recipe", "GPUs", "parallelism", "s/iter", "tok/s/GPU", "TFLOP/s/GPU",
                                  "MFU %", "peak GiB", "fits"], tablefmt="github"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
