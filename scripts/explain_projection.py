"""Print the per-operation costs of one layer of a plan's dry-run projection.

For one micro-batch on one GPU: every kernel of a dense and (for MoE models) an MoE decoder layer
with its forward / input-grad / weight-grad milliseconds (``dryrun.layer_op_times``), the
communication of one layer (TP, CP, EP dispatch + combine from ``iteration``), then the
iteration's time breakdown. Input: a recipe (any format the CLI reads) or a row id of
``scripts/validation/runs.json``.

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
    if len(argv) != 1:
        print(__doc__)
        return 2
    from primus_launch.projection.dryrun import layer_op_times, project_dry_run
    from primus_launch.projection.iteration import _cp_times, _ep_times, _tp_times
    from primus_launch.projection.layout import layout

    plan, row = _load(argv[0])
    ms = 1e3
    ops = layer_op_times(plan)
    for kind in ("dense", "moe"):
        if kind not in ops:
            continue
        print(f"\n{kind} layer, one micro-batch on one GPU (ms)")
        print(f"{'op':58s} {'fwd':>8s} {'bwd_in':>8s} {'bwd_w':>8s} {'total':>8s}")
        tot = [0.0, 0.0, 0.0]
        for name, f, bi, bw in ops[kind]:
            print(f"{name[:58]:58s} {f * ms:8.3f} {bi * ms:8.3f} {bw * ms:8.3f} {(f + bi + bw) * ms:8.3f}")
            tot = [tot[0] + f, tot[1] + bi, tot[2] + bw]
        print(f"{'sum (compute)':58s} {tot[0] * ms:8.3f} {tot[1] * ms:8.3f} {tot[2] * ms:8.3f} {sum(tot) * ms:8.3f}")
    lay = layout(plan)
    gpu = plan.cluster.gpu
    print("\ncommunication of one layer, one micro-batch (ms, before overlap)")
    for name, (f, b) in (("TP", _tp_times(plan, gpu, lay)), ("CP (ring, before hiding)", _cp_times(plan, gpu, lay)),
                         (f"EP {plan.training.moe_token_dispatcher} dispatch+combine (MoE layer)",
                          _ep_times(plan, gpu, lay))):
        print(f"{name:58s} fwd {f * ms:8.3f}  bwd {b * ms:8.3f}")
    print(f"EP group: {lay.ep}")
    rc = plan.training.recompute
    print(f"recompute: {rc.granularity}; micro-batches {plan.num_microbatches}; pp {plan.parallel.pp} vpp {plan.parallel.vpp}")
    res = project_dry_run(plan)
    print("\niteration breakdown (s): " + ", ".join(f"{k} {v:.3f}" for k, v in res.time_breakdown.items()))
    line = f"iteration {res.iteration_time_s:.3f} s, {res.tokens_per_sec_per_gpu:.1f} tokens/s/GPU, MFU {res.mfu:.3f}"
    if row:
        meas = row["measured_tokens_per_sec_per_gpu"]
        line += f"; measured {meas:.1f} tokens/s/GPU ({100 * (res.tokens_per_sec_per_gpu - meas) / meas:+.1f}%)"
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
