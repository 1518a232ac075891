"""Primus releases before commit 077c0ff0 (2025-11-28; v0.5.0, release/v25.9): presets and module configs inherit
through ``bases:`` / ``includes:`` instead of ``extends:``, and their TorchTitan experiments write
``training.batch_size`` (torchtitan's earlier name of ``local_batch_size``).

Truths: Primus v25.9 ``primus/core/utils/yaml_utils.py`` ``parse_yaml`` (each listed file adds the top-level keys
not already there; the file's own keys win, then the earlier listed file's; ``bases`` before ``includes``), and the
test tree of ``test_adapter_primus`` read through ``extends:``, whose plan those tests check field by field: the same
content spelled the old way must give the same plan.
"""

from __future__ import annotations

from pathlib import Path

from primus_launch.adapters.primus_yaml import load_primus_yaml, parse_yaml, render_primus_yaml
from test_adapter_primus import _diff, _meg, _tree, _tt


def _old_spelling(root: Path) -> None:
    """The test tree as Primus v25.9 wrote it: presets chain with ``bases:``, the trainer base ``includes:`` its parts."""
    for f in (root / "primus" / "configs").rglob("*.yaml"):
        text = f.read_text()
        if text.startswith("extends:"):
            f.write_text(("includes:" if f.name == "trainer_base.yaml" else "bases:") + text[len("extends:"):])


def test_bases_and_includes_give_the_plan_extends_gives(tmp_path):
    new, old = _tree(tmp_path / "new"), _tree(tmp_path / "old")
    _old_spelling(old)
    assert "bases:" in (old / "primus/configs/models/megatron/llama3_8B.yaml").read_text()
    a, b = load_primus_yaml(_meg(new), env={}), load_primus_yaml(_meg(old), env={})
    assert (b.model, b.parallel, b.training) == (a.model, a.parallel, a.training)
    # what the two-level chain llama3_8B -> llama_base -> language_model carries (was lost: a GELU LayerNorm
    # model with learned positions and no GQA)
    m = b.model
    assert (m.swiglu, m.normalization, m.position_embedding, m.num_query_groups) == (True, "rmsnorm", "rope", 8)
    ta, tb = load_primus_yaml(_tt(new), env={}), load_primus_yaml(_tt(old), env={})
    assert (tb.model, tb.training) == (ta.model, ta.training)


def test_bases_fill_only_missing_top_level_keys(tmp_path):
    (tmp_path / "a.yaml").write_text("x: 1\nnested:\n  p: 1\n  q: 1\nonly_a: a\n")
    (tmp_path / "b.yaml").write_text("x: 2\nonly_a: b\nonly_b: b\n")
    (tmp_path / "inc.yaml").write_text("x: 3\nonly_inc: i\n")
    (tmp_path / "top.yaml").write_text("bases:\n  - a.yaml\n  - b.yaml\nincludes:\n  - inc.yaml\nx: 0\nnested:\n  p: 9\n")
    cfg = parse_yaml(tmp_path / "top.yaml", env={})
    # the file wins; then the first base; a mapping is taken whole, not merged key by key
    assert cfg == {"x": 0, "nested": {"p": 9}, "only_a": "a", "only_b": "b", "only_inc": "i"}



def test_a_missing_base_names_the_key_that_lists_it(tmp_path):
    # the file has no extends: key; its error named one ("extends='.../nope.yaml': no such file")
    import pytest

    from primus_launch.errors import UserError

    for key in ("bases", "includes"):
        (tmp_path / "top.yaml").write_text(f"{key}:\n  - nope.yaml\nx: 0\n")
        with pytest.raises(UserError) as e:
            parse_yaml(tmp_path / "top.yaml", env={})
        assert str(e.value).startswith(f"{key}=") and "nope.yaml" in str(e.value) and "extends" not in str(e.value)
    (tmp_path / "top.yaml").write_text("extends:\n  - nope.yaml\n")
    with pytest.raises(UserError, match="^extends="):
        parse_yaml(tmp_path / "top.yaml", env={})

