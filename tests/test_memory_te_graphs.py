"""TE-scoped CUDA graphs' static buffers and the precision-aware optimizer's master copy, checked against
megatron-core 0.16.1's own code (the same paths as Megatron-LM 3758b54b2, which Megatron-Bridge 02b574d28
pins): ``cuda_graphs.py`` ``TECudaGraphHelper._get_sample_arguments`` on megatron's own schedule order,
``TransformerLayer.get_layer_static_inputs`` of a layer built on the meta device,
``MoECudaGraphPartialCaptureSignal.get_early_return_outputs`` and ``OptimizerConfig``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.memory.inflight import chunk_micro_batches
from primus_launch.projection.memory.mcore import master_param_bytes, mcore_opts
from primus_launch.projection.memory.te_graphs import te_graph_chunk_input_bytes, te_graph_layer_bytes

SCOPE = ("attn", "moe_router", "moe_preprocess")


@pytest.mark.parametrize("pp_rank,vpp,group", [(1, 4, None), (0, 4, None), (3, 4, None), (1, 4, 2), (2, 2, 5)])
def test_static_input_sets_equal_layer_micro_batches_in_flight(pp_rank, vpp, group, monkeypatch):
    """megatron's ``_get_sample_arguments`` walks the rank's own capture order (``get_schedule_table`` +
    ``convert_schedule_table_to_order``) and reuses a static input set once its chunk's backward ran: the
    sets it allocates equal the most (layer, micro-batch) pairs in flight, which the model walks."""
    import megatron.core.transformer.cuda_graphs as cg
    from megatron.core.pipeline_parallel.schedules import get_pp_rank_microbatches, get_schedule_table

    monkeypatch.setattr(cg, "is_te_min_version", lambda *a, **k: True)  # the recipe's TE 2.14
    pp, nmb, per_chunk = 4, 16, 3
    g = group or pp
    comm = SimpleNamespace(pp_group=SimpleNamespace(rank=lambda: pp_rank, size=lambda: pp),
                           virtual_pipeline_model_parallel_size=vpp)
    _, _, warmup, _ = get_pp_rank_microbatches(nmb, vpp, g, False, p2p_communicator=comm)
    order = cg.convert_schedule_table_to_order(warmup, vpp, get_schedule_table(nmb, vpp, g))

    class Layer:  # a graphable layer's static inputs, as TransformerLayer.get_layer_static_inputs gives them
        def get_layer_static_inputs(self, seq_length, micro_batch_size):
            return {"hidden_states": torch.zeros(2), "attention_mask": torch.zeros(1, dtype=torch.bool)}

    layers = [[Layer() for _ in range(per_chunk)] for _ in range(vpp)]
    helper = object.__new__(cg.TECudaGraphHelper)
    helper.__dict__.update(
        num_model_chunks=vpp, num_layers_per_chunk=[per_chunk] * vpp, num_microbatches=nmb, callables_per_chunk=layers,
        flattened_callables=[x for c in layers for x in c], seq_length=8, micro_batch_size=1,
        chunks_with_decoder=[SimpleNamespace(decoder=SimpleNamespace(layers=c), mtp=SimpleNamespace(layers=[]))
                             for c in layers],
        config=SimpleNamespace(cuda_graph_scope=list(SCOPE), multi_latent_attention=True))
    args, kwargs = helper._get_sample_arguments(order)
    sets = {id(a[0]) for a in args}
    masks = {id(k["attention_mask"]) for k in kwargs}
    want = chunk_micro_batches("interleaved_1f1b", pp, vpp, nmb, group)[pp_rank] * per_chunk
    assert len(sets) == len(masks) == want


def test_layer_static_inputs_and_early_return_outputs_are_megatrons():
    """A DeepSeek-V3-shaped MoE + MLA layer built by megatron-core on the meta device: its static inputs
    under scope attn are the bf16 hidden states (eager's own saved layer input) and a bool attention mask
    ``[b, 1, s, s]`` eager does not have; the MoE graph's early-return outputs (megatron's function) carry
    the shared expert's output, which eager frees after the combine.  The model's per-(layer,
    micro-batch) extra equals the mask plus that output; without shared experts in the graph, the mask."""
    from mcore_meta import build_stage, cpu_current_device
    from megatron.core.transformer.enums import CudaGraphScope
    from megatron.core.transformer.moe.moe_utils import MoECudaGraphPartialCaptureSignal
    from megatron.core.transformer.transformer_layer import TransformerLayer

    s, h, mbs = 64, 96, 2
    arch = ModelArch(num_layers=2, hidden_size=h, ffn_hidden_size=192, num_attention_heads=4, vocab_size=256,
                     seq_length=s, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=32,
                     moe_shared_expert_intermediate_size=32, moe_dense_first_layers=1, multi_latent_attention=True,
                     q_lora_rank=32, kv_lora_rank=16, qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16,
                     qk_layernorm=True)
    plan = Plan(model=arch, training=dict(global_batch_size=mbs, micro_batch_size=mbs,
                                          cuda_graph_impl="transformer_engine", cuda_graph_scope=SCOPE),
                cluster=dict(gpus_per_node=1))
    (model,) = build_stage(plan, 0)
    layer = model.decoder.layers[1]
    assert isinstance(layer, TransformerLayer) and layer.is_moe_layer
    layer.config.cuda_graph_scope = [CudaGraphScope.attn, CudaGraphScope.moe_router, CudaGraphScope.moe_preprocess]
    with cpu_current_device():
        static = layer.get_layer_static_inputs(s, mbs)
    assert set(static) == {"hidden_states", "attention_mask"}
    hidden, mask = static["hidden_states"], static["attention_mask"]
    assert hidden.dtype == torch.bfloat16 and hidden.numel() == s * mbs * h
    kw = dict(tokens=s * mbs, hidden=h, mbs=mbs, seq=s)
    no_shared = te_graph_layer_bytes(SCOPE, moe=True, shared_in_graph=False, **kw)
    assert no_shared == mask.numel() * mask.element_size()

    # the early-return outputs of the MoE graph (HybridEP's attributes: token probs and routing map)
    T, E = s * mbs, arch.num_experts
    probs, rmap = torch.zeros(T, E), torch.zeros(T, E, dtype=torch.bool)
    dispatcher = SimpleNamespace(cudagraph_attrs=["_comm_manager.token_probs", "_comm_manager.routing_map"],
                                 _comm_manager=SimpleNamespace(token_probs=probs, routing_map=rmap),
                                 valid_cudagraph_attrs=None)
    normed, shared_out = torch.zeros(T, h, dtype=torch.bfloat16), torch.zeros(s, mbs, h, dtype=torch.bfloat16)
    sig = MoECudaGraphPartialCaptureSignal(SimpleNamespace(token_dispatcher=dispatcher), "preprocess",
                                           hidden_states=normed, probs=probs)
    outs = sig.get_early_return_outputs(normed, shared_out)
    assert any(o is shared_out for o in outs)
    with_shared = te_graph_layer_bytes(SCOPE, moe=True, shared_in_graph=True, **kw)
    assert with_shared - no_shared == shared_out.numel() * shared_out.element_size()
    # and the plan's own options: DeepSeek's shared expert runs in the graph (no --moe-shared-expert-overlap)
    assert mcore_opts(plan).shared_in_graph and mcore_opts(plan).te_graph_scope == SCOPE


def test_chunk_input_copy_only_where_the_graph_starts_at_the_input():
    kw = dict(tokens=4096, hidden=7168)
    assert te_graph_chunk_input_bytes(SCOPE, receives=True, **kw) == 2 * 4096 * 7168
    assert te_graph_chunk_input_bytes(SCOPE, receives=False, **kw) == 0  # the embedding chunk
    assert te_graph_chunk_input_bytes(("moe_router", "moe_preprocess"), receives=True, **kw) == 0
    # a dense layer is not graphable under a MoE-only scope
    assert te_graph_layer_bytes(("moe_router",), moe=False, shared_in_graph=True, tokens=8, hidden=4, mbs=1,
                                seq=8) == 0


@pytest.mark.parametrize("recipe,main,pg", [(None, "fp32", False), ("delayed", "fp32", False), ("mxfp8", "fp32", True),
                                            ("tensorwise", "fp32", False), (None, "fp16", False),
                                            ("blockwise", "bf16", False)])
def test_master_copy_bytes_follow_megatrons_optimizer_config(recipe, main, pg, monkeypatch):
    """megatron-core 0.16.1 ``OptimizerConfig`` decides who keeps the master weights: TE's FusedAdam when
    ``use_precision_aware_optimizer_no_fp8_or_ds_fp8`` (with ``store_param_remainders``, default True at
    TE >= 2.1: an int16 remainder beside a bf16 parameter), megatron's fp32 shard otherwise."""
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    cfg = _megatron_optimizer_config(monkeypatch, main_params_dtype=dt[main], fp8_recipe=recipe)
    if cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8:  # TE FusedAdam(master_weights=True)
        want = 2 if (cfg.store_param_remainders and dt[main] == torch.float32) else dt[main].itemsize
    else:
        want = 4  # megatron's own fp32 main-param shards
    got = master_param_bytes(precision_aware=True, main_params_dtype=main, precision="fp8" if recipe else "bf16",
                             fp8_recipe=recipe, fp8_param_gather=pg)
    assert got == want
    assert master_param_bytes(precision_aware=False, main_params_dtype=main, precision="bf16", fp8_recipe=None) == 4


