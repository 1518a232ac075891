"""Follow-ups of a reading audit, one regression each (hand-written fixtures shaped like the upstream files):

1. ``--tune`` of a launch script whose tuned values are written in a script it runs (``bash examples/llama/
   train_x.sh ARGS``, Megatron-LM's READMEs) or a fragment it sources was "it is computed" / "no place to add":
   now one line naming the file, the line of each value and what to set there (the tuned recipe is a copy of
   the given script only; no file the run reads is written over);
2. ``#SBATCH`` counts written as template placeholders (``--nodes=<NODES>``, ``-N {nodes}``, ``${NNODES}``:
   sbatch expands no variables in its directives) and launcher counts from unset variables fell back to
   1 node silently: now a note names the directive and the count it falls back to;
3. a Megatron-Bridge run config's ``env_vars`` (ConfigContainer.env_vars, Bridge @067f987) is the run's launch
   environment, checked and edited like a Megatron-LM YAML's ``ENV_VARS``; ``comm_overlap.tp_comm_overlap_cfg``
   (a nested TransformerLayerTPOverlapCfg) is read as the Megatron reader reads a ``--tp-comm-overlap-cfg`` file;
4. Megatron-LM core_v0.14.0's functional tests write a layout shell-escaped for their runner
   (``--pipeline-model-parallel-layout: Et*3\\\\|\\\\(tt\\\\|\\\\)*6tmL # Et*3|(tt|)*6tmL``): read as the runner's
   xargs + eval pass it, written back escaped the same way;
5. a wrapper whose ``recipe.path`` is a folder said "no such file".
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.adapters.bridge_yaml import from_bridge_yaml
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.adapters.megatron_bash import sbatch_header
from primus_launch.adapters.megatron_yaml import from_yaml, runner_escaped, runner_unescaped
from primus_launch.errors import UserError
from primus_launch.plan import PlanError
from primus_launch.plan.layout import parse_layout

ARGS = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --ffn-hidden-size 14336 --seq-length 4096 "
        "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 128 --vocab-size 128256 --bf16")


def _changed(plan, **changes):
    return plan.with_changes(**changes).model_copy(update={"source": plan.source})


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


# ----------------------------------------------------------------------- 1. values in another file
TRAIN_X = f"""#!/bin/bash
# shaped like Megatron-LM examples/llama/train_llama3_8b_h100_fp8.sh
CHECKPOINT_PATH=${{1:-ckpt}}
GPUS_PER_NODE=8
TP=2
torchrun --nproc_per_node $GPUS_PER_NODE --nnodes 1 pretrain_gpt.py \\
    {ARGS} \\
    --tensor-model-parallel-size $TP \\
    --pipeline-model-parallel-size 1 \\
    --save $CHECKPOINT_PATH
"""


def test_tune_into_a_called_script_names_its_lines(tmp_path):
    ex = tmp_path / "examples" / "llama"
    ex.mkdir(parents=True)
    (ex / "train_x.sh").write_text(TRAIN_X)
    caller = tmp_path / "run.sh"
    text = "#!/bin/bash\nbash examples/llama/train_x.sh /ckpt\n"
    caller.write_text(text)
    plan = load_recipe(caller)
    assert plan.parallel.tp == 2
    assert render_recipe(plan, text) == text  # unchanged: nothing to write
    with pytest.raises(UserError) as e:
        render_recipe(_changed(plan, parallel=dict(tp=1), training=dict(micro_batch_size=2)), text)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{caller}: cannot write the tuned values")
    assert f"{ex / 'train_x.sh'} (run by this script)" in msg
    assert f"line {_line_of(TRAIN_X, 'TP=2')}: set --tensor-model-parallel-size 1 (now 2)" in msg
    assert f"line {_line_of(TRAIN_X, '--micro-batch-size')}: set --micro-batch-size 2 (now 1)" in msg
    assert "edit them there by hand" in msg


COMMON = f"""ARGS=({ARGS}
    --tensor-model-parallel-size 2)
