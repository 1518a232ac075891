"""The plan's derived degrees and legality rules (Megatron-LM validate_args / parallel_state)."""

import pytest
from pydantic import ValidationError

from primus_launch.errors import one_line
from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Training, check_plan

LLAMA70 = dict(name="llama3.1-70b", num_layers=80, hidden_size=8192, ffn_hidden_size=28672,
               num_attention_heads=64, num_query_groups=8, vocab_size=128256, seq_length=8192)
MOE = dict(name="moe", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=16,
           num_query_groups=4, vocab_size=32000, seq_length=4096, num_experts=8, moe_router_topk=2,
           moe_ffn_hidden_size=2048)


def plan(model=LLAMA70, nodes=8, **par):
    tr = par.pop("training", {})
    return Plan(model=ModelArch(**model), parallel=Parallelism(**par),
                training=Training(**{"global_batch_size": 128, **tr}), cluster=Cluster(num_nodes=nodes))


def err(**kw) -> str:
    with pytest.raises(ValidationError) as e:
        plan(**kw)
    return one_line(e.value)


def test_derived_degrees_match_megatron_parallel_state():
    p = plan(tp=8, pp=4, vpp=5, training={"pipeline_schedule": "interleaved_1f1b"}, nodes=128)
    # Megatron: dp = world / (tp * cp * pp)  -> 1024 / 32
    assert p.world_size == 1024 and p.dp == 32
    assert p.num_microbatches == 128 // (1 * 32)
    assert p.layers_per_stage() == [20, 20, 20, 20]
    m = plan(model=MOE, nodes=1, tp=2, ep=4)
    assert m.expert_dp == 8 // (2 * 4)


def test_uneven_pipeline_layout():
    p = plan(tp=8, pp=4, pipeline_layers_first_stage=18, pipeline_layers_last_stage=18, nodes=16)
    assert p.layers_per_stage() == [18, 22, 22, 18]
    assert sum(p.layers_per_stage()) == 80


@pytest.mark.parametrize("kw, field, value", [
    (dict(tp=3), "parallel", "tp*cp*pp=3"),
    # 12 KV groups: TP 8 neither divides them nor is a multiple (megatron-core >= 0.16.0 accepts both,
    # TransformerConfig.__post_init__; TP 16 over LLAMA70's 8 groups is legal: tests/test_qkv_subsharding.py)
    (dict(model=dict(LLAMA70, num_attention_heads=48, num_query_groups=12, head_dim=128), tp=8), "parallel.tp", 8),
    (dict(tp=8, pp=3, nodes=3), "parallel.pp", 3),             # 80 layers
    (dict(tp=8, pp=4, vpp=3, nodes=4, training={"pipeline_schedule": "interleaved_1f1b"}), "parallel.pp", 4),
    (dict(tp=8, training={"global_batch_size": 100}), "training.global_batch_size", 100),
    (dict(model=MOE, nodes=1, ep=3), "parallel.ep", 3),
    (dict(ep=2), "parallel.ep", 2),                            # dense model
    (dict(sequence_parallel=True), "parallel.sequence_parallel", True),
    (dict(vpp=2), "parallel.vpp", 2),
    # megatron's MultiTokenPredictionLayer asserts recompute_num_layers == 1 under uniform
    (dict(model=dict(MOE, mtp_num_layers=1), nodes=1,
          training={"recompute": {"granularity": "full", "method": "uniform", "num_layers": 2}}),
     "training.recompute.num_layers", 2),
])
def test_illegal_plans_name_field_and_value(kw, field, value):
    msg = err(**kw)
    assert msg.startswith(f"{field}={value!r}"), msg
    assert "\n" not in msg


def test_check_plan_empty_when_legal():
    p = plan(tp=8, pp=2, nodes=8)
    assert check_plan(p) == []


def test_with_changes_revalidates():
    p = plan(tp=8, nodes=8)
    q = p.with_changes(parallel={"pp": 2}, training={"recompute": {"granularity": "full"}})
    assert q.parallel.pp == 2 and q.training.recompute.granularity == "full" and q.dp == 4
    with pytest.raises(ValidationError):
        p.with_changes(parallel={"tp": 5})
