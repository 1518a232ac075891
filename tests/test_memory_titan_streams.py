"""FSDP2's side-stream pools (:func:`memory.titan.fsdp2_stream_pools`) vs torch's own FSDP2 step.

Truth: :func:`titan_trace.side_stream_bytes`, torchtitan 0.3.0's ``parallelize`` (FSDP2 ``fully_shard`` per
unit, its reshard policy) on a fake process group under ``FakeTensorMode``, with every storage tagged by
the stream FSDP2 made current when it was allocated (``torch.cpu.stream`` inside ``foreach_all_gather`` /
``foreach_reduce``) and counted free by a finalizer.  Shapes: Llama 3 8B blocks at real sizes (2 blocks,
the embedding and the head), the qwen3 MoE debug flavor with expert parallelism (two parameter groups per
MoE block).  Exact to the byte: the model's formula is the allocations' sizes and lifetimes, not a fit.
``training.dtype = "bfloat16"`` (bf16 sharded parameters): the shard is its own all-gather input and each reduced
shard is cast to bf16 on the reduce-scatter stream (MEMORY.md round 25).
"""

from __future__ import annotations

import pytest

from titan_trace import TitanCase, side_stream_bytes
from primus_launch.adapters.torchtitan import arch_from_flavor
from primus_launch.projection.memory.estimate import titan_args, titan_stage_parts
from primus_launch.projection.memory.stage import TITAN_DYNAMIC_FRAGMENTATION
from primus_launch.projection.memory.titan import fsdp2_stream_pools, fsdp_groups, titan_param_shapes

CASES = {
    "fsdp8": TitanCase(layers=2, seq=256),
    "tp2-fsdp4": TitanCase(layers=2, seq=256, tp=2, dp_shard=4),
    "hsdp2x4": TitanCase(layers=2, seq=256, dp_replicate=2, dp_shard=4),
    "ddp": TitanCase(layers=2, seq=256, dp_shard=1, dp_replicate=2),
    # training.dtype bfloat16: no shard copy on the copy-in stream; bf16 casts of the reduced shards kept
    "fsdp8-bf16": TitanCase(layers=2, seq=256, dtype="bfloat16"),
    "qwen3-moe-ep2": TitanCase(model="qwen3", flavor="debugmodel_moe", layers=2, seq=256, dp_shard=4, ep=2),
}


def _units(c: TitanCase):
    arch = arch_from_flavor(c.model, c.flavor).model_copy(update=dict(num_layers=c.layers, seq_length=c.seq))
    S = c.dp_shard * c.cp
    Se = S * c.tp // c.ep if c.ep > 1 else S
    parts = ["emb"] + ["moe" if arch.is_moe_layer(i) else "dense" for i in range(c.layers)] + ["head"]
    return [fsdp_groups(titan_param_shapes(arch, part, tp=c.tp, ep=c.ep), S=S, Se=Se, ep=c.ep,
                        num_experts=arch.num_experts or 1) for part in parts]


@pytest.fixture(scope="module", params=list(CASES))
def traced(request):
    c = CASES[request.param]
    return c, side_stream_bytes(c)


def test_side_stream_high_water_marks_equal_the_model(traced):
    """The copy-in stream's high-water mark is two consecutive units' flat all-gather outputs plus the
    second's bf16 shard copy; the reduce-scatter stream's is every unit's fp32 sharded gradient; the
    all-gather stream itself allocates nothing."""
    c, got = traced
    units = _units(c)
    want = fsdp2_stream_pools(units, master_bytes=2.0 if c.dtype == "bfloat16" else 4.0,
                              all_reduce=c.dp_replicate > 1)
    if any(len(gs) > 1 for gs in units):
        # several parameter groups per unit (MoE under EP): the model's bound holds one more group's flat
        # than torch 2.13's group-by-group backward prefetch keeps at once
        assert got["hwm"]["copy_in"] <= want.copy_in <= 1.04 * got["hwm"]["copy_in"]
    else:
        assert got["hwm"]["copy_in"] == pytest.approx(want.copy_in, abs=1)
    assert got["hwm"]["reduce_scatter"] == pytest.approx(want.reduce_scatter, abs=1)
    assert got["hwm"]["all_gather"] == 0
    if c.dp_shard == 1:
        assert want.copy_in == 0  # a shard group of one all-gathers nothing


def test_sharded_gradients_live_on_the_reduce_scatter_stream(traced):
    """Every sharded ``.grad`` after the backward is a view of a reduce-scatter-stream allocation: the
    memory ``memory_allocated`` loses at ``zero_grad`` stays reserved for that stream."""
    _, got = traced
    assert got["grads"]["all"] > 0
    assert got["grads_aliasing"]["reduce_scatter"] == got["grads"]["all"]


def test_reserved_adds_the_pools_not_counted_at_the_peak():
    """The stage's reserved-minus-allocated is the stated dynamic fraction plus the pools less what of them
    the peak's breakdown already holds (at a loss-backward peak: no gradient, no prefetched unit)."""
    from test_memory_titan import plan_of

    c = TitanCase(layers=2, seq=2048, ac="op", mbs=2)
    plan = plan_of(c)
    (st, parts), = titan_stage_parts(*titan_args(plan))
    pools = fsdp2_stream_pools(_units(c))
    side = pools.copy_in + pools.reduce_scatter - parts["side_pools"]
    assert parts["side_pools_reserved"] == pytest.approx(side)
    frag = TITAN_DYNAMIC_FRAGMENTATION * (st.activations_bytes + st.transient_bytes)
    assert st.allocator_reserve_bytes == pytest.approx(frag + side, abs=4)
