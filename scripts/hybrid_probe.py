"""Project the held-out hybrid Mamba rows of ``scripts/validation/current_runs.json`` (Nemotron 3 Nano and Super,
judge only)
without rebuilding ``runs.json``: each row's ``megatron_flags`` through ``build_runs.flag_row`` (the Megatron
adapter, as ``build_runs.py`` will), then the dry run; prints projected vs published tokens/s/GPU, the model
TFLOP/s/GPU by the projection's FLOP count and the memory verdict.

    PYTHONPATH=. python scripts/hybrid_probe.py [--primus DIR]

``--primus DIR`` (``git -C MIRROR archive HEAD primus/configs examples/megatron/configs/MI300X | tar -x -C DIR`` of
AMD-AGI/Primus, mirror @2026-08-22) also projects Primus's ``examples/megatron/configs/MI300X/mamba_370M-pretrain.yaml``
(48 Mamba layers, MBS 52, GBS 416 on 8 MI300X), whose comment states a measurement: "MI300X max batch (8 GPUs):
GBS=416, 258.6 TFLOP/s, 98.5% mem (BS=448 OOM)".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))


def main() -> int:
    from build_runs import flag_row

    from primus_launch.plan import Plan
    from primus_launch.projection.cost.flops import model_flops_per_token
    from primus_launch.projection.dryrun import project_dry_run

    rows = [r for r in json.loads((ROOT / "scripts" / "validation" / "current_runs.json").read_text())
            if (r.get("architecture") or {}).get("hybrid_override_pattern")]
    errs = []
    for r in rows:
        row, why = flag_row(r, "judge", "current_" + r["id"].split("_")[0])
        if row is None:
            print(f"{r['id']}: not projected: {why}")
            continue
        plan = Plan.model_validate(row["plan"])
        res = project_dry_run(plan)
        meas, proj = row["measured_tokens_per_sec_per_gpu"], res.tokens_per_sec_per_gpu
        err = (proj - meas) / meas
        errs.append(abs(err))
        tf = proj * model_flops_per_token(plan) / 1e12
        print(f"{r['id']:48s} measured {meas:8.0f}  projected {proj:8.0f}  err {100 * err:+6.1f}%  "
              f"({tf:5.0f} model TFLOP/s vs {r['measured']['tflops_per_gpu']} published)  memory "
              f"{res.memory.peak_bytes_per_gpu / 2**30:.1f} GiB {res.memory.verdict}")
        for w in res.warnings:
            print(f"    not modelled: {w.flag}={w.value}")
    if errs:
        errs.sort()
        print(f"{len(errs)} rows: median |err| {100 * errs[len(errs) // 2]:.1f}%, worst {100 * errs[-1]:.1f}%")
    if "--primus" in sys.argv:
        from primus_launch.adapters.primus_yaml import load_primus_yaml
        from primus_launch.plan import Cluster
        from primus_launch.projection.memory.estimate import estimate_memory

        exp = Path(sys.argv[sys.argv.index("--primus") + 1]) / "examples/megatron/configs/MI300X/mamba_370M-pretrain.yaml"
        plan = load_primus_yaml(exp, Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8), env={})
        res = project_dry_run(plan)
        tf = res.tokens_per_sec_per_gpu * model_flops_per_token(plan) / 1e12
        print(f"Primus mamba_370M MI300X MBS 52: projected {tf:.1f} model TFLOP/s vs 258.6 stated ({100 * (tf / 258.6 - 1):+.1f}%)")
        for mbs in (52, 56):
            mem = estimate_memory(plan.with_changes(training={"micro_batch_size": mbs, "global_batch_size": 8 * mbs}))
            print(f"  MBS {mbs}: projected peak {mem.peak_bytes_per_gpu / 2**30:.1f} GiB of {mem.capacity_bytes / 2**30:.1f} "
                  f"({100 * mem.peak_bytes_per_gpu / mem.capacity_bytes:.1f}%, {mem.verdict}); stated: "
                  + ("98.5% of memory" if mbs == 52 else "out of memory"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
