"""tune17: a tune moved to a GPU count the recipe's layers do not divide into.

- ``--tune R --nodes 1 --gpus-per-node 3`` (Llama 3.1 8B: 32 layers, 32 heads, global batch 128) found no start: the
  rebase tried only PP dividing the layers, although Megatron-Core 0.16.1 accepts uneven first / last stages; the
  start is now the most balanced split megatron-core's own ``TransformerConfig`` accepts, and the search runs.
- where no layout is legal (91 GPUs as 13 x 7), the one line says why: the rules the layouts break;
- a refusal decided before the search (weights over every layout, a launch this environment would change) comes
  alone: no "searching that cluster's layouts" note before it, no search;
- a refusal after the search (the launch script's exports against the tuned plan) or a failing write leaves no
  tuned file behind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tuner_helpers import small_dense_plan

from primus_launch.adapters import load_recipe
from primus_launch.cli import main
from primus_launch.tuner.axis_values import balanced_split
from primus_launch.tuner.rebase import seed_or_why

ROOT = Path(__file__).resolve().parents[1]
LLAMA8 = ROOT / "recipes/megatron/llama3.1_8b.sh"


def _mcore_accepts(L: int, pp: int, first, last) -> bool:
    """megatron-core 0.16.1's own checks of a pipeline split: ``TransformerConfig.__post_init__`` ("Uneven PP") and
    ``transformer_block.get_num_layers_to_build`` on every pipeline rank (its asserts; the counts sum to L)."""
    torch = pytest.importorskip("torch")
    tc = pytest.importorskip("megatron.core.transformer.transformer_config")
    tb = pytest.importorskip("megatron.core.transformer.transformer_block")
    try:
        cfg = tc.TransformerConfig(num_layers=L, hidden_size=64, num_attention_heads=4,
                                   pipeline_model_parallel_size=pp, pipeline_dtype=torch.bfloat16,
                                   num_layers_in_first_pipeline_stage=first, num_layers_in_last_pipeline_stage=last)
        counts = [tb.get_num_layers_to_build(cfg, pp_rank=r) for r in range(pp)]
    except (ValueError, AssertionError):
        return False
    return sum(counts) == L and min(counts) > 0


@pytest.mark.slow  # megatron-core's import
@pytest.mark.parametrize("L, pp", [(32, 3), (31, 2), (16, 5), (61, 7), (94, 13), (16, 16)])
def test_balanced_split_is_one_megatron_core_accepts(L, pp):
    first, last = balanced_split(L, pp, "megatron")
    assert _mcore_accepts(L, pp, first, last), (first, last)
    if L % pp:
        assert first is not None and not _mcore_accepts(L, pp, None, None)  # an even split is refused there
        middle = (L - first - last) // (pp - 2) if pp > 2 else first
        assert max(first, last, middle) - min(first, last, middle) <= 2  # balanced
    else:
        assert (first, last) == (None, None)


@pytest.mark.slow  # megatron-core's import
def test_seed_on_three_gpus_takes_an_uneven_pipeline():
    plan = small_dense_plan()  # 16 layers, 16 heads, batch 64 on 2 x 8
    seed, why = seed_or_why(plan, {"num_nodes": 1, "gpus_per_node": 3})
    assert seed is not None and why == ""
    p = seed.parallel
    assert (p.tp, p.pp, p.cp, p.ep) == (1, 3, 1, 1) and seed.world_size == 3
    assert _mcore_accepts(16, 3, p.pipeline_layers_first_stage, p.pipeline_layers_last_stage)
    assert seed.model == plan.model and seed.training.global_batch_size == plan.training.global_batch_size


def test_no_layout_says_which_rules_the_layouts_break():
    plan = load_recipe(LLAMA8)  # 32 layers, 32 heads, global batch 128
    seed, why = seed_or_why(plan, {"num_nodes": 13, "gpus_per_node": 7})
    assert seed is None
    # TP 7 divides no 32 heads; TP 1 x PP 1 / 7 / 13 leaves DP 91 / 13 / 7, none dividing the batch 128
    assert "of 5 layout(s)" in why and "x DP = 91 GPUs" in why
    assert "3 break training.global_batch_size=128" in why and "2 break parallel.tp=7" in why
    assert "must divide num_attention_heads=32" in why


def test_tune_on_three_gpus_searches_and_writes_a_recipe_megatron_reads(tmp_path, capsys):
    recipe = tmp_path / LLAMA8.name
    shutil.copy(LLAMA8, recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--json", "--max-work", "2000", "--nodes", "1",
               "--gpus-per-node", "3"])
    _, err = capsys.readouterr()
    assert rc == 0, err
    assert "searching that cluster's layouts from a legal start (tp=1, pp=3, layers 11 / .. / 11" in err
    back = load_recipe(tmp_path / "llama3.1_8b.tuned.sh", {"num_nodes": 1, "gpus_per_node": 3})
    p = back.parallel
    assert back.world_size == 3 and p.tp * p.pp * p.cp <= 3


def test_no_layout_is_one_line_with_why_and_nothing_written(tmp_path, capsys):
    recipe = tmp_path / LLAMA8.name
    shutil.copy(LLAMA8, recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--nodes", "13", "--gpus-per-node", "7"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1, err
    assert "no layout the tune starts from is legal there either" in err[0] and "2 break parallel.tp=7" in err[0]
    assert [p.name for p in tmp_path.iterdir()] == [recipe.name]


def _no_search(monkeypatch):
    import primus_launch.tuner.search as search

    def refuse(*a, **k):
        raise AssertionError("searched")

    monkeypatch.setattr(search, "tune", refuse)


def test_weights_over_every_layout_refused_alone_before_the_search(tmp_path, capsys, monkeypatch):
    """DeepSeek-V3 (671B) moved to 1 x 2 H100: its layout is illegal there and a start exists, but the weights
    alone (4 bits each at least) overflow every layout; the refusal comes alone, no "searching" note before it."""
    _no_search(monkeypatch)
    recipe = tmp_path / "ds.sh"
    shutil.copy(ROOT / "recipes/megatron/deepseek_v3_671b.sh", recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--nodes", "1", "--gpus-per-node", "2"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2 and len(err) == 1 and "whatever the layout" in err[0], err
    assert [p.name for p in tmp_path.iterdir()] == [recipe.name]


def test_launch_this_environment_changes_is_refused_before_the_search(tmp_path, capsys, monkeypatch):
    """``TP_SIZE=4 primus-launch --tune r.sh --launch`` over ``TP_SIZE=${TP_SIZE:-2}``: the launch would run another
    plan; refused before the search (was: after it, the tuned files written)."""
    _no_search(monkeypatch)
    recipe = tmp_path / "r.sh"
    recipe.write_text(LLAMA8.read_text().replace("TP_SIZE=2\n", "TP_SIZE=${TP_SIZE:-2}\n", 1))
    monkeypatch.setenv("TP_SIZE", "4")
    rc = main(["--tune", str(recipe), "--dry-run", "--launch"])
    err = capsys.readouterr().err
    assert rc == 2 and "--launch: TP_SIZE=4 in this environment would change the run" in err, err
    assert [p.name for p in tmp_path.iterdir()] == [recipe.name]


def test_a_failing_write_leaves_no_tuned_file(tmp_path, capsys, monkeypatch):
    """The trial log's write fails after the tuned recipe was written: the recipe is removed (nothing written)."""
    import primus_launch.tuner.result as result
    from primus_launch.errors import UserError

    def fail(d):
        raise UserError("trial log: cannot write: disk full")

    monkeypatch.setattr(result, "log_text", fail)
    recipe = tmp_path / LLAMA8.name
    shutil.copy(LLAMA8, recipe)
    rc = main(["--tune", str(recipe), "--dry-run", "--json", "--max-work", "2000"])
    assert rc == 2 and "disk full" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == [recipe.name]
