"""Helpers for the tuner tests: plans of the bundled recipes' shapes and a small analytic scorer
(used only where a test checks the search machinery, not projection numbers)."""

from __future__ import annotations

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Recompute, Source, Training
from primus_launch.projection.result import MemoryReport, ProjectionResult, StageMemory

GiB = 1024**3


def small_dense_plan(framework: str = "megatron") -> Plan:
    """A 16-layer ~1.5B model on 2 x 8 GPUs: a space of a few hundred candidates."""
    m = ModelArch(name="toy-1.5b", num_layers=16, hidden_size=2048, ffn_hidden_size=8192, num_attention_heads=16,
                  num_query_groups=8, vocab_size=32000, seq_length=4096)
    return Plan(model=m, parallel=Parallelism(tp=2, pp=2, sequence_parallel=True,
                                              dp_sharding="optimizer" if framework == "megatron" else "full"),
                training=Training(global_batch_size=64, micro_batch_size=1),
                cluster=Cluster(gpu="h100-sxm", num_nodes=2, gpus_per_node=8), source=Source(framework=framework))


def analytic_score(plan: Plan) -> ProjectionResult:
    """A deliberately simple cost model: compute / TP efficiency + TP comm + pipeline bubble + DP
    comm; memory = sharded weights/optimizer + activations.  Not the product's model."""
    m, p, t = plan.model, plan.parallel, plan.training
    h, L, s = m.hidden_size, m.num_layers, m.seq_length
    params = 12 * h * h * L + 2 * m.vocab_size * h
    flops = 6 * params * t.global_batch_size * s * (4 / 3 if t.recompute.granularity == "full" else 1.0)
    W = plan.world_size
    eff = 0.6 * (1 - 0.04 * (p.tp - 1)) * (1 - 0.02 * (p.cp - 1)) * min(1.0, 0.8 + 0.1 * t.micro_batch_size)
    compute = flops / W / (989e12 * eff)
    nmb = plan.num_microbatches
    bubble = compute * (p.pp - 1) / (p.vpp * nmb)
    tp_comm = 0.0 if p.tp == 1 else compute * 0.05 * (0.5 if t.tp_comm_overlap else 1.0)
    dp_comm = 2 * params * 2 / (p.tp * p.pp) / 50e9 * (0.2 if t.overlap_grad_reduce else 1.0)
    total = compute + bubble + tp_comm + dp_comm
    shard = plan.dp if p.dp_sharding != "none" else 1
    weights = params / (p.tp * p.pp) * (2 + 4 + 12 / shard)
    act_layer = s * t.micro_batch_size * h * 34 / (p.tp if p.sequence_parallel else 1) / p.cp
    if t.recompute.granularity == "full":
        act_layer = s * t.micro_batch_size * h * 2 / p.cp
    elif t.recompute.granularity == "selective":
        act_layer *= 0.7
    acts = act_layer * (L / p.pp) * min(p.pp, nmb)
    peak = int(weights + acts)
    cap = 80 * GiB
    st = StageMemory(stage=0, parameters_bytes=int(weights), gradients_bytes=0, optimizer_bytes=0,
                     activations_bytes=int(acts), transient_bytes=0, reserve_bytes=0, total_bytes=peak,
                     microbatches_in_flight=min(p.pp, nmb), num_parameters=int(params / (p.tp * p.pp)))
    mem = MemoryReport(peak_bytes_per_gpu=peak, capacity_bytes=cap, margin_fraction=0.05,
                       fits=peak <= 0.95 * cap, worst_stage=0, breakdown={"weights": int(weights), "activations": int(acts)},
                       stages=[st])
    tps = t.global_batch_size * s / total / W
    return ProjectionResult(mode="dry-run", iteration_time_s=total, tokens_per_sec_per_gpu=tps,
                            model_tflops_per_gpu=flops / total / W / 1e12, mfu=flops / total / W / 989e12, num_gpus=W,
                            model_flops_per_iteration=flops,
                            time_breakdown={"compute": compute, "bubble": bubble, "tp": tp_comm, "dp": dp_comm},
                            memory=mem, plan=plan)


def analytic_prefilter(plan: Plan) -> str | None:
    r = analytic_score(plan)
    return None if r.memory.fits else "memory: does not fit"
