"""The prepared device check of the measured path (issue 5): measure the real megatron-core and
torchtitan pieces of the Llama 3.1 8B recipes on the local GPU, project the run, and print the
measured vs dry-run iteration time and per-piece times.

    python scripts/gpu_check.py [--device cuda] [--out results.json]

On a lent H200/H100 this takes a couple of minutes; on the CPU (``--device cpu``) use the tiny
recipe instead (``--recipe recipes/megatron/tiny_gpt_cpu.sh``) to check the path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RECIPES = ["recipes/megatron/llama3.1_8b.sh", "recipes/torchtitan/llama3.1_8b.toml"]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--recipe", action="append", help="recipe(s) to check (default: the two 8B recipes)")
    ap.add_argument("--gpu", help="GPU kind of the projection (default: the recipe's; e.g. h200 on an H200)")
    ap.add_argument("--out", help="write every result as JSON here")
    a = ap.parse_args()

    import torch

    from primus_launch.adapters import load_recipe
    from primus_launch.projection.api import project
    from primus_launch.report.text import measurement_summary

    print(f"torch {torch.__version__}, cuda {torch.version.cuda}, device "
          f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}")
    out = {}
    for rel in a.recipe or DEFAULT_RECIPES:
        plan = load_recipe(ROOT / rel, {"gpu": a.gpu})
        dry = project(plan, dry_run=True)
        t0 = time.perf_counter()
        meas = project(plan, dry_run=False, measure_device=a.device, cache_dir=Path("/tmp/primus-gpu-check-cache"))
        took = time.perf_counter() - t0
        print(f"\n{rel} on {plan.cluster.gpu}: measured {meas.iteration_time_s:.3f} s/iter, dry-run "
              f"{dry.iteration_time_s:.3f} s/iter, ratio measured/dry-run {meas.iteration_time_s / dry.iteration_time_s:.3f} "
              f"(measurement took {took:.0f} s)")
        for line in measurement_summary(meas):  # per piece: time, spread, memory, substitutions
            print(f"  {line}")
        chk = meas.memory_check
        if chk is not None:
            print(f"  memory: measured {chk.measured_peak_bytes_per_gpu / 2**30:.2f} GiB/GPU, analytic "
                  f"{chk.analytic_peak_bytes_per_gpu / 2**30:.2f} GiB ({chk.relative_difference:+.1%}); per layer "
                  f"{json.dumps(chk.per_layer)}")
        for n in meas.notes:
            print(f"  note: {n}")
        out[rel] = {"measured": meas.to_json_dict(), "dry_run": dry.to_json_dict(), "seconds": took}
    if a.out:
        from primus_launch.fileio import atomic_write_text

        atomic_write_text(a.out, json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
