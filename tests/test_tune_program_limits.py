"""A tuned recipe asks nothing of its training program that the program cannot run (tune11 item 1).

The bundled ``recipes/megatron/tiny_gpt_cpu.sh`` runs ``primus_launch/examples/tiny_mcore_train.py`` on the CPU
(gloo): its argparse has no ``--cuda-graph-impl`` and no ``--account-for-*`` flags, and a CPU cannot capture CUDA
graphs.  Before the fix the tuner wrote ``--cuda-graph-impl transformer_engine`` into the tuned recipe and the
launch exited 1 (argparse: unrecognized arguments).  The independent check here is the program's own parser
(``build_parser().parse_args``) on the tuned command line.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from cli_run import run_cli
from primus_launch.adapters import load_recipe
from primus_launch.adapters.program_limits import program_fixed
from primus_launch.examples import tiny_mcore_train
from primus_launch.tuner.knobs import program_problems
from primus_launch.tuner.space import Space

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "recipes" / "megatron" / "tiny_gpt_cpu.sh"


def _program_argv(text: str) -> list[str]:
    toks = shlex.split(text.replace("\\\n", " "), comments=True)
    i = toks.index("primus_launch.examples.tiny_mcore_train")
    return toks[i + 1:]


def test_the_tuned_tiny_recipe_parses_with_its_programs_own_parser(tmp_path):
    out = tmp_path / "t.sh"
    rc, _, err, _ = run_cli(["--tune", str(TINY), "--dry-run", "--out", str(out)], ROOT)
    assert rc == 0, err
    argv = _program_argv(out.read_text())
    args = tiny_mcore_train.build_parser().parse_args(argv)  # exits 2 on an unknown flag
    assert args.micro_batch_size >= 1
    assert "cuda-graph" not in out.read_text() and "account-for" not in out.read_text()


def test_fixed_fields_come_from_the_parser_and_the_device():
    fixed = set(load_recipe(TINY).source.fixed)
    dests = {a.dest for a in tiny_mcore_train.build_parser()._actions}
    assert "cuda_graph_impl" not in dests and "training.cuda_graph_impl" in fixed
    assert "account_for_embedding_in_pipeline_split" not in dests
    assert "parallel.account_for_embedding_in_pipeline_split" in fixed
    # flags the parser has stay searchable
    assert {"tensor_model_parallel_size", "micro_batch_size", "use_distributed_optimizer"} <= dests
    assert not fixed & {"parallel.tp", "parallel.pp", "training.micro_batch_size", "parallel.dp_sharding"}
    assert "parallel.dp_sharding=full" in fixed  # Megatron-FSDP's flags are not in the parser
    # Megatron-LM's entry point and a user's program (not imported) have no limits
    assert program_fixed("pretrain_gpt.py") == [] and program_fixed("my/train.py") == []
    assert program_fixed("/x/primus_launch/examples/tiny_mcore_train.py") == program_fixed(
        "primus_launch.examples.tiny_mcore_train")


def test_no_candidate_of_the_space_breaks_the_programs_limits():
    plan = load_recipe(TINY)
    space = list(Space(plan))
    assert space and all(not program_problems(plan, k) for k in space)
    assert {k.cuda_graph_impl for k in space} == {"none"}
    assert {k.acc_embedding for k in space} == {False} and {k.vpp for k in space} == {1}
    assert len({k.mbs for k in space}) > 1 and len({k.pp for k in space}) > 1  # still a search


# ------------------------------------------------------------------ item 6: one GPU-name normaliser
def test_gpu_spellings_are_accepted_everywhere_and_others_refused_with_the_names(tmp_path):
    from primus_launch.plan import Cluster, GPU_NAMES
    from primus_launch.projection.hardware.gpus import get_gpu

    assert Cluster(gpu="H100").gpu == "h100-sxm" and Cluster(gpu="MI355X").gpu == "mi355x"
    assert get_gpu("H100") is get_gpu("h100-sxm") and get_gpu("A100").name == get_gpu("a100-sxm-80gb").name
    # the CLI's --gpu and a recipe's header comment take the same spellings
    rc, out, err, _ = run_cli(["--project", str(TINY), "--dry-run", "--gpu", "H100"], ROOT)
    assert rc == 0 and "h100-sxm" in out, err
    head = tmp_path / "h.sh"
    head.write_text(TINY.read_text().replace("gpu=h100-sxm", "gpu=H100"))
    assert load_recipe(head).cluster.gpu == "h100-sxm"
    rc, _, err, _ = run_cli(["--project", str(TINY), "--dry-run", "--gpu", "V100"], ROOT)
    assert rc != 0 and "V100" in err and all(g in err for g in GPU_NAMES) and "Traceback" not in err
