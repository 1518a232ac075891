"""A tune moved to a cluster on which the recipe's own parallel layout is not legal (TP 2 on one GPU, TP 8 on two)
searches that cluster's space from a legal start (tuner/rebase.py) instead of refusing: the best legal plan is
written in the recipe's own format (read back by the tool's reader), with no gain claimed against the illegal
plan; where nothing fits, one error line with the smallest peak scored and the capacity."""

from __future__ import annotations

import json

from test_cli import RECIPES, cli
from tuner_helpers import small_dense_plan

from primus_launch.adapters import load_recipe
from primus_launch.plan import Plan
from primus_launch.tuner.engine import flat_fields
from primus_launch.tuner.rebase import legal_seed


def test_legal_seed_keeps_the_model_and_batch_and_fits_the_new_world():
    plan = small_dense_plan()  # tp 2 x pp 2 on 2 x 8
    seed = legal_seed(plan, {"num_nodes": 1, "gpus_per_node": 2})
    assert seed is not None and seed.cluster.num_nodes * seed.cluster.gpus_per_node == 2
    assert 2 % (seed.parallel.tp * seed.parallel.pp) == 0
    assert seed.model == plan.model and seed.training.global_batch_size == plan.training.global_batch_size
    # 17 GPUs: batch 64 on dp 17, 16 heads on tp 17, 16 layers on pp 17 (3 GPUs now start at pp 3, uneven:
    # tests/test_tuner_rebase_uneven.py)
    assert legal_seed(plan, {"num_nodes": 17, "gpus_per_node": 1}) is None


def test_tune_on_a_cluster_where_the_recipe_layout_is_illegal_searches_and_writes(tmp_path):
    recipe, out = RECIPES / "megatron" / "llama3.1_8b.sh", tmp_path / "one.sh"  # TP 2 on 1 x 8
    flags = ("--nodes", "1", "--gpus-per-node", "1")
    p = cli("--tune", recipe, "--dry-run", "--json", "--out", out, *flags)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["no_reference"] and "world size 1" in d["no_reference"] and d["gain"] == 0.0
    best = Plan.model_validate(d["best_plan"])
    back = load_recipe(out, {"num_nodes": 1, "gpus_per_node": 1})  # round trip through the tool's reader
    x, y = flat_fields(best.model_dump()), flat_fields(back.model_dump())
    assert {k for k in x.keys() | y.keys() if x.get(k) != y.get(k)} <= {"model.name"} | {k for k in x if
                                                                         k.startswith("source.")}
    assert back.parallel.tp == back.parallel.pp == 1
    text = cli("--tune", recipe, "--dry-run", "--out", tmp_path / "two.sh", *flags)
    assert text.returncode == 0 and "no legal reference on this cluster" in " ".join(text.stdout.split())
    assert "(original)" not in text.stdout and "=original" not in text.stdout  # the table names the start


def test_nothing_fits_on_the_new_cluster_is_one_line_with_the_smallest_peak(tmp_path):
    p = cli("--tune", RECIPES / "torchtitan" / "llama3.1_70b.toml", "--dry-run", "--nodes", "1", "--gpus-per-node",
            "2", "--out", tmp_path / "x.toml")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    note, line = [l for l in p.stderr.splitlines() if l.startswith("primus-launch")]  # the start, the error line
    assert "not legal on 1 x 2" in note and line.startswith("primus-launch: error: ")
    assert "not legal there" in line and "smallest peak" in line and "nothing written" in line
    assert not (tmp_path / "x.toml").exists()