export NVTE_CPU_OFFLOAD_V1=0
PP=2
"""


def test_tune_into_a_sourced_fragment(tmp_path):
    (tmp_path / "common.sh").write_text(COMMON)
    # an argument array from the fragment: its values cannot be edited in this script; an added flag neither
    text = "#!/bin/bash\nsource common.sh\ntorchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]}\n"
    (tmp_path / "a.sh").write_text(text)
    plan = load_recipe(tmp_path / "a.sh")
    with pytest.raises(UserError) as e:
        render_recipe(_changed(plan, parallel=dict(tp=1, dp_sharding="optimizer")), text)
    msg = str(e.value)
    assert f"{tmp_path / 'common.sh'} (sourced by this script)" in msg
    assert f"line {_line_of(COMMON, '--tensor-model')}: set --tensor-model-parallel-size 1 (now 2)" in msg
    assert "add --use-distributed-optimizer" in msg
    # a variable of the fragment used here (`$PP`) is still edited at the use site, as before
    text2 = f"#!/bin/bash\nsource common.sh\ntorchrun --nproc_per_node 8 pretrain_gpt.py {ARGS} \\\n" \
            "    --pipeline-model-parallel-size $PP\n"
    (tmp_path / "b.sh").write_text(text2)
    plan2 = load_recipe(tmp_path / "b.sh")
    assert plan2.parallel.pp == 2
    out = render_recipe(_changed(plan2, parallel=dict(pp=1)), text2)
    assert out.endswith("--pipeline-model-parallel-size 1\n")
    # the environment the fragment exports, which an export here cannot override (it is sourced after it)
    offload = _changed(plan2, training=dict(offload=dict(activation_modules=("core_attn",))))
    with pytest.raises(UserError) as e:
        render_recipe(offload, text2)
    assert f"line {_line_of(COMMON, 'export NVTE')}: set NVTE_CPU_OFFLOAD_V1=1" in str(e.value)


def test_a_function_of_a_sourced_fragment_is_not_edited_here(tmp_path):
    """A function the fragment defines, called here, runs the fragment's text in this script's state: its
    characters' offsets are the fragment's (before, the edit went to those offsets of this script and the
    re-read refused "cannot express")."""
    lib = ("# launch functions\ntrain() {\n    torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
           f"        {ARGS} \\\n        --tensor-model-parallel-size 2\n}}\n")
    (tmp_path / "lib.sh").write_text(lib)
    text = "#!/bin/bash\nsource lib.sh\ntrain\n"
    (tmp_path / "main.sh").write_text(text)
    plan = load_recipe(tmp_path / "main.sh")
    with pytest.raises(UserError) as e:
        render_recipe(_changed(plan, training=dict(micro_batch_size=2)), text)
    assert f"{tmp_path / 'lib.sh'} (sourced by this script) line {_line_of(lib, ARGS)}: set --micro-batch-size 2 " \
           "(now 1)" in str(e.value)


# ----------------------------------------------------------------------- 2. #SBATCH placeholders
SRUN = f"srun python pretrain_gpt.py {ARGS} --tensor-model-parallel-size 2\n"


@pytest.mark.parametrize("directive", ["--nodes=<NODES>", "-N {nodes}", "--nodes=${NNODES}"])
def test_sbatch_placeholder_falls_back_with_a_note(tmp_path, directive):
    text = f"#!/bin/bash\n#SBATCH --job-name=x\n#SBATCH {directive}\n#SBATCH --ntasks-per-node=8\n{SRUN}"
    assert sbatch_header(text) == ({"ntasks_per_node": 8}, {"nodes": f"#SBATCH {directive}"})
    p = tmp_path / "job.sbatch"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (1, 8)
    note = [n for n in plan.source.notes if "falls back" in n]
    assert note == [f"{p}: '#SBATCH {directive}' is not a count (a template placeholder? sbatch refuses it): the node "
                    "count falls back to 1 (pass --nodes or a wrapper TOML's [cluster] to state it)"]
    assert load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 4, "gpus_per_node": 8}).world_size == 32


def test_sbatch_here_document_with_placeholders(tmp_path):
    # shaped like Megatron-LM examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh: `sbatch <<EOF` whose #SBATCH
    # lines are left for the user to fill, and whose srun runs the training command with `bash -x -c`
    text = (f'#!/bin/bash\nCMD="cd /workspace; python pretrain_gpt.py {ARGS}"\nsbatch <<EOF\n#!/bin/bash\n'
            "#SBATCH --nodes=your_own_num_nodes\n#SBATCH --ntasks-per-node=your_own_tasks_per_node\n"
            "#SBATCH --gres=gpu:your_own_gpu_per_node\n"
            'srun --mpi=pmix -l bash -x -c "${CMD}" 2>&1 | tee log.txt\nEOF\n')
    p = tmp_path / "sbatch_run.sh"
    p.write_text(text)
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (1, 8)  # the default cluster, as before
    notes = [n.split(": ", 1)[1] for n in plan.source.notes if "falls back" in n]
    assert notes == ["'#SBATCH --nodes=your_own_num_nodes' is not a count (a template placeholder? sbatch refuses it): "
                     "the node count falls back to 1 (pass --nodes or a wrapper TOML's [cluster] to state it)",
                     "'#SBATCH --ntasks-per-node=your_own_tasks_per_node' is not a count (a template placeholder? "
                     "sbatch refuses it): the count of processes per node falls back to 8 (pass --gpus-per-node or a "
                     "wrapper TOML's [cluster] to state it)"]
    # tuned for a wrapper's 4 x 8: the counts stay the user's to fill in; the rest is written
    big = load_recipe(p, {"gpu": "h100-sxm", "num_nodes": 4, "gpus_per_node": 8})
    assert render_recipe(big, text) == text
    out = render_recipe(_changed(big, training=dict(micro_batch_size=2)), text)
    assert "--micro-batch-size 2" in out and "your_own_num_nodes" in out


def test_unset_launcher_count_is_noted_and_stated_counts_are_not(tmp_path):
    p = tmp_path / "t.sh"
    p.write_text(f"#!/bin/bash\ntorchrun --nnodes $NNODES --nproc-per-node $GPUS pretrain_gpt.py {ARGS}\n")
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node) == (1, 8)  # torchrun would refuse both: unset
    assert [n.split(": ", 1)[1] for n in plan.source.notes if "falls back" in n] == [
        "--nnodes has no value (an unset variable?): the node count falls back to 1 (pass --nodes or a wrapper "
        "TOML's [cluster] to state it)",
        "--nproc-per-node has no value (an unset variable?): the count of processes per node falls back to 8 (pass "
        "--gpus-per-node or a wrapper TOML's [cluster] to state it)"]
    # torchrun states the counts itself: the placeholder in the header is not what the run uses
    q = tmp_path / "u.sh"
    q.write_text(f"#!/bin/bash\n#SBATCH --nodes=<N>\ntorchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py {ARGS}\n")
    plan = load_recipe(q)
    assert plan.world_size == 16 and not any("falls back" in n for n in plan.source.notes)


# ----------------------------------------------------------------------- 3. Megatron-Bridge env_vars, UB config
FIXTURE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"
CLUSTER = {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8}


def test_bridge_env_vars_are_the_launch_environment(tmp_path):
    text = FIXTURE.read_text()
    assert "env_vars: {}\n" in text  # ConfigContainer.to_yaml of an empty dict
    p = tmp_path / "run_config.yaml"
    p.write_text(text)
    plan = load_recipe(p, CLUSTER)
    assert not any("env_vars" in n for n in plan.source.notes)  # read now, not listed as not read
    out = render_recipe(_changed(plan, training=dict(offload=dict(activation_modules=("core_attn",)))), text)
    assert "env_vars: {NVTE_CPU_OFFLOAD_V1: '1'}\n" in out  # Bridge's own assert (training/config.py)
    assert yaml.safe_load(out)["env_vars"] == {"NVTE_CPU_OFFLOAD_V1": "1"}
    # a block mapping of ints (str(value) is what apply_environment_variables exports): edited in place
    block = text.replace("env_vars: {}\n", "env_vars:\n  CUDA_DEVICE_MAX_CONNECTIONS: 1\n  NCCL_NVLS_ENABLE: 0\n")
    assert from_bridge_yaml(block, "r.yaml").env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_NVLS_ENABLE": "0"}
    p.write_text(block)
    plan = load_recipe(p, CLUSTER)
    out = render_recipe(_changed(plan, parallel=dict(dp_sharding="optimizer_grads")), block)
    env = yaml.safe_load(out)["env_vars"]
    assert env["CUDA_DEVICE_MAX_CONNECTIONS"] != "1" and env["NCCL_NVLS_ENABLE"] == 0  # Megatron-FSDP's assert
    with pytest.raises(UserError, match=r"env_vars.X: a str, int, float or bool value"):
        from_bridge_yaml(text.replace("env_vars: {}\n", "env_vars:\n  X: null\n"), "r.yaml")


UB_BRIDGE = """  tp_comm_overlap: true
  tp_comm_overlap_cfg:
    _target_: megatron.bridge.training.comm_overlap.TransformerLayerTPOverlapCfg
    fc1_dgrad: {_target_: megatron.bridge.training.comm_overlap.BulkOverlapCfg, cga_size: 2, method: bulk, num_sm: 2,
      set_sm_margin: false}
    proj_fprop:
      _target_: megatron.bridge.training.comm_overlap.PipelineOverlapCfg
      atomic_gemm: false
      cga_size: 2
      fp8_buf: [false]
      method: pipeline
      num_sm: 24
      num_splits: 4
      set_sm_margin: true
    qkv_fprop: {_target_: megatron.bridge.training.comm_overlap.RingExchangeOverlapCfg, aggregate: false,
      method: ring_exchange, num_sm: 1, set_sm_margin: false}
