"""--no-gradient-accumulation-fusion (training.gradient_accumulation_fusion): megatron-core's own linears and DDP
hook traced on the CPU against cost/wgrad_accumulation.py, the readers / writer, the roofline and the tuner."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from primus_launch.plan import Cluster

ROOT = Path(__file__).resolve().parents[1]
ARGS = dict(num_layers=2, hidden_size=1024, num_attention_heads=8, seq_length=1024, max_position_embeddings=1024,
            ffn_hidden_size=3584, swiglu=True, micro_batch_size=1, global_batch_size=16, bf16=True,
            tensor_model_parallel_size=1, use_distributed_optimizer=True, vocab_size=32000)


def _plan(**over):
    from primus_launch.adapters.megatron_args import plan_from_args

    return plan_from_args({**ARGS, **over}, Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))


def test_megatron_linear_and_ddp_hook_move_fresh_grads_into_main_grad():
    """megatron-core 0.16.1 built on the CPU: without the fusion a ColumnParallelLinear's backward leaves a fresh
    weight gradient in the parameter dtype, and DistributedDataParallel's own post-hook
    (``_make_backward_post_hook``) runs one ``add_`` per weight and micro-batch into the fp32 ``main_grad``:
    its bytes per element are bytes_per_weight_element's DDP figure (A + 2 G) and the fresh gradient's are
    grad_dtype_bytes."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from mcore_meta import cpu_current_device, init_fake_parallel
    from megatron.core import ModelParallelConfig
    from megatron.core.distributed.distributed_data_parallel import DistributedDataParallel
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear
    from primus_launch.projection.cost import wgrad_accumulation as wacc

    init_fake_parallel(tp=1, pp=1)
    cfg = ModelParallelConfig(params_dtype=torch.bfloat16, use_cpu_initialization=True, perform_initialization=False,
                              gradient_accumulation_fusion=False)
    with cpu_current_device():
        lins = [ColumnParallelLinear(64, 96, config=cfg, init_method=lambda w: None, bias=False, gather_output=False),
                ColumnParallelLinear(96, 32, config=cfg, init_method=lambda w: None, bias=False, gather_output=False)]
    assert not any(m.gradient_accumulation_fusion for m in lins)
    fake = SimpleNamespace(ddp_config=SimpleNamespace(overlap_grad_reduce=False), force_all_reduce=False,
                           param_to_bucket_group={})
    weights = [m.weight for m in lins]
    accs = []  # kept alive, as DDP keeps self.grad_accs
    for w in weights:
        w.main_grad = torch.zeros(w.shape, dtype=torch.float32)
        w.grad_added_to_main_grad = False
        fake.param_to_bucket_group[w] = None
        # how DDP registers it: on the parameter's gradient accumulator (distributed_data_parallel.py __init__)
        accs.append(w.expand_as(w).grad_fn.next_functions[0][0])
        accs[-1].register_hook(DistributedDataParallel._make_backward_post_hook(fake, w))

    adds: list[tuple[int, int]] = []

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.add_.Tensor and args[0].dtype == torch.float32:
                adds.append((args[0].numel(), args[0].element_size() * 2 + args[1].element_size()))
            return func(*args, **(kwargs or {}))

    micro = 3
    with Trace():
        for _ in range(micro):
            x = torch.randn(8, 2, 64, dtype=torch.bfloat16, requires_grad=True)
            y, _ = lins[0](x)
            z, _ = lins[1](y)
            z.float().sum().backward()
    assert sorted(adds) == sorted([(w.numel(), 10) for w in weights] * micro)
    assert all(w.grad is None for w in weights)  # the hook freed the fresh gradient
    plan = _plan(gradient_accumulation_fusion=False)
    assert plan.parallel.dp_sharding == "optimizer" and wacc.bytes_per_weight_element(plan) == 10.0
    assert wacc.grad_dtype_bytes(plan) == torch.tensor([], dtype=cfg.params_dtype).element_size()
    assert wacc.bytes_per_weight_element(_plan()) == 0.0  # fused: the GEMM accumulates (beta = 1)


