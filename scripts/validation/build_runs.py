"""Build ``scripts/validation/runs.json``: published, measured training runs as primus-launch plans.

Inputs:

- ``shared/validation/published_runs.json`` next to the checkout (``../shared``, or ``../../shared``
  for a worktree one level deeper; ``PUBLISHED_RUNS`` overrides): sources Narayanan et al. 2021,
  Korthikanti et al. 2022, mosaicml/llm-foundry benchmark tables, pytorch/torchtitan benchmark files,
  an AMD Primus blog, and the 19 NeMo / Megatron-Core rows (FP8, long-sequence CP) that carry the
  run's ``megatron_flags``.  CI has only the repository: without the shared file this script keeps
  the committed ``runs.json`` as it is.
- ``scripts/validation/current_runs.json`` (in the repository): current production runs found by
  search (Megatron-LM moe_recipes, Megatron-Bridge, TorchAO / TorchTitan, AMD Primus), JUDGE ONLY.

Each output row keeps the source, the full plan, the measured figure, what we compare (tokens/s/GPU;
converted from TFLOP/s with the row's own FLOP convention where only TFLOP/s is given), every
assumption we had to make, its groups (dense BF16 / dense FP8 / MoE / long sequence-CP, GPU family)
and its role.  Rows with ``megatron_flags`` become plans through the Megatron adapter itself
(``adapters.megatron.plan_from_argv``) and rows with a ``torchtitan_config`` through the TorchTitan
adapter, never by hand; the older rows (no flags published) are mapped from their tables as stated
in ``assumptions``.  Roles: ``calibration`` = every third row, in file order, of the older rows
(Narayanan, Korthikanti, llm-foundry, TorchTitan: a third of them, spread over every source); every
NeMo row and every current row is ``judge``; the extra AutoModel rows (``EXTRA``) judge too.

Rows that cannot become a plan are listed with the reason. Run: ``python scripts/validation/build_runs.py``.
"""

from __future__ import annotations

import json
import re
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("runs.json")
CURRENT = Path(__file__).with_name("current_runs.json")


def shared_source() -> Path | None:
    """``shared/validation/published_runs.json`` next to the checkout, if there is one."""
    if os.environ.get("PUBLISHED_RUNS"):
        return Path(os.environ["PUBLISHED_RUNS"])
    for base in (ROOT.parent, ROOT.parent.parent):
        f = base / "shared" / "validation" / "published_runs.json"
        if f.exists():
            return f
    return None


GPU = {"A100-SXM4-80GB": "a100-sxm-80gb", "A100-80GB": "a100-sxm-80gb", "H100-80GB": "h100-sxm",
       "H200 (141GB)": "h200"}


def _gpu(name: str) -> str | None:
    """The hardware-DB key of a row's GPU text."""
    if name in GPU:
        return GPU[name]
    if name.startswith("H100-SXM 96GB"):
        return "h100-sxm-96gb-500w"
    for pre, key in (("H100-SXM-80GB", "h100-sxm"), ("GB300", "gb300"), ("GB200", "gb200"), ("B300", "b300"),
                     ("B200", "b200"), ("MI325X", "mi325x"), ("MI355X", "mi355x"), ("MI350X", "mi350x"),
                     ("MI300X", "mi300x"), ("H200", "h200")):
        if name.startswith(pre):
            return key
    return None


def _source_group(rid: str) -> str:
    for pre in ("narayanan2021", "korthikanti2022", "torchtitan_asynctp", "torchtitan_a100", "torchtitan_h200",
                "torchtitan_h100", "llmfoundry_h100", "llmfoundry_a100", "primus"):
        if rid.startswith(pre):
            return pre
    return rid.split("_")[0]


