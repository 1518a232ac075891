"""Probe TorchTitan MoE projections against public TorchTitan MoE measurements (issue 28, "MoE coarse").

Diagnostics only: nothing here changes the model or the validation rows.  Each line: the plan as the TorchTitan
adapter builds it, and the same plan with ``training.moe_glue_eager`` off (the v0.2 MoE glue priced as the generic
permutes, as before ``cost/titan_moe.py``), tokens/s/GPU and the error against the measurement.

1. The Llama 4 Scout GB200 rows of ``scripts/validation/runs.json`` as built (torchao moe_training README's table,
   the run's first publication: local batch 1, no AC; torchtitan mxfp8.md's later copy says local batch 10, which
   cannot fit; measured 6169 / 7401, 1.20x) and switched to the configuration the PyTorch blog states for its
   run of the same model on the same cluster ("MXFP8 Training for MoEs: 1.3x training speedup vs BF16 for Llama4
   Scout on GB200 cluster": local batch 1, full AC, torchtitan 0.2.1; +30.2 %, no absolute tokens/s published):
   the projected MXFP8 / BF16 ratio beside the measured one.
2. torchtitan#1789 (2025-10-02): DeepSeek-V3 16B on 8 H100 80GB, deepseek_v3_16b.toml with local batch 4, EP 8,
   per-op SAC, the loss compiled (the model eager): the issue's log prints ``tps`` 11,636 / 11,758 / 11,533 /
   11,254 at steps 10-40 (the memory case ``titan_dsv3_16b_h100_8gpu_lbs4_ep8`` of
   ``scripts/validation/memory_cases.json``, whose torchtitan job this reads).

3. torchao's Llama 3 8B MXFP8 row with its MX linears' dim1 casts on torchao's CUDA kernel instead of the Triton
   kernel TorchTitan v0.1 / v0.2 default to (``training.mx_dim1_cast_kernel``), against torchtitan PR #1427's
   measured gain.
4. torchao's single-MoE-layer benchmark (``benchmarks/prototype/moe_training/bench_moe_layer.py``: torchtitan's
   ``MoE``, 8 local experts, top-1 forced balance, one shared expert, 131072 tokens, compiled, forward + backward,
   B200; only the routed experts in MXFP8) at Llama 4 dims (torchao moe_training README @c7d0b5814: BF16 275.270 /
   MXFP8 192.420 ms) and at DeepSeek-V3 16B dims (torchtitan#2086: 16.882 / 17.710 ms) beside the roofline's own
   curves for the layer's GEMMs: the routed experts' three grouped GEMMs (forward, dgrad, wgrad) on the torch
   grouped curves, torchao's unfused casts (3 B per element and orientation: A, grad_out, weights) at streaming
   speed and its weight-gradient scale rearranges (``cost/titan_moe.py``), and the BF16 shared expert.  The router, permutes and element-wise ops, the same in both precisions, are
   left out, so the projected ratio is an upper bound of what the layer's kernels would give.

    python scripts/titan_moe_probe.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VAL = ROOT / "scripts" / "validation"
# torchtitan#1789's log, steps 10, 20, 30, 40 (tps per rank)
DSV3_16B_TPS = (11636.0, 11758.0, 11533.0, 11254.0)
BLOG_SPEEDUP = 1.302
# bench_moe_layer.py, (name, dim, hidden_dim, BF16 ms, MXFP8 ms, source)
LAYER_BENCH = (("Llama 4 dims (5120 / 8192)", 5120, 8192, 275.270, 192.420, "torchao moe_training README @c7d0b5814"),
               ("DeepSeek-V3 16B dims (2048 / 1408)", 2048, 1408, 16.882, 17.710, "torchtitan#2086"))


def _layer_gemms(dim: int, hidden: int, groups: int, tokens: int, mx: bool) -> float:
    """Seconds of the benchmark layer's GEMMs (+ torchao's casts with ``mx``) on the roofline's curves (B200)."""
    from primus_launch.projection.cost.compute import elementwise_time, gemm_time
    from primus_launch.projection.cost.titan_moe import k_groups_rearrange_seconds

    fmt, m, t = ("mxfp8" if mx else "bf16"), tokens // groups, 0.0
    for n, k in ((hidden, dim), (hidden, dim), (dim, hidden)):   # w1, w3, w2
        t += sum(gemm_time(a, b, c, "b200", "bf16", groups, fmt, "torch", wgrad=w)
                 for a, b, c, w in ((m, n, k, False), (m, k, n, False), (k, n, m, True)))
        if mx:
            t += elementwise_time(6.0 * (tokens * k + tokens * n + groups * n * k), "b200")
            t += k_groups_rearrange_seconds(m)
        t += sum(gemm_time(a, b, c, "b200") for a, b, c in ((tokens, n, k), (tokens, k, n), (k, n, tokens)))
    return t


