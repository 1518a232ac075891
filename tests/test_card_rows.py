"""The held-out speed rows of round fourteen (runs14): Megatron-Bridge's verification cards and recompute skill.

Truth: NVIDIA-NeMo/Megatron-Bridge ``examples/model_verification_cards/<model>/card.yaml`` at 067f987df -- each item's
stated layout ('TP1/PP2/CP1/EP32/ETP1, GBS/MBS 1280/1', ...) and its ``last_10_steps_*`` metrics -- and
``skills/nemo-mbridge-perf-activation-recompute/SKILL.md`` (a67b5735d), 'Matched H100 Evidence: Moonlight 16B': 8 H100,
TP 2, EP 8, MBS 1, GBS 4, seq 4096, 'Each row changed only recompute_modules', step ms and TFLOP/s per row.  Bridge's
logged TFLOP/s over tokens/s is its own FLOP count per token (training/utils/flop_utils.py), which the plan's Megatron
count reproduces for every architecture but GPT-OSS (Bridge counts its quick-GeGLU MLP as non-gated: CURRENT_RUNS.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VAL = ROOT / "scripts" / "validation"
sys.path.insert(0, str(VAL))

from build_runs import flag_row  # noqa: E402

from primus_launch.plan import Plan  # noqa: E402
from primus_launch.projection.cost.flops import model_flops_per_token  # noqa: E402

# id tail: (GPUs, TP, PP, EP, MBS, GBS, seq, step ms, TFLOP/s, tokens/s/GPU) as the card states them
CARDS = {
    "nemotron3_super_h100_bf16_64gpu_pp2ep32_pretrain": (64, 1, 2, 32, 1, 1280, 4096, 29368.69, 236.33, 2789.365),
    "nemotron3_super_h100_bf16_64gpu_pp2ep32_perf": (64, 1, 2, 32, 1, 1280, 4096, 27588.58, 248.61, 2969.345),
    "qwen3_8b_h100_bf16_16gpu_dp16_pretrain": (16, 1, 1, 1, 1, 1024, 4096, 25070.32, 512.7, 10456.348),
    "qwen3_30b_a3b_h100_bf16_16gpu_ep16_pretrain": (16, 1, 1, 16, 1, 1024, 4096, 30289.55, 199.12, 8654.602),
    "qwen3_30b_a3b_gb200_mxfp8_8gpu_ep8_pretrain_functional": (8, 1, 1, 8, 4, 512, 4096, 12362.34, 487.88, 21205.047),
    "moonlight_16b_h100_bf16_16gpu_ep8_pretrain": (16, 1, 1, 8, 2, 1024, 4096, 11636.35, 386.59, 22528.026),
    "gpt_oss_20b_h100_bf16_16gpu_tp2pp4ep4_pretrain": (16, 2, 4, 4, 1, 512, 4096, 22400.88, 117.01, 5851.199),
    "gpt_oss_120b_h100_bf16_64gpu_tp2pp4ep16_pretrain": (64, 2, 4, 16, 1, 512, 4096, 16664.93, 58.42, 1966.285),
}
SWEEP = {"none": (457.18, 77.50, []), "core_attn": (474.80, 74.44, ["core_attn"]),
         "mla_up_proj": (480.89, 73.72, ["mla_up_proj"]), "mla_up_proj_mlp": (496.73, 71.50, ["mla_up_proj", "mlp"]),
         "moe_act": (466.26, 75.50, ["moe_act"]), "layernorm_moe_act": (506.53, 70.27, ["layernorm", "moe_act"])}


def _rows() -> dict[str, dict]:
    return {r["id"]: r for r in json.loads((VAL / "current_runs.json").read_text())}


def _plan(r: dict) -> dict:
    row, why = flag_row(r, "judge", "current_" + r["id"].split("_")[0])
    assert row is not None, why
    return row["plan"]


@pytest.mark.parametrize("tail", sorted(CARDS))
def test_card_rows_build_the_cards_layout_and_tokens(tail):
    n, tp, pp, ep, mbs, gbs, seq, step, tflops, tok = CARDS[tail]
    r = _rows()["mbcard_" + tail]
    p = _plan(r)
    par, t, m = p["parallel"], p["training"], p["model"]
    assert p["cluster"]["num_nodes"] * p["cluster"]["gpus_per_node"] == n
    assert (par["tp"], par["pp"], par["cp"], t["micro_batch_size"], t["global_batch_size"], m["seq_length"]) == \
        (tp, pp, 1, mbs, gbs, seq)
    assert par["ep"] == ep
    assert r["measured_tokens_per_sec_per_gpu_for_judging"] == pytest.approx(tok, abs=0.06)
    assert gbs * seq / (step / 1e3 * n) == pytest.approx(tok, rel=2e-3)  # the card's tokens = its step time
    fpt = model_flops_per_token(Plan.model_validate(p))
    ratio = tflops * 1e12 / tok / fpt
    if tail.startswith("gpt_oss"):  # Bridge counts GPT-OSS's quick-GeGLU MLP as non-gated (fewer FLOPs than run)
        assert 0.8 < ratio < 0.9
    else:  # the card's TFLOP/s is Bridge's count of the same architecture
        assert ratio == pytest.approx(1.0, abs=0.015)


def test_card_rows_precision_and_routing_as_the_cards_state():
    rows = _rows()
    for tail in CARDS:
        p = _plan(rows["mbcard_" + tail])
        want = "fp8" if "mxfp8" in tail else "bf16"
        assert p["training"]["precision"] == want, tail
        if "mxfp8" in tail:
            assert p["training"]["fp8_recipe"] == "mxfp8"
        if p["model"].get("num_experts"):  # only the Nemotron perf item forces routing ('forced routing' in the card)
            assert bool(p["training"]["moe_router_force_load_balancing"]) == tail.endswith("_perf"), tail


@pytest.mark.parametrize("tag", sorted(SWEEP))
def test_recompute_sweep_rows(tag):
    step, tflops, modules = SWEEP[tag]
    r = _rows()[f"mbskillrc_moonlight_16b_h100_bf16_8gpu_tp2ep8_recompute_{tag}"]
    p = _plan(r)
    par, t = p["parallel"], p["training"]
    assert (par["tp"], par["ep"], t["micro_batch_size"], t["global_batch_size"]) == (2, 8, 1, 4)
    assert r["measured_tokens_per_sec_per_gpu_for_judging"] == pytest.approx(4 * 4096 / (step / 1e3 * 8), abs=0.06)
    fpt = model_flops_per_token(Plan.model_validate(p))
    assert tflops * 1e12 / r["measured_tokens_per_sec_per_gpu_for_judging"] / fpt == pytest.approx(1.0, abs=0.02)
    flags = [f for f in r["megatron_flags"] if f.startswith("--recompute-modules")]
    assert flags == ([f"--recompute-modules {' '.join(modules)}"] if modules else [])


def test_recompute_sweep_rows_differ_only_in_recompute():
    rows = _rows()
    base = set(rows["mbskillrc_moonlight_16b_h100_bf16_8gpu_tp2ep8_recompute_none"]["megatron_flags"])
    for tag in SWEEP:
        flags = set(rows[f"mbskillrc_moonlight_16b_h100_bf16_8gpu_tp2ep8_recompute_{tag}"]["megatron_flags"])
        assert all(f.startswith("--recompute-") for f in flags ^ base), tag
