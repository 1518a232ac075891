"""Recipes of frameworks' forks (read19): read as the fork runs them, or refused by name.

- Megatron-DeepSpeed (microsoft/Megatron-DeepSpeed, bigscience-workshop/Megatron-DeepSpeed) scripts call
  ``pretrain_gpt.py`` with ``--deepspeed --deepspeed_config ds.json``: the DeepSpeed engine (ZeRO stage, its
  pipeline engine, its MoE with ``--num-experts`` nargs '+' every ``--expert-interval`` = 2 layers).  They were
  read as Megatron-LM with the DeepSpeed flags as notes (a 1.3B model with 128 experts in every layer, EP 1,
  1996 GiB); now refused naming the flag, before any value of theirs (their ``--normalization rmsnorm``, which
  that fork's parser takes and Megatron-LM's refuses).
- MegaBlocks (databricks/megablocks ``exp/dmoe/*.sh``) runs its own Megatron-LM fork whose ``--moe-num-experts``
  selects MegaBlocks' dMoE layers: read as a dense model before, now refused naming the flag.
- LambdaLabsML/torchtitan ``configs/*.toml`` write ``mixed_precision_reduce = "bfloat16"`` (typed
  ``Literal["float32"]``; the ConfigManager keeps a TOML's value as a tyro default, tyro only warns) and fields of
  that fork (``prefetch_distance``...): refused before (a Literal choice, unknown fields); now the reduce is read
  as bf16 under FSDP (torch's own ``FSDPParam.init_dtype_attrs`` is the truth) and the fork's fields are reported.
"""

from __future__ import annotations

import dataclasses
import typing
import warnings
from types import SimpleNamespace

import pytest
import torch

from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.adapters.megatron import load_megatron, plan_from_argv
from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.errors import UserError
from primus_launch.plan import Cluster, PlanError

MODEL = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 "
         "--max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 512 --vocab-size 50257")

# the shape of microsoft/Megatron-DeepSpeed examples_deepspeed/MoE/ds_pretrain_gpt_1.3B_MoE128.sh (a few lines)
DEEPSPEED = f"""#!/bin/bash
EP_SIZE=128
megatron_options="{MODEL} --num-experts ${{EP_SIZE}} --moe-expert-parallel-size 64 --normalization rmsnorm"
deepspeed_options="--deepspeed --deepspeed_config ds_config.json --pipeline-model-parallel-size 1"
deepspeed pretrain_gpt.py ${{megatron_options}} ${{deepspeed_options}}
"""

# the shape of databricks/megablocks exp/dmoe/dmoe_125m_8gpu.sh
MEGABLOCKS = f"""#!/bin/bash
MOE_ARGUMENTS="--moe-num-experts=64 --moe-loss-weight=0.1 --moe-top-k=1"
torchrun --nproc_per_node 8 third_party/Megatron-LM/pretrain_gpt.py {MODEL} ${{MOE_ARGUMENTS}} --bf16
"""


def _script(tmp_path, text: str):
    p = tmp_path / "run.sh"
    p.write_text(text)
    return p


def test_megatron_deepspeed_run_is_refused_by_name(tmp_path):
    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, DEEPSPEED))
    assert e.value.field == "--deepspeed" and "Megatron-DeepSpeed" in str(e.value)
    # the same run as a command line
    with pytest.raises(PlanError) as e:
        plan_from_argv(["deepspeed", "pretrain_gpt.py", *MODEL.split(), "--deepspeed_config", "ds.json"])
    assert e.value.field == "--deepspeed_config" and "DeepSpeed engine" in str(e.value)


def test_megablocks_moe_is_refused_by_name_and_its_dense_runs_read(tmp_path):
    with pytest.raises(PlanError) as e:
        load_megatron(_script(tmp_path, MEGABLOCKS))
    assert e.value.field == "--moe-num-experts" and "MegaBlocks" in str(e.value)
    # megablocks' exp/gpt2 scripts run the same fork without MoE flags: plain Megatron-LM, read
    dense = load_megatron(_script(tmp_path, MEGABLOCKS.replace("${MOE_ARGUMENTS}", "")))
    assert (dense.model.num_layers, dense.model.num_experts or 0) == (24, 0)


