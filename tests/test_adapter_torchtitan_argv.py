"""TorchTitan 0.3 launch lines (``-m torchtitan.train --module M --config C --section.key value``).

Truth: torchtitan's own ``ConfigManager`` parsing the same command line (config registry + tyro), and
round trips (render -> re-read gives the tuned plan; only the tuned tokens change; the rendered line
parses in torchtitan).
"""

from __future__ import annotations

import logging

import pytest

from primus_launch.adapters.titan_snapshot import _ConverterRecorder, config_entry_of, model_arch_fields
from primus_launch.adapters.torchtitan_argv import job_of, launch_job, parse_launch, plan_from_launch, render_launch
from primus_launch.adapters.command_recipe import framework_of, plan_from_command, render_command
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

TORCHRUN = ["torchrun", "--nnodes", "2", "--nproc-per-node", "8", "-m", "torchtitan.train"]
LINES = {
    "llama3-tp-full": ["--module", "llama3", "--config", "llama3_8b", "--parallelism.tensor_parallel_degree", "8",
                       "--training.local-batch-size=2", "--compile.enable", "activation-checkpoint:full"],
    "qwen3-moe-pp": ["--module", "qwen3", "--config", "qwen3_30b_a3b", "--parallelism.expert_parallel_degree", "8",
                     "--training.disable_cuda_graphs", "--parallelism.pipeline_parallel_degree", "2",
                     "--parallelism.pipeline_parallel_schedule", "Interleaved1F1B", "--training.global_batch_size",
                     "64", "activation-checkpoint:none"],
    "dsv3-hsdp-budget": ["--module", "deepseek_v3", "--config", "deepseek_v3_16b",
                         "--parallelism.data_parallel_shard_degree", "4", "--parallelism.data_parallel_replicate_degree",
                         "2", "--compile.enable", "--compile.enable_async_tensor_parallel", "--compile.components", "model,loss",
                         "--parallelism.tensor_parallel_degree", "2", "--training.disable-cuda-graphs",
                         "--parallelism.expert_parallel_degree", "8",
                         "--parallelism.fsdp_reshard_after_forward", "never", "activation-checkpoint:memory-budget",
                         "--activation_checkpoint.memory_budget", "0.3"],
    "gpt-oss-cp": ["--module", "gpt_oss", "--config", "gpt_oss_20b", "--compile.no-enable", "--training.seq_len",
                   "4096", "--parallelism.context_parallel_degree", "2", "--debug.moe_force_load_balance",
                   "--parallelism.pipeline_parallel_layers_per_stage", "None", "--training.disable_cuda_graphs",
                   "--parallelism.expert_parallel_degree", "4"],
}


def _live_job(args: list[str]) -> dict:
    """The job of torchtitan's own ConfigManager parse of ``args``."""
    from torchtitan.config.manager import ConfigManager

    logging.getLogger("torchtitan").setLevel(logging.ERROR)
    with _ConverterRecorder() as rec:
        cfg = ConfigManager().parse_args(list(args))
    spec = cfg.model_spec
    return job_of(config_entry_of(cfg, list(rec.seen), model_arch_fields(spec.name, spec.flavor)))


@pytest.mark.parametrize("name", list(LINES))
def test_overrides_read_as_torchtitan_reads_them(name):
    args = LINES[name]
    mine, _ = launch_job(parse_launch([*TORCHRUN, *args]))
    assert mine == _live_job(args)


