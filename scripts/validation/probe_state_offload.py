"""Project one ``current_runs.json`` row with and without its chunked optimizer-state offload (Megatron-LM dev
``--chunked-optimizer-state-offload``): iteration time, optimizer seconds, and per stage the optimizer bytes and
the allocated / total peak.  The row goes through the Megatron adapter as ``build_runs.py`` builds it.

    python scripts/validation/probe_state_offload.py [ROW_ID]   # default: the DeepSeek-V3 GB200 row
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]


def main() -> int:
    from build_runs import flag_row

    from primus_launch.plan import Plan
    from primus_launch.projection.api import project

    rid = sys.argv[1] if len(sys.argv) > 1 else "mlm_moe_deepseek_v3_gb200_mxfp8_256gpu_tp1pp4ep64"
    r = next(x for x in json.loads((HERE / "current_runs.json").read_text()) if x["id"] == rid)
    row, why = flag_row(r, "judge", "current_mlm")
    if row is None:
        print(f"{rid}: {why}")
        return 1
    plan = Plan.model_validate(row["plan"])
    o = plan.training.offload
    print(f"{rid}: optimizer_state_fraction {o.optimizer_state_fraction}, chunk {o.optimizer_state_chunk_mb} MiB; "
          f"measured {row['measured_tokens_per_sec_per_gpu']:.1f} tokens/s/GPU")
    off = plan.model_copy(update={"training": plan.training.model_copy(update={"offload": o.model_copy(
        update={"optimizer_state_fraction": 0.0, "optimizer_state_chunk_mb": 0})})})
    for name, p in (("without", off), ("with", plan)):
        res = project(p)
        print(f"{name:8s} iteration {res.iteration_time_s:.4f} s, optimizer {res.time_breakdown['optimizer']:.4f} s, "
              f"{res.tokens_per_sec_per_gpu:.1f} tokens/s/GPU, verdict {res.memory.verdict}")
        for s in res.memory.stages:
            print(f"    stage {s.stage}: optimizer {s.optimizer_bytes / 2**30:.3f} GiB, allocated "
                  f"{s.allocated_bytes / 2**30:.3f} GiB, total {s.total_bytes / 2**30:.3f} GiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
