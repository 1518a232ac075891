"""user19: the tuner listed fields that change nothing about the run among its changes -- ``parallel.etp=8`` (expert
TP) on a dense Llama 3.1 70B script that states ``--expert-tensor-parallel-size 1``, and ``vpp=1`` /
``pipeline_schedule=1f1b`` beside ``pp=1`` -- and its tuned script rewrote the expert TP flag.  The space now keeps a
dense recipe's own expert TP (Megatron's expert groups only need ``etp x ep x pp`` to divide the world), and the
change lists (text, HTML) leave out the fields ``plan/inert.py`` names for the changed plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe, write_recipe
from primus_launch.plan.inert import PIPELINE_FIELDS, inert_fields
from primus_launch.projection.api import project
from primus_launch.report.tune_text import shown_changes
from primus_launch.tuner.engine import plan_changes
from primus_launch.tuner.knobs import apply_knobs, knobs_of
from primus_launch.tuner.space import Space
from primus_launch.tuner.space_config import SpaceConfig

ROOT = Path(__file__).resolve().parents[1]


def _dense_with_etp(tmp_path: Path, etp: int = 4) -> Path:
    """The bundled Llama 3.1 8B Megatron YAML (tp 2, 8 GPUs) stating an expert TP of ``etp``."""
    text = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()
    assert "  sequence_parallel: true\n" in text
    out = tmp_path / "llama3.1_8b_etp.yaml"
    out.write_text(text.replace("  sequence_parallel: true\n",
                                f"  sequence_parallel: true\n  expert_tensor_parallel_size: {etp}\n"))
    return out


def test_dense_space_keeps_the_recipes_expert_tp_and_the_written_file_its_line(tmp_path):
    path = _dense_with_etp(tmp_path)
    plan = load_recipe(path)
    assert not plan.model.is_moe and plan.parallel.etp == 4
    sp = Space(plan, SpaceConfig(max_mbs=1, max_cp=1))
    W = plan.world_size
    # megatron-core parallel_state: world % (etp * ep * pp) == 0 is all a dense run asks of expert TP
    heads = {(h[1], h[5]) for h in sp.structs}   # (pp, etp)
    assert heads and all(etp == (4 if W % (4 * pp) == 0 else None) for pp, etp in heads), heads
    k = next(sp[i] for i in range(len(sp)) if sp[i].tp == 1 and sp[i].pp == 1)
    tuned = apply_knobs(plan, k)
    assert "parallel.etp" not in plan_changes(plan, tuned)
    written = write_recipe(tuned, tmp_path / "tuned.yaml").read_text().splitlines()
    assert "  expert_tensor_parallel_size: 4" in written   # the original's line, not rewritten to the new tp


def test_dense_expert_tp_is_not_a_change_and_changes_nothing(tmp_path):
    plan = load_recipe(_dense_with_etp(tmp_path))
    tp1 = plan.with_changes(parallel={"tp": 1, "sequence_parallel": False, "etp": None})
    changes = plan_changes(plan, tp1)
    assert changes["parallel.etp"] is None            # the plan field did change ...
    # nor sequence parallelism at tp 1 (Megatron-LM validate_args sets it False there, core_v0.16.1 arguments.py)
    assert changes["parallel.sequence_parallel"] is False and shown_changes(changes, plan) == {"parallel.tp": 1}
    tp2 = plan.with_changes(parallel={"tp": 4, "sequence_parallel": False})
    assert shown_changes(plan_changes(plan, tp2), plan) == {"parallel.tp": 4, "parallel.sequence_parallel": False}
    # ... and the run did not: the same projection with the recipe's expert TP kept (no expert layer reads it)
    same = project(tp1.with_changes(parallel={"etp": 4}), dry_run=True)
    new = project(tp1, dry_run=True)
    assert same.iteration_time_s == new.iteration_time_s
    assert same.memory.peak_bytes_per_gpu == new.memory.peak_bytes_per_gpu


def test_pipeline_fields_are_not_changes_at_pp_1():
    """Megatron runs ``forward_backward_no_pipelining`` at pp 1 whatever the virtual size (megatron-core's own
    ``get_forward_backward_func``), so ``vpp`` and the schedule beside ``pp=1`` are no change; at pp 2 they are."""
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func

    assert {get_forward_backward_func(pp_size=1, vp_size=v).__name__ for v in (None, 2, 4)} == {
        "forward_backward_no_pipelining"}
    plan = load_recipe(ROOT / "recipes/megatron/llama3.1_70b.sh")
    assert plan.parallel.pp > 1 and plan.parallel.vpp > 1
    changes = {"parallel.pp": 1, "parallel.vpp": 1, "training.pipeline_schedule": "1f1b", "parallel.tp": 4}
    assert shown_changes(changes, plan) == {"parallel.pp": 1, "parallel.tp": 4}
    two = dict(changes, **{"parallel.pp": 2})
    assert shown_changes(two, plan) == two
    assert PIPELINE_FIELDS <= inert_fields(plan.with_changes(parallel={"pp": 1, "vpp": 1},
                                                             training={"pipeline_schedule": "1f1b"}))


@pytest.mark.parametrize("recipe", ["recipes/megatron/mixtral_8x22b.sh"])
def test_moe_expert_fields_stay_changes(recipe):
    plan = load_recipe(ROOT / recipe)
    assert plan.model.is_moe and "parallel.etp" not in inert_fields(plan) and "parallel.ep" not in inert_fields(plan)
    own = knobs_of(plan)
    ep = 1 if own.ep != 1 else 2
    assert shown_changes({"parallel.ep": ep}, plan) == {"parallel.ep": ep}
