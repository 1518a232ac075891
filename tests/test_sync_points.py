"""The run's blocking collectives kept inside the world-size-1 pieces (projection/measure/sync_points.py):
the pieces block exactly where the run's layers call a collective (independent truth: the TP calls
of ``cost/layer_collectives.tp_calls``, checked against a traced real TP=2 run in
tests/test_layer_collectives.py), only for the plan's groups of more than one rank, only on the CPU
in CPU time, and megatron is left as it was."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from primus_launch.plan import Plan


def _plan(parallel: dict, moe: bool = False, **training) -> Plan:
    model = dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
                 vocab_size=256, seq_length=32)
    if moe:
        model.update(num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=96)
        training.update(moe_token_dispatcher="allgather", moe_grouped_gemm=False, moe_permute_fusion=False)
    world = parallel.get("tp", 1) * parallel.get("pp", 1) * parallel.get("ep", 1) * parallel.get("cp", 1)
    return Plan.model_validate({"model": model, "parallel": parallel,
                                "training": dict(global_batch_size=4, micro_batch_size=1, precision="bf16", **training),
                                "cluster": {"gpus_per_node": world}})


def _blocks(plan: Plan, clock: str = "thread") -> dict[str, Counter]:
    """Blocks per piece (built by the plan's framework's builder) over one forward + backward of each."""
    from primus_launch.projection.measure import build_mcore, build_titan
    from primus_launch.projection.measure.sync_points import blocking_collectives

    b = build_titan if plan.framework == "torchtitan" else build_mcore
    out = {}
    with b.world_size_one("cpu"):
        ps_, model = b.pieces(plan, "cpu", measure_layers=1)
        with blocking_collectives(plan, "cpu", model, clock) as counts:
            for pc in ps_:
                counts.clear()
                y = pc.forward(*pc.inputs)
                y = y if isinstance(y, torch.Tensor) else y[0]
                torch.autograd.backward(y, torch.ones_like(y))
                out[pc.name] = Counter(counts)
    return out


@pytest.mark.parametrize("sp", [False, True], ids=["tp2", "tp2-sp"])
def test_tp_pieces_block_at_each_tp_call_of_the_run(sp):
    """Every TP call the run makes and the projection prices is a block of the piece that makes it:
    without sequence parallelism the layer's four all-reduces (mappings), with it the layer's ten
    all-gathers and reduce-scatters (four through megatron's mappings, six called by its linears
    directly), and the vocab-parallel loss's three all-reduces (direct calls) in the head's piece."""
    from primus_launch.projection.cost.layer_collectives import tp_calls

    plan = _plan({"tp": 2, "sequence_parallel": sp})
    calls = Counter(c.where for c in tp_calls(plan))
    got = _blocks(plan)
    assert sum(got["dense_layer#0"].values()) == calls["layer"] == (10 if sp else 4), got["dense_layer#0"]
    assert sum(got["embedding"].values()) == calls["embedding"] == (2 if sp else 1), got["embedding"]
    assert sum(got["head_loss"].values()) == calls["head"] + calls["loss"] == (6 if sp else 4), got["head_loss"]
    assert got["head_loss"]["call"] >= 3  # the loss's all-reduces
    assert sum(got["attn_core"].values()) == 0


def test_moe_pieces_block_at_the_dispatch_and_the_combine():
    got = _blocks(_plan({"ep": 2}, moe=True))
    moe = next(v for k, v in got.items() if k.startswith("moe_layer"))
    assert moe == Counter({"dispatch": 1, "combine": 1, "dispatch.backward": 1, "combine.backward": 1})
    assert sum(got["embedding"].values()) == 0 and sum(got["head_loss"].values()) == 0  # tp = 1


def test_no_blocks_without_a_group_or_off_the_cpu_clocks():
    from primus_launch.projection.measure import sync_points

    pp = _plan({"pp": 2})
    assert sync_points.blocked_groups(pp) == () and sync_points.blocking_substitution(pp, "cpu") is None
    assert all(sum(c.values()) == 0 for c in _blocks(pp).values())
    tp = _plan({"tp": 2})
    assert all(sum(c.values()) == 0 for c in _blocks(tp, clock="wall").values())
    assert sync_points.blocking_substitution(tp, "cpu", "wall") is None
    assert sync_points.blocking_substitution(tp, "cuda") is None
    sub = sync_points.blocking_substitution(tp, "cpu")
    assert sub.keyed and sub.applies("dense_layer#0") and not sub.applies("attn_core")


def _titan(name: str, flavor: str, parallel: dict, gpus: int = 2) -> Plan:
    from primus_launch.adapters.torchtitan_arch import arch_from_flavor

    arch = arch_from_flavor(name, flavor, seq_len=32)
    return Plan.model_validate({"model": arch.model_dump(), "parallel": {"dp_sharding": "full", **parallel},
                                "training": {"global_batch_size": 2 * gpus, "micro_batch_size": 2},
                                "cluster": {"gpus_per_node": gpus, "gpu": "h100-sxm"},
                                "source": {"framework": "torchtitan"}})


TITAN_CASES = {
    "llama3-tp2-sp": ("llama3", "debugmodel", {"tp": 2, "sequence_parallel": True}, 2),
    "llama3-tp2": ("llama3", "debugmodel", {"tp": 2, "sequence_parallel": False}, 2),
    "qwen3-moe-tp2-sp": ("qwen3", "debugmodel_moe", {"tp": 2, "sequence_parallel": True}, 2),
    "dsv3-tp2-sp": ("deepseek_v3", "debugmodel", {"tp": 2, "sequence_parallel": True}, 2),
    "dsv3-ep2": ("deepseek_v3", "debugmodel", {"ep": 2}, 2),
    "llama3-cp2": ("llama3", "debugmodel", {"cp": 2}, 2),
}


@pytest.mark.parametrize("case", list(TITAN_CASES))
def test_torchtitan_pieces_block_at_each_call_of_its_step(case):
    """A torchtitan piece blocks once per collective call its layer makes in torchtitan's own step,
    as the projection prices them (``layer_collectives.tp_calls``, held against torchtitan's traced
    step in tests/test_layer_collectives.py): each layer kind's list, the embedding's, the head's
    and loss's; with EP the routed experts' dispatch and combine, forward and backward; with CP
    the core's stand-in K and V, forward and backward (in the core and in each layer)."""
    from primus_launch.projection.cost.layer_collectives import layer_calls, tp_calls
    from primus_launch.projection.measure.sync_points import blocking_substitution

    name, flavor, par, gpus = TITAN_CASES[case]
    plan = _titan(name, flavor, par, gpus)
    calls = tp_calls(plan)
    wheres = Counter(c.where for c in calls)
    got = _blocks(plan)
    for piece, n in got.items():
        want = 0
        if "_layer#" in piece:
            moe = piece.startswith("moe_layer")
            want = len(layer_calls(plan, moe))
            want += 4 * (moe and plan.parallel.ep > 1) + 4 * (plan.parallel.cp > 1)
        elif piece == "embedding":
            want = wheres["embedding"]
        elif piece == "head_loss":
            want = wheres["head"] + wheres["loss"]
        elif piece == "attn_core":
            want = 4 * (plan.parallel.cp > 1)
        assert sum(n.values()) == want, (piece, n, want)
    assert sum(sum(n.values()) for n in got.values()) > 0
    sub = blocking_substitution(plan, "cpu")
    assert sub.keyed and "torchtitan's calls" in sub.what and sub.applies("dense_layer#0")