"""
UB_FILE = """fc1_dgrad: {method: bulk, num_sm: 2, cga_size: 2, set_sm_margin: 0}
proj_fprop: {method: pipeline, num_sm: 24, cga_size: 2, num_splits: 4, set_sm_margin: 1}
qkv_fprop: {method: ring_exchange, aggregate: 0}
"""


def test_bridge_tp_comm_overlap_cfg_reads_as_the_megatron_file(tmp_path):
    text = FIXTURE.read_text().replace("  tp_comm_overlap: false\n  tp_comm_overlap_cfg: null\n", UB_BRIDGE, 1)
    assert "TransformerLayerTPOverlapCfg" in text
    p = tmp_path / "run_config.yaml"
    p.write_text(text)
    plan = load_recipe(p, CLUSTER)
    assert not any("tp_comm_overlap_cfg" in n for n in plan.source.notes)
    (tmp_path / "ub.yaml").write_text(UB_FILE)
    argv = ["pretrain_gpt.py", *ARGS.split(), "--tensor-model-parallel-size", "2", "--sequence-parallel",
            "--tp-comm-overlap", "--tp-comm-overlap-cfg", str(tmp_path / "ub.yaml")]
    mlm = plan_from_argv(argv)
    assert plan.training.tp_comm_overlap and plan.training.tp_comm_overlap_cfg == mlm.training.tp_comm_overlap_cfg
    assert plan.training.tp_comm_overlap_cfg == (("fc1_dgrad", "bulk", 2, False), ("proj_fprop", "pipeline", 24, True),
                                                 ("qkv_fprop", "ring_exchange", 1, False))
    assert render_recipe(plan, text) == text
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("    qkv_fprop:", "    qkv_bogus:"))
    with pytest.raises(PlanError, match="comm_overlap.tp_comm_overlap_cfg='qkv_bogus'"):
        load_recipe(bad, CLUSTER)


# ----------------------------------------------------------------------- 4. shell-escaped layout
def _model_config(layout: str) -> str:
    # shaped like core_v0.14.0 tests/functional_tests/test_cases/moe/..._selective_recompute_experimental
    return ("ENV_VARS:\n  CUDA_DEVICE_MAX_CONNECTIONS: 32\nMODEL_ARGS:\n  --tensor-model-parallel-size: 2\n"
            "  --pipeline-model-parallel-size: 2\n  --expert-model-parallel-size: 4\n  --sequence-parallel: true\n"
            "  --micro-batch-size: 4\n  --global-batch-size: 32\n  --seq-length: 4096\n"
            "  --max-position-embeddings: 4096\n  --num-layers: 16\n"
            f"  --pipeline-model-parallel-layout: {layout}\n"
            "  --hidden-size: 1024\n  --ffn-hidden-size: 4096\n  --num-attention-heads: 32\n  --swiglu: true\n"
            "  --mtp-num-layers: 1\n  --num-experts: 32\n  --moe-router-topk: 2\n  --vocab-size: 32000\n"
            "  --bf16: true\n")


def test_shell_escaped_layout_reads_as_the_runner_passes_it(tmp_path):
    escaped = "Et*3\\\\|\\\\(tt\\\\|\\\\)*6tmL"
    assert runner_unescaped(escaped) == "Et*3|(tt|)*6tmL" and runner_escaped("Et*3|(tt|)*6tmL") == escaped
    cluster = {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8}
    (tmp_path / "esc.yaml").write_text(text := _model_config(escaped + " # Et*3|(tt|)*6tmL"))
    (tmp_path / "plain.yaml").write_text(plain := _model_config('"Et*3|(tt|)*6tmL"'))
    a, b = load_recipe(tmp_path / "esc.yaml", cluster), load_recipe(tmp_path / "plain.yaml", cluster)
    assert a.parallel == b.parallel and a.parallel.pipeline_layout
    assert parse_layout(a.parallel.pipeline_layout) == parse_layout("Et*3|(tt|)*6tmL")
    assert any("read as the functional-test runner's shell passes it" in n for n in a.source.notes)
    assert render_recipe(a, text) == text
    new = "Et*2|(tt|)*6ttmL"
    out = render_recipe(_changed(a, parallel=dict(pipeline_layout=new)), text)
    written = [ln for ln in out.splitlines() if "layout" in ln][0]
    assert written.startswith(f"  --pipeline-model-parallel-layout: {runner_escaped(new)} #")
    assert from_yaml(out, "o.yaml").args["pipeline_model_parallel_layout"] == new
    out = render_recipe(_changed(b, parallel=dict(pipeline_layout=new)), plain)  # a plain file stays plain
    assert "\\" not in out and f'"{new}"' in out


# ----------------------------------------------------------------------- 5. wrapper recipe.path a folder
def test_wrapper_path_that_is_a_folder(tmp_path):
    w = tmp_path / "w.primus.toml"
    w.write_text('[recipe]\npath = "."\n[cluster]\ngpu = "h100-sxm"\nnodes = 1\ngpus_per_node = 8\n')
    with pytest.raises(UserError) as e:
        load_recipe(w)
    msg = str(e.value)
    assert msg.startswith(f"recipe.path='.': a folder ({tmp_path}); expected the recipe file itself") and "\n" not in msg