def test_plan_field_by_field():
    plan = plan_from_command([*TORCHRUN, *LINES["dsv3-hsdp-budget"]])
    p, t, m, c = plan.parallel, plan.training, plan.model, plan.cluster
    assert (c.num_nodes, c.gpus_per_node, c.gpu) == (2, 8, "h100-sxm")
    assert m.name == "deepseek_v3-16B" and m.multi_latent_attention and m.seq_length == 4096
    assert (p.tp, p.pp, p.cp, p.ep, p.expert_tp, plan.dp) == (2, 1, 1, 8, 1, 8)
    assert (p.dp_sharding, p.dp_replicate, p.fsdp_reshard_after_forward, p.sequence_parallel) == ("full", 2, "never", True)
    assert (t.compile, t.tp_comm_overlap, t.recompute.granularity, t.cuda_graph_impl) == (True, True, "op", "none")
    assert (t.micro_batch_size, t.global_batch_size) == (4, 32)  # the config function's local batch 4 x dp 8
    # the config function builds ChunkedLossWrapper: its default 8 sequence chunks (memory.titan.stage_walk); its
    # time is reported as not modelled
    assert [w.flag for w in plan.source.unmodelled] == ["activation_checkpoint.mode", "loss"]
    assert plan.source.unmodelled[1].effect.startswith("time:") and t.loss_chunks == 8
    assert plan.source.format == "torchtitan-argv"
    g = plan_from_command([*TORCHRUN, *LINES["gpt-oss-cp"]])
    assert (g.parallel.cp, g.parallel.cp_comm_type, g.training.compile, g.model.seq_length) == (2, "allgather", False, 4096)
    assert g.training.moe_router_force_load_balancing and g.model.softmax_type == "learnable"
    # CUDA graphs of the whole step are torchtitan 0.3's default
    dflt = plan_from_command([*TORCHRUN, "--module", "llama3", "--config", "llama3_8b"])
    assert (dflt.training.cuda_graph_impl, dflt.training.cuda_graph_scope) == ("local", ("full_iteration",))
    assert dflt.training.recompute.granularity == "op" and framework_of([*TORCHRUN, *LINES["gpt-oss-cp"]]) == \
        "torchtitan-launch"


@pytest.mark.parametrize("args,field", [
    (["--module", "nope", "--config", "x"], "--module='nope'"),
    (["--module", "llama3", "--config", "llama3_9b"], "--config='llama3_9b'"),
    (["--module", "llama3", "--config", "llama3_8b", "--parallelism.tensor_parallel_degree", "x"],
     "--parallelism.tensor_parallel_degree='x'"),
    (["--module", "llama3", "--config", "llama3_8b", "--parallelism.pipeline_parallel_degree", "2"],
     "training.disable_cuda_graphs=False"),
    (["--module", "llama3", "--config", "llama3_8b", "activation-checkpoint:none", "--training.steps", "3"],
     "after the activation-checkpoint:none subcommand"),
    (["--module", "flux", "--config", "flux_debugmodel"], "model.name='flux'"),
    (["--module", "llama3"], "--config"),
])
def test_errors_are_one_line(args, field):
    with pytest.raises((UserError, PlanError)) as ei:
        plan_from_command([*TORCHRUN, *args])
    assert field in str(ei.value) and "\n" not in str(ei.value), str(ei.value)


def _changed(a: list[str], b: list[str]) -> set[str]:
    return set(b) - set(a)


@pytest.mark.parametrize("name", ["llama3-tp-full", "qwen3-moe-pp"])
def test_render_round_trip_touches_only_tuned_tokens(name):
    argv = [*TORCHRUN, *LINES[name]]
    plan = plan_from_command(argv)
    assert render_command(plan, argv) == argv  # unchanged plan: identical line
    p = plan.parallel
    if name == "llama3-tp-full":
        tuned = plan.with_changes(parallel={"tp": 4}, training={
            "recompute": {"granularity": "op", "method": "uniform", "num_layers": None}, "micro_batch_size": 1,
            "global_batch_size": 4})
        want_new = {"4", "--training.local-batch-size=1", "activation-checkpoint:selective"}
    else:
        tuned = plan.with_changes(parallel={"pp": 1, "vpp": 1, "pipeline_layout": None,
                                            "account_for_embedding_in_pipeline_split": False,
                                            "account_for_loss_in_pipeline_split": False, "ep": 16},
                                  training={"pipeline_schedule": "1f1b", "micro_batch_size": 4,
                                            "global_batch_size": 64})
        want_new = {"1", "1F1B", "16", "4", "--training.local_batch_size"}
    out = render_command(tuned, argv)
    assert _changed(argv, out) <= want_new | {"--parallelism.pipeline_parallel_microbatch_size"}, _changed(argv, out)
    back = plan_from_command(out)
    assert back.parallel == tuned.parallel and back.training == tuned.training and back.model == tuned.model
    # the rendered line is one torchtitan parses, to the same job
    mine, _ = launch_job(parse_launch(out))
    assert mine == _live_job(out[len(TORCHRUN):])
    del p


