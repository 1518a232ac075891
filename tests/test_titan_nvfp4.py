"""TorchTitan NVFP4 linears under per-op SAC (memory.titan.layer_activation_bytes ``mm_saved=False``).

Facts read from the installed frameworks (torchtitan 0.3.0, torch 2.13, torchao 0.18) and one published
measurement (torchtitan bcc09297a ``components/quantization/nvfp4.md``: Llama 3 8B, 4 x GB200, FSDP 4, local
batch 32 x 2048, model compiled, SelectiveAC: 110.95 GiB reserved with layers 0-26 NVFP4, 174.49 GiB in BF16).
"""

from __future__ import annotations

import inspect

import pytest

from primus_launch.adapters.torchtitan_argv import plan_from_launch
from primus_launch.plan import Cluster

GiB = 2**30
_LAUNCH = ["torchrun", "--standalone", "--nproc_per_node", "4", "-m", "torchtitan.train", "--module", "llama3",
           "--parallelism.tensor_parallel_degree", "1", "--parallelism.data_parallel_shard_degree", "4",
           "--training.local_batch_size", "32", "--training.seq_len", "2048"]
_GB200 = Cluster(gpu="gb200", num_nodes=1, gpus_per_node=4)


def test_selective_ac_save_list_has_no_nvfp4_matmul():
    """torchtitan 0.3.0 ``SelectiveAC`` saves the outputs of ops in ``_get_default_save_ops`` (``aten.mm`` every
    second one); torchao's ``nvfp4_mm_triton`` multiplies with ``F.scaled_mm`` = ``aten._scaled_mm_v2``, which is
    not on the list, so the policy recomputes it (and the Triton quantizations before it)."""
    torch = pytest.importorskip("torch")
    ac = pytest.importorskip("torchtitan.distributed.activation_checkpoint")
    nv = pytest.importorskip("torchao.prototype.moe_training.nvfp4_training.nvfp4_linear")
    ops = ac._get_default_save_ops()
    assert torch.ops.aten.mm.default in ops and torch.ops.aten._scaled_mm.default in ops
    assert torch.ops.aten._scaled_mm_v2.default not in ops
    fwd = inspect.getsource(nv.nvfp4_mm_triton.forward)
    assert "torch.nn.functional.scaled_mm(" in fwd and "ctx.save_for_backward(" in fwd
    assert "torch._scaled_mm_v2(" in inspect.getsource(torch.nn.functional.scaled_mm)


def test_nvfp4_layers_keep_no_linear_output_under_op_sac():
    """The converter's fqns 'layers.0.' .. 'layers.26.' read as the layer pattern; an NVFP4 block keeps its input,
    the attention output and log-sum-exp only (compiled, per-op SAC); the published NVFP4 peak is projected within
    10 % (the model had it +59 %: counted as BF16), the BF16 run unchanged."""
    from primus_launch.projection.memory.estimate import estimate_memory
    from primus_launch.projection.memory.titan import layer_activation_bytes

    fp4 = plan_from_launch(_LAUNCH + ["--config", "llama3_8b_first_85_pct_layers_nvfp4"], _GB200)
    bf16 = plan_from_launch(_LAUNCH + ["--config", "llama3_8b", "--compile.enable", "--compile.components", "model"],
                            _GB200)
    assert fp4.training.fp4_layer_pattern == (1,) * 27 + (0,) * 5
    m = fp4.model
    lay = layer_activation_bytes(m, seq=2048, mbs=32, tp=1, ac="op", compiled=True, mm_saved=False)
    sb, h = 2048 * 32, m.hidden_size
    o_lse = 2 * sb * m.num_attention_heads * m.kv_channels + 2 * 4.0 * 32 * m.num_attention_heads * 2048
    assert lay.kept == pytest.approx(2 * sb * h + o_lse)
    got = estimate_memory(fp4).reserved_peak_bytes / GiB
    assert got == pytest.approx(110.95, rel=0.10)
    assert estimate_memory(bf16).reserved_peak_bytes / GiB == pytest.approx(174.49, rel=0.03)
