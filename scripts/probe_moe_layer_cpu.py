"""Probe (MEMORY.md round 27): one MoE layer of a Megatron-LM functional-test case traced on the CPU against the model.

Builds the plan of a memory case (``validate_memory.plan_of_case``), sets EP 1, PP 1, no DP sharding and TP ranks only (no
expert all-gather), and measures what autograd keeps for one MoE and one dense layer with megatron-core's own
local modules on real CPU tensors (``tests/mem_measure.measure_step``, ``fake=False``: the routing needs data);
prints them beside ``memory.activations.layer_activation_bytes`` (``MCORE_LOCAL``, what the local modules keep on
the CPU, and the GPU's TE default).  Nothing is written.

    PYTHONPATH=.:tests python scripts/probe_moe_layer_cpu.py [CASE_ID]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests", ROOT / "scripts", ROOT / "scripts" / "validation"):
    sys.path.insert(0, str(p))

MiB = 2**20
DEFAULT = "mlm_functional_moe_gpt3_moe_mcore_te_ep8_resume_torch_dist_dist_optimizer"


def main(argv: list[str]) -> int:
    import validate_memory as vm
    from mem_measure import measure_step

    from primus_launch.projection.memory.activations import MCORE_LOCAL, layer_activation_bytes

    cid = argv[0] if argv else DEFAULT
    cases = {c["id"]: c for c in json.loads((ROOT / "scripts/validation/memory_cases.json").read_text())["cases"]}
    plan = vm.plan_of_case(cases[cid])
    mbs, seq = plan.training.micro_batch_size, plan.model.seq_length
    tp = plan.parallel.tp
    p1 = plan.with_changes(parallel=dict(ep=1, pp=1, vpp=1, dp_sharding="none", pipeline_layers_first_stage=None,
                                         pipeline_layers_last_stage=None), model=dict(num_layers=2),
                           cluster=dict(num_nodes=1, gpus_per_node=tp),
                           training=dict(global_batch_size=mbs))
    for name, p, moe in (("moe", p1, True), ("dense", p1.with_changes(model=dict(num_experts=None)), False)):
        one = measure_step(p, 1, post_process=False, fake=False)
        two = measure_step(p, 2, post_process=False, fake=False)
        kw = dict(seq=seq, mbs=mbs, tp=p.parallel.tp, sp=p.parallel.sequence_parallel, moe=moe)
        print(f"{cid} {name:5s} layer: traced {(two['activations'] - one['activations']) / MiB:8.2f} MiB  "
              f"model local {layer_activation_bytes(p.model, impl=MCORE_LOCAL, **kw).full / MiB:8.2f}  "
              f"model TE {layer_activation_bytes(p.model, **kw).full / MiB:8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
