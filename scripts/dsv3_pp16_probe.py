"""Probe: the Megatron-Bridge 25.11 DeepSeek-V3 row on 256 B200 at PP 16 / EP 8 (measured 2,139 tokens/s/GPU)
against the DeepSeek-V3 B200 rows that fit (issue 28, branch dsv3pp16; a documented negative result).

Prints (1) the plan fields in which the row differs from Bridge 26.04's and Megatron-LM's B200 DeepSeek-V3 rows;
(2) the row's pipeline as the model runs it: the stages' contents (Bridge v0.2.1 ``layout_map[(16, 1)]``), each
stage's forward + backward seconds per micro-batch, micro-batches, the iteration breakdown; (3) the walk from this
row's plan to Bridge 26.04's B200 recipe one field group at a time, the model's throughput ratio against the
measured 3,328 / 2,139 = 1.556; (4) seconds per layer and micro-batch, measured vs projected, for the DeepSeek-V3
B200 rows, with tokens per local expert; (5) what the slowest stage would have to cost for the measured step.
No field of the model is changed here.

    PYTHONPATH=$PWD python scripts/dsv3_pp16_probe.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import moe_probe as mp  # noqa: E402

ROW = "mbridge2511_b200_fp8_mx_deepseek_v3_256gpu_pp16"
FITTING = ("mbridge2604_b200_fp8_mx_deepseek_v3_256gpu", "mlm_moe_deepseek_v3_b200_mxfp8_256gpu_tp1pp8ep32")
# this row's plan -> Bridge 26.04's B200 DeepSeek-V3 recipe (deepseek_workload_base_configs.py at the 26.04 tag),
# cumulative; the recompute step last (its plan field is nested)
WALK = (
    ("GBS 4096", {"training.global_batch_size": 4096}),
    ("PP 8 VP 2 (interleaved)", {"parallel.pp": 8, "parallel.vpp": 2, "training.pipeline_schedule": "interleaved_1f1b"}),
    ("EP 32 (4 nodes, NCCL all-to-all)", {"parallel.ep": 32}),
    ("DeepEP, shared-expert overlap off", {"training.moe_token_dispatcher": "deepep",
                                           "training.moe_shared_expert_overlap": False}),
    ("TE graphs attn + moe_router + moe_preprocess", {"training.cuda_graph_impl": "transformer_engine",
                                                      "training.cuda_graph_scope": ["attn", "moe_router",
                                                                                   "moe_preprocess"]}),
    ("1F1B EP overlap + delayed wgrad", {"training.overlap_moe_expert_parallel_comm": True,
                                         "training.delay_wgrad_compute": True}),
)
SWITCHES = (
    ("shared-expert overlap off", {"training.moe_shared_expert_overlap": False}),
    ("dispatcher without its host sync (moe_sync_free)", {"training.moe_sync_free": True}),
    ("no selective recompute", {"training.recompute": {"granularity": "none", "method": "uniform", "num_layers": None,
                                                       "modules": [], "layer_ids": []}}),
)


def _rows() -> dict:
    return {r["id"]: r for r in json.loads(mp.RUNS.read_text())["rows"]}


def _diff(a, b, path: str = "") -> list[tuple[str, object, object]]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _diff(a.get(k), b.get(k), f"{path}.{k}" if path else k)
        return out
    return [] if a == b else [(path, a, b)]


def main() -> int:
    from primus_launch.plan import Plan
    from primus_launch.projection.cost.roofline import layer_times_roofline
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.projection.steps.flow import run_steps

    rows = _rows()
    row = rows[ROW]
    meas = row["measured_tokens_per_sec_per_gpu"]
    print(f"{ROW}: measured {meas:.0f} tokens/s/GPU")
    print("(1) plan fields that differ from the fitting B200 DeepSeek-V3 rows (this row -> that row):")
    for rid in FITTING:
        print(f"  {rid} (measured {rows[rid]['measured_tokens_per_sec_per_gpu']:.0f}):")
        for path, a, b in _diff(row["plan"], rows[rid]["plan"]):
            if path.startswith("source") or path.startswith("model.moe_layer_pattern"):
                continue
            print(f"    {path:45s} {json.dumps(a)[:60]:>28s} -> {json.dumps(b)[:60]}")

    plan = project_dry_run(Plan.model_validate(row["plan"])).plan
    st = run_steps(plan, layer_times_roofline(plan))
    per_stage = [sum(c.fwd + c.bwd_input + c.bwd_weight for c in chunks) for chunks in st.stages.chunks]
    print(f"(2) layout {plan.parallel.pipeline_layout} (Bridge v0.2.1 deepseek_v3.py layout_map[(16, 1)]), "
          f"{plan.num_microbatches} micro-batches of {plan.training.micro_batch_size} (GBS / DP {plan.dp})")
    for rank, chunks in enumerate(plan.chunk_layout()):
        c = chunks[0]
        if rank in (0, 1, plan.parallel.pp - 1):
            kinds = "".join("M" if plan.model.is_moe_layer(i) else "D" for i in c.layers)
            print(f"  stage {rank:2d}: {'E ' if c.embedding else ''}layers {kinds}{' + MTP' * c.mtp}"
                  f"{' + loss' if c.loss else ''}: {1e3 * per_stage[rank]:6.1f} ms per micro-batch (fwd + bwd)")
    print(f"  stages 1..{plan.parallel.pp - 2} alike; slowest stage {max(range(len(per_stage)), key=per_stage.__getitem__)}")
    it = st.iteration
    print("  breakdown (s): " + ", ".join(f"{k} {v:.3f}" for k, v in it.breakdown.items())
          + f"; iteration {it.iteration_s:.3f} s")

    print("(3) walk from this row's plan to Bridge 26.04's B200 recipe (cumulative):")
    t0, _ = mp._project(row["plan"])
    print(f"  {'as built':50s} {t0:7.0f} tokens/s/GPU")
    upd: dict = {}
    for label, u in WALK:
        upd.update(u)
        t, _ = mp._project(mp._switched(row["plan"], upd))
        print(f"  {'+ ' + label:50s} {t:7.0f}  x{t / t0:.3f}")
    m26 = rows[FITTING[0]]["measured_tokens_per_sec_per_gpu"]
    p26, _ = mp._project(rows[FITTING[0]]["plan"])
    print(f"  Bridge 26.04 row itself: projected {p26:.0f}, measured {m26:.0f}; measured 26.04 / 25.11 {m26 / meas:.3f}, "
          f"modelled {p26 / t0:.3f}")
    print("  one-field switches on this row:")
    for label, u in SWITCHES:
        t, _ = mp._project(mp._switched(row["plan"], u))
        print(f"    {label:50s} {t:7.0f} tokens/s/GPU ({100 * (t - meas) / meas:+.1f}%)")

    print("(4) seconds per layer x micro-batch (measured / projected), tokens per local expert:")
    for rid in (ROW,) + FITTING:
        p = Plan.model_validate(rows[rid]["plan"])
        tok, _ = mp._project(rows[rid]["plan"])
        sm, _ = mp.per_layer_mb_seconds(p, rows[rid]["measured_tokens_per_sec_per_gpu"])
        sp, _ = mp.per_layer_mb_seconds(p, tok)
        print(f"  {rid:52s} {1e3 * sm:6.2f} / {1e3 * sp:6.2f} ms  ({p.model.num_experts // p.parallel.ep:2d} local experts, "
              f"{mp.tokens_per_local_expert(p):5.0f} tokens each)")

    gpus = plan.cluster.world_size
    it_meas = plan.training.global_batch_size * plan.model.seq_length / (meas * gpus)
    slots = plan.num_microbatches + plan.parallel.pp - 1
    print(f"(5) measured iteration {it_meas:.2f} s = ({plan.num_microbatches} + {plan.parallel.pp - 1}) x "
          f"{1e3 * it_meas / slots:.1f} ms per micro-batch on the slowest stage (1F1B, no tail); the model's slowest "
          f"stage {1e3 * max(per_stage):.1f} ms, a four-MoE-layer stage {1e3 * per_stage[1]:.1f} ms "
          f"({1e3 * per_stage[1] / 4:.1f} ms per MoE layer x micro-batch; the measured step needs "
          f"~{1e3 * it_meas / slots / 4:.1f} if those stages set it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
