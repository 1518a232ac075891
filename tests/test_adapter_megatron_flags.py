"""The Megatron-LM flag table (primus_launch/adapters/megatron_flags.py): complete, consistent with the
reader, checked against megatron-core's own TransformerConfig, and in sync with docs/megatron-flags.md."""

from __future__ import annotations

import pytest

import dataclasses
import importlib.util
from pathlib import Path

from primus_launch.adapters import megatron_flags as mf
from primus_launch.adapters.megatron_args import BY_DEST, BY_FLAG

ROOT = Path(__file__).resolve().parents[1]

# the flags issue 11 names: each is read into the plan (modelled)
ISSUE_FLAGS = """--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split
--pipeline-model-parallel-layout --num-virtual-stages-per-pipeline-rank --mtp-num-layers --recompute-modules
--recompute-num-layers --fp8-recipe --fp8-param-gather --fp4-format --fp4-recipe --enable-cuda-graph --cuda-graph-impl
--cuda-graph-scope --cuda-graph-modules --external-cuda-graph --cpu-offloading-num-layers --fine-grained-activation-offloading
--offload-modules --optimizer-cpu-offload --optimizer-offload-fraction --use-precision-aware-optimizer --main-grads-dtype
--main-params-dtype --exp-avg-dtype --exp-avg-sq-dtype --window-size --window-attn-skip-freq --softmax-type --quick-geglu
--squared-relu --position-embedding-type --overlap-moe-expert-parallel-comm --delay-wgrad-compute
--moe-shared-expert-overlap --moe-flex-dispatcher-backend --moe-enable-deepep --moe-token-dispatcher-type
--moe-router-force-load-balancing --moe-layer-freq --moe-grouped-gemm --moe-permute-fusion --attention-backend
--attention-dropout --hidden-dropout --cp-comm-type --use-megatron-fsdp --data-parallel-sharding-strategy
--cross-entropy-loss-fusion --step-batch-size-schedule --rampup-batch-size --kv-channels --group-query-attention""".split()


def test_doc_is_generated_from_the_table():
    spec = importlib.util.spec_from_file_location("megatron_flags_doc", ROOT / "scripts" / "megatron_flags_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "docs" / "megatron-flags.md").read_text() == mod.render(), \
        "docs/megatron-flags.md is stale: run python scripts/megatron_flags_doc.py"


def test_every_flag_is_classified_and_the_issue_flags_are_modelled():
    flags = mf.all_flags()
    assert len(flags) > 800  # core_r0.16.0 + main: 860 argparse options
    assert all(f.cls in (mf.MODELLED, mf.NEUTRAL, mf.NOT_MODELLED, mf.REFUSED) and f.note for f in flags)
    assert not [f.flag for f in flags if f.note == mf._DEFAULT_EFFECT]
    for flag in ISSUE_FLAGS:
        f = mf.by_option()[flag]
        assert f.cls == mf.MODELLED, flag


def test_table_and_reader_agree():
    """A modelled flag is one the reader turns into a plan field, and every flag the reader reads is
    modelled (the writer's flags are Megatron's real spellings and destinations)."""
    for f in mf.all_flags():
        if f.cls == mf.MODELLED:
            assert f.dest in BY_DEST, f.flag
    writer_only = {"--ckpt-format"}  # written with Megatron-FSDP, not read
    for spec in BY_FLAG.values():
        f = mf.by_option().get(spec.flag)
        if f is None:  # the experimental --yaml-cfg name (virtual_pipeline_model_parallel_size)
            continue
        assert f.dest == spec.dest, spec.flag
        assert f.cls == (mf.NEUTRAL if spec.flag in writer_only else mf.MODELLED), spec.flag
        if spec.kind == "list":
            assert f.nargs in ("+", "*") or f.nargs.isdigit() and int(f.nargs) > 1, spec.flag
        else:
            assert f.kind == spec.kind, (spec.flag, f.kind, spec.kind)


def test_inventory_matches_megatron_core_transformer_config():
    """The dataclass-generated group: every dest of the 0.16 'transformer configuration' group is a field
    of the installed megatron-core 0.16.1 TransformerConfig (independent of the mirror it came from)."""
    from megatron.core.transformer import TransformerConfig

    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    dests = {f.dest for f in mf.all_flags() if f.group == "transformer configuration" and f.versions in ("both", "0.16")}
    assert len(dests) > 150
    missing = sorted(d for d in dests - fields if d not in ("fp8", "fp4"))  # --fp8-format/--fp4-format dests
    # two inference-only fields the core_r0.16.0 branch head has beyond the 0.16.1 release
    assert set(missing) <= {"moe_pad_experts_for_cuda_graph_inference", "nccl_all_reduce_for_prefill"}, missing


def test_lookup_spellings_and_defaults():
    assert mf.lookup("--disable-bias-linear").dest == "add_bias_linear"
    assert mf.lookup("disable_bias_linear").flag == "--disable-bias-linear"  # NVIDIA ARGS: flag name
    assert mf.lookup("add_bias_linear").flag == "--disable-bias-linear"  # a dest (flat / Primus YAML)
    assert mf.lookup("--no-such-flag") is None
    f = mf.lookup("--moe-router-load-balancing-type")
    assert mf.is_default(f, ["aux_loss"]) and mf.is_default(f, "aux_loss") and not mf.is_default(f, "seq_aux_loss")
    assert mf.is_default(mf.lookup("--attention-dropout"), "0.1") and not mf.is_default(mf.lookup("--manual-gc"), True)


@pytest.mark.parametrize("pattern", ["([0]*[1, 2]+[1]*58)", "[[1]]*2", "[1]+2", "[0]*1000000", "([1]*1000)*(1000)"])
def test_moe_layer_freq_expression_of_the_wrong_kind_is_one_line(pattern):
    """A list expression that multiplies two lists, nests them, adds a number to a list or builds more
    layers than any model has is refused naming the flag (was: a TypeError, exit 70, or a list of a
    million layers built in memory); found by tests/test_bad_input_property.py's mutations."""
    from primus_launch.adapters.megatron_args import _eval_list_pattern
    from primus_launch.plan import PlanError

    with pytest.raises(PlanError, match="--moe-layer-freq"):
        _eval_list_pattern(pattern)
    assert _eval_list_pattern("([0]*3+[1]*58)") == [0] * 3 + [1] * 58


def test_huge_num_layers_is_refused_before_any_per_layer_pattern():
    """``--num-layers 1000000000`` with ``--moe-layer-freq 1`` is refused at the plan's bound, naming the flag,
    before the reader builds a per-layer pattern from it (was: a billion-entry list, 53-150 s before the
    layout error; found by ``scripts/bad_input_campaign.py --quick --seed 7``, ``nested-yaml:num@770``)."""
    from primus_launch.adapters.megatron_args import plan_from_args
    from primus_launch.plan import Cluster, PlanError
    from primus_launch.plan.sections import LIMITS

    a = {"num_layers": 10**9, "hidden_size": 1024, "num_attention_heads": 16, "seq_length": 2048,
         "max_position_embeddings": 2048, "num_experts": 8, "moe_layer_freq": 1}
    with pytest.raises(PlanError, match="--num-layers.*at most 10,000"):
        plan_from_args(a, Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8))
    assert LIMITS["model.num_layers"] == 10_000