def _megatron_optimizer_config(monkeypatch, **kw):
    """megatron-core 0.16.1's ``OptimizerConfig`` on this CPU, precision-aware with bf16 moments (``kw`` over
    those): no Transformer Engine here, and ``__post_init__`` only checks FusedAdam's signature, so TE 2.14's
    is stubbed."""
    import megatron.core.optimizer.optimizer_config as oc
    from te_stub import stub_te_fused_adam

    monkeypatch.setattr(oc, "is_te_min_version", lambda *a, **k: True)  # the recipe's TE 2.14
    stub_te_fused_adam(monkeypatch)
    args = dict(optimizer="adam", bf16=True, use_distributed_optimizer=True, use_precision_aware_optimizer=True,
                main_params_dtype=torch.float32, main_grads_dtype=torch.bfloat16, exp_avg_dtype=torch.bfloat16,
                exp_avg_sq_dtype=torch.bfloat16)
    return oc.OptimizerConfig(**{**args, **kw})


@pytest.mark.parametrize("recipe_flag", [None, "delayed", "tensorwise", "mxfp8"])
def test_bf16_run_optimizer_recipe_decides_the_master_copy(recipe_flag, monkeypatch):
    """A BF16 run (no --fp8-format) still hands its --fp8-recipe to megatron's OptimizerConfig (Megatron-LM
    builds it from args; Megatron-Bridge copies MixedPrecisionConfig.fp8_recipe, default 'tensorwise', in
    ``update_config_with_precision_overrides``): ``use_precision_aware_optimizer_no_fp8_or_ds_fp8`` reads
    that recipe, not whether fp8 is on.  The plan read from the same flags keeps the master copy and the
    step's grad copies where megatron's own config says."""
    from primus_launch.adapters.megatron import plan_from_argv

    cfg = _megatron_optimizer_config(monkeypatch, fp8_recipe=recipe_flag or "delayed")  # Megatron-LM default
    argv = ("pretrain_gpt.py --num-layers 2 --hidden-size 256 --num-attention-heads 4 --seq-length 128 "
            "--max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 --bf16 "
            "--use-distributed-optimizer --use-precision-aware-optimizer --main-grads-dtype bf16 "
            "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --vocab-size 1024").split()
    if recipe_flag:
        argv += ["--fp8-recipe", recipe_flag]
    plan = plan_from_argv(argv)
    assert plan.training.precision == "bf16"
    opts = mcore_opts(plan)
    te_master = cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8
    assert opts.main_params == (2 if te_master else 4)
    assert opts.decoupled_grads == te_master


