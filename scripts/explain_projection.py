"""Explain a plan's dry-run projection term by term: per kernel its time, efficiency and source.

For one micro-batch on one GPU: every kernel of each layer kind (dense, MoE, sliding-window, MTP,
embedding, head) with forward / input-grad / weight-grad milliseconds, the efficiency it runs at and
the curve + kernel-evidence records it stands on; the communication of one layer (raw and exposed);
the framework profile (fusions, host launch time, CUDA graphs, in-situ efficiency, clock); then the
iteration's breakdown (``projection/explain.py``).  Input: a recipe (any format the CLI reads)
or a row id of ``scripts/validation/runs.json``.

    python scripts/explain_projection.py automodel_h100_dsv3_671b_256gpu
    python scripts/explain_projection.py recipes/megatron/deepseek_v3_671b.sh
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _load(arg: str):
    from primus_launch.plan import Plan

    runs = json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]
    for r in runs:
        if r["id"] == arg:
            return Plan.model_validate(r["plan"]), r
    from primus_launch.adapters import load_recipe

    return load_recipe(arg), None


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    from primus_launch.projection.explain import explain_text
    from primus_launch.projection.dryrun import project_dry_run

    from primus_launch.errors import UserError

    try:
        plan, row = _load(argv[0])
    except UserError as e:  # neither a row id of runs.json nor a readable recipe: one line, exit 2
        print(f"error: {e} (nor a row id of scripts/validation/runs.json)", file=sys.stderr)
        return 2
    res = project_dry_run(plan)
    print(f"{plan.model.name}: {plan.parallel_summary()} on {plan.world_size} x {plan.cluster.gpu} "
          f"({plan.framework}, {plan.training.precision})\n")
    print(explain_text(plan, res))
    line = f"\niteration {res.iteration_time_s:.3f} s, {res.tokens_per_sec_per_gpu:.1f} tokens/s/GPU, MFU {res.mfu:.3f}"
    if row:
        meas = row["measured_tokens_per_sec_per_gpu"]
        line += f"; measured {meas:.1f} tokens/s/GPU ({100 * (res.tokens_per_sec_per_gpu - meas) / meas:+.1f}%)"
    print(line)
    for w in res.warnings:
        print(f"not modelled: {w.flag}={w.value}: {w.effect}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
