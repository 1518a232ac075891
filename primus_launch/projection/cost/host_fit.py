"""The workload the per-kernel host launch time of :mod:`cost.framework` is fitted on: the kernels one
GPU launches per step by the dry-run's own kernel list (:func:`cost.roofline.kernels_per_step`) against a
measured host-bound step (``scripts/fit_kernels.py`` writes the fit into ``cost/fitted/host.py``)."""

from __future__ import annotations

from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Software, Source, Training


def host_fit_workload() -> dict:
    """Fit the eager / compiled per-kernel host time to the ml-engineering B200 benchmark of
    Llama-3.2-1B (batch 1, sequence 512, activation checkpointing; records
    ``mle-b200-compile-Llama-3.2-1B-forward+backward``): kernels launched per step by the
    roofline's decomposition (the dry-run's own kernel list) vs the measured eager and compiled steps
    (the CUDA-graph step, 8.1 ms, is the GPU time, so both are host-bound)."""
    import re

    from primus_launch.projection.cost import evidence as ev
    from primus_launch.projection.cost.roofline import kernels_per_step

    rec = ev.record("mle-b200-compile-Llama-3.2-1B-forward+backward")
    if rec is None:
        return {}
    eager_s = rec["value"] * 1e-3
    m = re.search(r"torch\.compile ([0-9.]+) ms, reduce-overhead ([0-9.]+) ms", rec["note"])
    compiled_s, graph_s = float(m.group(1)) * 1e-3, float(m.group(2)) * 1e-3
    model = ModelArch(name="llama3.2-1b", num_layers=16, hidden_size=2048, ffn_hidden_size=8192,
                      num_attention_heads=32, num_query_groups=8, head_dim=64, vocab_size=128256, seq_length=512,
                      untie_embeddings_and_output_weights=False)
    out = {}
    for mode, secs in (("eager", eager_s), ("compile", compiled_s)):
        plan = Plan(model=model, parallel=Parallelism(),
                    training=Training(global_batch_size=1, micro_batch_size=1, recompute={"granularity": "full"},
                                      compile=mode == "compile"),
                    cluster=Cluster(gpu="b200", num_nodes=1, gpus_per_node=1),
                    source=Source(framework="torchtitan"),
                    # the benchmark's model is HF transformers' LlamaRMSNorm, a Python composite (to fp32, pow,
                    # mean, add, rsqrt, mul, to bf16, mul) on any torch: priced as the composite that eager
                    # nn.RMSNorm ran before torch 2.9 (cost/torch_rmsnorm.py), not the fused kernel
                    software=Software(torch="2.8.0"))
        n = kernels_per_step(plan)
        out[mode] = dict(t_launch=round(secs / n, 8), kernels=n, step_s=secs, gpu_step_s=graph_s,
                         records=[rec["id"]])
    return out
