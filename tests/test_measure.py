"""Tests of the framework CPU shims and the measure-and-upscale projection (issue 5)."""

from __future__ import annotations

import os
import socket

import pytest
import torch


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mcore_world1():
    """A world-size-1 gloo group with megatron-core model parallel state (tp=pp=1)."""
    from primus_launch.frameworks import mcore_cpu

    mcore_cpu.install()
    mcore_cpu.init_single_process(_free_port())
    from megatron.core import parallel_state as ps

    if not ps.model_parallel_is_initialized():
        ps.initialize_model_parallel(1, 1)
    mcore_cpu.seed_rng_tracker(1234)
    return mcore_cpu


def test_cpu_rng_tracker_fork_is_reproducible(mcore_world1):
    from megatron.core.tensor_parallel import get_cuda_rng_tracker

    tr = get_cuda_rng_tracker()
    before = torch.get_rng_state()
    with tr.fork():
        a = torch.rand(4)
    assert torch.equal(torch.get_rng_state(), before)  # outer state restored
    mcore_world1.seed_rng_tracker(1234)
    with get_cuda_rng_tracker().fork():
        b = torch.rand(4)
    assert torch.equal(a, b)  # same seed -> same stream


def test_mcore_gpt_moe_trains_on_cpu(mcore_world1):
    """A real megatron-core GPTModel with a MoE layer runs fwd+bwd on CPU: initial loss near
    ln(vocab), gradient reaches the router (te_general_gemm shim), and the shimmed causal mask
    is causal (earlier logits independent of a later token)."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    cfg = TransformerConfig(num_layers=1, hidden_size=64, ffn_hidden_size=128, num_attention_heads=4,
                            hidden_dropout=0.0, attention_dropout=0.0, num_moe_experts=4, moe_router_topk=2,
                            normalization="RMSNorm", gated_linear_unit=True, add_bias_linear=False,
                            **mcore_world1.config_overrides())
    m = GPTModel(cfg, get_gpt_layer_local_spec(num_experts=4), vocab_size=128, max_sequence_length=32)
    ids = torch.randint(0, 128, (2, 32))
    pos = torch.arange(32).unsqueeze(0).expand(2, -1)
    loss = m(ids, pos, None, labels=ids).float().mean()
    loss.backward()
    assert torch.isfinite(loss) and abs(loss.item() - torch.log(torch.tensor(128.0)).item()) < 1.0
    router = m.decoder.layers[0].mlp.router.weight
    assert router.grad is not None and router.grad.abs().sum() > 0
    # causality: changing the last token must not change the logits of earlier positions
    with torch.no_grad():
        a = m(ids, pos, None)
        ids2 = ids.clone()
        ids2[:, -1] = (ids2[:, -1] + 1) % 128
        b = m(ids2, pos, None)
    assert torch.allclose(a[:, :-1], b[:, :-1], atol=1e-5)
    assert not torch.allclose(a[:, -1], b[:, -1])
