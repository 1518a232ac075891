"""The held-out coarse-expert MoE rows (``scripts/validation/coarse_moe_runs.py``: NeMo performance summaries,
Megatron-LM's MoE README, dgxc-benchmarking v25.02 Grok-1).

Each row builds through the Megatron adapter (``build_runs.flag_row``) into a plan with its source's layout and the
flags its launch code states (FP8 recipe, CUDA graph, token drop + padding, expert TP).  Independent checks of the
architectures: the dgxc Grok-1 README's own model FLOPs ("4.27E+15 for GBS=1 per GPU" at seq 8192) against the
plan's model FLOPs per token; the NeMo page's TFLOP/s over tokens/s against the plan's (Mixtral 8x22B at 65,536
tokens and Llama 4 Scout: causal count to 0.5 %; Mixtral 8x7B: the page's figure is the full-attention count,
build_runs' ``flops_per_token_full_attention``, to 0.5 %) -- which pins the sequence length and vocabulary the rows
were given.
"""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from build_runs import flag_row, flops_per_token_full_attention  # noqa: E402
from coarse_moe_runs import coarse_moe_rows  # noqa: E402

from primus_launch.plan import Plan  # noqa: E402
from primus_launch.projection.cost.flops import model_flops_per_token  # noqa: E402

ROWS = {r["id"]: r for r in coarse_moe_rows()}
CURRENT = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/current_runs.json").read_text())}


def _plan(rid: str) -> Plan:
    row, why = flag_row(ROWS[rid], "judge", "current_coarse")
    assert row is not None, why
    return Plan.model_validate(row["plan"])


def test_rows_are_in_current_runs_as_generated():
    for rid, r in ROWS.items():
        got = dict(CURRENT[rid])
        assert got.pop("judge_groups")[0] == "moe"
        assert got == r, rid


@pytest.mark.parametrize("rid", sorted(ROWS))
def test_row_builds_its_sources_layout(rid):
    r, p = ROWS[rid], _plan(rid)
    par, tr = r["parallelism"], r["training"]
    assert (p.parallel.tp, p.parallel.pp, p.parallel.cp, p.parallel.ep) == (par["tp"], par["pp"], par["cp"], par["ep"])
    assert (p.parallel.vpp or 1) == (par["vpp"] or 1)
    assert p.parallel.expert_tp == (par["etp"] or par["tp"])    # Megatron / NeMo 24.12: ETP defaults to TP
    assert (p.training.micro_batch_size, p.training.global_batch_size) == (tr["micro_batch_size"],
                                                                          tr["global_batch_size"])
    assert (p.model.num_experts, p.model.moe_router_topk) == (r["architecture"]["num_experts"],
                                                              r["architecture"]["moe_topk"])
    assert p.training.moe_token_dispatcher == "alltoall"
    assert p.training.precision == ("bf16" if tr["precision"] == "bf16" else "fp8")
    assert (p.training.cuda_graph_impl == "local") == tr["cuda_graph"].startswith("local")


def test_fp8_recipes_as_the_launch_code_states():
    assert _plan("nemo2502_b200_fp8ds_mixtral_8x7b_64gpu").training.fp8_recipe == "delayed"    # v2.2.0: ds only
    assert _plan("nemo2504_gb200_fp8cs_mixtral_8x7b_64gpu").training.fp8_recipe == "tensorwise"  # page: current scaling
    assert _plan("dgxc2502_h100_fp8_grok1_314b_1024gpu").training.fp8_param_gather


def test_grok_model_flops_match_the_readme():
    # grok1/README_314b.md @8f5cbb379: "The model flops for Grok 1 for GBS=1 ... is 4.27E+15" (one 8,192-token sample)
    per_token = model_flops_per_token(_plan("dgxc2502_h100_bf16_grok1_314b_2048gpu"))
    assert per_token * 8192 == pytest.approx(4.27e15, rel=0.005)


@pytest.mark.parametrize("rid,full", [("nemo2502_b200_fp8ds_mixtral_8x22b_256gpu_seq64k", False),
                                      ("nemo2507_gb200_fp8cs_llama4_scout_64gpu", False),
                                      ("nemo2502_b200_fp8ds_mixtral_8x7b_64gpu", True),
                                      ("nemo2504_gb200_fp8cs_mixtral_8x7b_64gpu", True)])
def test_nemo_tflops_over_tokens_is_the_plans_flops(rid, full):
    p, m = _plan(rid), ROWS[rid]["measured"]
    per_token = flops_per_token_full_attention(p) if full else model_flops_per_token(p)
    assert m["tflops_per_gpu"] * 1e12 / m["tokens_per_sec_per_gpu"] == pytest.approx(per_token, rel=0.005)