def test_pp_needs_cuda_graphs_off_and_cluster_follows():
    # global batch 32: at PP 2 over 32 GPUs (DP 16) two micro-batches, which torch's Schedule1F1B needs (>= stages)
    argv = [*TORCHRUN, "--module", "llama3", "--config", "llama3_8b", "--training.global_batch_size", "32"]
    plan = plan_from_command(argv)
    from primus_launch.plan.torchtitan_split import plan_placement, stage_layers

    tuned = plan.with_changes(parallel={"pp": 2, **plan_placement(32, 2, "1F1B", stage_layers(32, 2, "1F1B", None, 1, 1))},
                              training={"cuda_graph_impl": "none", "cuda_graph_scope": ()},
                              cluster={"num_nodes": 4})
    out = render_launch(tuned, argv)
    assert "--training.disable_cuda_graphs" in out and out[out.index("--nnodes") + 1] == "4"
    back = plan_from_launch(out, Cluster(gpu="h100-sxm", num_nodes=4, gpus_per_node=8))
    assert back.parallel == tuned.parallel and back.layers_per_stage() == [16, 16]


def test_ddp_and_pure_tp_launch_lines_project():
    from primus_launch.projection.api import project

    base = [*TORCHRUN, "--module", "llama3", "--config", "llama3_8b"]
    ddp = plan_from_command([*base, "--parallelism.data_parallel_shard_degree", "1",
                             "--parallelism.data_parallel_replicate_degree", "16"])
    assert (ddp.parallel.dp_sharding, ddp.dp, ddp.training.overlap_param_gather) == ("none", 16, False)
    tp = plan_from_command(["torchrun", "--nnodes", "1", *TORCHRUN[3:], "--module", "llama3", "--config", "llama3_8b",
                            "--parallelism.tensor_parallel_degree", "8"])
    assert (tp.parallel.tp, tp.dp, tp.parallel.dp_sharding) == (8, 1, "none")
    for plan in (ddp, tp):
        assert project(plan, dry_run=True).iteration_time_s > 0


