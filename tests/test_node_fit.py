"""The fewest nodes a recipe fits on, where its node count was fitted (projection/node_fit.py).

Truth: the projection itself, asked independently: the count the search returns is re-projected with ``--nodes N``
(it fits) and ``--nodes N-1`` / ``--nodes N/2`` (it does not), through the CLI's own ``main``; a count the user
states gets no search.
"""

from __future__ import annotations

import json

import pytest

from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.cli import main
from primus_launch.plan import PlanError
from primus_launch.projection.api import project
from primus_launch.projection.node_fit import search_nodes, wants_search
from primus_launch.report.text import MAX_LINES, WIDTH

# Llama 3 70B, FSDP over whatever the world leaves (TorchTitan's data_parallel_shard_degree = -1), full AC, no
# header comment naming the scale: read on 1 node of 8 H100 (fitted), where 70B x 16 bytes / 8 GPUs does not fit
TOML = """
[model]
name = "llama3"
flavor = "70B"

[training]
local_batch_size = 1
seq_len = 8192
steps = 10

[parallelism]
data_parallel_shard_degree = -1
tensor_parallel_degree = 1

[activation_checkpoint]
mode = "full"
"""


@pytest.fixture()
def recipe(tmp_path):
    p = tmp_path / "llama70b_fsdp.toml"
    p.write_text(TOML)
    return str(p)


