"""``training.dtype = "bfloat16"`` (bf16 parameters, gradients and optimizer states) still reduces the gradients
in fp32 wherever FSDP2's ``MixedPrecisionPolicy(param_dtype=mixed_precision_param,
reduce_dtype=mixed_precision_reduce)`` is installed: torchtitan 0.3.0 always (``apply_fsdp_to_decoder`` runs
even with shard degree 1), v0.2 under FSDP only (a DDP-only job reduces the bf16 gradients).  Found by
comparing launch lines with torchtitan 0.3.0's own ``ConfigManager`` parse (read14); the truth for the
reduce dtype is torch's own ``FSDPParam.init_dtype_attrs``."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from primus_launch.adapters.command_recipe import plan_from_command
from primus_launch.adapters.torchtitan import plan_from_text
from primus_launch.plan import Cluster

LINE = ["torchrun", "--nnodes", "1", "--nproc-per-node", "8", "-m", "torchtitan.train", "--module", "llama3",
        "--config", "llama3_8b", "--training.dtype", "bfloat16"]


def _fsdp_reduce_dtype(param: str, orig: torch.dtype) -> torch.dtype:
    """The dtype FSDP2 reduces a parameter's gradient in (torch's own rule; None = the gradient's dtype,
    which is the param dtype, or the original dtype when param_dtype is clamped to None)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from torch.distributed.fsdp._fully_shard._fsdp_param import FSDPParam

    dt = {"bfloat16": torch.bfloat16, "float32": torch.float32}[param]
    stub = SimpleNamespace(sharded_param=torch.empty(1, dtype=orig))
    FSDPParam.init_dtype_attrs(stub, MixedPrecisionPolicy(param_dtype=dt, reduce_dtype=torch.float32))
    return stub.reduce_dtype or stub.param_dtype or orig


def test_03_bf16_dtype_reduces_in_fp32():
    for extra in ([], ["--training.mixed_precision_param", "float32"],
                  ["--parallelism.data_parallel_replicate_degree", "8"]):
        plan = plan_from_command([*LINE, *extra])
        param = "float32" if "float32" in extra else "bfloat16"
        assert _fsdp_reduce_dtype(param, torch.bfloat16) == torch.float32
        assert plan.training.grad_reduce_in_fp32 is True, extra
        assert (plan.training.main_params_dtype, plan.training.main_grads_dtype) == ("bf16", "bf16")


TOML = """
[model]
name = "llama3"
flavor = "8B"
[training]
local_batch_size = 1
seq_len = 2048
dtype = "bfloat16"
[parallelism]
data_parallel_shard_degree = {shard}
data_parallel_replicate_degree = {rep}
"""


def test_02_bf16_dtype_reduce_follows_fsdp():
    cl = Cluster(gpu="h100", num_nodes=1, gpus_per_node=8)
    fsdp = plan_from_text(TOML.format(shard=-1, rep=1), cl)
    ddp = plan_from_text(TOML.format(shard=1, rep=8), cl)
    assert (fsdp.parallel.dp_sharding, fsdp.training.grad_reduce_in_fp32) == ("full", True)
    assert (ddp.parallel.dp_sharding, ddp.training.grad_reduce_in_fp32) == ("none", False)
