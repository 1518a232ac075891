"""Primus-Turbo's forced round-robin routing (issue 28, AMD group): under ``moe_router_force_load_balancing`` the
Turbo DeepEP dispatcher replaces the router's top-k by ``token_indices = arange(T * k).view(T, k) % E`` (Primus
``primus/backends/megatron/core/extensions/primus_turbo.py`` ``PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess``
since 627b2454; Primus-Turbo ``DeepEPTokenDispatcher._pre_dispatch`` uses them in place of the routing map).

Checked: the closed form of ``cost.moe_routing.round_robin_units_hit`` against the same indices built with torch
as Primus builds them (distinct destination ranks / nodes per token, tokens per expert); the Primus reader marks
the Turbo DeepEP rows only; and the one-change step of AMD's MoE blog that switches the dispatcher to Turbo DeepEP
(Primus ``examples/moe_package/README.md`` @3aaf2d5f, Figure 6, DeepSeek-V2-Lite on 8 MI355X at micro-batch 12:
loss fusion 31,095 -> + Turbo DeepEP 35,150 tokens/s/GPU, 1.130) is projected within 5 %.
"""
import json
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "validation"))
sys.path.insert(0, str(ROOT / "scripts"))

from primus_launch.projection.cost.moe_routing import expected_units_hit, round_robin_units_hit  # noqa: E402

CURRENT = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/current_runs.json").read_text())}


def _primus_indices(tokens: int, topk: int, experts: int) -> torch.Tensor:
    """The forced indices exactly as PrimusTurboDeepEPTokenDispatcher.dispatch_preprocess builds them."""
    return torch.arange(tokens * topk).view(tokens, topk) % experts


@pytest.mark.parametrize("E,k,unit", [(256, 8, 32), (128, 8, 16), (160, 6, 20), (64, 6, 8), (256, 8, 256),
                                      (160, 6, 80), (64, 6, 32), (128, 8, 64)])
def test_round_robin_fan_out_matches_primus_indices(E, k, unit):
    """Distinct units (ranks of ``unit`` experts, or nodes) per token, averaged over 4,096 tokens."""
    idx = _primus_indices(4096, k, E)
    hit = torch.tensor([len(set(row.tolist())) for row in idx // unit], dtype=torch.float64).mean().item()
    assert round_robin_units_hit(E, k, unit) == pytest.approx(hit, rel=1e-3)
    assert round_robin_units_hit(E, k, unit) <= expected_units_hit(E, k, unit) + 1e-9


def test_round_robin_sends_each_token_to_one_rank_where_topk_divides_the_local_experts():
    # DeepSeek-V3 (256 experts, top-8) and Qwen3-30B-A3B (128, top-8) at EP 8: random top-k reaches 5.3 ranks
    assert round_robin_units_hit(256, 8, 32) == 1.0 and round_robin_units_hit(128, 8, 16) == 1.0
    assert expected_units_hit(256, 8, 32) > 5.0


def test_round_robin_gives_every_expert_the_same_count():
    idx = _primus_indices(8192, 8, 256)
    counts = torch.bincount(idx.flatten(), minlength=256)
    assert counts.min().item() == counts.max().item() == 8192 * 8 // 256


def _plan(row_id: str):
    from build_runs import primus_row
    from primus_launch.plan import Plan

    row, why = primus_row(CURRENT[row_id], "judge", "current_primus")
    assert row is not None, why
    return row, Plan.model_validate(row["plan"])


def test_reader_marks_turbo_deepep_rows_only():
    from primus_launch.projection.cost.moe_imbalance import forced_round_robin, plan_imbalance

    _, turbo = _plan("primus_moe2_mi355x_deepseek_v3_fp8_default_256gpu")
    assert turbo.training.moe_token_dispatcher == "deepep" and turbo.training.moe_force_round_robin
    assert forced_round_robin(turbo) and plan_imbalance(turbo).delta == 0.0
    _, a2a = _plan("primus_moepkg_mi355x_deepseek_v2_lite_lossfusion_8gpu")   # Megatron's all-to-all
    # a force-balanced Primus plan carries the field whatever its dispatcher (Primus writes ``deepep`` back as
    # Turbo DeepEP), and it takes effect only under deepep: all-to-all keeps Megatron's random fan-out
    assert a2a.training.moe_router_force_load_balancing and a2a.training.moe_force_round_robin
    assert not forced_round_robin(a2a) and plan_imbalance(a2a).delta > 0.0
    # the tuner's switch to deepep (knobs.py) on that plan is the Turbo dispatcher, hence round robin
    switched = a2a.model_copy(update={"training": a2a.training.model_copy(
        update={"moe_token_dispatcher": "deepep"})})
    assert forced_round_robin(switched) and plan_imbalance(switched).delta == 0.0


def test_turbo_deepep_step_of_the_moe_blog():
    """Figure 6's one-change step (loss fusion -> + Turbo DeepEP, DeepSeek-V2-Lite, 8 MI355X, MBS 12): measured
    35,150.6 / 31,095.1 = 1.130; with random top-k fan-out the projection gave 1.018."""
    import validate

    rows = [_plan(i)[0] for i in ("primus_moepkg_mi355x_deepseek_v2_lite_lossfusion_8gpu",
                                  "primus_moepkg_mi355x_deepseek_v2_lite_deepep_8gpu")]
    base, deepep = validate.evaluate(rows)
    measured = deepep["measured"] / base["measured"]
    assert measured == pytest.approx(1.130, abs=1e-3)
    assert deepep["projected"] / base["projected"] == pytest.approx(measured, rel=0.05)
