"""How a validation row's residual compares with its modelled core attention (issue 28, GPT-OSS rows).

For each row (default: the Megatron-Bridge 26.04 GPT-OSS 120B rows of ``scripts/validation/runs.json``):
the measured and projected iteration time, the residual (measured - projected), the modelled core
attention of one iteration on the busiest stage (micro-batches x that stage's layers x forward + backward
of the layer kinds' attention kernels: full-attention and sliding-window layers), the residual over it,
what the full-attention layers would add if Blackwell cuDNN attention at head dim 64 ran at the rate
one public cuDNN measurement shows instead of the curve's: Dao-AILab/flash-attention PR #2605 (B200 table,
cuDNN column, BF16 forward, causal, batch 8, seqlen 4096, head dim 64, 32 heads: 770 TFLOP/s), against the
``blackwell/cudnn`` curve's rate at that shape, and the residual per (layer x micro-batch) of that stage.  No row is changed: the kernel-evidence file holds no
head-dim-64 full-attention record on Blackwell, and that table's GPU and cuDNN version are not stated
beyond its MFU denominator (2.25 PF).  Since the head-dim knee (issue 28, attn64: ``kernels.head_dim_factor``,
Blackwell Ultra's knee from cudnn-frontend's B300 head-dim-80 sweep, taken by Blackwell) the curve prices
head dim 64 at ~0.64x head dim 128, so this column shrinks to what the figure still differs by.

    python scripts/attention_residual.py [ROW_ID ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FA2605_B200_CUDNN_D64_CAUSAL_S4096 = 770e12   # FLOP/s (module doc)


def _curve_rate_b200_d64() -> float:
    from primus_launch.projection.cost.fitted import FITTED
    from primus_launch.projection.cost.kernels import AttnCurve, attention_flops, attention_seconds
    from primus_launch.projection.hardware.gpus import get_gpu

    c = FITTED["attention"]["blackwell/cudnn"]
    curve = AttnCurve(**{k: c[k] for k in ("fwd", "bwd", "s0", "d0", "tc", "t0")}, dp=c.get("dp", 1.0))
    b, h, s, d = 8, 32, 4096, 64
    t = attention_seconds(b, h, s, s, d, d, True, None, get_gpu("b200").peak_flops_bf16, curve, False)
    return attention_flops(b, h, s, s, d, d, True) / t


def main(argv: list[str]) -> int:
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.roofline import layer_op_times
    from primus_launch.projection.dryrun import project_dry_run

    rows = json.loads((ROOT / "scripts" / "validation" / "runs.json").read_text())["rows"]
    ids = argv or [r["id"] for r in rows if r["id"].startswith("mbridge2604_") and "gpt_oss" in r["id"]]
    slow = _curve_rate_b200_d64() / FA2605_B200_CUDNN_D64_CAUSAL_S4096
    print(f"blackwell/cudnn curve at B200 d64 causal s4096: {_curve_rate_b200_d64() / 1e12:.0f} TFLOP/s; "
          f"FA PR #2605 cuDNN: {FA2605_B200_CUDNN_D64_CAUSAL_S4096 / 1e12:.0f} (x{slow:.2f} the time)")
    print(f"{'row':46s} {'meas s':>7s} {'proj s':>7s} {'resid s':>7s} {'attn s':>7s} {'resid/attn':>10s} "
          f"{'d64 extra s':>11s} {'resid ms/(layer x mb)':>21s}")
    for rid in ids:
        row = next(r for r in rows if r["id"] == rid)
        plan = Plan.model_validate(row["plan"])
        res = project_dry_run(plan)
        t_meas = res.iteration_time_s * res.tokens_per_sec_per_gpu / row["measured_tokens_per_sec_per_gpu"]
        ops = layer_op_times(plan)
        att = {k: sum(o[1] + o[2] + o[3] for o in v if o[4][0] == "attention")
               for k, v in ops.items() if not k.startswith("_")}
        m, p = plan.model, plan.parallel
        n_win = m.num_window_layers
        per_stage = (m.num_layers - n_win) * att.get("moe", att.get("dense", 0.0)) + \
            n_win * att.get("moe_window", att.get("dense_window", 0.0))
        attn = plan.num_microbatches * per_stage / p.pp
        full = plan.num_microbatches * (m.num_layers - n_win) * att.get("moe", att.get("dense", 0.0)) / p.pp
        d64 = (slow - 1.0) * full if plan.cluster.gpu in ("b200", "b300", "gb200", "gb300") and m.head_dim == 64 \
            else 0.0
        resid = t_meas - res.iteration_time_s
        print(f"{rid:46s} {t_meas:7.3f} {res.iteration_time_s:7.3f} {resid:7.3f} {attn:7.3f} "
              f"{resid / attn if attn else float('nan'):10.2f} {d64:11.3f} "
              f"{1e3 * resid / (plan.num_microbatches * m.num_layers / p.pp):21.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
