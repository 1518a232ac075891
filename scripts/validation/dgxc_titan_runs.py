"""dgxc-benchmarking's DeepSeek-V3 671B TorchTitan recipe (issue 27): every run its README and launch script define,
for ``current_runs.json`` (held out, judge only; memory: runs that ran).

Source: NVIDIA/dgxc-benchmarking HEAD d5c15e8 ("release 26.06.00 files", 2026-06-30),
``deepseek_v3/pretrain/torchtitan/``: the README's configuration tables (GB200 / B200: 256 GPUs, BF16 and FP8,
DP 256, EP 64, PP 1, MBS 8; H100: 512 and 1,024 GPUs, BF16, DP 64 / 128, EP 64, PP 8, MBS 16; sequence 4,096,
GA 1), ``metadata.yaml`` (``gpu_configs``: b200 / gb200 bf16 + fp8 at 256, h100 bf16 at 512 and 1,024),
``deepseek_v3_671b.toml`` (the job table) and ``launch.sh`` (the overrides per ``GPU_TYPE`` / ``JOB_TOTAL_GPUS``:
H100 forces ``activation_checkpoint.mode selective`` -- the TOML's ``selective_ac_option = 'op'`` -- and the 1F1B
schedule, DeepEP; B200 DeepEP, GB200 HybridEP, both full AC and Interleaved1F1B; every GPU type
``--compile.enable --compile.components=loss --compile.components=model``, ``--debug.moe_force_load_balance``;
``DTYPE=fp8``: MXFP8 converters ``quantize.linear.mx`` (mxfp8_cublas) + ``quantize.grouped_mm.mx`` on the experts).
TorchTitan: elfiegg/torchtitan @b5351f16 (a fork of pytorch/torchtitan, March 2026; not readable here), in the
nvidia/pytorch:25.12-py3 container.

No throughput or step time is published (the README says how to read ``tps:`` / ``tflops:`` from one's own log):
the rows carry no speed target (``build_runs.titan_row`` skips them) and are judged for memory only: the runs
ran on 80 GB H100 / 180 GB B200 / 186 GB GB200 (``validate_memory.py``: fits or tight).
"""

from __future__ import annotations

import copy

DGXC_HEAD = "d5c15e8"   # NVIDIA/dgxc-benchmarking "release 26.06.00 files" (2026-06-30)
DIR = "deepseek_v3/pretrain/torchtitan"

#: deepseek_v3_671b.toml @d5c15e8, the tables the plan reads (profiling / metrics / checkpoint / lr_scheduler left out)
TOML = {
    "model": {"name": "deepseek_v3", "flavor": "671B"},
    "optimizer": {"name": "AdamW", "lr": 2.2e-4, "eps": 1e-8},
    "training": {"local_batch_size": 16, "seq_len": 4096, "max_norm": 1.0, "steps": 500, "dataset": "c4"},
    "parallelism": {"data_parallel_replicate_degree": 1, "data_parallel_shard_degree": -1,
                    "fsdp_reshard_after_forward": "default", "tensor_parallel_degree": 1,
                    "enable_async_tensor_parallel": False, "pipeline_parallel_degree": 1,
                    "pipeline_parallel_schedule": "Interleaved1F1B", "expert_parallel_degree": 1,
                    "expert_tensor_parallel_degree": 1, "pipeline_parallel_first_stage_less_layers": 1,
                    "pipeline_parallel_last_stage_less_layers": 1},
    "activation_checkpoint": {"mode": "full", "selective_ac_option": "op"},
    "compile": {"enable": True, "components": ["model", "loss"]},
}

#: launch.sh per GPU type / count: (gpus per node, dp shard, ep, pp, schedule, AC mode, local batch, EP backend)
LAUNCH = {
    ("h100", 512): (8, 64, 64, 8, "1F1B", "selective", 16, "deepep"),
    ("h100", 1024): (8, 128, 64, 8, "1F1B", "selective", 16, "deepep"),
    ("b200", 256): (8, -1, 64, 1, "Interleaved1F1B", "full", 8, "deepep"),
    ("gb200", 256): (4, -1, 64, 1, "Interleaved1F1B", "full", 8, "hybridep"),
}
DTYPES = {"h100": ("bf16",), "b200": ("bf16", "fp8"), "gb200": ("bf16", "fp8")}
HW = {
    "h100": dict(gpu="H100-SXM-80GB", plan_gpu="h100-sxm", gpu_family="hopper",
                 interconnect="8x H100 per node (NVLink 4), InfiniBand between nodes"),
    "b200": dict(gpu="B200", plan_gpu="b200", gpu_family="blackwell",
                 interconnect="8x B200 per node (NVLink 5), InfiniBand between nodes"),
    "gb200": dict(gpu="GB200", plan_gpu="gb200", gpu_family="blackwell",
                  interconnect="GB200 NVL72 (4 GPUs per tray, NVLink 5 domain)"),
}
ARCH = dict(num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128, num_query_groups=None,
            vocab_size=129280, seq_length=4096, num_experts=256, moe_topk=8, moe_ffn_hidden_size=2048,
            moe_shared_expert_intermediate_size=2048, moe_first_dense_layers=3, moe_router_num_groups=8,
            moe_router_group_topk=4, multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128,
            qk_pos_emb_head_dim=64, v_head_dim=128, mtp_num_layers=None)


