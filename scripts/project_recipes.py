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


def _fig(v: float, decimals: int) -> str:
    """``v`` to ``decimals`` places, or to two significant digits where that would print a figure that is
    not zero as 0 (the tiny GPT's 0.042 TFLOP/s/GPU read "0", its 0.011 s/iter "0.01")."""
    return f"{v:.2g}" if 0 < abs(v) < 10 ** -decimals * 10 else f"{v:,.{decimals}f}"


def main() -> int:
    rows = []
    for f in recipe_files():
        r = project(load_recipe(f), dry_run=True)
        p = r.plan
        rows.append((str(f.relative_to(ROOT)), f"{r.num_gpus} x {p.cluster.gpu}", p.parallel_summary(),
                     _fig(r.iteration_time_s, 2), f"{r.tokens_per_sec_per_gpu:,.0f}",
                     _fig(r.model_tflops_per_gpu, 0), _fig(100 * r.mfu, 1),
                     f"{r.memory.peak_bytes_per_gpu / GiB:.1f}", r.memory.verdict))
    # the figures as formatted (tabulate's number parsing printed 49.0 as "49", 1.20 as "1.2")
    print(tabulate(rows, headers=["recipe", "GPUs", "parallelism", "s/iter", "tok/s/GPU", "TFLOP/s/GPU",
                                  "MFU %", "peak GiB", "memory"], tablefmt="github", disable_numparse=True,
                   colalign=("left", "left", "left") + ("right",) * 5 + ("left",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
