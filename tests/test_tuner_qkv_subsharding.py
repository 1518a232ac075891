"""tune17: TP above the query groups (megatron-core's QKV sub-sharding) is searched for Megatron plans where
megatron-core 0.16.1 accepts it, and never for TorchTitan (wk / wv sharded by whole KV heads).

Truth: megatron-core 0.16.1's own ``TransformerConfig.__post_init__`` ("num_query_groups ... must be a multiple or
divisor of tensor_model_parallel_size"; Megatron-LM core_v0.16.1 ``validate_args`` adds no rule on the groups), the
plan's legality rules for the rest; the projection prices such a plan (``cost/attention_block.py``)."""

from __future__ import annotations

import pytest
from tuner_helpers import small_dense_plan

from primus_launch.plan import ModelArch
from primus_launch.tuner.space import Space, SpaceConfig


def _plan(framework: str, groups: int):
    p = small_dense_plan(framework)  # 16 heads on 2 x 8 GPUs
    m = ModelArch(**{**p.model.model_dump(), "num_query_groups": groups})
    return p.model_copy(update={"model": m})


def _mcore_accepts_tp(heads: int, groups: int, tp: int) -> bool:
    tc = pytest.importorskip("megatron.core.transformer.transformer_config")
    try:
        tc.TransformerConfig(num_layers=2, hidden_size=64 * heads, num_attention_heads=heads, num_query_groups=groups,
                             tensor_model_parallel_size=tp)
    except ValueError:
        return False
    return heads % tp == 0


@pytest.mark.slow  # megatron-core's import
def test_megatron_searches_tp_above_the_query_groups_as_megatron_core_accepts():
    plan = _plan("megatron", 2)
    tps = {h[0] for h in Space(plan, SpaceConfig.restricted()).structs}
    assert tps == {tp for tp in (1, 2, 4, 8) if _mcore_accepts_tp(16, 2, tp)} == {1, 2, 4, 8}
    # a sub-sharded plan of the space is priced as one: its QKV output gathered (cost/layer_collectives.py)
    from primus_launch.projection.cost.layer_collectives import qkv_subsharded
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.tuner.space import apply_knobs

    sp = Space(plan, SpaceConfig.restricted())
    tuned = apply_knobs(plan, next(k for k in sp if k.tp == 8))
    assert qkv_subsharded(tuned)
    assert project_dry_run(tuned, record_timeline=False).iteration_time_s > 0


def test_torchtitan_keeps_tp_within_the_kv_heads():
    plan = _plan("torchtitan", 2)
    assert {h[0] for h in Space(plan, SpaceConfig.restricted()).structs} <= {1, 2}
