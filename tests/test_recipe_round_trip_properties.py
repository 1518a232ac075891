"""Round trips of the tuned-recipe writers, over generated candidates of every bundled recipe format
(Megatron-LM bash and argument YAML, Primus experiment YAML, TorchTitan TOML and launch script, the
primus-launch wrapper TOML): a tuner candidate (``Space(plan)[i]``, ``apply_knobs`` + ``validated``) written
with ``write_recipe`` and read back with ``load_recipe`` gives back the candidate's parallel and training
sections, the recipe's model and cluster; the written file differs from the original only in lines of the
changed values (at most two lines a changed plan field, an edited line and an added one, plus a stated
header); the original is untouched.  And the tuner's reported best projection is a fresh projection of the
recipe it writes.  ``tests/test_tuner_space.py`` checks each knob family on chosen values; this draws whole
candidates at random."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plan_draws import RECIPES, ROOT, recipe

from primus_launch.adapters import load_recipe, native_path, write_recipe
from primus_launch.plan import Plan
from primus_launch.projection.dryrun import project_dry_run
from primus_launch.tuner.engine import plan_changes
from primus_launch.tuner.space import apply_knobs, validated

def _section(plan: Plan, name: str) -> dict:
    d = getattr(plan, name).model_dump()
    if name == "parallel":   # expert TP None reads as "the same as TP"
        d["etp"] = plan.parallel.expert_tp
    return d


def write_under(folder: Path, tuned: Plan) -> Path:
    """``tuned`` written as its native recipe under ``folder``, in the same sub-folders as the original (a reader
    takes cues from them: the MI355X/ of a Primus experiment's path)."""
    original = native_path(tuned)
    out = folder / original.relative_to(ROOT).with_suffix(".tuned" + original.suffix)
    out.parent.mkdir(parents=True, exist_ok=True)
    return write_recipe(tuned, out)


def _diff(old: str, new: str) -> list[str]:
    return [ln for ln in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(data=st.data())
def test_a_written_candidate_reads_back_as_itself(tmp_path_factory, data):
    path = data.draw(st.sampled_from(RECIPES), label="recipe")
    plan, sp = recipe(path)
    tuned = validated(apply_knobs(plan, sp[data.draw(st.integers(0, len(sp) - 1), label="candidate")]))
    original = native_path(plan)
    before = original.read_text()
    out = write_under(tmp_path_factory.mktemp("rt"), tuned)
    assert original.read_text() == before
    # a wrapper TOML's cluster is the wrapper's, not the native recipe's: read back on it, as the wrapper does
    c = plan.cluster
    back = load_recipe(out, cluster_overrides=dict(gpu=c.gpu, num_nodes=c.num_nodes, gpus_per_node=c.gpus_per_node)
                       if path.endswith(".primus.toml") else None)
    diff = plan_changes(tuned, back)
    if tuned.framework == "torchtitan" and tuned.dp // tuned.parallel.dp_replicate == 1 and tuned.parallel.cp == 1:
        # FSDP over a shard group of one is no FSDP (torchtitan ParallelDims.fsdp_enabled: dp_shard > 1 or cp > 1):
        # the reader says DDP; the same run, projected the same
        if set(diff) <= {"parallel.dp_sharding", "training.overlap_param_gather"}:
            a, b = project_dry_run(tuned), project_dry_run(back)
            assert (a.iteration_time_s, a.memory.peak_bytes_per_gpu) == (b.iteration_time_s,
                                                                         b.memory.peak_bytes_per_gpu)
            back = back.model_copy(update={"parallel": back.parallel.model_copy(
                update={"dp_sharding": tuned.parallel.dp_sharding}), "training": back.training.model_copy(
                update={"overlap_param_gather": tuned.training.overlap_param_gather})})
    for name in ("parallel", "training"):
        assert _section(back, name) == _section(tuned, name), (path, name, diff)
    assert back.model.model_dump(exclude={"name"}) == plan.model.model_dump(exclude={"name"})
    assert back.cluster == plan.cluster
    changes = plan_changes(plan, tuned)
    lines = _diff(before, out.read_text())
    assert bool(lines) == bool(changes) or not changes, (path, changes, lines)
    assert len(lines) <= 2 * len(changes) + 2, (path, changes, lines)


@pytest.mark.parametrize("path", ["recipes/megatron/tiny_gpt_cpu.sh", "recipes/torchtitan/llama3.1_8b.toml",
                                  "recipes/primus/MI355X/llama3.1_8b.yaml", "recipes/llama3.1_8b_mi300x.primus.toml"])
def test_the_tuner_s_best_is_a_fresh_projection_of_its_written_recipe(tmp_path, path):
    from primus_launch.tuner.search import tune
    from primus_launch.tuner.space import SpaceConfig

    plan = load_recipe(ROOT / path)
    res = tune(plan, space=SpaceConfig(), echo_warnings=False)
    assert plan_changes(plan, res.best_plan)   # something tuned: the written recipe is not the original
    out = write_under(tmp_path, res.best_plan)
    c = plan.cluster
    fresh = project_dry_run(load_recipe(out, cluster_overrides=dict(
        gpu=c.gpu, num_nodes=c.num_nodes, gpus_per_node=c.gpus_per_node) if path.endswith(".primus.toml") else None))
    assert fresh.iteration_time_s == pytest.approx(res.best.iteration_time_s, rel=1e-12)
    assert fresh.memory.peak_bytes_per_gpu == res.best.memory.peak_bytes_per_gpu
    assert fresh.memory.verdict == res.best.memory.verdict
    assert fresh.time_breakdown == pytest.approx(res.best.time_breakdown, rel=1e-12)


# --------------------------------------------------------------------------- what the properties found (pinned)
def _candidate(path: str, **knobs):
    from primus_launch.tuner.space import knobs_of

    plan, sp = recipe(path)
    k = knobs_of(plan)._replace(**knobs)
    assert sp.index(k) is not None, k
    return plan, validated(apply_knobs(plan, k))


@pytest.mark.parametrize("path,compile_on,loss", [
    ("recipes/llama3.1_8b_mi300x.primus.toml", False, False),   # model + loss compiled -> off: nothing compiled
    ("recipes/torchtitan/llama3.1_8b.toml", False, False),
    ("recipes/torchtitan/deepseek_v3_671b.toml", True, True),   # components = ["loss"] -> model too: both
])
def test_a_compile_candidate_compiles_the_loss_as_its_written_recipe_does(tmp_path, path, compile_on, loss):
    """A TorchTitan candidate that turned compile off kept the recipe's compiled loss (training.compile_loss), which
    the writer's ``compile.enable = false`` does not compile: the tuner priced a loss the written run does not have
    (the loss's kept logits, memory/titan.py) and the recipe read back differently."""
    plan, tuned = _candidate(path, compile=compile_on)
    assert (tuned.training.compile, tuned.training.compile_loss) == (compile_on, loss)
    back = load_recipe(write_under(tmp_path, tuned), cluster_overrides=dict(
        gpu=plan.cluster.gpu, num_nodes=plan.cluster.num_nodes, gpus_per_node=plan.cluster.gpus_per_node)
        if path.endswith(".primus.toml") else None)
    assert (back.training.compile, back.training.compile_loss) == (compile_on, loss)
    assert project_dry_run(back).memory.peak_bytes_per_gpu == project_dry_run(tuned).memory.peak_bytes_per_gpu


def test_torchtitan_experts_take_tp_without_ep():
    """torchtitan's MoE sharding (models/common/moe_sharding.py ``set_moe_sharding_config``: the routed experts'
    dense ``{TP}`` layout on the EP-disabled + TP-enabled path; the reader: expert TP = tp without EP): a candidate
    with EP 1 and expert TP 1 under TP 4 is not one torchtitan runs.  The space offered it (Qwen3-235B, 128 GPUs,
    projected 70.8 s; its written recipe, read back with the experts over TP, 40.8 s)."""
    from primus_launch.plan.legality import torchtitan_problems

    plan, sp = recipe("recipes/torchtitan/qwen3_235b_a22b.toml")
    bad = plan.model_copy(update={"parallel": plan.parallel.model_copy(update=dict(tp=4, ep=1, etp=1))})
    assert [f for f, _, _ in torchtitan_problems(bad)] == ["parallel.etp"]
    ok = plan.model_copy(update={"parallel": plan.parallel.model_copy(update=dict(tp=4, ep=1, etp=None))})
    assert not [f for f, _, _ in torchtitan_problems(ok) if f == "parallel.etp"]
    heads = sp.structs
    assert any(h[4] == 1 for h in heads) and any(h[5] == 1 for h in heads)
    assert not any(h[4] == 1 and h[5] is not None and h[5] != h[0] for h in heads)


def test_torchtitan_pipeline_candidates_run_without_cuda_graphs():
    """torchtitan 0.3 captures its whole-step CUDA graph only without PP (the reader refuses it with PP, the writer
    sets ``training.disable_cuda_graphs``): a pipelined candidate of a recipe that captures says it runs without."""
    from primus_launch.tuner.space import N_STRUCT, AXES

    plan, sp = recipe("recipes/torchtitan/llama3_8b_launch.sh")
    assert plan.training.cuda_graph_impl == "local"
    cg = AXES.index("cuda_graph_impl") - N_STRUCT
    seen = set()
    for s, head in enumerate(sp.structs):
        for f in sp.flag_table(s):
            seen.add((head[1] > 1, f[cg]))
    assert (False, "local") in seen and (True, "none") in seen and (True, "local") not in seen


def test_torchtitan_ep_candidates_of_a_standard_dispatcher_run_without_cuda_graphs(tmp_path):
    """torchtitan 0.3.0 ``trainer.py`` refuses its whole-step CUDA graph with EP > 1 unless the token dispatcher has no
    CPU sync (MinimalAsyncEP, HybridEP with a non-blocking capacity factor); the writer then sets
    ``training.disable_cuda_graphs``.  A Qwen3-30B-A3B launch that captures at EP 1 (the standard dispatcher): every
    EP > 1 candidate is priced without the graph it cannot keep, and its written recipe reads back so."""
    from primus_launch.tuner.space import AXES, N_STRUCT, Space

    src = tmp_path / "qwen3_moe_launch.sh"
    src.write_text("#!/usr/bin/bash\n# TorchTitan 0.3 launch of Qwen3-30B-A3B on one node of 8 H100\n"
                   "torchrun --nproc_per_node=8 -m torchtitan.train --module qwen3 --config qwen3_30b_a3b "
                   "--parallelism.expert_parallel_degree 1 --training.local_batch_size 1 --compile.enable\n")
    plan = load_recipe(src)
    assert plan.model.is_moe and plan.parallel.ep == 1 and plan.training.cuda_graph_impl == "local"
    sp = Space(plan)
    cg = AXES.index("cuda_graph_impl") - N_STRUCT
    ep_at = AXES.index("ep")
    seen = {(head[ep_at] > 1, f[cg]) for s, head in enumerate(sp.structs) for f in sp.flag_table(s)}
    assert (False, "local") in seen and (True, "none") in seen and (True, "local") not in seen
    i = next(i for i in range(len(sp)) if sp[i][ep_at] > 1)
    tuned = validated(apply_knobs(plan, sp[i]))
    assert tuned.parallel.ep > 1 and tuned.training.cuda_graph_impl == "none"
    back = load_recipe(write_recipe(tuned, tmp_path / "qwen3_moe_launch.tuned.sh"))
    assert back.parallel.ep == tuned.parallel.ep and back.training.cuda_graph_impl == "none"
