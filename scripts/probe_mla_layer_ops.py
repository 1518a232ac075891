"""Count the host-launched ATen ops of megatron-core 0.16.1's MLA ``TransformerLayer`` (CPU, fake process group).

Builds megatron's own ``TransformerLayer`` from ``get_gpt_layer_local_spec(multi_latent_attention=True)`` (dense
MLP, RMSNorm, q without LoRA as Moonlight's, tiny shapes) and runs one forward and one backward under a
``TorchDispatchMode`` that records every non-view ATen op that is not an allocation (on the GPU each is one kernel
the host launches).  The core attention is stood in by one opaque op recording nothing (the local spec's
``DotProductAttention`` takes no ``k_channels``; TE's fused attention is one kernel per pass).  The local spec runs
the ATen composite RMSNorm and unfused RoPE where a TE run fuses them: the counts are the MLA glue (splits, cats,
copies) plus those.  Prints JSON: forward / backward op counts and the forward's ops by name.

    python scripts/probe_mla_layer_ops.py
"""

from __future__ import annotations

import collections
import json
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes  # noqa: E402

_NO_KERNEL = {torch.ops.aten.empty.memory_format, torch.ops.aten.new_empty.default, torch.ops.aten.empty_like.default,
              torch.ops.aten.empty_strided.default, torch.ops.aten._local_scalar_dense.default}


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and func not in _NO_KERNEL:
            self.ops.append(str(func))
        return out


class _Attention(torch.autograd.Function):
    """Causal attention computed with the recorder off: the fused kernel's stand-in (records nothing)."""

    @staticmethod
    def forward(ctx, q, k, v):
        with _disable_current_modes(), torch.enable_grad():
            leaves = [t.detach().requires_grad_(True) for t in (q, k, v)]
            o = torch.nn.functional.scaled_dot_product_attention(*(t.permute(1, 2, 0, 3) for t in leaves),
                                                                 is_causal=True)
            o = o.permute(2, 0, 1, 3).reshape(q.shape[0], q.shape[1], -1)
        ctx.saved = (leaves, o)
        with _disable_current_modes():
            return o.detach().clone()

    @staticmethod
    def backward(ctx, g):
        leaves, o = ctx.saved
        with _disable_current_modes(), torch.enable_grad():
            torch.autograd.backward([o], [g])
        return tuple(t.grad for t in leaves)


class _CoreAttention(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, q, k, v, attention_mask=None, attn_mask_type=None, **kwargs):
        return _Attention.apply(q, k, v)


def trace() -> dict:
    """Forward / backward ATen ops of one MLA layer (module doc)."""
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import MLATransformerConfig
    from megatron.core.transformer.transformer_layer import TransformerLayer

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1, create_gloo_process_groups=False)
    mcore_cpu.seed_rng_tracker(1234)
    conf = MLATransformerConfig(
        num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4, q_lora_rank=None, kv_lora_rank=32,
        qk_head_dim=16, qk_pos_emb_head_dim=8, v_head_dim=16, normalization="RMSNorm", params_dtype=torch.bfloat16,
        bf16=True, add_bias_linear=False, hidden_dropout=0.0, attention_dropout=0.0, rope_type="rope",
        **{**mcore_cpu.config_overrides(), "apply_rope_fusion": False})
    spec = get_gpt_layer_local_spec(multi_latent_attention=True, normalization="RMSNorm")
    spec.submodules.self_attention.submodules.core_attention = _CoreAttention
    layer = TransformerLayer(conf, spec.submodules, layer_number=1).to(torch.bfloat16)
    x = torch.randn(32, 1, 64, dtype=torch.bfloat16, requires_grad=True)
    for _ in range(2):   # the second pass: caches (RoPE frequencies) as in a steady step
        mode = _Ops()
        with mode:
            out = layer(x, attention_mask=None)
            out = out[0] if isinstance(out, tuple) else out
        fwd = list(mode.ops)
        mode.ops.clear()
        with mode:
            out.backward(torch.ones_like(out))
        bwd = list(mode.ops)
    return {"fwd": len(fwd), "bwd": len(bwd), "fwd_ops": collections.Counter(fwd).most_common()}


if __name__ == "__main__":
    if sys.argv[1:2] in (["-h"], ["--help"]):
        print(__doc__)
        sys.exit(0)
    print(json.dumps(trace()))
