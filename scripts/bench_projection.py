"""Speed of the dry-run projection per candidate (pipeline simulation and memory model included).

Two searches as a tuner would see them, each a grid of legal candidates scored one after another
in one process (per-shape caches warm up across candidates, as in ``--tune``):

- Llama 3.1 70B, 1,024 H100 (128 nodes x 8), global batch 1,024 x 8k tokens;
- DeepSeek V3 671B, 1,024 H100, global batch 4,096 x 4k tokens (uneven first/last stage layout).

Then how the time of one projection grows with the number of micro-batches (fixed plan, global
batch scaled), cold (all caches cleared before each call) and warm. Target (issue 15): < 2 ms mean
per candidate on one core, growth no faster than linear in micro-batches.  Times are this process's
CPU time (``time.process_time``): the development machine is shared, and wall time would add the
other processes' share of its cores.

    python scripts/bench_projection.py
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, PlanError, Training  # noqa: E402
from primus_launch.projection.pipeline import simulate as pipeline  # noqa: E402
from primus_launch.projection.dryrun import project_dry_run  # noqa: E402
from primus_launch.projection.cost.roofline import clear_caches

LLAMA_70B = ModelArch(name="llama3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
                      num_attention_heads=64, num_query_groups=8, vocab_size=128256, seq_length=8192)
DEEPSEEK_V3 = ModelArch(name="deepseek-v3", num_layers=61, hidden_size=7168, ffn_hidden_size=18432,
                        num_attention_heads=128, vocab_size=129280, seq_length=4096, num_experts=256,
                        moe_router_topk=8, moe_ffn_hidden_size=2048, moe_shared_expert_intermediate_size=2048,
                        moe_dense_first_layers=3, multi_latent_attention=True, q_lora_rank=1536,
                        kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128)
CLUSTER = Cluster(gpu="h100-sxm", num_nodes=128, gpus_per_node=8)
TARGET_MS = 2.0


def _plan(model: ModelArch, gbs: int, **par) -> Plan | None:
    sched = par.pop("schedule", "1f1b")
    mbs = par.pop("mbs", 1)
    rec = par.pop("recompute", "none")
    try:
        return Plan(model=model, parallel=Parallelism(dp_sharding="optimizer", **par),
                    training=Training(global_batch_size=gbs, micro_batch_size=mbs, pipeline_schedule=sched,
                                      recompute={"granularity": rec}, overlap_grad_reduce=True,
                                      overlap_param_gather=True),
                    cluster=CLUSTER)
    except (PlanError, ValueError):
        return None


def llama_candidates() -> list[Plan]:
    out = []
    for tp, pp, vpp, mbs, rec in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16), (1, 2, 5), (1, 2),
                                                   ("none", "selective", "full")):
        if vpp > 1 and pp == 1:
            continue
        sched = "interleaved_1f1b" if vpp > 1 else "1f1b"
        p = _plan(LLAMA_70B, 1024, tp=tp, pp=pp, vpp=vpp, mbs=mbs, recompute=rec, schedule=sched,
                  sequence_parallel=tp > 1)
        if p is not None:
            out.append(p)
    return out


def _uneven(L: int, pp: int) -> dict:
    if L % pp == 0:
        return {}
    k = -(-L // pp)
    rest = L - k * (pp - 2)
    return {"pipeline_layers_first_stage": rest // 2, "pipeline_layers_last_stage": rest - rest // 2}


def deepseek_candidates() -> list[Plan]:
    out = []
    for tp, pp, ep, mbs, sched in itertools.product((1, 2, 4, 8), (4, 8, 16), (8, 16, 32, 64), (1, 2),
                                                    ("1f1b", "zb_h1")):
        p = _plan(DEEPSEEK_V3, 4096, tp=tp, pp=pp, ep=ep, mbs=mbs, schedule=sched, recompute="full",
                  sequence_parallel=tp > 1, **_uneven(DEEPSEEK_V3.num_layers, pp))
        if p is not None:
            out.append(p)
    return out


def bench(name: str, plans: list[Plan]) -> None:
    clear_caches()
    pipeline._plan.cache_clear()
    times = []
    for p in plans:
        t0 = time.process_time()
        project_dry_run(p)
        times.append(time.process_time() - t0)
    ms = [1e3 * t for t in times]
    nmb = [p.num_microbatches * p.parallel.vpp for p in plans]
    print(f"{name}: {len(plans)} candidates, per candidate mean {statistics.mean(ms):.2f} ms, "
          f"median {statistics.median(ms):.2f} ms, max {max(ms):.2f} ms (first, all caches cold: {ms[0]:.2f} ms); "
          f"micro-batches x chunks per candidate {min(nmb)}..{max(nmb)}; target < {TARGET_MS:g} ms: "
          f"{'met' if statistics.mean(ms) < TARGET_MS else 'NOT met'} (ratio mean/target {statistics.mean(ms) / TARGET_MS:.2f})")


def scaling(name: str, model: ModelArch, par: dict, gbs_list: list[int]) -> None:
    print(f"{name}: time vs number of micro-batches ({par})")
    print("  (cold = all caches cleared, incl. the pipeline's per-(schedule, pp, vpp, m) order tables, which"
          " a tuner builds once per distinct m; warm = those tables cached, as for every later candidate)")
    base = None
    wbase = None
    for gbs in gbs_list:
        p = _plan(model, gbs, **dict(par))
        cold = []
        for _ in range(5):
            clear_caches()
            pipeline._plan.cache_clear()
            t0 = time.process_time()
            project_dry_run(p)
            cold.append(time.process_time() - t0)
        warm_runs = []
        for _ in range(5):
            t0 = time.process_time()
            project_dry_run(p)
            warm_runs.append(time.process_time() - t0)
        warm = min(warm_runs)   # min of repeats: the machine is shared, noise only adds
        c = min(cold)
        m = p.num_microbatches
        if base is None:
            base = (m, c)
            wbase = warm
        print(f"  micro-batches {m:5d}: cold {1e3 * c:8.2f} ms  warm {1e3 * warm:7.2f} ms  "
              f"micro-batch ratio {m / base[0]:6.1f}: warm time ratio {warm / wbase:6.2f}, cold time ratio {c / base[1]:6.2f}")


def main() -> int:
    bench("Llama 3.1 70B / 1,024 GPUs", llama_candidates())
    bench("DeepSeek V3 671B / 1,024 GPUs", deepseek_candidates())
    scaling("Llama 3.1 70B tp8 pp8 vpp5 interleaved", LLAMA_70B,
            dict(tp=8, pp=8, vpp=5, schedule="interleaved_1f1b", sequence_parallel=True),
            [128, 256, 512, 1024, 2048, 4096])
    scaling("DeepSeek V3 tp2 etp1 pp16 ep64 zb_h1", DEEPSEEK_V3,
            dict(tp=2, etp=1, pp=16, ep=64, schedule="zb_h1", sequence_parallel=True, recompute="full",
                 **_uneven(61, 16)),
            [512, 1024, 2048, 4096, 8192, 16384])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
