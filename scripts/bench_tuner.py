"""Benchmark of the tuner on the bundled recipes: planner best vs exhaustive optimum.

For each recipe (Llama 3.1 70B on 64 and 1,024 GPUs, Mixtral 8x22B on 32, DeepSeek V3 on 1,024):

1. exhaustive: every legal candidate of the *restricted* space (``SpaceConfig.restricted()``:
   SP on with TP, overlap flags on, CP <= 2, VPP <= 4, MBS <= 2, recompute none/selective/full)
   scored with the dry-run projection: the true optimum of the model over that space;
2. planner: ``tune()`` over the same restricted space with its default budget (10% of legal);
3. full: ``tune()`` over the default (unrestricted) space, wall time of the whole tune.

Prints planner best / exhaustive best, scored / legal, and seconds (wall time on this machine;
the three runs share the projection's per-architecture caches, so the later ones run warm).
Targets (issue 6): planner/exhaustive <= 1.02, scored/legal <= 10%, a whole tune < 60 s.  Usage:
``python scripts/bench_tuner.py [--skip-exhaustive] [--only NAME] [--all]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Recompute, Source, Training
from primus_launch.tuner.search import tune
from primus_launch.tuner.space import SpaceConfig

ROOT = Path(__file__).resolve().parents[1]


def _llama70b(nodes: int) -> Plan:
    m = ModelArch(name="llama3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                  num_attention_heads=64, num_query_groups=8, vocab_size=128256,
                  make_vocab_size_divisible_by=128, seq_length=8192)
    return Plan(model=m, parallel=Parallelism(tp=8, pp=4, sequence_parallel=True, dp_sharding="optimizer"),
                training=Training(global_batch_size=128 if nodes == 8 else 1024, micro_batch_size=1,
                                  recompute=Recompute(granularity="full", num_layers=1)),
                cluster=Cluster(gpu="h100-sxm", num_nodes=nodes), source=Source(framework="megatron"))


def _mixtral() -> Plan:
    m = ModelArch(name="mixtral-8x22b", num_layers=56, hidden_size=6144, ffn_hidden_size=16384,
                  num_attention_heads=48, num_query_groups=8, vocab_size=32768, seq_length=4096,
                  num_experts=8, moe_router_topk=2)
    return Plan(model=m, parallel=Parallelism(tp=2, pp=4, ep=4, sequence_parallel=True, dp_sharding="optimizer"),
                training=Training(global_batch_size=256, micro_batch_size=1,
                                  recompute=Recompute(granularity="full", num_layers=1)),
                cluster=Cluster(gpu="mi300x", num_nodes=4), source=Source(framework="megatron"))


def _dsv3() -> Plan:
    m = ModelArch(name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
                  num_attention_heads=128, vocab_size=129280, seq_length=4096, num_experts=256, moe_router_topk=8,
                  moe_ffn_hidden_size=2048, moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3,
                  multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512)
    return Plan(model=m, parallel=Parallelism(tp=2, pp=16, ep=64, etp=1, sequence_parallel=True, dp_sharding="optimizer",
                                              pipeline_layers_first_stage=3, pipeline_layers_last_stage=2),
                training=Training(global_batch_size=8192, micro_batch_size=1,
                                  recompute=Recompute(granularity="full", num_layers=1)),
                cluster=Cluster(gpu="h100-sxm", num_nodes=128), source=Source(framework="megatron"))


# (name, bundled recipe, cluster overrides, in-code fallback while a recipe is unreadable)
CASES = [
    ("llama3.1-70b @64", "recipes/megatron/llama3.1_70b.sh", None, lambda: _llama70b(8)),
    ("llama3.1-70b @1024", "recipes/megatron/llama3.1_70b.sh", {"num_nodes": 128}, lambda: _llama70b(128)),
    ("mixtral-8x22b @32", "recipes/megatron/mixtral_8x22b.sh", None, _mixtral),
    ("deepseek-v3 @1024", "recipes/megatron/deepseek_v3_671b.sh", None, _dsv3),
    # TorchTitan variants (FSDP/HSDP, zero-bubble schedules): with --all
    ("tt llama3.1-70b @64", "recipes/torchtitan/llama3.1_70b.toml", None, None),
    ("tt deepseek-v3 @1024", "recipes/torchtitan/deepseek_v3_671b.toml", None, None),
]


def load_case(path: str, overrides, fallback) -> tuple[Plan, str]:
    from primus_launch.adapters import load_recipe

    try:
        return load_recipe(ROOT / path, overrides), path + (f" with {overrides}" if overrides else "")
    except Exception as e:  # a recipe the adapter cannot read: say so, use the in-code plan
        if fallback is None:
            raise
        print(f"# {path}: {type(e).__name__}: {e}; using the in-code plan", file=sys.stderr)
    return fallback(), "in-code plan (scripts/bench_tuner.py)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-exhaustive", action="store_true")
    ap.add_argument("--only")
    ap.add_argument("--all", action="store_true", help="also the TorchTitan recipes")
    a = ap.parse_args(argv)
    rows = []
    for name, path, overrides, fb in CASES:
        if (a.only and a.only not in name) or (name.startswith("tt ") and not a.all and not a.only):
            continue
        plan, src = load_case(path, overrides, fb)
        cfg = SpaceConfig.restricted()
        t = time.perf_counter()
        pl = tune(plan, space=cfg)
        t_pl = time.perf_counter() - t
        t = time.perf_counter()
        full = tune(plan)
        t_full = time.perf_counter() - t
        ex_best = t_ex = None
        if not a.skip_exhaustive:
            t = time.perf_counter()
            ex = tune(plan, space=cfg, exhaustive=True)
            t_ex = time.perf_counter() - t
            ex_best = ex.best.iteration_time_s
        rows.append((name, src, pl, t_pl, ex_best, t_ex, full, t_full))
        r = rows[-1]
        print(f"{name:20s} source: {src}")
        print(f"  restricted space: {pl.space_size} divisibility-legal, {pl.legal_candidates} legal "
              f"(exact={pl.legal_exact})")
        print(f"  baseline {pl.baseline.iteration_time_s:.4f} s/iter (fits={pl.baseline.memory.fits})")
        if ex_best is not None:
            print(f"  exhaustive best {ex_best:.4f} s/iter ({ex.scored} scored, {t_ex:.1f} s)")
        print(f"  planner best    {pl.best.iteration_time_s:.4f} s/iter, scored {pl.scored}/{pl.legal_candidates} "
              f"= {100 * pl.scored_fraction:.1f}%, {t_pl:.1f} s"
              + (f", planner/exhaustive = {pl.best.iteration_time_s / ex_best:.4f}" if ex_best else ""))
        print(f"  full-space tune: best {full.best.iteration_time_s:.4f} s/iter, scored {full.scored} of "
              f"{full.legal_candidates:,} legal{'' if full.legal_exact else ' (estimated)'} "
              f"({full.space_size:,} divisibility-legal), {t_full:.1f} s, gain {100 * full.gain:+.1f}%")
        sys.stdout.flush()
    print()
    print(f"{'recipe':20s} {'planner/exh':>11s} {'scored/legal':>14s} {'planner s':>9s} {'exh s':>7s} "
          f"{'full s':>7s}  targets")
    for name, src, pl, t_pl, ex_best, t_ex, full, t_full in rows:
        ratio = pl.best.iteration_time_s / ex_best if ex_best else None
        ok = ((ratio is None or ratio <= 1.02) and pl.scored_fraction <= 0.10 and max(t_pl, t_full) < 60)
        print(f"{name:20s} {(f'{ratio:.4f}' if ratio else '-'):>11s} {100 * pl.scored_fraction:13.1f}% {t_pl:9.1f} "
              f"{(f'{t_ex:.1f}' if t_ex is not None else '-'):>7s} {t_full:7.1f}  {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
