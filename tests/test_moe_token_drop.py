"""Token drop (Megatron --moe-expert-capacity-factor / --moe-pad-expert-input-to-capacity; NeMo's
MegatronTokenDropCallback) against megatron-core's code (core_r0.10.0 .. main, token_dispatcher.py / moe_utils.py):

- ``get_capacity``: ``ceil(T k / E x f)`` tokens per expert of a rank's ``T``; with padding the routing map *is* the
  capacity mask and the alltoall dispatcher's ``preprocess`` gives every local expert ``capacity x tp x ep`` rows and
  returns before the routed-count D2H copy: every EP rank computes ``f`` x the balanced count (the busiest rank's
  excess is ``f - 1``, 0 at f = 1) and the layer has no host-device sync;
- dropping alone caps each expert at its capacity: no rank above ``f`` x the mean;
- TransformerConfig refuses padding without a factor; a negative factor is dropless.
"""

from __future__ import annotations

import math

import pytest

from primus_launch.plan import Cluster, PlanError

E, K, T = 8, 2, 8192
BASE = ["pretrain_gpt.py", "--num-layers", "4", "--hidden-size", "4096", "--ffn-hidden-size", "14336",
        "--num-attention-heads", "32", "--group-query-attention", "--num-query-groups", "8", "--swiglu",
        "--normalization", "RMSNorm", "--disable-bias-linear", "--position-embedding-type", "rope",
        "--seq-length", "4096", "--max-position-embeddings", "4096", "--vocab-size", "32000",
        "--num-experts", str(E), "--moe-router-topk", str(K), "--expert-model-parallel-size", "8",
        "--moe-token-dispatcher-type", "alltoall", "--micro-batch-size", "2", "--global-batch-size", "128",
        "--bf16", "--use-distributed-optimizer", "--attention-dropout", "0", "--hidden-dropout", "0"]


def _plan(extra: list[str]):
    from primus_launch.adapters.megatron import plan_from_argv

    return plan_from_argv(BASE + extra, Cluster(gpu="h100-sxm", num_nodes=2, gpus_per_node=8))


def _rows(plan) -> dict[str, tuple]:
    from primus_launch.projection.cost.roofline import layer_op_times

    return {op[0]: op for op in layer_op_times(plan)["moe"]}


@pytest.mark.parametrize("factor", [1.0, 1.25])
def test_megatron_core_routing_map_under_token_drop(factor):
    """megatron-core 0.16.1 (installed, CPU): route a skewed router's logits, then apply_router_token_dropping as
    router.py does; the busiest expert's count over the balanced one is what ``capped`` charges."""
    torch = pytest.importorskip("torch")
    moe_utils = pytest.importorskip("megatron.core.transformer.moe.moe_utils")
    from primus_launch.projection.cost import moe_imbalance as mi

    torch.manual_seed(0)
    logits = torch.randn(T, E) + torch.linspace(0.0, 0.5, E)       # a router leaning to the last experts
    probs, rmap = moe_utils.topk_routing_with_score_function(logits, K, use_pre_softmax=True)
    cap = moe_utils.get_capacity(T * K, E, factor)
    assert cap == math.ceil(T * K / E * factor)
    mean = T * K / E
    free = mi.Imbalance("aux_loss", rmap.sum(0).max().item() / mean - 1, 0.1, 8, 8 * T, 0.0)   # one expert per rank
    assert free.delta > factor - 1
    for pad in (True, False):
        _, m = moe_utils.apply_router_token_dropping(probs, rmap, router_topk=K, capacity_factor=factor,
                                                     drop_policy="probs", pad_to_capacity=pad)
        counts = m.sum(0)
        assert counts.max().item() == cap
        if pad:
            assert counts.min().item() == cap                       # every expert exactly its capacity
        assert mi.capped(free, factor, pad).delta == pytest.approx(counts.max().item() / mean - 1, abs=1e-3)


def test_reader_reads_the_token_drop_flags():
    plan = _plan(["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"])
    assert plan.training.moe_expert_capacity_factor == 1.0 and plan.training.moe_pad_expert_input_to_capacity
    flags = {u.flag for u in plan.source.unmodelled}
    assert not flags & {"--moe-expert-capacity-factor", "--moe-pad-expert-input-to-capacity"}
    assert _plan(["--moe-expert-capacity-factor", "-1"]).training.moe_expert_capacity_factor is None  # dropless
    with pytest.raises(PlanError, match="moe-pad-expert-input-to-capacity"):
        _plan(["--moe-pad-expert-input-to-capacity"])


def test_capped_imbalance():
    from primus_launch.projection.cost import moe_imbalance as mi

    free = mi.rank_imbalance(E, K, 8, 8 * T, "aux_loss")
    assert free.delta > 0.05                                     # a trained router's spread, g(8) = 1.42
    assert mi.capped(free, None, False) is free
    assert mi.capped(free, 1.0, True).delta == 0.0               # padded: exactly the capacity
    assert mi.capped(free, 1.25, True).delta == pytest.approx(0.25)
    assert mi.capped(free, 1.0, False).delta == 0.0              # dropping: at most f - 1
    assert mi.capped(free, 2.0, False).delta == free.delta       # a loose cap does not bind


def test_padded_layer_has_no_imbalance_row_and_no_dispatcher_sync():
    dropless = _rows(_plan([]))
    padded = _rows(_plan(["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"]))
    dropping = _rows(_plan(["--moe-expert-capacity-factor", "1.0"]))
    sync = "token dispatcher host-device sync (host wakes after the D2H wait)"
    assert any(k.startswith("routing imbalance") for k in dropless) and sync in dropless
    assert not any(k.startswith("routing imbalance") for k in padded) and sync not in padded
    assert not any(k.startswith("routing imbalance") for k in dropping) and sync in dropping  # counts still vary


def test_padded_memory_is_the_static_shape_at_the_factor():
    from primus_launch.projection.memory.estimate import stage_memory

    def act(extra):
        return stage_memory(_plan(extra))[0].activations_bytes

    dropless = act([])
    assert act(["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"]) == dropless
    assert act(["--moe-expert-capacity-factor", "1.5"]) == dropless          # dropping: at most the balanced shape
    assert act(["--moe-expert-capacity-factor", "1.5", "--moe-pad-expert-input-to-capacity"]) > dropless


def test_tuner_rules_allow_moe_graphs_only_when_padded():
    # megatron-core transformer_config.py: 'moe cuda graph is only supported with drop-padding MoE'; with the
    # alltoall dispatcher and token drop unpadded, no moe_preprocess graph (host copies in the preprocess)
    from primus_launch.tuner.rules import knob_problems

    def scopes(extra):
        plan = _plan(extra + ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "moe_router",
                              "moe_preprocess"])
        graph = _plan(extra + ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-scope", "moe"])
        return ({str(p[1]) for p in knob_problems(plan) if p[0] == "training.cuda_graph_scope"},
                {str(p[1]) for p in knob_problems(graph) if p[0] == "training.cuda_graph_scope"})

    assert scopes([]) == (set(), {"moe"})
    assert scopes(["--moe-expert-capacity-factor", "1.0"]) == ({"moe_preprocess"}, {"moe"})
    assert scopes(["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"]) == (set(), set())
