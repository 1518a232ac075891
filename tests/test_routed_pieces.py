"""A randomly routed MoE layer piece is summarized by the mean of its samples (timing.STATISTICS).

Truth: megatron-core's own router.  With ``--moe-router-force-load-balancing`` (``RandomSTE``:
fresh random logits each forward) the piece's experts receive other row counts on every pass, as
the run's do on every step, so the piece's work is drawn afresh each pass and a run of many steps
pays its mean; without it the piece's fixed tokens and router weights route identically each pass
(its variation is the machine's, summarized by the median).
"""

from __future__ import annotations

import statistics

import pytest
import torch

from primus_launch.plan import Plan
from primus_launch.projection.measure.timing import STATISTICS, PieceSampler, TimingPolicy, time_pieces


def _plan(force: bool, layers: int = 2) -> Plan:
    return Plan.model_validate({
        "model": dict(num_layers=layers, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
                      vocab_size=256, seq_length=32, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=96),
        "parallel": dict(ep=2),
        "training": dict(global_batch_size=32, micro_batch_size=2, precision="fp32", moe_token_dispatcher="allgather",
                         moe_grouped_gemm=False, moe_permute_fusion=False, moe_router_force_load_balancing=force),
        "cluster": {"gpus_per_node": 2}})


#: each test starts at world size 1 (conftest.no_fake_world)
pytestmark = pytest.mark.usefixtures("no_fake_world")


def _counts_per_pass(force: bool, passes: int = 5) -> tuple[bool, bool, list[tuple[int, ...]]]:
    """(the MoE piece's ``routed``, the dense piece's, the local experts' row counts of each forward)."""
    from primus_launch.projection.measure.build_mcore import pieces, world_size_one

    with world_size_one("cpu"):
        out, model = pieces(_plan(force), "cpu", measure_layers=2)
        moe = next(pc for pc in out if pc.name.startswith("moe_layer"))
        others = [pc.routed for pc in out if not pc.name.startswith("moe_layer")]
        layer = next(lyr for lyr in model.decoder.layers if hasattr(lyr.mlp, "token_dispatcher"))
        seen: list[tuple[int, ...]] = []
        hook = layer.mlp.experts.register_forward_pre_hook(
            lambda mod, args: seen.append(tuple(int(c) for c in args[1].tolist())))
        try:
            with torch.no_grad():
                for _ in range(passes):
                    moe.forward(*moe.inputs)
        finally:
            hook.remove()
        return moe.routed, any(others), seen


def test_random_routing_draws_new_expert_counts_each_pass():
    routed, others, seen = _counts_per_pass(force=True)
    assert routed and not others
    assert len(seen) == 5 and len(set(seen)) > 1, seen  # other per-expert row counts from pass to pass
    # the mirrored EP=2 rank holds both ranks' tokens: 2 x 64 tokens x top-2 x 2 of 4 experts in expectation
    assert all(0.5 * 128 <= sum(c) <= 1.5 * 128 for c in seen), seen


def test_learned_routing_of_fixed_tokens_repeats_each_pass():
    routed, others, seen = _counts_per_pass(force=False)
    assert not routed and not others
    assert len(seen) == 5 and len(set(seen)) == 1, seen


@pytest.mark.parametrize("statistic", STATISTICS)
def test_sampler_summarizes_its_samples_by_its_statistic(statistic):
    lin = torch.nn.Linear(64, 64)
    x = torch.randn(32, 64, requires_grad=True)
    pol = TimingPolicy(warmup=1, min_repeats=7, max_repeats=7, min_sample_s=0.0, max_inner=1, min_window_s=0.0)
    sp = PieceSampler(lin, [x], list(lin.parameters()), torch.device("cpu"), split="autograd", policy=pol,
                      statistic=statistic)
    time_pieces([sp], pol, window_s=0.0)
    t = sp.result(measure_mem=False)
    stat = statistics.mean if statistic == "mean" else statistics.median
    assert t.statistic == statistic
    assert t.fwd_s == pytest.approx(stat(t.samples["fwd"]))
    assert t.bwd_s == pytest.approx(stat(t.samples["bwd"]))
    assert t.bwd_input_raw_s == pytest.approx(stat(t.samples["bwd_input_raw"]))


def test_sampler_refuses_an_unknown_statistic():
    lin = torch.nn.Linear(8, 8)
    with pytest.raises(ValueError, match="statistic='trimmed'"):
        PieceSampler(lin, [torch.randn(2, 8, requires_grad=True)], list(lin.parameters()), torch.device("cpu"),
                     split="autograd", statistic="trimmed")


def test_measured_path_takes_the_mean_of_a_randomly_routed_layer_only(tmp_path):
    from primus_launch.projection.measure.cache import MeasureCache
    from primus_launch.projection.measure.upscale import measure_pieces

    # samples of >= 50 ms: several passes of every fixed-work piece of this tiny model per sample
    pol = TimingPolicy(warmup=1, min_repeats=3, max_repeats=4, min_sample_s=0.05, min_window_s=0.0)
    t = measure_pieces(_plan(True), "cpu", cache=MeasureCache(tmp_path), policy=pol).timings
    stats = {name: pt.statistic for name, pt in t.items()}
    assert {n for n, s in stats.items() if s == "mean"} == {n for n in t if n.startswith("moe_layer")}, stats
    moe = next(pt for n, pt in t.items() if n.startswith("moe_layer"))
    assert moe.fwd_s == pytest.approx(statistics.mean(moe.samples["fwd"]))
    # one pass per sample whatever min_sample_s asks (how many passes a fixed-work piece averages
    # depends on the machine's speed): the samples' spread is the pass-to-pass routing's
    assert moe.inner == 1 and len(moe.samples["fwd"]) == moe.repeats


def test_builds_of_more_layers_after_fewer_run_in_one_process():
    """megatron's MoE aux-loss logging tracker is process-global, sized by the first model logging
    into it; each measurement build starts with it empty (``build_mcore.world_size_one``), so a
    2-layer MoE piece runs after a 1-layer one in the same process (a tuner's or a test suite's)."""
    from primus_launch.projection.measure.build_mcore import pieces, world_size_one

    for layers in (1, 2):
        with world_size_one("cpu"):
            out, _ = pieces(_plan(True, layers), "cpu", measure_layers=2)
            moe = [pc for pc in out if pc.name.startswith("moe_layer")]
            assert moe
            for pc in moe:
                pc.forward(*pc.inputs).sum().backward()
