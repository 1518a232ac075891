"""Reading round 21: Megatron-Bridge ConfigContainer YAMLs with OmegaConf interpolations.

Megatron-LM's ``ConfigContainer.from_yaml`` (``megatron/training/config/container.py``, which Bridge's container
inherits) and Bridge's override path (``training/utils/omegaconf_utils.py`` ``process_config_with_overrides``) load
the file with ``OmegaConf.create`` / ``OmegaConf.load`` and hand on ``OmegaConf.to_container(conf, resolve=True)``:
``${a.b}`` from the file's top, ``${.x}`` from the mapping holding the key, ``${..x}`` from its parent, the
referenced value's type kept where the interpolation is the whole value; a missing key raises
(``InterpolationKeyError``); ``oc.env`` reads the launching shell.  The reader refused every ``${...}`` before
("an integer").  The expected values below are the fixture's own, written out: what OmegaConf's resolution gives.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from primus_launch.adapters import load_recipe, render_recipe
from primus_launch.adapters.megatron import plan_diffs
from primus_launch.errors import UserError
from primus_launch.plan import PlanError

FIXTURE = Path(__file__).parent / "data" / "bridge" / "qwen3_moe_run_config.yaml"
REFUSED = (UserError, PlanError)  # one line either way (the CLI prints both so)
CLUSTER = {"gpu": "h100-sxm", "num_nodes": 2, "gpus_per_node": 8}


def _set(text: str, section: str, key: str, value: str) -> str:
    """``text`` with ``key`` of top-level ``section`` written as ``value`` (the fixture writes every key once)."""
    start = re.search(rf"^{section}:\n", text, re.M).end()
    end = re.search(r"^\S", text[start:], re.M)
    body = text[start:start + end.start()] if end else text[start:]
    new, n = re.subn(rf"^(  {key}:) .*$", lambda m: f"{m.group(1)} {value}", body, count=1, flags=re.M)
    assert n == 1, (section, key)
    return text[:start] + new + text[start + len(body):]


def _load(tmp_path: Path, text: str, name: str = "run_config.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_recipe(p, CLUSTER)


def test_interpolations_resolve_as_omegaconf_does(tmp_path):
    text = FIXTURE.read_text()
    base = load_recipe(FIXTURE, CLUSTER)
    t = _set(text, "dataset", "seq_length", "${model.seq_length}")  # absolute, from the file's top
    t = _set(t, "model", "expert_tensor_parallel_size", "${.context_parallel_size}")  # the same mapping: 1
    t = _set(t, "model", "virtual_pipeline_model_parallel_size", "${.pipeline_model_parallel_size}")  # 2
    t = _set(t, "ddp", "overlap_param_gather", "${.overlap_grad_reduce}")  # a boolean keeps its type: true
    t = _set(t, "checkpoint", "save", "${oc.env:CHECKPOINT_DIR,null}")  # unread (Bridge's examples write it)
    t = _set(t, "logger", "tensorboard_dir", "/results/${model.hf_model_id}/tb")  # inside a text: a string
    plan = _load(tmp_path, t)
    assert plan_diffs(base, plan) == []
    assert (plan.parallel.etp, plan.parallel.vpp, plan.training.overlap_param_gather, plan.model.seq_length) == (
        base.parallel.etp, 2, True, 4096)


def test_a_parent_reference_gives_the_referenced_value(tmp_path):
    # ${..model.pipeline_model_parallel_size} from train: (its parent is the file's top): 2, not the fixture's 1
    t = _set(FIXTURE.read_text(), "train", "micro_batch_size", "${..model.pipeline_model_parallel_size}")
    assert load_recipe(FIXTURE, CLUSTER).training.micro_batch_size == 1
    assert _load(tmp_path, t).training.micro_batch_size == 2


def test_an_environment_lookup_in_a_read_field_is_refused_in_one_line(tmp_path):
    t = _set(FIXTURE.read_text(), "train", "global_batch_size", "${oc.env:GBS,256}")
    with pytest.raises(REFUSED, match=r"train\.global_batch_size=.*environment lookup.*variable GBS"):
        _load(tmp_path, t)
    p = tmp_path / "run_config.yaml"
    r = subprocess.run([sys.executable, "-m", "primus_launch", "--project", str(p), "--dry-run"],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    # the same inside a string field the reader reads
    t = _set(FIXTURE.read_text(), "model", "recompute_granularity", "${oc.env:RG,full}")
    with pytest.raises(REFUSED, match=r"model\.recompute_granularity=.*variable RG"):
        _load(tmp_path, t)


def test_a_key_the_file_does_not_hold_is_refused(tmp_path):
    # an envsubst template (${TP}): OmegaConf raises InterpolationKeyError, wherever the key is read or not
    t = _set(FIXTURE.read_text(), "model", "tensor_model_parallel_size", "${TP}")
    with pytest.raises(REFUSED, match=r"model\.tensor_model_parallel_size.*'TP', which the file does not hold"):
        _load(tmp_path, t)
    t = _set(FIXTURE.read_text(), "logger", "tensorboard_dir", "${OUTPUT_PATH}/tb")
    with pytest.raises(REFUSED, match="OUTPUT_PATH"):
        _load(tmp_path, t)


def test_a_cycle_is_refused(tmp_path):
    t = _set(FIXTURE.read_text(), "dataset", "seq_length", "${model.seq_length}")
    t = _set(t, "model", "seq_length", "${dataset.seq_length}")
    with pytest.raises(REFUSED, match="cycle"):
        _load(tmp_path, t)


def test_tuned_value_replaces_the_interpolation(tmp_path):
    t = _set(FIXTURE.read_text(), "train", "micro_batch_size", "${..model.pipeline_model_parallel_size}")
    t = _set(t, "dataset", "seq_length", "${model.seq_length}")
    plan = _load(tmp_path, t)
    assert render_recipe(plan, t) == t  # unchanged: identical text, interpolations kept
    new = plan.model_copy(update={"training": plan.training.model_copy(update={"micro_batch_size": 4})})
    out = render_recipe(new, t)
    doc = yaml.safe_load(out)
    assert doc["train"]["micro_batch_size"] == 4 and doc["dataset"]["seq_length"] == "${model.seq_length}"
    assert plan_diffs(new, _load(tmp_path, out, "tuned.yaml")) == []


def test_expansion_is_bounded(tmp_path):
    # OmegaConf has no bound: 16 doublings of 16 characters are 1 MiB, and each of 12 fields naming it another 1 MiB
    lines = [f"  d{i}: ${{.d{i - 1}}}${{.d{i - 1}}}" for i in range(1, 17)]
    lines += [f"  k{i}: ${{.d16}}" for i in range(12)]
    t = FIXTURE.read_text() + "big:\n  d0: aaaaaaaaaaaaaaaa\n" + "\n".join(lines) + "\n"
    with pytest.raises(REFUSED, match="expand to more than"):
        _load(tmp_path, t)


# --deterministic-mode's argument rules (Megatron-LM validate_args / megatron/training/determinism.py; found by
# reader_vs_megatron.py --ref main: main's functional test gpt3_weekly_mcore_tp2_pp2_current_scaling_native_fp8_tp_pp_
# sp_tp_overlap sets --deterministic-mode with --tp-comm-overlap, which main's determinism.py refuses)
DETERMINISTIC = """ARGS:
  num_layers: 4
  hidden_size: 1024
  num_attention_heads: 16
  vocab_size: 32000
  seq_length: 2048
  max_position_embeddings: 2048
  tensor_model_parallel_size: 2
  sequence_parallel: true
  micro_batch_size: 1
  global_batch_size: 64
  bf16: true
  deterministic_mode: true
{extra}"""


def _megatron(tmp_path: Path, extra: str):
    from primus_launch.adapters.megatron import load_megatron

    p = tmp_path / "det.yaml"
    p.write_text(DETERMINISTIC.format(extra=extra))
    return load_megatron(p)


def test_deterministic_mode_refuses_fused_cross_entropy(tmp_path):
    # every release's validate_args: assert not args.cross_entropy_loss_fusion under deterministic mode
    with pytest.raises(REFUSED, match=r"--cross-entropy-loss-fusion=True: off under --deterministic-mode"):
        _megatron(tmp_path, "  cross_entropy_loss_fusion: true\n")
    assert _megatron(tmp_path, "  cross_entropy_loss_fusion: false\n").training.cross_entropy_loss_fusion is False


def test_deterministic_mode_with_tp_comm_overlap_names_the_newer_refusal(tmp_path):
    plan = _megatron(tmp_path, "  tp_comm_overlap: true\n")
    assert plan.training.tp_comm_overlap
    assert len([n for n in plan.source.notes if "determinism.py" in n and "tp_comm_overlap=False" in n]) == 1
    assert not [n for n in _megatron(tmp_path, "").source.notes if "determinism.py" in n]


def test_an_override_with_its_own_interpolation_source_is_refused_as_bridge(tmp_path):
    # the layout of Bridge's examples/diffusion/recipes/nemotron_diffusion/conf/*.yaml (values written here): a
    # top-level mapping of the file's own that its interpolations name, merged by OmegaConf over the Python recipe;
    # before: read as a Megatron-LM argument YAML ("--optimizer={...}")
    p = tmp_path / "cpt.yaml"
    p.write_text("site:\n  root: /scratch\n  run: cpt\n  out: ${site.root}/${site.run}\n"
                 "model:\n  seq_length: 4096\n  max_position_embeddings: ${model.seq_length}\n"
                 "train:\n  micro_batch_size: 1\n  global_batch_size: 64\n"
                 "optimizer:\n  lr: 1e-5\n  use_distributed_optimizer: true\n"
                 "checkpoint:\n  save: ${site.out}\n")
    with pytest.raises(UserError, match="a Megatron-Bridge config YAML .* without model.num_layers"):
        load_recipe(p, CLUSTER)
    # a top-level mapping no interpolation names keeps the file out of Bridge's format (as before)
    p.write_text(p.read_text().replace("${site.out}", "/scratch/cpt").replace("${site.root}/${site.run}", "x"))
    with pytest.raises(REFUSED) as e:
        load_recipe(p, CLUSTER)
    assert "Megatron-Bridge config YAML" not in str(e.value)
