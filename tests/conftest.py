"""Fixtures shared by the test modules."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_fake_world():
    """The memory tests' trace helpers (``mcore_meta``, ``titan_trace``) leave a fake multi-rank
    default group behind and rebuild theirs when they need it; the measured path's pieces need world
    size 1 (``build_mcore.world_size_one`` refuses a multi-process job): a test that builds pieces
    starts without that group."""
    import torch.distributed as dist
    from megatron.core import parallel_state as ps

    if dist.is_initialized() and dist.get_world_size() != 1:
        ps.destroy_model_parallel()
        dist.destroy_process_group()
    yield


@pytest.fixture(autouse=True, scope="module")
def _no_fake_world_after_the_module():
    """A test file that leaves the trace helpers' fake multi-rank default group behind (``no_fake_world``) tears
    it down when its last test ends, so the next file on the same pytest-xdist worker -- whichever it is -- starts
    without it (a measured-path test failed only when test_hybrid_mamba.py had run first on its worker)."""
    yield
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized() or dist.get_world_size() == 1:
        return
    ps = sys.modules.get("megatron.core.parallel_state")
    if ps is not None:
        ps.destroy_model_parallel()
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _torchtitan_attention_restored():
    """``titan_trace.use_flash_op`` points torchtitan's attention module at the GPU flash-attention op for
    the traces that build a case (it stays on while the case's model runs); after each test the module's
    own ``torch.nn.functional`` comes back, so a test that runs real CPU attention later in the same process
    (as under pytest-xdist, whatever file ran before it) never meets the GPU op."""
    yield
    import sys

    attn = sys.modules.get("torchtitan.models.common.attention")
    if attn is not None:
        import torch

        attn.F = torch.nn.functional


def pytest_configure(config) -> None:
    """The CPU validation harness (``scripts/validation/gloo_lab``) importable as ``gloo_lab``: the
    gloo truth of the collectives and MoE tests and the machine spec of ``test_gloo_lab``."""
    import sys
    from pathlib import Path

    harness = str(Path(__file__).resolve().parents[1] / "scripts" / "validation")
    if harness not in sys.path:
        sys.path.insert(0, harness)