def test_moonlight_published_peak_with_bridges_optimizer_config():
    """The published Moonlight-16B peak (Megatron-Bridge perf-activation-recompute skill, 8 H100, TP 2 EP 8,
    no recompute: 36.618 GB allocated after iteration 2), with the BF16 recipe's optimizer config as Bridge
    builds it (fp32 master weights kept by megatron: ``--fp8-recipe tensorwise`` in the case's flags): within
    7 %; with TE's 2-byte remainders it would be 16 % under (the gap this case revealed)."""
    import json
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "scripts" / "validation"))
    from build_runs import _cluster_for

    from primus_launch.adapters.megatron import plan_from_argv
    from primus_launch.projection.memory.estimate import estimate_memory

    cases = {c["id"]: c for c in json.loads((root / "scripts/validation/memory_cases.json").read_text())["cases"]}
    c = cases["mbridge_moonlight_16b_h100_bf16_8gpu_tp2ep8_recompute_none"]
    flags = [t for f in c["megatron_flags"] for t in f.split()]
    assert flags[-2:] == ["--fp8-recipe", "tensorwise"]
    cluster = _cluster_for("h100-sxm", 8, 8)
    measured = 36.618e9
    bridge = estimate_memory(plan_from_argv(["pretrain_gpt.py", *flags], cluster=cluster))
    remainders = estimate_memory(plan_from_argv(["pretrain_gpt.py", *flags[:-2]], cluster=cluster))
    assert bridge.allocated_peak_bytes == pytest.approx(measured, rel=0.07)
    assert remainders.allocated_peak_bytes < 0.86 * measured


