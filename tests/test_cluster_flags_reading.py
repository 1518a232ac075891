"""The CLI's cluster flags apply before the plan's legality check, and launch-script counts that are
``#SBATCH`` placeholders fall back with a note in the TorchTitan reader as in the Megatron one.

Before: a script written for 1 x 8 with EP x ETP x PP = 16 failed with "etp*ep*pp=16 must divide world
size 8" under ``--nodes 2`` (the recipe was checked on its own cluster first), and a TorchTitan Slurm
script's ``#SBATCH --nodes=<NODES>`` was read as one node without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.plan import PlanError
from tests.cli_run import run_cli

# Megatron-LM arguments.py: expert parallelism needs etp*ep*pp | world size; here 1 x 8 x 2 = 16
MOE16 = ("#!/bin/bash\ntorchrun --nnodes 1 --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 "
         "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
         "--global-batch-size 64 --bf16 --vocab-size 32000 --num-experts 8 --moe-router-topk 2 "
         "--expert-model-parallel-size 8 --pipeline-model-parallel-size 2\n")


@pytest.mark.parametrize("given, world", [({"num_nodes": 2}, 16), ({"gpus_per_node": 16}, 16),
                                          ({"num_nodes": 2, "gpu": "mi300x"}, 16)])
def test_partial_cluster_flags_apply_before_the_check(tmp_path, given, world):
    p = tmp_path / "moe16.sh"
    p.write_text(MOE16)
    plan = load_recipe(p, given)
    assert plan.world_size == world and plan.parallel.ep == 8
    assert all(getattr(plan.cluster, k) == v for k, v in given.items())


def test_illegal_final_cluster_names_the_flags_and_the_wrapper(tmp_path):
    p = tmp_path / "moe16.sh"
    p.write_text(MOE16)
    with pytest.raises(PlanError, match=r"must divide world size 8 \(cluster from --gpu=h100-sxm; node count and "
                                        r"GPUs per node from the recipe or its defaults\)"):
        load_recipe(p, {"gpu": "h100-sxm"})
    (tmp_path / "w.toml").write_text('[recipe]\npath = "moe16.sh"\n[cluster]\nnodes = 1\n')
    rc, _, err, _ = run_cli(["--project", "w.toml", "--dry-run", "--gpus-per-node", "4"], tmp_path)
    assert rc == 2 and err.count("\n") == 1
    assert "world size 4 (cluster from w.toml [cluster] nodes=1, --gpus-per-node=4; GPU from the recipe or its defaults)" in err
    rc, out, err, _ = run_cli(["--project", "w.toml", "--dry-run", "--nodes", "2"], tmp_path)  # the flag wins
    assert rc == 0, err
    argv = MOE16.split("\n")[1].split()  # the same run as a command line
    rc, _, err, _ = run_cli(["--project", "--dry-run", "--nodes", "1", "--", *argv], tmp_path)
    assert rc == 2 and "world size 8 (cluster from --nodes=1; GPUs per node and GPU from the recipe or its defaults)" in err


def test_partial_flags_on_a_titan_toml(tmp_path):
    # torchtitan parallel_dims: dp_shard * tp * pp must equal the world size; the header names 8 GPUs (local batch 2:
    # torch's 1F1B needs at least pp micro-batches)
    t = tmp_path / "job.toml"
    t.write_text("# NOTE: this toml config is a preset for 8 H100 GPUs.\n[model]\nname = \"llama3\"\n"
                 "flavor = \"debugmodel\"\n[parallelism]\ndata_parallel_shard_degree = 8\n"
                 "pipeline_parallel_degree = 2\n[training]\nlocal_batch_size = 2\nseq_len = 2048\n")
    with pytest.raises(PlanError):
        load_recipe(t)
    assert load_recipe(t, {"num_nodes": 2}).world_size == 16


PLACEHOLDERS = {
    # srun starts one task per GPU: both counts inherited from a template's header
    "srun_direct": ("#!/bin/bash\n#SBATCH --nodes=<NODES>\n#SBATCH --ntasks-per-node={tasks}\n"
                    "srun python -m torchtitan.train --module llama3 --config llama3_8b\n",
                    ["'#SBATCH --nodes=<NODES>' is not a count", "'#SBATCH --ntasks-per-node={tasks}' is not a count"]),
    # torchrun's --nnodes from SLURM_NNODES, which Slurm never sets from a placeholder
    "torchrun_env": ("#!/bin/bash\n#SBATCH -N {nodes}\n#SBATCH --gres=gpu:8\nsrun torchrun --nnodes $SLURM_NNODES "
                     "--nproc_per_node $SLURM_GPUS_ON_NODE -m torchtitan.train --module llama3 --config llama3_8b\n",
                     ["'#SBATCH -N {nodes}' is not a count"]),
    "unset_var": ("#!/bin/bash\ntorchrun --nnodes=${NNODES} --nproc_per_node 8 -m torchtitan.train --module llama3 "
                  "--config llama3_8b\n", ["--nnodes has no value (an unset variable?)"]),
}


@pytest.mark.parametrize("name", sorted(PLACEHOLDERS))
def test_titan_script_placeholders_fall_back_with_a_note(tmp_path, name):
    text, whys = PLACEHOLDERS[name]
    p = tmp_path / f"{name}.sh"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (1, 8)  # the default cluster's counts
    notes = [n for n in plan.source.notes if "falls back to" in n]
    assert len(notes) == len(whys) and all(w in n for w, n in zip(whys, notes))
    assert "pass --nodes or a wrapper TOML's [cluster] to state it" in notes[0]
    assert render_recipe(plan, text) == text
    given = load_recipe(p, {"num_nodes": 2})  # the flag states the node count: no note on it
    assert given.cluster.num_nodes == 2 and not any("node count falls back" in n for n in given.source.notes)


# Megatron-Bridge TransformerConfig.tp_comm_overlap_cfg: a YAML file path (str) or a dict; the run starts from its
# checkout's root, so a relative path is found from the config's folder upwards, as --tp-comm-overlap-cfg is
BRIDGE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"
UB_FILE = """fc1_dgrad: {method: bulk, num_sm: 2, set_sm_margin: 0}
proj_fprop: {method: pipeline, num_sm: 24, num_splits: 4, set_sm_margin: 1}
qkv_fprop: {method: ring_exchange, aggregate: 0}
"""


def test_bridge_relative_tp_comm_overlap_cfg_is_found_from_the_root(tmp_path, monkeypatch):
    text = BRIDGE.read_text().replace("  tp_comm_overlap: false\n  transformer_layer_spec:",
                                      "  tp_comm_overlap: true\n  tp_comm_overlap_cfg: cases/ub/ub.yaml\n"
                                      "  transformer_layer_spec:", 1)
    assert "cases/ub/ub.yaml" in text
    case = tmp_path / "bridge" / "cases" / "ub"
    case.mkdir(parents=True)
    (case / "ub.yaml").write_text(UB_FILE)
    (case / "run_config.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)  # not the root: the relative path does not resolve from here
    plan = load_recipe(case / "run_config.yaml", {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8})
    assert plan.training.tp_comm_overlap_cfg == (("fc1_dgrad", "bulk", 2, False), ("proj_fprop", "pipeline", 24, True),
                                                 ("qkv_fprop", "ring_exchange", 1, False))
    assert render_recipe(plan, text) == text


# ---------------------------------------------------------------- bash -c "$CMD": values written for the string
MEG_ARGS = ("--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
            "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000")
BASH_C = {
    # an escaped \$TP: the string's own shell expands it, from the variable set above the string
    "escaped": (f'#!/bin/bash\nTP=2\nARGS="{MEG_ARGS}"\n'
                'CMD="torchrun --nproc_per_node 8 pretrain_gpt.py $ARGS --tensor-model-parallel-size \\$TP"\n'
                'bash -c "$CMD"\n', "TP=4\n"),
    # single-quoted $TP in the string, TP exported above
    "single_quoted": (f'#!/bin/bash\nexport TP=2\nARGS="{MEG_ARGS}"\n'
                      "bash -c 'torchrun --nproc_per_node 8 pretrain_gpt.py '\"$ARGS\"' "
                      "--tensor-model-parallel-size $TP'\n", "export TP=4\n"),
    # a literal in the double-quoted CMD; a variable set inside the string
    "literal": (f'#!/bin/bash\nARGS="{MEG_ARGS}"\n'
                'CMD="torchrun --nproc_per_node 8 pretrain_gpt.py $ARGS --tensor-model-parallel-size 2"\n'
                'bash -c "$CMD"\n', "--tensor-model-parallel-size 4\""),
    "inner_var": (f'#!/bin/bash\nARGS="{MEG_ARGS}"\n'
                  'CMD="TP=2; torchrun --nproc_per_node 8 pretrain_gpt.py $ARGS --tensor-model-parallel-size \\$TP"\n'
                  'srun -N 1 bash -c "$CMD"\n', 'CMD="TP=4; '),
}


@pytest.mark.parametrize("name", sorted(BASH_C))
def test_bash_c_string_values_are_edited_where_written(tmp_path, name):
    text, want = BASH_C[name]
    p = tmp_path / f"{name}.sh"
    p.write_text(text)
    plan = load_recipe(p)
    assert plan.parallel.tp == 2 and plan.world_size == 8
    tuned = plan.with_changes(parallel={"tp": 4}).model_copy(update={"source": plan.source})
    out = render_recipe(tuned, text)
    assert want in out and out.count("\n") == text.count("\n")
    q = tmp_path / f"{name}.tuned.sh"
    q.write_text(out)
    back = load_recipe(q)
    assert back.parallel.tp == 4 and back.cluster == plan.cluster


@pytest.mark.parametrize("text", ["4", "1:4", "2:3", "8:8", " 16 ", "0", "0:4", "4:0", "4:1", "3:2", "1-4", "-1", "x",
                                  "", "1:2:3"])
def test_launcher_count_reads_torchruns_node_range(text):
    """One reader of the counts launchers write (adapters/launcher_counts.py, used by the Megatron, Primus and
    TorchTitan script readers and torchrun's --nnodes): with ``:`` ranges it takes what torch's own
    ``torch.distributed.run.parse_min_max_nnodes`` takes, as its MAX (the run's size), and refuses what
    ``config_from_args`` then refuses (``0 < min_nodes <= max_nodes``: a zero size, a range from 0, a MIN above
    the MAX -- robust9: ``--nnodes 4:1`` projected one node, ``0:4`` four); Slurm's ``MIN-MAX`` is its own
    separator, a MIN above the MAX refused as Slurm's verify_node_count refuses it."""
    from torch.distributed.run import parse_min_max_nnodes

    from primus_launch.adapters.launcher_counts import launcher_count

    try:
        lo, want = parse_min_max_nnodes(text.strip())
    except (ValueError, RuntimeError):  # int() of a part; RuntimeError: more than MIN:MAX
        lo = want = None
    if want is not None and not 0 < lo <= want:  # torch.distributed.run.config_from_args
        want = None
    assert launcher_count(text, ":") == want
    assert launcher_count("2-4", "-") == 4 and launcher_count("2:4", "-") is None
    assert launcher_count("4-2", "-") is None and launcher_count("4-4", "-") == 4


@pytest.mark.parametrize("word, want", [("-N4", ("-N", "=", "4")), ("--nodes=4", ("--nodes", "=", "4")),
                                        ("-N", ("-N", "", "")), ("--ntasks-per-node", ("--ntasks-per-node", "", ""))])
def test_slurm_option_splits_the_attached_short_form(word, want):
    """getopt's ``-N4`` (Slurm's ``-N`` with its argument attached) reads as ``--nodes=4`` in the sbatch header,
    the TorchTitan srun reader and the Primus ``primus-cli slurm`` reader alike."""
    from primus_launch.adapters.launcher_counts import slurm_option

    assert slurm_option(word) == want


@pytest.mark.parametrize("recipe", ["megatron/llama3.1_8b.sh", "megatron/llama3.1_8b.yaml", "torchtitan/llama3.1_8b.toml",
                                    "primus/MI355X/llama3.1_8b.yaml"])
def test_partial_cluster_flags_read_the_recipe_in_one_pass(recipe, monkeypatch):
    """Partial cluster flags complete the recipe's own cluster inside the reader's one pass: the recipe is read
    as often as without flags (before: its cluster was read first, or a Primus experiment was read a second
    time on the completed cluster), and the plan is the flags' cluster over the recipe's."""
    import collections

    import primus_launch.inputs as inputs

    path = Path(__file__).resolve().parents[1] / "recipes" / recipe
    reads: collections.Counter = collections.Counter()
    read_text = inputs.read_text

    def counted(p, *a, **k):
        reads[Path(p).name] += 1
        return read_text(p, *a, **k)

    monkeypatch.setattr(inputs, "read_text", counted)
    own = load_recipe(path)
    alone = reads[path.name]
    reads.clear()
    plan = load_recipe(path, {"gpu": "mi300x"})
    assert reads[path.name] == alone
    assert plan.cluster == own.cluster.model_copy(update={"gpu": "mi300x"})


# ----------------------------------------------------------------------------- partial flags: what still falls back
SB_ARGS = ("--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
           "--micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000")


@pytest.mark.parametrize("given, said", [({}, ("gpu", "node count")), ({"gpu": "b200"}, ("node count",)),
                                         ({"gpus_per_node": 4}, ("gpu", "node count")),
                                         ({"num_nodes": 2}, ("gpu",)), ({"num_nodes": 2, "gpu": "b200"}, ())])
def test_partial_flags_keep_the_note_of_each_field_they_do_not_set(tmp_path, given, said):
    """A field that falls back to a default is said in one note line, under partial cluster flags too (before:
    any flag dropped every such note, so ``#SBATCH --nodes=<NODES>`` under ``--gpu`` read as 1 node silently)."""
    p = tmp_path / "sb.sh"
    p.write_text(f"#!/bin/bash\n#SBATCH --nodes=<NODES>\n#SBATCH --ntasks-per-node=8\nsrun python pretrain_gpt.py {SB_ARGS}\n")
    plan = load_recipe(p, given)
    got = [n for n in plan.source.notes if "falls back" in n or "the default" in n]
    assert len(got) == len(said)
    assert ("gpu" in said) == any("cluster gpu=h100-sxm: the default" in n for n in got)
    assert ("node count" in said) == any("node count falls back to 1" in n for n in got)


def test_partial_gpus_per_node_keep_the_gpu_count_a_recipe_states(tmp_path):
    """A recipe that states its GPU count rather than its nodes (a TorchTitan job's data_parallel_shard_degree,
    a Megatron-LM MoE recipe's ``<N>GPU`` file name): ``--gpus-per-node`` alone keeps that count."""
    t = tmp_path / "job.toml"
    t.write_text("[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n[parallelism]\ndata_parallel_shard_degree = 16\n"
                 "[training]\nlocal_batch_size = 1\nseq_len = 2048\n")
    plan = load_recipe(t, {"gpus_per_node": 4})
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (4, 4)
    # the GPU is still the default's (user14: the flag given is named as given, not as assumed)
    assert any("4 x 4 h100-sxm, --gpus-per-node given and the rest assumed" in n for n in plan.source.notes)
    assert not any("assumed" in n for n in load_recipe(t, {"gpu": "b200", "num_nodes": 4, "gpus_per_node": 4}
                                                          ).source.notes)


def test_primus_node_count_fits_the_given_gpus_per_node(tmp_path):
    """A Primus experiment states no cluster: the node count is the smallest that fits the layout at
    ``--gpus-per-node`` GPUs per node (before: at 8, then 4 per node put in, 8 GPUs for a TP 8 x PP 2 layout)."""
    src = (Path(__file__).resolve().parents[1] / "recipes/primus/MI355X/llama3.1_8b.yaml").read_text()
    src = src.replace("tensor_model_parallel_size: ${PRIMUS_TP:1}", "tensor_model_parallel_size: 8").replace(
        "pipeline_model_parallel_size: 1", "pipeline_model_parallel_size: 2")
    d = tmp_path / "MI355X"
    d.mkdir()
    (d / "exp.yaml").write_text(src)
    plan = load_recipe(d / "exp.yaml", {"gpus_per_node": 4})
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.parallel.tp, plan.parallel.pp) == (4, 4, 8, 2)
    notes = [n for n in plan.source.notes if n.startswith("cluster")]
    assert len(notes) == 2 and "4 node(s) x 4 GPUs" in notes[1] and "--gpus-per-node" not in notes[1]
    both = load_recipe(d / "exp.yaml", {"gpus_per_node": 4, "num_nodes": 8, "gpu": "mi300x"})
    assert both.world_size == 32 and not [n for n in both.source.notes if n.startswith("cluster")]


@pytest.mark.parametrize("srun, world", [("srun -N4 -n32", 32), ("srun --nodes=2 --ntasks=8", 8),
                                         ("srun -N2 --ntasks-per-node=4", 8)])
def test_titan_srun_total_tasks_spread_over_the_nodes(tmp_path, srun, world):
    """srun(1): ``-n`` / ``--ntasks`` is the job's task count, spread over ``-N`` nodes (attached forms too)."""
    p = tmp_path / "t.sh"
    p.write_text(f"#!/bin/bash\n{srun} python -m torchtitan.train --module llama3 --config llama3_8b\n")
    plan = load_recipe(p, {"gpu": "h100-sxm"})
    assert plan.world_size == world
    p.write_text("#!/bin/bash\nsrun -N4 -n30 python -m torchtitan.train --module llama3 --config llama3_8b\n")
    with pytest.raises(PlanError, match="srun -n.*30.*multiple of the node count 4"):
        load_recipe(p, {"gpu": "h100-sxm"})


def test_a_wrapper_s_cluster_keys_name_the_file_once(tmp_path):
    """A wrapper stating the whole cluster repeated its name per key: "(cluster from w.toml [cluster] gpu=b200,
    w.toml [cluster] nodes=16, w.toml [cluster] gpus_per_node=8)"; now the file once, then its keys."""
    (tmp_path / "moe16.sh").write_text(MOE16)
    (tmp_path / "w.toml").write_text('[recipe]\npath = "moe16.sh"\n[cluster]\ngpu = "b200"\nnodes = 1\n'
                                     'gpus_per_node = 4\n')
    with pytest.raises(PlanError, match=r"must divide world size 4 \(cluster from w\.toml \[cluster\] gpu=b200, nodes=1, "
                                        r"gpus_per_node=4\)$"):
        load_recipe(tmp_path / "w.toml")
