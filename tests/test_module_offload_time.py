"""Fine-grained activation offloading's time (``cost/offload.py`` ``module_offload_exposed``): each
layer's named module inputs go to the host and back over the host link, hidden behind that layer's
pass, the rest exposed (megatron-core ``pipeline_parallel/fine_grained_activation_offload.py``: copies
on dedicated D2H / H2D streams the compute waits on)."""

from __future__ import annotations

import pytest

from tuner_helpers import small_moe_plan

from primus_launch.projection.cost.offload import module_offload_exposed
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.projection.hardware.gpus import get_gpu
from primus_launch.projection.memory.activations import layer_activation_bytes

MODS = ("expert_fc1", "moe_act")


def _plan(mods=MODS):
    p = small_moe_plan().with_changes(parallel=dict(pp=1, tp=1, sequence_parallel=False, ep=2),
                                      training=dict(offload=dict(activation_modules=mods), recompute=dict(
                                          granularity="none", modules=())))
    return p


def test_exposed_is_the_offloadable_bytes_over_the_host_link_past_the_pass():
    plan = _plan()
    spec = get_gpu(plan.cluster.gpu)
    lt = layer_times_roofline(plan)
    m, t = plan.model, plan.training
    la = layer_activation_bytes(m, seq=m.seq_length, mbs=t.micro_batch_size, tp=1, sp=False, cp=1, moe=True, ep=2,
                                etp=plan.parallel.expert_tp)
    off = dict(la.offloadable)
    secs = (off["expert_fc1"] + off["moe_act"]) / spec.host_link_bw
    assert secs > 0
    f, b = module_offload_exposed(plan, lt, spec, moe=True)
    pt = lt.moe_layer
    assert f == pytest.approx(max(0.0, secs - pt.fwd_s), rel=1e-12)
    assert b == pytest.approx(max(0.0, secs - pt.bwd_input_s - pt.bwd_weight_s), rel=1e-12)
    # a dense layer has no expert inputs to move
    assert module_offload_exposed(plan, lt, spec, moe=False) == (0.0, 0.0)


def test_offloading_modules_costs_time_where_the_link_is_slower_than_the_layer():
    """Qwen3-235B's bundled recipe at PP 1, EP 8 with the experts' inputs offloaded (the plan a tune
    used to pick for free): the memory falls, and the iteration time rises by exactly the exposed
    copies of every MoE layer of every micro-batch (PP 1: no schedule in between)."""
    from pathlib import Path

    from primus_launch.adapters import load_recipe

    root = Path(__file__).resolve().parents[1]
    base = load_recipe(root / "recipes/megatron/qwen3_235b_a22b_h100_256gpu.yaml")
    on = base.with_changes(parallel=dict(tp=1, pp=1, vpp=1, ep=8, sequence_parallel=False),
                           training=dict(offload=dict(activation_modules=MODS)))
    off = on.with_changes(training=dict(offload=dict(activation_modules=())))
    spec = get_gpu(on.cluster.gpu)
    f, b = module_offload_exposed(on, layer_times_roofline(on), spec, moe=True)
    assert f > 0  # ~0.47 GB of expert inputs per layer over a 64 GB/s link: longer than the forward
    r_on, r_off = project_dry_run(on), project_dry_run(off)
    assert r_on.memory.peak_bytes_per_gpu < r_off.memory.peak_bytes_per_gpu
    moe_layers = sum(1 for i in range(on.model.num_layers) if on.model.is_moe_layer(i))
    expected = moe_layers * on.num_microbatches * (f + b)
    assert r_on.iteration_time_s - r_off.iteration_time_s == pytest.approx(expected, rel=1e-6)
    assert not [w for w in r_on.warnings if w.flag == "training.offload.activation_modules"]