def eq3_flops_per_token(a: dict) -> float:
    """Narayanan et al. 2021 eq. (3) per token: 96 l h^2 (1 + s/(6h) + V/(16 l h)) (full recompute)."""
    l, h, s, V = a["num_layers"], a["hidden_size"], a["seq_length"], a["vocab_size"]
    return 96 * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def convert(r: dict) -> tuple[dict | None, str]:
    rid = r["id"]
    a, hw, par, tr, meas = r["architecture"], r["hardware"], r["parallelism"], r["training"], r["measured"]
    assumptions: list[str] = []
    gpu = _gpu(hw["gpu"])
    if gpu is None:
        return None, f"GPU {hw['gpu']!r} with unstated batch / sequence / TP"
    if a.get("seq_length") is None or a.get("ffn_hidden_size") is None:
        return None, "sequence length or FFN size not stated"
    group = _source_group(rid)
    model = dict(name=r.get("model_name", rid), num_layers=a["num_layers"], hidden_size=a["hidden_size"],
                 ffn_hidden_size=a["ffn_hidden_size"], num_attention_heads=a["num_attention_heads"],
                 num_query_groups=a.get("num_query_groups"), vocab_size=a.get("vocab_size") or 32000,
                 seq_length=a["seq_length"])
    if a.get("vocab_size") is None:
        assumptions.append("vocab 32000 (Llama 2 tokenizer; not in the row)")
    parallel = dict(tp=par.get("tp") or 1, pp=par.get("pp") or 1, cp=par.get("cp") or 1)
    training: dict = dict(precision="bf16")
    gpus = hw["num_gpus"]
    world_model = parallel["tp"] * parallel["cp"]

    if group in ("narayanan2021", "korthikanti2022"):
        # GPT-3 style (Megatron GPT): MHA, 4h GeLU MLP, LayerNorm, learned positions, biases, tied
        model.update(swiglu=False, normalization="layernorm", position_embedding="learned", add_bias_linear=True,
                     add_qkv_bias=True, untie_embeddings_and_output_weights=False, make_vocab_size_divisible_by=128)
        training["precision"] = "fp16"
        if "model_parallel_size_tp_x_pp" in par and par.get("pp") is None:
            parallel["tp"] = 8
            parallel["pp"] = par["model_parallel_size_tp_x_pp"] // 8
            assumptions.append(f"tp=8, pp={parallel['pp']} from model-parallel size {par['model_parallel_size_tp_x_pp']} (paper: TP within a node)")
        if par.get("vpp"):
            parallel["vpp"] = par["vpp"]
            training["pipeline_schedule"] = "interleaved_1f1b"
        parallel["sequence_parallel"] = bool(par.get("sequence_parallel"))
        rec = str(tr.get("recompute") or "")
        training["recompute"] = {"granularity": "selective" if rec.startswith("selective") else "full"}
        mbs = tr.get("micro_batch_size")
        if mbs is None:
            mbs = 1
            assumptions.append("micro_batch_size 1 (not stated)")
        training["micro_batch_size"] = mbs
        if tr.get("global_batch_size") is None:
            return None, "global batch not stated"
        training["global_batch_size"] = tr["global_batch_size"]
        if parallel["pp"] > 1 and not par.get("vpp"):
            assumptions.append("non-interleaved 1F1B (schedule not stated)")
        assumptions.append("DP gradient all-reduce not overlapped (Megatron 2021-22 default)")
        # Megatron 2021-22: no FlashAttention yet (the papers' selective recompute exists because the
        # s x s attention scores are materialised); GPT-3 dropout 0.1 on attention and hidden states
        training["attention_backend"] = "unfused"
        model.update(attention_dropout=0.1, hidden_dropout=0.1)
        assumptions.append("unfused attention (scores materialised; pre-FlashAttention Megatron), dropout 0.1")
        if group == "narayanan2021":
            # the asynchronous TP all-reduce behind the backward GEMMs came to Megatron-LM in 2021-09
            # (commit f3e57f6 "remove increasing nccl stream for overlapping allreduce and gemm"), after
            # the paper's runs (arXiv 2104.04473, April 2021); Korthikanti 2022's sequence-parallel code
            # has it (LinearWithGradAccumulationAndAsyncCommunication, 2022-03)
            training["tp_async_backward"] = False
            assumptions.append("TP backward all-reduce synchronous (Megatron-LM before 2021-09)")
        source = dict(framework="megatron")
    elif group.startswith("torchtitan"):
        model.update(swiglu=True, normalization="rmsnorm", position_embedding="rope", untie_embeddings_and_output_weights=True)
        prec = str(tr.get("precision") or "bf16").lower()
        training["precision"] = "fp8" if ("float8" in prec or "fp8" in prec) else "bf16"
        if tr.get("precision") is None:
            assumptions.append("bf16 (torchtitan FSDP2 default mixed precision)")
        rec = str(tr.get("recompute") or "none").lower()
        if rec.startswith("full"):
            training["recompute"] = {"granularity": "full"}
        elif "layer" in rec:
            training["recompute"] = {"granularity": "full", "method": "every_n", "num_layers": 2}
            assumptions.append("selective 'layer' AC = every 2nd layer fully recomputed (torchtitan selective_ac_option=2)")
        elif rec.startswith("selective"):
            training["recompute"] = {"granularity": "op"}
            assumptions.append("selective AC = TorchTitan per-op SAC (selective_ac_option 'op')")
        else:
            training["recompute"] = {"granularity": "none"}
        if training["precision"] == "fp8":
            training["fp8_recipe"] = "tensorwise"
            assumptions.append("float8 = torchao tensorwise scaling (the benchmark files' default)")
            if par.get("fsdp_float8_all_gather"):   # the row states the run's enable_fsdp_float8_all_gather
                training["fp8_param_gather"] = True
        training["compile"] = "compile" in rid.lower() or bool(tr.get("compile")) or "float8" in prec
        if "compile" not in rid.lower() and not tr.get("compile"):
            assumptions.append("torch.compile " + ("on (float8 runs require it)" if training["compile"]
                                                   else "off (not stated in the row)"))
        source = dict(framework="torchtitan")
        parallel["dp_sharding"] = "full"
        parallel["sequence_parallel"] = parallel["tp"] > 1
        if parallel["cp"] > 1:  # torchtitan's default parallelism.context_parallel_rotate_method (v0.1.0)
            parallel["cp_comm_type"] = "allgather"
            assumptions.append("CP rotate method allgather (torchtitan's default)")
        training["tp_comm_overlap"] = bool(par.get("async_tp"))
        training["overlap_grad_reduce"] = training["overlap_param_gather"] = True
        local = tr.get("local_batch_size_per_dp_rank")
        dp = gpus // (parallel["tp"] * parallel["cp"] * parallel["pp"])
        if parallel["pp"] > 1:
            sched = str(par.get("pp_schedule") or "1F1B")
            if "nterleaved" in sched:
                return None, "interleaved PP: stages per rank not stated"
            # torchtitan @9dec370 (the runs' commit) splits the local batch into
            # experimental.pipeline_parallel_microbatches micro-batches, default = the PP degree
            # (torchtitan/parallelisms/pipelining_utils.py build_pipeline_schedule)
            n_mb = parallel["pp"] if (local or 1) % parallel["pp"] == 0 else (local or 1)
            training["micro_batch_size"] = max(1, (local or 1) // n_mb)
            training["global_batch_size"] = (local or 1) * dp
            assumptions.append(f"{n_mb} PP micro-batches of {training['micro_batch_size']} per step (torchtitan "
                               "default: pipeline_parallel_microbatches = PP degree)")
            L, pp = a["num_layers"], parallel["pp"]
            if L % pp:
                rest = L - (L // pp + 1) * (pp - 2)
                parallel["pipeline_layers_first_stage"] = rest // 2
                parallel["pipeline_layers_last_stage"] = rest - rest // 2
                assumptions.append(f"uneven PP layout first/last {rest // 2}/{rest - rest // 2}, middle {L // pp + 1}")
        else:
            mbs = tr.get("micro_batch_size") or local or 1
            training["micro_batch_size"] = mbs
            training["global_batch_size"] = tr.get("global_batch_size") or mbs * dp
            if tr.get("global_batch_size") is None:
                assumptions.append("global batch = local batch x DP (no accumulation)")
    elif group.startswith("llmfoundry"):
        # MPT: MHA, 4h GeLU MLP, low-precision LayerNorm, ALiBi (no positional weights), no biases, tied
        model.update(swiglu=False, normalization="layernorm", position_embedding="none",
                     untie_embeddings_and_output_weights=False)
        rec = str(tr.get("recompute") or "none").lower()
        training["recompute"] = {"granularity": "full" if rec.startswith("full") else "none"}
        zs = str(par.get("zero_stage") or "")
        parallel["dp_sharding"] = "optimizer" if "SHARD_GRAD_OP" in zs else "full"
        training["overlap_grad_reduce"] = training["overlap_param_gather"] = True
        training["micro_batch_size"] = tr["micro_batch_size"]
        training["global_batch_size"] = tr["global_batch_size"]
        assumptions.append("ALiBi bias cost inside flash-attention not modelled")
        # Composer + PyTorch FSDP in eager mode with FlashAttention: the cost model's PyTorch-native
        # eager profile (framework "torchtitan", compile off); LayerNorm and GeLU are single ATen kernels
        source = dict(framework="torchtitan")
        assumptions.append("framework profile: PyTorch-native FSDP eager (as TorchTitan without compile), FlashAttention-2")
    else:
        return None, "unknown source"

    cluster = dict(gpu=gpu, num_nodes=max(1, gpus // (hw.get("gpus_per_node") or 8)),
                   gpus_per_node=min(gpus, hw.get("gpus_per_node") or 8))
    plan = dict(model=model, parallel=parallel, training=training, cluster=cluster, source=source)

    # what we compare: tokens/s/GPU
    if meas.get("tokens_per_sec_per_gpu"):
        target = float(meas["tokens_per_sec_per_gpu"])
        how = "tokens/s/GPU as published"
    elif meas.get("iteration_time_s") and training.get("global_batch_size"):
        target = training["global_batch_size"] * a["seq_length"] / (meas["iteration_time_s"] * gpus)
        how = f"tokens/s/GPU = global batch x seq / (iteration time {meas['iteration_time_s']} s x {gpus} GPUs)"
    elif meas.get("tflops_per_gpu") and group == "narayanan2021":
        target = meas["tflops_per_gpu"] * 1e12 / eq3_flops_per_token(a)
        how = (f"tokens/s/GPU = {meas['tflops_per_gpu']} TFLOP/s / eq.(3) FLOPs per token "
               f"{eq3_flops_per_token(a):.4g} (paper's convention, recompute counted)")
    else:
        return None, "no tokens/s, iteration time or convertible TFLOP/s"
    row = dict(id=rid, source=r["source"], source_group=group, model_name=r.get("model_name"), plan=plan,
               gpus=gpus, measured_tokens_per_sec_per_gpu=target, comparison=how,
               measured=meas, flops_convention=r.get("flops_convention"), assumptions=assumptions,
               dense=not a.get("num_experts"))
    return row, ""


# Judge-only rows found with the search tool (not in the shared file). NeMo AutoModel (PyTorch
# FSDP2 backend, TE + DeepEP), docs/performance-summary.md of NVIDIA-NeMo/Automodel, "Pre-Training
# Performance, System: DGX-H100, Precision: BF16" (read through the stig.sh mirror of the GitHub
# file, dated April 17, 2026). tokens/s/GPU checks: gbs*seq/(step time*gpus) reproduces the column.
_AUTOMODEL = "NVIDIA-NeMo/Automodel docs/performance-summary.md, Pre-Training, DGX-H100, BF16"
_DSV3 = dict(name="DeepSeek V3 671B", num_layers=61, hidden_size=7168, ffn_hidden_size=18432, num_attention_heads=128,
             vocab_size=129280, seq_length=4096, num_experts=256, moe_router_topk=8, moe_ffn_hidden_size=2048,
             moe_shared_expert_intermediate_size=2048, moe_dense_first_layers=3, multi_latent_attention=True,
             q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128, qk_pos_emb_head_dim=64, v_head_dim=128)
_QWEN3_30B = dict(name="Qwen3 30B-A3B", num_layers=48, hidden_size=2048, ffn_hidden_size=6144, num_attention_heads=32,
                  num_query_groups=4, head_dim=128, vocab_size=151936, seq_length=4096, num_experts=128,
                  moe_router_topk=8, moe_ffn_hidden_size=768, qk_layernorm=True)
EXTRA = [
    dict(id="automodel_h100_dsv3_671b_1024gpu", model=_DSV3, gpus=1024, gbs=8192, mbs=1,
         parallel=dict(tp=1, pp=4, ep=64, pipeline_layers_first_stage=14, pipeline_layers_last_stage=15),
         tokens=865, time=37.87, table="TP1 PP4 CP1 EP64 VP8 FSDP256, step 37.87 s, 216 TFLOP/s/GPU, 865 tokens/s/GPU",
         rope_fusion=False),
    dict(id="automodel_h100_dsv3_671b_256gpu", model=_DSV3, gpus=256, gbs=512, mbs=1,
         parallel=dict(tp=1, pp=4, ep=64, pipeline_layers_first_stage=14, pipeline_layers_last_stage=15),
         tokens=1002, time=8.18, table="TP1 PP4 CP1 EP64 VP8 FSDP64, step 8.18 s, 250 TFLOP/s/GPU, 1,002 tokens/s/GPU",
         rope_fusion=False),
    dict(id="automodel_h100_qwen3_30b_a3b_8gpu", model=_QWEN3_30B, gpus=8, gbs=512, mbs=4,
         parallel=dict(tp=1, pp=1, ep=8), tokens=12040, time=21.77,
         table="TP1 PP1 CP1 EP8 FSDP8, step 21.77 s, 327 TFLOP/s/GPU, 12,040 tokens/s/GPU"),
]


def extra_rows() -> list[dict]:
    out = []
    for e in EXTRA:
        m = e["model"]
        # The benchmark configs (examples/benchmark/configs/{deepseek_v3_te_deepep,deepseek_v3_te_deepep_1024,
        # qwen3_moe_30b_te_deepep}.yaml of NVIDIA-NeMo/Automodel) set `activation_checkpointing: true`
        # (nemo_automodel/components/moe/parallelizer.py apply_ac: checkpoint_wrapper around every
        # decoder block = full recompute), `enable_deepep: true` and `fake_balanced_gate: true`, whose
        # gate (components/moe/layers.py FakeBalancedGate) gives token i the experts
        # (i*k .. i*k+k-1) mod E: k consecutive experts aligned to k, i.e. exactly group-limited routing
        # with E/k groups of k experts and one group per token.
        model = dict(m, moe_router_num_groups=m["num_experts"] // m["moe_router_topk"], moe_router_group_topk=1)
        assumptions = ["full recompute (config: activation_checkpointing true -> checkpoint_wrapper per block)",
                       "DeepEP dispatcher (config: enable_deepep true)",
                       "fake_balanced_gate routing (config) = E/k groups of k consecutive experts, 1 group per token",
                       "no overlap of DeepEP dispatch/combine with compute (none configured)",
                       "kernels priced with the Megatron-Core + TE profile (framework megatron): AutoModel runs TE "
                       "RMSNorm / Linear / DotProductAttention (cuDNN) and GroupedExpertsDeepEP's fused permute and "
                       "SwiGLU; not priced: its unfused dense / shared-expert SwiGLU, the MLA torch.cat copies, the "
                       "bf16 torch cross-entropy; in-situ efficiency is Megatron's (no AutoModel calibration row)",
                       "optimizer: torch.optim.Adam on bf16 parameters (no fp32 master copy), priced with the plan's "
                       "fp32-state Adam bytes"]
        par = dict(e["parallel"], dp_sharding="full")
        # FSDP2 as the table's code runs it (Automodel @89e3a9fdd, the commit that published the table;
        # torch <= 2.8): components/moe/parallelizer.py apply_fsdp shards model.model, every block, the
        # experts (own unit over the ep_shard mesh, Shard(1), no MixedPrecisionPolicy), embed_tokens and
        # lm_head with reshard_after_forward = not pp_enabled and MixedPrecisionPolicy(param bf16, reduce
        # fp32), but not the pipeline stage's module (DeepseekV3ForCausalLM), so torch pipelining's
        # stage.backward_maybe_with_nosync takes its plain-backward branch and FSDP2's defaults run on
        # every micro-batch (the MoE-aware patch, backend.enable_fsdp_optimizations, came with PR #574
        # on 2025-10-08, after the table)
        if e["parallel"].get("pp", 1) > 1:
            par["fsdp_pp_grad_sync"] = "microbatch"
            assumptions.append("FSDP2 syncs every micro-batch (parallel.fsdp_pp_grad_sync microbatch): the stage module "
                               "is not an FSDP module, so torch pipelining's no-sync path does not apply (Automodel "
                               "@89e3a9fdd moe/parallelizer.py apply_fsdp; enable_fsdp_optimizations came after the table)")
        assumptions.append("FSDP reduce-scatter: blocks in fp32 (MixedPrecisionPolicy reduce_dtype float32), experts in "
                           "bf16 (their fully_shard has no mp_policy; training.expert_grad_reduce_in_fp32 false)")
        if e.get("rope_fusion") is False:
            # the DeepSeek-V3 rows date from Automodel @89e3a9fdd (2025-10-06): components/moe/rope_utils.py
            # apply_rotary_emb = view_as_complex(x.float()) * freqs_cis (eager, fp32); TE's fused RoPE came
            # with PR #897 (2026-01-08, backend rope_fusion), after these rows (the Qwen3 row was re-measured
            # 2026-02-26 with rope_fusion true in its config)
            assumptions.append("RoPE eager (fp32 complex multiply, Automodel @89e3a9fdd rope_utils.apply_rotary_emb; "
                               "TE fused RoPE came 2026-01, PR #897): training.rope_fusion false")
        gbs = e["gbs"]
        sched = "1f1b"
        pp = e["parallel"].get("pp", 1)
        if pp > 1:
            # torch interleaved1f1b with VP8: 32 virtual stages holding 61 layers split as evenly as
            # torch pipelining does (29 x 2 + 3 x 1), embedding first, head + loss last
            for k in ("pipeline_layers_first_stage", "pipeline_layers_last_stage"):
                par.pop(k, None)
            par.update(vpp=8, pipeline_layout="Ett|" + "tt|" * 28 + "t|t|tL")
            sched = "interleaved_1f1b"
            assumptions.append("VP8 interleaving as a Megatron layout string: 32 virtual stages of 2 layers "
                               "(3 of 1), embedding on the first, head + loss on the last")
            local, dp = 8, e["gpus"] // pp
            if gbs // dp > local:
                assumptions.append(f"GA {gbs // dp // local} x local batch {local}: torch pipelining runs one schedule "
                                   f"per accumulation step, so one step = global batch {local * dp} (a schedule of "
                                   f"{local} micro-batches); the optimizer, which recipes/llm/benchmark.py runs once per "
                                   f"{gbs // dp // local} schedules, is counted every schedule")
                gbs = local * dp
        plan = dict(model=model, parallel=par, source=dict(framework="megatron"),
                    training=dict(global_batch_size=gbs, micro_batch_size=e["mbs"], precision="bf16",
                                  grad_reduce_in_fp32=True, expert_grad_reduce_in_fp32=False,
                                  rope_fusion=e.get("rope_fusion", True),
                                  pipeline_schedule=sched, overlap_grad_reduce=True, overlap_param_gather=True,
                                  recompute=dict(granularity="full"), moe_token_dispatcher="deepep"),
                    cluster=dict(gpu="h100-sxm", num_nodes=max(1, e["gpus"] // 8), gpus_per_node=min(8, e["gpus"])))
        out.append(dict(id=e["id"], source=f"{_AUTOMODEL}: {e['table']}", source_group="automodel_extra",
                        model_name=e["model"]["name"], plan=plan, gpus=e["gpus"],
                        measured_tokens_per_sec_per_gpu=float(e["tokens"]), comparison="tokens/s/GPU as published",
                        measured={"tokens_per_sec_per_gpu": e["tokens"], "iteration_time_s": e["time"]},
                        flops_convention="n/a (tokens/s compared)", assumptions=assumptions, dense=False,
                        role="judge", judge_only_extra=True))
    return out


def _cluster_for(gpu: str, gpus: int, gpn: int | None, machine: str | None = None):
    """The row's cluster: GB200 / GB300 NVL72 trays of 4 GPUs in a 72-GPU NVLink domain (the
    hardware DB's defaults), else nodes of ``gpus_per_node``; ``machine``: a power-limited machine whose
    cap the source does not state (``hardware.power_limit_machine``): the cap its organisation states as its
    convention (``calibration.SOURCE_POWER_LIMIT_W``)."""
    from primus_launch.plan import Cluster
    from primus_launch.projection.cost import calibration as cal
    from primus_launch.projection.hardware.gpus import get_gpu

    spec = get_gpu(gpu)
    per = gpn or spec.gpus_per_node
    per = min(per, gpus)
    cap = cal.SOURCE_POWER_LIMIT_W.get(machine) if machine else None
    return Cluster(gpu=gpu, num_nodes=max(1, gpus // per), gpus_per_node=per,
                   nvlink_domain=spec.nvlink_domain if spec.nvlink_domain and spec.nvlink_domain != per else None,
                   power_limit_w=cap)


def groups_of(plan: dict, row_id: str) -> dict:
    """Judging groups of a row: primary (long_seq_cp | moe | dense_fp8 | dense_bf16) and GPU family."""
    from primus_launch.projection.hardware.gpus import get_gpu

    m, par, tr = plan["model"], plan["parallel"], plan["training"]
    if (par.get("cp") or 1) > 1 or m["seq_length"] >= 32768:
        primary = "long_seq_cp"
    elif m.get("num_experts"):
        primary = "moe"
    elif tr.get("precision") in ("fp8", "fp4"):
        primary = "dense_fp8"
    else:
        primary = "dense_bf16"
    fam = get_gpu(plan["cluster"]["gpu"]).arch or "custom"
    return {"primary": primary, "gpu_family": fam}


def flops_per_token_full_attention(plan) -> float:
    """Megatron's model FLOPs per token with the full (non-causal) attention-score count, the NeMo
    rows' convention (verified in the shared README: core_r0.8 num_floating_point_operations)."""
    from primus_launch.projection.cost.flops import model_flops_per_iteration

    return model_flops_per_iteration(plan, causal_attention=False) / plan.tokens_per_iteration


# Settings of the NeMo rows that their ``megatron_flags`` leave out, read from the NeMo launcher
# configuration each row names (NVIDIA/NeMo-Framework-Launcher, launcher_scripts/conf/training/<family>/
# <model>.yaml): ``hidden_dropout`` / ``attention_dropout``.  Megatron-LM's defaults are 0.1, so a row
# whose flags omit them would otherwise be read with dropout on.  (row-id prefix, flags, source)
NEMO_CONFIG_FLAGS: list[tuple[str, list[str], str]] = [
    ("nemo2407_h100_fp8_GPT3-", ["--hidden-dropout", "0.1", "--attention-dropout", "0.1"],
     "NeMo-Framework-Launcher @23972bc5415 conf/training/gpt3/{5b,20b,175b}.yaml: hidden_dropout 0.1, "
     "attention_dropout 0.1"),
    ("nemo2407_h100_fp8_LLAMA2-", ["--hidden-dropout", "0.0", "--attention-dropout", "0.0"],
     "NeMo-Framework-Launcher @23972bc5415 conf/training/llama/llama2_{7b,13b,70b}.yaml: hidden_dropout 0.0, "
     "attention_dropout 0.0, ffn_dropout 0.0"),
    ("nemo2407_h100_fp8_Nemotron-", ["--hidden-dropout", "0.0", "--attention-dropout", "0.0"],
     "NeMo-Framework-Launcher @23972bc5415 conf/training/nemotron/nemotron_{8b,22b,340b}.yaml: hidden_dropout 0.0, "
     "attention_dropout 0.0, ffn_dropout 0.0"),
    ("nemo_longseq_h100_llama2_7b_", ["--hidden-dropout", "0.0", "--attention-dropout", "0.0"],
     "NeMo-Framework-Launcher tag 24.03.01 (the table's container) conf/training/llama/llama2_7b.yaml: "
     "hidden_dropout 0.0, attention_dropout 0.0, ffn_dropout 0.0"),
]


# The Megatron-Bridge rows with ``--tp-comm-overlap`` run Bridge's per-model userbuffers configuration, which
# their notes name and no Megatron-LM flag in their ``megatron_flags`` carries: each is transcribed from
# Bridge's code (v0.4.2 src/megatron/bridge/training/comm_overlap.py; identical at v0.2.1) into the
# Megatron-LM ``--tp-comm-overlap-cfg`` YAML of ``ub_cfgs/<name>.yaml`` (the file says so) and passed with it.
UB_CFG_DIR = Path(__file__).resolve().parent / "ub_cfgs"


def ub_cfg_flags(r: dict) -> tuple[list[str], list[str]]:
    """``--tp-comm-overlap-cfg`` for a row whose notes name a Bridge userbuffers config (above)."""
    flags = r.get("megatron_flags") or []
    if "--tp-comm-overlap" not in flags or any(f.startswith("--tp-comm-overlap-cfg") for f in flags):
        return [], []
    m = re.search(r"(userbuffers_\w+)", r.get("notes") or "")
    if not m or not (UB_CFG_DIR / f"{m.group(1)}.yaml").is_file():
        return [], []
    return (["--tp-comm-overlap-cfg", str(UB_CFG_DIR / f"{m.group(1)}.yaml")],
            [f"userbuffers configuration {m.group(1)} (Megatron-Bridge comm_overlap.py, named in the row's notes) "
             f"as --tp-comm-overlap-cfg scripts/validation/ub_cfgs/{m.group(1)}.yaml"])


# Rows run by NeMo 1 (NeMo-Framework-Launcher) with ``optim.name: distributed_fused_adam``: Apex's
# DistributedFusedAdam keeps its own contiguous gradient buffer and buckets in place of Megatron's DDP, zeroes it in
# ``zero_grad`` (one pass, like Megatron's ``zero_grad_buffer``), reduces with ``ReduceOp.AVG``
# (``average_grad_sync=True``: no 1/DP pass over the buffer) and runs no Megatron per-bucket NaN check (NVIDIA/apex
# master ``apex/contrib/optimizers/distributed_fused_adam.py`` ``zero_grad`` / ``_start_bucket_grad_sync``).  Spelled
# in Megatron-LM flags (cost/step_extras.py).  (row-id prefix, source)
APEX_DFA_FLAGS = ["--ddp-average-in-collective", "--no-check-for-nan-in-loss-and-grad"]
APEX_DFA_ROWS: list[tuple[str, str]] = [
    ("nemo2407_", "NeMo-Framework-Launcher @23972bc5415 conf/training/{gpt3,llama,nemotron}/*.yaml: optim.name "
                  "distributed_fused_adam, contiguous_grad_buffer true"),
    ("nemo_longseq_", "NeMo-Framework-Launcher tag 24.03.01 conf/training/llama/llama2_7b.yaml: optim.name "
                      "distributed_fused_adam"),
    ("dgxc2411_", "NVIDIA/dgxc-benchmarking @35a9aec NeMo-Launcher YAMLs: optim.name distributed_fused_adam"),
]


def apex_dfa_flags(rid: str, flags: list[str]) -> tuple[list[str], list[str]]:
    """:data:`APEX_DFA_FLAGS` for a row of :data:`APEX_DFA_ROWS` (those its flags do not set) and the assumption
    line that says why."""
    have = {f.split()[0] for f in flags}
    for pre, src in APEX_DFA_ROWS:
        if rid.startswith(pre):
            add = [f for f in APEX_DFA_FLAGS if f not in have]
            if add:
                return add, [f"Apex DistributedFusedAdam ({src}): averages in the collective and runs no Megatron "
                             f"per-bucket NaN check, spelled {' '.join(add)}"]
    return [], []


def config_flags(rid: str, flags: list[str]) -> tuple[list[str], list[str]]:
    """Flags of ``NEMO_CONFIG_FLAGS`` for row ``rid`` that its own flags do not set, and the
    assumption lines that say where they come from."""
    have = {f.split()[0] for f in flags}
    for pre, extra, src in NEMO_CONFIG_FLAGS:
        if rid.startswith(pre):
            add = [x for flag, val in zip(extra[::2], extra[1::2]) if flag not in have for x in (flag, val)]
            if add:
                return add, [f"from the NeMo launcher config ({src}): {' '.join(add)}"]
    return [], []


BRIDGE_HYBRIDEP_CHUNK = ("NUM_OF_TOKENS_PER_CHUNK_COMBINE_API", "128")


def hybridep_env_of(r: dict) -> tuple[dict[str, str], list[str]]:
    """The launch environment a row's run started with, as far as the plan reads it (the HybridEP combine chunk:
    ``primus_launch/adapters/hybridep_env.py``), and the assumption it rests on.  Megatron-LM moe_recipes rows: the
    recipe's ``ENV_VARS`` (``launch_env``, with the DeepEP commit its Dockerfile builds in ``deepep_commit``).
    Megatron-Bridge rows on HybridEP: 128 tokens -- Bridge's performance launcher sets the variable on every HybridEP
    recipe from 797a11418 (2026-04-03, in v0.4.2, the 26.04 release: ``scripts/performance/perf_plugins.py``), its
    later ``perf_recipes`` state it in their ``env_vars``, and the releases before ran DeepEP hybrid-ep builds older
    than a0d27f1 (2026-03-31), whose default was 128."""
    env = dict(r.get("launch_env") or {})
    hybrid = "hybridep" in str(r.get("training", {}).get("moe_dispatcher", ""))
    if r["id"].startswith("mbridge") and hybrid and BRIDGE_HYBRIDEP_CHUNK[0] not in env:
        env[BRIDGE_HYBRIDEP_CHUNK[0]] = BRIDGE_HYBRIDEP_CHUNK[1]
        return env, ["HybridEP combine chunk 128 tokens: Megatron-Bridge's perf launcher sets "
                     "NUM_OF_TOKENS_PER_CHUNK_COMBINE_API=128 on every HybridEP recipe (797a11418, v0.4.2; "
                     "perf_recipes env_vars later); earlier releases' DeepEP predates a0d27f1 (default 128)"]
    return env, []


def flag_row(r: dict, role: str, group: str):
    """A row with ``megatron_flags`` through the Megatron adapter (``plan_from_argv``)."""
    from primus_launch.adapters.megatron import plan_from_argv

    hw = r["hardware"]
    gpu = hw.get("plan_gpu") or _gpu(hw["gpu"])
    if gpu is None:
        return None, f"GPU {hw['gpu']!r} not in the hardware DB"
    argv = ["pretrain_gpt.py"]
    for f in r["megatron_flags"]:
        argv += f.split()
    extra, extra_notes = config_flags(r["id"], r["megatron_flags"])
    apex, apex_notes = apex_dfa_flags(r["id"], r["megatron_flags"])
    ub, ub_notes = ub_cfg_flags(r)
    argv += extra + apex + ub
    extra_notes = extra_notes + apex_notes + ub_notes
    env, env_notes = hybridep_env_of(r)
    extra_notes = extra_notes + env_notes
    try:
        plan = plan_from_argv(argv, cluster=_cluster_for(gpu, hw["num_gpus"], hw.get("gpus_per_node"),
                                                         hw.get("power_limit_machine")),
                              deepep_pin=r.get("deepep_commit"), launch_env=env)
    except Exception as e:  # the reader cannot express a flag yet: say which
        return None, f"Megatron adapter: {' '.join(str(e).split())[:200]}"
    meas = r["measured"]
    if r.get("measured_tokens_per_sec_per_gpu_for_judging"):
        target = float(r["measured_tokens_per_sec_per_gpu_for_judging"])
        how = "tokens/s/GPU as the row states it (published, or TFLOP/s / the source's FLOPs per token: derived_fields)"
    elif meas.get("tokens_per_sec_per_gpu"):
        target = float(meas["tokens_per_sec_per_gpu"])
        how = "tokens/s/GPU as published"
    elif meas.get("tflops_per_gpu"):
        fpt = flops_per_token_full_attention(plan)
        target = meas["tflops_per_gpu"] * 1e12 / fpt
        how = (f"tokens/s/GPU = {meas['tflops_per_gpu']} TFLOP/s / {fpt / 1e9:.2f} GFLOP per token (Megatron "
               "num_floating_point_operations with FULL attention scores: the source's convention)")
    else:
        return None, "no tokens/s or TFLOP/s"
    pd = plan.model_dump(mode="json")
    if ub:  # the machine's path of the YAML -> the repository's (the plan holds its settings, not the path)
        pd = json.loads(json.dumps(pd).replace(str(UB_CFG_DIR), "scripts/validation/ub_cfgs"))
    unread = [f"{w.flag}={w.value}: {w.effect}" for w in (plan.source.unmodelled if plan.source else [])]
    row = dict(id=r["id"], source=r["source"], source_group=group, model_name=r.get("model_name"), plan=pd,
               gpus=r["hardware"]["num_gpus"], measured_tokens_per_sec_per_gpu=target, comparison=how,
               measured=meas, flops_convention=r.get("flops_convention"),
               assumptions=list(r.get("flags_unknown") or []) + extra_notes + _cap_note(hw)
               + [f"adapter: not modelled {u}" for u in unread],
               dense=not r["architecture"].get("num_experts"), role=role, from_flags=True)
    return row, ""


def titan_row(r: dict, role: str, group: str):
    """A row with a ``torchtitan_config`` through the TorchTitan adapter (``plan_from_text``), or with a
    ``torchtitan_launch`` (a torchtitan 0.3 ``--module / --config`` launch line) through ``plan_from_launch``."""
    import tomli_w

    from primus_launch.adapters.torchtitan import plan_from_text
    from primus_launch.adapters.torchtitan_argv import plan_from_launch

    hw = r["hardware"]
    gpu = hw.get("plan_gpu") or _gpu(hw["gpu"])
    if gpu is None:
        return None, f"GPU {hw['gpu']!r} not in the hardware DB"
    cluster = _cluster_for(gpu, hw["num_gpus"], hw.get("gpus_per_node"), hw.get("power_limit_machine"))
    try:
        if r.get("torchtitan_launch"):
            plan = plan_from_launch(list(r["torchtitan_launch"]), cluster)
        else:
            cfg = {k: v for k, v in r["torchtitan_config"].items() if isinstance(v, dict) and k != "recipe_overrides"}
            for k, v in (r["torchtitan_config"].get("recipe_overrides") or {}).items():
                sec, _, key = k.partition(".")
                cfg.setdefault(sec, {})[key] = v
            plan = plan_from_text(tomli_w.dumps(cfg), cluster=cluster)
    except Exception as e:
        return None, f"TorchTitan adapter: {' '.join(str(e).split())[:200]}"
    target = r.get("measured_tokens_per_sec_per_gpu_for_judging") or r["measured"]["tokens_per_sec_per_gpu"]
    target = None if target is None else float(target)  # None: no throughput published (dgxc_titan_runs.py)
    row = dict(id=r["id"], source=r["source"], source_group=group, model_name=r.get("model_name"),
               plan=plan.model_dump(mode="json"), gpus=hw["num_gpus"], measured_tokens_per_sec_per_gpu=target,
               comparison="tokens/s/GPU as published", measured=r["measured"], flops_convention=r.get("flops_convention"),
               assumptions=list(r.get("flags_unknown") or []) + _cap_note(hw),
               dense=not r["architecture"].get("num_experts"), role=role, from_flags=True)
    if hw.get("power_limit_machine"):
        row["power_limit_machine"] = hw["power_limit_machine"]   # validate.py: calibration.SOURCE_STEP_OVERHEAD_S
    return row, ""


def primus_row(r: dict, role: str, group: str):
    """A row with a ``primus_config`` (a flattened Primus module: the experiment, its presets and the run script's
    arguments as resolved at the row's commit, ``build_current_runs.primus_flatten``) through the Primus reader
    (``adapters.primus_yaml.plan_from_text``)."""
    import yaml

    from primus_launch.adapters.primus_yaml import plan_from_text

    hw = r["hardware"]
    gpu = hw.get("plan_gpu") or _gpu(hw["gpu"])
    if gpu is None:
        return None, f"GPU {hw['gpu']!r} not in the hardware DB"
    text = yaml.safe_dump({"modules": {"pre_trainer": r["primus_config"]}}, sort_keys=False)
    try:
        plan = plan_from_text(text, f"{r.get('primus_model_preset') or r['id']}.yaml", env={},
                              cluster=_cluster_for(gpu, hw["num_gpus"], hw.get("gpus_per_node")))
    except Exception as e:
        return None, f"Primus adapter: {' '.join(str(e).split())[:200]}"
    target = float(r.get("measured_tokens_per_sec_per_gpu_for_judging") or r["measured"]["tokens_per_sec_per_gpu"])
    unread = [f"{w.flag}={w.value}: {w.effect}" for w in (plan.source.unmodelled if plan.source else [])]
    pd = plan.model_dump(mode="json")
    row = dict(id=r["id"], source=r["source"], source_group=group, model_name=r.get("model_name"), plan=pd,
               gpus=hw["num_gpus"], measured_tokens_per_sec_per_gpu=target, comparison="tokens/s/GPU as published",
               measured=r["measured"], flops_convention=r.get("flops_convention"),
               assumptions=list(r.get("flags_unknown") or []) + [f"adapter: not modelled {u}" for u in unread],
               dense=not r["architecture"].get("num_experts"), role=role, from_flags=True)
    return row, ""


def _cap_note(hw: dict) -> list[str]:
    """The assumption line of a row whose machine's power cap the source does not state (``_cluster_for``)."""
    from primus_launch.projection.cost import calibration as cal

    m = hw.get("power_limit_machine")
    if not m or m not in cal.SOURCE_POWER_LIMIT_W:
        return []
    return [f"cluster.power_limit_w = {cal.SOURCE_POWER_LIMIT_W[m]} W: the source's unstated cap, its organisation's "
            f"stated convention (calibration.SOURCE_POWER_LIMIT_W); plus the machine's per-step time outside the "
            f"model, calibrated on {cal.POWER_LIMIT_ROWS[m]} (calibration.SOURCE_STEP_OVERHEAD_S, scripts/calibrate.py, "
            f"added by scripts/validate.py)"]


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from primus_launch.plan import Plan

    src = shared_source()
    if src is None:
        print(f"no shared/validation/published_runs.json next to {ROOT}: {OUT.name} kept as committed")
        return 0
    rows = json.loads(src.read_text())
    out, skipped = [], []
    older = []
    for r in rows:
        if r.get("megatron_flags"):
            continue
        row, why = convert(r)
        if row is None:
            skipped.append({"id": r["id"], "reason": why})
            continue
        try:
            Plan.model_validate(row["plan"])
        except Exception as e:  # a row whose published config is not a legal plan
            skipped.append({"id": r["id"], "reason": f"not a legal plan: {' '.join(str(e).split())[:160]}"})
            continue
        older.append(row)
    for i, row in enumerate(older):
        row["role"] = "calibration" if i % 3 == 1 else "judge"
    out += older
    for r in rows:   # NeMo / Megatron-Core rows: through the adapter, judge
        if not r.get("megatron_flags"):
            continue
        group = "nemo_longseq" if r["id"].startswith("nemo_longseq") else "nemo2407"
        row, why = flag_row(r, "judge", group)
        if row is None:
            skipped.append({"id": r["id"], "reason": why})
        else:
            out.append(row)
    for row in extra_rows():
        Plan.model_validate(row["plan"])
        out.append(row)
    if CURRENT.exists():  # current production runs: judge only (but the rows a stated constant is fitted on)
        from primus_launch.projection.cost import calibration as cal

        for r in json.loads(CURRENT.read_text()):
            group = "current_" + r["id"].split("_")[0]
            own = set(cal.POWER_LIMIT_ROWS.values()) | {cal.ROCM_LEGACY_GEMM_ROW} | set(cal.MAMBA_SSD_ROWS)
            role = "calibration" if r["id"] in own else "judge"
            if r.get("megatron_flags"):
                row, why = flag_row(r, role, group)
            elif r.get("torchtitan_config") or r.get("torchtitan_launch"):
                row, why = titan_row(r, role, group)
            elif r.get("primus_config"):
                row, why = primus_row(r, role, group)
            else:
                row, why = None, "no flags or config published"
            if row is not None and row["measured_tokens_per_sec_per_gpu"] is None:
                row, why = None, "no throughput published (memory judged only, validate_memory.py)"
            if row is None:
                skipped.append({"id": r["id"], "reason": why})
                continue
            row["held_out"] = True
            out.append(row)
    for row in out:
        row["groups"] = groups_of(row["plan"], row["id"])
    from torch_versions import apply as apply_torch_versions   # plan.software.torch where the source states / dates it

    apply_torch_versions(out)
    doc = {"generated_by": "scripts/validation/build_runs.py",
           "input": ["shared/validation/published_runs.json", "scripts/validation/current_runs.json"],
           "calibration_rule": ("every third of the older rows (Narayanan, Korthikanti, llm-foundry, TorchTitan) "
                                "in file order, starting at the second; NeMo, AutoModel and current rows judge, but "
                                "the one row of each machine whose unpriced per-step time is fitted on it "
                                "(calibration.POWER_LIMIT_ROWS) and the one row the ROCm legacy grouped_gemm "
                                "per-GEMM host cost is fitted on (calibration.ROCM_LEGACY_GEMM_ROW) and the two rows the "
                                "Mamba-2 SSD training factor is fitted on (calibration.MAMBA_SSD_ROWS)"),
           "rows": out, "skipped": skipped}
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, OUT)
    n_cal = sum(r["role"] == "calibration" for r in out)
    print(f"{len(out)} rows ({n_cal} calibration, {len(out) - n_cal} judge), {len(skipped)} skipped -> {OUT}")
    for s_ in skipped:
        print(f"  skipped {s_['id']}: {s_['reason']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
