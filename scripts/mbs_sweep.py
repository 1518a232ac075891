"""Project one recipe at several micro-batch sizes (global batch kept): tokens/s/GPU, iteration seconds per
micro-batch, and the MoE / dense layer's host vs GPU time per pass, to set beside a published micro-batch sweep
(per-micro-batch fixed costs: the host's launches, the dispatcher's sync; ``cost/roofline.py``).

    python scripts/mbs_sweep.py RECIPE --mbs 1 2 4 8 12 [--gpu mi355x --nodes 1 --gpus-per-node 8]
        [--set training.moe_expert_gemm=legacy model.multi_latent_attention=true ...]

``RECIPE``: any recipe the CLI reads (a Primus experiment YAML inside a Primus checkout, a Megatron script, ...)
or a row id of ``scripts/validation/runs.json`` (its plan);
``--set``: plan fields (``section.field=value``, JSON values or strings) applied before the sweep, for the
settings a benchmark script passes on its command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from primus_launch.errors import UserError, one_line  # noqa: E402
from primus_launch.plan import PlanError  # noqa: E402


def _value(v: str):
    try:
        return json.loads(v)
    except ValueError:
        return v


def main(argv: list[str]) -> int:
    try:
        return _main(argv)
    except (UserError, PlanError, ValueError) as e:
        print(f"mbs_sweep: error: {one_line(e)}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recipe")
    ap.add_argument("--mbs", type=int, nargs="+", required=True)
    ap.add_argument("--gpu")
    ap.add_argument("--nodes", type=int)
    ap.add_argument("--gpus-per-node", type=int)
    ap.add_argument("--set", nargs="*", default=[], metavar="SECTION.FIELD=VALUE")
    a = ap.parse_args(argv)
    from primus_launch.adapters import load_recipe
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.dryrun import project_dry_run

    over = {k: v for k, v in (("gpu", a.gpu), ("num_nodes", a.nodes), ("gpus_per_node", a.gpus_per_node)) if v}
    rows = {r["id"]: r for r in json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]}
    if a.recipe in rows:
        from primus_launch.plan import Plan

        plan = Plan.model_validate(rows[a.recipe]["plan"])
        if over:
            plan = plan.with_changes(cluster=over)
    else:
        plan = load_recipe(a.recipe, over or None)
    upd: dict[str, dict] = {}
    for item in a.set:
        key, _, val = item.partition("=")
        sec, _, field = key.partition(".")
        upd.setdefault(sec, {})[field] = _value(val)
    if upd:
        plan = plan.with_changes(**upd)
    print(f"{plan.model.name}: {plan.parallel_summary()} on {plan.world_size} x {plan.cluster.gpu}, "
          f"GBS {plan.training.global_batch_size}")
    print(f"{'MBS':>4} {'tokens/s/GPU':>13} {'s / micro-batch':>16}  host vs GPU per layer (ms, fwd / bwd)")
    for mbs in a.mbs:
        try:
            p = plan.with_changes(training={"micro_batch_size": mbs})
            r = project_dry_run(p)
        except (UserError, PlanError, ValueError) as e:   # e.g. a global batch MBS x DP does not divide
            print(f"{mbs:>4}  skipped: {one_line(e)}")
            continue
        per_mb = mbs * p.model.seq_length / r.tokens_per_sec_per_gpu
        hs = layer_op_times(p).get("_host", {})
        kind = "moe" if "moe" in hs else "dense"
        hf, hb, gf, gb = hs[kind]
        print(f"{mbs:>4} {r.tokens_per_sec_per_gpu:>13,.0f} {per_mb:>16.3f}  {kind}: host {1e3 * hf:.2f} / "
              f"{1e3 * hb:.2f} vs GPU {1e3 * gf:.2f} / {1e3 * gb:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