def _json(capsys, *args: str) -> dict:
    assert main(["--project", *args, "--dry-run", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_fitted_count_that_does_not_fit_gets_the_fewest_that_fits(recipe, capsys):
    d = _json(capsys, recipe)
    assert d["plan"]["source"]["nodes_fitted"] is True
    assert d["plan"]["cluster"]["num_nodes"] == 1 and d["memory"]["verdict"] == "does not fit"
    n = d["memory"]["fits_from_nodes"]
    assert isinstance(n, int) and n > 1
    s = d["memory"]["node_search"]
    assert s["from_nodes"] == 1 and s["exact"] and len([t for t in s["tried"] if t["skipped"] is None]) <= 17
    # independently: the same recipe with --nodes N fits, with N-1 and N/2 it does not
    at_n = _json(capsys, recipe, "--nodes", str(n))
    assert at_n["memory"]["verdict"] == "fits"
    assert at_n["plan"]["source"]["nodes_fitted"] is False and at_n["memory"]["fits_from_nodes"] is None
    for m in {n - 1, n // 2}:
        assert _json(capsys, recipe, "--nodes", str(m))["memory"]["verdict"] != "fits"


def test_text_answer_says_the_count_to_give(recipe, capsys):
    n = _json(capsys, recipe)["memory"]["fits_from_nodes"]
    assert main(["--project", recipe, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= MAX_LINES and all(len(ln) <= WIDTH for ln in lines)   # still one screen
    out = " ".join(" ".join(lines).split())
    assert "does not fit on 1 node (fitted; the recipe states none)" in out
    assert f"fits from {n} nodes" in out and f"give --nodes {n}" in out
    assert main(["--project", recipe, "--dry-run", "--explain"]) == 0
    assert "note: nodes: the node count was fitted" in capsys.readouterr().out


def test_stated_count_gets_no_search(recipe, capsys):
    d = _json(capsys, recipe, "--nodes", "1")
    assert d["memory"]["verdict"] == "does not fit"
    assert d["plan"]["source"]["nodes_fitted"] is False
    assert d["memory"]["fits_from_nodes"] is None and d["memory"]["node_search"] is None
    # a header comment naming the scale states it too (torchtitan's own configs)
    plan = plan_from_text("# NOTE: this toml config is a preset for 8 H100 GPUs.\n" + TOML)
    assert plan.cluster.world_size == 8 and not plan.source.nodes_fitted


def test_skipped_counts_are_said_and_bisection_steps_over_them():
    """A count where the recipe cannot run (here: a PlanError at 5 nodes, as a global batch not divisible by the
    data-parallel size raises) is skipped and named; the answer is the next legal count that fits."""
    plan = plan_from_text(TOML)
    base = project(plan)
    assert wants_search(plan, base)

    def replan(n: int):
        if n == 5:
            raise PlanError("training.global_batch_size", 8, "must be a multiple of local_batch_size x dp = 1 x 40")
        # global_batch_size = -1: local_batch_size x dp, as TorchTitan grows it with the world
        return plan.with_changes(cluster={"num_nodes": n}, training={"global_batch_size": 8 * n})

    def fake_project(p):  # fits from 5 nodes on
        m = base.memory.model_copy(update={"verdict": "fits" if p.cluster.num_nodes >= 5 else "does not fit"})
        return base.model_copy(update={"memory": m})

    s = search_nodes(plan, base, fake_project, replan)
    assert s.fits_from_nodes == 6
    skipped = [t for t in s.tried if t.skipped]
    assert [t.nodes for t in skipped] == [5] and "global_batch_size" in skipped[0].skipped
    assert [t.nodes for t in s.tried if t.skipped is None] == [1, 2, 4, 6, 8]
    # a bound on projections: the fewest found so far, said not exact
    s2 = search_nodes(plan, base, fake_project, replan, max_projections=3)
    assert s2.fits_from_nodes == 8 and not s2.exact


def test_primus_experiment_is_marked_fitted_and_a_fitting_one_gets_no_search():
    """A Primus experiment states no node count (adapters/primus_yaml.py default_cluster): marked fitted; the
    bundled one fits on its fitted node, so the search does not run (the answer is unchanged)."""
    from pathlib import Path

    from primus_launch.adapters import load_recipe

    plan = load_recipe(Path(__file__).resolve().parents[1] / "recipes/primus/MI355X/llama3.1_8b.yaml")
    assert plan.source.nodes_fitted and plan.cluster.num_nodes == 1
    r = project(plan)
    assert r.memory.verdict == "fits" and not wants_search(plan, r)
    assert r.memory.fits_from_nodes is None and r.memory.node_search is None


def test_megatron_yaml_on_the_default_node_is_marked_fitted(tmp_path):
    """A Megatron argument YAML that states no cluster is read on the default single node (adapters/megatron.py
    _default_note): marked fitted; --nodes states it.  Llama-3-70B shapes at TP=1 with the distributed optimizer
    (Megatron shards only the optimizer state over DP): no count fits, and the counts whose data-parallel size
    does not divide --global-batch-size are skipped and named."""
    from primus_launch.adapters import load_recipe

    p = tmp_path / "l70_tp1.yaml"
    p.write_text("num_layers: 80\nhidden_size: 8192\nffn_hidden_size: 28672\nnum_attention_heads: 64\n"
                 "group_query_attention: true\nnum_query_groups: 8\nseq_length: 8192\nmax_position_embeddings: 8192\n"
                 "micro_batch_size: 1\nglobal_batch_size: 64\nuse_distributed_optimizer: true\nbf16: true\n"
                 "swiglu: true\nnormalization: RMSNorm\nposition_embedding_type: rope\n"
                 "untie_embeddings_and_output_weights: true\nrecompute_granularity: full\nrecompute_method: uniform\n"
                 "recompute_num_layers: 1\nvocab_size: 128256\n")
    plan = load_recipe(p)
    assert plan.source.nodes_fitted and plan.cluster.num_nodes == 1
    assert not load_recipe(p, {"num_nodes": 1}).source.nodes_fitted
    base = project(plan)
    s = search_nodes(plan, base, project, lambda n: load_recipe(p, {"num_nodes": n}))
    assert s.fits_from_nodes is None
    assert [t.nodes for t in s.tried if t.skipped] == [16, 32, 64, 128, 256, 512]   # dp 128 .. 4096 > 64
    assert all("global-batch-size" in t.skipped for t in s.tried if t.skipped)   # named as the YAML reads


def test_bisection_searches_below_a_run_of_skipped_counts():
    """Between 8 (does not fit) and 16 (fits) only 10 is legal (say a global batch of 640 at dp = nodes): the
    midpoints 12..15 are skipped, and the answer is 10, not 16 said exact (the counts below 12 are searched)."""
    plan = plan_from_text(TOML)
    base = project(plan)
    legal = {1, 2, 4, 8, 10, 16, 32, 64, 128, 256, 512}

    def replan(n: int):
        if n not in legal:
            raise PlanError("training.global_batch_size", 640, f"must be a multiple of dp = {n}")
        return plan.with_changes(cluster={"num_nodes": n}, training={"global_batch_size": 8 * n})

    def fake_project(p):  # fits from 10 nodes on
        m = base.memory.model_copy(update={"verdict": "fits" if p.cluster.num_nodes >= 10 else "does not fit"})
        return base.model_copy(update={"memory": m})

    s = search_nodes(plan, base, fake_project, replan)
    assert s.fits_from_nodes == 10 and s.exact
    assert {12, 13, 14, 15} <= {t.nodes for t in s.tried if t.skipped}


# user20: Megatron-LM examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh leaves its #SBATCH counts as placeholders
# (sbatch refuses '--nodes=your_own_num_nodes'): the count the reader falls back to is its own choice, not the
# recipe's, so a plan that does not fit there gets the node search (was: 1 node, 'DOES NOT FIT', no search)
_MLM_ARGS = ("--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64 "
             "--group-query-attention --num-query-groups 8 --seq-length 4096 --max-position-embeddings 4096 "
             "--swiglu --normalization RMSNorm --untie-embeddings-and-output-weights --vocab-size 128256 "
             "--tensor-model-parallel-size 8 --sequence-parallel --use-distributed-optimizer "
             "--micro-batch-size 1 --global-batch-size 256 --bf16 --recompute-activations")


@pytest.mark.parametrize("nodes, fitted", [("your_own_num_nodes", True), ("<NODES>", True), ("2", False)])
def test_sbatch_placeholder_node_count_is_fitted(tmp_path, capsys, nodes, fitted):
    text = (f'#!/bin/bash\nCMD="cd /workspace; python pretrain_gpt.py {_MLM_ARGS}"\nsbatch <<EOF\n#!/bin/bash\n'
            f"#SBATCH --nodes={nodes}\n#SBATCH --ntasks-per-node=8\n"
            'srun --mpi=pmix -l bash -x -c "${CMD}"\nEOF\n')
    p = tmp_path / "sbatch_run.sh"
    p.write_text(text)
    d = _json(capsys, str(p))
    assert d["plan"]["source"]["nodes_fitted"] is fitted
    if not fitted:  # stated: projected as stated, no search
        assert d["plan"]["cluster"]["num_nodes"] == 2 and d["memory"]["node_search"] is None
        return
    assert d["plan"]["cluster"]["num_nodes"] == 1 and d["memory"]["verdict"] == "does not fit"
    n = d["memory"]["fits_from_nodes"]
    assert isinstance(n, int) and n > 1
    # independently: the same script on --nodes N fits, on N // 2 it does not
    assert _json(capsys, str(p), "--nodes", str(n))["memory"]["verdict"] == "fits"
    assert _json(capsys, str(p), "--nodes", str(n // 2))["memory"]["verdict"] != "fits"


# user20: a Megatron-LM functional test's model_config.yaml states no cluster; Megatron-LM's
# tests/functional_tests/test_cases/mixtral/deepseekv3_proxy_flex_tp2pp2emp16etp1cp1_gb_200_release has TP 2 x PP 2 and
# EP 8 x ETP 1 x PP 2 = 16 GPUs, which the default 1 x 8 node cannot hold (megatron/core/parallel_state.py
# initialize_model_parallel: the world must divide by tp*cp*pp and by etp*ep*pp): read on the fewest nodes that hold
# it, as the README says of a recipe on the default node (was: refused, 'etp*ep*pp=16 must divide world size 8')
_FT_YAML = """\
ENV_VARS:
  CUDA_DEVICE_MAX_CONNECTIONS: 1
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 1024
  --ffn-hidden-size: 4096
  --num-attention-heads: 16
  --seq-length: 2048
  --max-position-embeddings: 2048
  --vocab-size: 32000
  --tensor-model-parallel-size: 2
  --pipeline-model-parallel-size: 2
  --expert-model-parallel-size: 8
  --expert-tensor-parallel-size: 1
  --sequence-parallel: true
  --num-experts: 16
  --moe-router-topk: 2
  --moe-grouped-gemm: true
  --micro-batch-size: 1
  --global-batch-size: 64
  --bf16: true
"""


def test_default_node_widened_to_the_degrees(tmp_path, capsys):
    from primus_launch.adapters.megatron import load_megatron
    from primus_launch.plan import Cluster

    p = tmp_path / "model_config.yaml"
    p.write_text(_FT_YAML)
    plan = load_megatron(p)
    c = plan.cluster
    assert (c.num_nodes, c.gpus_per_node) == (2, 8) and plan.source.nodes_fitted
    # Megatron's rule, independently: etp*ep*pp = 1*8*2 = 16 and tp*cp*pp = 4 divide 16, not 8
    assert c.world_size % (1 * 8 * 2) == 0 and 8 % (1 * 8 * 2) != 0
    assert plan.dp == 16 // (2 * 2)
    assert any("num_nodes=2 (the fewest nodes of 8 GPUs" in n for n in plan.source.notes)
    # a node count the user states is kept, and refused as before
    with pytest.raises(PlanError, match="must divide world size 8"):
        load_megatron(p, Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
    assert main(["--project", str(p), "--dry-run", "--nodes", "1"]) == 2
    capsys.readouterr()
    d = _json(capsys, str(p))
    assert d["num_gpus"] == 16



def test_fewest_nodes_is_the_first_count_megatron_accepts():
    from primus_launch.adapters.node_size import fewest_nodes

    for tp, cp, pp, ep, etp, gpn, mbs, gbs in [(2, 1, 2, 8, 1, 8, 1, 64), (8, 1, 4, 64, 1, 8, 1, 4096),
                                               (1, 1, 3, 1, 1, 8, 1, 24), (4, 2, 1, 8, 1, 4, 2, 96)]:
        n = fewest_nodes(tp, cp, pp, ep, etp, gpn, mbs, gbs)

        def legal(k: int) -> bool:  # parallel_state's divisibility and the batch's (validate_args)
            w = k * gpn
            return w % (tp * cp * pp) == 0 and w % (etp * ep * pp) == 0 and gbs % (mbs * w // (tp * cp * pp)) == 0

        assert legal(n) and not any(legal(k) for k in range(1, n))
