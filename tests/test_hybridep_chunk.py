"""HybridEP's combine chunk (``NUM_OF_TOKENS_PER_CHUNK_COMBINE_API``) in the plan and its price, against the public
figures it rests on: DeepEP PR #588's combine kernel 315.61 us at 128 tokens and 522.63 us at 64 over NVLink
(comment of 2026-04-14), the RDMA bound 1.085 (hybrid-ep README H100 32 ranks over DeepEP PR #634's 4 x 8 ranks),
DeepEP hybrid-ep's defaults (128 before a0d27f1 of 2026-03-31, ``config.cuh`` 64 after) and the commits
Megatron-LM's moe_recipes pin (dev @d48bd6be)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from primus_launch.adapters import hybridep_env as he
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import PlanError
from primus_launch.projection.cost import collectives as coll
from primus_launch.projection.cost import hybridep_chunk as hc
from primus_launch.projection.hardware.placement import place

ROOT = Path(__file__).resolve().parents[1]
ARGV = ("pretrain_gpt.py --num-layers 4 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 "
        "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --num-experts 64 "
        "--moe-router-topk 8 --expert-model-parallel-size 8 --moe-token-dispatcher-type flex "
        "--moe-flex-dispatcher-backend hybridep --bf16 --vocab-size 32000").split()


def test_slowdown_is_the_published_kernel_ratio():
    """64 tokens: the NVLink combine at 522.63 / 315.61 = 1.656x (PR #588), the RDMA one at the 1.085 bound; 128
    (the README rates' basis) unchanged; 96 in between; outside [64, 128] held at the ends (no figure there)."""
    nvl, rdma = hc.combine_slowdown(64)
    assert nvl == pytest.approx(522.63 / 315.61) and nvl == pytest.approx(1.656, abs=1e-3)
    assert rdma == pytest.approx((56.40 / 54.50) / (105.41 / 110.54)) and rdma == pytest.approx(1.085, abs=1e-3)
    assert hc.combine_slowdown(128) == (pytest.approx(1.0), pytest.approx(1.0))
    assert 1.0 < hc.combine_slowdown(96)[0] < nvl
    assert hc.combine_slowdown(32) == hc.combine_slowdown(64) and hc.combine_slowdown(256) == hc.combine_slowdown(128)
    assert hc.effective_chunk(None) == 64 and hc.effective_chunk(128) == 128


def test_nvlink_combine_kernel_scales_by_the_pr_ratio():
    """One combine inside an NVLink domain (8 ranks, H100): its kernel time (less the fixed latency) x 1.656 at
    64-token chunks; the dispatch is unchanged (PR #588: 287.36 / 287.26 us)."""
    pl = place(8, 1, 8)
    args = (4096, 4096 * 2.0, pl, "h100-sxm", 128, 8)
    f = coll.fabric("h100-sxm")
    lat = 2 * (f.l_a2a if f.fitted else f.a_up)
    c128 = coll.deepep_dispatch(*args, lib="hybridep", op="combine", api=False, combine_chunk=128)
    c64 = coll.deepep_dispatch(*args, lib="hybridep", op="combine", api=False, combine_chunk=64)
    assert (c64 - lat) / (c128 - lat) == pytest.approx(522.63 / 315.61, rel=1e-6)
    d128 = coll.deepep_dispatch(*args, lib="hybridep", op="dispatch", api=False, combine_chunk=128)
    d64 = coll.deepep_dispatch(*args, lib="hybridep", op="dispatch", api=False, combine_chunk=64)
    assert d64 == d128
    # DeepEP (not HybridEP) has no such chunk
    assert coll.deepep_dispatch(*args, lib="deepep", op="combine", combine_chunk=64) == \
        coll.deepep_dispatch(*args, lib="deepep", op="combine", combine_chunk=128)


def test_chunk_from_environment_pin_and_framework():
    """The launch environment wins; else the pinned DeepEP commit's default (7febc6e predates a0d27f1: 128;
    cf78085 / 1b8f467 / d28bd67 follow it: 64); an unknown pin or nothing stated: None (DeepEP's current 64); a
    Megatron-Bridge config on HybridEP: 128 (its launcher sets it, 797a11418)."""
    assert he.combine_chunk({he.VAR: "128"}, "cf78085")[0] == 128
    assert he.combine_chunk({}, "7febc6e")[0] == 128
    for pin in ("cf78085", "1b8f467965bb818bf2f6511e06993f5607e1721f", "d28bd67"):
        assert he.combine_chunk({}, pin)[0] == 64
    assert he.combine_chunk({}, "abcdef1")[0] is None
    assert he.combine_chunk({}, None)[0] is None and "assumed" in he.combine_chunk({}, None)[1]
    assert he.combine_chunk({}, None, bridge=True)[0] == 128
    assert he.combine_chunk({}, None, bridge=True, hybridep=False) == (None, None)
    with pytest.raises(PlanError, match=he.VAR):
        he.combine_chunk({he.VAR: "sixty-four"}, None)


def test_pin_read_from_a_recipe_dockerfile():
    """Megatron-LM's moe_recipes build DeepEP in their DEPENDENCIES Dockerfile: clone, then ``git checkout``."""
    text = ("DEPENDENCIES:\n  dockerfile: |\n    RUN git clone --branch hybrid-ep https://github.com/deepseek-ai/"
            "DeepEP.git\n        # HybridEP\n        cd DeepEP && git checkout cf78085241ebfdd809da8f169b41fa08e589b316\n")
    assert he.deepep_pin(text) == "cf78085241ebfdd809da8f169b41fa08e589b316"
    assert he.deepep_pin("git checkout cf78085241ebfdd809da8f169b41fa08e589b316") is None


def test_argv_plan_states_the_chunk_and_says_which():
    p = plan_from_argv(ARGV)
    assert p.training.moe_hybridep_combine_chunk is None
    assert any("64 tokens assumed" in n for n in p.source.notes)
    p = plan_from_argv(ARGV, deepep_pin="7febc6e", launch_env={})
    assert p.training.moe_hybridep_combine_chunk == 128
    p = plan_from_argv(ARGV, deepep_pin="7febc6e", launch_env={he.VAR: "64"})
    assert p.training.moe_hybridep_combine_chunk == 64


def test_yaml_recipe_env_and_pin(tmp_path):
    """A Megatron-LM recipe YAML: its ``ENV_VARS`` and its DEPENDENCIES' DeepEP checkout reach the plan."""
    ref = (ROOT / "recipes" / "megatron" / "qwen3_235b_a22b_h100_256gpu.yaml").read_text()
    from primus_launch.adapters import load_recipe

    pinned = ("DEPENDENCIES:\n  dockerfile: |\n    RUN git clone --branch hybrid-ep https://github.com/deepseek-ai/"
              "DeepEP.git && cd DeepEP && git checkout 7febc6e25660af0f54d95dd781ecdcd62265ecca\n") + ref
    f = tmp_path / "pinned.yaml"
    f.write_text(pinned)
    assert load_recipe(f).training.moe_hybridep_combine_chunk == 128
    f.write_text("ENV_VARS:\n  NUM_OF_TOKENS_PER_CHUNK_COMBINE_API: '96'\n" + ref)
    assert load_recipe(f).training.moe_hybridep_combine_chunk == 96
    assert load_recipe(ROOT / "recipes" / "megatron" / "qwen3_235b_a22b_h100_256gpu.yaml"
                       ).training.moe_hybridep_combine_chunk is None


def test_validation_rows_carry_their_pin_and_environment():
    """The moe_recipes rows in current_runs.json carry the DeepEP commit and ENV_VARS of their recipe (the probe's
    table, read from Megatron-LM dev @d48bd6be), and build_runs.py gives Megatron-Bridge HybridEP rows 128."""
    import json

    sys.path.insert(0, str(ROOT / "scripts"))
    sys.path.insert(0, str(ROOT / "scripts" / "validation"))
    import build_runs
    import hybridep_chunk_probe as probe

    rows = {r["id"]: r for r in json.loads((ROOT / "scripts" / "validation" / "current_runs.json").read_text())}
    for rid, _recipe, commit, date, env in probe.MLM_HYBRIDEP:
        r = rows[rid]
        assert r["deepep_commit"].startswith(commit)
        assert r["launch_env"].get(he.VAR) == (str(env) if env is not None else None)
        chunk, _note = he.combine_chunk(r["launch_env"], r["deepep_commit"])
        assert chunk == probe.combine_chunk(date, env)
    bridge = next(r for r in rows.values() if r["id"].startswith("mbridge2604")
                  and "hybridep" in str(r["training"].get("moe_dispatcher")))
    env, notes = build_runs.hybridep_env_of(bridge)
    assert env[he.VAR] == "128" and notes


def test_script_export_and_bridge_env_vars(tmp_path):
    """A launch script's ``export`` and a Megatron-Bridge run config's ``env_vars`` set the chunk; a Bridge config on
    HybridEP that sets none takes its launcher's 128."""
    from primus_launch.adapters import load_recipe
    from primus_launch.adapters.bridge_yaml import load_bridge_yaml
    from primus_launch.plan import Cluster

    sh = tmp_path / "moe.sh"
    sh.write_text("#!/bin/bash\nexport NUM_OF_TOKENS_PER_CHUNK_COMBINE_API=128\ntorchrun --nnodes 1 --nproc-per-node 8 "
                  + " ".join(ARGV) + "\n")
    assert load_recipe(sh).training.moe_hybridep_combine_chunk == 128
    text = (ROOT / "tests" / "data" / "bridge" / "qwen3_moe_run_config.yaml").read_text().replace(
        "  moe_token_dispatcher_type: alltoall", "  moe_token_dispatcher_type: flex\n  moe_flex_dispatcher_backend: hybridep")
    cl = Cluster(num_nodes=4, gpus_per_node=8, gpu="h200")
    f = tmp_path / "run_config.yaml"
    f.write_text(text)
    assert load_bridge_yaml(f, cl).training.moe_hybridep_combine_chunk == 128
    f.write_text(text.replace("env_vars: {}", "env_vars:\n  NUM_OF_TOKENS_PER_CHUNK_COMBINE_API: '64'"))
    assert load_bridge_yaml(f, cl).training.moe_hybridep_combine_chunk == 64
