"""``--first-last-layers-bf16`` (``training.bf16_layers_start`` / ``bf16_layers_end``): which layers leave the
FP8 / FP4 context, against megatron-core 0.16.1's own ``fp8_utils.is_first_last_bf16_layer`` called with a
``TransformerConfig``; what the readers make of the flag; and the time / memory deltas against the BF16-vs-FP8
prices of the same layer (the roofline of the plan run all in BF16, TE's weight copies and saved tensors of
``memory.fp8``).  Cheap: no model is built."""

from __future__ import annotations

import pytest

from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster, ModelArch, Plan, PlanError
from primus_launch.projection.cost.roofline import layer_times_roofline
from primus_launch.projection.memory.activations import layer_activation_bytes
from primus_launch.projection.memory.estimate import stage_memory
from primus_launch.projection.memory.fp8 import weight_bytes_per_param
from primus_launch.projection.steps.flow import run_steps
from primus_launch.projection.steps.setup import bf16_plan

DENSE = ModelArch(name="dense", num_layers=8, hidden_size=2048, ffn_hidden_size=7168, num_attention_heads=16,
                  num_query_groups=4, vocab_size=32000, seq_length=2048)
BASE = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
        "--micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16").split()


def _plan(start: int, end: int, pp: int = 1, recipe: str = "mxfp8", gather: bool = False) -> Plan:
    return Plan(model=DENSE, parallel=dict(pp=pp), cluster=dict(gpu="b200", gpus_per_node=8),
                training=dict(global_batch_size=64, precision="fp8", fp8_recipe=recipe, fp8_param_gather=gather,
                              bf16_layers_start=start, bf16_layers_end=end))


@pytest.mark.parametrize("start,end", [(1, 1), (2, 0), (0, 3), (2, 2), (0, 0)])
def test_bf16_layers_are_megatron_cores(start, end):
    """``Plan.bf16_layer_ids`` = the global layer numbers for which megatron-core's ``is_first_last_bf16_layer``
    (what ``get_fp8_context`` / ``get_fp4_context`` test per layer, ``layer_number - 1``) is true; -1 (the global
    context MTP layers take) never is; the TransformerConfig defaults are the reader's (1 / 1)."""
    pytest.importorskip("megatron.core")
    import dataclasses

    from megatron.core.fp8_utils import is_first_last_bf16_layer
    from megatron.core.transformer.transformer_config import TransformerConfig

    defaults = {f.name: f.default for f in dataclasses.fields(TransformerConfig)}
    assert (defaults["num_layers_at_start_in_bf16"], defaults["num_layers_at_end_in_bf16"]) == (1, 1)
    cfg = TransformerConfig(num_layers=DENSE.num_layers, hidden_size=64, num_attention_heads=4,
                            first_last_layers_bf16=True, num_layers_at_start_in_bf16=start,
                            num_layers_at_end_in_bf16=end)
    want = {i for i in range(DENSE.num_layers) if is_first_last_bf16_layer(cfg, i)}
    assert _plan(start, end).bf16_layer_ids() == want
    assert not is_first_last_bf16_layer(cfg, -1)
    plain = _plan(start, end).with_changes(training={"precision": "bf16", "fp8_recipe": None})
    assert plain.bf16_layer_ids() == frozenset()   # without FP8 / FP4 nothing is read


def test_reader():
    """Megatron-LM flags: the flag alone keeps 1 / 1 (TransformerConfig defaults), the counts are read, no
    precision-less run reads them, delayed scaling is refused as megatron-core refuses it."""
    c = Cluster(num_nodes=1, gpus_per_node=8, gpu="b200")
    fp8 = ["--fp8-format", "e4m3", "--fp8-recipe", "mxfp8", "--first-last-layers-bf16"]
    p = plan_from_argv(BASE + fp8, c)
    assert (p.training.bf16_layers_start, p.training.bf16_layers_end) == (1, 1)
    assert not any("bf16" in u.flag for u in p.source.unmodelled)
    p = plan_from_argv(BASE + fp8 + ["--num-layers-at-start-in-bf16", "0", "--num-layers-at-end-in-bf16", "3"], c)
    assert sorted(p.bf16_layer_ids()) == [5, 6, 7]
    p = plan_from_argv(BASE + ["--first-last-layers-bf16"], c)
    assert (p.training.bf16_layers_start, p.training.bf16_layers_end) == (0, 0)
    with pytest.raises(PlanError, match="delayed"):
        plan_from_argv(BASE + ["--fp8-format", "hybrid", "--first-last-layers-bf16"], c)
    with pytest.raises(ValueError, match="num_layers // pp"):
        _plan(3, 0, pp=4)


