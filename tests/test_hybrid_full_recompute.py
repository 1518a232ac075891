"""``--recompute-granularity full`` re-runs no layer of a hybrid (Mamba) stack (cost/recompute.py
``full_recompute_inert``).

Truth: megatron-core 0.16.1's own code.  ``ssm/mamba_block.py`` (``MambaStack``, the block every hybrid model runs)
never reads ``recompute_granularity`` and checkpoints nothing -- each layer is called directly in ``forward`` -- while
``transformer/transformer_block.py`` has ``_checkpointed_forward`` for the same setting.  So under ``full`` a hybrid
plan keeps what it keeps without recompute and re-runs no forward: its projected memory and step time must equal
the no-recompute plan's, where a GPT plan's ``full`` must still lower its memory and lengthen its step.
"""

from __future__ import annotations

import inspect

import pytest

from primus_launch.plan import ModelArch, Plan
from primus_launch.projection.cost.recompute import effective_granularity, full_recompute_inert
from primus_launch.projection.dryrun import project_dry_run
from tests.test_hybrid_mamba import NANO

HYBRID = NANO  # Nemotron 3 Nano (tests/test_hybrid_mamba.py)
GPT = ModelArch(name="gpt-8b", num_layers=32, hidden_size=4096, ffn_hidden_size=14336, num_attention_heads=32,
                num_query_groups=8, vocab_size=128256, seq_length=8192)

FULL = {"granularity": "full", "method": "uniform", "num_layers": 1}


def _plan(arch: ModelArch, recompute: dict | None = None, **par) -> Plan:
    training = dict(global_batch_size=512, micro_batch_size=1, recompute=recompute or {"granularity": "none"})
    return Plan(model=arch, parallel=par, training=training,
                cluster=dict(gpu="h100-sxm", num_nodes=4, gpus_per_node=8))


def test_megatron_core_mamba_stack_has_no_block_recompute():
    pytest.importorskip("megatron.core")
    import megatron.core.ssm.mamba_block as mamba_block
    import megatron.core.transformer.transformer_block as transformer_block

    src = inspect.getsource(mamba_block)
    assert "recompute_granularity" not in src and "checkpoint(" not in src
    assert not hasattr(mamba_block.MambaStack, "_checkpointed_forward")
    # the contrast: the transformer block does read the setting and checkpoints its layers
    assert "recompute_granularity" in inspect.getsource(transformer_block)
    assert hasattr(transformer_block.TransformerBlock, "_checkpointed_forward")


def test_full_recompute_of_a_hybrid_stack_is_priced_as_none():
    none = _plan(HYBRID, ep=8)
    full = _plan(HYBRID, FULL, ep=8)
    assert full_recompute_inert(full) and effective_granularity(full) == "none"
    assert not full_recompute_inert(none)
    a, b = project_dry_run(none), project_dry_run(full)
    assert b.memory.peak_bytes_per_gpu == a.memory.peak_bytes_per_gpu
    assert b.iteration_time_s == pytest.approx(a.iteration_time_s, rel=1e-9)
    assert any(w.flag == "training.recompute.granularity" and "0.16.1" in w.effect for w in b.warnings)


def test_full_recompute_of_a_gpt_stack_still_acts():
    none = _plan(GPT, tp=2)
    full = _plan(GPT, FULL, tp=2)
    assert not full_recompute_inert(full) and effective_granularity(full) == "full"
    a, b = project_dry_run(none), project_dry_run(full)
    assert b.memory.peak_bytes_per_gpu < a.memory.peak_bytes_per_gpu
    assert b.iteration_time_s > a.iteration_time_s
