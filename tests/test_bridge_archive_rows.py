"""The held-out Megatron-Bridge rows of the archive's 25.11 and 26.02 tables (``build_current_runs.bridge_archive_rows``).

Checked against the tables themselves: each row builds through the Megatron adapter (``build_runs.flag_row``) into a
plan with the table's TP / PP / VP / CP / EP, micro and global batch; and the table's two measured columns agree with
the plan's model: published TFLOP/s / published tokens/s = primus-launch's model FLOPs per token of the plan
(Megatron-Bridge counts the same causal, active-expert FLOPs) to 1 %, except the DeepSeek-V3 rows with the recipe's
MTP layer (25.11 'w/ MTP', the 26.02 PP 16 rows), whose TFLOP/s carry it (about 4 %) and ``model_flops_per_token`` does
not count it.  That
identity is what tells the GB200 DeepSeek-V3 BF16 row ran without MTP (the recipe default has one MTP layer).
GPT-OSS rows are left out of it: Bridge v0.3.0 counts the quick-GeGLU MLP as two GEMMs (CURRENT_RUNS.md).
"""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "validation"))

from build_runs import flag_row  # noqa: E402

from primus_launch.plan import Plan  # noqa: E402
from primus_launch.projection.cost.flops import model_flops_per_token  # noqa: E402

IDS = ["mbridge2511_b200_fp8_cs_llama31_405b_128gpu", "mbridge2511_b200_fp8_mx_llama31_405b_128gpu",
       "mbridge2511_b200_fp8_mx_qwen3_30b_a3b_8gpu_mbs1", "mbridge2511_h100_fp8_cs_qwen3_235b_a22b_256gpu_gbs2048",
       "mbridge2511_b200_fp8_mx_deepseek_v3_256gpu_pp16", "mbridge2511_gb200_bf16_deepseek_v3_nomtp_256gpu",
       "mbridge2602_gb300_fp8_mx_qwen3_235b_a22b_256gpu_novp", "mbridge2602_gb200_fp8_mx_qwen3_235b_a22b_256gpu_novp",
       "mbridge2602_b300_bf16_gpt_oss_120b_64gpu_ep64", "mbridge2602_b200_bf16_gpt_oss_120b_64gpu_ep64",
       # runs12: the 26.02 DeepSeek-V3 MXFP8 rows at PP 16 / EP 8 (v0.3.0 DEEPSEEK_V3_PRETRAIN_CONFIG_{B300,B200}_V2)
       "mbridge2602_b300_fp8_mx_deepseek_v3_256gpu_pp16", "mbridge2602_b200_fp8_mx_deepseek_v3_256gpu_pp16"]
CURRENT = {r["id"]: r for r in json.loads((ROOT / "scripts/validation/current_runs.json").read_text())}


def _plan(rid: str) -> tuple[dict, dict]:
    r = CURRENT[rid]
    row, why = flag_row(r, "judge", "current_mbridge")
    assert row is not None, why
    return r, row["plan"]


@pytest.mark.parametrize("rid", IDS)
def test_row_builds_the_tables_layout(rid):
    r, p = _plan(rid)
    par, tr = r["parallelism"], r["training"]
    assert r["judge_only"] and r["megatron_flags"]
    assert (p["parallel"]["tp"], p["parallel"]["pp"], p["parallel"]["cp"]) == (par["tp"], par["pp"], par["cp"])
    assert (p["parallel"]["vpp"] or 1) == (par["vpp"] or 1)
    assert p["parallel"]["ep"] == (par["ep"] or 1)
    assert p["training"]["micro_batch_size"] == tr["micro_batch_size"]
    assert p["training"]["global_batch_size"] == tr["global_batch_size"]
    n = r["hardware"]["num_gpus"]
    assert n % (par["tp"] * par["pp"] * par["cp"]) == 0 and n // (par["tp"] * par["pp"] * par["cp"]) == par["dp"]


@pytest.mark.parametrize("rid", [i for i in IDS if "gpt_oss" not in i])
def test_published_tflops_over_tokens_is_the_plans_model_flops(rid):
    r, p = _plan(rid)
    m = r["measured"]
    ratio = m["tflops_per_gpu"] * 1e12 / (m["tokens_per_sec_per_gpu"] * model_flops_per_token(Plan.model_validate(p)))
    if r["training"].get("mtp_num_layers"):
        assert 1.03 < ratio < 1.05, ratio      # the MTP layer the table counts (MoE layer + eh-proj + logits)
    else:
        assert abs(ratio - 1) < 0.01, ratio
