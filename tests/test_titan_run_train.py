"""TorchTitan's documented launch, ``MODULE=M CONFIG=C ./run_train.sh [--section.key v ...]`` (README,
docs/debugging.md), read as the command the script runs; ``--override.imports`` reported.

torchtitan main run_train.sh: ``torchrun --nproc_per_node=${NGPU} ... -m torchtitan.train --module
${MODULE} --config ${CONFIG} "$@"`` with NGPU 8, MODULE llama3, CONFIG llama3_debugmodel by default;
v0.2.2's ran ``--job.config_file ${CONFIG_FILE}``.  The expected figures are the config registry's
(torchtitan 0.3.0 models/llama3: llama3_8b is 32 layers of dim 4096, seq_len 8192, local batch 1).
"""

from __future__ import annotations

from pathlib import Path

from primus_launch.adapters import detect_kind, load_recipe, render_recipe


def _write(tmp_path: Path, text: str, name: str = "run.sh") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_readme_call_reads_module_config_and_ngpu(tmp_path):
    p = _write(tmp_path, "NGPU=4 MODULE=llama3 CONFIG=llama3_8b ./run_train.sh --parallelism.tensor_parallel_degree=2 "
                         "--training.seq_len 4096\n")
    assert detect_kind(p) == "torchtitan-launch"
    plan = load_recipe(p)
    assert (plan.model.num_layers, plan.model.hidden_size, plan.model.seq_length) == (32, 4096, 4096)
    assert (plan.parallel.tp, plan.world_size, plan.cluster.gpus_per_node) == (2, 4, 4)


def test_defaults_and_assignments_above_the_call(tmp_path):
    # NGPU from an export above the call; MODULE/CONFIG default to run_train.sh's llama3 / llama3_debugmodel
    p = _write(tmp_path, "#!/bin/bash\nexport NGPU=2\n# ./run_train.sh in a comment is not the call\n"
                         "bash ./run_train.sh --training.local_batch_size 4 | tee log.txt\n")
    plan = load_recipe(p)
    assert plan.model.name.startswith("llama3") and plan.model.num_layers == 6  # llama3 debugmodel flavor
    assert plan.world_size == 2 and plan.training.micro_batch_size == 4


def test_tuned_value_is_written_where_the_call_states_it(tmp_path):
    text = "MODULE=llama3 CONFIG=llama3_8b ./run_train.sh\n"
    p = _write(tmp_path, text)
    plan = load_recipe(p)
    assert render_recipe(plan, text) == text
    new = plan.with_changes(parallel={"tp": 2}).model_copy(update={"source": plan.source})
    out = render_recipe(new, text)
    assert out.startswith("MODULE=llama3 CONFIG=llama3_8b ./run_train.sh ") and "tensor_parallel_degree" in out
    back = load_recipe(_write(tmp_path, out, "run.tuned.sh"))
    assert back.parallel.tp == 2


def test_config_file_call_is_a_job_toml(tmp_path):
    (tmp_path / "job.toml").write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 2\n'
                                       'seq_len = 2048\n[parallelism]\ntensor_parallel_degree = 2\n')
    p = _write(tmp_path, 'CONFIG_FILE="./job.toml" NGPU=8 ./run_train.sh --training.steps 10\n')
    assert detect_kind(p) == "torchtitan-config-script"
    plan = load_recipe(p)
    assert (plan.model.num_layers, plan.model.seq_length, plan.parallel.tp, plan.world_size) == (32, 2048, 2, 8)
    assert plan.training.micro_batch_size == 2


def test_override_imports_are_reported_not_modelled(tmp_path):
    # deepseek_v3/README.md's performance option; the 0.3.0 registry's *_minimal_async_ep configs set
    # fused_swiglu themselves (config_registry.enable_fused_swiglu)
    p = _write(tmp_path, "MODULE=deepseek_v3 CONFIG=deepseek_v3_16b NGPU=8 ./run_train.sh \\\n"
                         "  --override.imports torchtitan.overrides.fused_mla.fused_mla\n")
    rep = {u.flag: u.value for u in load_recipe(p).source.unmodelled}
    assert rep["--override.imports"] == "torchtitan.overrides.fused_mla.fused_mla"
    q = _write(tmp_path, "torchrun --nproc_per_node=1 -m torchtitan.train --module deepseek_v3 "
                         "--config deepseek_v3_16b_minimal_async_ep\n", "b.sh")
    rep = {u.flag: u.value for u in load_recipe(q).source.unmodelled}
    assert "fused_swiglu.fused_grouped_experts" in rep["--override.imports"]


def test_multinode_slurm_script(tmp_path):
    # torchtitan's multinode_trainer.slurm: #SBATCH header, srun running torchrun on each node
    text = ("#!/bin/bash\n#SBATCH --job-name=torchtitan_multi_node\n#SBATCH --ntasks=4\n#SBATCH --nodes=4\n"
            "#SBATCH --gpus-per-task=8\n\nnodes=( $( scontrol show hostnames $SLURM_JOB_NODELIST ) )\n"
            'head_node_ip=$(srun --nodes=1 --ntasks=1 -w "$head_node" hostname --ip-address)\n'
            'MODULE=${MODULE:-"llama3"}\nCONFIG=${CONFIG:-"llama3_8b"}\n'
            "srun torchrun --nnodes 4 --nproc_per_node 8 --rdzv_id 101 --rdzv_backend c10d "
            '--rdzv_endpoint "$head_node_ip:29500" -m torchtitan.train --module ${MODULE} --config ${CONFIG} "$@"\n')
    p = _write(tmp_path, text, "multinode_trainer.slurm")
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.model.num_layers) == (4, 8, 32)
    assert render_recipe(plan, text) == text
    # one srun task per GPU, the counts inherited from the allocation; torchrun's --nnodes from SLURM_NNODES
    q = _write(tmp_path, "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=8\n"
                         "srun python -m torchtitan.train --module llama3 --config llama3_8b\n", "b.sh")
    assert (load_recipe(q).cluster.num_nodes, load_recipe(q).cluster.gpus_per_node) == (2, 8)
    r = _write(tmp_path, "#!/bin/bash\n#SBATCH --nodes=2\ntorchrun --nnodes $SLURM_NNODES --nproc_per_node 8 "
                         "-m torchtitan.train --module llama3 --config llama3_8b\n", "c.sh")
    assert load_recipe(r).world_size == 16


def test_comm_mode_check_is_projected_as_the_run_it_checks(tmp_path):
    # torchtitan docs/debugging.md: NGPU=128 COMM_MODE="fake_backend" MODULE=llama3 CONFIG=llama3_70b ./run_train.sh
    p = _write(tmp_path, 'NGPU=128 COMM_MODE="fake_backend" MODULE=llama3 CONFIG=llama3_70b ./run_train.sh\n')
    plan = load_recipe(p)
    assert (plan.cluster.num_nodes, plan.cluster.gpus_per_node, plan.model.num_layers) == (16, 8, 80)
    assert any(n.startswith("COMM_MODE=fake_backend") for n in plan.source.notes)