def _tok(plan) -> float:
    from primus_launch.projection.dryrun import project_dry_run

    return project_dry_run(plan).tokens_per_sec_per_gpu


def _switched(plan, **training):
    """``plan`` with training fields replaced, validated again."""
    from primus_launch.plan import Plan

    d = plan.model_dump()
    d["training"].update(training)
    return Plan.model_validate(d)


def _both(plan) -> tuple[float, float]:
    return _tok(plan), _tok(_switched(plan, moe_glue_eager=False))


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from primus_launch.adapters.torchtitan import plan_from_job
    from primus_launch.plan import Cluster, Plan

    rows = {r["id"]: r for r in json.loads((VAL / "runs.json").read_text())["rows"]}
    print("Llama 4 Scout, 256 GB200 (tokens/s/GPU: v0.2 eager glue / generic permutes; error vs measured)")
    blog = {}
    for key in ("bf16", "mxfp8"):
        r = rows[f"torchtitan_gb200_llama4_scout_{key}"]
        plan = Plan.model_validate(r["plan"])
        meas = float(r["measured_tokens_per_sec_per_gpu"])
        on, off = _both(plan)
        print(f"  table {key:6s} measured {meas:7.0f}  projected {on:7.0f} ({100 * (on / meas - 1):+.1f} %)"
              f" / {off:7.0f} ({100 * (off / meas - 1):+.1f} %)")
        blog[key] = _both(_switched(plan, micro_batch_size=1, global_batch_size=256,
                                    recompute={"granularity": "full", "method": "uniform", "num_layers": 1}))
    for i, what in enumerate(("v0.2 eager glue", "generic permutes")):
        print(f"  blog config (local batch 1, full AC), {what}: MXFP8 / BF16 projected "
              f"{blog['mxfp8'][i] / blog['bf16'][i]:.3f}, measured {BLOG_SPEEDUP:.3f}")
    d = json.loads((VAL / "memory_cases.json").read_text())
    cases = d["cases"] if isinstance(d, dict) and "cases" in d else d
    case = next(c for c in cases if c["id"] == "titan_dsv3_16b_h100_8gpu_lbs4_ep8")
    plan = plan_from_job(case["torchtitan_config"], Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
    on, off = _both(plan)
    meas = statistics.median(DSV3_16B_TPS)
    print(f"DeepSeek-V3 16B, 8 H100 (torchtitan#1789): measured {meas:.0f} (median of steps 10-40); projected "
          f"{on:.0f} ({100 * (on / meas - 1):+.1f} %) / generic permutes {off:.0f} ({100 * (off / meas - 1):+.1f} %)")
    r = rows["torchao_b200_llama3_8b_8gpu_mxfp8_cublas"]
    plan = Plan.model_validate(r["plan"])
    gain = _tok(_switched(plan, mx_dim1_cast_kernel="cuda")) / _tok(plan)
    print(f"torchao Llama 3 8B mxfp8_cublas (8 B200): dim1 casts on the CUDA kernel instead of the row's "
          f"{plan.training.mx_dim1_cast_kernel}: projected {100 * (gain - 1):+.1f} % tokens/s (torchtitan PR #1427 "
          "measured +1.5 .. +2.5 %)")
    print("torchao bench_moe_layer (B200, 131072 tokens, 8 local experts): BF16 / MXFP8 time")
    for name, dim, hid, bf, mx, src in LAYER_BENCH:
        pb, pm = _layer_gemms(dim, hid, 8, 131072, False), _layer_gemms(dim, hid, 8, 131072, True)
        print(f"  {name}: measured {bf / mx:.3f} ({src}); the roofline's GEMMs + casts {pb / pm:.3f} "
              f"({1e3 * pb:.1f} / {1e3 * pm:.1f} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