def test_cli_contract_for_launch_lines_and_scripts(tmp_path):
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("primus-launch") or str(Path(sys.executable).with_name("primus-launch"))
    root = Path(__file__).resolve().parents[1]
    bad = subprocess.run([exe, "--project", "--dry-run", "--", *TORCHRUN, "--module", "llama3", "--config", "nope"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--config='nope'" in bad.stderr
    # a not-modelled override: one stderr line, and in the JSON warnings
    # the answers of runs that succeed: the CLI's main in this process (tests/cli_run.py; the exit status above is
    # the process's)
    from cli_run import run_cli

    rc, ok_out, ok_err, _ = run_cli(["--project", "--dry-run", "--json", "--", *TORCHRUN, "--module", "llama3",
                                     "--config", "llama3_8b", "--optimizer.implementation", "foreach"], tmp_path)
    assert rc == 0, ok_err
    assert any(w["flag"] == "--optimizer.implementation" for w in json.loads(ok_out)["warnings"])
    assert "primus-launch: warning: --optimizer.implementation=foreach: not modelled" in ok_err
    script = tmp_path / "run.sh"
    shutil.copy(root / "recipes/torchtitan/llama3_8b_launch.sh", script)
    rc, tuned_out, tuned_err, _ = run_cli(["--tune", str(script), "--dry-run", "--json", "--budget", "20"], tmp_path)
    assert rc == 0, tuned_err[-1500:]
    out = Path(json.loads(tuned_out)["tuned_recipe"])
    assert out.name == "run.tuned.sh" and out.stat().st_mode & 0o111
    from primus_launch.adapters import load_recipe

    best = json.loads(tuned_out)["best_plan"]
    back = load_recipe(out)
    assert back.parallel.model_dump() == best["parallel"]


def test_user_config_module_read_through_torchtitan_once(tmp_path, monkeypatch):
    """``--module my_cfgs --config my_8b``: the user's own config function, loaded by torchtitan's rules
    (``<module>.config_registry`` then ``<module>``) once, then from the cache."""
    import sys

    from primus_launch.adapters import titan_snapshot

    pkg = tmp_path / "my_cfgs"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "config_registry.py").write_text(
        "from torchtitan.models.llama3.config_registry import llama3_8b\n"
        "from torchtitan.distributed.activation_checkpoint import FullAC\n\n"
        "def my_8b():\n"
        "    cfg = llama3_8b()\n"
        "    cfg.training.seq_len = 4096\n"
        "    cfg.training.local_batch_size = 4\n"
        "    cfg.parallelism.tensor_parallel_degree = 2\n"
        "    cfg.activation_checkpoint = FullAC.Config()\n"
        "    return cfg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PRIMUS_LAUNCH_CACHE", str(tmp_path / "cache"))
    argv = [*TORCHRUN, "--module", "my_cfgs", "--config", "my_8b", "--training.steps", "7"]
    plan = plan_from_command(argv)
    assert (plan.model.name, plan.model.seq_length, plan.parallel.tp, plan.training.micro_batch_size) == (
        "llama3-8B", 4096, 2, 4)
    assert (plan.training.recompute.granularity, plan.training.train_iters) == ("full", 7)
    assert len(list((tmp_path / "cache").glob("titan-config-*-my_8b.json"))) == 1
    with pytest.raises(PlanError, match="--config='nope'"):
        plan_from_command([*TORCHRUN, "--module", "my_cfgs", "--config", "nope"])
    sys.modules.pop("my_cfgs.config_registry", None)
    monkeypatch.setattr(titan_snapshot, "_ConverterRecorder", None)  # a second read must not load the module
    assert plan_from_command(argv).model_dump() == plan.model_dump()


def test_03_linear_only_converter_on_moe_prices_bf16_experts():
    """torchtitan 0.3's MXFP8LinearConverter converts Linear modules only; without
    MXFP8GroupedExpertsConverter the experts' grouped GEMMs stay BF16, which the plan prices."""
    import copy

    from primus_launch.adapters.titan_snapshot import config_entry
    from primus_launch.adapters.torchtitan import plan_from_job

    job = job_of(config_entry("deepseek_v3", "deepseek_v3_debugmodel_mxfp8"))
    cl = Cluster(gpu="b200", num_nodes=1, gpus_per_node=8)
    job["training"]["disable_cuda_graphs"] = True

    def bf16_experts(j):
        plan = plan_from_job(j, cl, version="0.3")
        assert plan.training.fp8_recipe == "mxfp8"
        assert not [u for u in plan.source.unmodelled if u.flag == "model.converters" and "experts" in u.effect]
        return "experts" in plan.training.bf16_linears

    assert [c["type"] for c in job["model"]["_converters03"]] == ["MXFP8LinearConverter", "MXFP8GroupedExpertsConverter"]
    assert not bf16_experts(job)
    linear_only = copy.deepcopy(job)
    linear_only["model"]["_converters03"] = linear_only["model"]["_converters03"][:1]
    assert bf16_experts(linear_only)   # priced in BF16 (training.bf16_linears), not warned


# torchtitan 0.3.0's ConfigManager.parse_args hands the line to tyro (torchtitan/config/manager.py), which
# exits 2 on `--parallelism.tensor_paralel_degree 8`: "Unrecognized options ... Perhaps you meant
# --parallelism.tensor-parallel-degree INT" (tyro 1.0.17, run on the CPU against the installed package).
_LLAMA = ["--module", "llama3", "--config", "llama3_8b"]


@pytest.mark.parametrize("args,words", [
    (["--parallelism.tensor_paralel_degree", "8"],
     ["--parallelism.tensor_paralel_degree='8'", "did you mean --parallelism.tensor_parallel_degree?"]),
    (["--parallelism.tensor-paralel-degree=8"], ["did you mean --parallelism.tensor_parallel_degree?"]),
    (["--paralelism.tensor_parallel_degree", "8"],
     ["'paralelism' is no section", "--parallelism.tensor_parallel_degree"]),
    (["--training.local_batchsize", "2"], ["did you mean --training.local_batch_size?"]),
    (["--compile.enabel"], ["did you mean --compile.enable?"]),
    (["activation-checkpoint:full", "--activation_checkpoint.memory_budget", "0.3"],
     ["not a field of torchtitan 0.3.0's activation_checkpoint", "preserve_rng_state"]),
])
def test_override_typo_refused_as_torchtitan_refuses_it(args, words):
    with pytest.raises(PlanError) as ei:
        plan_from_command([*TORCHRUN, *_LLAMA, *args])
    msg = str(ei.value)
    assert all(w in msg for w in words) and "\n" not in msg, msg


def test_real_override_read_and_ignored_real_field_only_noted():
    plan = plan_from_command([*TORCHRUN, *_LLAMA, "--parallelism.tensor_parallel_degree", "8",
                              "--optimizer.implementation", "foreach", "--metrics.log_freq", "5"])
    assert plan.parallel.tp == 8
    flags = [u.flag for u in plan.source.unmodelled]
    assert "--optimizer.implementation" in flags


def test_user_module_may_hold_fields_of_its_own(tmp_path, monkeypatch):
    """A user's ``--module`` may return a ``Trainer.Config`` subclass with fields of its own: without its option
    table (an entry cached by an older release) its overrides are not refused (reported as not known) -- as the
    TOML check skips ``custom_config_module``; with it, they are judged by it (tests/test_titan_job_options.py)."""
    from primus_launch.adapters import torchtitan_argv
    from primus_launch.adapters.titan_snapshot import config_entry

    (tmp_path / "my_titan_cfgs").mkdir()
    (tmp_path / "my_titan_cfgs" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(torchtitan_argv, "load_user_config", lambda m, c: {
        k: v for k, v in config_entry("llama3", "llama3_8b").items() if k != "argv"})
    plan = plan_from_command([*TORCHRUN, "--module", "my_titan_cfgs", "--config", "my_8b",
                              "--parallelism.tensor_paralel_degree", "8", "--parallelism.tensor_parallel_degree", "2"])
    assert plan.parallel.tp == 2
    assert "--parallelism.tensor_paralel_degree" in [u.flag for u in plan.source.unmodelled]


def test_launch_errors_name_the_options_as_typed():
    """user15 (a TorchTitan user's launch line): ``--parallelism.tensor_parallel_degree 3`` on 8 GPUs was refused as
    ``parallelism='replicate*cp*tp*pp=3'`` and ``--training.local_batch_size 0`` as ``training.local_batch_size=0``;
    both are named as the options the command gave (torchtitan 0.3's ConfigManager spells them so)."""
    from primus_launch.adapters.torchtitan_argv import plan_from_launch
    from primus_launch.plan import Cluster, PlanError

    cl = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)
    base = ["-m", "torchtitan.train", "--module", "llama3", "--config", "llama3_8b"]
    with pytest.raises(PlanError) as ei:
        plan_from_launch(base + ["--parallelism.tensor_parallel_degree", "3"], cl)
    assert str(ei.value) == "--parallelism.tensor_parallel_degree=3: must divide the world size 8 (1 x 8 h100-sxm)"
    with pytest.raises(PlanError, match=r"^--training\.local_batch_size=0: "):
        plan_from_launch(base + ["--training.local_batch_size", "0"], cl)
