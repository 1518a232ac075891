"""The world-size-1 MoE piece under megatron's allgather dispatcher works on the run's gathered
tokens (build_mcore.emulate_token_gather): the permutation sees ``n T`` rows as in the run
(megatron's ``dispatch_postprocess`` on the gathered tensors), the experts get exactly this rank's
routed tokens, and the layer computes what it computes without the stand-ins (same output, same
input gradient): the stand-ins change the work, not the result."""

from __future__ import annotations

import torch

from primus_launch.plan import Plan


def _plan(ep: int, etp: int = 1, dispatcher: str = "allgather") -> Plan:
    return Plan.model_validate({
        "model": dict(num_layers=2, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, num_query_groups=2,
                      vocab_size=256, seq_length=32, num_experts=4, moe_router_topk=2, moe_ffn_hidden_size=96),
        "parallel": dict(ep=ep, etp=etp),
        "training": dict(global_batch_size=4, micro_batch_size=1, precision="fp32", moe_token_dispatcher=dispatcher,
                         moe_grouped_gemm=False, moe_permute_fusion=False),
        "cluster": {"gpus_per_node": ep * etp}})


def _run(layer, x):
    x = x.detach().clone().requires_grad_(True)
    y, _ = layer(x, attention_mask=None)
    y.sum().backward()
    return y.detach(), x.grad


def test_gathered_tokens_change_the_work_not_the_result():
    from primus_launch.projection.measure.build_mcore import gathered_ranks, pieces, world_size_one

    plan = _plan(ep=2)
    assert gathered_ranks(plan) == 2
    with world_size_one("cpu"):
        ps_, model = pieces(plan, "cpu", measure_layers=1)
        layer = next(lyr for lyr in model.decoder.layers if hasattr(lyr.mlp, "token_dispatcher"))
        d = layer.mlp.token_dispatcher
        assert "token_dispatch" in vars(d)  # the stand-ins are installed on the measured layer
        x = torch.randn(32, 1, 64)
        y_standin, g_standin = _run(layer, x)
        T = 32
        assert d.hidden_shape_before_permute[0] == 2 * T  # the run's gathered rows
        got_tokens = int(d.local_map.sum())
        for k in ("token_dispatch", "token_combine"):
            del vars(d)[k]
        y_plain, g_plain = _run(layer, x)
        assert d.hidden_shape_before_permute[0] == T
        assert int(d.local_map.sum()) == got_tokens == T * plan.model.moe_router_topk
    torch.testing.assert_close(y_standin, y_plain)
    torch.testing.assert_close(g_standin, g_plain)


def test_no_stand_ins_for_other_dispatchers_or_one_rank():
    from primus_launch.projection.measure.build_mcore import gathered_ranks

    assert gathered_ranks(_plan(ep=1)) == 1
    assert gathered_ranks(_plan(ep=2, dispatcher="alltoall")) == 1
    assert gathered_ranks(_plan(ep=2, etp=2)) == 4