def test_titan_batch_size_is_kept_as_written(tmp_path):
    root = _tree(tmp_path)
    exp, module = _tt(root), root / "primus/configs/modules/torchtitan/pre_trainer.yaml"
    for f in (exp, module):  # v25.9's module config writes `training: batch_size: 1` too
        f.write_text(f.read_text().replace("local_batch_size:", "batch_size:"))
    text = exp.read_text()
    plan = load_primus_yaml(exp, env={})
    assert plan.training.micro_batch_size == 2
    assert render_primus_yaml(plan, text, exp, env={}) == text  # was: a local_batch_size line added
    q = plan.with_changes(training={"micro_batch_size": 4, "global_batch_size": 4 * plan.dp})
    out = render_primus_yaml(q, text, exp, env={})
    assert _diff(text, out) == ["-        batch_size: 2", "+        batch_size: 4"]


def test_turbo_grouped_mlp_on_the_legacy_path(tmp_path):
    # release/v25.10 transformer_engine_spec_provider.grouped_mlp_modules: moe_grouped_gemm with
    # moe_use_legacy_grouped_gemm returns PrimusTurboGroupedMLP when use_turbo_grouped_mlp; its sync-free stages 2-3
    # refuse to start without moe_use_legacy_grouped_gemm (utils.validate_args_on_rocm)
    from test_adapter_recipe_gaps import _exp

    root = _tree(tmp_path)
    p = _exp(root, "      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n      moe_grouped_gemm: true\n"
                   "      moe_use_legacy_grouped_gemm: true\n      use_turbo_grouped_mlp: true\n", model="moe_tiny")
    plan = load_primus_yaml(p, env={})
    assert plan.training.moe_expert_gemm == "turbo"
    text = p.read_text()
    assert render_primus_yaml(plan, text, p, env={}) == text  # was: moe_use_legacy_grouped_gemm written false
    out = render_primus_yaml(plan.with_changes(training={"micro_batch_size": 2}), text, p, env={})
    assert "moe_use_legacy_grouped_gemm: true" in out
    p.write_text(text.replace("      use_turbo_grouped_mlp: true\n", "      use_turbo_grouped_mlp: false\n"))
    assert load_primus_yaml(p, env={}).training.moe_expert_gemm == "legacy"  # Megatron's GroupedMLP


def test_turbo_grouped_mlp_off_the_legacy_path_is_reported(tmp_path):
    # The same key without moe_use_legacy_grouped_gemm means three things by release: release/v25.9 trainer.py
    # patches only the legacy GroupedMLP (TE's grouped GEMM runs), release/v25.10 / v26.1 grouped_mlp_modules assert
    # it off ("PrimusTurbo not support RowParallelGroupedLinear"), release/v26.3 grouped_mlp_modules takes it as
    # use_turbo_grouped_gemm (PrimusGroupedMLP, the Turbo grouped GEMM; its MI300X DeepSeek-V3 examples write it).
    # The reader cannot tell the release: it reads TE's grouped GEMM and says so, not silently.
    from test_adapter_recipe_gaps import _exp

    root = _tree(tmp_path)
    base = ("      expert_model_parallel_size: 4\n      enable_primus_turbo: true\n      moe_grouped_gemm: true\n"
            "      moe_use_legacy_grouped_gemm: false\n")
    plan = load_primus_yaml(_exp(root, base + "      use_turbo_grouped_mlp: true\n", model="moe_tiny"), env={})
    assert plan.training.moe_expert_gemm == "te"
    assert ("use_turbo_grouped_mlp", "true") in {(w.flag, w.value) for w in plan.source.unmodelled}
    for extra in ("      use_turbo_grouped_mlp: false\n",   # off: nothing to say
                  "      use_turbo_grouped_mlp: true\n      use_turbo_grouped_gemm: true\n"):  # turbo either way
        plan = load_primus_yaml(_exp(root, base + extra, model="moe_tiny"), env={})
        assert "use_turbo_grouped_mlp" not in {w.flag for w in plan.source.unmodelled}


def test_titan_forced_balance_under_its_first_name(tmp_path):
    # torchtitan 99fee810b added training.debug_moe_force_load_balance; e61f2cce4 moved it to
    # debug.moe_force_load_balance (the same round-robin routing); Primus v25.10's DeepSeek-V3 experiments write
    # the first name
    from primus_launch.adapters.torchtitan import plan_from_job

    job = {"model": {"name": "deepseek_v3", "flavor": "16B"},
           "training": {"local_batch_size": 1, "seq_len": 512, "debug_moe_force_load_balance": True}}
    assert plan_from_job(job).training.moe_router_force_load_balancing
    job["training"]["debug_moe_force_load_balance"] = False
    assert not plan_from_job(job).training.moe_router_force_load_balancing
