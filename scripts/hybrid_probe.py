"""Project the held-out hybrid Mamba rows of ``scripts/validation/current_runs.json`` (Nemotron 3 Nano and Super,
judge only)
without rebuilding ``runs.json``: each row's ``megatron_flags`` through ``build_runs.flag_row`` (the Megatron
adapter, as ``build_runs.py`` will), then the dry run; prints projected vs published tokens/s/GPU, the model
TFLOP/s/GPU by the projection's FLOP count and the memory verdict.

    PYTHONPATH=. python scripts/hybrid_probe.py [--primus DIR] [--decompose [--no-ssd-factor]] [--ssd-bytes]

``--primus DIR`` (``git -C MIRROR archive HEAD primus/configs examples/megatron/configs/MI300X | tar -x -C DIR`` of
AMD-AGI/Primus, mirror @2026-08-22) also projects Primus's ``examples/megatron/configs/MI300X/mamba_370M-pretrain.yaml``
(48 Mamba layers, MBS 52, GBS 416 on 8 MI300X), whose comment states a measurement: "MI300X max batch (8 GPUs):
GBS=416, 258.6 TFLOP/s, 98.5% mem (BS=448 OOM)".

``--ssd-bytes`` is a what-if, not the model: it prices the SSD scan by the HBM bytes of mamba_ssm's five forward
kernels (:func:`ssd_fwd_bytes`, read from ``ops/triton/ssd_combined.py`` ``_mamba_chunk_scan_combined_fwd`` @e9594ce)
relative to the vLLM PR #27299 record's shape (head dim 64, state 128, 1 group of 128 heads, chunk 256, no ``z``),
instead of the model's ``P N / (64 x 128)``: how far the rows move if the kernels scale with their traffic (the
Mamba-2 paper's Figure 10: SSD time grows little with the state size) -- no public measurement decides it.

``--decompose`` (issue 28, ssd15): each row's modelled step by layer kind -- the Mamba layers (and of them the SSD
scan), the attention and MoE layers (their expert-parallel communication included), as shares of the iteration --
and what the row misses (``t x (projected / measured - 1)``, ``t`` the projected iteration time) per Mamba layer x
token x head (ns), beside the SSD scan's own price per token-head and the GPU's HBM bandwidth: a miss that is the
same on x86 (B200 / B300) and Grace (GB200 / GB300) rows of one table is GPU work, not host; one that is the same per
Mamba token-head on Nano (64 heads) and Super (128) sits in the Mamba layer.  With ``--no-ssd-factor`` the SSD
training factor (``calibration.MAMBA_SSD_TRAIN_FACTOR``) is set to 1 first: the decomposition it was fitted from.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))


def ssd_fwd_bytes(P: int, N: int, groups_per_head: float, Q: int, z: bool) -> float:
    """HBM bytes per token and head of mamba_ssm's SSD forward (bf16 x / z / out, fp32 dt / dA / CB / states):
    ``_chunk_cumsum_fwd`` (read dt, write dA_cumsum and dt), ``_chunk_state_fwd`` (read x, B, dt, dA; write fp32
    states), ``_state_passing_fwd`` (read them, write bf16 states), ``_bmm_chunk_fwd`` (read B, C; write fp32 C B^T),
    ``_chunk_scan_fwd`` (read C B^T, x, dt, dA, C, states, z; write out and, with z, out_x)."""
    r, s = groups_per_head, P * N / Q
    return (10 + (4 * N * r + 4 * Q * r) + (2 * P + 2 * N * r + 8 + 4 * s) + (4 * s + 2 * s)
            + (4 * Q * r + 2 * P + 8 + 2 * N * r + 2 * s + 2 * P + (4 * P if z else 0)))


def _price_ssd_by_bytes() -> None:
    from primus_launch.projection.cost import mamba

    ref = ssd_fwd_bytes(64, 128, 1 / 128, 256, False)

    def seconds(m, tokens, tp, hbm_bw, gpu=""):
        heads = m.mamba_heads // tp
        size = ssd_fwd_bytes(m.mamba_head_dim, m.mamba_state_dim, m.mamba_num_groups / m.mamba_heads,
                             mamba.CHUNK, True) / ref
        f = tokens * heads * mamba.SSD_FWD_S_PER_TOKEN_HEAD * size / mamba.ssd_speed_over_h100(gpu, hbm_bw)
        return f, mamba.SSD_BWD_OVER_FWD * f

    mamba.ssd_scan_seconds = seconds


def decompose(plan, res, measured: float) -> dict:
    """One row's modelled step by layer kind (module doc, ``--decompose``): shares of the iteration of the Mamba
    layers, their SSD scan, the attention and the MoE layers (EP communication of the MoE layers included), the
    missed seconds and the missed / SSD-priced ns per Mamba layer x token x head."""
    from primus_launch.projection.cost.roofline import layer_op_times, layer_times_roofline

    m, p, t = plan.model, plan.parallel, plan.training
    lt, ops = layer_times_roofline(plan), layer_op_times(plan)
    pat = (m.hybrid_pattern or "") + (m.hybrid_mtp_pattern or "") * (m.mtp_num_layers or 0)
    dp = plan.world_size // (p.tp * p.pp * p.cp)
    nmb = t.global_batch_size // (dp * t.micro_batch_size)
    it = res.iteration_time_s
    miss = it * (res.tokens_per_sec_per_gpu / measured - 1.0)
    per_mb = {s: lt.layer(s).total_s * pat.count(s) / p.pp for s in "M*E" if lt.layer(s) is not None}
    ssd = next(o for o in ops["hybrid_mamba"] if o[0].startswith("SSD chunk scan"))
    token_heads = t.micro_batch_size * m.seq_length // p.cp * (m.mamba_heads // p.tp)
    ep = res.time_breakdown.get("ep_comm", 0.0)
    return {"mamba": nmb * per_mb.get("M", 0.0) / it, "ssd": nmb * pat.count("M") / p.pp * sum(ssd[1:4]) / it,
            "attn": nmb * per_mb.get("*", 0.0) / it, "moe": (nmb * per_mb.get("E", 0.0) + ep) / it, "miss_s": miss,
            "miss_ns": 1e9 * miss / (nmb * pat.count("M") / p.pp * token_heads),
            "ssd_ns": 1e9 * sum(ssd[1:4]) / token_heads}


def main() -> int:
    if "--no-ssd-factor" in sys.argv:
        from primus_launch.projection.cost import calibration
        from primus_launch.projection.cost.roofline import clear_caches

        calibration.MAMBA_SSD_TRAIN_FACTOR = 1.0
        clear_caches()
        print("the SSD training factor set to 1 (calibration.MAMBA_SSD_TRAIN_FACTOR)")
    if "--ssd-bytes" in sys.argv:
        _price_ssd_by_bytes()
        print("what-if: the SSD scan priced by its forward kernels' HBM bytes (not the model)")
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
        if "--decompose" in sys.argv:
            from primus_launch.projection.hardware.gpus import get_gpu

            d = decompose(plan, res, meas)
            print(f"    step {res.iteration_time_s:.2f} s: Mamba {100 * d['mamba']:.1f} % (SSD {100 * d['ssd']:.1f} %), "
                  f"attention {100 * d['attn']:.1f} %, MoE + EP {100 * d['moe']:.1f} %; missed {d['miss_s']:+.2f} s = "
                  f"{d['miss_ns']:+.2f} ns per Mamba token-head (SSD priced {d['ssd_ns']:.2f}; "
                  f"{plan.cluster.gpu}, HBM {get_gpu(plan.cluster.gpu).hbm_bw / 1e12:.2f} TB/s)")
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
