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


# ------------------------------------------------------------------ item 2: one definition of "scored"
def _tune_json(recipe: Path, tmp_path: Path) -> tuple[dict, str]:
    import json

    rc, out, err, _ = run_cli(["--tune", str(recipe), "--dry-run", "--json", "--out", str(tmp_path / ("t" + recipe.name))],
                              ROOT)
    assert rc == 0, err
    d = json.loads(out)
    rc, text, err, _ = run_cli(["--tune", str(recipe), "--dry-run", "--out", str(tmp_path / ("u" + recipe.name))], ROOT)
    assert rc == 0, err
    return d, text


def test_scored_is_one_count_in_the_json_the_certificate_and_the_text(tmp_path):
    import re

    for recipe in (TINY, ROOT / "recipes" / "llama3.1_8b_mi300x.primus.toml"):
        d, text = _tune_json(recipe, tmp_path)
        c = d["certificate"]
        st = d["trials"]["columns"]["status"]  # one trial per plan looked at (columns: levels and codes)
        n_trials = sum(1 for code in st["codes"] if st["levels"][code] == "scored")
        assert d["scored"] == c["scored"] == n_trials >= 2, recipe
        m = re.search(r"\((\d+) scored", " ".join(text.split()))
        assert m and int(m.group(1)) == d["scored"], text
        assert c["certified"] and d["legal_exact"] is True
        outside = "outside the space" in c["text"]
        assert c["plans"] + outside == c["scored"] + c["bounded_time"] + c["bounded_memory"] + c["open"]
        top_rows = re.findall(r"^\s+\d+\s+\d", text, re.M)
        assert len(top_rows) <= d["scored"]  # never more rows than plans scored (was: "1 scored" over 2 rows)


# ------------------------------------------------------------------ item 5: long knob names wrap at separators
def test_long_knob_names_break_at_their_separators_not_mid_word():
    from primus_launch.report.tune_text import _pack

    text = "#1 with account_for_embedding_in_pipeline_split=True, account_for_loss_in_pipeline_split=True"
    for room in (24, 30, 36):
        lines = _pack(text, room).split("\n")
        assert all(len(ln) <= room for ln in lines), lines
        # every break falls after a separator (or between settings): no word of the names is cut
        assert all(ln.endswith((",", "_", "=", "with")) for ln in lines[:-1]), lines
        assert "".join(ln + ("" if ln.endswith(("_", "=")) else " ") for ln in lines).strip() == text
    assert _pack(text, 30).split("\n")[1] == "account_for_embedding_in_"  # was "account_for_embedding_in_pipel"


# ------------------------------------------------------------------ item 4: plans that are the same run collapse
def test_dp_sharding_variants_at_dp1_are_one_row(tmp_path):
    import json

    from primus_launch.plan import Cluster, ModelArch, Parallelism, Plan, Source, Training
    from primus_launch.projection.dryrun import project_dry_run
    from primus_launch.tuner.search import tune

    m = ModelArch(name="toy", num_layers=8, hidden_size=1024, ffn_hidden_size=4096, num_attention_heads=8,
                  num_query_groups=8, vocab_size=32000, seq_length=2048)
    plan = Plan(model=m, parallel=Parallelism(dp_sharding="none"), training=Training(global_batch_size=8,
                micro_batch_size=1), cluster=Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=1),
                source=Source(framework="megatron"))
    # the knob is inert at DP 1 by the projection itself: the distributed optimizer over one rank
    a = project_dry_run(plan)
    b = project_dry_run(plan.with_changes(parallel={"dp_sharding": "optimizer"},
                                          training={"overlap_grad_reduce": True, "overlap_param_gather": True}))
    assert (a.iteration_time_s, a.memory.peak_bytes_per_gpu) == (b.iteration_time_s, b.memory.peak_bytes_per_gpu)
    res = tune(plan, top_n=10)
    for i, t in enumerate(res.top):
        for u in res.top[:i]:
            diff = {k for k in set(t.changes) | set(u.changes) if t.changes.get(k) != u.changes.get(k)}
            assert not ((t.iteration_time_s, t.peak_memory_bytes) == (u.iteration_time_s, u.peak_memory_bytes)
                        and diff <= {"parallel.dp_sharding", "training.overlap_grad_reduce",
                                     "training.overlap_param_gather"}), (t.changes, u.changes)
    # the answer keeps the recipe's own (inert) sharding: no --use-distributed-optimizer for nothing
    assert res.best_plan.parallel.dp_sharding == "none"
    # every scored plan that fits is a row or one of the same runs left out (here: some were)
    assert res.same_runs >= 1 and res.same_runs + len(res.top) == sum(1 for t in res.trials
                                                                     if t.status == "scored" and t.fits)


# ------------------------------------------------------------------ item 3: no unmodelled flag added by a tune
def test_megatron_fsdp_is_searched_with_its_flag_modelled(tmp_path):
    """Megatron-FSDP is written with --no-gradient-accumulation-fusion (its 0.16 user guide), which the plan now
    models (training.gradient_accumulation_fusion, cost/wgrad_accumulation.py): a re-read reports nothing
    unmodelled for it, so the tuner searches Megatron-FSDP for a recipe that runs with the fusion too."""
    from primus_launch.adapters import write_recipe
    from primus_launch.tuner import rules
    from primus_launch.tuner.space import SpaceConfig

    flag = "--no-gradient-accumulation-fusion"
    plan = load_recipe(ROOT / "recipes" / "megatron" / "llama3.1_70b.sh")
    assert plan.training.gradient_accumulation_fusion
    fsdp = plan.with_changes(parallel={"pp": 1, "vpp": 1, "dp_sharding": "optimizer_grads"},
                             training={"gradient_accumulation_fusion": False})  # as tuner/knobs.py apply_knobs
    back = load_recipe(write_recipe(fsdp, tmp_path / "fsdp.sh"))
    assert back.parallel.dp_sharding == "optimizer_grads" and not back.training.gradient_accumulation_fusion
    assert not any(u.flag == flag for u in back.source.unmodelled)
    assert "megatron_fsdp" in rules.knobs_for(plan)
    sp = Space(plan, SpaceConfig(max_mbs=1, max_cp=1, max_vpp=1, allow=frozenset({"fp8"})))
    assert {"optimizer_grads", "full"} <= {h[8] for h in sp.structs}


def test_packed_changes_keep_their_comma_within_the_room():
    """user12: the 70B wrapper's tune printed its table at 81 columns: "#1 with granularity=selective" filled the
    29-column room and the comma before the next setting went on after it.  Each setting is packed with its comma."""
    from primus_launch.report.tune_text import _pack

    text = "#1 with granularity=selective, modules=layernorm"
    for room in range(22, 50):
        lines = _pack(text, room).split("\n")
        assert all(len(ln) <= room for ln in lines), (room, lines)
        assert " ".join(lines) == text
