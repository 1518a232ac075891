"""Probe: the Primus Mamba / hybrid memory cases read as committed (no environment) and with Primus's FLA fused
linear cross-entropy turned on by the launch environment (``PRIMUS_FUSED_CE=1``, as ``tools/hybrid/
launch_hybrid_faflag.sh`` exports it): projected peak, verdict, loss implementation, step time.

    PYTHONPATH=. python scripts/probe_fla_loss.py [ENV=VALUE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from primus_launch.adapters.primus_yaml import plan_from_text
from primus_launch.plan import Cluster

GiB = 2.0 ** 30
CASES = Path(__file__).resolve().parent / "validation" / "memory_cases.json"


def main(argv: list[str]) -> int:
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.api import project

    env = dict(a.split("=", 1) for a in argv) or {"PRIMUS_FUSED_CE": "1"}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from validate_memory import load_gpus, stage_peak_bytes, verdict_of

    load_gpus()
    for c in json.loads(CASES.read_text())["cases"]:
        pc = c.get("primus_config")
        if not pc or (pc.get("overrides") or {}).get("model_type") != "mamba":
            continue
        hw = c["hardware"]
        cluster = Cluster(gpu=hw["plan_gpu"], num_nodes=max(1, hw["num_gpus"] // hw["gpus_per_node"]),
                          gpus_per_node=hw["gpus_per_node"])
        text = yaml.safe_dump({"modules": {"pre_trainer": pc}}, sort_keys=False)
        name = f"{c.get('primus_model_preset') or c['id']}.yaml"
        row = []
        for le in ({}, env):
            plan = plan_from_text(text, name, env={}, cluster=cluster, launch_env=le)
            rep = estimate_memory(plan)
            m = c.get("measured_peak") or {}
            proj = stage_peak_bytes(rep.stages, m.get("basis", "reserved"), m.get("rank", "max")) / GiB
            step = project(plan).iteration_time_s
            row.append(f"{plan.training.loss_impl}/{plan.training.loss_chunks} {proj:6.1f} GiB "
                       f"{verdict_of(rep):13s} {step:6.3f} s")
        meas = (c.get("measured_peak") or {}).get("gib")
        print(f"{c['id']:50s} {c['outcome']:4s} meas {meas if meas is None else round(meas, 1)!s:>6}  "
              f"| {row[0]} | {row[1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
