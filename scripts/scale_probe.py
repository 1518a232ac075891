"""Where the time goes as the GPU count grows (issue 28, "scale").

``--weak``: the held-out dgxc-benchmarking weak-scaling series (``scripts/validation/dgxc_runs.py``): per series the
measured and projected per-GPU throughput loss from its smallest to its largest GPU count, and the projected DP /
bubble / compute seconds per step at each count.

``--mcore-readme``: the Megatron-LM README's H100 weak-scaling table (``images/model_table.png`` of NVIDIA/Megatron-LM,
Megatron-Core r0.8.0: 1.7B-462B on 48-6,144 H100, sequence 4,096, vocabulary 131,072, DP 48, TFLOP/s per GPU).  NOT a
validation row: micro batch, VP, FFN size, activation, recompute and the gradient-reduction dtype are not stated;
this probe guesses MBS 1, no VP, FFN 4h GELU (Megatron's defaults), no recompute, fp32 gradient reduction (Megatron's
default with bf16; ``--bf16-grads`` for bf16), distributed optimizer with both overlaps, TP comm overlap.  The
measured step time is the model FLOPs (Megatron's full-attention count) over the published TFLOP/s.
``--megascale``: MegaScale's Megatron-LM baseline (arXiv 2402.15627, Tables 1-2 and section 6.1: 175B, 128 heads,
hidden 12288, 96 layers, TP 8, PP 8, interleaving 6, sequence 2048, vocabulary 64,000, Megatron-LM 285068c8 of
2023-01; batch 768 on 256-1,024 A100, 6144 on 3,072-12,288; iteration times).  NOT a validation row: micro batch,
recompute, sequence parallelism, the distributed optimizer and the attention kernel are not stated; this probe
guesses MBS 1, SP and the distributed optimizer on, FlashAttention, no recompute, no DP overlap (not in that
commit).  Per batch size it splits measured and projected step times into ``a + b / GPUs`` (a: the per-step cost
that does not shrink as the fixed batch spreads over more GPUs).
``--no-nccl-latency`` prices NCCL's per-call / per-step latency at zero (the model before the scale terms).
``--no-dp-contention``: the SMs the hidden part of the DP reduce-scatter / all-gather takes from the compute
(``cost/contention.py`` ``displaced``; on Hopper at least ``STATIC_TAIL`` of the hidden seconds) priced at zero, to
split the exposed ``dp_comm`` into communication outside its window and contention.  ``--mbs N``: the README
probe at micro-batch N (the table does not state it; at GBS / DP = 4, micro-batch 4 puts the whole step in one
micro-batch, whose backward is the reduce-scatter's window: ``forward_backward_no_pipelining``).  ``--vp N``: the
README probe's PP rows interleaved, each at the largest divisor of its layers per stage up to N (the table does
not state VP; 119B's 23 and 462B's 7 layers per stage leave 1 or 23 / 7).

    python scripts/scale_probe.py --weak [--no-dp-contention]
    python scripts/scale_probe.py --mcore-readme [--bf16-grads] [--no-nccl-latency] [--no-dp-contention] [--mbs N]
                                  [--vp N]
    python scripts/scale_probe.py --megascale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

# size, heads, hidden, layers, TP, PP, DP, GPUs, global batch, TFLOP/s per GPU (README table)
MCORE_README = [("1.7B", 16, 2048, 24, 1, 1, 48, 48, 192, 408.8), ("7.1B", 32, 4096, 30, 2, 1, 48, 96, 192, 465.9),
                ("16B", 48, 6144, 32, 4, 1, 48, 192, 192, 489.1), ("32B", 56, 7168, 48, 8, 1, 48, 384, 192, 459.6),
                ("70B", 64, 8192, 84, 8, 2, 48, 768, 384, 419.7), ("119B", 80, 10240, 92, 8, 4, 48, 1536, 768, 420.5),
                ("177B", 96, 12288, 96, 8, 6, 48, 2304, 1152, 432.8), ("314B", 128, 16384, 96, 8, 8, 48, 3072, 1536, 474.4),
                ("462B", 144, 18432, 112, 8, 16, 48, 6144, 3072, 459.9)]


# batch, GPUs, Megatron-LM iteration seconds (MegaScale Table 2)
MEGASCALE = [(768, 256, 40.0), (768, 512, 21.2), (768, 768, 15.2), (768, 1024, 11.9),
             (6144, 3072, 29.02), (6144, 6144, 14.78), (6144, 8192, 12.24), (6144, 12288, 8.57)]


def _parts(res) -> str:
    b = res.time_breakdown
    return " ".join(f"{k}={1e3 * b[k]:.0f}" for k in ("compute", "dp_comm", "bubble", "pp_comm", "tp_comm") if b.get(k))


def weak() -> None:
    from primus_launch.plan import Plan
    from primus_launch.projection.dryrun import project_dry_run

    rows = [r for r in json.loads((ROOT / "scripts/validation/runs.json").read_text())["rows"]
            if r["id"].startswith("dgxc2411_")]
    series: dict[str, list[dict]] = {}
    for r in rows:
        series.setdefault(r["id"].rsplit("_", 1)[0], []).append(r)
    for name, rs in series.items():
        rs.sort(key=lambda r: r["gpus"])
        proj = [project_dry_run(Plan.model_validate(r["plan"])) for r in rs]
        m0, m1 = rs[0]["measured_tokens_per_sec_per_gpu"], rs[-1]["measured_tokens_per_sec_per_gpu"]
        p0, p1 = proj[0].tokens_per_sec_per_gpu, proj[-1].tokens_per_sec_per_gpu
        print(f"{name}: {rs[0]['gpus']} -> {rs[-1]['gpus']} GPUs, per-GPU loss measured {100 * (1 - m1 / m0):.1f} %, "
              f"projected {100 * (1 - p1 / p0):.1f} %")
        for r, res in zip(rs, proj):
            print(f"  {r['gpus']:5d} GPUs  measured {r['measured_tokens_per_sec_per_gpu']:8.1f}  projected "
                  f"{res.tokens_per_sec_per_gpu:8.1f} tokens/s/GPU  ({_parts(res)} ms)")


def mcore_readme(bf16_grads: bool, mbs: int = 1, vp: int = 1) -> None:
    from build_runs import _cluster_for

    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.cost.flops import model_flops_per_iteration
    from primus_launch.projection.dryrun import project_dry_run

    print("size   GPUs  measured s/step  projected  throughput err   projected ms")
    for name, a, h, L, tp, pp, dp, g, gbs, tf in MCORE_README:
        f = (f"--tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} --micro-batch-size {mbs} "
             f"--global-batch-size {gbs} --num-layers {L} --hidden-size {h} --num-attention-heads {a} --seq-length 4096 "
             "--max-position-embeddings 4096 --vocab-size 131072 --bf16 --use-distributed-optimizer "
             "--overlap-grad-reduce --overlap-param-gather --attention-dropout 0.0 --hidden-dropout 0.0")
        if tp > 1:
            f += " --sequence-parallel --tp-comm-overlap"
        v = max((d for d in range(1, vp + 1) if (L // pp) % d == 0), default=1) if pp > 1 else 1
        if v > 1:
            f += f" --num-layers-per-virtual-pipeline-stage {L // pp // v}"
        if bf16_grads:
            f += " --grad-reduce-in-bf16"
        plan = plan_from_argv(["pretrain_gpt.py"] + f.split(), cluster=_cluster_for("h100-sxm", g, 8))
        res = project_dry_run(plan)
        meas = model_flops_per_iteration(plan, causal_attention=False) / (tf * 1e12 * g)
        print(f"{name:5s}{'' if v == 1 else f' VP{v}':5s} {g:5d}  {meas:8.2f}        {res.iteration_time_s:8.2f}   "
              f"{100 * (meas / res.iteration_time_s - 1):+6.1f} %        {_parts(res)}")


def megascale() -> None:
    from build_runs import _cluster_for

    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.dryrun import project_dry_run

    by_batch: dict[int, list[tuple[int, float, float]]] = {}
    for gbs, g, t in MEGASCALE:
        f = ("--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --num-virtual-stages-per-pipeline-rank 6 "
             f"--micro-batch-size 1 --global-batch-size {gbs} --num-layers 96 --hidden-size 12288 "
             "--num-attention-heads 128 --seq-length 2048 --max-position-embeddings 2048 --vocab-size 64000 --bf16 "
             "--sequence-parallel --use-distributed-optimizer --attention-backend flash --attention-dropout 0.0 "
             "--hidden-dropout 0.0")
        plan = plan_from_argv(["pretrain_gpt.py"] + f.split(), cluster=_cluster_for("a100-sxm-80gb", g, 8))
        res = project_dry_run(plan)
        meas = gbs * 2048 / t / g
        by_batch.setdefault(gbs, []).append((g, t, res.iteration_time_s))
        print(f"batch {gbs:5d} {g:6d} GPUs  measured {t:6.2f} s {meas:6.1f} tok/s/GPU  projected {res.iteration_time_s:6.2f} s "
              f"{res.tokens_per_sec_per_gpu:6.1f}  err {100 * (res.tokens_per_sec_per_gpu / meas - 1):+6.1f} %  ({_parts(res)} ms)")
    for gbs, pts in by_batch.items():
        (g0, m0, p0), (g1, m1, p1) = pts[0], pts[-1]
        for what, t0, t1 in (("measured", m0, m1), ("projected", p0, p1)):
            b = (t0 - t1) / (1 / g0 - 1 / g1)
            print(f"batch {gbs}: {what:9s} step = {t0 - b / g0:5.2f} s + {b:8.0f} s*GPU / GPUs (from {g0} and {g1} GPUs)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weak", action="store_true", help="the dgxc weak-scaling series")
    ap.add_argument("--mcore-readme", action="store_true", help="the Megatron-LM README table (guessed settings)")
    ap.add_argument("--megascale", action="store_true", help="MegaScale's Megatron-LM baseline (guessed settings)")
    ap.add_argument("--bf16-grads", action="store_true", help="README probe: bf16 gradient reduction")
    ap.add_argument("--no-nccl-latency", action="store_true", help="NCCL per-call / per-step latency at zero")
    ap.add_argument("--no-dp-contention", action="store_true", help="the hidden DP sync's SM contention at zero")
    ap.add_argument("--mbs", type=int, default=1, help="README probe: micro-batch size (default 1)")
    ap.add_argument("--vp", type=int, default=1, help="README probe: interleave the PP rows (largest divisor <= N)")
    args = ap.parse_args(argv)
    if args.no_dp_contention:
        from types import SimpleNamespace

        from primus_launch.projection.cost import contention as con
        from primus_launch.projection.cost import dp_comm

        dp_comm.con = SimpleNamespace(displaced=lambda *a, **k: 0.0, NCCL_SMS=con.NCCL_SMS)
    if args.no_nccl_latency:
        from primus_launch.projection.cost import collectives as coll

        coll.NCCL_NET_STEP_S = coll.NCCL_INTRA_STEP_S = coll.NCCL_BASE_S = 0.0
        coll.clear_caches()
    if args.weak or not (args.mcore_readme or args.megascale):
        weak()
    if args.megascale:
        megascale()
    if args.mcore_readme:
        mcore_readme(args.bf16_grads, args.mbs, args.vp)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