def test_flag_and_yaml_key_read_and_round_trip(tmp_path):
    """The flag and the YAML key read into the field (modelled: no unmodelled warning); a plan that keeps it
    writes the recipe back byte-identical; the field moves the roofline's weight-gradient pass by the traced
    bytes per weight element."""
    from primus_launch.adapters import load_recipe, write_recipe
    from primus_launch.adapters.megatron_args import plan_from_args
    from primus_launch.projection.cost import calibration as cal
    from primus_launch.projection.cost.compute import elementwise_time
    from primus_launch.projection.cost.roofline import layer_op_times

    on, off = _plan(), _plan(gradient_accumulation_fusion=False)
    assert on.training.gradient_accumulation_fusion and not off.training.gradient_accumulation_fusion
    assert not any(u.flag == "--no-gradient-accumulation-fusion" for u in off.source.unmodelled)
    # each weight GEMM's weight-gradient pass grows by one streaming kernel over its k x n weight at 10 B / element
    slow = 1.0 / cal.framework_eff("megatron")
    a, b = dict(layer_op_times(on)), dict(layer_op_times(off))
    fc1 = [(x, y) for x, y in zip(a["dense"], b["dense"]) if "FC1" in x[0]]
    # forward and input-grad kernels unchanged (the host launch-bound row's backward counts the added kernels)
    assert fc1 and all(x[:3] == y[:3] for x, y in zip(a["dense"], b["dense"]) if not x[0].startswith("host"))
    (x, y), = fc1
    assert y[3] - x[3] == pytest.approx(elementwise_time(1024.0 * 2 * 3584 * 10, "h100-sxm") * slow, rel=1e-9)
    assert b["_kernels"]["dense"][1] > a["_kernels"]["dense"][1]
    # a bash recipe with the flag reads it; written back unchanged
    src = (ROOT / "recipes" / "megatron" / "llama3.1_8b.sh").read_text()
    assert "--no-gradient-accumulation-fusion" not in src
    p = tmp_path / "r.sh"
    p.write_text(src)
    plan = load_recipe(p)
    assert plan.training.gradient_accumulation_fusion
    out = write_recipe(plan, tmp_path / "same.sh")
    assert Path(out).read_text() == src
    # the writer turns it off for the plan that asks
    back = load_recipe(write_recipe(plan.with_changes(training={"gradient_accumulation_fusion": False}),
                                    tmp_path / "off.sh"))
    assert not back.training.gradient_accumulation_fusion
    assert "--no-gradient-accumulation-fusion" in Path(tmp_path / "off.sh").read_text()
    # Megatron YAML key
    y = tmp_path / "r.yaml"
    y.write_text((ROOT / "recipes" / "megatron" / "llama3.1_8b.yaml").read_text()
                 + "gradient_accumulation_fusion: false\n")
    yplan = load_recipe(y)
    assert not yplan.training.gradient_accumulation_fusion
    assert Path(write_recipe(yplan, tmp_path / "y2.yaml")).read_text() == y.read_text()
    assert plan_from_args({**ARGS, "gradient_accumulation_fusion": True}, on.cluster).training == on.training


def test_memory_fresh_gradient_transient():
    """The fresh gradient of the layer's largest linear module sits on top of the layer's backward temporaries."""
    from primus_launch.projection.memory.mcore import mcore_opts
    from primus_launch.projection.memory.params import arch_key, largest_linear_module

    on, off = _plan(), _plan(gradient_accumulation_fusion=False)
    assert mcore_opts(on).wgrad_fresh == 0 and mcore_opts(off).wgrad_fresh == 2
    m = off.model
    fc1 = 2 * 3584 * 1024  # the gated FC1
    assert largest_linear_module(arch_key(m), 1, 1, 1, False) == fc1
    from primus_launch.projection.api import project

    # the first of two stages, where a layer's backward is the largest transient: + the bf16 FC1 gradient
    a, b = (project(_plan(pipeline_model_parallel_size=2, **o), dry_run=True).memory.stages[0].transient_bytes
            for o in ({}, {"gradient_accumulation_fusion": False}))
    assert b - a == 2 * fc1


def test_tuner_offers_megatron_fsdp_with_the_flag_priced(tmp_path):
    """Megatron-FSDP is back in a fused recipe's space; the candidate plan carries the flag the writer writes,
    and the re-read recipe reports nothing unmodelled for it."""
    from primus_launch.adapters import load_recipe, write_recipe
    from primus_launch.tuner import rules
    from primus_launch.tuner.knobs import apply_knobs, knobs_of

    plan = load_recipe(ROOT / "recipes" / "megatron" / "llama3.1_70b.sh")
    assert plan.training.gradient_accumulation_fusion and "megatron_fsdp" in rules.knobs_for(plan)
    k = knobs_of(plan)
    k = k._replace(pp=1, vpp=1, dp_sharding="optimizer_grads", first_stage_layers=None, last_stage_layers=None,
                   layout=None, acc_embedding=False, acc_loss=False)
    tuned = apply_knobs(plan, k)
    assert not tuned.training.gradient_accumulation_fusion
    assert apply_knobs(plan, knobs_of(plan)).training.gradient_accumulation_fusion  # its own knobs: unchanged
    back = load_recipe(write_recipe(tuned, tmp_path / "fsdp.sh"))
    assert back.parallel.dp_sharding == "optimizer_grads" and not back.training.gradient_accumulation_fusion
    assert not any(u.flag == "--no-gradient-accumulation-fusion" for u in back.source.unmodelled)
