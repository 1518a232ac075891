"""Settings real recipes set that change time or memory: priced, or reported as not modelled, never dropped.

Truths: torchtitan 0.3.0's own ``parallelize_llama`` on the meta device with a fake process group (its FSDP2 units
of a replicate-only job), the flag inventory of Megatron-LM's argparse (``megatron_flags._INVENTORY``), closed-form
byte counts of the optimizer step, Primus's merge (a ``null`` override reaches Megatron-LM as ``None``).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from primus_launch.adapters import load_recipe
from primus_launch.adapters import megatron_flags as mf
from primus_launch.adapters.megatron import plan_from_argv
from primus_launch.plan import Cluster

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

ARGV = ("pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --vocab-size 32000 --bf16 "
        "--use-distributed-optimizer").split()
CL = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=8)


def test_titan_replicate_only_grad_calls_are_its_fsdp2_units(tmp_path):
    """torchtitan 0.3.0 applies FSDP2 to a replicate-only job (HSDP with a shard group of one): one gradient
    all-reduce per FSDP2 unit (embedding, each block, lm_head with the final norm), which is what the time model
    counts (``dp_comm.titan_grad_units``), not Megatron DDP's 40M-parameter buckets."""
    from torch.distributed.fsdp import FSDPModule

    from titan_trace import TitanCase, build

    from primus_launch.projection.cost.dp_comm import titan_grad_units

    model, _ = build(TitanCase(layers=3, dp_shard=1, dp_replicate=8, seq=256))
    groups = {}
    for name, m in model.named_modules():
        g = m._get_fsdp_state()._fsdp_param_group if isinstance(m, FSDPModule) else None
        if g is not None:
            groups[id(g)] = (name, type(g.mesh_info).__name__)
    assert {kind for _, kind in groups.values()} == {"HSDPMeshInfo"}
    toml = (ROOT / "tests/data/torchtitan-v0.2.2/models_llama3__llama3_8b.toml").read_text()
    toml = toml.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 8").replace(
        "data_parallel_shard_degree = -1", "data_parallel_shard_degree = 1")
    path = tmp_path / "replicate8.toml"
    path.write_text(toml)
    plan = load_recipe(path, {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
    assert plan.parallel.dp_sharding == "none" and plan.dp == 8
    plan3 = plan.model_copy(update={"model": plan.model.model_copy(update={"num_layers": 3})})
    assert titan_grad_units(plan3, 0) == len(groups) == 5


def test_config_only_fields_on_a_command_line_are_noted():
    """``--fp8-dot-product-attention`` is a TransformerConfig field with no Megatron-LM argument (it is not in the
    argparse inventory): on a command line one note says pretrain_gpt.py would refuse it; it is still read."""
    inventory = {o for line in mf._INVENTORY.splitlines() if line for o in line.split("\t")[0].split()}
    config_only = {line.split("\t")[0] for line in mf.CONFIG_ONLY.splitlines() if line}
    assert "--fp8-dot-product-attention" in config_only and not config_only & inventory
    plan = plan_from_argv(ARGV + ["--fp8-format", "hybrid", "--fp8-dot-product-attention"], CL)
    hits = [n for n in plan.source.notes if "unrecognized arguments" in n]
    assert plan.training.fp8_attention and len(hits) == 1 and hits[0].startswith("--fp8-dot-product-attention")
    assert not any("unrecognized" in n for n in plan_from_argv(ARGV + ["--fp8-format", "hybrid"], CL).source.notes)


def test_log_params_norm_and_num_zeros_are_priced():
    """Both run every iteration (Megatron-LM training.py / megatron-core optimizer.py): the optimizer step reads
    the held main parameters (4 B) and main gradients (4 B) once more each; set from the flags, no warning."""
    from primus_launch.projection.cost.optimizer import optimizer_step_s
    from primus_launch.projection.hardware.gpus import get_gpu

    base = plan_from_argv(ARGV, CL)
    both = plan_from_argv(ARGV + ["--log-params-norm", "--log-num-zeros-in-grad"], CL)
    assert (both.training.log_params_norm, both.training.log_num_zeros_in_grad) == (True, True)
    assert not both.source.unmodelled
    spec, held = get_gpu("h100-sxm"), 1e9
    extra = optimizer_step_s(both, spec, held) - optimizer_step_s(base, spec, held)
    # 38 B: the Adam step's 34 + the master read of Megatron's separate main-to-model copy (cost/optimizer.py)
    assert extra == pytest.approx(optimizer_step_s(base, spec, held) * 8 / 38)
    one = plan_from_argv(ARGV + ["--log-params-norm"], CL)
    assert optimizer_step_s(one, spec, held) - optimizer_step_s(base, spec, held) == pytest.approx(extra / 2)


def test_primus_null_on_align_flags_reads_false(tmp_path):
    """Primus's MegatronArgBuilder passes a ``null`` override through as None ("None values are allowed and will
    override Megatron defaults"); Megatron-LM tests ``if args.align_grad_reduce:``, so null is off (with a note);
    an explicit true stays on."""
    from test_adapter_primus import _meg, _tree

    exp = _meg(_tree(tmp_path))
    text = exp.read_text()
    for value, want in (("null", False), ("true", True)):
        exp.write_text(text.replace("      overlap_param_gather: true\n",
                                    f"      overlap_param_gather: true\n      align_grad_reduce: {value}\n"))
        plan = load_recipe(exp)
        assert plan.training.align_grad_reduce is want
        assert any(re.match(r"align_grad_reduce: null", n) for n in plan.source.notes) is (not want)


def test_timing_log_level_is_reported_not_neutral():
    """Megatron's timers synchronise the device at start and stop (the installed megatron-core's ``Timer``), so a
    ``--timing-log-level`` above 0 changes the step time: reported, never filed with the neutral logging flags."""
    import inspect

    from megatron.core import timers

    src = inspect.getsource(timers.Timer.start) + inspect.getsource(timers.Timer.stop)
    assert src.count("torch.cuda.synchronize()") == 2
    assert mf.lookup("--timing-log-level").cls == mf.NOT_MODELLED
    for level, reported in (("0", False), ("2", True)):
        plan = plan_from_argv(ARGV + ["--timing-log-level", level], CL)
        assert any(u.flag == "--timing-log-level" for u in plan.source.unmodelled) is reported


def test_ddp_bucket_flags_give_megatron_cores_bucket_count():
    """``--ddp-bucket-size`` / ``--ddp-num-buckets`` (Megatron-LM training.py: ``bucket_size`` = the flag, or the
    rank's parameters // N) set the NCCL calls of the gradient reduction; the count equals the buckets the installed
    megatron-core's ``_ParamAndGradBuffer`` makes of the rank's own parameters (built on the meta device)."""
    import types

    import torch
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.distributed.param_and_grad_buffer import _ParamAndGradBuffer

    from mcore_meta import build_stage

    from primus_launch.projection.cost.dp_comm import bucket_calls

    argv = ("pretrain_gpt.py --num-layers 6 --hidden-size 256 --num-attention-heads 4 --seq-length 256 "
            "--max-position-embeddings 256 --micro-batch-size 1 --global-batch-size 8 --vocab-size 512 --bf16 "
            "--swiglu --use-distributed-optimizer --overlap-grad-reduce").split()
    one = Cluster(gpu="h100-sxm", num_nodes=1, gpus_per_node=1)
    params = [p for c in build_stage(plan_from_argv(argv, one), 0) for p in c.parameters()]
    n = sum(p.numel() for p in params)
    pg = types.SimpleNamespace(tp=ps.get_tensor_model_parallel_group(),
                               dp_cp=ps.get_data_parallel_group(with_context_parallel=True))

    def megatron_buckets(size: int) -> int:
        cfg = DistributedDataParallelConfig(use_distributed_optimizer=True, overlap_grad_reduce=True,
                                            grad_reduce_in_fp32=True, bucket_size=size)
        saved, torch.cuda.current_device = torch.cuda.current_device, lambda: "meta"
        try:
            buf = _ParamAndGradBuffer(cfg, torch.bfloat16, torch.float32, params[::-1], ps.get_data_parallel_group(),
                                      size, {p: str(i) for i, p in enumerate(params)}, 1.0, list(range(len(params))),
                                      False, pg_collection=pg)
        finally:
            torch.cuda.current_device = saved
        return len(buf.buckets)

    for extra, size in ((["--ddp-num-buckets", "3"], n // 3), (["--ddp-num-buckets", "7"], n // 7),
                        (["--ddp-bucket-size", str(n // 4 + 1000)], n // 4 + 1000)):
        plan = plan_from_argv(argv + extra, one)
        assert not plan.source.unmodelled
        assert bucket_calls(plan, n, 1, n) == megatron_buckets(size), extra
    with pytest.raises(Exception, match="--ddp-num-buckets"):
        plan_from_argv(argv + ["--ddp-num-buckets", "3", "--ddp-bucket-size", "1000"], one)


def test_primus_drops_config_only_fields(tmp_path):
    """Primus's MegatronArgBuilder passes only Megatron-LM's argparse destinations, so a TransformerConfig field with
    no argument (``fp8_dot_product_attention``) never reaches the run: not read, with a note (a Megatron YAML, which
    Megatron-LM's --yaml-cfg builds the TransformerConfig from, reads it)."""
    from test_adapter_primus import _meg, _tree

    exp = _meg(_tree(tmp_path))
    exp.write_text(exp.read_text().replace("      lr: 1.0e-5\n", "      lr: 1.0e-5\n      fp8: hybrid\n"
                                                                     "      fp8_dot_product_attention: true\n"))
    plan = load_recipe(exp)
    assert plan.training.precision == "fp8" and not plan.training.fp8_attention
    assert any(n.startswith("fp8_dot_product_attention: true not read") for n in plan.source.notes)


def test_yaml_cfg_layout_transformer_fields(tmp_path):
    """Megatron-LM's experimental --yaml-cfg layout builds the TransformerConfig from ``language_model:`` (fields of
    the installed megatron-core's TransformerConfig) and takes ``null`` as None: unfused bias-activation, the
    non-persistent LayerNorm and undeallocated pipeline outputs are reported; ``align_grad_reduce: null`` is off."""
    import dataclasses

    from megatron.core.transformer import TransformerConfig

    fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    names = ("bias_activation_fusion", "persist_layer_norm", "deallocate_pipeline_outputs")
    assert set(names) <= fields
    body = "".join(f"  {n}: False\n" for n in names)
    rec = tmp_path / "gpt_config.yaml"
    rec.write_text("language_model:\n  num_layers: 4\n  hidden_size: 512\n  num_attention_heads: 8\n" + body
                   + "model_parallel:\n  tensor_model_parallel_size: 1\nseq_length: 1024\nmax_position_embeddings: "
                     "1024\nmicro_batch_size: 1\nglobal_batch_size: 8\nvocab_size: 32000\nbf16: True\n"
                     "align_grad_reduce: null\n")
    plan = load_recipe(rec, {"gpu": "h100-sxm", "num_nodes": 1, "gpus_per_node": 8})
    reported = {u.flag: u.value for u in plan.source.unmodelled}
    assert all(reported.get("--" + n.replace("_", "-")) == "false" for n in names)
    assert plan.training.align_grad_reduce is False


def test_the_standard_hybrid_stack_spec_is_not_a_custom_spec():
    """A hybrid run must name its layer spec (Megatron-LM ``hybrid_builders.py`` raises without ``--spec``);
    ``examples/mamba/train.sh`` names megatron-core's own Transformer Engine stack
    (``hybrid_layer_specs hybrid_stack_spec``; ``mamba_layer_specs`` re-exports it), which is what the projection
    models: no 'custom layer spec' warning.  Any other spec still is one."""
    base = ARGV[1:] + "--hybrid-layer-pattern M-M* --position-embedding-type none".split()

    def flagged(spec: list[str]) -> list[str]:
        plan = plan_from_argv(["pretrain_hybrid.py", *base, "--spec", *spec], CL)
        return [u.flag for u in plan.source.unmodelled]

    assert "--spec" not in flagged(["megatron.core.models.hybrid.hybrid_layer_specs", "hybrid_stack_spec"])
    assert "--spec" not in flagged(["megatron.core.models.mamba.mamba_layer_specs", "mamba_stack_spec"])
    assert "--spec" in flagged(["my_project.specs", "local_stack_spec"])


def test_primus_mamba_spec_list_is_the_stock_stack(tmp_path):
    """AMD-AGI/Primus ``examples/megatron/configs/MI355X/mamba_370M-pretrain.yaml`` overrides ``spec: [primus.backends.
    megatron.core.models.mamba.mamba_layer_specs, mamba_stack_spec]``: Primus's copy of the stack with the same TE
    modules per layer (TELayerNormColumnParallelLinear in_proj / fc1, TERowParallelLinear out_proj / fc2): not a
    'custom layer spec'; another module still is one."""
    from test_adapter_primus import _meg, _tree

    from primus_launch.adapters.primus_yaml import load_primus_yaml

    root = _tree(tmp_path)
    (root / "primus/configs/models/megatron/mamba_370M.yaml").write_text(
        "extends:\n  - language_model.yaml\nmodel_type: mamba\nis_hybrid_model: false\nswiglu: false\n"
        "num_layers: 48\nhidden_size: 1024\nnum_attention_heads: 16\nffn_hidden_size: null\nmamba_state_dim: 16\n"
        "mamba_head_dim: 64\nmamba_num_groups: 8\nvocab_size: 50257\n")
    exp = _meg(root)
    text = exp.read_text()

    def flagged(module: str) -> list[str]:
        exp.write_text(text.replace("    overrides:\n", f"    overrides:\n      spec: ['{module}', 'mamba_stack_spec']\n"))
        plan = load_primus_yaml(exp, Cluster(gpu="mi300x", num_nodes=1, gpus_per_node=8),
                                env={"PRIMUS_MODEL": "mamba_370M", "PRIMUS_TP": "1"})
        assert plan.model.hybrid_pattern == "M" * 48
        return [u.flag for u in plan.source.unmodelled]

    assert "spec" not in " ".join(flagged("primus.backends.megatron.core.models.mamba.mamba_layer_specs"))
    assert "spec" in " ".join(flagged("my_team.specs"))