def _fsdp_reduce_dtype(param: torch.dtype, reduce: torch.dtype) -> torch.dtype:
    """The dtype FSDP2 reduce-scatters a bf16-stored parameter's gradient in (torch's own rule: a reduce dtype
    equal to the param dtype is dropped, the gradient then reduces in its own dtype, the param dtype)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam

    stub = SimpleNamespace(sharded_param=torch.empty(1, dtype=torch.float32))
    FSDPParam.init_dtype_attrs(stub, MixedPrecisionPolicy(param_dtype=param, reduce_dtype=reduce))
    return stub.reduce_dtype or stub.param_dtype


def test_tyro_keeps_a_toml_value_outside_the_literal():
    """torchtitan's ConfigManager hands the TOML to tyro as the default: tyro warns, keeps it; on the command
    line it refuses the same value."""
    import tyro

    @dataclasses.dataclass
    class Training:
        mixed_precision_reduce: typing.Literal["float32"] = "float32"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kept = tyro.cli(Training, args=[], default=Training(mixed_precision_reduce="bfloat16"))
    assert kept.mixed_precision_reduce == "bfloat16"
    with pytest.raises(SystemExit):
        tyro.cli(Training, args=["--mixed-precision-reduce", "bfloat16"])


TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 2048
{reduce}
[parallelism]
data_parallel_shard_degree = {shard}
data_parallel_replicate_degree = {rep}
prefetch_distance = 4
prefetch_before_data = true
[optimizer]
early_step_in_backward = true
follow_fsdp_groups = true
[infra]
set_gpu_affinity = true
"""
CL = Cluster(gpu="h100", num_nodes=1, gpus_per_node=8)


def test_toml_bf16_reduce_is_read_under_fsdp_and_fork_fields_reported():
    assert _fsdp_reduce_dtype(torch.bfloat16, torch.bfloat16) == torch.bfloat16
    assert _fsdp_reduce_dtype(torch.bfloat16, torch.float32) == torch.float32
    bf16 = 'mixed_precision_reduce = "bfloat16"'
    fsdp = plan_from_text(TOML.format(reduce=bf16, shard=-1, rep=1), CL)
    assert fsdp.training.grad_reduce_in_fp32 is False
    assert any("mixed_precision_reduce=bfloat16" in n for n in fsdp.source.notes)
    assert {u.flag for u in fsdp.source.unmodelled} >= {"parallelism.prefetch_distance", "optimizer.follow_fsdp_groups",
                                                        "parallelism.prefetch_before_data", "infra.set_gpu_affinity"}
    assert plan_from_text(TOML.format(reduce="", shard=-1, rep=1), CL).training.grad_reduce_in_fp32 is True
    # v0.2 without FSDP (replicate only): DDP, no MixedPrecisionPolicy, the fp32 gradients reduce as they are
    assert plan_from_text(TOML.format(reduce=bf16, shard=1, rep=8), CL).training.grad_reduce_in_fp32 is True
    with pytest.raises(PlanError, match="mixed_precision_reduce"):   # not a key of torchtitan's TORCH_DTYPE_MAP
        plan_from_text(TOML.format(reduce='mixed_precision_reduce = "float64"', shard=-1, rep=1), CL)
    with pytest.raises(PlanError, match="did you mean parallelism.prefetch_distance"):
        plan_from_text(TOML.format(reduce="", shard=-1, rep=1).replace("prefetch_distance", "prefetch_distanse"), CL)


def test_command_line_bf16_reduce_is_refused_as_tyro_does(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(TOML.format(reduce="", shard=-1, rep=1))
    line = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", "--job.config_file", str(job)]
    assert plan_from_command(line).training.grad_reduce_in_fp32 is True
    with pytest.raises(UserError, match="on a command line"):
        plan_from_command([*line, "--training.mixed_precision_reduce", "bfloat16"])