@pytest.mark.parametrize("pa,main,m1,m2,recipe", [(False, "fp32", "fp32", "fp32", None),
                                                  (True, "fp32", "bf16", "bf16", None),
                                                  (True, "fp16", "fp16", "fp8", None),
                                                  (True, "fp32", "bf16", "fp32", "tensorwise")])
def test_fp32_parameters_optimizer_state_follows_the_state_dtypes(pa, main, m1, m2, recipe, monkeypatch):
    """fp32 parameters (no --bf16 / --fp16) are their own main params (megatron-core 0.16.1
    ``distrib_optimizer.py`` ``_build_model_and_main_param_groups``: the fp32 shard goes to the optimizer).
    With ``--use-precision-aware-optimizer`` TE's FusedAdam gets ``exp_avg_dtype`` / ``exp_avg_sq_dtype`` and,
    where megatron's ``OptimizerConfig.use_precision_aware_optimizer_no_fp8_or_ds_fp8`` holds,
    ``master_weights=True`` with ``master_weight_dtype = main_params_dtype`` (``optimizer/__init__.py``); TE 2.13
    ``fused_adam.py`` ``initialize_state`` then makes a ``master_param`` state for every parameter (int16
    remainders only beside a bf16 one).  Bytes per parameter = that master (if any) + the two moments."""
    from primus_launch.projection.memory.estimate import stage_memory

    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.uint8}
    cfg = _megatron_optimizer_config(monkeypatch, bf16=False, use_precision_aware_optimizer=pa,
                                     main_params_dtype=dt[main], main_grads_dtype=torch.float32,
                                     exp_avg_dtype=dt[m1] if pa else torch.float32,
                                     exp_avg_sq_dtype=dt[m2] if pa else torch.float32,
                                     fp8_recipe=recipe or "delayed")  # Megatron-LM's --fp8-recipe default
    master = dt[main].itemsize if cfg.use_precision_aware_optimizer_no_fp8_or_ds_fp8 else 0
    want = master + cfg.exp_avg_dtype.itemsize + cfg.exp_avg_sq_dtype.itemsize
    m = ModelArch(name="toy", num_layers=2, hidden_size=256, ffn_hidden_size=1024, num_attention_heads=4,
                  vocab_size=1024, seq_length=128)
    plan = Plan(model=m, parallel=dict(dp_sharding="optimizer"),
                training=dict(global_batch_size=8, precision="fp32", precision_aware_optimizer=pa,
                              main_params_dtype=main, exp_avg_dtype=m1, exp_avg_sq_dtype=m2,
                              optimizer_fp8_recipe=recipe),
                cluster=dict(gpus_per_node=8))
    st = stage_memory(plan)[0]
    assert st.optimizer_bytes == pytest.approx(want * st.num_parameters / 8, rel=1e-9)