def test_megatron_is_restored_after_the_blocks():
    import megatron.core.tensor_parallel.mappings as mappings

    from primus_launch.projection.measure.sync_points import MAPPINGS

    before = {n: getattr(mappings, n) for n in MAPPINGS}
    _blocks(_plan({"tp": 2}))
    assert {n: getattr(mappings, n) for n in MAPPINGS} == before


def test_the_blocks_are_in_the_piece_cache_key():
    """A TP=2 piece timed with the blocks is never read for one timed without (wall clock)."""
    from primus_launch.projection.measure import sync_points
    from primus_launch.projection.measure.build_mcore import build_spec

    plan = _plan({"tp": 2})
    spec = build_spec(plan, "cpu", 1)
    plain = spec.material("dense_layer#0")
    spec.substitutions.append(sync_points.blocking_substitution(plan, "cpu"))
    assert spec.material("dense_layer#0") != plain
    assert spec.material("attn_core") == build_spec(plan, "cpu", 1).material("attn_core")


def test_cp_core_blocks_at_its_stand_in_keys_and_values():
    """CP=2: the emulated core blocks once per K and V each way, where the run's all-gather core
    (build_mcore._KVAllGather) calls its collectives; the layer holds that core."""
    got = _blocks(_plan({"cp": 2}))
    assert got["attn_core"] == Counter({"cp_gather": 2, "cp_gather.backward": 2})
    assert got["dense_layer#0"]["cp_gather"] == 2 and got["dense_layer#0"]["cp_gather.backward"] == 2


def test_the_noise_floor_blocks_as_often_as_the_sample_before_it():
    """``TimingPolicy.probe_blocks``: after each sample of a blocked piece (the TP=2 embedding, one
    block per forward + backward), the reference workload blocks exactly as often as the sample
    did -- counted apart (``"reference"``), so ``ACTIVE_BLOCKS.count()`` still counts the piece's
    own -- and never with ``probe_blocks=False``.  The sampler's time cap counts the sample's wall
    less what every block slept (``ACTIVE_BLOCKS.slept_s()``, at least BLOCK_S per block), so a
    piece that mostly sleeps is not ended at ``min_repeats`` by sleeping."""
    import time

    from primus_launch.projection.measure.build_mcore import pieces, world_size_one
    from primus_launch.projection.measure.sync_points import ACTIVE_BLOCKS, BLOCK_S, blocking_collectives
    from primus_launch.projection.measure.timing import PieceSampler, TimingPolicy, torch_threads

    plan = _plan({"tp": 2})
    with world_size_one("cpu"), torch_threads(1):
        ps_, model = pieces(plan, "cpu", measure_layers=1)
        emb = next(pc for pc in ps_ if pc.name == "embedding")
        with blocking_collectives(plan, "cpu", model) as counts:
            for probe, want_ref in ((True, True), (False, False)):
                pol = TimingPolicy(warmup=1, min_repeats=3, max_repeats=3, min_sample_s=0.002, probe_blocks=probe)
                sp = PieceSampler(emb.forward, emb.inputs, emb.params, torch.device("cpu"), split=emb.split,
                                  policy=pol, blocks=ACTIVE_BLOCKS)
                own0, ref0, slept0 = ACTIVE_BLOCKS.count(), counts["reference"], ACTIVE_BLOCKS.slept_s()
                w0 = time.perf_counter()
                sp.sample()
                wall = time.perf_counter() - w0
                own, ref = ACTIVE_BLOCKS.count() - own0, counts["reference"] - ref0
                slept = ACTIVE_BLOCKS.slept_s() - slept0
                assert own == sp.inner * 1 and sp.inner > 1
                assert ref == (own if want_ref else 0), (probe, own, ref)
                assert slept >= (own + ref) * BLOCK_S
                assert 0 < sp.spent_s <= wall - slept + 1e-3, (sp.spent_s, wall, slept)
    assert ACTIVE_BLOCKS.count() == 0  # outside blocking_collectives
