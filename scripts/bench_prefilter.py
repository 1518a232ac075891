"""How many candidate plans per second ``projection.memory.legality.prefilter`` checks on one core.

Candidates: the product of parallel/training knobs for Llama-3.1-70B on 64 H100s, Llama-3.1-405B
on 1024 and DeepSeek-V3 on 1024 GPUs, built as unvalidated ``model_copy`` plans (as the tuner's
``apply_knobs`` does), so illegal ones are included.  Timed after building them, first with all
caches cleared ("cold": every distinct architecture x degrees is computed once), then again
("warm": repeated candidates).  Prints plans/s and the legal / memory-rejected / divisibility-
rejected counts.

    python scripts/bench_prefilter.py [--limit N]
"""

from __future__ import annotations

import argparse
import itertools
import time

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory import estimate as memory, legality, params

LLAMA70 = ModelArch(name="llama3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                    num_attention_heads=64, num_query_groups=8, vocab_size=128256,
                    make_vocab_size_divisible_by=128, seq_length=8192)
LLAMA405 = LLAMA70.model_copy(update=dict(name="llama3.1-405b", num_layers=126, hidden_size=16384,
                                          ffn_hidden_size=53248, num_attention_heads=128))
DSV3 = ModelArch(name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
                 num_attention_heads=128, vocab_size=129280, make_vocab_size_divisible_by=128,
                 seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
                 moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3,
                 multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_layernorm=True)


def candidates() -> list[Plan]:
    out = []
    for arch, nodes, gbs in [(LLAMA70, 8, 512), (LLAMA405, 128, 2048), (DSV3, 128, 4096)]:
        base = Plan(model=arch, training=dict(global_batch_size=gbs), cluster=dict(num_nodes=nodes))
        eps = [1, 8, 32, 64] if arch.is_moe else [1]
        for tp, pp, vpp, cp, ep, sp, shard, mbs, rc in itertools.product(
                [1, 2, 4, 8], [1, 2, 4, 8, 16], [1, 2], [1, 2], eps, [False, True],
                ["optimizer", "none"], [1, 2], ["none", "selective", "full"]):
            par = base.parallel.model_copy(update=dict(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, sequence_parallel=sp,
                                                       dp_sharding=shard))
            rec = base.training.recompute.model_copy(update=dict(granularity=rc))
            tr = base.training.model_copy(update=dict(
                micro_batch_size=mbs, recompute=rec,
                pipeline_schedule="interleaved_1f1b" if vpp > 1 else "1f1b"))
            out.append(base.model_copy(update=dict(parallel=par, training=tr)))
    return out


def _clear() -> None:
    for f in (params.arch_from_key, params.layer_params_for_key, params.stage_split_for_key, params._total,
              memory.mcore_stage_memory, memory.titan_stage_memory, memory._in_flight):
        f.cache_clear()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=0, help="check only the first N candidates")
    args = ap.parse_args()
    plans = candidates()
    if args.limit:
        plans = plans[:args.limit]
    for label in ("cold", "warm"):
        if label == "cold":
            _clear()
        t0 = time.perf_counter()
        reasons = [legality.prefilter(p) for p in plans]
        dt = time.perf_counter() - t0
        legal = sum(r is None for r in reasons)
        mem = sum(r is not None and r.startswith("memory") for r in reasons)
        print(f"{label}: {len(plans)} plans in {dt:.3f} s = {len(plans) / dt:,.0f} plans/s "
              f"(legal {legal}, memory-rejected {mem}, divisibility-rejected {len(plans) - legal - mem}); "
              f"ratio to the 10,000 plans/s target: {len(plans) / dt / 1e4:.2f}")
    # the memory path alone: only candidates that pass divisibility, caches cleared
    from primus_launch.plan import legality_problems

    ok = [p for p in plans if not legality_problems(p)]
    _clear()
    t0 = time.perf_counter()
    for p in ok:
        legality.prefilter(p)
    dt = time.perf_counter() - t0
    print(f"cold, divisibility-legal only (every one through the memory model): {len(ok)} plans in "
          f"{dt:.3f} s = {len(ok) / dt:,.0f} plans/s; ratio to target {len(ok) / dt / 1e4:.2f}")


if __name__ == "__main__":
    main()