def test_stage_times_take_the_bf16_layer_prices():
    """PP 4 x 2 layers: the stages holding layer 0 and layer 7 run those layers at the roofline's BF16 prices
    (the plan run all in BF16: BF16 GEMMs, no quantisation kernels), the middle stages as before."""
    fp8, ends = _plan(0, 0, pp=4), _plan(1, 1, pp=4)
    a, b = run_steps(fp8, layer_times_roofline(fp8)).stages, run_steps(ends, layer_times_roofline(ends)).stages
    lt8, lt16 = layer_times_roofline(fp8).dense_layer, layer_times_roofline(bf16_plan(fp8)).dense_layer
    assert lt16 != lt8   # (at this size the MXFP8 layer's quantisation kernels outweigh its faster GEMMs)
    for r in range(4):
        x, y = a.chunks[r][0], b.chunks[r][0]
        k = 1 if r in (0, 3) else 0
        assert y.fwd - x.fwd == pytest.approx(k * (lt16.fwd_s - lt8.fwd_s), rel=1e-9, abs=1e-15)
        assert y.bwd_input - x.bwd_input == pytest.approx(k * (lt16.bwd_input_s - lt8.bwd_input_s), rel=1e-9,
                                                          abs=1e-15)
        assert y.bwd_weight - x.bwd_weight == pytest.approx(k * (lt16.bwd_weight_s - lt8.bwd_weight_s), rel=1e-9,
                                                            abs=1e-15)


@pytest.mark.parametrize("gather", [False, True])
def test_stage_memory_drops_the_fp8_copies_of_the_bf16_layers(gather):
    """One stage, one micro-batch in flight: the BF16 layers hold the bf16 weight alone (TE's MXFP8 weight copies,
    or the MXFP8 parameter, gone: ``memory.fp8.weight_bytes_per_param``) and save their inputs in bf16
    (``layer_activation_bytes`` without the recipe)."""
    a, b = stage_memory(_plan(0, 0, gather=gather))[0], stage_memory(_plan(2, 1, gather=gather))[0]
    lin = 2048 * (16 + 2 * 4) * 128 + 2048 * 2048 + 3 * 2048 * 7168   # QKV, proj, gated fc1 and fc2
    per = weight_bytes_per_param("mxfp8", non_tn=True, param_gather=gather) - 2
    assert b.parameters_bytes - a.parameters_bytes == pytest.approx(-3 * lin * per, rel=1e-9)
    kw = dict(seq=2048, mbs=1, tp=1, sp=False, cp=1, ep=1, etp=1, abytes=2)
    d = layer_activation_bytes(DENSE, moe=False, fp8=None, **kw).full \
        - layer_activation_bytes(DENSE, moe=False, fp8="mxfp8", **kw).full
    assert d > 0
    assert b.activations_bytes - a.activations_bytes == pytest.approx(3 * d, rel=1e-6)


def test_param_gather_moves_the_bf16_layers_in_bf16():
    """Distributed optimizer with ``--fp8-param-gather`` (tensorwise, H100, no overlap): the FP8 layers' parameters
    are gathered at 1 byte, the BF16 layers' (BF16 parameters) at 2: only the stage holding them gathers more."""
    from primus_launch.projection.cost.dp_comm import dp_grad_sync
    from primus_launch.projection.hardware.gpus import get_gpu
    from primus_launch.projection.hardware.placement import layout
    from primus_launch.projection.memory.params import bf16_layer_params, stage_parameter_split

    def plan(end: int) -> Plan:
        return Plan(model=DENSE, parallel=dict(pp=2, dp_sharding="optimizer"),
                    cluster=dict(gpu="h100-sxm", gpus_per_node=8, num_nodes=2),
                    training=dict(global_batch_size=64, precision="fp8", fp8_recipe="tensorwise",
                                  fp8_param_gather=True, bf16_layers_end=end))

    a, b = plan(0), plan(2)
    assert [bf16_layer_params(b, r).total for r in range(2)][0] == 0 < bf16_layer_params(b, 1).total
    spec = get_gpu("h100-sxm")
    for r in range(2):
        x = dp_grad_sync(a, spec, layout(a), stage_parameter_split(a)[r], 0.0, 0.0, r)
        y = dp_grad_sync(b, spec, layout(b), stage_parameter_split(b)[r], 0.0, 0.0, r)
        assert (y > x) if r == 1 else (y == x)