def test_fp8_attention_config_fields(tmp_path):
    """``fp8_dot_product_attention`` / ``fp8_multi_head_attention``: TransformerConfig fields of the installed
    megatron-core (no Megatron-LM argument), set by YAML configs and by Megatron-Bridge 26.06 / 26.08's full-iteration
    MXFP8 perf recipes.  The first is read (``training.fp8_attention``, priced by ``cost/fp8_attention.py``): no
    unmodelled note; the second stays a not-modelled note (time and memory); left at its default neither adds anything."""
    from megatron.core.transformer import TransformerConfig

    from primus_launch.adapters import load_recipe

    defaults = {f.name: f.default for f in dataclasses.fields(TransformerConfig)}
    for flag, cls in (("--fp8-dot-product-attention", mf.MODELLED), ("--fp8-multi-head-attention", mf.NOT_MODELLED)):
        f = mf.lookup(flag)
        assert f.versions == "config" and f.cls == cls
        assert f.dest in defaults and f.default is defaults[f.dest] is False
    assert mf.lookup("--fp8-multi-head-attention").note.startswith("time and memory")
    base = (ROOT / "recipes/megatron/deepseek_v3_h100_1024gpu_fp8.yaml").read_text()
    assert "fp8_dot_product_attention" not in base and "fp8_multi_head_attention" not in base
    on, off = tmp_path / "on.yaml", tmp_path / "off.yaml"
    on.write_text(base + "\nfp8_dot_product_attention: true\nfp8_multi_head_attention: true\n")
    off.write_text(base + "\nfp8_dot_product_attention: false\n")
    p_on, p_off = load_recipe(on), load_recipe(off)
    assert p_on.training.fp8_attention and not p_off.training.fp8_attention
    assert [u.flag for u in p_on.source.unmodelled if "fp8-" in u.flag and "attention" in u.flag] == [
        "--fp8-multi-head-attention"]
    assert not any("dot-product" in u.flag for u in p_off.source.unmodelled)
    assert not any("dot-product" in n for n in p_on.source.notes + p_off.source.notes)