def _config(gpu: str, gpus: int, dtype: str) -> dict:
    """The job table the launch builds: the TOML with launch.sh's command-line overrides."""
    gpn, dps, ep, pp, sched, ac, lbs, backend = LAUNCH[(gpu, gpus)]
    cfg = copy.deepcopy(TOML)
    cfg["training"].update(local_batch_size=lbs, seq_len=4096, steps=60)
    cfg["parallelism"].update(data_parallel_shard_degree=dps, expert_parallel_degree=ep,
                              pipeline_parallel_degree=pp, pipeline_parallel_schedule=sched,
                              expert_parallel_comm_backend=backend)
    cfg["activation_checkpoint"]["mode"] = ac
    cfg["compile"] = {"enable": True, "components": ["model"]}  # argparse keeps the last --compile.components
    cfg["debug"] = {"moe_force_load_balance": True}
    if dtype == "fp8":
        cfg["model"]["converters"] = ["quantize.linear.mx", "quantize.grouped_mm.mx"]
        cfg["quantize"] = {"linear": {"mx": {"recipe_name": "mxfp8_cublas"}},
                           "grouped_mm": {"mx": {"fqns": ["experts"], "recipe_name": "mxfp8"}}}
    return cfg


def dgxc_titan_rows() -> list[dict]:
    """The dgxc-benchmarking TorchTitan DeepSeek-V3 rows (module doc), in the current_runs.json row format."""
    rows = []
    for (gpu, gpus), (gpn, dps, ep, pp, sched, ac, lbs, backend) in LAUNCH.items():
        for dtype in DTYPES[gpu]:
            dp = gpus // pp
            rows.append(dict(
                id=f"dgxctitan_{gpu}_{dtype}_dsv3_671b_{gpus}gpu",
                source=(f"NVIDIA/dgxc-benchmarking @{DGXC_HEAD} {DIR}/README.md table '{gpu.upper()}' row 671B "
                        f"{dtype.upper()} {gpus} GPUs (DP {dp}, EP {ep}, PP {pp}, MBS {lbs}, GBS {lbs * dp}) + "
                        f"metadata.yaml gpu_configs + launch.sh GPU_TYPE={gpu} JOB_TOTAL_GPUS={gpus}"
                        + (" DTYPE=fp8" if dtype == "fp8" else "") + ": the run NVIDIA benchmarks (ran); "
                        "no throughput published"),
                model_name="DeepSeek-V3 671B (no MTP)", architecture=dict(ARCH),
                hardware=dict(HW[gpu], num_gpus=gpus, gpus_per_node=gpn),
                parallelism=dict(tp=1, pp=pp, vpp=None, cp=1, ep=ep, etp=1, dp=dp, fsdp=dp, sequence_parallel=False,
                                 zero_stage=3, distributed_optimizer=None, pipeline_layout=None),
                training=dict(global_batch_size=lbs * dp, micro_batch_size=lbs,
                              precision="bf16" if dtype == "bf16" else "mxfp8 (torchao MX: linears mxfp8_cublas, "
                              "experts' grouped GEMMs mxfp8)",
                              fp8_recipe=None if dtype == "bf16" else "mxfp8",
                              recompute="selective per-op SAC" if ac == "selective" else "full AC",
                              moe_dispatcher=backend, cuda_graph="none (torch.compile of the model)", ep_overlap=False,
                              mtp_num_layers=None),
                measured=dict(tokens_per_sec_per_gpu=None, tflops_per_gpu=None, mfu=None, iteration_time_s=None,
                              peak_memory_gb=None),
                flops_convention="none: no throughput published (memory judged only: the run ran)",
                derived_fields=[f"global_batch_size = local batch {lbs} x DP {dp} (GA 1, the README table)"],
                source_reliability="primary (NVIDIA's benchmarking recipe: README table + the launch that runs it)",
                notes=("Job table: deepseek_v3_671b.toml with launch.sh's overrides (torchtitan_config). "
                       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (launch.sh)."),
                torchtitan_config=_config(gpu, gpus, dtype),
                flags_source=f"NVIDIA/dgxc-benchmarking @{DGXC_HEAD} {DIR}/deepseek_v3_671b.toml + launch.sh",
                flags_unknown=[
                    "torchtitan elfiegg/torchtitan @b5351f16 (fork; not readable here): read as pytorch/torchtitan of "
                    "March 2026 (c0c0bf965) and the 0.3.0 job schema installed here",
                    "the measured memory / throughput of the runs are not published",
                ] + (["GB200: --parallelism.hybridep.enable_non_blocking and "
                      "--parallelism.hybridep.moe_expert_capacity_factor=0.03125 (fork flags) not in the job table"]
                     if gpu == "gb200" else []),
                judge_only=True, confidence="medium",
            ))
    return rows
